"""One validation run: data → MAP → NUTS reference → local estimates → agreement.

Both validation chapters (04 MCMC validation, 05 scaling) call :func:`evaluate` for
every (problem, model, seed) they show. The two expensive parts are stored kinds of the
results store (`gnuq_core.store`): the NUTS reference of a setting
(`gnuq_core.bayes.reference`, kind ``nuts_reference``) and its MAP fit with the local
estimates (`gnuq_core.bayes.local`, kind ``local_estimates``); :func:`stored_references`
and :func:`stored_local_estimates` read them through a store.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gnuq_core.bayes import laplace
from gnuq_core.bayes.bnn import n_params
from gnuq_core.bayes.local import MapSummary, estimates_at_stored_theta, local_estimates
from gnuq_core.bayes.reference import Setting, prepare, reference, release_compiled, setting_id
from gnuq_core.store import Recipe, Sample, Store

__all__ = ["Setting", "MapSummary", "evaluate", "reference", "stored_references", "local_estimates",
           "stored_local_estimates", "setting_id", "release_compiled", "PAPER_ESTIMATE"]

# The quantity the paper compares: ‖∇θ p‖² in classification, ‖∇θ f‖² (the mean) in regression.
PAPER_ESTIMATE = {"classification": ("iso_p", "var_p"), "regression": ("iso_f", "var_f")}


def stored_references(settings: Sequence[Setting], query_sets: tuple[str, ...] = ("in", "grid"), *, store: Store,
                      verify: int = 2, verify_max_seconds: float | None = None, progress: bool = True,
                      world: Any = None, read_only: bool = False) -> dict[str, dict[str, Any]]:
    """NUTS references of ``settings`` through ``store`` (kind ``nuts_reference``).

    Stored summaries are reused, missing ones sampled and appended, and ``verify`` randomly
    chosen stored ones are sampled again from scratch and compared under the kind's contract
    (to the stored digits on the platform that made them, within Monte Carlo error
    elsewhere). With ``verify_max_seconds`` the check draws only among the references that
    took at most that long to sample (as recorded), so that a build's check fits its time
    budget (the largest settings took 40 minutes each); the page states that rule. ``world``
    shards the missing ones over ``torchrun`` ranks; ``read_only`` computes nothing (only what
    is stored comes back).

    Returns
    -------
    dict
        :func:`setting_id` -> summary, to pass to :func:`evaluate` as ``reference_summary``.
    """
    by_id = {setting_id(s, query_sets): s for s in settings}
    sample = Sample(verify)
    if verify_max_seconds is not None:
        stored = store.read("nuts_reference", {})
        costs = [r["timings"]["wall_s"] for i, r in stored.items() if i in by_id]
        sample = Sample(verify, among=lambda r: r["timings"]["wall_s"] <= verify_max_seconds,
                        words=_pool_words(costs, verify_max_seconds))
    recs = store.items("nuts_reference", {}, list(by_id), lambda i: reference(by_id[i], query_sets), verify=sample,
                       progress="NUTS references" if progress else None, world=world, read_only=read_only)
    return {r["id"]: r for r in recs}


def _pool_words(costs: Sequence[float], max_seconds: float) -> str:
    """The sentence saying that the check draws only among the references it can afford to sample again."""
    if not costs:
        return ""
    n = sum(c <= max_seconds for c in costs)
    return (f"The references sampled again are drawn among the {n} of these {len(costs)} that took at most "
            f"{max_seconds:g} s to sample when they were stored (the longest took {max(costs) / 60:.0f} minutes, "
            "longer than this whole build may take).")


def stored_local_estimates(settings: Sequence[Setting], laplace_estimates: bool = True, ntk: bool = False,
                           query_sets: tuple[str, ...] = ("in", "grid"), *, store: Store, verify: int = 1,
                           progress: bool = True, world: Any = None,
                           read_only: bool = False) -> dict[str, dict[str, Any]]:
    """:func:`local_estimates` of ``settings`` through ``store`` (kind ``local_estimates``).

    Stored records are reused, missing ones computed and appended, and ``verify`` randomly
    chosen stored ones are checked under the kind's contract: on the platform that made them
    the MAP is fitted again, elsewhere every estimate is recomputed at the stored θ*
    (:func:`estimates_at_stored_theta`). ``world`` and ``read_only`` as in :func:`stored_references`.

    Returns
    -------
    dict
        :func:`setting_id` -> record, to pass to :func:`evaluate` as ``local``.
    """
    by_id = {setting_id(s, query_sets): s for s in settings}
    config = {"laplace": laplace_estimates, "ntk": ntk, "query_sets": list(query_sets)}
    recipe = Recipe(lambda i: local_estimates(by_id[i], laplace_estimates, ntk, query_sets),
                    from_outputs=lambda i, stored, _: estimates_at_stored_theta(by_id[i], stored, laplace_estimates,
                                                                               ntk, query_sets))
    recs = store.items("local_estimates", config, list(by_id), recipe, verify=verify,
                       progress="MAP fits and local estimates" if progress else None, world=world, read_only=read_only)
    return {r["id"]: r for r in recs}


def _nan_for_none(d: dict[str, Any]) -> dict[str, Any]:
    """Stored summaries hold NaN as null; give the chapters NaN back."""
    return {k: float("nan") if v is None else v for k, v in d.items()}


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


def _reference_at(cfg: Any, ref: dict[str, Any], est: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's arrays; for classification also ``alea_p``, the posterior's aleatoric
    E_θ[p(1−p)] = mean_p(1 − mean_p) − var_p. Multiclass: every quantity of the class the MAP
    predicts at each query (``est["pred_class"]``), the per-class arrays kept as ``<name>_all``."""
    out = {k: np.asarray(v, float) for k, v in ref.items()}
    if cfg.task == "multiclass":
        rows, c = np.arange(len(est["pred_class"])), np.asarray(est["pred_class"], int)
        for k in ("var_p", "mean_p"):
            out[f"{k}_all"] = out[k].reshape(len(rows), cfg.n_classes)
            out[k] = out[f"{k}_all"][rows, c]
    if cfg.task != "regression":
        out["alea_p"] = out["mean_p"] * (1 - out["mean_p"]) - out["var_p"]
    return out


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
        it is computed.
    local : dict, optional
        The :func:`local_estimates` record already at hand (from
        :func:`stored_local_estimates`, made with the same ``laplace_estimates``, ``ntk``
        and ``query_sets``); by default it is computed.

    Returns
    -------
    dict
        ``data``, ``cfg``, ``n_params``, ``map`` (:class:`MapSummary`), ``nuts`` (sampler
        stats: ``diagnostics`` on θ, ``wall_s``, ``step_size``) and per query set
        ``q[name]`` with ``ref`` (reference mean/variance), ``est`` (estimates), ``diag``
        (ArviZ on the predictions), ``split`` (noise ceiling) and, with ``ntk``, ``ntk``.
    """
    data, cfg = prepare(setting)
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
        entry = dict(ref=_reference_at(cfg, summary["ref"], local_q[name]["est"]), est=local_q[name]["est"],
                     diag=_nan_for_none(summary["diag"]), split=_nan_for_none(summary["split"]))
        if "split_f" in summary:
            entry["split_f"] = _nan_for_none(summary["split_f"])
        if ntk:
            entry["ntk"] = local_q[name]["ntk"]
        out["q"][name] = entry
    return out
