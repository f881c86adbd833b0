"""The MAP fit of a validation setting and the local estimates at its query points.

:func:`local_estimates` fits θ* (L-BFGS from several prior draws, the best kept) and
evaluates the estimates chapters 04 and 05 compare with NUTS (:func:`gnuq_core.bayes.laplace.estimates`,
and optionally the tangent-kernel view). This module is the code of the stored kind
``local_estimates`` (`gnuq_core.store.kinds`).

The record keeps θ* bit for bit (``theta_f64``): which optimum L-BFGS reaches depends on the
CPU's kernels where a problem has several almost equally good ones (multiclass spirals at
width 32: objectives equal to 1e-4, estimates up to 2× apart at single grid points), so on
another machine :func:`estimates_at_stored_theta` recomputes every estimate at the stored θ*
(exact arithmetic) instead of fitting again.
"""

from __future__ import annotations

import base64
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gnuq_core.bayes import laplace
from gnuq_core.bayes.bnn import MapResult, fit_map, log_joint, n_params, x64
from gnuq_core.bayes.reference import Setting, prepare, release_compiled

__all__ = ["MapSummary", "local_estimates", "estimates_at_stored_theta", "encode_theta", "decode_theta"]


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
        ``map`` (the fields of :class:`MapSummary`), ``theta_f64`` (θ*, :func:`encode_theta`),
        ``q`` (per query set ``est`` and optionally ``ntk``, lists of floats) and ``seconds``
        (wall time of this call).
    """
    t0 = time.perf_counter()
    data, cfg = prepare(setting)
    mp = fit_map(cfg, data.x_train, data.y_train, n_restarts=setting.n_restarts, seed=setting.seed)
    record: dict[str, Any] = {"map": asdict(MapSummary.of(mp)), "theta_f64": encode_theta(mp.theta),
                              "q": _query_estimates(cfg, data, mp.theta, laplace_estimates, ntk, query_sets)}
    release_compiled()
    record["seconds"] = time.perf_counter() - t0
    return record


def estimates_at_stored_theta(setting: Setting, stored: dict[str, Any], laplace_estimates: bool = True,
                              ntk: bool = False, query_sets: tuple[str, ...] = ("in", "grid")) -> dict[str, Any]:
    """A :func:`local_estimates` record's fields that are exact given its stored θ*, recomputed there.

    Every estimate at every query point, the objective −log p(θ*, y | x) and the largest |θ*|
    (the optimiser's path, ``restarts`` and ``grad_norm``, is copied: it is compared only on
    the platform that made the record). Raises ``ValueError`` if ``theta_f64`` does not hold
    the setting's number of parameters.
    """
    data, cfg = prepare(setting)
    theta = decode_theta(stored["theta_f64"], n_params(cfg))
    objective = float(x64(lambda: -log_joint(cfg, theta, data.x_train, data.y_train))())
    record = {"map": {**stored["map"], "neg_log_joint": objective, "theta_max_abs": float(np.abs(theta).max())},
              "theta_f64": stored["theta_f64"],
              "q": _query_estimates(cfg, data, theta, laplace_estimates, ntk, query_sets)}
    release_compiled()
    return record


def _query_estimates(cfg: Any, data: Any, theta: np.ndarray, laplace_estimates: bool, ntk: bool,
                     query_sets: tuple[str, ...]) -> dict[str, Any]:
    """Per query set, the stored estimates at ``theta`` (see :func:`local_estimates`)."""
    out: dict[str, Any] = {}
    for name in query_sets:
        xs = data.queries[name]
        est = laplace.estimates(cfg, theta, data.x_train, data.y_train, xs, laplace=laplace_estimates)
        kept = (("p", "pred_class"), "_p") if cfg.task == "multiclass" else (("f",), "_f")  # the rest derives
        entry: dict[str, Any] = {"est": {k: np.asarray(v).tolist() for k, v in est.items()
                                         if k in kept[0] or k.endswith(kept[1])}}
        if ntk:
            view = laplace.ntk_view(cfg, theta, data.x_train, xs)
            entry["ntk"] = {"ggn_f": view["ggn_f"].tolist(), "span_frac": view["span_frac"].tolist(),
                            "out_share": view["out_share"].tolist(), "rank": int(view["rank"][0])}
        out[name] = entry
    return out


def encode_theta(theta: np.ndarray) -> str:
    """θ* as text that rebuilds it bit for bit: base64 of its float64 values (little-endian)."""
    return base64.b64encode(np.asarray(theta, dtype="<f8").tobytes()).decode("ascii")


def decode_theta(text: str, size: int) -> np.ndarray:
    """θ* from :func:`encode_theta`'s text; ``ValueError`` unless it holds ``size`` values."""
    try:
        flat = np.frombuffer(base64.b64decode(text.encode("ascii"), validate=True), dtype="<f8")
    except ValueError as err:  # binascii.Error and UnicodeEncodeError are ValueErrors
        raise ValueError(f"the stored θ* is not base64 of float64 values ({err})") from None
    if flat.size != size:
        raise ValueError(f"the stored θ* holds {flat.size} values, the setting's network has {size}")
    return flat.astype(np.float64)
