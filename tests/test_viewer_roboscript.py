"""Code tests of what the RoboScript episode pages show: the sandbox records each tool call with the snippet's line,
its arguments and its result or error (no times), and the pages render code, calls, items and the world before and
after from eval_details.json."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from robot.contract.tool_api import Pose
from robot.errors import ToolArgumentError
from robot.sandbox import Limits, run_code


class Tools:
    notes: list = []

    def get_gripper_pose(self):
        return Pose((0.3, 0.0, 1.2), (1.0, 0.0, 0.0, 0.0))

    def get_object_center_position(self, object_name):
        if object_name != "apple":
            raise ToolArgumentError(f"there is no object named {object_name!r}")
        return np.array([0.4, -0.3, 0.8])


def test_the_sandbox_records_each_call_with_its_line_arguments_and_result():
    code = ("def centre(name):\n"
            "    return get_object_center_position(name)\n"
            "pose = get_gripper_pose()\n"
            "a = centre('apple')\n"
            "b = get_object_center_position(object_name='pear')\n")
    outcome = run_code(code, Tools(), Limits(timeout_s=5.0, memory_mb=256))
    assert outcome.status == "code_error" and "(line 5)" in outcome.error, outcome
    first, second, third = outcome.calls
    assert (first["tool"], first["line"], first["args"], first["ok"]) == ("get_gripper_pose", 3, "", True)
    assert first["result"].startswith("Pose(")
    assert (second["line"], second["args"], second["result"]) == (2, "'apple'", "array([ 0.4, -0.3,  0.8])")
    assert third["args"] == "object_name='pear'" and not third["ok"] and "no object named 'pear'" in third["error"]
    assert [c["step"] for c in outcome.calls] == [1, 2, 3]
    assert not any(re.search(r"(^t$|_s$|time)", k) for c in outcome.calls for k in c)  # a DVC output's content


def _episode_data(page) -> dict:
    found = re.search(r'<script id="episode-data" type="application/json">(.*?)</script>', page.read_text(), re.S)
    assert found, page
    return json.loads(found.group(1))


@pytest.mark.sim
def test_a_simulated_episode_becomes_pages_with_code_calls_items_and_top_views(tasks, tmp_path):
    """Simple_0's verified code on the PyBullet sim, plus a snippet that raises, through build_report's details."""
    from robot.backends import create_backend
    from robot.episode import EpisodeRunner
    from robot_goals import SIMPLE_0, request
    from tasks.roboscript.eval.evaluation import TaskCode, build_report
    from tasks.roboscript.params import RobotEvalParams
    from robot.episode import parse_goal
    from tasks.viewer import roboscript as viewer

    task = tasks["Simple_0"]
    broken = "detect_objects(object_list=['apple'])\ngrasp_pose = parse_central_lift_grasp_pose(object_name='plum')\n"
    runner = EpisodeRunner(create_backend("sim", arm="panda"), "viewer-test")
    try:
        result = runner.run(parse_goal(json.dumps(request(task, SIMPLE_0, repeats=1))))
        failed = runner.run(parse_goal(json.dumps(request(task, broken, repeats=1))))
    finally:
        runner.backend.close()
    result["repeats"].append(failed["repeats"][0])
    codes = {"Simple_0": TaskCode("Simple_0", SIMPLE_0, True, (), "test")}
    ep = RobotEvalParams(repeats=2)
    _, details, _ = build_report([task], codes, {"Simple_0": result}, "rules:template-coder", ep,
                                 {"runners": ["/r1"]})
    repeat = details["tasks"]["Simple_0"]["repeats"][0]
    assert repeat["success"] and [c["tool"] for c in repeat["calls"]][:3] == ["detect_objects", "open_gripper",
                                                                              "parse_central_lift_grasp_pose"]
    assert [c["line"] for c in repeat["calls"]] == list(range(2, 13))   # one call per line of the snippet
    assert repeat["after"]["apple"] != details["tasks"]["Simple_0"]["world"]["models"]["apple"]["box"]

    folder = viewer.build(tmp_path / "viewer", details)
    assert folder.name == "rules_template-coder-" + folder.name.split("-")[-1]
    index = (folder / "index.html").read_text()
    assert index.count("data-outcome=") == 2 and 'data-outcome="failure"' in index and 'data-type="Simple"' in index
    good = folder / viewer.episode_file("Simple_0", 0)
    steps = _episode_data(good)["steps"]
    assert len(steps) == len(repeat["calls"]) + 2 and steps[1]["line"] == 2
    assert steps[1]["action"].startswith("detect_objects(object_list=['apple', 'footed_bowl'])")
    assert steps[-1]["observation"].splitlines() == [f"OK  {i['detail']}" for i in repeat["items"]]
    assert "task done" in steps[-1]["flags"]
    page = good.read_text()
    assert page.count("<svg") == 2 and "<title>apple</title>" in page and page.count("class=\"code\"") == 1
    bad = _episode_data(folder / viewer.episode_file("Simple_0", 1))["steps"]
    assert "raised" in bad[-2]["flags"] and bad[-2]["line"] == 2 and "plum" in bad[-2]["observation"]
    assert bad[-1]["line"] == 2 and "task not done" in bad[-1]["flags"]


def test_the_leaderboards_table2_rows_link_to_their_code_writers_episodes(tmp_path, monkeypatch):
    from flows import muep_leaderboard
    from tasks.muep import layout
    from tasks.roboscript import layout as robot_layout
    from tasks.roboscript.eval.leaderboard import markdown_table_to_html
    from tasks.viewer.roboscript import model_link

    section = ("## RoboScript benchmark (Table II)\n\nFrom MLflow.\n\n| code writer | kind | metric | Simple_0 |\n"
               "| --- | --- | --- | --- |\n| rules:template-coder | rules | finished whole task | 1 |\n"
               "| | | grammar correctness | 1 |\n| hf:tiny | LLM | finished whole task | 0 |\n")
    monkeypatch.setattr(layout, "LEADERBOARD_HTML", tmp_path / "reports/leaderboard.html")
    monkeypatch.setattr(robot_layout, "VIEWER", tmp_path / "reports/viewer/roboscript")
    index = robot_layout.VIEWER / model_link("rules:template-coder")
    index.parent.mkdir(parents=True)
    index.write_text("<html></html>")
    links = muep_leaderboard.robot_episode_links(section)
    assert links == {"rules:template-coder": f"viewer/roboscript/{model_link('rules:template-coder')}"}  # hf: no pages
    page = markdown_table_to_html(section, links)
    assert page.count("class='episodes'") == 1 and f"href='{links['rules:template-coder']}'" in page
    assert markdown_table_to_html(section) == markdown_table_to_html(section, {}) and "episodes" not in \
        markdown_table_to_html(section)
