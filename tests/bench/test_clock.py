"""Timing and memory helpers (gnuq_core.bench.clock): correctness of what they report, not speed."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from gnuq_core.bench import clock as timing


def test_timed_returns_result_and_wall_time() -> None:
    out, sec = timing.timed(lambda: (time.sleep(0.02), 7)[1])
    assert out == 7
    assert 0.015 <= sec < 2.0


def test_timed_cpu_counts_work_not_sleep() -> None:
    _, wall, cpu = timing.timed_cpu(lambda: time.sleep(0.05))
    assert wall >= 0.04 and cpu < wall


def test_backward_split_parts_add_up_and_restore_backward() -> None:
    orig = torch.autograd.backward
    w = torch.randn(200, 200, requires_grad=True)

    def work() -> None:
        time.sleep(0.01)  # "forward"
        y = (w @ w).sum()
        torch.autograd.backward(y, inputs=[w])
        time.sleep(0.01)  # "post"

    t0 = time.perf_counter()
    with timing.BackwardSplit() as s:
        work()
    total = time.perf_counter() - t0
    assert torch.autograd.backward is orig
    assert set(s.parts) == {"forward", "backward", "post"}
    assert s.parts["forward"] >= 0.009 and s.parts["post"] >= 0.009 and s.parts["backward"] > 0
    assert sum(s.parts.values()) <= total + 1e-3


def test_backward_split_without_backward_is_all_forward() -> None:
    with timing.BackwardSplit() as s:
        time.sleep(0.005)
    assert s.parts["backward"] == 0.0 and s.parts["forward"] >= 0.004


def test_backward_split_restores_on_error() -> None:
    orig = torch.autograd.backward
    with pytest.raises(RuntimeError), timing.BackwardSplit():
        raise RuntimeError("boom")
    assert torch.autograd.backward is orig


def test_summary_and_bootstrap() -> None:
    s = timing.summary([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert s["n"] == 4 and s["median"] == 2.5 and s["q25"] == 1.75 and s["q75"] == 3.25
    assert np.isnan(timing.summary([])["median"])
    lo, hi = timing.bootstrap_ci(np.arange(100.0), seed=1)
    assert lo < 49.5 < hi and hi - lo < 30
    assert timing.bootstrap_ci([3.0]) == (3.0, 3.0)
    assert timing.bootstrap_ci([1.0, 2.0, 3.0], seed=5) == timing.bootstrap_ci([1.0, 2.0, 3.0], seed=5)


def test_ratio_summary_is_paired() -> None:
    r = timing.ratio_summary([2.0, 4.0, 9.0], [1.0, 2.0, 3.0])
    assert r["values"] == [2.0, 2.0, 3.0]
    assert r["median"] == 2.0 and r["ci"][0] <= 2.0 <= r["ci"][1]
    assert r["ratio_of_medians"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="paired"):
        timing.ratio_summary([1.0], [1.0, 2.0])
    assert timing.ratio_summary([1.0, 5.0], [0.0, 1.0])["values"] == [5.0]  # zero time dropped


def test_gradient_bytes_counts_tied_weights_once() -> None:
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": head, "mid": torch.nn.Linear(4, 4)})
    assert timing.num_parameters(model) == 40 + 16 + 4
    assert timing.gradient_bytes(model) == 4 * 60


def test_peak_memory_sees_a_cpu_allocation_in_a_fresh_process() -> None:
    """RSS-based peak, with the exact allocator setting (done in a subprocess: it is process-wide)."""
    code = (
        "import torch\nfrom gnuq_core.bench import clock as timing\n"
        "assert timing.exact_cpu_memory()\n"
        "def f():\n    x = torch.ones(25_000_000)\n    x += 1\n    return float(x[0])\n"
        "r = timing.measure_peak(f, repeats=2)\n"
        "print(r['method'], min(r['runs']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    method, peak = out.stdout.split()
    assert method in ("rss_hwm", "rss_sampled")
    assert 0.9 * 100e6 <= float(peak) <= 1.5 * 100e6  # a 100 MB tensor, every repeat


def test_peak_memory_nested_blocks_and_nonnegative() -> None:
    with timing.PeakMemory("cpu") as pm:
        pass
    assert pm.peak >= 0 and pm.method in ("rss_hwm", "rss_sampled")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_peak_memory_cuda() -> None:
    with timing.PeakMemory("cuda") as pm:
        x = torch.ones(1_000_000, device="cuda")
        del x
    assert pm.method == "cuda_max_allocated" and pm.peak >= 4_000_000


def test_torch_threads_restores() -> None:
    old = torch.get_num_threads()
    with timing.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == old
