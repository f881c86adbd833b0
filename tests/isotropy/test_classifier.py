"""Small JAX MLP classifier: training lowers the loss; per-input gradients are right."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy.mlp import init_mlp


def test_train_and_jacobians():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 2))
    y = (x[:, 0] > 0).astype(float)
    p0 = init_mlp(jax.random.PRNGKey(0), [2, 8, 1], scale="glorot")
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    params = classifier.train(x, y, [8], seed=0, steps=300)
    assert float(classifier.nll(params, xs, ys)) < float(classifier.nll(p0, xs, ys))
    assert np.mean((classifier.predict_proba(params, x) > 0.5) == y) > 0.9
    jac = classifier.jacobian_rows(params, x[:3])
    g1 = ravel_pytree(jax.grad(classifier.logit)(params, xs[1]))[0]
    np.testing.assert_allclose(jac[1], np.asarray(g1), rtol=1e-5, atol=1e-6)
    p = classifier.predict_proba(params, x[:3])
    np.testing.assert_allclose(classifier.flat_grads(params, x[:3]), jac * (p * (1 - p))[:, None], rtol=1e-4, atol=1e-7)
    assert classifier.n_params(params) == 2 * 8 + 8 + 8 + 1


def test_train_is_the_shared_mlp_and_adam():
    # one MLP, one Adam: train() is init_mlp(glorot) + fit_adam on NLL + wd/2·Σ‖W‖² (weights only)
    from gnuq_core.isotropy.train import fit_adam

    rng = np.random.default_rng(1)
    x = rng.standard_normal((20, 2))
    y = (x[:, 1] > 0).astype(float)
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    p0 = init_mlp(jax.random.PRNGKey(3), [2, 4, 1], scale="glorot")
    want = fit_adam(lambda p: classifier.nll(p, xs, ys) + 0.5 * 1e-2 * sum(jnp.sum(w ** 2) for w, _ in p),
                    p0, steps=30, lr=1e-2).params
    got = classifier.train(x, y, [4], seed=3, steps=30, weight_decay=1e-2)
    for a, b in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
        np.testing.assert_array_equal(a, b)
