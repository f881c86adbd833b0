"""Tests for gnuq_core.bayes.laplace: exact on a linear-Gaussian model, consistent otherwise."""

import jax.numpy as jnp
import numpy as np
import pytest

from gnuq_core.bayes.bnn import MLPConfig, fit_map, n_params, unflatten
from gnuq_core.bayes.laplace import estimates, ggn, hessian_nll, jacobian


def _linear_problem(seed=0, n=30, d=2):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = x @ np.array([1.0, -2.0][:d]) + 0.5 + 0.3 * rng.standard_normal(n)
    return x, y


def test_laplace_is_exact_for_linear_gaussian():
    x, y = _linear_problem()
    cfg = MLPConfig(input_dim=2, depth=0, task="regression", prior="plain", alpha=2.0, noise_sigma=0.3)
    theta = fit_map(cfg, x, y, n_restarts=1).theta
    xs = np.random.default_rng(1).standard_normal((25, 2)) * 3
    # closed form: features [x, 1], posterior precision A = ΦᵀΦ/σ² + α I
    phi = np.c_[x, np.ones(len(x))]
    A = phi.T @ phi / 0.3**2 + 2.0 * np.eye(3)
    mean = np.linalg.solve(A, phi.T @ y / 0.3**2)
    np.testing.assert_allclose(theta, mean, rtol=1e-6, atol=1e-8)
    psi = np.c_[xs, np.ones(len(xs))]
    want = np.einsum("ij,ij->i", psi, np.linalg.solve(A, psi.T).T)
    est = estimates(cfg, theta, x, y, xs)
    for key in ("laplace_f", "ggn_f"):
        np.testing.assert_allclose(est[key], want, rtol=1e-8)
    np.testing.assert_allclose(est["iso_f"], (psi**2).sum(1), rtol=1e-10)
    np.testing.assert_allclose(est["prior_f"], (psi**2).sum(1) / 2.0, rtol=1e-10)


def test_classification_estimates_consistent():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(float)
    cfg = MLPConfig(input_dim=2, width=3, depth=1, prior="fan_in")
    theta = fit_map(cfg, x, y, n_restarts=1).theta
    xs = rng.standard_normal((10, 2))
    est = estimates(cfg, theta, x, y, xs)
    J = jacobian(cfg, theta, xs)
    assert J.shape == (10, n_params(cfg))
    # probability space = sigmoid factor × logit space; aleatoric = p(1-p)
    np.testing.assert_allclose(est["iso_p"], est["sigmoid_sq"] * est["iso_f"])
    np.testing.assert_allclose(est["aleatoric"], est["p"] * (1 - est["p"]))
    for k in ("laplace_f", "ggn_f", "diag_f"):
        assert np.all(est[k] > 0)
    # GGN is PSD and the NLL Hessian is symmetric
    assert np.linalg.eigvalsh(ggn(cfg, theta, x)).min() > -1e-9
    H = hessian_nll(cfg, theta, x, y)
    np.testing.assert_allclose(H, H.T)


def test_jacobian_matches_shared_estimator():
    """Our per-example ‖∇f‖² agrees with gnuq_core.estimators.jax_grad_sq_norm when present."""
    est_mod = pytest.importorskip("gnuq_core.estimators")
    import jax
    import jax.numpy as jnp

    from gnuq_core.bayes.bnn import forward

    cfg = MLPConfig(input_dim=2, width=4, depth=2)
    rng = np.random.default_rng(3)
    theta, xs = rng.standard_normal(n_params(cfg)), rng.standard_normal((6, 2))
    with jax.enable_x64(True):
        other = np.asarray(est_mod.jax_grad_sq_norm(lambda t, x: forward(cfg, t, x[None])[0],
                                                    jnp.asarray(theta), jnp.asarray(xs)))
    np.testing.assert_allclose((jacobian(cfg, theta, xs) ** 2).sum(1), other, rtol=1e-8)


