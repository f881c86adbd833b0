"""Decoding: the greedy answer and N temperature samples of a prompt, from one prefill.

`decode` runs the prompt through the model once (no grad) and reuses that KV cache for
the greedy answer (decoded from the prefill cache itself, so it is bit-identical to a
greedy decoder that prefills on its own) and for the N sample rows (a copy of the cache
expanded to N rows; rows that stopped are dropped from the batch at every step).
`generate` (greedy only) and `sample_answers` (samples only) run the same internals.
Also the length checks (`context_length`, `check_length`) and the stop tokens of a model.
Every pass runs the model in eval mode: a model left in train mode (dropout on) is switched
for the pass and gets its mode back (`gnuq_core.lm.anatomy.in_eval_mode`).

Stop-token convention, for every sequence score built from these outputs
---------------------------------------------------------------------------
An answer stops at an EOS / end-of-turn token, at a token containing a newline when
``stop_at_newline`` (few-shot prompts), or after ``max_new_tokens`` tokens. The stop
token is never part of the answer (``answer_ids``, ``token_log_probs``); its log-prob
under the model is kept separately as ``stop_log_prob`` (None when ``max_new_tokens``
ended the answer, since no stop token was drawn).

- Samples: the sequence log-prob `Sample.log_prob` is ``sum(token_log_probs)``, and for
  an *empty* sample (one that stopped at its first token) it is ``stop_log_prob``, with
  length 1: what the reference semantic-entropy code of Farquhar et al. (2024) does
  (``n_generated == 0 → 1``). An empty sample so gets log p = log p(stop) < 0, not 0
  (probability 1). Predictive and semantic entropy use this value
  (`gnuq_core.qa.scores`). The stop log-prob of every sample is stored, so the variant
  that counts the stop token always (the probability of the finished string) can be
  recomputed from a record.
- Greedy answer: ``Generation.token_log_probs`` are the answer tokens only, which is
  what the gradient estimator scores (p(y | x) over ``answer_ids``); a sequence baseline
  that wants the stop token adds ``Generation.stop_log_prob`` and must say so.
"""

from __future__ import annotations

import copy
import inspect
import math
import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gnuq_core.lm.anatomy import decoder_of, device_of, in_eval_mode, logit_transform, upcast
from gnuq_core.lm.prompts import PromptError

__all__ = ["Generation", "Sample", "decode", "generate", "sample_answers", "teacher_forced", "context_length",
           "check_length", "check_token_ids", "stop_token_ids"]


@dataclass
class Generation:
    """Output of the greedy generation pass (reusable: cached generations can be re-scored).

    Attributes
    ----------
    prompt_ids, answer_ids : list[int]
        ``answer_ids`` excludes the stop token.
    answer : str
        Decoded answer (special tokens skipped, stripped).
    token_log_probs, token_entropies : list[float]
        Per answer token: log p(y_t | ...) and the entropy (nats) of the full next-token
        distribution. The stop token is not included: ``sum(token_log_probs)`` is the
        log p(y | x) the gradient estimator scores.
    stop_reason : str
        ``"eos"``, ``"newline"`` or ``"max_new_tokens"``.
    seconds : float
        Wall-clock seconds of the prompt prefill and the greedy decoding.
    stop_log_prob : float or None
        log p of the stop token after the answer (the EOS / end-of-turn / newline token
        that ended it); None when ``max_new_tokens`` ended it. Not in ``token_log_probs``:
        a sequence score that counts the stop adds it explicitly.
    stop_token_id : int or None
        That stop token (None when ``max_new_tokens`` ended the answer).
    """

    prompt_ids: list[int]
    answer_ids: list[int]
    answer: str
    token_log_probs: list[float]
    token_entropies: list[float]
    stop_reason: str
    seconds: float = 0.0
    stop_log_prob: float | None = None
    stop_token_id: int | None = None


