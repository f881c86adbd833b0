"""Laplace (GGN) predictive variances from Jacobians: full, diagonal and isotropic.

For a binary classifier with logits ``zᵢ`` and ``pᵢ = σ(zᵢ)`` the generalised Gauss-Newton
matrix (equal to the Fisher) of the summed NLL on inputs ``x₁..xₙ`` is

    G = Σᵢ pᵢ(1 − pᵢ) ∇zᵢ ∇zᵢᵀ = AᵀA,      A = diag(√(pᵢ(1 − pᵢ))) J,

and needs no labels, so it can be evaluated on *any* inputs, including proxy data. The
Laplace posterior covariance is ``Σ = (G + αI)⁻¹`` (α: prior precision), and the induced
predictive variance of a query with gradient ``g = ∇θ p(x)`` is ``gᵀΣg``. The isotropic
estimator replaces Σ by σ²I, i.e. ``‖g‖²``.

Relation to :mod:`gnuq_core.bayes.laplace`: both compute a GGN-Laplace variance from
per-input Jacobians (the same :func:`gnuq_core.isotropy.mlp.jacobian_rows`). This module
serves the proxy-data and spectra chapters: an *isotropic* prior precision α and a
curvature evaluated on arbitrary (proxy) inputs, so it works with the factor ``A`` and
never forms a P×P matrix when n < P. ``bayes.laplace`` serves the MCMC comparison: the
flat-θ BNN that NUTS samples, a per-layer (non-isotropic) prior, and the exact Hessian
beside the GGN, so it forms the P×P precisions (P ≤ 5,000) and its NTK view calls the
shared kernel form :func:`gnuq_core.isotropy.damped.kernel_residual`.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import subspace_angles

from gnuq_core.isotropy.damped import damped_quadratic_form

__all__ = ["ggn_factor", "laplace_variance", "diag_laplace_variance", "isotropic_variance",
           "top_eigenspace", "principal_angles"]


def ggn_factor(jac_logit: np.ndarray, probs: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """``A`` with ``AᵀA = scale · Σᵢ pᵢ(1 − pᵢ) ∇zᵢ∇zᵢᵀ``.

    Parameters
    ----------
    jac_logit : ndarray, shape (n, P)
        Logit gradients of the curvature inputs.
    probs : ndarray, shape (n,)
        Model probabilities on those inputs.
    scale : float
        Multiplies G; use ``n_reference / n`` to put a proxy set of a different size on
        the reference's scale.
    """
    w = np.clip(probs * (1 - probs), 0.0, None) * scale
    return np.sqrt(w)[:, None] * jac_logit


def laplace_variance(a: np.ndarray, grads: np.ndarray, prior_precision: float) -> np.ndarray:
    """``gᵀ(AᵀA + αI)⁻¹g`` for each row ``g`` of ``grads`` (exact, float64).

    The damped quadratic form :func:`gnuq_core.isotropy.damped.damped_quadratic_form`
    with ``λ = α``: a P×P solve when P ≤ n and the Woodbury identity in the n×n data
    space otherwise, so the cost is that of the smaller side.
    """
    return damped_quadratic_form(a, grads, prior_precision)


def diag_laplace_variance(a: np.ndarray, grads: np.ndarray, prior_precision: float) -> np.ndarray:
    """``Σⱼ gⱼ² / (diag(AᵀA)ⱼ + α)``: the diagonal-GGN Laplace variance."""
    d = (np.asarray(a) ** 2).sum(0)
    return (np.asarray(grads) ** 2 / (d + prior_precision)).sum(1)


def isotropic_variance(grads: np.ndarray) -> np.ndarray:
    """``‖g‖²`` per row (Σ = I; any σ² gives the same ranking)."""
    return (np.asarray(grads) ** 2).sum(1)


def top_eigenspace(a: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` eigenvalues and eigenvectors (columns) of ``AᵀA``, via the SVD of ``A``."""
    a = np.asarray(a, np.float64)
    n, p = a.shape
    if p <= n:
        lam, vec = np.linalg.eigh(a.T @ a)
        order = np.argsort(lam)[::-1][:k]
        return lam[order], vec[:, order]
    lam, u = np.linalg.eigh(a @ a.T)  # AAᵀ shares the nonzero eigenvalues; v = Aᵀu/√λ
    order = np.argsort(lam)[::-1][:k]
    lam, u = np.clip(lam[order], 1e-300, None), u[:, order]
    return lam, (a.T @ u) / np.sqrt(lam)


def principal_angles(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Principal angles (radians, ascending) between the column spaces of ``u`` and ``v``."""
    return np.sort(subspace_angles(u, v))
