"""Tests for gnuq_core.estimators: gradient-norm uncertainty in PyTorch and JAX."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax.flatten_util import ravel_pytree

from gnuq_core.estimators import (
    JaxUncertainty,
    Uncertainty,
    from_log_p_and_grad_sq,
    jax_grad_sq_norm,
    jax_uncertainty,
    torch_uncertainty,
)
from gnuq_core.estimators.core import select, unique_params

LN10 = math.log(10.0)


# --------------------------------------------------------------------------- helpers


def mlp(dtype: torch.dtype = torch.float64, seed: int = 0, hidden: int = 8) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 3)
    ).to(dtype)


def class_log_prob(x: torch.Tensor, y: int):
    return lambda m: torch.log_softmax(m(x), dim=-1)[y]


def brute_sq(model: torch.nn.Module, fn, names: list[str] | None = None) -> float:
    """sum of squares of torch.autograd.grad(fn(model)) over the named parameters."""
    ps = [p for n, p in model.named_parameters() if names is None or n in names]
    grads = torch.autograd.grad(fn(model), ps, allow_unused=True)
    return float(sum((g.double() ** 2).sum() for g in grads if g is not None))


@pytest.fixture
def x64() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(4, dtype=torch.float64)


# --------------------------------------------------------------------------- log space


def test_from_log_p_and_grad_sq_arithmetic():
    u = from_log_p_and_grad_sq(math.log(0.3), 2.5)
    assert isinstance(u, Uncertainty)
    assert u.p == pytest.approx(0.3, rel=1e-14)
    assert u.log10_grad_log_p_sq == pytest.approx(math.log10(2.5), rel=1e-14)
    assert u.epistemic == pytest.approx(0.09 * 2.5, rel=1e-12)
    assert u.log10_epistemic == pytest.approx(math.log10(0.09 * 2.5), rel=1e-12)
    assert u.aleatoric == pytest.approx(0.21, rel=1e-14)
    assert u.combined == pytest.approx(0.09 * 2.5 + 0.21, rel=1e-12)
    assert u.group_sq_norms == {}


def test_from_log_p_and_grad_sq_edges():
    z = from_log_p_and_grad_sq(-1.0, 0.0)
    assert z.log10_grad_log_p_sq == -math.inf and z.log10_epistemic == -math.inf
    assert z.epistemic == 0.0
    # p = 1 - 1e-12: p(1-p) keeps its precision (1 - exp(log p) would lose it)
    near1 = from_log_p_and_grad_sq(math.log1p(-1e-12), 1.0)
    assert near1.aleatoric == pytest.approx(1e-12, rel=1e-9, abs=0)
    # p underflows float64 but the log fields stay exact
    tiny = from_log_p_and_grad_sq(-2000.0, 4.0)
    assert tiny.p == 0.0 and tiny.epistemic == 0.0
    assert tiny.log10_epistemic == pytest.approx(-4000 / LN10 + math.log10(4.0), rel=1e-14)
    with pytest.raises(ValueError, match="p > 1"):
        from_log_p_and_grad_sq(0.5, 1.0)
    with pytest.raises(ValueError, match="negative"):
        from_log_p_and_grad_sq(-1.0, -1.0)
    with pytest.raises(FloatingPointError):
        from_log_p_and_grad_sq(float("nan"), 1.0)
    with pytest.raises(FloatingPointError):
        from_log_p_and_grad_sq(-1.0, float("inf"))


# --------------------------------------------------------------------------- torch


def test_torch_hook_matches_autograd(x64):
    model = mlp()
    fn = class_log_prob(x64, 1)
    u = torch_uncertainty(model, fn)
    ref = brute_sq(model, fn)
    assert u.log10_grad_log_p_sq == pytest.approx(math.log10(ref), rel=1e-12)
    assert u.log_p == pytest.approx(float(fn(model).detach()), rel=1e-14)


def test_torch_matches_finite_differences(x64):
    model = mlp(hidden=3)
    fn = class_log_prob(x64, 2)
    vec = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    eps = 1e-6
    grad = torch.zeros_like(vec)
    with torch.no_grad():
        for i in range(vec.numel()):
            e = torch.zeros_like(vec)
            e[i] = eps
            torch.nn.utils.vector_to_parameters(vec + e, model.parameters())
            up = float(fn(model))
            torch.nn.utils.vector_to_parameters(vec - e, model.parameters())
            down = float(fn(model))
            grad[i] = (up - down) / (2 * eps)
        torch.nn.utils.vector_to_parameters(vec, model.parameters())
    u = torch_uncertainty(model, fn)
    assert 10**u.log10_grad_log_p_sq == pytest.approx(float((grad**2).sum()), rel=1e-7)


def test_torch_epistemic_aleatoric_combined(x64):
    model = mlp()
    log_fn = class_log_prob(x64, 0)
    u = torch_uncertainty(model, log_fn)
    p = math.exp(float(log_fn(model).detach()))
    grad_p_sq = brute_sq(model, lambda m: torch.exp(log_fn(m)))
    assert u.p == pytest.approx(p, rel=1e-14)
    assert u.epistemic == pytest.approx(grad_p_sq, rel=1e-10)
    assert u.log10_epistemic == pytest.approx(math.log10(grad_p_sq), rel=1e-10)
    assert u.aleatoric == pytest.approx(p * (1 - p), rel=1e-12)
    assert u.combined == pytest.approx(grad_p_sq + p * (1 - p), rel=1e-12)


def test_torch_group_restriction_and_per_group(x64):
    model = mlp()
    fn = class_log_prob(x64, 1)
    u0 = torch_uncertainty(model, fn, groups={"layer0": ["0"]})
    ref0 = brute_sq(model, fn, ["0.weight", "0.bias"])
    assert u0.log10_grad_log_p_sq == pytest.approx(math.log10(ref0), rel=1e-12)
    assert u0.group_sq_norms == {}
    # predicate form gives the same
    upred = torch_uncertainty(model, fn, groups={"layer0": lambda n: n.startswith("0.")})
    assert upred.log10_grad_log_p_sq == pytest.approx(u0.log10_grad_log_p_sq, rel=1e-14)
    # disjoint groups: per-group norms sum to the total
    both = torch_uncertainty(
        model, fn, groups={"first": ["0"], "last": ["2.weight", "2.bias"]}, per_group=True
    )
    total = brute_sq(model, fn)
    assert set(both.group_sq_norms) == {"first", "last"}
    assert both.group_sq_norms["first"] == pytest.approx(ref0, rel=1e-12)
    assert sum(both.group_sq_norms.values()) == pytest.approx(total, rel=1e-12)
    assert 10**both.log10_grad_log_p_sq == pytest.approx(total, rel=1e-12)
    # no groups + per_group: a single "all" group
    assert torch_uncertainty(model, fn, per_group=True).group_sq_norms == {
        "all": pytest.approx(total, rel=1e-12)
    }


def test_torch_prefix_respects_dot_boundary():
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2, 2, dtype=torch.float64) for _ in range(11)])
    x = torch.randn(2, dtype=torch.float64)
    fn = lambda m: torch.log_softmax(m(x), -1)[0]  # noqa: E731
    u = torch_uncertainty(model, fn, groups={"one": ["1"]}, per_group=True)
    ref = brute_sq(model, fn, ["1.weight", "1.bias"])  # not 10.weight / 10.bias
    assert u.group_sq_norms["one"] == pytest.approx(ref, rel=1e-12)


def test_torch_tied_parameter_counted_once():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 3, dtype=torch.float64)

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = lin, lin  # same parameters under two names

        def forward(self, x):
            return self.b(torch.tanh(self.a(x)))

    model, x = Tied(), torch.randn(3, dtype=torch.float64)
    fn = lambda m: torch.log_softmax(m(x), -1)[0]  # noqa: E731
    u = torch_uncertainty(model, fn)
    assert 10**u.log10_grad_log_p_sq == pytest.approx(brute_sq(model, fn), rel=1e-12)
    # a group naming only the second alias still finds the shared tensor
    ub = torch_uncertainty(model, fn, groups={"b": ["b"]})
    assert ub.log10_grad_log_p_sq == pytest.approx(u.log10_grad_log_p_sq, rel=1e-14)


def test_unique_params_and_select_are_the_one_group_selection():
    """`unique_params` lists a tied tensor once under all its names; `select` finds a group's
    floating-point tensors by full names, dotted prefixes or a predicate (the LM passes and
    `torch_uncertainty` share both)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(2, 2)
    model = torch.nn.ModuleDict({"a": lin, "b": lin, "c": torch.nn.Linear(2, 1)})
    model.register_buffer("steps", torch.zeros(1, dtype=torch.long))
    params, names = unique_params(model)
    assert [names[k] for k in params] == [["a.weight", "b.weight"], ["a.bias", "b.bias"], ["c.weight"], ["c.bias"]]
    ids = list(params)
    assert select(params, names, None) == {"all": ids}
    by = select(params, names, {"names": ["b.weight", "c.bias"], "prefix": "c", "pred": lambda n: n.endswith("bias")})
    assert by == {"names": [ids[0], ids[3]], "prefix": ids[2:], "pred": [ids[1], ids[3]]}
    with pytest.raises(ValueError, match="group 'd' matches no parameter; parameter names look like: a.weight"):
        select(params, names, {"d": "d"})


