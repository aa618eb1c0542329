"""MuEP evaluation: agents play the test episodes' TextWorld games and are scored with SR, IS, GCS, LC, RDI (+ PR).

* :mod:`~tasks.muep.eval.records` -- typed records: an episode to play, one step, one played episode;
* :mod:`~tasks.muep.eval.goals` -- the paper's sub-goals and ALFWorld's goal conditions, from the game state;
* :mod:`~tasks.muep.eval.env` -- one game on the worker's engine (text observation, optional rendered image);
* :mod:`~tasks.muep.eval.agents` -- the ``AGENTS`` registry: ``oracle``, ``random``, ``openai``, ``hf``, ``hf-vision``;
* :mod:`~tasks.muep.eval.harness` -- plays one batch of episodes with every agent (in a worker process), the stop
  rules, where the time goes;
* :mod:`~tasks.muep.eval.metrics` -- per-episode metrics, the RDI rule, aggregation;
* :mod:`~tasks.muep.eval.episodes` -- which episodes (the demonstrations' and ALFWorld's), in which batches, and
  the dataset versions;
* :mod:`~tasks.muep.eval.store` -- the work directory that makes a killed evaluation resume;
* :mod:`~tasks.muep.eval.runs` -- MLflow runs (batched logging, no duplicates) and reading them back;
* :mod:`~tasks.muep.eval.leaderboard` -- the paper-style tables and charts from MLflow.

Importing this package is cheap (no torch, no MLflow): ``tasks.params`` validates agent names against the registry.
See docs/muep-eval.md.
"""
