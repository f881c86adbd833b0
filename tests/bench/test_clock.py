"""Wall/CPU time and the forward/backward split (gnuq_core.bench.clock): what they report, not speed."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from gnuq_core.bench import clock


def test_timed_returns_result_and_wall_time() -> None:
    out, sec = clock.timed(lambda: (time.sleep(0.02), 7)[1])
    assert out == 7
    assert 0.015 <= sec < 2.0


@pytest.mark.subprocess
def test_timed_cpu_counts_work_not_sleep() -> None:
    """Process CPU time counts every thread of the process, so it is measured in a fresh
    interpreter with no other threads (here, torch's pools may still spin after earlier tests)."""
    code = (
        "import time\nfrom gnuq_core.bench import clock\n"
        "_, wall, cpu = clock.timed_cpu(lambda: time.sleep(0.2))\n"
        "def spin():\n    t = time.process_time()\n    while time.process_time() - t < 0.1:\n        pass\n"
        "_, wall2, cpu2 = clock.timed_cpu(spin)\n"
        "print(wall, cpu, wall2, cpu2)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    wall, cpu, wall2, cpu2 = (float(x) for x in out.stdout.split())
    assert wall >= 0.19 and cpu < 0.5 * wall  # sleeping is not work
    assert cpu2 >= 0.1 and wall2 >= cpu2 - 0.01  # 0.1 s of spinning is


def test_backward_split_parts_add_up_and_restore_backward() -> None:
    orig = torch.autograd.backward
    w = torch.randn(200, 200, requires_grad=True)

    def work() -> None:
        time.sleep(0.01)  # "forward"
        y = (w @ w).sum()
        torch.autograd.backward(y, inputs=[w])
        time.sleep(0.01)  # "post"

    t0 = time.perf_counter()
    with clock.BackwardSplit() as s:
        work()
    total = time.perf_counter() - t0
    assert torch.autograd.backward is orig
    assert set(s.parts) == {"forward", "backward", "post"}
    assert s.parts["forward"] >= 0.009 and s.parts["post"] >= 0.009 and s.parts["backward"] > 0
    assert sum(s.parts.values()) <= total + 1e-3


def test_backward_split_sees_tensor_backward() -> None:
    w = torch.randn(50, 50, requires_grad=True)
    with clock.BackwardSplit() as s:
        (w * w).sum().backward()
    assert s.parts["backward"] > 0


def test_backward_split_without_backward_is_all_forward() -> None:
    with clock.BackwardSplit() as s:
        time.sleep(0.005)
    assert s.parts["backward"] == 0.0 and s.parts["forward"] >= 0.004


def test_backward_split_restores_on_error() -> None:
    orig = torch.autograd.backward
    with pytest.raises(RuntimeError), clock.BackwardSplit():
        raise RuntimeError("boom")
    assert torch.autograd.backward is orig


def test_torch_threads_restores() -> None:
    old = torch.get_num_threads()
    with clock.torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == old
