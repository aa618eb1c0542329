"""MuEP evaluation: agents play the test episodes' TextWorld games and are scored with SR, IS, GCS, LC, RDI (+ PR).

* :mod:`~tasks.muep.eval.records` -- typed records: an episode to play, one step, one played episode;
* :mod:`~tasks.muep.eval.goals` -- goal conditions counted from the game state, the way ALFWorld counts them;
* :mod:`~tasks.muep.eval.env` -- one game (text observation, optional rendered image, caps);
* :mod:`~tasks.muep.eval.agents` -- the ``AGENTS`` registry: ``oracle``, ``random``, ``openai``, ``hf``, ``hf-vision``;
* :mod:`~tasks.muep.eval.harness` -- plays one batch of episodes with one agent (in a worker process);
* :mod:`~tasks.muep.eval.metrics` -- per-episode metrics, the documented RDI rule, aggregation;
* :mod:`~tasks.muep.eval.episodes` -- which episodes, in which batches, and the dataset version;
* :mod:`~tasks.muep.eval.tracking` -- MLflow runs (batched logging) and reading them back;
* :mod:`~tasks.muep.eval.leaderboard` -- the paper-style tables and charts from MLflow.

Importing this package is cheap (no torch, no MLflow): ``tasks.params`` validates agent names against the registry.
See docs/muep-eval.md.
"""
