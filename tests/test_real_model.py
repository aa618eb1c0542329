"""The real-model steps' settings and their checks (``real_model:`` in params.yaml, docs/real-model.md): the defaults
are the repository's, bad values name their key, the evaluation rows and what fine-tuning changed are derived as
documented, a missing fine-tuned model is an error before any episode, and the profiles apply."""

from __future__ import annotations

import pytest
import yaml

from core.errors import ConfigError
from tasks.params import Params, load_params, profile_overrides, validate

REAL = ("muep-real-generate", "muep-real-train", "muep-real-eval", "roboscript-real")


def test_the_repository_params_are_the_schema_defaults(repo_root):
    params = load_params(repo_root / "params.yaml")
    assert params.real_model == Params().real_model
    real = params.real_model
    assert real.llm.backend == "hf" and real.llm.hf.model_path == "smollm2-135m-instruct"
    assert real.train.profile == "full" and real.train.baselines == ["smollm2-135m"]
    assert params.llm.backend == "offline"                 # the data pipelines keep the offline proposer


@pytest.mark.parametrize(("change", "message"), [
    ({"real_model": {"eval": {"fine_tuned": "gpt-5"}}}, "real_model.eval.fine_tuned: unknown baseline 'gpt-5'"),
    ({"real_model": {"eval": {"action_selection": ["rank", "rank"]}}}, "real_model.eval.action_selection"),
    ({"real_model": {"eval": {"action_selection": ["beam"]}}}, "real_model.eval.action_selection[0]"),
    ({"real_model": {"roboscript": {"tasks": []}}}, "real_model.roboscript.tasks: lists no task"),
    ({"real_model": {"llm": {"hf": {"dtype": "int8"}}}}, "real_model.llm.hf.dtype"),
    ({"real_model": {"train": {"precision": "fp8"}}}, "real_model.train.precision"),
    ({"train": {"baselines": ["smollm2-135m"]}}, "real_model.train and train both train ['smollm2-135m']"),
])
def test_bad_real_model_settings_name_their_key(change, message):
    with pytest.raises(ConfigError) as info:
        validate(change)
    assert message in str(info.value)


def test_rows_are_models_times_selections_and_a_missing_fine_tuned_model_stops_before_any_episode(tmp_path,
                                                                                                   monkeypatch):
    from flows.muep_real_eval import rows

    monkeypatch.setattr("tasks.paths.ROOT", tmp_path)
    params = validate({"real_model": {"eval": {"action_selection": ["rank", "generate"], "fine_tuned": None}}})
    made = rows(params)
    assert list(made) == ["zero-shot-rank", "zero-shot-generate"]
    assert made["zero-shot-rank"].hf.model_path == "smollm2-135m-instruct"
    assert made["zero-shot-generate"].hf.action_selection == "generate"
    assert made["zero-shot-rank"].max_steps == params.muep.eval.max_steps       # the leaderboard's rules
    with pytest.raises(ConfigError, match=r"real_model\.eval\.fine_tuned is 'smollm2-135m' but models/smollm2-135m "
                                          r"holds no finished training run") as info:
        rows(validate({}))
    assert "muep-real-train" in info.value.paragraph()


def test_what_fine_tuning_changed_is_computed_on_the_same_rows():
    from flows.muep_real_eval import compare

    reports = {"zero-shot-rank": {"overall": {"sr": 0.0, "lc": 1.0, "gcs": 0.1, "rdi": 0.5, "pr": 0.1,
                                              "is_all": 30.0}},
               "fine-tuned-rank": {"overall": {"sr": 0.25, "lc": 1.0, "gcs": 0.4, "rdi": None, "pr": 0.3,
                                               "is_all": 24.5}}}
    effect = compare(reports, ["rank", "generate"])
    assert list(effect) == ["rank"]
    assert effect["rank"]["sr"] == {"zero_shot": 0.0, "fine_tuned": 0.25, "change": 0.25}
    assert effect["rank"]["rdi"]["change"] is None and effect["rank"]["is_all"]["change"] == -5.5


def test_the_cpu_real_profile_applies_and_the_dvc_stages_exist(repo_root):
    overrides = profile_overrides("cpu-real", repo_root / "params.yaml")
    assert any(k.startswith("real_model.") for k in overrides)
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    assert set(REAL) <= set(stages)
    assert "reports/muep/real/eval.json" in stages["muep-leaderboard"]["deps"]
