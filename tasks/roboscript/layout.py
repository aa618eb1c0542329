"""Where the RoboScript stages read and write: one place, so flows, tests and ``dvc.yaml`` agree.

Everything hangs off ``tasks.paths`` (so ``EMBP_ROOT`` moves it all to a temporary copy of the repository).
"""

from __future__ import annotations

from tasks import paths

DATA = paths.DATA / "roboscript"
WORLDS = DATA / "worlds"
"""``world_NNNN.json`` (world definitions), ``pictures/world_NNNN.png``, ``worlds.parquet``,
``placement_failures.parquet``, ``catalog_rejects.parquet``."""
PICTURES = WORLDS / "pictures"
BENCHMARK = DATA / "benchmark"
"""``<task id>.json`` and ``pictures/<task id>.png`` for the eight tasks of Table I, ``tasks.parquet``."""
QUERIES = DATA / "queries"
CODEGEN = DATA / "codegen"
REPORTS = paths.REPORTS / "roboscript"
VIEWER = paths.REPORTS / "viewer" / "roboscript"   # episode pages of the roboscript-eval run (tasks/viewer)
TABLE2_RUNS = "table2_runs"
"""Folder under REPORTS keeping one record per (code writer, repeats, perception, arm) evaluation, so table2.md
shows the default run and the paper profile's run side by side (a DVC ``persist`` output)."""

#: LLM response caches of the two prompting stages (DVC ``persist`` outputs, not versioned).
QUERIES_CACHE = paths.DATA / "cache" / "llm-roboscript-queries"
CODEGEN_CACHE = paths.DATA / "cache" / "llm-roboscript-codegen"
#: ... and of the code the robot evaluation generates for the benchmark tasks.
EVAL_CACHE = paths.DATA / "cache" / "llm-roboscript-eval"
#: The real-model step (docs/real-model.md): task queries, their code and the Table I code written by a real LLM.
REAL = DATA / "real"
"""``queries.parquet``, ``query_rejects.parquet``, ``snippets.parquet``, ``helpers.parquet``."""
REAL_REPORTS = REPORTS / "real"
"""``generate.json`` (queries kept / rejected, code checks), ``eval.json`` + ``eval_details.json`` (Table I on the
runners), ``table2.md``."""
REAL_CACHE = paths.DATA / "cache" / "llm-real-roboscript"
#: The model ladder on Table I (docs/ladder.md): ``roboscript.json`` (a block per model: the four metrics per task,
#: 95 % intervals, the code check's refusals, provenance), ``roboscript_details.json``, ``table2.md``.
LADDER_REPORTS = paths.REPORTS / "ladder"
LADDER_CACHE = paths.DATA / "cache" / "llm-ladder-roboscript"
"""One response cache per model (``<model>/``): a rerun asks nothing and starts no server."""
#: Finished goals of the robot flows, ``<stage>/<goal>.json`` (DVC ``persist`` outputs): a killed run resumes.
GOAL_RESULTS = paths.DATA / "cache" / "roboscript-goals"
#: The perception ablation's tiny random OWL-ViT checkpoint (tasks/roboscript/eval/tiny_detector.py), built on demand.
TINY_DETECTOR = paths.DATA / "cache" / "tiny-owlvit"
