"""The damped quadratic form ``gᵀ(AᵀA + λI)⁻¹g``, computed once for every caller.

A Laplace (GGN) predictive variance, a damped inverse curvature and the posterior of a
linearised model all reduce to this form, with ``A`` (n × P) a factor of the curvature
(``AᵀA`` = GGN of n examples, rank ≤ n) and ``g`` a query gradient. Two exact ways to
compute it, chosen by the smaller side:

- **direct** (P ≤ n: few parameters): factor the P × P matrix ``AᵀA + λI`` (Cholesky) and
  solve for each g;
- **Woodbury** (n < P: few examples, the usual case for a network): by
  ``(AᵀA + λI)⁻¹ = λ⁻¹(I − Aᵀ(AAᵀ + λI)⁻¹A)``,

      gᵀ(AᵀA + λI)⁻¹g = λ⁻¹ (‖g‖² − (Ag)ᵀ (AAᵀ + λI)⁻¹ (Ag)),

  which needs only the n × n kernel ``AAᵀ`` (the tangent kernel of the examples).

:func:`kernel_residual` is the Woodbury form written on kernel matrices,
``k(q,q) − k(q,X)(k(X,X) + D)⁻¹k(X,q)`` with ``D`` a scalar or diagonal noise: the
posterior variance of a linearised model (:mod:`gnuq_core.isotropy.tangent_kernel`), the
GGN-Laplace variance under a non-isotropic prior (:func:`gnuq_core.bayes.laplace.ntk_view`)
and the Woodbury branch of :func:`damped_quadratic_form` all call it. Its solve is an LU
solve (``numpy.linalg.solve``), robust when ``k(X,X)`` is nearly singular and the noise
small; the direct branch uses a Cholesky factor of the positive-definite P × P matrix.
Both are exact to float64 rounding, unlike the Lanczos quadrature of
:func:`gnuq_core.isotropy.spectra.lanczos_quadratic_form`.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

__all__ = ["damped_quadratic_form", "kernel_residual", "METHODS"]

METHODS = ("auto", "direct", "woodbury")


def kernel_residual(k_qq: np.ndarray, k_qx: np.ndarray, k_xx: np.ndarray,
                    noise: float | np.ndarray) -> np.ndarray:
    """``k_qq − diag(k_qx (k_xx + D)⁻¹ k_xq)``: what the n examples leave unexplained.

    Parameters
    ----------
    k_qq : ndarray, shape (q,)
        Kernel diagonal of the queries, ``k(q, q)``.
    k_qx : ndarray, shape (q, n)
        Cross kernel, queries × examples.
    k_xx : ndarray, shape (n, n)
        Kernel of the examples.
    noise : float or ndarray of shape (n,)
        ``D``: added to the diagonal of ``k_xx`` (a scalar damping or per-example noise).

    Returns
    -------
    ndarray, shape (q,)
    """
    k_xx = np.asarray(k_xx, np.float64)
    k_qx = np.asarray(k_qx, np.float64)
    n = k_xx.shape[0]
    if k_xx.shape != (n, n) or k_qx.ndim != 2 or k_qx.shape[1] != n:
        raise ValueError(f"k_xx {k_xx.shape} must be (n, n) and k_qx {k_qx.shape} (q, n) with the same n")
    noisy = k_xx + (np.diag(noise) if np.ndim(noise) else noise * np.eye(n))
    solve = np.linalg.solve(noisy, k_qx.T)  # (n, q)
    return np.asarray(k_qq, np.float64) - np.sum(k_qx * solve.T, axis=1)


def damped_quadratic_form(factor: np.ndarray, grads: np.ndarray, damping: float,
                          method: str = "auto") -> np.ndarray:
    """``gᵀ(AᵀA + λI)⁻¹g`` for each row ``g`` of ``grads`` (exact, float64).

    Parameters
    ----------
    factor : ndarray, shape (n, P)
        ``A``, a factor of the curvature (e.g. :func:`gnuq_core.isotropy.ggn_laplace.ggn_factor`).
    grads : ndarray, shape (q, P)
        Query gradients.
    damping : float
        λ > 0 (a prior precision, or a damping).
    method : {"auto", "direct", "woodbury"}
        ``"auto"``: direct when P ≤ n, Woodbury otherwise (the cost of the smaller side).

    Returns
    -------
    ndarray, shape (q,)
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if not damping > 0:
        raise ValueError(f"damping must be > 0 (it makes AᵀA + λI invertible), not {damping}")
    a = np.asarray(factor, np.float64)
    grads = np.asarray(grads, np.float64)
    n, p = a.shape
    if grads.ndim != 2 or grads.shape[1] != p:
        raise ValueError(f"grads {grads.shape} must be (q, {p}) to match the factor {a.shape}")
    alpha = float(damping)
    if method == "direct" or (method == "auto" and p <= n):
        m = a.T @ a
        m[np.diag_indices_from(m)] += alpha
        return np.einsum("qp,pq->q", grads, cho_solve(cho_factor(m), grads.T))
    return kernel_residual((grads ** 2).sum(1), (a @ grads.T).T, a @ a.T, alpha) / alpha
