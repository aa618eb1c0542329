"""The RoboScript Table II section of the leaderboard is read from a real MLflow sqlite store."""

from __future__ import annotations

import mlflow
from mlflow import MlflowClient

from tasks.roboscript.eval.leaderboard import markdown_table_to_html, section_markdown


def test_table2_from_mlflow_runs(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    exp = mlflow.create_experiment("embp/roboscript-eval", artifact_location=(tmp_path / "art").as_uri())
    for model, success in (("offline", 0.0), ("offline", 0.8), ("gpt-x", 1.0)):  # the newest run per model wins
        with mlflow.start_run(experiment_id=exp, run_name=model):
            mlflow.set_tag("model", model)
            mlflow.log_metrics({"Simple_0.grammar_correct": 1.0, "Simple_0.semantic_correct": 1.0,
                                "Simple_0.finished_steps_ratio": success, "Simple_0.finished_whole_task": success,
                                "Hard_1.finished_whole_task": 0.5, "mean.finished_whole_task": success})
            if model == "gpt-x":     # its interval over repeats (evaluation.mlflow_metrics logs it)
                mlflow.log_metrics({"mean.finished_whole_task_ci_low": 0.5, "mean.finished_whole_task_ci_high": 1.0})
    client = MlflowClient(uri)
    md = section_markdown(client, "embp/roboscript-eval")
    head = ("| code writer | kind | source | metric | Simple_0 | Hard_1 | mean of its tasks [95% CI over repeats] "
            "| 95% CI over tasks |")  # Table I order
    assert md is not None and head in md
    cells, kinds, model = {}, {}, None
    for line in md.splitlines()[md.splitlines().index(head) + 2:]:
        first, kind, _, metric, *values = [c.strip() for c in line.strip().strip("|").split("|")]
        model = first or model
        kinds[model] = kind or kinds.get(model)
        cells[(model, metric)] = values
    assert {m for m, _ in cells} == {"offline", "gpt-x"}  # one block per model, not per run
    assert cells[("offline", "finished whole task")] == ["0.8", "0.5", "0.65", "[0.50, 0.80]"]  # the newest run
    assert cells[("gpt-x", "finished whole task")] == ["1", "0.5", "0.75 [0.50, 1.00]", "[0.50, 1.00]"]
    assert cells[("offline", "grammar correctness")][1] == "n/a"  # Hard_1 logged no grammar figure
    assert cells[("offline", "grammar correctness")][2:] == ["1.00", "[1.00, 1.00]"]  # over the tasks with figures
    assert kinds == {"offline": "rule-based template program (not an LLM)", "gpt-x": "LLM"}  # never a model
    page = markdown_table_to_html(md)
    assert page.count("<tr>") == 1 + 2 * 4 and "<h2>RoboScript benchmark (Table II)</h2>" in page
    assert section_markdown(client, "embp/nothing-here") is None


def test_table2_rows_do_not_depend_on_which_stage_logged_last(tmp_path):
    """roboscript-eval and roboscript-real log to one experiment and may finish in either order (embp run runs
    them side by side): the section is the same bytes either way."""
    pages = []
    for order in (("rules:template-coder", "hf:tiny"), ("hf:tiny", "rules:template-coder")):
        uri = f"sqlite:///{tmp_path / ('-'.join(order) + '.db')}"
        mlflow.set_tracking_uri(uri)
        exp = mlflow.create_experiment("embp/roboscript-eval", artifact_location=(tmp_path / "art").as_uri())
        for model in order:
            with mlflow.start_run(experiment_id=exp, run_name=model):
                mlflow.set_tag("model", model)
                mlflow.log_metrics({"Simple_0.grammar_correct": 1.0, "Simple_0.finished_whole_task": 0.5})
        pages.append(section_markdown(MlflowClient(uri), "embp/roboscript-eval"))
    assert pages[0] == pages[1]
    assert pages[0].index("| hf:tiny |") < pages[0].index("| rules:template-coder |")
