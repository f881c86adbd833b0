"""Proxy-covariance builder: proxy = training data gives the reference exactly."""

from __future__ import annotations

import numpy as np

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy import ggn_laplace as curvature
from gnuq_core.isotropy import proxy


def test_proxy_equal_to_training_data_is_the_reference():
    rng = np.random.default_rng(0)
    x, y = proxy.sample_task(rng, 60)
    params = classifier.train(x, y, [4], seed=0, steps=100)
    gq = classifier.flat_grads(params, proxy.query_grid(5))

    def factor(xx):
        return curvature.ggn_factor(classifier.jacobian_rows(params, xx), classifier.predict_proba(params, xx),
                                    scale=60 / len(xx))

    ref = curvature.laplace_variance(factor(x), gq, 0.1)
    np.testing.assert_allclose(curvature.laplace_variance(factor(x.copy()), gq, 0.1), ref, rtol=1e-10)
    # the same data twice, rescaled to the training size, is the same covariance too
    np.testing.assert_allclose(curvature.laplace_variance(factor(np.vstack([x, x])), gq, 0.1), ref, rtol=1e-6)
    _, v = curvature.top_eigenspace(factor(x), 4)
    np.testing.assert_allclose(curvature.principal_angles(v, curvature.top_eigenspace(factor(x), 4)[1]), 0, atol=1e-6)


def test_run_seed_and_summary_shapes():
    deltas = [0.0, 3.0]
    runs = [proxy.run_seed(s, deltas, n_train=60, hidden=[4], steps=100, k_top=3, n_grid=6) for s in (0, 1)]
    for r in runs:
        assert len(r["rho_proxy"]) == 2 and all(-1 <= v <= 1 for v in r["rho_proxy"])
        assert 0 <= min(r["overlap"]) and max(r["overlap"]) <= 1 + 1e-9
        assert r["log_ratio"][0].shape == (36,)
    s = proxy.summarise(runs, deltas)
    assert len(s["diff"]) == 2 and s["diff"][0][1] <= s["diff"][0][0] <= s["diff"][0][2]
    x0, _ = proxy.sample_task(np.random.default_rng(5), 2000, delta=2.0)
    assert abs(x0[:, 0].mean() - 2.0) < 0.1 and abs(x0[:, 1].mean()) < 0.1