@dataclass
class Sample:
    """One temperature sample: its answer and per-token log-probs under the model (T = 1).

    Attributes
    ----------
    answer_ids : list[int]
        Sampled answer tokens, without the stop token (may be empty: the first draw was a
        stop token).
    answer : str
    token_log_probs : list[float]
        log p(y_t | ...) of each answer token under the model's own distribution (T = 1).
    stop_reason : str
        ``"eos"``, ``"newline"`` or ``"max_new_tokens"``.
    stop_log_prob : float or None
        log p (T = 1) of the stop token that ended the sample; None when
        ``max_new_tokens`` ended it.
    stop_token_id : int or None
    """

    answer_ids: list[int]
    answer: str
    token_log_probs: list[float]
    stop_reason: str
    stop_log_prob: float | None = None
    stop_token_id: int | None = None

    @property
    def log_prob(self) -> float:
        """log p of the sampled answer: ``sum(token_log_probs)``, or ``stop_log_prob`` for an
        empty sample (the reference semantic-entropy convention; see the module docstring)."""
        terms = list(self.token_log_probs)
        if not terms and self.stop_log_prob is not None:
            terms.append(self.stop_log_prob)
        return float(math.fsum(terms))


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
        # Fewer new tokens help only where the prompt itself fits.
        fewer = f" (or lower max_new_tokens to at most {ctx - n_prompt})" if n_prompt < ctx else ""
        raise PromptError(
            f"the prompt has {n_prompt} tokens and up to {n_more} more are needed, but the model's context "
            f"is {ctx} tokens: shorten the prompt by at least {n_prompt + n_more - ctx} tokens{fewer}; gnuq does "
            "not truncate prompts because that silently changes the question")


def check_token_ids(model: Any, ids: Sequence[int], what: str) -> None:
    """Raise `PromptError` unless every id of ``ids`` is an int in ``[0, vocabulary size)``.

    A negative id would index from the end of the embedding matrix (``-1`` is the last
    token) and give a number for a sequence nobody asked for; an id past the vocabulary
    fails deep inside the model. ``what`` names the sequence in the message.
    """
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = int(emb.weight.shape[0]) if emb is not None else int(model.config.vocab_size)
    for k, tok in enumerate(ids):
        try:
            value = operator.index(tok)
        except TypeError:
            value = None
        if value is None or isinstance(tok, bool):
            raise PromptError(f"{what}: token {k} is {tok!r}, not an integer token id")
        if not 0 <= value < vocab:
            raise PromptError(f"{what}: token id {value} at position {k} is outside the vocabulary [0, {vocab}): "
                              "encode the text with the model's own tokenizer")


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
def _prefill(model: Any, prompt_ids: Sequence[int]) -> tuple[torch.Tensor, Any]:
    """The prompt's last-position logits (1, V) and its KV cache, from one batch-1 forward."""
    return _step(model, torch.tensor([list(prompt_ids)], device=device_of(model)), None)


def _map_rows(cache: Any, fn: Any, method: str, arg: Any) -> Any:
    """Apply a batch-row operation to a KV cache (in place for `Cache` objects)."""
    if hasattr(cache, method):  # transformers Cache: DynamicCache, with full or sliding-window layers
        getattr(cache, method)(arg)
        return cache
    if isinstance(cache, torch.Tensor):
        return fn(cache)
    if isinstance(cache, (tuple, list)):  # legacy tuple-of-tuples caches
        return type(cache)(_map_rows(c, fn, method, arg) for c in cache)
    if cache is None or isinstance(cache, (int, float)):  # a batch-free state (test doubles count steps)
        return cache
    raise TypeError(f"cannot expand or select the rows of a {type(cache).__name__} KV cache: pass a transformers "
                    "Cache (DynamicCache) or a tuple of tensors")


def _expand_rows(cache: Any, n: int) -> Any:
    """A private copy of a batch-1 cache with its row repeated ``n`` times."""
    return _map_rows(copy.deepcopy(cache), lambda t: t.repeat_interleave(n, dim=0), "batch_repeat_interleave", n)


def _select_rows(cache: Any, rows: torch.Tensor) -> Any:
    """Keep only the batch rows ``rows`` of a cache."""
    return _map_rows(cache, lambda t: t.index_select(0, rows), "batch_select_indices", rows)


def _length_buckets(widths: Sequence[int], slack: float = 1.3) -> list[list[int]]:
    """Rows (indices into ``widths``) in batches of similar width, longest first: a row joins
    the current batch while the batch's padded size stays within ``slack`` times its real
    tokens, so padding costs at most 30% more positions and few batches run."""
    order = sorted(range(len(widths)), key=lambda r: -widths[r])
    buckets: list[list[int]] = []
    for r in order:
        if buckets:
            b = buckets[-1]
            if widths[b[0]] * (len(b) + 1) <= slack * (sum(widths[i] for i in b) + widths[r]):
                b.append(r)
                continue
        buckets.append([r])
    return buckets


