"""Curvature spectra: Lanczos, stochastic Lanczos quadrature (SLQ) and spectrum summaries.

Everything here works on a *matrix-vector product* ``matvec: (n,) float64 -> (n,)``, so
the same Lanczos code serves an explicit matrix, a JAX Hessian-vector product
(:func:`jax_hvp`, :func:`jax_ggn_vp`) and a PyTorch one (:func:`torch_hvp`).

- :func:`lanczos` runs ``m`` steps with full re-orthogonalisation and returns the
  tridiagonal matrix ``T``; its eigenvalues (Ritz values) approximate the extreme
  eigenvalues of the operator.
- :func:`slq` turns Lanczos runs from random probe vectors into a spectral density: each
  run gives nodes (Ritz values) and weights (squared first components of ``T``'s
  eigenvectors), a quadrature rule for ``vᵀ f(H) v`` (Golub & Meurant; Ubaru, Chen & Saad
  2017; Ghorbani, Krishnan & Xiao 2019); :func:`slq_probe` computes one of its probes
  alone (what the results store keeps and re-checks).
- :func:`lanczos_quadratic_form` estimates ``gᵀ f(H) g`` for one vector ``g`` (e.g.
  ``f(x) = 1/(x + λ)``), which is what the damped Laplace estimator needs; for a curvature
  given as a low-rank factor the exact form is :func:`gnuq_core.isotropy.damped.damped_quadratic_form`.
- :func:`spectrum_summary` and :func:`damped_vs_isotropic` summarise an exact spectrum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gnuq_core.stats import spearman_pair

MatVec = Callable[[np.ndarray], np.ndarray]

__all__ = [
    "lanczos", "slq", "slq_probe", "rademacher_probe", "SLQResult", "lanczos_quadratic_form", "spectrum_summary",
    "damped_vs_isotropic", "jax_hessian", "jax_hvp", "jax_ggn_vp", "torch_hvp", "dense_matvec",
]


def dense_matvec(a: np.ndarray) -> MatVec:
    """``v -> a @ v`` for an explicit symmetric matrix ``a`` (tests, small nets)."""
    a = np.asarray(a, dtype=np.float64)
    return lambda v: a @ v


def lanczos(matvec: MatVec, v0: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``m`` Lanczos steps from ``v0`` with full re-orthogonalisation.

    Parameters
    ----------
    matvec : callable
        Symmetric operator ``H v`` on float64 vectors of length ``n``.
    v0 : ndarray, shape (n,)
        Start vector (normalised here).
    m : int
        Number of steps; stops early if an invariant subspace is found.

    Returns
    -------
    alpha, beta : ndarray
        Diagonal (length k ≤ m) and off-diagonal (length k − 1) of ``T = Qᵀ H Q``.
    """
    n = v0.shape[0]
    m = min(m, n)
    q = np.asarray(v0, dtype=np.float64) / np.linalg.norm(v0)
    basis = np.zeros((m, n))
    alpha, beta = [], []
    b = 0.0
    q_prev = np.zeros(n)
    for j in range(m):
        basis[j] = q
        w = np.asarray(matvec(q), dtype=np.float64) - b * q_prev
        a = float(q @ w)
        w -= a * q
        # full re-orthogonalisation (twice is enough): keeps Ritz values from ghosting
        for _ in range(2):
            w -= basis[: j + 1].T @ (basis[: j + 1] @ w)
        alpha.append(a)
        b = float(np.linalg.norm(w))
        if j == m - 1 or b < 1e-10 * max(1.0, abs(a)):
            break
        beta.append(b)
        q_prev, q = q, w / b
    return np.array(alpha), np.array(beta)


