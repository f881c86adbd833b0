"""gnuq_core.estimators.norm_rules: the one registry of per-layer norm rules, equal to plain
autograd per answer, shared inputs kept once, the model left as it was."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gnuq_core.estimators.norm_rules import LINEAR, NORM_RULES, choose_rules, register_norm_rule, rule_for, rule_hooks


class _Net(torch.nn.Module):
    """Two linear layers that read the same input (as q/k/v do), one after them, a LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(5, 7), torch.nn.Linear(5, 3, bias=False), torch.nn.Linear(7, 2)
        self.norm = torch.nn.LayerNorm(5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        ya, yb = self.a(x), self.b(x)  # one input, one call after the other
        return (self.c(torch.tanh(ya)) ** 2).sum((1, 2)) + torch.sin(yb).sum((1, 2))


def _per_answer_plain(net: torch.nn.Module, x: torch.Tensor, lengths: list[int]) -> dict[str, list[float]]:
    """‖∂f_b/∂θ‖² of each parameter for each answer b alone (its real rows only), by autograd."""
    out: dict[str, list[float]] = {n: [] for n, _ in net.named_parameters()}
    for b, t in enumerate(lengths):
        grads = torch.autograd.grad(net(x[b:b + 1, :t]).sum(), list(net.parameters()))
        for (n, _), g in zip(net.named_parameters(), grads):
            out[n].append(float((g.double() ** 2).sum()))
    return out


def test_rules_give_each_answer_its_own_norm_and_leave_the_model_as_it_was() -> None:
    torch.manual_seed(1)
    net = _Net().double()
    x = torch.randn(3, 6, 5, dtype=torch.float64)
    lengths = [6, 4, 1]  # padded rows of answers 1 and 2 are masked
    mask = torch.tensor([[1] * t + [0] * (6 - t) for t in lengths])
    want = _per_answer_plain(net, x, lengths)
    net.b.weight.requires_grad_(False)  # a caller's flag comes back as it was
    ids = {id(p): n for n, p in net.named_parameters()}
    modules, rest = choose_rules(net, list(ids))
    assert rest == [] and set(modules) == {net.a, net.b, net.c, net.norm}
    with rule_hooks(modules, mask) as sq:
        assert not any(p.requires_grad for p in net.parameters())
        net(x * mask[:, :, None]).sum().backward()
    for k, v in sq.items():
        assert v.tolist() == pytest.approx(want[ids[k]], rel=1e-12), ids[k]
    assert all(p.grad is None for p in net.parameters())
    assert [p.requires_grad for p in net.parameters()] == [n != "b.weight" for n, _ in net.named_parameters()]
    assert not any(m._forward_hooks for m in net.modules())


def test_layers_reading_one_input_keep_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    kept = []
    counting = dataclasses.replace(LINEAR, keep=lambda m, x, mask: kept.append(m) or LINEAR.keep(m, x, mask))
    monkeypatch.setitem(NORM_RULES, "Linear", counting)
    net = _Net()
    with rule_hooks(choose_rules(net, [id(net.a.weight), id(net.b.weight), id(net.c.weight)])[0],
                    torch.ones(2, 4)):
        net(torch.randn(2, 4, 5)).sum().backward()
    assert kept == [net.a, net.c]  # b reads a's input: its Gram matrix is a's


def test_a_module_called_twice_is_refused_and_the_hooks_removed() -> None:
    lin = torch.nn.Linear(3, 3)
    with pytest.raises(RuntimeError, match="called twice"):
        with rule_hooks({lin: [(id(lin.weight), "weight")]}, torch.ones(2, 1)):
            lin(lin(torch.randn(2, 3))).sum().backward()
    assert lin.weight.requires_grad and not lin._forward_hooks


def test_choice_by_cost_mode_and_sharing() -> None:
    lin = torch.nn.Linear(576, 192)  # d k / (d + k) = 144: the ghost norm is cheaper for T < 144
    assert LINEAR.cheaper(lin, 143) and not LINEAR.cheaper(lin, 144)
    twin = torch.nn.Linear(576, 192)
    twin.weight = lin.weight  # one parameter in two modules (tied): no rule can split it
    net = torch.nn.Sequential(lin, torch.nn.LayerNorm(192), torch.nn.Linear(192, 256), twin)
    ws = [id(lin.weight), id(net[1].weight), id(net[2].weight)]
    assert choose_rules(net, ws, 10, "auto") == ({net[2]: [(ws[2], "weight")]}, ws[:2])  # a norm: never cheaper
    assert choose_rules(net, ws, 10, "never") == ({}, ws)
    assert choose_rules(net, ws, 10, "always") == ({net[1]: [(ws[1], "weight")], net[2]: [(ws[2], "weight")]}, ws[:1])
    with pytest.raises(ValueError, match="ghost='sometimes'"):
        choose_rules(net, ws, 10, "sometimes")


def test_a_plain_function_registers_as_a_rule() -> None:
    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(2.0))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w * x

    try:
        rule = register_norm_rule(Scale)(lambda m, x, g, mask: {"w": ((g * x).sum((1, 2), dtype=torch.float64)) ** 2})
        assert rule_for(Scale()) is rule
        s, x = Scale(), torch.randn(2, 3, 4)
        with rule_hooks({s: [(id(s.w), "w")]}, torch.ones(2, 3)) as sq:
            (s(x) ** 2).sum().backward()
        want = [float((2 * 2.0 * x[b] * x[b]).sum()) ** 2 for b in range(2)]
        assert sq[id(s.w)].tolist() == pytest.approx(want, rel=1e-6)
    finally:
        NORM_RULES.pop(Scale, None)
