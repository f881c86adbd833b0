"""laplace-torch vs the project's Laplace variances on a tiny two-moons MLP and a tiny regression."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.crosscheck import laplace as xlap

SMALL = {"n_train": 30, "n_query_in": 8, "grid_size": 4}


@pytest.fixture(scope="module")
def moons() -> tuple:
    case = xlap.LaplaceCase("two_moons", 3, prior="fan_in", data=SMALL)
    return case, xlap.compare_case(case, glm_samples=4000, n_restarts=1)


def test_classification_agrees(moons: tuple) -> None:
    _, df = moons
    assert set(df["quantity"]) >= {"GGN-Laplace gᵀΣg", "Hessian-Laplace gᵀΣg", "‖∇θ p‖²"}
    assert df["agrees"].all(), df[["quantity", "max_rel_error"]]
    exact = df[~df["quantity"].str.startswith("GLM")]
    assert (exact["max_rel_error"] < 1e-10).all()


def test_regression_agrees() -> None:
    df = xlap.compare_case(xlap.LaplaceCase("gap_regression", 3, prior="plain",
                                            data={"n_train": 20, "n_query_in": 6, "grid_size": 8}), n_restarts=1)
    assert len(df) == 3 and df["agrees"].all(), df[["quantity", "max_rel_error"]]


def test_a_perturbed_model_is_a_disagreement(moons: tuple) -> None:
    """Our variances at θ* + noise against laplace-torch's at θ*: every row must disagree."""
    from gnuq_core.bayes import laplace as ours
    from gnuq_core.bayes.bnn import fit_map

    case, _ = moons
    cfg, ds = xlap._cfg_and_data(case)
    theta = fit_map(cfg, ds.x_train, ds.y_train, n_restarts=1).theta
    xs = ds.queries["grid"]
    theirs = xlap.laplace_torch_variances(cfg, theta, ds.x_train, ds.y_train, xs)
    bumped = theta + 1e-3 * np.random.default_rng(0).standard_normal(theta.size)
    est = ours.estimates(cfg, bumped, ds.x_train, ds.y_train, xs)
    from gnuq_core.crosscheck.agreement import compare

    assert compare("ggn", est["ggn_f"], theirs["var_f"], xlap.TOLERANCE)["agrees"] is False
    assert compare("grad", est["iso_p"], xlap.autograd_grad_p_sq(cfg, theta, xs), xlap.TOLERANCE)["agrees"] is False


def test_torch_copy_checks_its_input() -> None:
    from gnuq_core.bayes.bnn import MLPConfig

    with pytest.raises(ValueError, match="entries"):
        xlap.torch_copy(MLPConfig(width=3), np.zeros(5))
    with pytest.raises(ValueError, match="regression"):
        xlap.autograd_grad_p_sq(MLPConfig(task="regression", input_dim=1, width=2), np.zeros(7), np.zeros((1, 1)))
