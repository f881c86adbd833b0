"""The Bayesian-network settings chapters 04 (MCMC validation) and 05 (scaling) share.

`BnnParams` holds them once (data of both problems, the NUTS run, MAP restarts, the
bootstrap, the store's checks); each chapter's ``Params`` extends it with its own
network settings and sets its own paper-edition defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from gnuq_core.chapters.base import COUNT, ChapterParams, param
from gnuq_core.options import Rule

__all__ = ["BnnParams", "ACTIVATIONS", "PRIORS"]

ACTIVATIONS = ("tanh", "relu", "gelu", "erf")
PRIORS = ("plain", "fan_in")


@dataclass(frozen=True)
class BnnParams(ChapterParams):
    """Data, NUTS, MAP and store settings of the MCMC chapters."""

    seed: int = param(0, Rule(minimum=0, maximum=2**32 - 1, integer=True), "first seed; seeds seed, seed+1, …")
    n_seeds: int = param(3, COUNT, "independent data sets, initialisations and NUTS runs")
    activation: str = param("tanh", Rule(choices=ACTIVATIONS), "hidden activation")
    alpha: float = param(1.0, Rule(above=0), "prior precision of the weights")
    n_train_cls: int = param(100, Rule(minimum=2, integer=True), "training points of two moons")
    noise_cls: float = param(0.2, Rule(minimum=0), "two moons' input noise")
    n_train_reg: int = param(40, Rule(minimum=2, integer=True), "training points of the gap regression")
    noise_reg: float = param(0.1, Rule(above=0), "the gap regression's output noise sd")
    grid_size_cls: int = param(30, Rule(minimum=2, integer=True), "query grid of two moons: size × size")
    grid_size_reg: int = param(200, Rule(minimum=2, integer=True), "query grid of the gap regression")
    n_query_in: int = param(200, COUNT, "in-distribution query points")
    num_warmup: int = param(1000, COUNT, "NUTS warm-up steps per chain")
    num_samples: int = param(1000, COUNT, "NUTS samples per chain")
    num_chains: int = param(4, COUNT, "NUTS chains")
    n_restarts: int = param(5, COUNT, "MAP fits from different initialisations (the best is kept)")
    n_boot: int = param(2000, COUNT, "bootstrap resamples (seeds, then query points)")
    store_verify: int = param(1, Rule(minimum=0, integer=True),
                              "stored NUTS references and stored local estimates recomputed from scratch (each)")
    store_verify_max_seconds: int = param(300, Rule(minimum=0), "the references re-sampled are drawn among those "
                                                                "that took at most this long")

    @property
    def seeds(self) -> list[int]:
        """The seeds of a build: ``seed, seed + 1, …`` (``n_seeds`` of them)."""
        return list(range(self.seed, self.seed + self.n_seeds))
