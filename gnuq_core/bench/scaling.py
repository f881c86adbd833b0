"""How cost grows: the forward and the gradient pass against answer length, prompt length
and model size (random token ids; the passes interleaved in a fresh random order), and how
much longer answers multiply the speed-up over sampling (`answer_length_factor`).

The timed functions are the engine's: `gnuq_core.lm.gradient.answer_log_probs` (one no-grad
forward, LM head at the answer positions), `gnuq_core.lm.gradient.forward_backward` and
`gnuq_core.lm.decoding.sample_answers`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from gnuq_core.bench import clock
from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.subjects import Subject, load_subject
from gnuq_core.bench.summary import ratio_summary
from gnuq_core.lm.decoding import sample_answers
from gnuq_core.lm.gradient import answer_log_probs, forward_backward

__all__ = ["length_sweep", "size_ladder", "random_ids", "slope_ratio", "answer_length_factor", "never_stopping"]


def random_ids(n: int, vocab: int, rng: np.random.Generator) -> list[int]:
    """``n`` random token ids in ``[5, vocab)`` (ids below 5 are special in the test tokenizers)."""
    return rng.integers(5, vocab, size=n).tolist()


def _interleaved(model: Any, prompt_ids: list[int], answer_ids: list[int], repeats: int, device: str,
                 rng: np.random.Generator) -> dict[str, list[float]]:
    """Seconds of the forward and of the gradient pass, ``repeats`` rounds in random order."""
    fns = {"forward": answer_log_probs, "gradient": forward_backward}
    t: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name in rng.permutation(list(fns)):
            t[name].append(clock.timed(functools.partial(fns[name], model, prompt_ids, answer_ids), device)[1])
    return t


def length_sweep(subject: Subject, config: BenchConfig, prompt_ids: list[int] | None = None,
                 progress: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Forward and gradient time against answer length (prompt fixed: ``prompt_ids`` or 64
    random ids) and against prompt length (8-token answer)."""
    from tqdm.auto import tqdm

    rng = np.random.default_rng(config.seed + 7)
    v = subject.vocab
    base = list(prompt_ids) if prompt_ids else random_ids(64, v, rng)
    jobs = [("answer", n, base, random_ids(n, v, rng)) for n in config.answer_lengths]
    jobs += [("prompt", n, random_ids(n, v, rng), random_ids(8, v, rng)) for n in config.prompt_lengths]
    out: dict[str, list[dict[str, Any]]] = {"answer": [], "prompt": []}
    if jobs:  # warm-up
        answer_log_probs(subject.model, jobs[0][2], jobs[0][3])
        forward_backward(subject.model, jobs[0][2], jobs[0][3])
    for kind, n, p_ids, a_ids in tqdm(jobs, desc=f"{subject.spec} lengths", disable=not progress):
        t = _interleaved(subject.model, p_ids, a_ids, config.sweep_repeats, subject.device, rng)
        out[kind].append({"tokens": n, "prompt_tokens": len(p_ids), "answer_tokens": len(a_ids),
                          "forward": float(np.median(t["forward"])), "gradient": float(np.median(t["gradient"])),
                          "forward_runs": t["forward"], "gradient_runs": t["gradient"]})
    return out


class _NoStopTokenizer:
    """A tokenizer that names no end-of-sequence or end-of-turn token (everything else is the
    wrapped tokenizer's)."""

    eos_token_id = None

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer

    def convert_tokens_to_ids(self, token: str) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


@contextlib.contextmanager
def never_stopping(model: Any, tokenizer: Any) -> Iterator[Any]:
    """A tokenizer with which `~gnuq_core.lm.decoding.sample_answers` decodes every answer to
    its token cap: the model's end-of-sequence ids are unset for the duration (restored after)
    and the tokenizer yielded names none. The cost of a decoding step does not depend on the
    token drawn, so this times answers of an exact length with the real sampler."""
    saved = []
    for cfg in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        if cfg is not None and getattr(cfg, "eos_token_id", None) is not None:
            saved.append((cfg, cfg.eos_token_id))
            cfg.eos_token_id = None
    try:
        yield _NoStopTokenizer(tokenizer)
    finally:
        for cfg, eos in saved:
            cfg.eos_token_id = eos


