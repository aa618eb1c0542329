"""The evaluation's work directory (``data/cache/muep-eval``, a DVC ``persist`` output): finished batches survive an
interrupted run, as the demonstrations' do.

* ``parts/<agent>/<batch>.jsonl`` -- one agent's results of one batch, one JSON line per episode, written atomically
  when the agent has played the whole batch: the part is the commit mark. A rerun plays only the (batch, agent)
  pairs without a part, so a killed evaluation (even ``kill -9``) resumes where it stopped and never reads half a
  batch.
* no timings: the directory is a DVC output, so the same inputs must give the same bytes. Where an agent-episode's
  time went and the workers' memory are run facts of the run that played it (``reports/timings/muep-eval.json``)
  and MLflow metrics of its runs, never in the parts, the results (``data/muep/eval``) or the reports.
* ``manifest.json`` -- the fingerprints the parts were made under: the *common* one (the code the stage runs, the
  episodes and their data, the batching, the rules every agent plays by) and one per agent (the agent's name and
  every parameter an agent can read). A changed common fingerprint discards every part; a changed agent
  fingerprint only that agent's, so adding an agent to the list does not replay the others.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from core.errors import DataError
from core.io import atomic_path, write_json
from tasks.muep.eval.harness import BatchOutput, EvalBatch
from tasks.muep.eval.records import EpisodeResult

MANIFEST = "manifest.json"


def fingerprint(*parts: object) -> str:
    """A short, stable hash of JSON-able values."""
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def file_digest(paths: Iterable[Path]) -> str:
    """One hash over the contents of files (in the order given), e.g. the code a stage runs or its input tables, and
    their names (not where the checkout is: the manifest holding it is a DVC output, the same in any copy)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).name.encode() + b"\0")
        with open(path, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class EvalStore:
    def __init__(self, root: Path, common: str = "", agents: dict[str, str] | None = None) -> None:
        """``common`` and ``agents`` (registry name -> fingerprint) are what :meth:`prepare` checks the parts
        against; a worker that only commits its batch needs neither."""
        self.root = Path(root)
        self.common = common
        self.agents = dict(agents or {})

    # -- the manifest --------------------------------------------------------------------------------------------

    def prepare(self) -> dict[str, str]:
        """Keep the parts made under the same fingerprints, discard the others and stray temporary files; returns
        what was discarded (agent or "all" -> why), for the log."""
        manifest = self.root / MANIFEST
        old: dict = {}
        if manifest.exists():
            try:
                old = json.loads(manifest.read_text(encoding="utf-8"))
            except ValueError:
                old = {}
        discarded: dict[str, str] = {}
        if old.get("common") != self.common:
            if (self.root / "parts").exists() and any((self.root / "parts").iterdir()):
                discarded["all"] = "code, episodes, data or rules changed"
            shutil.rmtree(self.root / "parts", ignore_errors=True)
            old = {}
        known = dict(old.get("agents", {}))
        for name, fp in self.agents.items():
            if known.get(name) not in (None, fp):
                if (self.root / "parts" / name).exists():
                    discarded[name] = "its parameters changed"
                shutil.rmtree(self.root / "parts" / name, ignore_errors=True)
            known[name] = fp
        shutil.rmtree(self.root / "timing", ignore_errors=True)  # an older version kept run facts here
        (self.root / "parts").mkdir(parents=True, exist_ok=True)
        for stray in (self.root / "parts").rglob(".*.tmp"):  # left by a writer killed mid-file
            stray.unlink()
        write_json(manifest, {"common": self.common, "agents": dict(sorted(known.items()))})
        return discarded

    # -- parts ---------------------------------------------------------------------------------------------------

    def _part(self, agent: str, batch_id: str) -> Path:
        return self.root / "parts" / agent / f"{batch_id}.jsonl"

    def done(self, agent: str) -> set[str]:
        return {p.stem for p in (self.root / "parts" / agent).glob("*.jsonl")}

    def pending(self, batches: list[EvalBatch]) -> list[EvalBatch]:
        """The batches with the agents that have not played them yet (batches every agent played are left out)."""
        done = {name: self.done(name) for name in self.agents}
        out = []
        for batch in batches:
            agents = [(name, label) for name, label in batch.agents if batch.batch_id not in done[name]]
            if agents:
                out.append(EvalBatch(batch.batch_id, agents, batch.episodes, batch.scene_goals))
        return out

    def commit(self, batch: EvalBatch, output: BatchOutput) -> None:
        """Write one part per agent of the batch (the commit marks), each atomically. The output's timings are
        not kept here: the flow reports them as run facts."""
        for name, label in batch.agents:
            lines = [json.dumps(r.to_json(), ensure_ascii=False) for r in output.results if r.agent == label]
            if len(lines) != len(batch.episodes):
                raise RuntimeError(f"batch {batch.batch_id}: {len(lines)} results of {name}, expected "
                                   f"{len(batch.episodes)}")
            path = self._part(name, batch.batch_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as stream:
                stream.write("".join(line + "\n" for line in lines))

    def results(self, agent: str, batch_ids: Iterable[str]) -> list[EpisodeResult]:
        """Every result of ``agent`` in the given batches, read back from the parts (each must exist)."""
        out = []
        for batch_id in batch_ids:
            path = self._part(agent, batch_id)
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
                out += [EpisodeResult.from_json(json.loads(line)) for line in lines if line.strip()]
            except FileNotFoundError:
                raise DataError(f"{path} is missing: batch {batch_id} was not played by {agent}.",
                                hint="Rerun the stage; it plays only what is missing.") from None
            except (ValueError, TypeError) as exc:
                raise DataError(f"{path} is not a results part of this version ({exc}).",
                                hint=f"Delete {self.root} and rerun the stage.") from None
        return out
