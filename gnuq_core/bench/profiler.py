"""Where the time goes: a torch.profiler table of one forward and one gradient pass.

Both profiled functions are the engine's (`gnuq_core.lm.gradient.answer_log_probs`,
`gnuq_core.lm.gradient.forward_backward`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from gnuq_core.bench import clock
from gnuq_core.bench.questions import Question
from gnuq_core.bench.subjects import Subject
from gnuq_core.lm.gradient import answer_log_probs, forward_backward

__all__ = ["profile_ops", "matmul_share", "MATMUL_OPS"]


@contextlib.contextmanager
def _quiet_stderr_fd() -> Any:
    """Send file descriptor 2 to /dev/null for the block (the profiler's C++ layer prints
    start/stop lines there, which would land in a notebook as stderr output)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def profile_ops(subject: Subject, q: Question, top: int = 12) -> dict[str, Any]:
    """torch.profiler of one forward and one gradient-norm pass: the top operators by
    self time (CPU or CUDA), to see where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if subject.device.startswith("cuda") else [])
    key = "self_cuda_time_total" if subject.device.startswith("cuda") else "self_cpu_time_total"
    out = {}
    for name, fn in (("forward", answer_log_probs), ("gradient", forward_backward)):
        fn(subject.model, q.prompt_ids, q.answer_ids)
        with _quiet_stderr_fd(), profile(activities=acts) as prof:
            fn(subject.model, q.prompt_ids, q.answer_ids)
            clock.sync(subject.device)
        ev = prof.key_averages()
        rows = sorted(ev, key=lambda e: getattr(e, key, 0), reverse=True)[:top]
        out[name] = {"total_us": float(sum(getattr(e, key, 0) for e in ev)),
                     "ops": [{"op": e.key, "self_us": float(getattr(e, key, 0)), "calls": int(e.count)}
                             for e in rows]}
    return out


MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::_scaled_dot_product",
              "aten::baddbmm")


def matmul_share(entry: dict[str, Any]) -> float:
    """Share of the operator self time spent in matrix products (among the listed top
    operators of a `profile_ops` entry, over the total)."""
    tot = entry["total_us"]
    mm = sum(o["self_us"] for o in entry["ops"] if o["op"].startswith(MATMUL_OPS))
    return float(mm / tot) if tot > 0 else float("nan")
