"""Is the damped inverse curvature close to a multiple of the identity?

For tanh MLP classifiers trained on the 2-D task of :mod:`gnuq_core.isotropy.proxy`, compare the
damped Laplace quadratic form ``gᵀ(G + λI)⁻¹g`` (``G``: GGN of the mean NLL at θ*,
``g = ∇θ p(x)`` at a query) with the isotropic ``λ⁻¹‖g‖²``:

- :func:`exact_case`: exact Hessian and GGN eigendecompositions (small nets), spectrum
  summaries and the comparison over a grid of dampings;
- :func:`slq_case`: a large net (≥ 10⁵ parameters), spectral densities of the Hessian and
  GGN by stochastic Lanczos quadrature, and the comparison by Lanczos quadrature per query.

With ``N`` training points and prior precision α, the Laplace precision is
``N·G + αI = N(G + λI)`` with ``λ = α/N``; training with weight decay ``wd`` on the mean
NLL corresponds to ``λ = wd``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy import ggn_laplace as curvature
from gnuq_core.isotropy import proxy
from gnuq_core.isotropy import spectra
from gnuq_core.isotropy.damped import damped_quadratic_form
from gnuq_core.stats import spearman_pair

__all__ = ["train", "task_data", "exact_case", "exact_case_at", "summaries", "slq_case"]


def train(width: int, seed: int, n_train: int, steps: int, weight_decay: float) -> tuple[Any, np.ndarray, np.ndarray]:
    """The MLP of ``width`` (two hidden layers) trained on the 2-D task: ``(θ*, x, y)``."""
    x, y = proxy.sample_task(np.random.default_rng([seed, 0]), n_train)
    params = classifier.train(x, y, [width, width], seed=seed, steps=steps, weight_decay=weight_decay)
    return params, x, y


def task_data(seed: int, n_train: int) -> tuple[np.ndarray, np.ndarray]:
    """The training data of :func:`train` (without training)."""
    return proxy.sample_task(np.random.default_rng([seed, 0]), n_train)


def exact_case(width: int, seed: int = 0, n_train: int = 400, steps: int = 2000, weight_decay: float = 1e-3,
               dampings: list[float] | None = None, n_grid: int = 20, extent: float = 4.0) -> dict[str, Any]:
    """Exact spectra and the damped-vs-isotropic comparison for one small MLP, trained here.

    Returns
    -------
    dict
        ``n_params``; ``hess_eigs``, ``ggn_eigs`` (ascending); ``summary`` (of the Hessian and
        the GGN at ``λ = weight_decay``, see :func:`gnuq_core.isotropy.spectra.spectrum_summary`);
        ``dampings``, ``rho`` and ``median_rel_error`` per damping; ``exact`` and
        ``isotropic`` per query at ``λ = weight_decay``; ``train_acc``.
    """
    params, x, y = train(width, seed, n_train, steps, weight_decay)
    case = exact_case_at(params, x, y, width, weight_decay=weight_decay, dampings=dampings, n_grid=n_grid,
                         extent=extent)
    return {**case, "summary": summaries(case, weight_decay)}


def exact_case_at(params: Any, x: np.ndarray, y: np.ndarray, width: int, *, weight_decay: float = 1e-3,
                  dampings: list[float] | None = None, n_grid: int = 20, extent: float = 4.0) -> dict[str, Any]:
    """:func:`exact_case` at given trained parameters ``params`` (on the training data ``x``, ``y``),
    without the spectrum summaries (:func:`summaries` computes them from the eigenvalues)."""
    dampings = dampings or list(np.logspace(-5, 0, 11))
    n_train = len(x)
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    hess = spectra.jax_hessian(lambda p: classifier.nll(p, xs, ys), params)
    h_eigs = np.linalg.eigvalsh(hess)
    a = curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x),
                             scale=1.0 / n_train)
    gq = classifier.flat_grads(params, proxy.query_grid(n_grid, extent))
    g_eigs, curves = _ggn_and_forms(a, gq, dampings)
    at = _ggn_and_forms(a, gq, [weight_decay])[1][0]
    return {
        "width": width, "n_params": classifier.n_params(params),
        "hess_eigs": h_eigs, "ggn_eigs": g_eigs,
        "dampings": list(dampings),
        "rho": [c["spearman"] for c in curves],
        "median_rel_error": [c["median_rel_error"] for c in curves],
        "exact": at["exact"], "isotropic": at["isotropic"],
        "train_acc": float(np.mean((classifier.predict_proba(params, x) > 0.5) == y)),
    }


def _ggn_and_forms(a: np.ndarray, gq: np.ndarray, dampings: list[float]) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The eigenvalues of the GGN ``G = AᵀA`` (ascending) and, per damping, ``gᵀ(G + λI)⁻¹g``
    against ``λ⁻¹‖g‖²`` (:func:`gnuq_core.isotropy.spectra.damped_vs_isotropic`'s keys).

    With fewer parameters than factor rows, from the eigendecomposition of ``G``; otherwise
    from the ``n × n`` Gram matrix ``AAᵀ`` (the same nonzero eigenvalues, the rest exactly 0)
    and the Woodbury identity: the same numbers up to rounding, at the cost of the smaller
    side (width 96: seconds instead of minutes).
    """
    n, p = a.shape
    if p <= n:
        g_eigs, g_vecs = np.linalg.eigh(a.T @ a)
        return g_eigs, [spectra.damped_vs_isotropic(g_eigs, g_vecs, gq, lam) for lam in dampings]
    g_eigs = np.concatenate([np.zeros(p - n), np.clip(np.linalg.eigvalsh(a @ a.T), 0.0, None)])
    curves = []
    for lam in dampings:
        exact = damped_quadratic_form(a, gq, lam, method="woodbury")
        iso = (gq ** 2).sum(axis=1) / lam
        rel = iso / exact - 1.0
        curves.append({"exact": exact, "isotropic": iso, "rel_error": rel, "median_rel_error": float(np.median(rel)),
                       "spearman": spearman_pair(exact, iso)})
    return g_eigs, curves


