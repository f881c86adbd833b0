"""Would symmetric Gram products make the exact norm cheaper here? Timed, not assumed.

The ghost norms form T×T Gram matrices ``X Xᵀ`` (`gnuq_core.estimators.hooks`); a Gram
matrix is symmetric, so its upper triangle would do, about half the multiply-adds
(`gnuq_core.lm.floor.norm_multiply_adds`, ``norm_symmetric``). Whether that half is
realised depends on the kernels at the lengths of the QA prompts (T of a few dozen to a
few hundred rows), where small matrix products run far from peak. `gram_kernels` times,
side by side in one run, on the Gram widths of one model's gradient pass, the ways
`gnuq_core.lm.floor.gram_products` forms a Gram matrix (in full, as the engine does; as the
lower triangle in row blocks; with BLAS ``syrk``, on one CPU thread only) and a no-grad
forward of the same tokens (the unit of the above-floor target).

Only the Gram matrix is timed, not the inner product with the other one (which the
triangular forms make more fiddly): the symmetric kernels' best case.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from gnuq_core.bench.summary import ratio_summary
from gnuq_core.lm.floor import gram_products, gram_widths
from gnuq_core.lm.gradient import answer_log_probs

__all__ = ["gram_kernels"]


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Every BLAS on one thread, the caller's (threadpoolctl where installed): only while
    torch runs on one thread too, so torch's own products are not held back."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(1, user_api="blas"):
        yield


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gram_kernels(model: Any, prompt_ids: Sequence[int], answer_ids: Sequence[int], *, repeats: int,
                 device: str = "cpu", seed: int = 0) -> dict[str, Any]:
    """Time the Gram products (`gnuq_core.lm.floor.gram_products`) of one answer's gradient pass.

    Each round times every (width, kernel) once and one no-grad forward of the answer
    (`gnuq_core.lm.gradient.answer_log_probs`), in a shuffled order, and sums each kernel's
    times over the pass's Gram matrices (`gnuq_core.lm.floor.gram_widths`, random inputs of
    the model's dtype: the values do not change the cost). Per kernel the result holds the
    median sum, its per-round ratio to the full product and to the forward
    (`gnuq_core.bench.summary.ratio_summary`: median and bootstrap 95% interval over rounds),
    and the ratio of multiply-adds it would reach.
    Nothing is timed (no kernels) where the pass forms no Gram matrix at this length.
    """
    if repeats < 1:
        raise ValueError(f"repeats={repeats}: time at least one round")
    rows = len(prompt_ids) + len(answer_ids)
    widths = gram_widths(model, rows)
    if not widths:  # every layer takes its weight gradient at this length: no Gram matrix to time
        return {"rows": rows, "repeats": repeats, "widths": {}, "forward_seconds": float("nan"), "kernels": {},
                "best": None}
    kernels = gram_products(device, torch.get_num_threads())
    dtype = next(model.parameters()).dtype
    dtype = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype  # as the engine forms them
    gen = torch.Generator().manual_seed(seed)
    inputs = {w: torch.randn(rows, w, generator=gen, dtype=dtype).to(device) for w in widths}
    jobs: list[tuple[int, str]] = [(w, name) for w in widths for name in kernels] + [(0, "forward")]

    def run(w: int, name: str) -> None:
        if name == "forward":
            answer_log_probs(model, prompt_ids, answer_ids)
        else:
            kernels[name][0](inputs[w])

    order = random.Random(seed)
    totals = {name: np.zeros(repeats) for name in [*kernels, "forward"]}
    blas = _one_blas_thread() if "syrk" in kernels else contextlib.nullcontext()  # torch's own BLAS untouched
    with blas, torch.no_grad():
        for w, name in jobs:  # warm-up
            run(w, name)
        for r in range(repeats):
            order.shuffle(jobs)
            for w, name in jobs:
                _sync(device)
                t0 = time.perf_counter()
                run(w, name)
                _sync(device)
                totals[name][r] += (widths[w] if w else 1) * (time.perf_counter() - t0)
    out: dict[str, Any] = {"rows": rows, "repeats": repeats, "widths": {str(w): n for w, n in sorted(widths.items())},
                           "forward_seconds": float(np.median(totals["forward"])), "kernels": {}}
    for name, (_, ideal) in kernels.items():
        out["kernels"][name] = {"seconds": float(np.median(totals[name])), "ideal": ideal,
                                "ratio": ratio_summary(totals[name], totals["full"], seed=seed),
                                "over_forward": ratio_summary(totals[name], totals["forward"], seed=seed)}
    symmetric = {n: k for n, k in out["kernels"].items() if n != "full"}
    out["best"] = min(symmetric, key=lambda n: symmetric[n]["ratio"]["median"]) if symmetric else None
    return out