def _inverse_cdf(log_probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """One token per row from ``exp(log_probs)`` (B, V) by inverse-CDF sampling.

    ``u`` (B,) holds one float64 uniform in [0, 1) per row; the cumulative sum runs in
    float64 and is renormalised by its last entry. A token with probability 0 is never
    drawn (the first index whose cumulative mass exceeds ``u * total``).
    """
    cdf = torch.cumsum(log_probs.exp(), dim=-1, dtype=torch.float64)
    total = cdf[:, -1:]
    if not bool(torch.isfinite(total).all()) or not bool((total > 0).all()):
        raise FloatingPointError("the model's next-token distribution is not finite (NaN or inf logits): check the "
                                 "weights and the dtype (float16 overflows; load in float32 or bfloat16)")
    x = torch.minimum(u.to(torch.float64)[:, None] * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, x, right=True)[:, 0]


def _greedy(model: Any, tokenizer: Any, prompt_ids: Sequence[int], logits: torch.Tensor, cache: Any, *,
            max_new_tokens: int, stops: set[int], stop_at_newline: bool, nl: dict[int, bool]) -> Generation:
    """Greedy decoding from the prompt's prefill ``logits`` (1, V) and ``cache`` (consumed)."""
    dev = device_of(model)
    logits = logits[0]
    answer, lps, ents, reason = [], [], [], "max_new_tokens"
    stop_lp, stop_id = None, None
    for step in range(max_new_tokens):
        lp = torch.log_softmax(upcast(logits), dim=-1)
        if step == 0:
            cand = torch.topk(lp, min(64, lp.numel())).indices.tolist()
            tok = next((c for c in cand if c not in stops and not (stop_at_newline and _is_newline(tokenizer, c, nl))),
                       cand[0])
        else:
            tok = int(torch.argmax(lp))
            if tok in stops or (stop_at_newline and _is_newline(tokenizer, tok, nl)):
                reason = "eos" if tok in stops else "newline"
                stop_lp, stop_id = float(lp[tok]), tok
                break
        answer.append(tok)
        lps.append(float(lp[tok]))
        ents.append(float(-(lp.exp() * lp).nan_to_num().sum()))
        if step + 1 == max_new_tokens:
            break
        logits, cache = _step(model, torch.tensor([[tok]], device=dev), cache)
        logits = logits[0]
    text = tokenizer.decode(answer, skip_special_tokens=True).strip()
    return Generation(list(prompt_ids), answer, text, lps, ents, reason, 0.0, stop_lp, stop_id)


@torch.no_grad()
def _sample_rows(model: Any, tokenizer: Any, logits: torch.Tensor, cache: Any, n: int, *, temperature: float,
                 max_new_tokens: int, stops: set[int], stop_at_newline: bool, nl: dict[int, bool],
                 generator: torch.Generator, drop_finished: bool = True) -> list[Sample]:
    """``n`` samples from the prompt's prefill ``logits`` (1, V) and batch-1 ``cache`` (not modified).

    Every step draws one float64 uniform for each of the ``n`` rows, finished or not, so a
    row's sample depends only on the seed, its row index and its own tokens: dropping
    finished rows (``drop_finished``, the fast path) gives the same samples as keeping them.
    """
    dev = device_of(model)
    cache = _expand_rows(cache, n)
    rows = list(range(n))  # original index of each batch row still decoded
    toks: list[list[int]] = [[] for _ in range(n)]
    lps: list[list[float]] = [[] for _ in range(n)]
    reason = ["max_new_tokens"] * n
    stop_lp: list[float | None] = [None] * n
    stop_id: list[int | None] = [None] * n
    done = [False] * n
    for step in range(max_new_tokens):
        lp = torch.log_softmax(upcast(logits), dim=-1)  # the one normalisation of the step (T = 1)
        if lp.shape[0] != len(rows):  # the first step: the prompt's single row, shared by all
            lp = lp.expand(len(rows), -1)
        u = torch.rand(n, generator=generator, dtype=torch.float64, device=dev)
        draw_lp = lp if temperature == 1.0 else torch.log_softmax(lp / temperature, dim=-1)
        nxt = _inverse_cdf(draw_lp, u[torch.tensor(rows, device=dev)] if len(rows) < n else u)
        nxt_lp = lp.gather(1, nxt[:, None])[:, 0].tolist()
        for i, t, l in zip(rows, nxt.tolist(), nxt_lp):
            if done[i]:
                continue
            if t in stops or (stop_at_newline and _is_newline(tokenizer, t, nl)):
                done[i], reason[i] = True, ("eos" if t in stops else "newline")
                stop_lp[i], stop_id[i] = l, t
            else:
                toks[i].append(t)
                lps[i].append(l)
        if all(done) or step + 1 == max_new_tokens:
            break
        if drop_finished and any(done[i] for i in rows):
            keep = [j for j, i in enumerate(rows) if not done[i]]
            sel = torch.tensor(keep, device=dev)
            cache, nxt = _select_rows(cache, sel), nxt.index_select(0, sel)
            rows = [rows[j] for j in keep]
        logits, cache = _step(model, nxt[:, None], cache)
    return [Sample(toks[i], tokenizer.decode(toks[i], skip_special_tokens=True).strip(), lps[i], reason[i],
                   stop_lp[i], stop_id[i]) for i in range(n)]


TEMPERATURE_RANGE = (1e-4, 1e2)
"""Sampling temperatures accepted: far below 1e-4 the log-probabilities divided by T overflow
float32 (use `generate` for greedy answers), above 100 every token is about equally likely."""
MAX_SAMPLES = 1024
"""Samples decoded side by side in one call (each row holds a KV cache: more do not fit in memory)."""


def _is_int(value: Any) -> bool:
    """An integer (Python or numpy), not a bool or a float."""
    return not isinstance(value, bool) and hasattr(type(value), "__index__")


def _check_args(max_new_tokens: int, n: int, temperature: float) -> None:
    if not _is_int(max_new_tokens) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer of at least 1 (got {max_new_tokens!r})")
    if not _is_int(n) or n < 0:
        raise ValueError(f"the number of samples must be an integer >= 0 (got {n!r})")
    if n > MAX_SAMPLES:
        raise ValueError(f"{n} samples cannot be decoded side by side (at most {MAX_SAMPLES}: each holds a KV cache); "
                         "use fewer, or sample_answers(..., batch_size=64) for many")
    lo, hi = TEMPERATURE_RANGE
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature) \
            or temperature <= 0:
        raise ValueError(f"temperature must be a finite number > 0 (got {temperature!r}; use `generate` for greedy "
                         "decoding)")
    if not lo <= temperature <= hi:
        raise ValueError(f"temperature {temperature:g} is outside [{lo:g}, {hi:g}]: below, log p / T overflows float32 "
                         "(use `generate` for greedy answers); above, every token is about equally likely")


