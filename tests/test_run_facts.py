"""Run facts: what a stage measured goes to reports/timings/<stage>.json, with the orchestration overhead around it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import sys, time
from flows import _runtime
from tasks.progress import StageLog

def flow(params_file=None):
    with StageLog("probe") as slog:
        time.sleep(0.3)
        slog.run_facts(items=3)

_runtime.shared_prefect_server = __import__("contextlib").nullcontext   # no server: this checks the bookkeeping
time.sleep(0.2)   # 'startup': the process is alive before the flow starts
sys.exit(_runtime.run_stage("probe", flow))
"""


def test_a_stage_records_its_work_and_the_overhead_around_it(tmp_path):
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    env = {"EMBP_ROOT": str(tmp_path), "PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}
    subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env, check=True, timeout=120)
    facts = json.loads((tmp_path / "reports/timings/probe.json").read_text())
    assert facts["stage"] == "probe" and facts["items"] == 3
    assert 0.3 <= facts["wall_s"] < facts["process_s"]
    assert facts["startup_s"] >= 0.2   # interpreter start and imports, before the flow
    assert abs(facts["overhead_s"] - (facts["process_s"] - facts["wall_s"])) <= 0.02
    assert facts["overhead_s"] >= facts["startup_s"] - 0.01
