"""Tests for gnuq_core.bayes.mcmc: NUTS on a conjugate model, the cache key, the diagnostics."""

import numpy as np

from gnuq_core.bayes import mcmc
from gnuq_core.bayes.bnn import MLPConfig
from gnuq_core.bayes.synthetic import Dataset


def _linear_data(seed=0, n=20, sigma=0.5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1))
    y = 1.5 * x[:, 0] - 0.5 + sigma * rng.standard_normal(n)
    return Dataset("regression", x, y, {"in": x[:5], "grid": np.linspace(-3, 3, 7)[:, None]}, (7,),
                   dict(problem="linear", seed=seed, n=n))


def test_nuts_matches_conjugate_posterior():
    """Linear-Gaussian model: the posterior is N(A⁻¹Φᵀy/σ², A⁻¹) with A = ΦᵀΦ/σ² + αI."""
    d = _linear_data()
    cfg = MLPConfig(input_dim=1, depth=0, task="regression", prior="plain", alpha=1.0, noise_sigma=0.5)
    s = mcmc.NutsSettings(num_warmup=300, num_samples=1500, num_chains=1)
    res = mcmc.run_nuts(cfg, d, s, seed=0)
    phi = np.c_[d.x_train, np.ones(len(d.x_train))]
    A = phi.T @ phi / 0.25 + np.eye(2)
    cov = np.linalg.inv(A)
    mean = cov @ phi.T @ d.y_train / 0.25
    draws = res.theta.reshape(-1, 2)
    diag = mcmc.diagnostics(res)
    ess = diag["ess_theta_min"]
    assert ess > 200 and diag["divergences"] == 0
    # Monte Carlo standard errors: mean sd/sqrt(ESS); variance about var*sqrt(2/ESS)
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 4.5 * np.sqrt(np.diag(cov) / ess))
    np.testing.assert_array_less(np.abs(draws.var(0) / np.diag(cov) - 1), 4.5 * np.sqrt(2 / ess))
    # predictive variance of f at the queries = ψᵀ Σ ψ (the quantity the chapters compare)
    xs = d.queries["grid"]
    f = mcmc.predictive_f(cfg, res.theta, xs)
    psi = np.c_[xs, np.ones(len(xs))]
    want = np.einsum("ij,ij->i", psi, psi @ cov)
    got = mcmc.reference_variance("regression", f)["var_f"]
    np.testing.assert_array_less(np.abs(got / want - 1), 4.5 * np.sqrt(2 / ess))


def test_split_agreement_and_reference():
    rng = np.random.default_rng(0)
    scale = np.linspace(0.1, 3, 40)
    f = rng.standard_normal((2, 400, 40)) * scale
    ag = mcmc.split_agreement("classification", f, key="var_f")
    assert ag["rho_half"] > 0.9 and ag["rho_full"] >= ag["rho_half"]
    ref = mcmc.reference_variance("classification", f)
    assert set(ref) == {"var_f", "mean_f", "var_p", "mean_p"}
    one_chain = mcmc.split_agreement("regression", f[:1])
    assert one_chain["rho_half"] > 0.8


def test_multiclass_reference_is_every_class_probabilitys_mean_and_variance():
    rng = np.random.default_rng(0)
    f = rng.standard_normal((2, 50, 4, 3))  # chains, draws, queries, classes
    ref = mcmc.reference_variance("multiclass", f)
    p = np.exp(f) / np.exp(f).sum(-1, keepdims=True)
    flat = p.reshape(-1, 4, 3)
    np.testing.assert_allclose(ref["var_p"], flat.var(0).ravel(), rtol=1e-12)  # query-major, class-minor
    np.testing.assert_allclose(ref["mean_p"].reshape(4, 3).sum(1), 1.0)
    assert "var_f" not in ref and mcmc.split_agreement("multiclass", f)["rho_half"] <= 1


def test_multiclass_nuts_runs_and_summarises_per_class():
    from gnuq_core.bayes.synthetic import make_dataset

    d = make_dataset("multiclass_clusters", n_train=24, n_query_in=5, grid_size=3)
    cfg = MLPConfig(input_dim=2, width=3, depth=1, task="multiclass", n_classes=4)
    out = mcmc.reference_summary(cfg, d, mcmc.NutsSettings(num_warmup=30, num_samples=30, num_chains=2), 0,
                                 ("in",))
    assert len(out["q"]["in"]["ref"]["var_p"]) == 5 * 4 and out["q"]["in"]["diag"]["ess_pred_min"] > 0
