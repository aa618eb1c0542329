"""A trained baseline plays one TextWorld episode through the evaluation engineer's ``hf`` / ``hf-vision`` agents:
demonstrations (the pipeline's own code) -> SFT export -> tiny training -> ``models/<baseline>/`` -> agent."""

from __future__ import annotations

import pytest
from test_eval_support import build_dataset
from test_train_support import quick_params, restore_torch_threads, tracking_in  # noqa: F401

from tasks.muep.eval.agents import AgentContext, build_agent
from tasks.muep.eval.episodes import select
from tasks.muep.eval.harness import EvalSettings, run_episode
from tasks.muep.sft import export_sft
from tasks.params import EvalParams, HFAgentParams
from tasks.train.pipeline import plan_run, run

pytestmark = [pytest.mark.textworld, pytest.mark.slow]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    data = build_dataset()
    work = tmp_path_factory.mktemp("agent")
    export_sft(data.demos_dir, work / "sft", 2, data.root)
    out = {}
    for name in ("bloomz-3b", "llava"):
        params = quick_params(name, work / "models", max_steps=2, max_train_records=4)
        plan = plan_run(name, params, sft_dir=work / "sft", image_root=data.root)
        run(plan, tracking_in(work))
        out[name] = plan.model_dir
    return data, out


@pytest.mark.parametrize("agent, baseline", [("hf", "bloomz-3b"), ("hf-vision", "llava")])
def test_the_eval_agent_loads_the_baseline_and_acts_in_one_episode(trained, agent, baseline):
    data, models = trained
    sub = HFAgentParams(model_path=str(models[baseline]), max_new_tokens=8)
    params = EvalParams(max_steps=3, render_size=160, **{agent.replace("-", "_"): sub})
    spec = select(data.index, ["seen_test"], 1, 0)[0]
    settings = EvalSettings(metadata_dir=str(data.metadata_dir), params=params, context=AgentContext())
    player = build_agent(agent, params, settings.context)
    assert player.generator.kind == ("vision" if agent == "hf-vision" else "text")
    result = run_episode(spec, player, agent, settings)
    assert result.agent_calls == len(result.steps) == 3          # a random tiny model never wins in 3 steps
    assert all(step.error is None for step in result.steps), [step.error for step in result.steps]
    assert all(step.raw or step.action for step in result.steps)
