"""The MAP fit of a validation setting and the local estimates at its query points.

:func:`local_estimates` fits θ* (L-BFGS from several prior draws, the best kept) and
evaluates the estimates chapters 04 and 05 compare with NUTS (:func:`gnuq_core.bayes.laplace.estimates`,
and optionally the tangent-kernel view). This module is the code of the stored kind
``local_estimates`` (`gnuq_core.store.kinds`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gnuq_core.bayes import laplace
from gnuq_core.bayes.bnn import MapResult, fit_map
from gnuq_core.bayes.reference import Setting, prepare, release_compiled

__all__ = ["MapSummary", "local_estimates"]


@dataclass(frozen=True)
class MapSummary:
    """What the chapters read of a MAP fit (:class:`gnuq_core.bayes.bnn.MapResult`).

    Attributes
    ----------
    neg_log_joint, grad_norm : float
        −log p(θ*, y | x) and ‖∇θ log p‖ at θ*.
    theta_max_abs : float
        The largest |θ*_i| (0 at the critical point θ* = 0).
    restarts : list of dict
        Per restart: objective, gradient norm, iterations, optimiser message.
    """

    neg_log_joint: float
    grad_norm: float
    theta_max_abs: float
    restarts: list[dict[str, Any]]

    @classmethod
    def of(cls, mp: MapResult) -> "MapSummary":
        return cls(float(mp.neg_log_joint), float(mp.grad_norm), float(np.abs(mp.theta).max()), list(mp.restarts))


def local_estimates(setting: Setting, laplace_estimates: bool = True, ntk: bool = False,
                    query_sets: tuple[str, ...] = ("in", "grid")) -> dict[str, Any]:
    """The MAP fit and the local estimates of one setting, as a plain record (JSON-able).

    This is what the results store keeps (``results/local_estimates/``) and what
    :func:`evaluate` turns back into arrays: the MAP summary (:class:`MapSummary`) and per
    query set the logit-space estimates of :func:`gnuq_core.bayes.laplace.estimates`
    (``f`` and ``<name>_f``; the probability-space ones are derived from them on reading,
    :func:`gnuq_core.bayes.laplace.with_probability_space`) and, with ``ntk``, the
    tangent-kernel quantities of :func:`gnuq_core.bayes.laplace.ntk_view` (``iso_f`` there
    equals the estimate's and is not kept twice; ``rank`` is one number).

    Parameters
    ----------
    setting, laplace_estimates, ntk, query_sets
        As in :func:`evaluate`.

    Returns
    -------
    dict
        ``map`` (the fields of :class:`MapSummary`), ``q`` (per query set ``est`` and
        optionally ``ntk``, lists of floats) and ``seconds`` (wall time of this call).
    """
    t0 = time.perf_counter()
    data, cfg = prepare(setting)
    mp = fit_map(cfg, data.x_train, data.y_train, n_restarts=setting.n_restarts, seed=setting.seed)
    record: dict[str, Any] = {"map": asdict(MapSummary.of(mp)), "q": {}}
    for name in query_sets:
        xs = data.queries[name]
        est = laplace.estimates(cfg, mp.theta, data.x_train, data.y_train, xs, laplace=laplace_estimates)
        kept = (("p", "pred_class"), "_p") if cfg.task == "multiclass" else (("f",), "_f")  # the rest derives
        entry: dict[str, Any] = {"est": {k: np.asarray(v).tolist() for k, v in est.items()
                                         if k in kept[0] or k.endswith(kept[1])}}
        if ntk:
            view = laplace.ntk_view(cfg, mp.theta, data.x_train, xs)
            entry["ntk"] = {"ggn_f": view["ggn_f"].tolist(), "span_frac": view["span_frac"].tolist(),
                            "out_share": view["out_share"].tolist(), "rank": int(view["rank"][0])}
        record["q"][name] = entry
    release_compiled()
    record["seconds"] = time.perf_counter() - t0
    return record