def test_torch_restores_grad_and_requires_grad(x64):
    model = mlp()
    fn = class_log_prob(x64, 1)
    ref_all = brute_sq(model, fn)
    old = torch.full_like(model[0].weight, 7.0)
    model[0].weight.grad = old
    model[2].bias.requires_grad_(False)  # frozen, but still part of the estimate
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    u = torch_uncertainty(model, fn, groups={"all": lambda n: True})
    assert 10**u.log10_grad_log_p_sq == pytest.approx(ref_all, rel=1e-12)
    assert model[0].weight.grad is old and bool((old == 7.0).all())
    for n, p in model.named_parameters():
        assert p.requires_grad == flags[n], n
        if n != "0.weight":
            assert p.grad is None, n  # no gradient buffers left behind
    # also restored when the call raises
    with pytest.raises(FloatingPointError):
        torch_uncertainty(model, lambda m: fn(m) * float("nan"))
    assert model[0].weight.grad is old
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags


def test_torch_frees_each_grad_during_backward(x64):
    model = mlp()
    seen = []

    def fn(m):
        h = m[0](x64)  # gradient reaches h only after layer 2 has been differentiated
        h.register_hook(lambda g: seen.append(m[2].weight.grad))
        return torch.log_softmax(m[2](torch.tanh(h)), -1)[0]

    torch_uncertainty(model, fn)
    assert seen == [None]  # 2.weight's gradient was read and freed at once


