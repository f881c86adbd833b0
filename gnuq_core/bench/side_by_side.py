"""gnuq's batched per-answer norms against the peers that compute per-example norms, timed side by side.

For each batch size B in ``BenchConfig.peer_sizes``, the same B (prompt, answer) pairs of the
QA study's real lengths go through every method of :data:`METHODS`
(`gnuq_core.bench.peers`): gnuq's batched pass, Opacus's per-sample gradients and its ghost
norms, ``torch.func`` per-example gradients, and the floor (forward + backward of the summed
log-probabilities, no norm). Every round times every (method, B) once in a fresh random
order, after one untimed warm-up each; a row gives the median seconds with a bootstrap
interval over rounds, answers per second, the ratio to the floor at that B, and the peak
extra memory of one more call (in-process resident set: a lower bound on CPU). A method
that cannot run says why instead: Opacus's refusals (tied parameters for ghost norms, a
layer with buffers), or per-sample gradients that would not fit in
``BenchConfig.peer_memory_gb`` (``B × P`` numbers); a method whose first (warm-up) call takes longer than
``BenchConfig.peer_max_seconds`` is timed by one more call alone (its row says so: a first call also pays for its memory,
and at B = 64 on SmolLM2 gnuq's took 43 s in one run where its calls in rounds took 23 s in another). Where Opacus refuses a layer (Gemma's
scaled embedding), every method of that model is compared on the parameters Opacus covers
(the embedding and a head tied to it frozen, gnuq's ``groups="no_embeddings"``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gnuq_core.bench import clock, peers
from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.memory import measure_peak
from gnuq_core.bench.questions import Question
from gnuq_core.bench.subjects import Subject
from gnuq_core.lm.batched import batched_forward_backward
from gnuq_core.stats import cluster_bootstrap

__all__ = ["METHODS", "peer_throughput"]

METHODS = ("gnuq", "opacus", "opacus_ghost", "torch_func", "floor")
"""The timed methods, in the order tables show them."""

_INSTANTIATE = {"opacus"}  # per-sample gradients of the whole batch held at once: B × P numbers


def _covered(model: Any) -> tuple[str | None, str]:
    """gnuq's groups for the parameters every peer covers, and the sentence that says so."""
    for module in model.modules():
        if "Embedding" in type(module).__name__ and list(module.buffers(recurse=False)):
            return "no_embeddings", (f"{type(module).__name__} holds a buffer, which Opacus refuses: every method is "
                                     "compared on the parameters without the embedding and the head tied to it")
    return None, "every parameter"


def _frozen_embeddings(model: Any) -> list[tuple[torch.nn.Parameter, bool]]:
    flags = []
    for name, p in model.named_parameters():
        flags.append((p, p.requires_grad))
        if "embed" in name:
            p.requires_grad_(False)
    return flags


def _method(name: str, model: Any, batch: peers.Batch, prompts: list[list[int]], answers: list[list[int]],
            groups: str | None) -> Callable[[], Any]:
    if name == "gnuq":
        return functools.partial(batched_forward_backward, model, prompts, answers, groups=groups)
    if name == "opacus":
        return functools.partial(peers.opacus_norms, model, batch)
    if name == "opacus_ghost":
        return functools.partial(peers.opacus_norms, model, batch, ghost=True)
    if name == "torch_func":
        return functools.partial(peers.torch_func_norms, model, batch)
    return functools.partial(peers.floor_pass, model, batch)


