"""Peak memory (gnuq_core.bench.memory): what it reports, on CPU in a fresh process."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gnuq_core.bench import memory
from gnuq_core.bench.subjects import gradient_bytes, num_parameters


def test_gradient_bytes_counts_tied_weights_once() -> None:
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": head, "mid": torch.nn.Linear(4, 4)})
    assert num_parameters(model) == 40 + 16 + 4
    assert gradient_bytes(model) == 4 * 60


@pytest.mark.subprocess
def test_peak_memory_sees_a_cpu_allocation_in_a_fresh_process() -> None:
    """RSS-based peak, with the exact allocator setting (done in a subprocess: it is process-wide)."""
    code = (
        "import torch\nfrom gnuq_core.bench import memory\n"
        "assert memory.exact_cpu_memory()\n"
        "def f():\n    x = torch.ones(25_000_000)\n    x += 1\n    return float(x[0])\n"
        "r = memory.measure_peak(f, repeats=2)\n"
        "print(r['method'], min(r['runs']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    method, peak = out.stdout.split()
    assert method in ("rss_hwm", "rss_sampled")
    assert 0.9 * 100e6 <= float(peak) <= 1.5 * 100e6  # a 100 MB tensor, every repeat


def test_peak_memory_is_nonnegative() -> None:
    with memory.PeakMemory("cpu") as pm:
        pass
    assert pm.peak >= 0 and pm.method in ("rss_hwm", "rss_sampled")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_peak_memory_cuda() -> None:
    with memory.PeakMemory("cuda") as pm:
        x = torch.ones(1_000_000, device="cuda")
        del x
    assert pm.method == "cuda_max_allocated" and pm.peak >= 4_000_000


@pytest.mark.subprocess
def test_memory_profile_of_every_pass_in_a_subprocess() -> None:
    from gnuq_core.bench.config import BenchConfig
    from gnuq_core.bench.questions import build_questions, prepare_question
    from gnuq_core.bench.subjects import load_subject

    cfg = BenchConfig(models=["random:tiny"], datasets=["a"], n_questions=1, n_samples=2, synthetic_prompt=(10, 12),
                      synthetic_answer=3, memory_repeats=1, threads=1)
    sub = load_subject("random:tiny")
    q = prepare_question(sub, build_questions(sub, cfg)[0], cfg)
    mem = memory.memory_profile(sub, q, cfg)
    assert set(memory.MEMORY_PASSES) == set(mem["peak_bytes"])
    assert all(v >= 0 for v in mem["peak_bytes"].values())
    assert mem["gradient_over_gradient"] >= 0 and mem["exact_cpu_memory"] in (True, False)
