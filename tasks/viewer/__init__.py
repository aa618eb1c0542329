"""The episode viewer: static HTML pages (no server) that show one evaluation episode step by step, and an index per
agent and split with filters. ``reports/viewer/`` opens from the file system; each MLflow evaluation run carries its
episodes as one self-contained file, ``viewer/episodes.html``, that opens in MLflow's artifact view.

* :mod:`tasks.viewer.pages` -- the page skeleton (CSS and JS from ``assets/`` inlined, so a page stands alone),
  content-addressed images shared by every page;
* :mod:`tasks.viewer.book` -- the one-file book of a run's episodes for MLflow (why: MLflow previews HTML in a
  sandboxed ``blob:`` iframe where relative links and images resolve to nothing), images inlined within a budget;
* :mod:`tasks.viewer.muep` -- MuEP episodes: the agent's trajectory (``data/muep/eval/<agent>/<split>.jsonl``)
  with the rendered image, the admissible commands and the goal progress after every step;
* :mod:`tasks.viewer.roboscript` -- RoboScript episodes: the code with the line of each tool call, the calls and
  their results, the items checked at the end, the world before and after.
"""
