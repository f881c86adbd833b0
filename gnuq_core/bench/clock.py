"""Wall and CPU time of one call, split of a gradient pass, and torch's thread count.

`timed` runs a callable once and returns ``(result, seconds)``; on a GPU it synchronises
before and after, so the time covers the kernels, not their launch. `timed_cpu` also
returns the process CPU seconds (all threads of the process: with torch's intra-op
threads that is the work done, which other processes competing for the cores do not
inflate). `BackwardSplit` splits a call that runs ``torch.autograd.backward`` (such as
`gnuq_core.lm.gradient.forward_backward`) into its forward, backward and post-backward
parts without touching that function: for the duration of the ``with`` block it wraps
``torch.autograd.backward`` to note when the backward starts and ends.

Peak memory is in `gnuq_core.bench.memory`, statistics of timings in
`gnuq_core.bench.summary`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["sync", "timed", "timed_cpu", "BackwardSplit", "torch_threads"]


# --------------------------------------------------------------------------- time


def sync(device: Any = None) -> None:
    """Wait for queued GPU work on ``device`` (no-op on CPU or without CUDA)."""
    import torch

    if device is None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        return
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed(fn: Callable[[], Any], device: Any = None) -> tuple[Any, float]:
    """Run ``fn()`` once; return ``(result, wall seconds)``, synchronising a GPU around it."""
    out, wall, _ = timed_cpu(fn, device)
    return out, wall


def timed_cpu(fn: Callable[[], Any], device: Any = None) -> tuple[Any, float, float]:
    """Run ``fn()`` once; return ``(result, wall seconds, process CPU seconds)``.

    CPU seconds (all threads of the process) are robust to other processes competing for
    the cores, which wall time is not; with one torch thread they measure the work done.
    """
    sync(device)
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0, time.process_time() - c0


@dataclass
class BackwardSplit:
    """Split the wall time of a block into forward / backward / after-backward parts.

    Use as ``with BackwardSplit(device) as s: forward_backward(...)``; afterwards
    ``s.parts`` is ``{"forward": ..., "backward": ..., "post": ...}`` (seconds), where
    "forward" runs from the start of the block to the start of the first
    ``torch.autograd.backward`` call (set-up and the grad-enabled forward), "backward"
    covers the backward calls (including the per-parameter norm hooks) and "post" the
    rest (e.g. the head/embedding Gram terms). With no backward call, everything is
    "forward".
    """

    device: Any = None
    parts: dict[str, float] = field(default_factory=dict)
    _marks: list[tuple[str, float]] = field(default_factory=list)

    def __enter__(self) -> "BackwardSplit":
        import torch

        self._orig = torch.autograd.backward
        orig, marks, device = self._orig, self._marks, self.device

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            sync(device)
            marks.append(("start", time.perf_counter()))
            try:
                return orig(*args, **kwargs)
            finally:
                sync(device)
                marks.append(("end", time.perf_counter()))

        torch.autograd.backward = wrapped
        sync(device)
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        sync(self.device)
        t1 = time.perf_counter()
        torch.autograd.backward = self._orig
        starts = [t for k, t in self._marks if k == "start"]
        ends = [t for k, t in self._marks if k == "end"]
        if not starts:
            self.parts = {"forward": t1 - self._t0, "backward": 0.0, "post": 0.0}
        else:
            back = sum(e - s for s, e in zip(starts, ends))
            self.parts = {"forward": starts[0] - self._t0, "backward": back,
                          "post": max(t1 - self._t0 - (starts[0] - self._t0) - back, 0.0)}


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Temporarily set ``torch.set_num_threads(n)`` (no-op for None)."""
    import torch

    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)
