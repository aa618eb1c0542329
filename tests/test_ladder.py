"""The model ladder's settings and units of work (tasks/ladder.py, ``ladder:`` in params.yaml, profiles/ladder.yaml):
bad names are refused with the known ones listed, every model is asked the same way, and each model's refusals and
provenance reach its report. The stage itself runs in the default pipeline (tests/test_reproducible.py regenerates
it twice, byte for byte, with SmolLM2 through llama.cpp's server)."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from core.plugins import LOCAL_MODELS
from tasks.ladder import code_checks, ladder_eval_params, ladder_report, model_label, served_llm
from tasks.params import Params, load_params, profile_overrides, validate
from tasks.roboscript.eval.evaluation import TaskCode


def test_an_unknown_model_is_refused_naming_the_known_ones():
    with pytest.raises(ConfigError) as info:
        validate({"ladder": {"models": ["gpt-5"]}})
    text = str(info.value)
    assert "ladder.models" in text and all(name in text for name in LOCAL_MODELS.names())
    with pytest.raises(ConfigError, match="ladder.models: lists a model twice"):
        validate({"ladder": {"models": ["gemma-3-270m", "gemma-3-270m"]}})
    with pytest.raises(ConfigError, match="ladder.roboscript.repeats"):
        validate({"ladder": {"roboscript": {"repeats": 0}}})


def test_every_model_is_asked_the_same_way_and_nothing_is_retried():
    ladder = Params().ladder
    first = served_llm(ladder, "gemma-3-270m", "http://127.0.0.1:1/v1")
    second = served_llm(ladder, "qwen2.5-coder-1.5b-instruct", "http://127.0.0.1:2/v1")
    same = {"model", "base_url"}
    assert first.model_dump(exclude=same) == second.model_dump(exclude=same)
    assert first.backend == "openai" and first.temperature == 0.0 and first.max_retries == 0
    assert model_label("gemma-3-270m") == "llama.cpp:gemma-3-270m"


def test_the_evaluation_settings_are_the_ladders():
    params = validate({"ladder": {"roboscript": {"tasks": ["Simple_0", "Hard_1"], "repeats": 3, "runners": 2}}})
    ep = ladder_eval_params(params)
    assert (ep.tasks, ep.repeats, ep.runners, ep.code) == (["Simple_0", "Hard_1"], 3, 2, "generate")
    assert ep.perception == params.roboscript.eval.perception           # everything else as roboscript-eval


def test_refusals_are_counted_by_reason_and_the_report_keeps_provenance():
    codes = {"Simple_0": TaskCode("Simple_0", "x", False, ("undefined_name", "wrong_arity"), "generated"),
             "Simple_1": TaskCode("Simple_1", "y", True, (), "generated"),
             "Hard_0": TaskCode("Hard_0", "z", False, ("undefined_name",), "generated")}
    checks = code_checks(codes)
    assert checks == {"snippets": 3, "passing": 1, "refused": 2,
                      "refusals_by_reason": {"undefined_name": 2, "wrong_arity": 1}}
    params = Params()
    report = {"model": "llama.cpp:smollm2-135m-instruct", "kind": "LLM", "summary": {"finished_whole_task": 0.0},
              "code_checks": checks, "provenance": {"gguf_sha256": "ab"}, "tasks_of_benchmark": "3 of 8",
              "tasks": {}, "settings": {}}
    out = ladder_report({"smollm2-135m-instruct": report}, params)
    assert out["models"]["smollm2-135m-instruct"]["code_checks"] == checks
    assert out["settings"]["server"] == "llama.cpp" and out["settings"]["temperature"] == 0.0
    assert "port" not in out["settings"]["server_settings"]        # no run-to-run value in a DVC output


def test_the_ladder_profile_asks_for_all_four_models_every_task_and_ten_repeats(repo_root):
    params = load_params(repo_root / "params.yaml")
    assert params.ladder == Params().ladder                          # the repository's params are the defaults
    assert params.ladder.models == ["smollm2-135m-instruct"]
    overrides = profile_overrides("ladder")
    assert overrides["ladder.roboscript.repeats"] == 10 and overrides["ladder.roboscript.tasks"] == "all"
    assert set(overrides["ladder.models"]) == set(LOCAL_MODELS.names())        # every catalogued model


def test_the_paper_profile_serves_no_model():
    """Issue #32: the model ladder is its own profile, not part of the paper profile's run."""
    assert profile_overrides("paper")["ladder.models"] == []


def test_an_answer_cached_under_one_batch_size_is_never_served_under_another(tmp_path):
    from tasks.ladder import answer_cache
    from tasks.params import ServeParams

    base = ServeParams()
    folders = {answer_cache(tmp_path, "m", base.model_copy(update=u))
               for u in ({}, {"n_batch": 512}, {"threads": 1}, {"port": 8080}, {"n_ctx": 2048})}
    assert len(folders) == 3                      # the port and the context size move no float
    assert all(f.parent == tmp_path / "m" for f in folders)