def peer_throughput(subject: Subject, questions: list[Question], config: BenchConfig,
                    progress: bool = True) -> dict[str, Any]:
    """``{"parameters": words, "rows": [...]}``, a row per (B, method): ``batch_size``,
    ``method``, ``seconds`` (median), ``ci`` (bootstrap over rounds), ``answers_per_second``,
    ``over_floor``, ``peak_mb``, ``runs``; or ``why`` where the method cannot run."""
    from tqdm.auto import tqdm

    usable = [q for q in questions if q.answer_ids]
    if not usable or not config.peer_sizes:
        return {"parameters": "", "rows": []}
    model = subject.model
    groups, words = _covered(model)
    flags = _frozen_embeddings(model) if groups else []
    try:
        params = sum(p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())
        calls: dict[tuple[int, str], Callable[[], Any]] = {}
        why: dict[tuple[int, str], str] = {}
        slow: dict[tuple[int, str], tuple[float, float]] = {}
        for b in sorted(set(config.peer_sizes)):
            prompts = [list(usable[i % len(usable)].prompt_ids) for i in range(b)]
            answers = [list(usable[i % len(usable)].answer_ids) for i in range(b)]
            batch = peers.padded_batch(prompts, answers, pad_id=0)
            for name in METHODS:
                need_gb = b * params * 4 / 1e9
                if name in _INSTANTIATE and need_gb > config.peer_memory_gb:
                    why[b, name] = (f"per-sample gradients of {b} × {params:,} numbers ({need_gb:.0f} GB) exceed the "
                                    f"{config.peer_memory_gb:g} GB this benchmark allows")
                    continue
                call = _method(name, model, batch, prompts, answers, groups)
                try:
                    once = clock.timed(call, subject.device)[1]  # warm-up, and the refusals
                except ImportError as err:  # Opacus is in the test extra, not everywhere the benchmark runs
                    why[b, name] = f"{err.name or 'a library'} is not installed (pip install 'gnuq[test]')"
                    continue
                except (NotImplementedError, ValueError, RuntimeError) as err:
                    why[b, name] = f"{type(err).__name__}: {' '.join(str(err).split())[:160]}"
                    continue
                if once > config.peer_max_seconds:  # its rounds would cost the whole build: one warm call
                    slow[b, name] = (once, clock.timed(call, subject.device)[1])
                    continue
                calls[b, name] = call
        rng = np.random.default_rng(config.seed + 29)
        runs: dict[tuple[int, str], list[float]] = {k: [] for k in calls}
        keys = list(calls)
        for _ in tqdm(range(config.peer_repeats), desc=f"{subject.spec} peers", disable=not progress):
            for i in rng.permutation(len(keys)):
                runs[keys[i]].append(clock.timed(calls[keys[i]], subject.device)[1])
        peaks = {k: measure_peak(calls[k], subject.device, repeats=1, warmup=False)["peak_bytes"] / 2**20
                 for k in calls}
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
    rows = []
    for b in sorted(set(config.peer_sizes)):
        floor = (float(np.median(runs[b, "floor"])) if (b, "floor") in runs else
                 slow[b, "floor"][1] if (b, "floor") in slow else float("nan"))
        for name in METHODS:
            if (b, name) in why:
                rows.append({"batch_size": b, "method": name, "why": why[b, name]})
                continue
            if (b, name) in slow:  # no rounds: one warm call after the warm-up, no interval, no memory
                cold, sec = slow[b, name]
                rows.append({"batch_size": b, "method": name, "seconds": sec, "ci": [sec, sec],
                             "answers_per_second": b / sec, "over_floor": sec / floor, "peak_mb": float("nan"),
                             "runs": [sec], "note": f"timed once, after a warm-up call of {cold:.0f} s (more than "
                                                    f"peer_max_seconds = {config.peer_max_seconds:g})"})
                continue
            sec = float(np.median(runs[b, name]))
            lo, hi = cluster_bootstrap(runs[b, name], seed=config.seed) if len(runs[b, name]) > 1 else (sec, sec)
            rows.append({"batch_size": b, "method": name, "seconds": sec, "ci": [float(lo), float(hi)],
                         "answers_per_second": b / sec, "over_floor": sec / floor, "peak_mb": peaks[b, name],
                         "runs": runs[b, name]})
    return {"parameters": words, "rows": rows}
