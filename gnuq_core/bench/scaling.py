"""How cost grows: the forward and the gradient pass against answer length, prompt length
and model size (random token ids; the passes interleaved in a fresh random order).

Both timed functions are the engine's: `gnuq_core.lm.gradient.answer_log_probs` (one no-grad
forward, LM head at the answer positions) and `gnuq_core.lm.gradient.forward_backward`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gnuq_core.bench import clock
from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.subjects import Subject, load_subject

__all__ = ["length_sweep", "size_ladder", "random_ids", "slope_ratio"]


def random_ids(n: int, vocab: int, rng: np.random.Generator) -> list[int]:
    """``n`` random token ids in ``[5, vocab)`` (ids below 5 are special in the test tokenizers)."""
    return rng.integers(5, vocab, size=n).tolist()


def _interleaved(model: Any, prompt_ids: list[int], answer_ids: list[int], repeats: int, device: str,
                 rng: np.random.Generator) -> dict[str, list[float]]:
    """Seconds of the forward and of the gradient pass, ``repeats`` rounds in random order."""
    from gnuq_core.lm.gradient import answer_log_probs, forward_backward

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

    from gnuq_core.lm.gradient import answer_log_probs, forward_backward

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


def size_ladder(config: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    """Forward and gradient time of random Llama models of growing size (64-token prompt,
    8-token answer); one entry per ``[hidden, layers]`` of ``config.ladder``."""
    from tqdm.auto import tqdm

    from gnuq_core.lm.gradient import answer_log_probs, forward_backward

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
