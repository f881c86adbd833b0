"""Bayesian linear regression, where the delta method is exact.

Model: y = φ(x)ᵀw + ε, w ~ N(0, α⁻¹I), ε ~ N(0, β⁻¹). The posterior is Gaussian with

    Σ = (αI + β ΦᵀΦ)⁻¹,   m = β Σ Φᵀ y,

and f(x) = φ(x)ᵀw is linear in w, so g = ∇_w f = φ(x) and Var[f(x)] = gᵀ Σ g exactly.
The same variance in function space (Woodbury) is

    k(x,x) − k(x,X) (K + β⁻¹I)⁻¹ k(X,x),   k(a,b) = α⁻¹ φ(a)ᵀφ(b),

which never forms Σ: agreement of the two is a check of the algebra, not a tautology.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gnuq_core.isotropy.damped import kernel_residual


class Posterior(NamedTuple):
    """Gaussian posterior over weights.

    Attributes
    ----------
    mean : np.ndarray
        Posterior mean m, shape (d,).
    cov : np.ndarray
        Posterior covariance Σ, shape (d, d).
    """

    mean: np.ndarray
    cov: np.ndarray


def posterior(phi: np.ndarray, y: np.ndarray, alpha: float, beta: float) -> Posterior:
    """Weight posterior for features ``phi`` (n, d) and targets ``y`` (n,)."""
    precision = alpha * np.eye(phi.shape[1]) + beta * phi.T @ phi
    cov = np.linalg.inv(precision)
    return Posterior(beta * cov @ phi.T @ y, cov)


def weight_space_variance(grads: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Delta-method variance gᵀΣg for each row g of ``grads`` (m, d)."""
    return np.einsum("md,de,me->m", grads, cov, grads)


def function_space_variance(phi_query: np.ndarray, phi_train: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """Closed-form predictive variance of f at the query features, via the kernel."""
    k_qq = np.sum(phi_query**2, axis=1) / alpha
    k_qx = phi_query @ phi_train.T / alpha
    k_xx = phi_train @ phi_train.T / alpha
    return kernel_residual(k_qq, k_qx, k_xx, 1 / beta)
