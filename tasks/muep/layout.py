"""Where the MuEP stages read and write: one place, so flows, tasks, tests and ``dvc.yaml`` agree.

Everything hangs off ``tasks.paths`` (so ``EMBP_ROOT`` moves it all to a temporary copy of the repository).
"""

from __future__ import annotations

from tasks import paths

DATA = paths.DATA / "muep"
METADATA = DATA / "metadata"
"""``scenes.parquet``, ``object_types.parquet``, ``receptacles.parquet``, ``instances.parquet`` (stage 1)."""
SCENES = METADATA / "scenes.parquet"
OBJECT_TYPES = METADATA / "object_types.parquet"
GENERATE = DATA / "generate"
"""``tasks.parquet``, ``parse_rejects.parquet`` (stage 2)."""
TASKS = GENERATE / "tasks.parquet"
PARSE_REJECTS = GENERATE / "parse_rejects.parquet"
FILTER = DATA / "filter"
"""``accepted.parquet``, ``rejected.parquet`` (stage 3)."""
ACCEPTED = FILTER / "accepted.parquet"
REJECTED = FILTER / "rejected.parquet"
DEMOS = DATA / "demos"
"""Webdataset shards, ``episodes.parquet``, ``splits.json`` (stage 4)."""
EPISODES = DEMOS / "episodes.parquet"
ALFWORLD = DATA / "alfworld"
"""ALFWorld's evaluation games as splits ``alfworld_seen`` / ``alfworld_unseen`` (stage ``muep-alfworld``): scene
tables of their initial states in ``metadata/`` (the tables and columns of :data:`METADATA`), ``episodes.parquet``
(the columns of :data:`EPISODES`), and ``train_games.parquet`` (ALFWorld's training games as in-context examples)."""
ALFWORLD_METADATA = ALFWORLD / "metadata"
ALFWORLD_SCENES = ALFWORLD_METADATA / "scenes.parquet"
ALFWORLD_EPISODES = ALFWORLD / "episodes.parquet"
ALFWORLD_TRAIN_GAMES = ALFWORLD / "train_games.parquet"
SFT = DATA / "sft"
"""``train.jsonl``, ``seen_test.jsonl``, ``unseen_test.jsonl``."""
EVAL = DATA / "eval"
"""``<agent>/<split>.jsonl``: every evaluated episode with its trajectory and metrics."""
EVAL_WORK = paths.DATA / "cache" / "muep-eval"
"""The evaluation's finished batches and timings (a DVC ``persist`` output: a killed run resumes from them)."""
REPORTS = paths.REPORTS / "muep"
TRAIN_REPORTS = REPORTS / "train"
LEADERBOARD_MD = paths.REPORTS / "leaderboard.md"
LEADERBOARD_HTML = paths.REPORTS / "leaderboard.html"
VIEWER = paths.REPORTS / "viewer" / "muep"          # episode pages per agent and split (tasks/viewer)

#: LLM response cache of task generation. A DVC ``persist`` output: it survives reruns of the generation stage.
LLM_CACHE = paths.DATA / "cache" / "llm"

#: The real-model steps (docs/real-model.md): a real LLM generates tasks on a slice (``generate/``: tasks, parse
#: rejects, accepted and rejected by the filter) and plays a slice of test episodes (``eval/<row>/<split>.jsonl``).
REAL = DATA / "real"
REAL_GENERATE = REAL / "generate"
REAL_EVAL = REAL / "eval"
REAL_REPORTS = REPORTS / "real"
"""``generate.json`` (what the model's answers became, rejects by reason), ``eval.json`` (zero-shot vs fine-tuned)."""
REAL_LLM_CACHE = paths.DATA / "cache" / "llm-real-muep"
