"""The neural tangent kernel Θ(x, x') = ∇θ f(x) · ∇θ f(x') at θ*.

Under Cov[θ] = σ²I the delta-method variance is σ²‖∇θ f(x)‖² = σ² Θ(x, x): the
isotropic estimate is the tangent kernel's diagonal. It depends on the training data only
through θ*. A data-conditioned alternative is the posterior of the linearised model
with prior N(θ*, σ²I) and Gaussian noise, which subtracts what the training gradients
explain:

    Θ(x,x) − Θ(x,X) (Θ(X,X) + (noise/σ²) I)⁻¹ Θ(X,x).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from gnuq_core.isotropy.damped import kernel_residual
from gnuq_core.isotropy.mlp import jacobian_rows


def tangent_kernel(f: Callable[[Any, jax.Array], jax.Array], params: Any, xs: jax.Array,
                   ys: jax.Array | None = None) -> np.ndarray:
    """Θ(xs, ys) as an (n, m) array (``ys`` defaults to ``xs``).

    The gradients are :func:`gnuq_core.isotropy.mlp.jacobian_rows` (the one per-input
    gradient routine); the product is taken in their dtype.
    """
    jx = jacobian_rows(f, params, xs)
    jy = jx if ys is None else jacobian_rows(f, params, ys)
    return np.asarray(jx @ jy.T)


def linearised_posterior_variance(theta_qq: np.ndarray, theta_qx: np.ndarray, theta_xx: np.ndarray,
                                  noise_ratio: float) -> np.ndarray:
    """Diagonal of Θ_qq − Θ_qx (Θ_xx + noise_ratio·I)⁻¹ Θ_xq (``theta_qq`` is the diagonal).

    The Woodbury form of the damped quadratic form, on kernel matrices:
    :func:`gnuq_core.isotropy.damped.kernel_residual`.
    """
    return kernel_residual(theta_qq, theta_qx, theta_xx, noise_ratio)
