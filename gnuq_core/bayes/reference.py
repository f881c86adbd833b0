"""One validation setting and its NUTS reference: the inputs of chapters 04 and 05.

A :class:`Setting` says everything that defines one run (problem, data, model, sampler,
seed); :func:`reference` samples its posterior with NUTS and summarises it
(:func:`gnuq_core.bayes.mcmc.reference_summary`). This module is the code of the stored
kind ``nuts_reference`` (`gnuq_core.store.kinds`): only what the reference depends on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import jax

from gnuq_core.bayes import mcmc
from gnuq_core.bayes.bnn import MLPConfig
from gnuq_core.bayes.synthetic import Dataset, make_dataset
from gnuq_core.repro.keys import config_key

__all__ = ["Setting", "setting_id", "prepare", "reference", "release_compiled"]


@dataclass(frozen=True)
class Setting:
    """Everything that defines one run (and its cache keys).

    Attributes
    ----------
    problem : str
        A registered problem (`gnuq_core.bayes.synthetic.PROBLEMS`).
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


def setting_id(setting: Setting, query_sets: tuple[str, ...] = ("in", "grid")) -> str:
    """Stable key of a setting and the query sets summarised (the results store's item id)."""
    return config_key({**asdict(setting), "query_sets": list(query_sets)})


def prepare(setting: Setting) -> tuple[Dataset, MLPConfig]:
    data = make_dataset(setting.problem, **{**setting.data, "seed": setting.seed})
    classes = {"n_classes": data.n_classes} if data.task == "multiclass" else {}
    cfg = MLPConfig(**{**setting.model, "input_dim": data.input_dim, "task": data.task, **classes})
    if cfg.task == "regression" and "noise_sigma" not in setting.model:
        cfg = MLPConfig(**{**asdict(cfg), "noise_sigma": data.config["noise"]})
    return data, cfg


def reference(setting: Setting, query_sets: tuple[str, ...] = ("in", "grid")) -> dict[str, Any]:
    """The NUTS reference of ``setting`` summarised (:func:`gnuq_core.bayes.mcmc.reference_summary`)."""
    data, cfg = prepare(setting)
    summary = mcmc.reference_summary(cfg, data, setting.nuts, setting.seed, query_sets)
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
