"""Log-likelihood of candidate continuations (the admissible commands of a text game) under a causal LM.

The score of a candidate is the sum of its tokens' log-probabilities after the prompt; its mean is that sum over its
token count. One call costs about one forward over the prompt plus one over all candidate tokens together:

* the prompt's keys and values are in a cache (:func:`extend`), and the vocabulary projection (a fifth of a small
  model's arithmetic per position) runs only for the positions whose logits are read;
* every candidate's tokens but its last are *packed* into one row as a prefix tree: candidates that begin with the
  same tokens ("go to cabinet 1", "go to cabinet 2", ...) share the positions of that common prefix. Each tree node
  is one position whose id is the prompt length plus its depth, and a 4-D boolean mask lets it see the whole prompt
  and its own ancestors only (:func:`packed_inputs`); the first token of every candidate is scored from the
  prompt's last logits;
* the cache is cropped back to the prompt afterwards, so the next call can reuse it.

That is the same arithmetic as scoring each candidate after the prompt on its own (max |difference| ~3e-5 nats in
float32), 10-30x cheaper than one full forward per candidate; the shared prefixes cut the candidate positions of a
text game's admissible commands about in half (:func:`tree_size`). transformers passes a 4-D mask through to the
attention unchanged (``masking_utils``), which Llama-family models support; :func:`per_candidate_scores` is the
plain one-forward-per-candidate fallback for anything else (other architectures, images in the prompt).

A candidate should end with the end-of-turn/EOS token: then "go to cabinet 1" is not a prefix of "go to cabinet 10".
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _logprobs(logits: torch.Tensor, targets: Sequence[int]) -> torch.Tensor:
    return torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(targets).unsqueeze(-1)).squeeze(-1)


def new_cache(model):
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


def crop_to(cache, length: int) -> None:
    """Keep the first ``length`` positions of ``cache`` (transformers 5's ``crop`` takes the count to drop)."""
    drop = cache.get_seq_length() - length
    if drop > 0:
        cache.crop(-drop)


@torch.inference_mode()
def extend(model, cache, ids: Sequence[int]) -> torch.Tensor:
    """Feed ``ids`` after what ``cache`` holds (the cache grows in place); the logits of the last position."""
    device = next(model.parameters()).device
    out = model(input_ids=torch.tensor([list(ids)], device=device), past_key_values=cache, use_cache=True,
                logits_to_keep=1)            # the vocabulary projection of the last position only
    return out.logits[0, -1]


def prefix_tree(cand_ids: Sequence[Sequence[int]]) -> tuple[list[int], list[int], list[int], list[list[int]]]:
    """The fed tokens of the candidates (each candidate's tokens but its last) as a prefix tree, nodes in order of
    first appearance (a parent before its children): (token, depth, parent index or -1) per node, and per candidate
    the node index of each of its fed tokens."""
    tokens, depth, parent, rows = [], [], [], []
    index: dict[tuple[int, ...], int] = {}
    for ids in cand_ids:
        row, up = [], -1
        for k in range(len(ids) - 1):
            key = tuple(ids[:k + 1])
            if key not in index:
                index[key] = len(tokens)
                tokens.append(ids[k])
                depth.append(k)
                parent.append(up)
            up = index[key]
            row.append(up)
        rows.append(row)
    return tokens, depth, parent, rows


def tree_size(cand_ids: Sequence[Sequence[int]]) -> tuple[int, int]:
    """(positions packed as a prefix tree, positions packed one candidate after another)."""
    return len(prefix_tree(cand_ids)[0]), sum(max(len(ids) - 1, 0) for ids in cand_ids)


def packed_inputs(prompt_len: int, cand_ids: Sequence[Sequence[int]], new: int = 0):
    """Token ids, position ids (1, T), the boolean mask (1, 1, T, prompt_len + T) of the candidates' prefix tree
    (:func:`prefix_tree`), and per candidate the rows of its fed tokens -- after ``new`` prompt tokens that go into
    the same forward (the cache holds ``prompt_len - new`` positions; the returned tokens and rows are the
    candidates' only, the positions and mask start with the new prompt tokens)."""
    tokens, depth, parent, rows = prefix_tree(cand_ids)
    n = len(tokens)
    own = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):                      # a node sees itself and its ancestors (its parent's row, plus itself)
        if parent[i] >= 0:
            own[i] = own[parent[i]]
        own[i, i] = True
    pos_t = prompt_len + torch.tensor(depth, dtype=torch.long)
    mask = torch.cat([torch.ones(n, prompt_len, dtype=torch.bool), own], 1)
    if new:
        cached = prompt_len - new
        head = torch.cat([torch.ones(new, cached, dtype=torch.bool), torch.tril(torch.ones(new, new, dtype=torch.bool)),
                          torch.zeros(new, n, dtype=torch.bool)], 1)
        mask = torch.cat([head, mask], 0)
        pos_t = torch.cat([torch.arange(cached, prompt_len), pos_t])
    return tokens, pos_t[None], mask[None, None], rows


