"""One validation run: data → MAP → NUTS reference → local estimates → agreement.

Both validation chapters (04 MCMC validation, 05 scaling) call :func:`evaluate` for
every (problem, model, seed) they show; the MAP and the NUTS draws are cached on disk,
so a rerun, or the other chapter with the same setting, reads them back.
"""

from __future__ import annotations

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

__all__ = ["Setting", "evaluate", "reference", "stored_references", "setting_id", "cached_map", "PAPER_ESTIMATE"]

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
                      verify: int = 2, root: Path | None = None, progress: bool = True) -> dict[str, dict[str, Any]]:
    """NUTS references of ``settings`` through the results store (``results/nuts_reference/``).

    Stored summaries are reused, missing ones computed (reading the local sampler cache
    when it has them) and appended, and ``verify`` randomly chosen stored ones are sampled
    again from scratch and must agree to ``rtol=1e-4`` (NUTS in JAX is deterministic for
    a given seed on one platform; another CPU or JAX version may legitimately differ, and
    the error then says so).

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
        root=root)
    return {r["id"]: r for r in recs}


def _nan_for_none(d: dict[str, Any]) -> dict[str, Any]:
    """Stored summaries hold NaN as null; give the chapters NaN back."""
    return {k: float("nan") if v is None else v for k, v in d.items()}


def evaluate(setting: Setting, laplace_estimates: bool = True, ntk: bool = False,
             query_sets: tuple[str, ...] = ("in", "grid"), reference_summary: dict[str, Any] | None = None
             ) -> dict[str, Any]:
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

    Returns
    -------
    dict
        ``data``, ``cfg``, ``n_params``, ``map`` (MapResult), ``nuts`` (sampler stats:
        ``diagnostics`` on θ, ``wall_s``, ``step_size``) and per query set ``q[name]`` with
        ``ref`` (reference mean/variance), ``est`` (estimates), ``diag`` (ArviZ on the
        predictions), ``split`` (noise ceiling) and, with ``ntk``, ``ntk``.
    """
    data, cfg = _prepare(setting)
    mp = cached_map(cfg, data, setting.seed, setting.n_restarts)
    ref = reference_summary or reference(setting, query_sets)
    out: dict[str, Any] = dict(data=data, cfg=cfg, n_params=n_params(cfg), map=mp,
                               nuts=dict(wall_s=ref["timings"]["wall_s"], step_size=np.asarray(ref["nuts"]["step_size"]),
                                         diagnostics=_nan_for_none(ref["nuts"]["diagnostics"])), q={})
    for name in query_sets:
        xs = data.queries[name]
        summary = ref["q"][name]
        entry = dict(ref={k: np.asarray(v) for k, v in summary["ref"].items()},
                     est=laplace.estimates(cfg, mp.theta, data.x_train, data.y_train, xs,
                                           laplace=laplace_estimates),
                     diag=_nan_for_none(summary["diag"]), split=_nan_for_none(summary["split"]))
        if "split_f" in summary:
            entry["split_f"] = _nan_for_none(summary["split_f"])
        if ntk:
            entry["ntk"] = laplace.ntk_view(cfg, mp.theta, data.x_train, xs)
        out["q"][name] = entry
    release_compiled()
    return out
