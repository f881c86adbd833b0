"""Peak memory of the passes: what each one needs beyond the model's own weights.

`PeakMemory` measures the peak *extra* memory of a block over what was in use when it
started. On CUDA it uses ``torch.cuda.max_memory_allocated`` (exact, tensors only). On CPU
it uses the process's resident set size: the kernel's high-water mark ``VmHWM``, reset
through ``/proc/self/clear_refs`` (Linux >= 4.0), or, where that is not allowed, a thread
that samples the RSS every 0.5 ms (psutil or /proc). RSS only follows the tensors if freed
memory goes back to the system: glibc keeps freed blocks below its *dynamic* mmap
threshold (up to 32 MB) in the heap, so after a warm-up nothing seems to be allocated any
more. `exact_cpu_memory` therefore fixes the threshold at 64 KiB (``mallopt``), after which
every tensor larger than 64 KiB is its own mapping and returned on free. That makes
allocation slower (page faults), so on CPU `memory_profiles` measures in a separate process
(``python -m gnuq_core.bench --memory-worker``), never while timing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from gnuq_core.bench.config import GRAD_GROUPS, BenchConfig
from gnuq_core.bench.passes import make_passes
from gnuq_core.bench.questions import Question
from gnuq_core.bench.subjects import Subject, gradient_bytes, load_subject

__all__ = ["exact_cpu_memory", "rss_bytes", "PeakMemory", "measure_peak", "MEMORY_PASSES", "memory_in_process",
           "memory_worker", "memory_profiles", "memory_profile"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MEMORY_PASSES = ("forward", "gradient", *(f"gradient_{g}" for g in GRAD_GROUPS), "reference", "generate", "sample",
                 "p_true")


# --------------------------------------------------------------------------- measuring


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
    return {"peak_bytes": float(statistics.median(runs)), "runs": runs, "method": method}


# --------------------------------------------------------------------------- per pass


def memory_in_process(subject: Subject, q: Question, config: BenchConfig) -> dict[str, Any]:
    """Peak extra memory of each pass in `MEMORY_PASSES` for question ``q``, in this process."""
    passes = make_passes(subject, q, config, None, include=MEMORY_PASSES)
    out: dict[str, Any] = {}
    for i, name in enumerate(MEMORY_PASSES):  # one warm-up (the first pass) absorbs one-time allocations
        out[name] = measure_peak(passes[name], subject.device, config.memory_repeats, warmup=i == 0)
    return out


def memory_worker(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Child-process side of `memory_profiles` (CPU): exact RSS, then per model: load,
    measure, report (one process for all models, so torch is imported once)."""
    import torch

    exact = exact_cpu_memory()
    config = BenchConfig(**payload["config"])
    if config.threads:
        torch.set_num_threads(int(config.threads))
    out = []
    for job in payload["jobs"]:
        sub = load_subject(job["spec"], config.device, config.dtype, config.seed)
        q = Question(**job["question"])
        res = memory_in_process(sub, q, config)
        out.append({"passes": res, "exact_cpu_memory": exact, "params": sub.params,
                    "gradient_bytes": gradient_bytes(sub.model)})
    return out


def _memory_summary(raw: dict[str, Any], q: Question) -> dict[str, Any]:
    p = raw["passes"]
    grad_b = raw["gradient_bytes"]
    peak = {k: v["peak_bytes"] for k, v in p.items()}
    return {**raw, "peak_bytes": peak, "method": next(iter(p.values()))["method"] if p else "",
            "question": q.id, "prompt_tokens": len(q.prompt_ids), "answer_tokens": len(q.answer_ids),
            "gradient_over_gradient": peak["gradient"] / grad_b,
            "gradient_over_forward": peak["gradient"] / peak["forward"] if peak["forward"] >= 1e6 else float("nan"),
            "reference_over_gradient": peak["reference"] / grad_b}


def memory_profiles(jobs: list[tuple[Subject, Question]], config: BenchConfig) -> list[dict[str, Any]]:
    """Peak extra memory per pass for each ``(subject, question)``, and the ratios the
    targets need (extra peak of the gradient pass / one fp32 gradient, / the no-grad forward;
    NaN where the forward's peak is below 1 MB, as for tiny models).

    CPU: in one child process (``python -m gnuq_core.bench --memory-worker``) with
    `exact_cpu_memory`; CUDA: in this process with the allocator's statistics.
    """
    if config.device.startswith("cuda"):
        raws = [{"passes": memory_in_process(s, q, config), "exact_cpu_memory": None, "params": s.params,
                 "gradient_bytes": gradient_bytes(s.model)} for s, q in jobs]
    else:
        payload = {"config": asdict(config), "jobs": [{"spec": s.spec, "question": asdict(q)} for s, q in jobs]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(payload, f)
        env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}
        try:
            proc = subprocess.run([sys.executable, "-m", "gnuq_core.bench", "--memory-worker", f.name],
                                  capture_output=True, text=True, env=env, timeout=3600,
                                  check=False)
        finally:
            os.unlink(f.name)
        if proc.returncode != 0:
            raise RuntimeError(f"memory worker failed ({', '.join(s.spec for s, _ in jobs)}):\n{proc.stderr[-3000:]}")
        raws = json.loads(proc.stdout.strip().splitlines()[-1])
    return [_memory_summary(r, q) for r, (_, q) in zip(raws, jobs)]


def memory_profile(subject: Subject, q: Question, config: BenchConfig) -> dict[str, Any]:
    """`memory_profiles` for one model."""
    return memory_profiles([(subject, q)], config)[0]
