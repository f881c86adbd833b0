"""One validation run: data → MAP → NUTS reference → local estimates → agreement.

Both validation chapters (04 MCMC validation, 05 scaling) call :func:`evaluate` for
every (problem, model, seed) they show; the MAP and the NUTS draws are cached on disk,
so a rerun, or the other chapter with the same setting, reads them back.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import jax
import numpy as np

from gnuq_core.bayes import laplace
from gnuq_core.bayes import mcmc
from gnuq_core.repro import results_store
from gnuq_core.bayes.bnn import MLPConfig, MapResult, fit_map, n_params
from gnuq_core.repro.cache import cached, config_key
from gnuq_core.bayes.synthetic import Dataset, make_dataset

__all__ = ["Setting", "MapSummary", "evaluate", "reference", "stored_references", "local_estimates",
           "stored_local_estimates", "setting_id", "cached_map", "PAPER_ESTIMATE", "ESTIMATES_CODE"]

# The quantity the paper compares: ‖∇θ p‖² in classification, ‖∇θ f‖² (the mean) in regression.
PAPER_ESTIMATE = {"classification": ("iso_p", "var_p"), "regression": ("iso_f", "var_f")}


@dataclass(frozen=True)
class Setting:
    """Everything that defines one run (and its cache keys).

    Attributes
    ----------
    problem : str
        ``"two_moons"`` or ``"gap_regression"``.
    data : dict
        Keyword arguments of the problem's generator (``seed`` is added from ``seed``).
    model : dict
        Keyword arguments of :class:`gnuq_core.bayes.bnn.MLPConfig` (``input_dim`` and ``task``
        are filled in from the data).
    nuts : mcmc.NutsSettings
        Sampler settings.
    seed : int
        Seed of the data, the MAP restarts and the sampler.
    n_restarts : int
        MAP restarts.
    """

    problem: str
    data: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    nuts: mcmc.NutsSettings = field(default_factory=mcmc.NutsSettings)
    seed: int = 0
    n_restarts: int = 3


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


def cached_map(cfg: MLPConfig, data: Dataset, seed: int, n_restarts: int) -> MapResult:
    """:func:`gnuq_core.bayes.bnn.fit_map`, cached under ``map/``."""
    key = dict(model=cfg.as_dict(), data=data.config, seed=seed, n_restarts=n_restarts, version=1)
    return cached("map", key, lambda: fit_map(cfg, data.x_train, data.y_train, n_restarts=n_restarts, seed=seed))


def setting_id(setting: Setting, query_sets: tuple[str, ...] = ("in", "grid")) -> str:
    """Stable key of a setting and the query sets summarised (the results store's item id)."""
    return config_key({**asdict(setting), "query_sets": list(query_sets)})


def _prepare(setting: Setting) -> tuple[Dataset, MLPConfig]:
    data = make_dataset(setting.problem, **{**setting.data, "seed": setting.seed})
    cfg = MLPConfig(**{**setting.model, "input_dim": data.input_dim, "task": data.task})
    if cfg.task == "regression" and "noise_sigma" not in setting.model:
        cfg = MLPConfig(**{**asdict(cfg), "noise_sigma": data.config["noise"]})
    return data, cfg


def reference(setting: Setting, query_sets: tuple[str, ...] = ("in", "grid"), fresh: bool = False) -> dict[str, Any]:
    """The NUTS reference of ``setting`` summarised (:func:`gnuq_core.bayes.mcmc.reference_summary`)."""
    data, cfg = _prepare(setting)
    summary = mcmc.reference_summary(cfg, data, setting.nuts, setting.seed, query_sets, fresh=fresh)
    release_compiled()
    return summary


def release_compiled() -> None:
    """Drop JAX's compiled functions once a setting is done.

    Every setting compiles its own functions (the shapes differ), and each compiled
    function keeps a few memory maps. Over chapter 05's full grid a process reached the
    kernel's ``vm.max_map_count`` (65,530 by default) and XLA stopped with "LLVM
    compilation error: Cannot allocate memory" while memory was free.
    """
    jax.clear_caches()


STORE_CODE = ["gnuq_core.bayes.mcmc", "gnuq_core.bayes.bnn", "gnuq_core.bayes.synthetic"]


def stored_references(settings: Sequence[Setting], query_sets: tuple[str, ...] = ("in", "grid"), *,
                      verify: int = 2, verify_max_seconds: float | None = None, root: Path | None = None,
                      progress: bool = True) -> dict[str, dict[str, Any]]:
    """NUTS references of ``settings`` through the results store (``results/nuts_reference/``).

    Stored summaries are reused, missing ones computed (reading the local sampler cache
    when it has them) and appended, and ``verify`` randomly chosen stored ones are sampled
    again from scratch and must agree to ``rtol=1e-4`` (NUTS in JAX is deterministic for
    a given seed on one platform; another CPU or JAX version may legitimately differ, and
    the error then says so). With ``verify_max_seconds`` the check draws only among the
    references that took at most that long to sample (as recorded), so that a build's
    check fits its time budget (the largest settings took 40 minutes each).

    Returns
    -------
    dict
        :func:`setting_id` -> summary, to pass to :func:`evaluate` as ``reference_summary``.
    """
    by_id = {setting_id(s, query_sets): s for s in settings}
    recs = results_store.run_stored(
        "nuts_reference", {"version": 1}, list(by_id),
        lambda i: reference(by_id[i], query_sets), recompute=lambda i: reference(by_id[i], query_sets, fresh=True),
        code_files=STORE_CODE, verify=verify, rtol=1e-4, atol=1e-9, progress="NUTS references" if progress else None,
        root=root, verify_among=None if verify_max_seconds is None
        else lambda r: r["timings"]["wall_s"] <= verify_max_seconds)
    return {r["id"]: r for r in recs}


def _nan_for_none(d: dict[str, Any]) -> dict[str, Any]:
    """Stored summaries hold NaN as null; give the chapters NaN back."""
    return {k: float("nan") if v is None else v for k, v in d.items()}


# The code whose source defines the stored local estimates (the import closure of
# local_estimates, infrastructure excluded; tests/repro/test_store_code.py checks it).
ESTIMATES_CODE = ["gnuq_core.bayes.validation", "gnuq_core.bayes.laplace", "gnuq_core.bayes.bnn",
                  "gnuq_core.bayes.synthetic", "gnuq_core.bayes.mcmc", "gnuq_core.isotropy.mlp",
                  "gnuq_core.isotropy.damped"]


def local_estimates(setting: Setting, laplace_estimates: bool = True, ntk: bool = False,
                    query_sets: tuple[str, ...] = ("in", "grid"), fresh: bool = False) -> dict[str, Any]:
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
    fresh : bool
        Fit the MAP from scratch instead of reading the local cache (the store's check).

    Returns
    -------
    dict
        ``map`` (the fields of :class:`MapSummary`), ``q`` (per query set ``est`` and
        optionally ``ntk``, lists of floats) and ``seconds`` (wall time of this call).
    """
    t0 = time.perf_counter()
    data, cfg = _prepare(setting)
    mp = (fit_map(cfg, data.x_train, data.y_train, n_restarts=setting.n_restarts, seed=setting.seed) if fresh
          else cached_map(cfg, data, setting.seed, setting.n_restarts))
    record: dict[str, Any] = {"map": asdict(MapSummary.of(mp)), "q": {}}
    for name in query_sets:
        xs = data.queries[name]
        est = laplace.estimates(cfg, mp.theta, data.x_train, data.y_train, xs, laplace=laplace_estimates)
        entry: dict[str, Any] = {"est": {k: np.asarray(v).tolist() for k, v in est.items()
                                         if k == "f" or k.endswith("_f")}}
        if ntk:
            view = laplace.ntk_view(cfg, mp.theta, data.x_train, xs)
            entry["ntk"] = {"ggn_f": view["ggn_f"].tolist(), "span_frac": view["span_frac"].tolist(),
                            "out_share": view["out_share"].tolist(), "rank": int(view["rank"][0])}
        record["q"][name] = entry
    release_compiled()
    record["seconds"] = time.perf_counter() - t0
    return record


def stored_local_estimates(settings: Sequence[Setting], laplace_estimates: bool = True, ntk: bool = False,
                           query_sets: tuple[str, ...] = ("in", "grid"), *, verify: int = 1,
                           root: Path | None = None, progress: bool = True) -> dict[str, dict[str, Any]]:
    """:func:`local_estimates` of ``settings`` through the results store (``results/local_estimates/``).

    Stored records are reused, missing ones computed (reading the local MAP cache when it
    has them) and appended, and ``verify`` randomly chosen stored ones are recomputed from
    scratch (the MAP fitted again) and must agree to ``rtol=1e-4``.

    Returns
    -------
    dict
        :func:`setting_id` -> record, to pass to :func:`evaluate` as ``local``.
    """
    by_id = {setting_id(s, query_sets): s for s in settings}
    config = {"version": 1, "laplace": laplace_estimates, "ntk": ntk, "query_sets": list(query_sets)}
    recs = results_store.run_stored(
        "local_estimates", config, list(by_id),
        lambda i: local_estimates(by_id[i], laplace_estimates, ntk, query_sets),
        recompute=lambda i: local_estimates(by_id[i], laplace_estimates, ntk, query_sets, fresh=True),
        code_files=ESTIMATES_CODE, verify=verify, rtol=1e-4, atol=1e-12,
        progress="MAP fits and local estimates" if progress else None, root=root)
    return {r["id"]: r for r in recs}


def _local_arrays(record: dict[str, Any], task: str) -> tuple[MapSummary, dict[str, dict[str, Any]]]:
    """A :func:`local_estimates` record (fresh or stored) as the arrays :func:`evaluate` returns."""
    per_query = {}
    for name, entry in record["q"].items():
        est = laplace.with_probability_space(task, {k: np.asarray(v, float) for k, v in entry["est"].items()})
        out: dict[str, Any] = {"est": est}
        if "ntk" in entry:
            view = entry["ntk"]
            out["ntk"] = {"iso_f": est["iso_f"], "ggn_f": np.asarray(view["ggn_f"], float),
                          "span_frac": np.asarray(view["span_frac"], float),
                          "out_share": np.asarray(view["out_share"], float),
                          "rank": np.full(len(est["iso_f"]), int(view["rank"]))}
        per_query[name] = out
    m = record["map"]
    return MapSummary(m["neg_log_joint"], m["grad_norm"], m["theta_max_abs"], list(m["restarts"])), per_query


def evaluate(setting: Setting, laplace_estimates: bool = True, ntk: bool = False,
             query_sets: tuple[str, ...] = ("in", "grid"), reference_summary: dict[str, Any] | None = None,
             local: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run (or read back) one setting and compute everything the chapters compare.

    Parameters
    ----------
    setting : Setting
        What to run.
    laplace_estimates : bool
        Compute the exact-Hessian, GGN and diagonal Laplace estimates (small nets only).
    ntk : bool
        Also compute :func:`gnuq_core.bayes.laplace.ntk_view` (span fraction, Woodbury GGN).
    query_sets : tuple of str
        Which query sets of the data to evaluate.
    reference_summary : dict, optional
        The NUTS reference already at hand (from :func:`stored_references`); by default
        it is computed, reading the local sampler cache.
    local : dict, optional
        The :func:`local_estimates` record already at hand (from
        :func:`stored_local_estimates`, made with the same ``laplace_estimates``, ``ntk``
        and ``query_sets``); by default it is computed, reading the local MAP cache.

    Returns
    -------
    dict
        ``data``, ``cfg``, ``n_params``, ``map`` (:class:`MapSummary`), ``nuts`` (sampler
        stats: ``diagnostics`` on θ, ``wall_s``, ``step_size``) and per query set
        ``q[name]`` with ``ref`` (reference mean/variance), ``est`` (estimates), ``diag``
        (ArviZ on the predictions), ``split`` (noise ceiling) and, with ``ntk``, ``ntk``.
    """
    data, cfg = _prepare(setting)
    ref = reference_summary or reference(setting, query_sets)
    record = local or local_estimates(setting, laplace_estimates, ntk, query_sets)
    if set(record["q"]) != set(query_sets) or ntk != all("ntk" in e for e in record["q"].values()):
        raise ValueError("the local estimates were made for other query sets or without the tangent-kernel view: "
                         "pass the record of stored_local_estimates made with the same arguments")
    mp, local_q = _local_arrays(record, cfg.task)
    out: dict[str, Any] = dict(data=data, cfg=cfg, n_params=n_params(cfg), map=mp,
                               nuts=dict(wall_s=ref["timings"]["wall_s"], step_size=np.asarray(ref["nuts"]["step_size"]),
                                         diagnostics=_nan_for_none(ref["nuts"]["diagnostics"])), q={})
    for name in query_sets:
        summary = ref["q"][name]
        entry = dict(ref={k: np.asarray(v) for k, v in summary["ref"].items()}, est=local_q[name]["est"],
                     diag=_nan_for_none(summary["diag"]), split=_nan_for_none(summary["split"]))
        if "split_f" in summary:
            entry["split_f"] = _nan_for_none(summary["split_f"])
        if ntk:
            entry["ntk"] = local_q[name]["ntk"]
        out["q"][name] = entry
    return out
