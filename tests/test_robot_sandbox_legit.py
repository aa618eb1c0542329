"""The legitimate side of the sandbox (issue #14), on the simulated robot: every benchmark task's reference code
(the offline code generator without deliberate flaws) and the object-shape study's two reference scripts end the
same way in the sandbox as when run as plain Python in this process against the same tools, seed and jitter --
the same status, the same evaluation items holding, the same success -- so Table II cannot move for legitimate
code."""

from __future__ import annotations

import json

import numpy as np
import pytest
from robot_goals import request

from robot import sandbox
from robot.backends import create_backend
from robot.contract import items as scoring
from robot.contract.tool_api import TOOL_SPECS
from robot.episode import EpisodeRunner, parse_goal
from robot.errors import RobotError
from robot.perception import create_perception
from robot.tools_impl import RobotTools
from tasks.roboscript.eval import shapes
from tasks.roboscript.params import WorldsParams

pytestmark = pytest.mark.sim
JITTER_M = 0.005


@pytest.fixture(scope="module")
def backend():
    sim = create_backend("sim", arm="panda")
    yield sim
    sim.close()


@pytest.fixture(scope="module")
def reference_code(tasks):
    from tasks.llm import build_client
    from tasks.params import LLMParams
    from tasks.roboscript.code_prompts import task_query
    from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator
    from tasks.roboscript.params import CodegenParams

    llm = LLMParams(offline={"noise": 0.0})
    generator = HierarchicalGenerator(build_client(llm, None), llm, CodegenParams())
    jobs = [CodeJob(t.id, t.id, t.instruction, task_query(t.world.object_names(), t.instruction))
            for t in tasks.values()]
    return {s.job.query_id: s.assembled() for s in generator.generate(jobs)}


def _plain(backend, goal) -> dict:
    """One repeat as plain Python in this process: the old sandbox's semantics without any of its layers."""
    seed = goal.seed * 1000
    backend.reset(seed, goal.pose_jitter_m)
    tools = RobotTools(backend, create_perception(goal.perception, backend, goal.noise, seed, goal.pipeline))
    namespace = {"np": np, **{name: getattr(tools, name) for name in TOOL_SPECS}}
    try:
        exec(compile(goal.code, "<plain>", "exec"), namespace)  # noqa: S102 - reference code, the simulator
        status = "ok"
    except RobotError:
        status = "robot_error"
    except Exception:  # noqa: BLE001 - any other exception is the code's
        status = "code_error"
    checked = scoring.check_items(goal.evaluation, goal.world, backend.world_state())
    return {"status": status, "items": [i["ok"] for i in checked], "success": all(i["ok"] for i in checked)}


def _sandboxed(backend, goal) -> dict:
    result = EpisodeRunner(backend, "legit").run(goal)
    repeat = result["repeats"][0]
    assert result["isolation"] == sandbox.default_mode()
    return {"status": repeat["status"], "items": [i["ok"] for i in repeat["items"]], "success": repeat["success"]}


def test_every_benchmark_tasks_reference_code_ends_as_plain_python(backend, tasks, reference_code):
    assert set(reference_code) == set(tasks)
    differ = {}
    for task_id, task in sorted(tasks.items()):
        goal = parse_goal(json.dumps(request(task, reference_code[task_id], 1, jitter_m=JITTER_M)))
        boxed, plain = _sandboxed(backend, goal), _plain(backend, goal)
        assert boxed["status"] in ("ok", "robot_error"), (task_id, boxed)
        if boxed != plain:
            differ[task_id] = (boxed, plain)
    assert differ == {}


def test_the_shape_studys_reference_scripts_end_as_plain_python(backend, catalog):
    trials, _ = shapes.study_trials(catalog, WorldsParams(), ["apple"], ["pick_place", "drawer"])
    assert {t.study for t in trials} == {"pick_place", "drawer"}
    for trial in trials:
        goal = parse_goal(json.dumps({"episode_id": trial.study, "world": trial.world.to_json(), "code": trial.code,
                                      "repeats": 1, "evaluation": trial.evaluation, "pose_jitter_m": JITTER_M}))
        boxed, plain = _sandboxed(backend, goal), _plain(backend, goal)
        assert boxed == plain and boxed["status"] == "ok", (trial.study, boxed, plain)
