"""Proxy-data covariance bias on a synthetic problem where the training data is known.

A network is trained on distribution A (2-D inputs x ~ N(0, I), a nonlinear Bernoulli
label). Its Laplace/GGN covariance is then built three ways and each induces a predictive
variance ``gᵀΣg`` (``g = ∇θ p(x)``) on a grid of query points:

- **reference**: GGN on the training inputs themselves;
- **proxy B(δ)**: GGN on a fresh sample of inputs from A shifted by ``δ`` along the first
  axis (``δ = 0``: same distribution, different sample), rescaled to the training-set size;
  full and diagonal;
- **isotropic**: ``Σ = σ²I``, i.e. ``‖g‖²``.

Each is compared with the reference by Spearman ρ over the query grid; the distortion's
structure is measured by principal angles between the top eigenspaces of the proxy and
reference GGN, and by where on the grid the proxy gains or loses variance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy import ggn_laplace as curvature
from gnuq_core.stats import spearman_pair, t_interval

__all__ = ["sample_task", "query_grid", "run_seed", "summarise", "SHIFT_DIRECTION"]

SHIFT_DIRECTION = np.array([1.0, 0.0])


def _truth_logit(x: np.ndarray) -> np.ndarray:
    return 2.5 * np.sin(1.5 * x[:, 0]) + 1.5 * x[:, 1]


def sample_task(rng: np.random.Generator, n: int, delta: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` inputs from A shifted by ``delta · SHIFT_DIRECTION`` and their Bernoulli labels."""
    x = rng.standard_normal((n, 2)) + delta * SHIFT_DIRECTION
    y = (rng.random(n) < 1 / (1 + np.exp(-_truth_logit(x)))).astype(np.float64)
    return x, y


def query_grid(n: int, extent: float = 4.0) -> np.ndarray:
    """``n × n`` grid over ``[-extent, extent]²`` (rows: x₂ slow, x₁ fast)."""
    t = np.linspace(-extent, extent, n)
    g1, g2 = np.meshgrid(t, t)
    return np.column_stack([g1.ravel(), g2.ravel()])


def run_seed(seed: int, deltas: list[float], n_train: int = 400, hidden: list[int] | None = None,
             steps: int = 2000, weight_decay: float = 1e-3, k_top: int = 10, n_grid: int = 25,
             extent: float = 4.0) -> dict[str, Any]:
    """One seed of the proxy-shift sweep.

    Parameters
    ----------
    seed : int
        Seeds the training data, the network initialisation and the proxy samples.
    deltas : list of float
        Shifts of the proxy distribution.
    n_train : int
        Training-set size (the proxy sets have the same size).
    hidden : list of int
        Hidden widths of the tanh MLP.
    steps, weight_decay : int, float
        Adam steps; weight decay (prior precision per example, α = n_train · weight_decay).
    k_top : int
        Dimension of the top eigenspaces compared by principal angles.
    n_grid, extent : int, float
        Query grid.

    Returns
    -------
    dict
        ``rho_iso``; per δ lists ``rho_proxy``, ``rho_proxy_diag``, ``overlap`` (mean cos² of
        the principal angles), ``structure`` (Spearman of log(u_proxy/u_ref) with the query's
        position along the shift); ``log_ratio`` on the grid for every δ; ``rho_ref_diag``;
        ``n_params``; ``train_acc``.
    """
    hidden = hidden or [32, 32]
    rng = np.random.default_rng([seed, 0])
    x_tr, y_tr = sample_task(rng, n_train)
    params = classifier.train(x_tr, y_tr, hidden, seed=seed, steps=steps, weight_decay=weight_decay)
    alpha = n_train * weight_decay
    xq = query_grid(n_grid, extent)
    gq = classifier.flat_grads(params, xq)

    def factor(x: np.ndarray) -> np.ndarray:
        return curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x),
                                    scale=n_train / len(x))

    a_ref = factor(x_tr)
    u_ref = curvature.laplace_variance(a_ref, gq, alpha)
    u_iso = curvature.isotropic_variance(gq)
    _, v_ref = curvature.top_eigenspace(a_ref, k_top)
    out: dict[str, Any] = {
        "rho_iso": spearman_pair(u_iso, u_ref),
        "rho_ref_diag": spearman_pair(curvature.diag_laplace_variance(a_ref, gq, alpha), u_ref),
        "rho_proxy": [], "rho_proxy_diag": [], "overlap": [], "structure": [], "log_ratio": [],
        "n_params": classifier.n_params(params),
        "train_acc": float(np.mean((classifier.predict_proba(params, x_tr) > 0.5) == y_tr)),
        "mean_pq_ref": float(np.mean(classifier.predict_proba(params, x_tr) * (1 - classifier.predict_proba(params, x_tr)))),
    }
    along = xq @ SHIFT_DIRECTION
    for i, delta in enumerate(deltas):
        x_px, _ = sample_task(np.random.default_rng([seed, 1, i]), n_train, delta)
        a_px = factor(x_px)
        u_px = curvature.laplace_variance(a_px, gq, alpha)
        _, v_px = curvature.top_eigenspace(a_px, k_top)
        log_ratio = np.log(u_px / u_ref)
        out["rho_proxy"].append(spearman_pair(u_px, u_ref))
        out["rho_proxy_diag"].append(spearman_pair(curvature.diag_laplace_variance(a_px, gq, alpha), u_ref))
        out["overlap"].append(float(np.mean(np.cos(curvature.principal_angles(v_ref, v_px)) ** 2)))
        out["structure"].append(spearman_pair(log_ratio, along))
        out["log_ratio"].append(log_ratio)
    return out


def summarise(runs: list[dict[str, Any]], deltas: list[float]) -> dict[str, Any]:
    """Across seeds: per-δ mean and CI of each metric, and the crossover shift.

    ``crossover_point``: the smallest δ whose mean ``ρ_iso − ρ_proxy`` is > 0;
    ``crossover_ci``: the smallest δ from which on the CI of that difference lies above 0
    (``nan`` if never).
    """
    rho_iso = np.array([r["rho_iso"] for r in runs])
    table: dict[str, Any] = {"delta": list(deltas)}
    for key in ("rho_proxy", "rho_proxy_diag", "overlap", "structure"):
        arr = np.array([r[key] for r in runs])  # (seeds, deltas)
        table[key] = [t_interval(arr[:, j]) for j in range(len(deltas))]
    diff = rho_iso[:, None] - np.array([r["rho_proxy"] for r in runs])
    table["diff"] = [t_interval(diff[:, j]) for j in range(len(deltas))]
    table["rho_iso"] = t_interval(rho_iso)
    table["rho_ref_diag"] = t_interval(np.array([r["rho_ref_diag"] for r in runs]))
    point = [d for d, (m, _, _) in zip(deltas, table["diff"]) if m > 0]
    table["crossover_point"] = float(point[0]) if point else float("nan")
    sig = [lo > 0 for _, lo, _ in table["diff"]]
    table["crossover_ci"] = float("nan")
    for j in range(len(deltas)):
        if all(sig[j:]):
            table["crossover_ci"] = float(deltas[j])
            break
    table["diff_seeds_at_max"] = diff[:, -1]
    return table