def _tridiag_eig(alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy.linalg import eigh_tridiagonal

    if len(alpha) == 1:
        return alpha.copy(), np.ones((1, 1))
    return eigh_tridiagonal(alpha, beta)


@dataclass(frozen=True)
class SLQResult:
    """Quadrature rules from stochastic Lanczos runs.

    Attributes
    ----------
    nodes, weights : list of ndarray
        Per probe: Ritz values and their weights (weights of one probe sum to 1).
    dim : int
        Dimension ``n`` of the operator (to turn densities into eigenvalue counts).
    """

    nodes: list[np.ndarray]
    weights: list[np.ndarray]
    dim: int

    def trace(self, f: Callable[[np.ndarray], np.ndarray]) -> float:
        """Estimate of ``tr f(H) = n · E_v[vᵀ f(H) v]``."""
        return self.dim * float(np.mean([w @ f(x) for x, w in zip(self.nodes, self.weights)]))

    def fraction(self, predicate: Callable[[np.ndarray], np.ndarray]) -> float:
        """Estimated fraction of eigenvalues for which ``predicate`` holds."""
        return self.trace(lambda x: predicate(x).astype(float)) / self.dim

    def density(self, grid: np.ndarray, sigma: float, log: bool = False) -> np.ndarray:
        """Gaussian-smoothed spectral density on ``grid`` (integrates to ≈ 1).

        With ``log=True`` the smoothing is done in ``log10 |λ|`` and ``grid`` is in
        log10 units (for spectra spanning many orders of magnitude).
        """
        out = np.zeros_like(grid, dtype=float)
        for x, w in zip(self.nodes, self.weights):
            pts = np.log10(np.maximum(np.abs(x), 1e-300)) if log else x
            k = np.exp(-0.5 * ((grid[:, None] - pts[None, :]) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
            out += k @ w
        return out / len(self.nodes)


def slq(matvec: MatVec, dim: int, n_probes: int = 8, m: int = 60, seed: int = 0,
        progress: bool = False) -> SLQResult:
    """Stochastic Lanczos quadrature with Rademacher probes.

    Parameters
    ----------
    matvec : callable
        Symmetric operator on float64 vectors of length ``dim``.
    dim : int
        Its dimension.
    n_probes : int
        Number of random start vectors.
    m : int
        Lanczos steps per probe.
    seed : int
        Seed of the probes.
    progress : bool
        Show a tqdm bar over probes.

    Returns
    -------
    SLQResult
    """
    rng = np.random.default_rng(seed)
    nodes, weights = [], []
    it = range(n_probes)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="SLQ probes")
    for _ in it:
        theta, w = _quadrature_rule(matvec, rng.choice([-1.0, 1.0], size=dim), m)
        nodes.append(theta)
        weights.append(w)
    return SLQResult(nodes, weights, dim)


def _quadrature_rule(matvec: MatVec, v: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes (Ritz values) and weights of the ``m``-step Lanczos quadrature rule from ``v``."""
    a, b = lanczos(matvec, v, m)
    theta, vecs = _tridiag_eig(a, b)
    return theta, vecs[0] ** 2


def rademacher_probe(dim: int, seed: int, k: int) -> np.ndarray:
    """The ``k``-th (from 0) Rademacher probe that :func:`slq` draws with ``seed``."""
    rng = np.random.default_rng(seed)
    for _ in range(k):
        rng.choice([-1.0, 1.0], size=dim)
    return rng.choice([-1.0, 1.0], size=dim)


def slq_probe(matvec: MatVec, dim: int, k: int, m: int = 60, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Probe ``k`` of :func:`slq` alone: its nodes and weights, the same numbers as
    ``slq(matvec, dim, n_probes > k, m, seed)`` gives for that probe.

    A stored spectrum can so be checked (or extended) one probe at a time.
    """
    if k < 0:
        raise ValueError(f"probe index k must be >= 0, not {k}")
    return _quadrature_rule(matvec, rademacher_probe(dim, seed, k), m)


def lanczos_quadratic_form(matvec: MatVec, g: np.ndarray, f: Callable[[np.ndarray], np.ndarray],
                           m: int = 40) -> float:
    """Estimate ``gᵀ f(H) g`` by ``m``-point Lanczos (Gauss) quadrature started at ``g``.

    Exact once ``m`` reaches the number of distinct eigenvalues that ``g`` touches.
    """
    nrm2 = float(g @ g)
    if nrm2 == 0.0:
        return 0.0
    a, b = lanczos(matvec, g, m)
    theta, vecs = _tridiag_eig(a, b)
    return nrm2 * float(vecs[0] ** 2 @ f(theta))


def spectrum_summary(eigs: np.ndarray, damping: float, outlier_frac: float = 0.01) -> dict[str, float]:
    """Outliers, bulk and effective dimension of an exact spectrum.

    Parameters
    ----------
    eigs : ndarray
        Eigenvalues (a Hessian may have negative ones).
    damping : float
        λ in ``H + λI``.
    outlier_frac : float
        An eigenvalue ≥ ``outlier_frac · λ_max`` counts as an outlier.

    Returns
    -------
    dict
        ``n``, ``lambda_max``, ``n_outliers``, ``frac_below_damping`` (|λᵢ| < λ),
        ``frac_negative`` (λᵢ < −λ: negative beyond the damping), ``effective_dim`` (Σ λᵢ⁺/(λᵢ⁺ + λ)) and ``effective_frac``
        (effective_dim / n).
    """
    eigs = np.asarray(eigs, dtype=float)
    pos = np.clip(eigs, 0.0, None)
    lmax = float(eigs.max())
    d_eff = float(np.sum(pos / (pos + damping)))
    return {
        "n": int(eigs.size),
        "lambda_max": lmax,
        "n_outliers": int(np.sum(eigs >= outlier_frac * lmax)),
        "frac_below_damping": float(np.mean(np.abs(eigs) < damping)),
        "frac_negative": float(np.mean(eigs < -damping)),
        "effective_dim": d_eff,
        "effective_frac": d_eff / eigs.size,
    }


def damped_vs_isotropic(eigvals: np.ndarray, eigvecs: np.ndarray, grads: np.ndarray,
                        damping: float) -> dict[str, Any]:
    """Compare ``gᵀ(H + λI)⁻¹g`` with the isotropic ``λ⁻¹‖g‖²`` over query gradients.

    Parameters
    ----------
    eigvals, eigvecs : ndarray
        Eigendecomposition of a positive semi-definite ``H`` (negatives are clipped to 0).
    grads : ndarray, shape (n_queries, n_params)
        One gradient per query point.
    damping : float
        λ > 0.

    Returns
    -------
    dict
        ``exact`` and ``isotropic`` (arrays), ``rel_error`` per query
        (``isotropic/exact − 1`` ≥ 0), its ``median_rel_error`` and ``spearman``.
    """
    lam = np.clip(eigvals, 0.0, None)
    proj = grads @ eigvecs  # (q, n)
    exact = (proj ** 2 / (lam + damping)).sum(axis=1)
    iso = (grads ** 2).sum(axis=1) / damping
    rel = iso / exact - 1.0
    rho = spearman_pair(exact, iso)
    return {"exact": exact, "isotropic": iso, "rel_error": rel,
            "median_rel_error": float(np.median(rel)), "spearman": rho}


# ---------------------------------------------------------------- framework adapters


def jax_hessian(loss: Callable[[Any], Any], params: Any) -> np.ndarray:
    """Explicit Hessian (float64 numpy, P×P) of a scalar JAX ``loss(params)`` over flat params."""
    import jax
    from jax.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(params)
    h = jax.jit(jax.hessian(lambda f: loss(unravel(f))))(flat)
    h = np.asarray(h, dtype=np.float64)
    return 0.5 * (h + h.T)


def jax_hvp(loss: Callable[[Any], Any], params: Any) -> tuple[MatVec, int]:
    """Hessian-vector product of a scalar JAX ``loss(params)`` at ``params``, on flat vectors.

    Returns
    -------
    matvec, dim
        ``matvec(v)`` takes and returns float64 numpy vectors of length ``dim``.
    """
    import jax
    from jax.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(params)
    dtype = flat.dtype
    grad_flat = jax.grad(lambda f: loss(unravel(f)))

    @jax.jit
    def hv(v):
        return jax.jvp(grad_flat, (flat,), (v,))[1]

    return (lambda v: np.asarray(hv(np.asarray(v, dtype=dtype)), dtype=np.float64)), int(flat.size)


def jax_ggn_vp(logits: Callable[[Any, Any], Any], params: Any, xs: Any) -> tuple[MatVec, int]:
    """GGN (= Fisher) vector product of the mean sigmoid cross-entropy, on flat vectors.

    ``G = (1/n) Σᵢ pᵢ(1 − pᵢ) ∇zᵢ ∇zᵢᵀ`` with ``zᵢ = logits(params, xᵢ)`` (a scalar per
    input, ``logits`` vmapped over ``xs``) and ``pᵢ = σ(zᵢ)``. Needs no labels.
    """
    import jax
    from jax.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(params)
    dtype = flat.dtype

    def z(f):
        return jax.vmap(lambda x: logits(unravel(f), x))(xs)

    z0 = z(flat)
    p = jax.nn.sigmoid(z0)
    w = p * (1 - p) / z0.shape[0]
    _, vjp = jax.vjp(z, flat)

    @jax.jit
    def gv(v):
        jv = jax.jvp(z, (flat,), (v,))[1]
        return vjp(w * jv)[0]

    return (lambda v: np.asarray(gv(np.asarray(v, dtype=dtype)), dtype=np.float64)), int(flat.size)


def torch_hvp(loss_fn: Callable[[], Any], params: list[Any]) -> tuple[MatVec, int]:
    """Hessian-vector product of a PyTorch scalar ``loss_fn()`` w.r.t. ``params``.

    The gradient graph is built once (``create_graph=True``); each product is one extra
    backward pass through it. Vectors are flat float64 numpy arrays over the
    concatenated ``params``.
    """
    import torch

    loss = loss_fn()
    grads = torch.autograd.grad(loss, params, create_graph=True)
    flat_g = torch.cat([g.reshape(-1) for g in grads])
    dim = flat_g.numel()

    def matvec(v: np.ndarray) -> np.ndarray:
        vt = torch.as_tensor(v, dtype=flat_g.dtype)
        hv = torch.autograd.grad((flat_g * vt).sum(), params, retain_graph=True)
        return torch.cat([h.reshape(-1) for h in hv]).detach().double().numpy()

    return matvec, dim