def _sums(first: torch.Tensor, logits: torch.Tensor, cand_ids: Sequence[Sequence[int]],
          rows: Sequence[Sequence[int]]) -> list[float]:
    scores = []
    for ids, row in zip(cand_ids, rows, strict=True):
        total = first[ids[0]].item()
        if row:
            total += _logprobs(logits[list(row)], ids[1:]).sum().item()
        scores.append(total)
    return scores


@torch.inference_mode()
def packed_scores(model, cache, last_logits: torch.Tensor, cand_ids: Sequence[Sequence[int]]) -> list[float]:
    """Sum of log-probabilities of each candidate after the prompt held by ``cache`` (whose last logits are
    ``last_logits``). One forward for all candidates; the cache is cropped back to the prompt."""
    if any(len(c) == 0 for c in cand_ids):
        raise ValueError("a candidate has no token")
    first = torch.log_softmax(last_logits.float(), -1)
    prompt_len = cache.get_seq_length()
    tokens, positions, mask, rows = packed_inputs(prompt_len, cand_ids)
    if not tokens:
        return [first[c[0]].item() for c in cand_ids]
    device = next(model.parameters()).device
    out = model(input_ids=torch.tensor([tokens], device=device), position_ids=positions.to(device),
                attention_mask=mask.to(device), past_key_values=cache, use_cache=True)
    crop_to(cache, prompt_len)
    return _sums(first, out.logits[0], cand_ids, rows)


@torch.inference_mode()
def fused_scores(model, cache, new_ids: Sequence[int], cand_ids: Sequence[Sequence[int]]) -> list[float]:
    """:func:`packed_scores` with the prompt's last ``new_ids`` (not yet in ``cache``) in the same forward as the
    candidates: one forward per call. The cache keeps the prompt (with ``new_ids``) afterwards. The same function as
    feeding ``new_ids`` first; the arithmetic is grouped differently (bfloat16 results differ in the last bits)."""
    if not new_ids:
        raise ValueError("fused_scores needs at least one new prompt token (its logits score the first tokens)")
    if any(len(c) == 0 for c in cand_ids):
        raise ValueError("a candidate has no token")
    prompt_len = cache.get_seq_length() + len(new_ids)
    tokens, positions, mask, rows = packed_inputs(prompt_len, cand_ids, new=len(new_ids))
    device = next(model.parameters()).device
    out = model(input_ids=torch.tensor([list(new_ids) + tokens], device=device), position_ids=positions.to(device),
                attention_mask=mask.to(device), past_key_values=cache, use_cache=True,
                logits_to_keep=len(tokens) + 1)   # the last prompt position and the candidates' only
    crop_to(cache, prompt_len)
    logits = out.logits[0]
    first = torch.log_softmax(logits[0].float(), -1)
    return _sums(first, logits[1:], cand_ids, rows)


@torch.inference_mode()
def per_candidate_scores(forward, prompt_ids: Sequence[int], cand_ids: Sequence[Sequence[int]]) -> list[float]:
    """The fallback: ``forward(ids) -> logits (1, len(ids), vocab)`` over prompt + candidate, once per candidate."""
    scores = []
    start = len(prompt_ids)
    for ids in cand_ids:
        logits = forward(list(prompt_ids) + list(ids))[0, start - 1:-1]
        scores.append(_logprobs(logits, ids).sum().item())
    return scores


def best(scores: Sequence[float], lengths: Sequence[int], normalise: bool = True) -> int:
    """Index of the best candidate by mean (``normalise``) or summed log-probability; ties go to the first."""
    values = [s / n for s, n in zip(scores, lengths, strict=True)] if normalise else list(scores)
    return max(range(len(values)), key=lambda i: (values[i], -i))