@in_eval_mode
@torch.no_grad()
def decode(model: Any, tokenizer: Any, prompt_ids: Sequence[int], n_samples: int, *, temperature: float = 1.0,
           max_new_tokens: int = 32, stop_at_newline: bool = False, seed: int = 0,
           timings: dict[str, float] | None = None,
           cpu_timings: dict[str, float] | None = None) -> tuple[Generation, list[Sample]]:
    """The greedy answer and ``n_samples`` temperature samples of a prompt, from one prefill.

    The prompt is run once (no grad); the greedy answer is decoded from its KV cache, the
    samples from a copy expanded to ``n_samples`` rows, with finished rows dropped from
    the batch at each step. Same results as `generate` and `sample_answers` with the same
    arguments, at about the cost of one prefill instead of two.

    Parameters
    ----------
    model, tokenizer
        A transformers causal LM and its tokenizer.
    prompt_ids : sequence of int
        The encoded prompt (`gnuq_core.lm.prompts.encode_prompt`).
    n_samples : int
        Number of samples (0: the greedy answer only).
    temperature : float
        Sampling temperature (> 0); true temperature sampling, no top-k / top-p.
    max_new_tokens : int
        Cap on the tokens drawn per answer (the stop token counts as a drawn token).
    stop_at_newline : bool
        Also stop at a token containing a newline (few-shot prompts).
    seed : int
        Seeds the samples: the same seed gives the same samples.
    timings, cpu_timings : dict, optional
        If given, receive the wall-clock / process-CPU seconds of the passes:
        ``"generate"`` (the prompt prefill + greedy decoding) and, when ``n_samples`` > 0,
        ``"sample"`` (the sample rows, from the shared prefill).

    Returns
    -------
    (Generation, list[Sample])
        The greedy answer: its first token is the most likely *non-stop* token (as
        ``min_new_tokens=1``), so it is never empty; ``token_log_probs`` exclude the stop
        token, whose log-prob is ``stop_log_prob``. The samples: log-probs under the
        model's own distribution (T = 1); `Sample.log_prob` counts the stop token, so an
        empty sample has log p = log p(stop) < 0. See the module docstring.
    """
    wall0, cpu0 = time.perf_counter(), time.process_time()
    _check_args(max_new_tokens, n_samples, temperature)
    check_length(model, len(prompt_ids), max_new_tokens)
    stops = stop_token_ids(model, tokenizer)
    nl: dict[int, bool] = {}
    logits, cache = _prefill(model, prompt_ids)
    wall1, cpu1 = time.perf_counter(), time.process_time()
    samples: list[Sample] = []
    if n_samples > 0:  # the sample rows decode from an expanded copy; the greedy pass then consumes `cache`
        generator = torch.Generator(device=device_of(model)).manual_seed(seed)
        samples = _sample_rows(model, tokenizer, logits, cache, n_samples, temperature=temperature,
                               max_new_tokens=max_new_tokens, stops=stops, stop_at_newline=stop_at_newline, nl=nl,
                               generator=generator)
    wall2, cpu2 = time.perf_counter(), time.process_time()
    gen = _greedy(model, tokenizer, prompt_ids, logits, cache, max_new_tokens=max_new_tokens, stops=stops,
                  stop_at_newline=stop_at_newline, nl=nl)
    wall3, cpu3 = time.perf_counter(), time.process_time()
    gen.seconds = (wall1 - wall0) + (wall3 - wall2)
    for out, spent in ((timings, {"generate": gen.seconds, "sample": wall2 - wall1}),
                       (cpu_timings, {"generate": (cpu1 - cpu0) + (cpu3 - cpu2), "sample": cpu2 - cpu1})):
        if out is not None:
            out.update(spent if n_samples > 0 else {"generate": spent["generate"]})
    return gen, samples


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prompt_ids: Sequence[int], *, max_new_tokens: int = 32,
             stop_at_newline: bool = False) -> Generation:
    """Greedy answer to a prompt, with per-token log-probs and entropies (`decode` without samples).

    Stops at an EOS / end-of-turn token, at a token containing a newline when
    ``stop_at_newline`` (few-shot prompts), or after ``max_new_tokens``. The stop token is
    not part of the answer; its log-prob is ``Generation.stop_log_prob``. The first token
    is the most likely *non-stop* token (as ``min_new_tokens=1``), so the answer is never
    empty.
    """
    return decode(model, tokenizer, prompt_ids, 0, max_new_tokens=max_new_tokens, stop_at_newline=stop_at_newline)[0]


