"""Tests for gnuq_core.bayes.bnn: the log-density against a hand-written NumPy version, the MAP."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import log_density

from gnuq_core.bayes.bnn import MLPConfig, fit_map, forward, log_joint, n_params, numpyro_model, prior_std


def _hand_log_joint(cfg, theta, x, y):
    """Independent NumPy implementation: unpack, forward, Gaussian prior, likelihood."""
    dims = [cfg.input_dim] + [cfg.width] * cfg.depth + [cfg.n_classes if cfg.task == "multiclass" else 1]
    k, h, lp = 0, x, 0.0
    for li, (i, o) in enumerate(zip(dims[:-1], dims[1:])):
        W = theta[k:k + i * o].reshape(i, o); k += i * o
        b = theta[k:k + o]; k += o
        if cfg.prior == "plain":
            sw = sb = 1 / math.sqrt(cfg.alpha)
        else:
            sw, sb = cfg.sigma_w / math.sqrt(i), cfg.sigma_b
        for v, s in ((W, sw), (b, sb)):
            lp += np.sum(-0.5 * (v / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi))
        h = h @ W + b
        if li < len(dims) - 2:
            h = np.tanh(h)
    f = h[:, 0]
    if cfg.task == "multiclass":
        logp = h - h.max(1, keepdims=True) - np.log(np.exp(h - h.max(1, keepdims=True)).sum(1, keepdims=True))
        ll = np.sum(logp[np.arange(len(y)), y.astype(int)])
    elif cfg.task == "classification":
        p = 1 / (1 + np.exp(-f))
        ll = np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
    else:
        s = cfg.noise_sigma
        ll = np.sum(-0.5 * ((y - f) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi))
    assert k == theta.size
    return lp + ll


@pytest.mark.parametrize("task", ["classification", "multiclass", "regression"])
@pytest.mark.parametrize("prior", ["plain", "fan_in"])
@pytest.mark.parametrize("depth", [1, 2])
def test_log_density_matches_hand_written(task, prior, depth):
    cfg = MLPConfig(input_dim=2, width=5, depth=depth, prior=prior, alpha=2.0, sigma_w=1.3, sigma_b=0.7,
                    task=task, noise_sigma=0.3, n_classes=4)
    rng = np.random.default_rng(0)
    theta = rng.standard_normal(n_params(cfg))
    x = rng.standard_normal((17, 2))
    y = {"classification": (rng.uniform(size=17) < 0.5).astype(float), "multiclass": rng.integers(0, 4, 17) * 1.0,
         "regression": rng.standard_normal(17)}[task]
    want = _hand_log_joint(cfg, theta, x, y)
    with jax.enable_x64(True):
        got = float(log_joint(cfg, jnp.asarray(theta), jnp.asarray(x), jnp.asarray(y)))
        ld, _ = log_density(numpyro_model, (cfg, jnp.asarray(x), jnp.asarray(y)), {}, {"theta": jnp.asarray(theta)})
    assert got == pytest.approx(want, rel=1e-10)
    assert float(ld) == pytest.approx(want, rel=1e-10)


def test_n_params_and_prior():
    cfg = MLPConfig(input_dim=2, width=4, depth=2, prior="fan_in", sigma_w=2.0, sigma_b=0.5)
    assert n_params(cfg) == (2 * 4 + 4) + (4 * 4 + 4) + (4 + 1)
    s = prior_std(cfg)
    assert s.size == n_params(cfg)
    assert s[0] == pytest.approx(2.0 / math.sqrt(2)) and s[8] == pytest.approx(0.5)
    assert MLPConfig(depth=0).width >= 1 and n_params(MLPConfig(input_dim=3, depth=0)) == 4
    with pytest.raises(ValueError, match="activation"):
        MLPConfig(activation="swish")
    assert n_params(MLPConfig(input_dim=2, width=4, depth=1, task="multiclass", n_classes=3)) == 12 + 15
    assert "n_classes" not in MLPConfig().as_dict() and MLPConfig(task="multiclass", n_classes=3).as_dict()["n_classes"] == 3
    with pytest.raises(ValueError, match="n_classes ≥ 3"):
        MLPConfig(task="multiclass", n_classes=2)


def test_fit_map_reaches_a_stationary_point():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 2))
    y = (x[:, 0] + 0.3 * rng.standard_normal(40) > 0).astype(float)
    cfg = MLPConfig(input_dim=2, width=4, depth=1)
    res = fit_map(cfg, x, y, n_restarts=2, seed=0)
    assert len(res.restarts) == 2 and res.grad_norm < 1e-4
    assert res.neg_log_joint == min(r["neg_log_joint"] for r in res.restarts)
    with jax.enable_x64(True):
        f = np.asarray(forward(cfg, jnp.asarray(res.theta), jnp.asarray(x)))
    assert np.mean((f > 0) == (y > 0.5)) > 0.8