def test_torch_gradient_checkpointing():
    import torch.utils.checkpoint as cp

    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 3), "b": torch.nn.Linear(3, 3)})
    x = torch.randn(3, requires_grad=True)  # reentrant checkpointing needs a grad input

    def run(m, reentrant, shared):
        second = m["a"] if shared else m["b"]
        f1, f2 = (lambda t: torch.tanh(m["a"](t))), (lambda t: torch.tanh(second(t)))
        if reentrant is None:  # plain reference
            return torch.log_softmax(f2(f1(x)), -1)[0]
        h = cp.checkpoint(f1, x, use_reentrant=reentrant)
        h = cp.checkpoint(f2, h, use_reentrant=reentrant)
        return torch.log_softmax(h, -1)[0]

    plain = brute_sq(model, lambda m: run(m, None, False))
    u = torch_uncertainty(model, lambda m: run(m, True, False))
    assert 10**u.log10_grad_log_p_sq == pytest.approx(plain, rel=1e-5)
    with pytest.raises(RuntimeError, match="'a.weight'.*use_reentrant=False"):
        torch_uncertainty(model, lambda m: run(m, True, True))
    # the suggested fix works
    u = torch_uncertainty(model, lambda m: run(m, False, True))
    assert 10**u.log10_grad_log_p_sq == pytest.approx(brute_sq(model, lambda m: run(m, None, True)), rel=1e-5)