@in_eval_mode
@torch.no_grad()
def sample_answers(model: Any, tokenizer: Any, prompt_ids: Sequence[int], n: int, *, temperature: float = 1.0,
                   max_new_tokens: int = 32, stop_at_newline: bool = False, seed: int = 0,
                   batch_size: int | None = None) -> list[Sample]:
    """``n`` answers by true temperature sampling (no top-k, no top-p), batched.

    The prompt is prefilled once; each batch of ``batch_size`` rows (default: all ``n``)
    decodes from a copy of its KV cache, dropping rows that stopped. Token log-probs are
    recorded under the model's own distribution (temperature 1), which is what predictive
    and semantic entropy need; `Sample.log_prob` counts the stop token (see the module
    docstring). Seeded: the same seed gives the same samples (and, for ``batch_size``
    = ``n``, the same samples as `decode`).
    """
    if not _is_int(n) or n < 1:
        raise ValueError(f"n must be an integer of at least 1 (got {n!r})")
    if batch_size is not None and (not _is_int(batch_size) or batch_size < 1):
        raise ValueError(f"batch_size must be an integer of at least 1 (got {batch_size!r})")
    _check_args(max_new_tokens, min(n, batch_size or n), temperature)
    check_length(model, len(prompt_ids), max_new_tokens)
    stops = stop_token_ids(model, tokenizer)
    nl: dict[int, bool] = {}
    logits, cache = _prefill(model, prompt_ids)
    generator = torch.Generator(device=device_of(model)).manual_seed(seed)
    batch_size = batch_size or n
    samples: list[Sample] = []
    while len(samples) < n:
        b = min(batch_size, n - len(samples))
        samples += _sample_rows(model, tokenizer, logits, cache, b, temperature=temperature,
                                max_new_tokens=max_new_tokens, stops=stops, stop_at_newline=stop_at_newline, nl=nl,
                                generator=generator)
    return samples


