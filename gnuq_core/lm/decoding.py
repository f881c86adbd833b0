"""Decoding: the greedy answer and temperature samples, with per-token log-probs.

Also the length checks (`context_length`, `check_length`) and the stop tokens of a model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gnuq_core.lm.anatomy import _device, _up
from gnuq_core.lm.prompts import PromptError


@dataclass
class Generation:
    """Output of the greedy generation pass (reusable: cached generations can be re-scored).

    Attributes
    ----------
    prompt_ids, answer_ids : list[int]
    answer : str
        Decoded answer (special tokens skipped, stripped).
    token_log_probs, token_entropies : list[float]
        Per answer token: log p(y_t | ...) and the entropy (nats) of the full next-token
        distribution.
    stop_reason : str
        ``"eos"``, ``"newline"`` or ``"max_new_tokens"``.
    seconds : float
    """

    prompt_ids: list[int]
    answer_ids: list[int]
    answer: str
    token_log_probs: list[float]
    token_entropies: list[float]
    stop_reason: str
    seconds: float = 0.0


@dataclass
class Sample:
    """One temperature sample: its answer and per-token log-probs under the model (T=1)."""

    answer_ids: list[int]
    answer: str
    token_log_probs: list[float]
    stop_reason: str

    @property
    def log_prob(self) -> float:
        """log p of the whole sampled answer (sum over its tokens)."""
        return float(math.fsum(self.token_log_probs))


def context_length(model: Any, tokenizer: Any = None) -> int | None:
    """The model's context window in tokens (None if unknown)."""
    cfg = model.config
    for key in ("max_position_embeddings", "n_positions", "seq_length"):
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def check_length(model: Any, n_prompt: int, n_more: int) -> None:
    """Raise `PromptError` if prompt + answer/new tokens exceed the context window."""
    ctx = context_length(model)
    if ctx is not None and n_prompt + n_more > ctx:
        raise PromptError(
            f"the prompt has {n_prompt} tokens and up to {n_more} more are needed, but the model's context "
            f"is {ctx} tokens: shorten the prompt by at least {n_prompt + n_more - ctx} tokens (or lower "
            "max_new_tokens); gnuq does not truncate prompts because that silently changes the question")


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence / end-of-turn token ids of a model."""
    ids: set[int] = set()
    for src in (getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                getattr(model.config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(src, int):
            ids.add(src)
        elif isinstance(src, (list, tuple)):
            ids.update(int(i) for i in src)
    unk = getattr(tokenizer, "unk_token_id", None)
    for tok in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>"):
        # convert_tokens_to_ids, not get_vocab(): building Gemma's 262k-entry dict costs ~0.7 s
        i = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(i, int) and i != unk and tokenizer.convert_ids_to_tokens(i) == tok:
            ids.add(i)
    return ids


def _step(model: Any, input_ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
    """One cached decoding step: (last-position logits, new cache). Handles the
    ``cache=`` (transformers >= 5.2x) and older ``past_key_values=`` keyword."""
    import inspect

    key = getattr(model, "_gnuq_cache_kw", None)
    if key is None:
        params = inspect.signature(model.forward).parameters
        key = "cache" if "cache" in params else "past_key_values"
        try:
            model._gnuq_cache_kw = key
        except AttributeError:
            pass
    kwargs = {key: cache} if cache is not None else {}
    out = model(input_ids=input_ids, use_cache=True, logits_to_keep=1, **kwargs)
    new = getattr(out, "cache", None)
    if new is None:
        new = getattr(out, "past_key_values", None)
    return out.logits[:, -1], new


def _is_newline(tokenizer: Any, tok: int, cache: dict[int, bool]) -> bool:
    if tok not in cache:
        cache[tok] = "\n" in tokenizer.decode([tok])
    return cache[tok]


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompt_ids: Sequence[int], *, max_new_tokens: int = 32,
             stop_at_newline: bool = False) -> Generation:
    """Greedy answer to a prompt, with per-token log-probs and entropies.

    Stops at an EOS / end-of-turn token, at a token containing a newline when
    ``stop_at_newline`` (few-shot prompts), or after ``max_new_tokens``. The stop token is
    not part of the answer. The first token is the most likely *non-stop* token (as
    ``min_new_tokens=1``), so the answer is never empty.
    """
    started = time.perf_counter()
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1")
    check_length(model, len(prompt_ids), max_new_tokens)
    stops = stop_token_ids(model, tokenizer)
    nl: dict[int, bool] = {}
    dev = _device(model)
    logits, past = _step(model, torch.tensor([list(prompt_ids)], device=dev), None)
    logits = logits[0]
    answer, lps, ents, reason = [], [], [], "max_new_tokens"
    for step in range(max_new_tokens):
        lp = torch.log_softmax(_up(logits), dim=-1)
        if step == 0:
            cand = torch.topk(lp, min(64, lp.numel())).indices.tolist()
            tok = next((c for c in cand if c not in stops and not (stop_at_newline and _is_newline(tokenizer, c, nl))),
                       cand[0])
        else:
            tok = int(torch.argmax(lp))
            if tok in stops:
                reason = "eos"
                break
            if stop_at_newline and _is_newline(tokenizer, tok, nl):
                reason = "newline"
                break
        answer.append(tok)
        lps.append(float(lp[tok]))
        ents.append(float(-(lp.exp() * lp).nan_to_num().sum()))
        if step + 1 == max_new_tokens:
            break
        logits, past = _step(model, torch.tensor([[tok]], device=dev), past)
        logits = logits[0]
    text = tokenizer.decode(answer, skip_special_tokens=True).strip()
    return Generation(list(prompt_ids), answer, text, lps, ents, reason, time.perf_counter() - started)


@torch.no_grad()
def sample_answers(model: Any, tokenizer: Any, prompt_ids: Sequence[int], n: int, *, temperature: float = 1.0,
                   max_new_tokens: int = 32, stop_at_newline: bool = False, seed: int = 0,
                   batch_size: int | None = None) -> list[Sample]:
    """``n`` answers by true temperature sampling (no top-k, no top-p), batched.

    Each batch runs the ``batch_size`` copies of the prompt together (same length, so no
    padding) with a KV cache until every row has stopped. Token log-probs are recorded
    under the model's own distribution (temperature 1), which is what predictive and
    semantic entropy need. Seeded: the same seed gives the same samples.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    if temperature <= 0:
        raise ValueError("temperature must be > 0 (use `generate` for greedy decoding)")
    check_length(model, len(prompt_ids), max_new_tokens)
    stops = stop_token_ids(model, tokenizer)
    nl: dict[int, bool] = {}
    dev = _device(model)
    gen = torch.Generator(device=dev).manual_seed(seed)
    batch_size = batch_size or n
    samples: list[Sample] = []
    while len(samples) < n:
        b = min(batch_size, n - len(samples))
        ids = torch.tensor([list(prompt_ids)] * b, device=dev)
        logits, past = _step(model, ids, None)
        toks: list[list[int]] = [[] for _ in range(b)]
        lps: list[list[float]] = [[] for _ in range(b)]
        reason = ["max_new_tokens"] * b
        done = [False] * b
        for step in range(max_new_tokens):
            lp = torch.log_softmax(_up(logits), dim=-1)
            probs = torch.softmax(_up(logits) / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
            for i in range(b):
                if done[i]:
                    continue
                t = int(nxt[i])
                if t in stops:
                    done[i], reason[i] = True, "eos"
                elif stop_at_newline and _is_newline(tokenizer, t, nl):
                    done[i], reason[i] = True, "newline"
                else:
                    toks[i].append(t)
                    lps[i].append(float(lp[i, t]))
            if all(done) or step + 1 == max_new_tokens:
                break
            logits, past = _step(model, nxt[:, None], past)
        for i in range(b):
            samples.append(Sample(toks[i], tokenizer.decode(toks[i], skip_special_tokens=True).strip(), lps[i],
                                  reason[i]))
    return samples
