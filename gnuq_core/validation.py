"""One validation run: data → MAP → NUTS reference → local estimates → agreement.

Both validation chapters (04 MCMC validation, 05 scaling) call :func:`evaluate` for
every (problem, model, seed) they show; the MAP and the NUTS draws are cached on disk,
so a rerun, or the other chapter with the same setting, reads them back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gnuq_core import laplace, mcmc
from gnuq_core.bnn import MLPConfig, MapResult, fit_map, n_params
from gnuq_core.cache import cached
from gnuq_core.synthetic import Dataset, make_dataset

__all__ = ["Setting", "evaluate", "cached_map", "PAPER_ESTIMATE"]

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
        Keyword arguments of :class:`gnuq_core.bnn.MLPConfig` (``input_dim`` and ``task``
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
    """:func:`gnuq_core.bnn.fit_map`, cached under ``map/``."""
    key = dict(model=cfg.as_dict(), data=data.config, seed=seed, n_restarts=n_restarts, version=1)
    return cached("map", key, lambda: fit_map(cfg, data.x_train, data.y_train, n_restarts=n_restarts, seed=seed))


def evaluate(setting: Setting, laplace_estimates: bool = True, ntk: bool = False,
             query_sets: tuple[str, ...] = ("in", "grid")) -> dict[str, Any]:
    """Run (or read back) one setting and compute everything the chapters compare.

    Parameters
    ----------
    setting : Setting
        What to run.
    laplace_estimates : bool
        Compute the exact-Hessian, GGN and diagonal Laplace estimates (small nets only).
    ntk : bool
        Also compute :func:`gnuq_core.laplace.ntk_view` (span fraction, Woodbury GGN).
    query_sets : tuple of str
        Which query sets of the data to evaluate.

    Returns
    -------
    dict
        ``data``, ``cfg``, ``n_params``, ``map`` (MapResult), ``nuts`` (sampler stats:
        ``diagnostics`` on θ, ``wall_s``, ``step_size``) and per query set ``q[name]`` with
        ``ref`` (reference mean/variance), ``est`` (estimates), ``diag`` (ArviZ on the
        predictions), ``split`` (noise ceiling) and, with ``ntk``, ``ntk``.
    """
    data = make_dataset(setting.problem, **{**setting.data, "seed": setting.seed})
    cfg = MLPConfig(**{**setting.model, "input_dim": data.input_dim, "task": data.task})
    if cfg.task == "regression" and "noise_sigma" not in setting.model:
        cfg = MLPConfig(**{**asdict(cfg), "noise_sigma": data.config["noise"]})
    mp = cached_map(cfg, data, setting.seed, setting.n_restarts)
    res = mcmc.cached_nuts(cfg, data, setting.nuts, seed=setting.seed)
    out: dict[str, Any] = dict(data=data, cfg=cfg, n_params=n_params(cfg), map=mp,
                               nuts=dict(wall_s=res.wall_s, step_size=res.step_size,
                                         diagnostics=mcmc.diagnostics(res)), q={})
    for name in query_sets:
        xs = data.queries[name]
        f = mcmc.predictive_f(cfg, res.theta, xs)
        entry = dict(ref=mcmc.reference_variance(cfg.task, f),
                     est=laplace.estimates(cfg, mp.theta, data.x_train, data.y_train, xs,
                                           laplace=laplace_estimates),
                     diag=mcmc.diagnostics(res, f, cfg.task),
                     split=mcmc.split_agreement(cfg.task, f))
        if cfg.task == "classification":
            entry["split_f"] = mcmc.split_agreement(cfg.task, f, key="var_f")
        if ntk:
            entry["ntk"] = laplace.ntk_view(cfg, mp.theta, data.x_train, xs)
        out["q"][name] = entry
    return out