def answer_length_factor(subject: Subject, config: BenchConfig, prompts: Sequence[Sequence[int]],
                         short: int, progress: bool = True) -> dict[str, Any]:
    """How much answers of ``config.long_answer_tokens`` tokens, instead of ``short``, multiply
    the speed-up over the batched sampling baseline.

    Per prompt (`gnuq_core.bench.run` passes those of its reference questions), four passes
    in a random order: N answers sampled as one batch to exactly ``short`` and to exactly
    ``long`` tokens (`never_stopping`), and the gradient pass over a random answer of each
    length. The factor of a prompt is
    ``(sample(long) / gradient(long)) / (sample(short) / gradient(short))``; the result is
    `gnuq_core.bench.summary.ratio_summary` of those (median, 95% interval over prompts) with
    the seconds, ready for the gap table.
    """
    from tqdm.auto import tqdm

    long = config.long_answer_tokens
    if short < 1 or long <= short:
        raise ValueError(f"answer-length factor: the long answers ({long} tokens) must be longer than the short ones "
                         f"({short}); raise long_answer_tokens or set it to 0 to skip the factor")
    rng = np.random.default_rng(config.seed + 13)
    model, v = subject.model, subject.vocab
    seconds: dict[str, list[float]] = {f"{kind}_{n}": [] for kind in ("sample", "gradient") for n in (short, long)}
    with never_stopping(model, subject.tokenizer) as tok:
        for prompt in tqdm(prompts, desc=f"{subject.spec} answer length", disable=not progress):
            p = list(prompt)
            fns = {}
            for n in (short, long):
                fns[f"sample_{n}"] = functools.partial(sample_answers, model, tok, p, config.n_samples, max_new_tokens=n,
                                                       temperature=config.temperature, seed=config.seed)
                fns[f"gradient_{n}"] = functools.partial(forward_backward, model, p, random_ids(n, v, rng))
            for name in rng.permutation(list(fns)):
                result, sec = clock.timed(fns[name], subject.device)
                if name.startswith("sample_"):
                    n = int(name.split("_")[1])
                    lengths = {len(s.answer_ids) for s in result}
                    if lengths != {n}:
                        raise RuntimeError(f"answer-length factor: sampling to exactly {n} tokens gave answers of "
                                           f"{sorted(lengths)} tokens; the model stops by a token this bench does "
                                           "not know")
                seconds[name].append(sec)

    def sample_over_gradient(n: int) -> list[float]:
        return [s / g for s, g in zip(seconds[f"sample_{n}"], seconds[f"gradient_{n}"])]

    factor = ratio_summary(sample_over_gradient(long), sample_over_gradient(short), seed=config.seed)
    return {**factor, "short": short, "long": long, "seconds": seconds,
            "with": f"sample of {long}-token answers ÷ gradient", "without": f"sample of {short}-token answers ÷ gradient"}


def size_ladder(config: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    """Forward and gradient time of random Llama models of growing size (64-token prompt,
    8-token answer); one entry per ``[hidden, layers]`` of ``config.ladder``."""
    from tqdm.auto import tqdm

    out = []
    rng = np.random.default_rng(config.seed + 11)
    for hidden, layers in tqdm(config.ladder, desc="size ladder", disable=not progress):
        sub = load_subject(f"ladder:{hidden}x{layers}", config.device, config.dtype, config.seed)
        p, a = random_ids(64, sub.vocab, rng), random_ids(8, sub.vocab, rng)
        answer_log_probs(sub.model, p, a)
        forward_backward(sub.model, p, a)
        t = _interleaved(sub.model, p, a, config.ladder_repeats, sub.device, rng)
        f, g = float(np.median(t["forward"])), float(np.median(t["gradient"]))
        out.append({"hidden": hidden, "layers": layers, "params": sub.params, "forward": f, "gradient": g,
                    "ratio": g / f, "forward_runs": t["forward"], "gradient_runs": t["gradient"]})
    return out


def slope_ratio(points: list[dict[str, Any]]) -> float:
    """Least-squares slope of the gradient time over the slope of the forward time, against
    tokens, of a `length_sweep` series (NaN with fewer than two points)."""
    if len(points) < 2:
        return float("nan")
    n = np.array([p["tokens"] for p in points], float)
    g = np.polyfit(n, [p["gradient"] for p in points], 1)[0]
    f = np.polyfit(n, [p["forward"] for p in points], 1)[0]
    return float(g / f) if f > 0 else float("nan")