def summaries(case: dict[str, Any], weight_decay: float) -> dict[str, dict[str, float]]:
    """The Hessian's and the GGN's spectrum summaries of an exact case at ``λ = weight_decay``
    (:func:`gnuq_core.isotropy.spectra.spectrum_summary` of its eigenvalues)."""
    return {"hessian": spectra.spectrum_summary(np.asarray(case["hess_eigs"], float), weight_decay),
            "ggn": spectra.spectrum_summary(np.asarray(case["ggn_eigs"], float), weight_decay)}


def slq_case(width: int, seed: int = 0, n_train: int = 400, steps: int = 1000, weight_decay: float = 1e-3,
             n_probes: int = 4, m: int = 60, n_query: int = 40, m_query: int = 40,
             n_grid: int = 20, extent: float = 4.0, progress: bool = False) -> dict[str, Any]:
    """SLQ spectra of a large MLP and Lanczos-quadrature ``gᵀ(G + λI)⁻¹g`` at ``λ = weight_decay``.

    Returns
    -------
    dict
        ``n_params``, ``hessian`` and ``ggn`` (:class:`~gnuq_core.isotropy.spectra.SLQResult`);
        per query (``n_query`` grid points, evenly spaced) ``exact`` (Woodbury, exact),
        ``lanczos`` (``m_query``-step Lanczos quadrature from g) and ``isotropic``;
        ``rho`` and ``median_rel_error`` of isotropic against exact; ``rho_lanczos``
        (isotropic against Lanczos), ``rho_lanczos_vs_exact`` and ``lanczos_rel_error``
        (the quadrature's own error); ``rank_share``, the median share of ‖g‖² that the
        data explain away, ``1 − λ gᵀ(G+λI)⁻¹g / ‖g‖²``.
    """
    params, x, y = train(width, seed, n_train, steps, weight_decay)
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    hvp, dim = spectra.jax_hvp(lambda p: classifier.nll(p, xs, ys), params)
    gvp, _ = spectra.jax_ggn_vp(classifier.logit, params, xs)
    h = spectra.slq(hvp, dim, n_probes=n_probes, m=m, seed=seed, progress=progress)
    g = spectra.slq(gvp, dim, n_probes=n_probes, m=m, seed=seed + 1, progress=progress)
    xq = proxy.query_grid(n_grid, extent)
    idx = np.linspace(0, len(xq) - 1, n_query).round().astype(int)
    gq = classifier.flat_grads(params, xq[idx])
    lam = weight_decay
    lanczos = np.array([spectra.lanczos_quadratic_form(gvp, gi, lambda t: 1 / (np.clip(t, 0, None) + lam), m_query)
                        for gi in gq])
    # The GGN of n examples has rank <= n, so the same quadratic form is also exact in n x n.
    a = curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x),
                             scale=1.0 / n_train)
    exact = damped_quadratic_form(a, gq, lam, method="woodbury")
    iso = (gq ** 2).sum(1) / lam
    return {"width": width, "n_params": dim, "hessian": h, "ggn": g, "exact": exact, "isotropic": iso,
            "lanczos": lanczos, "rho": spearman_pair(exact, iso),
            "median_rel_error": float(np.median(iso / exact - 1)),
            "rho_lanczos": spearman_pair(lanczos, iso),
            "rho_lanczos_vs_exact": spearman_pair(lanczos, exact),
            "lanczos_rel_error": float(np.median(lanczos / exact - 1)),
            "rank_share": float(np.median(1 - lam * exact / np.maximum((gq ** 2).sum(1), 1e-300))),
            "train_acc": float(np.mean((classifier.predict_proba(params, x) > 0.5) == y))}