def test_torch_unselected_params_get_no_gradient(x64):
    model = mlp()
    seen = {}

    def fn(m):
        seen.update({n: p.requires_grad for n, p in m.named_parameters()})
        return class_log_prob(x64, 0)(m)

    torch_uncertainty(model, fn, groups={"g": ["2"]})
    assert seen == {"0.weight": False, "0.bias": False, "2.weight": True, "2.bias": True}


def test_torch_works_under_no_grad(x64):
    model = mlp()
    fn = class_log_prob(x64, 0)
    ref = torch_uncertainty(model, fn)
    with torch.no_grad():
        u = torch_uncertainty(model, fn)
    assert u.log10_grad_log_p_sq == ref.log10_grad_log_p_sq


def test_torch_nan_gradient_names_parameter(x64):
    model = mlp()
    base = class_log_prob(x64, 0)
    # forward is finite (sqrt(0) = 0) but d/db sqrt(0 * b) = 0 * inf = nan
    fn = lambda m: base(m) + torch.sqrt(m[2].bias * 0).sum()  # noqa: E731
    with pytest.raises(FloatingPointError, match=r"'2\.bias'.*float32"):
        torch_uncertainty(model, fn)
    with pytest.raises(FloatingPointError, match=r"'2\.bias'.*group 'head'"):
        torch_uncertainty(model, fn, groups={"body": ["0"], "head": ["2"]})
    with pytest.raises(FloatingPointError, match="log p"):
        torch_uncertainty(model, lambda m: base(m) * float("nan"))


def test_torch_bad_inputs_raise(x64):
    model = mlp()
    fn = class_log_prob(x64, 0)
    with pytest.raises(ValueError, match=r"'nope'.*0\.weight"):
        torch_uncertainty(model, fn, groups={"nope": ["encoder"]})
    with pytest.raises(ValueError, match="p > 1"):
        torch_uncertainty(model, lambda m: m(x64)[0] ** 2 + 1.0)


def test_torch_log_space_stability_float32():
    model = mlp(dtype=torch.float32)
    x = torch.randn(4)
    small = lambda m: 1e-4 * torch.tanh(m(x)).sum()  # noqa: E731
    fn = lambda m: -200.0 + small(m)  # noqa: E731
    log_p_32 = fn(model)
    assert log_p_32.dtype == torch.float32 and float(torch.exp(log_p_32.detach())) == 0.0  # p underflows
    u = torch_uncertainty(model, fn)
    g_sq = brute_sq(model, small)
    assert math.isfinite(u.log10_epistemic)
    assert u.log10_grad_log_p_sq == pytest.approx(math.log10(g_sq), rel=1e-5)
    expected = 2 * (u.log_p / LN10) + math.log10(g_sq)
    assert u.log10_epistemic == pytest.approx(expected, rel=1e-6)
    assert u.log10_epistemic == pytest.approx(2 * (-200 / LN10) + math.log10(g_sq), abs=1e-3)
    assert u.aleatoric > 0.0  # p kept in float64 (about 1e-87)


# --------------------------------------------------------------------------- JAX


def jax_mlp(dtype, seed: int = 0, hidden: int = 6):
    rng = np.random.default_rng(seed)
    params = {
        "w1": rng.normal(size=(3, hidden)),
        "b1": rng.normal(size=hidden) * 0.1,
        "w2": rng.normal(size=(hidden, 4)),
        "b2": rng.normal(size=4) * 0.1,
    }
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype), params)