@in_eval_mode
@torch.no_grad()
def teacher_forced(model: Any, prompt_ids: Sequence[int], sequences: Sequence[Sequence[int]]
                   ) -> list[tuple[list[float], list[float]]]:
    """log p and the next-token entropy (nats) of each token of each given continuation.

    The continuations are scored *as given* (teacher forcing: no sampling, no argmax), the
    way `decode` scores what it generates: the prompt is prefilled once, its KV cache is
    copied to one row per continuation, and all continuation tokens are fed in one batched
    step (padded on the right: a row's causal attention never reaches its own padding).
    The vocabulary projection and the log-softmax run on the real positions only, not on
    the padding (with a 262k vocabulary they are most of the cost). The distribution is the
    model's own (T = 1), the same log-softmax.

    Parameters
    ----------
    model : transformers causal LM
    prompt_ids : sequence of int
    sequences : sequence of sequences of int
        Continuations (a generated answer, with its stop token if it ended at one). Empty
        continuations give empty lists.

    Returns
    -------
    list of (log_probs, entropies)
        Per continuation, one value per token.
    """
    check_token_ids(model, prompt_ids, "the prompt")
    for k, seq in enumerate(sequences):
        check_token_ids(model, seq, f"continuation {k}")
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in sequences]
    todo = [k for k, seq in enumerate(sequences) if len(seq) > 0]
    if not todo:
        return out
    longest = max(len(sequences[k]) for k in todo)
    check_length(model, len(prompt_ids), longest)
    dev = device_of(model)
    first, cache = _prefill(model, prompt_ids)  # (1, V): the distribution of every continuation's first token
    n = len(todo)
    first_lp = torch.log_softmax(upcast(first), dim=-1)[0]  # (V,)
    later: dict[int, torch.Tensor] = {}  # per continuation: log-softmax of its tokens 2..t, (t - 1, V)
    body = decoder_of(model)
    key = "cache" if "cache" in inspect.signature(body.forward).parameters else "past_key_values"
    for bucket in _length_buckets([len(sequences[k]) - 1 for k in todo]):
        rows_k = [todo[r] for r in bucket]
        width = len(sequences[rows_k[0]]) - 1  # the longest in the bucket
        if width == 0:
            continue
        fed = torch.zeros((len(rows_k), width), dtype=torch.long, device=dev)
        mask = torch.zeros((len(rows_k), len(prompt_ids) + width), dtype=torch.long, device=dev)
        mask[:, :len(prompt_ids)] = 1
        for r, k in enumerate(rows_k):
            seq = list(sequences[k])[:-1]
            if seq:
                fed[r, :len(seq)] = torch.tensor(seq, device=dev)
                mask[r, len(prompt_ids):len(prompt_ids) + len(seq)] = 1
        cache_rows = _expand_rows(cache, len(rows_k))
        hidden = body(input_ids=fed, attention_mask=mask, use_cache=True, **{key: cache_rows}).last_hidden_state
        real = mask[:, len(prompt_ids):].bool()  # the positions that are not padding
        logits = logit_transform(model, model.get_output_embeddings()(hidden[real]))
        flat = torch.log_softmax(upcast(logits), dim=-1)
        later.update(zip(rows_k, torch.split(flat, real.sum(1).tolist())))
    for r, k in enumerate(todo):
        lp = torch.cat([first_lp[None], later[k]]) if k in later else first_lp[None]  # (t, V)
        target = torch.tensor(list(sequences[k]), device=dev)
        picked = lp.gather(1, target[:, None])[:, 0].double().tolist()
        entropy = (-(lp.exp() * lp).nan_to_num().sum(-1)).double().tolist()
        out[k] = (picked, entropy)
    return out
