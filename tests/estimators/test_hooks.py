"""Hook-gathered squared gradient norms."""

from __future__ import annotations

import math

import pytest
import torch

from gnuq_core.estimators.hooks import hooked_sq_norms, raise_if_non_finite, sq_norm


def test_sq_norm_accurate_without_float64_copy() -> None:
    torch.manual_seed(0)
    for scale in [1.0, 1e-12, 1e-30, 1e20, 0.0]:
        g = torch.randn(300, 700) * scale
        want = float((g.double() ** 2).sum())
        got = float(sq_norm(g))
        assert got == pytest.approx(want, rel=1e-6, abs=1e-300), scale
    assert float(sq_norm(torch.tensor([3.0, 4.0]))) == 25.0
    assert math.isinf(float(sq_norm(torch.tensor([[float("inf"), 1.0]]))))


def test_hooks_match_plain_backward_and_restore_the_model() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    x = torch.randn(5, 3, dtype=torch.float64)
    grads = torch.autograd.grad(net(x).sum(), list(net.parameters()))
    params = {id(p): p for p in net.parameters()}
    first_layer = [id(net[0].weight), id(net[0].bias)]
    net[2].bias.requires_grad_(False)
    marker = torch.ones_like(net[0].weight)
    net[0].weight.grad = marker
    with hooked_sq_norms(params, first_layer) as norms:
        assert not net[2].weight.requires_grad, "unselected parameters get no gradient"
        net(x).sum().backward()
    assert set(norms.sq) == set(first_layer) and not norms.repeated
    assert norms.floats()[id(net[0].weight)] == pytest.approx(float((grads[0] ** 2).sum()), rel=1e-12)
    assert norms.floats()[id(net[0].bias)] == pytest.approx(float((grads[1] ** 2).sum()), rel=1e-12)
    assert net[0].weight.grad is marker and net[0].bias.grad is None
    assert net[2].weight.requires_grad and not net[2].bias.requires_grad


def test_non_finite_names_parameter_and_group() -> None:
    with pytest.raises(FloatingPointError, match=r"'w' \(group 'head'\); fix it"):
        raise_if_non_finite({1: float("nan")}, [1], {1: ["w"]}, {"head": [1]}, "fix it")
    raise_if_non_finite({1: 2.0}, [1], {1: ["w"]}, None, "fix it")