def jax_log_prob(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jax.nn.log_softmax(h @ params["w2"] + params["b2"])[1]


def jax_xs(dtype, n: int = 5):
    return jnp.asarray(np.random.default_rng(7).normal(size=(n, 3)), dtype)


def test_jax_matches_finite_differences_float64():
    with jax.enable_x64(True):
        params, xs = jax_mlp(jnp.float64), jax_xs(jnp.float64, 3)
        out = jax_uncertainty(jax_log_prob, params, xs)
        flat, unravel = ravel_pytree(params)
        eps = 1e-6
        steps = eps * jnp.eye(flat.size)
        shifted = jax.jit(jax.vmap(lambda d, x: jax_log_prob(unravel(flat + d), x), (0, None)))
        for i, x in enumerate(xs):
            grad = (np.asarray(shifted(steps, x)) - np.asarray(shifted(-steps, x))) / (2 * eps)
            assert 10 ** float(out.log10_grad_log_p_sq[i]) == pytest.approx(
                float((grad**2).sum()), rel=1e-7
            )


def test_jax_float32_close_to_float64():
    out32 = jax_uncertainty(jax_log_prob, jax_mlp(jnp.float32), jax_xs(jnp.float32))
    with jax.enable_x64(True):
        out64 = jax_uncertainty(jax_log_prob, jax_mlp(jnp.float64), jax_xs(jnp.float64))
        np.testing.assert_allclose(out32.log10_epistemic, out64.log10_epistemic, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(out32.aleatoric, out64.aleatoric, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_jax_vmap_equals_loop_and_dtypes(dtype):
    with jax.enable_x64(dtype == "float64"):
        dt = jnp.dtype(dtype)
        params, xs = jax_mlp(dt), jax_xs(dt)
        out = jax_uncertainty(jax_log_prob, params, xs)
        assert isinstance(out, JaxUncertainty)
        for field in JaxUncertainty._fields:
            arr = getattr(out, field)
            assert arr.shape == (5,), field
            assert arr.dtype == dt, field
        rtol = 1e-5 if dtype == "float32" else 1e-12
        value_and_grad = jax.jit(jax.value_and_grad(jax_log_prob))
        grad_p = jax.jit(jax.grad(lambda p, x: jnp.exp(jax_log_prob(p, x))))
        for i, x in enumerate(xs):
            lp, g = value_and_grad(params, x)
            g_sq = sum(float((np.asarray(v, np.float64) ** 2).sum()) for v in jax.tree_util.tree_leaves(g))
            gp = grad_p(params, x)
            gp_sq = sum(float(jnp.sum(v ** 2)) for v in jax.tree_util.tree_leaves(gp))
            p = math.exp(float(lp))
            assert float(out.log_p[i]) == pytest.approx(float(lp), rel=rtol)
            assert float(out.log10_grad_log_p_sq[i]) == pytest.approx(math.log10(g_sq), rel=rtol, abs=rtol)
            assert float(out.epistemic[i]) == pytest.approx(gp_sq, rel=10 * rtol)
            assert float(out.aleatoric[i]) == pytest.approx(p * (1 - p), rel=rtol)
            assert float(out.combined[i]) == pytest.approx(gp_sq + p * (1 - p), rel=10 * rtol)
        g_plain = jax_grad_sq_norm(jax_log_prob, params, xs)
        assert g_plain.shape == (5,) and g_plain.dtype == dt
        np.testing.assert_allclose(np.log10(np.asarray(g_plain)), out.log10_grad_log_p_sq, rtol=rtol)


def test_jax_log_space_stability_float32():
    params, xs = jax_mlp(jnp.float32), jax_xs(jnp.float32)
    small = lambda p, x: 1e-4 * jnp.sum(jnp.tanh(x @ p["w1"]))  # noqa: E731
    fn = lambda p, x: -200.0 + small(p, x)  # noqa: E731
    out = jax_uncertainty(fn, params, xs)
    assert out.log_p.dtype == jnp.float32
    assert bool(jnp.all(out.p == 0)) and bool(jnp.all(out.epistemic == 0))  # underflow
    assert bool(jnp.all(jnp.isfinite(out.log10_epistemic)))
    g_sq = jax_grad_sq_norm(small, params, xs)
    np.testing.assert_allclose(out.log10_grad_log_p_sq, np.log10(np.asarray(g_sq)), rtol=1e-5)
    lp = np.asarray(out.log_p, np.float64)
    np.testing.assert_allclose(lp, -200.0, atol=1e-3)
    expected = 2 * (lp / LN10) + np.log10(np.asarray(g_sq, np.float64))
    np.testing.assert_allclose(out.log10_epistemic, expected, rtol=1e-6)
    naive = 2 * (-200 / LN10) + np.log10(np.asarray(g_sq, np.float64))
    np.testing.assert_allclose(out.log10_epistemic, naive, atol=1e-3)


def test_jax_tiny_gradients_do_not_underflow():
    params, xs = jax_mlp(jnp.float32), jax_xs(jnp.float32)
    # gradient entries about 1e-25: their squares (1e-50) underflow float32
    fn = lambda p, x: -1.0 + 1e-25 * jnp.tanh(jnp.sum(x @ p["w1"]))  # noqa: E731
    out = jax_uncertainty(fn, params, xs)
    assert bool(jnp.all(jnp.isfinite(out.log10_grad_log_p_sq)))
    assert bool(jnp.all(out.log10_grad_log_p_sq < -45))


def test_jax_errors():
    params, xs = jax_mlp(jnp.float32), jax_xs(jnp.float32)
    nan_grad = lambda p, x: jax_log_prob(p, x) + jnp.sum(jnp.sqrt(p["b2"] * 0))  # noqa: E731
    with pytest.raises(FloatingPointError, match=r"input 0.*'b2'"):
        jax_uncertainty(nan_grad, params, xs)
    with pytest.raises(FloatingPointError, match="log p is nan for input 0"):
        jax_uncertainty(lambda p, x: jax_log_prob(p, x) * jnp.nan, params, xs)
    with pytest.raises(ValueError, match="p > 1"):
        jax_uncertainty(lambda p, x: jnp.sum(p["b1"] ** 2) + 1.0, params, xs)


def test_jax_traceable_inside_jit():
    params, xs = jax_mlp(jnp.float32), jax_xs(jnp.float32)
    f = jax.jit(lambda p, x: jax_uncertainty(jax_log_prob, p, x).log10_epistemic)
    np.testing.assert_allclose(f(params, xs), jax_uncertainty(jax_log_prob, params, xs).log10_epistemic, rtol=1e-6)


def test_arguments_of_the_wrong_type_are_named():
    """Text, bools and None are not numbers; a str is not a list of log-probs (its length was read
    as the number of tokens); every refusal is an InputTypeError naming the argument."""
    from gnuq_core.estimators import log10_combined, log10_epistemic, sequence_and_normalized
    from gnuq_core.options import InputTypeError

    cases = [
        (lambda: from_log_p_and_grad_sq("-1.0", 1.0), "log_p='-1.0' is a str: pass a number"),
        (lambda: from_log_p_and_grad_sq(-1.0, None), "grad_log_p_sq=None is None"),
        (lambda: from_log_p_and_grad_sq(-1.0, 1.0, [1.0]), "group_sq_norms is a list: pass a mapping"),
        (lambda: from_log_p_and_grad_sq(-1.0, 1.0, {"all": "x"}), r"group_sq_norms\['all'\]='x' is a str"),
        (lambda: sequence_and_normalized("-1.0", 1.0), "token_log_probs is a str: pass a list of numbers"),
        (lambda: sequence_and_normalized([-1.0, "a"], 1.0), r"token_log_probs\[1\]='a' is a str"),
        (lambda: log10_epistemic(True, 1.0), "log_p=True is a bool"),
        (lambda: log10_combined(-1.0, "0.5"), "aleatoric='0.5' is a str"),
        (lambda: torch_uncertainty(lambda m: m, lambda m: m), "model is a function, not a torch.nn.Module"),
        (lambda: torch_uncertainty(torch.nn.Linear(1, 1), None), "log_prob_fn is a NoneType"),
        (lambda: torch_uncertainty(torch.nn.Linear(1, 1), lambda m: m.weight.sum(), groups="last_block"),
         "groups is a str: pass a mapping"),
        (lambda: torch_uncertainty(torch.nn.Linear(1, 1), lambda m: m.weight.sum(), per_group=1), "per_group=1"),
        (lambda: jax_uncertainty(None, {}, jnp.zeros(1)), "log_prob_fn is a NoneType"),
    ]
    for call, words in cases:
        with pytest.raises(InputTypeError, match=words):
            call()
    u = from_log_p_and_grad_sq(np.float32(-1.0), torch.tensor(4.0), {"all": np.float64(4.0)})
    assert u.log_p == -1.0 and u.group_sq_norms == {"all": 4.0}
