"""Timing and peak-memory helpers for the efficiency benchmark (`gnuq_core.bench`).

Wall time
    `timed` runs a callable once and returns ``(result, seconds)``; on a GPU it
    synchronises before and after, so the time covers the kernels, not their launch.
    `BackwardSplit` splits a call that runs one ``torch.autograd.backward`` (such as
    `gnuq_core.lm.gradient.forward_backward`) into its forward, backward and post-backward
    parts, without touching that function: for the duration of the ``with`` block it
    wraps ``torch.autograd.backward`` to note when the backward starts and ends.

Peak memory
    `PeakMemory` measures the peak *extra* memory of a block over what was in use when it
    started. On CUDA it uses ``torch.cuda.max_memory_allocated`` (exact, tensors only).
    On CPU it uses the process's resident set size: the kernel's high-water mark
    ``VmHWM``, reset through ``/proc/self/clear_refs`` (Linux >= 4.0), or, where that is
    not allowed, a thread that samples the RSS every 0.5 ms (psutil or /proc). RSS only
    follows the tensors if freed memory goes back to the system: glibc keeps freed blocks
    below its *dynamic* mmap threshold (up to 32 MB) in the heap, so after a warm-up
    nothing seems to be allocated any more. `exact_cpu_memory` therefore fixes the
    threshold at 64 KiB (``mallopt``), after which every tensor larger than 64 KiB is its
    own mapping and returned on free. That makes allocation slower (page faults), so the
    benchmark measures memory in a separate process (`gnuq_core.bench`), never while
    timing.

Statistics
    `summary` (median, quartiles), `bootstrap_ci` (percentile bootstrap of any statistic
    over independent units, e.g. questions) and `ratio_summary` (paired ratios, median and
    bootstrap CI).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["sync", "timed", "timed_cpu", "BackwardSplit", "exact_cpu_memory", "rss_bytes", "PeakMemory", "measure_peak",
           "summary", "bootstrap_ci", "ratio_summary", "gradient_bytes", "num_parameters"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


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


# --------------------------------------------------------------------------- memory


def exact_cpu_memory(threshold: int = 64 * 1024) -> bool:
    """Make freed CPU tensors go back to the system, so RSS follows live tensors.

    Sets glibc's mmap threshold (and trim threshold) to ``threshold`` bytes, which also
    turns off its dynamic adjustment. Process-wide and permanent; it slows allocation,
    so call it only in a process that measures memory. Returns False where there is no
    glibc ``mallopt`` (then RSS under-reports repeated peaks).
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, int(threshold)) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, int(threshold)) == 1 and ok
    except (OSError, AttributeError):
        return False
    return bool(ok)


def rss_bytes() -> int:
    """Resident set size of this process in bytes (/proc, else psutil)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import psutil

        return int(psutil.Process().memory_info().rss)


def _hwm_bytes() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return _hwm_bytes() is not None


class PeakMemory:
    """Peak extra memory of a ``with`` block, in bytes (``.peak``), over its start.

    Parameters
    ----------
    device : str or torch.device, optional
        ``"cuda..."``: CUDA allocator statistics; anything else: process RSS (see the
        module docstring for the caveats and `exact_cpu_memory`).
    interval : float
        Sampling period (seconds) of the fallback RSS sampler.

    Attributes
    ----------
    peak : int
        Peak bytes above the level at entry (>= 0).
    method : str
        ``"cuda_max_allocated"``, ``"rss_hwm"`` or ``"rss_sampled"``.
    """

    def __init__(self, device: Any = None, interval: float = 5e-4) -> None:
        self.device = str(device) if device is not None else "cpu"
        self.interval = interval
        self.peak = 0
        self.method = ""

    def __enter__(self) -> "PeakMemory":
        import torch

        if self.device.startswith("cuda"):
            self.method = "cuda_max_allocated"
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._base = torch.cuda.memory_allocated(self.device)
            return self
        self._base = rss_bytes()
        if _reset_hwm():
            self.method = "rss_hwm"
            self._base = rss_bytes()
            return self
        self.method = "rss_sampled"
        self._stop = threading.Event()
        self._max = self._base

        def sample() -> None:
            while not self._stop.is_set():
                self._max = max(self._max, rss_bytes())
                time.sleep(self.interval)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch

        if self.method == "cuda_max_allocated":
            torch.cuda.synchronize(self.device)
            top = torch.cuda.max_memory_allocated(self.device)
        elif self.method == "rss_hwm":
            top = _hwm_bytes() or rss_bytes()
        else:
            self._stop.set()
            self._thread.join()
            top = max(self._max, rss_bytes())
        self.peak = max(int(top) - int(self._base), 0)


def measure_peak(fn: Callable[[], Any], device: Any = None, repeats: int = 3, warmup: bool = True) -> dict[str, Any]:
    """Peak extra memory of ``fn()`` over ``repeats`` runs after one warm-up run.

    Returns ``{"peak_bytes": median, "runs": [...], "method": ...}``. The warm-up absorbs
    one-time allocations (thread pools, caches) that are not the method's cost; skip it
    (``warmup=False``) when something similar already ran in this process.
    """
    import gc

    if warmup:
        fn()
    runs = []
    method = ""
    for _ in range(max(1, repeats)):
        gc.collect()
        with PeakMemory(device) as pm:
            fn()
        runs.append(pm.peak)
        method = pm.method
    return {"peak_bytes": float(np.median(runs)), "runs": runs, "method": method}


def num_parameters(model: Any) -> int:
    """Number of distinct parameter elements (tied matrices counted once)."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    return int(sum(seen.values()))


def gradient_bytes(model: Any, bytes_per_element: int = 4) -> int:
    """Size of one full gradient of ``model`` in float32 (tied matrices once), in bytes."""
    return num_parameters(model) * bytes_per_element


# --------------------------------------------------------------------------- statistics


def summary(values: Sequence[float]) -> dict[str, float]:
    """``{"median", "q25", "q75", "mean", "n"}`` of finite ``values`` (NaN when empty)."""
    a = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if a.size == 0:
        return {"median": float("nan"), "q25": float("nan"), "q75": float("nan"), "mean": float("nan"), "n": 0}
    q25, med, q75 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "mean": float(a.mean()), "n": int(a.size)}


def bootstrap_ci(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.median, *,
                 n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``stat`` over independent ``values``.

    With one value the interval is that value (no spread can be estimated); with none,
    ``(nan, nan)``.
    """
    a = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if a.size == 0:
        return float("nan"), float("nan")
    if a.size == 1:
        return float(a[0]), float(a[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n_boot, a.size))
    boots = np.array([stat(a[i]) for i in idx])
    lo, hi = np.percentile(boots, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return float(lo), float(hi)


def ratio_summary(numerator: Sequence[float], denominator: Sequence[float], *, n_boot: int = 2000,
                  seed: int = 0) -> dict[str, Any]:
    """Paired ratios ``numerator[i] / denominator[i]`` (one per question): median, IQR,
    bootstrap 95% CI of the median, and the ratio of the medians."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"{num.size} numerators but {den.size} denominators: ratios must be paired")
    ok = np.isfinite(num) & np.isfinite(den) & (den > 0)
    r = num[ok] / den[ok]
    s = summary(r)
    lo, hi = bootstrap_ci(r, n_boot=n_boot, seed=seed)
    med_num = float(np.median(num[ok])) if ok.any() else float("nan")
    med_den = float(np.median(den[ok])) if ok.any() else float("nan")
    return {**s, "ci": [lo, hi], "ratio_of_medians": med_num / med_den if med_den else float("nan"),
            "values": r.tolist()}


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
