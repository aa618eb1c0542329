"""The episode viewer: static HTML pages (no server; they open from the file system and from MLflow's artifact view)
that show one evaluation episode step by step, and an index per agent and split with filters.

* :mod:`tasks.viewer.pages` -- the page skeleton (CSS and JS from ``assets/`` inlined, so a page stands alone),
  content-addressed images shared by every page;
* :mod:`tasks.viewer.muep` -- MuEP episodes: the agent's trajectory (``data/muep/eval/<agent>/<split>.jsonl``)
  replayed in its game for the rendered image, the admissible commands and the goal progress after every step;
* :mod:`tasks.viewer.roboscript` -- RoboScript episodes: the code with the line of each tool call, the calls and
  their results, the items checked at the end, the world before and after.
"""