def test_ntk_view_matches_parameter_space_ggn():
    from gnuq_core.bayes.laplace import ntk_view

    rng = np.random.default_rng(4)
    x = rng.standard_normal((15, 2))
    y = (x[:, 0] > 0).astype(float)
    cfg = MLPConfig(input_dim=2, width=6, depth=1, prior="fan_in")
    theta = fit_map(cfg, x, y, n_restarts=1).theta
    xs = rng.standard_normal((8, 2))
    v = ntk_view(cfg, theta, x, xs)
    np.testing.assert_allclose(v["ggn_f"], estimates(cfg, theta, x, y, xs)["ggn_f"], rtol=1e-6)
    assert np.all((v["span_frac"] > 0) & (v["span_frac"] <= 1 + 1e-9)) and v["rank"][0] <= 15
    # one hidden layer: the output layer's gradient is (tanh(x W1 + b1), 1)
    (w1, b1), _ = unflatten(cfg, jnp.asarray(theta))
    h = np.tanh(xs @ np.asarray(w1) + np.asarray(b1))
    # float64 through a projection onto the GGN's span: 1e-8 apart on an AVX2 machine, so 1e-7
    np.testing.assert_allclose(v["out_share"], (np.sum(h**2, 1) + 1) / v["iso_f"], rtol=1e-7)


def test_glm_predictive_variance_matches_brute_force_sampling():
    """Var[σ(f)], f ~ N(m, v), against 4·10⁶ draws of f: within five Monte Carlo standard errors."""
    from scipy.special import expit

    from gnuq_core.bayes.laplace import glm_predictive_variance

    m = np.array([0.0, 2.0, -3.0, 1.0, -6.0])
    v = np.array([1.0, 0.01, 25.0, 4.0, 9.0])
    got = glm_predictive_variance(m, v)
    z = np.random.default_rng(0).standard_normal(4_000_000)
    for mi, vi, gi in zip(m, v, got):
        p = expit(mi + np.sqrt(vi) * z)
        var, se = p.var(), np.std((p - p.mean()) ** 2) / np.sqrt(z.size)
        assert abs(gi - var) < 5 * se, (mi, vi, gi, var)


def test_glm_predictive_variance_limits():
    """Small variance: the delta method (p(1−p))²·v; far tail: the lognormal variance; v = 0: 0."""
    from scipy.special import expit

    from gnuq_core.bayes.laplace import glm_predictive_variance

    m = np.array([0.0, 3.0, -8.0])
    p = expit(m)
    np.testing.assert_allclose(glm_predictive_variance(m, np.full(3, 1e-8)), (p * (1 - p)) ** 2 * 1e-8, rtol=1e-6)
    # σ(f) ≈ e^f far below the transition: Var = e^{2m + s²}(e^{s²} − 1), with s² = 25 (peak 10 sd away)
    np.testing.assert_allclose(glm_predictive_variance(np.array([-200.0]), np.array([25.0])),
                               np.exp(-400 + 25) * np.expm1(25), rtol=1e-7)
    assert glm_predictive_variance(np.array([1.0]), np.array([0.0]))[0] == 0.0
    # symmetric in the sign of the logit, and below 1/4 however wide the Gaussian
    np.testing.assert_allclose(glm_predictive_variance(m, np.full(3, 4.0)), glm_predictive_variance(-m, np.full(3, 4.0)))
    assert glm_predictive_variance(np.array([0.0]), np.array([1e6]))[0] < 0.25
    with pytest.raises(ValueError, match="var_f"):
        glm_predictive_variance(np.array([0.0]), np.array([-1.0]))


def test_estimates_carry_the_glm_predictive():
    from gnuq_core.bayes.laplace import glm_predictive_variance

    rng = np.random.default_rng(3)
    x = rng.standard_normal((30, 2))
    y = (x[:, 0] > 0).astype(float)
    cfg = MLPConfig(input_dim=2, width=3, depth=1, prior="plain")
    theta = fit_map(cfg, x, y, n_restarts=1).theta
    xs = rng.standard_normal((8, 2)) * 4
    est = estimates(cfg, theta, x, y, xs)
    for name in ("laplace", "ggn"):
        np.testing.assert_allclose(est[f"{name}_glm_p"], glm_predictive_variance(est["f"], est[f"{name}_f"]))
        assert np.all(est[f"{name}_glm_p"] < 0.25)
    assert "laplace_glm_p" not in estimates(cfg, theta, x, y, xs, laplace=False)


def test_multiclass_class_probability_gradient_equals_torch_autograd():
    """∇θ p_c(x) of the flat-θ multiclass net against the same net built in torch (an independent
    implementation: its own unpacking, softmax and autograd), at every query and class."""
    import torch

    from gnuq_core.bayes.bnn import MLPConfig, layer_shapes, n_params
    from gnuq_core.bayes.laplace import class_jacobian, class_probabilities

    cfg = MLPConfig(input_dim=2, width=5, depth=2, task="multiclass", n_classes=3)
    rng = np.random.default_rng(1)
    theta, xs = rng.standard_normal(n_params(cfg)), rng.standard_normal((7, 2))
    classes = rng.integers(0, 3, 7)
    got = class_jacobian(cfg, theta, xs, classes)
    t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    for i, (x, c) in enumerate(zip(xs, classes)):
        h, k = torch.tensor(x[None], dtype=torch.float64), 0
        for li, (fan_in, fan_out) in enumerate(layer_shapes(cfg)):
            w = t[k:k + fan_in * fan_out].reshape(fan_in, fan_out); k += fan_in * fan_out
            b = t[k:k + fan_out]; k += fan_out
            h = h @ w + b
            h = torch.tanh(h) if li < cfg.depth else h
        p = torch.softmax(h[0], 0)
        assert float(p[c].detach()) == pytest.approx(class_probabilities(cfg, theta, xs)[i, c], rel=1e-12)
        (grad,) = torch.autograd.grad(p[c], t)
        np.testing.assert_allclose(got[i], grad.numpy(), rtol=1e-10, atol=1e-14)


def test_multiclass_estimates_are_the_predicted_class_and_the_ggn_is_its_sum_of_outer_products():
    from gnuq_core.bayes.bnn import MLPConfig, fit_map, n_params
    from gnuq_core.bayes.laplace import class_jacobian, class_probabilities, estimates, ggn

    cfg = MLPConfig(input_dim=2, width=4, depth=1, task="multiclass", n_classes=3)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((30, 2)), rng.integers(0, 3, 30).astype(float)
    theta = fit_map(cfg, x, y, n_restarts=1).theta
    xs = rng.standard_normal((9, 2))
    est = estimates(cfg, theta, x, y, xs)
    p = class_probabilities(cfg, theta, xs)
    np.testing.assert_array_equal(est["pred_class"], p.argmax(1))
    np.testing.assert_allclose(est["p"], p.max(1))
    np.testing.assert_allclose(est["aleatoric"], est["p"] * (1 - est["p"]))
    g = class_jacobian(cfg, theta, xs, p.argmax(1))
    np.testing.assert_allclose(est["iso_p"], (g**2).sum(1), rtol=1e-12)
    assert (est["laplace_p"] > 0).all() and (est["ggn_p"] > 0).all() and "iso_f" not in est
    # the GGN, one data point at a time: Σ_kl J_k^T (diag p − p p^T)_kl J_l
    G = ggn(cfg, theta, x[:1])
    pt = class_probabilities(cfg, theta, x[:1])[0]
    J = np.stack([class_jacobian(cfg, theta, x[:1], np.array([k]), probability=False)[0] for k in range(3)])
    np.testing.assert_allclose(G, J.T @ (np.diag(pt) - np.outer(pt, pt)) @ J, rtol=1e-10, atol=1e-14)
    assert G.shape == (n_params(cfg),) * 2
