"""Synthetic problems with a known-hard structure for validating uncertainty estimates.

Two problems, each with a training set and two query sets:

* **two moons** (2-D binary classification): the ``in`` query set is fresh draws from
  the data distribution; the ``grid`` query set is a regular grid over a square that
  reaches far beyond the data (where a good epistemic estimate should grow).
* **gap regression** (1-D): inputs in two clusters with a gap between them; ``in`` is
  fresh draws from the clusters, ``grid`` a line through the gap and far outside.

Inputs are standardised with the training set's mean and standard deviation, so the
same network and prior make sense for both problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Dataset", "two_moons", "gap_regression", "make_dataset"]


@dataclass(frozen=True)
class Dataset:
    """A training set with its query sets.

    Attributes
    ----------
    task : str
        ``"classification"`` (labels 0/1) or ``"regression"`` (real targets).
    x_train, y_train : numpy.ndarray
        Standardised inputs ``(n, d)`` and targets ``(n,)``.
    queries : dict[str, numpy.ndarray]
        Query inputs by name: ``"in"`` (in-distribution) and ``"grid"`` (wide grid).
    grid_shape : tuple of int
        Shape of the ``grid`` queries for plotting (``(g, g)`` in 2-D, ``(g,)`` in 1-D).
    config : dict
        The parameters that generated it (part of every cache key that uses it).
    """

    task: str
    x_train: np.ndarray
    y_train: np.ndarray
    queries: dict[str, np.ndarray]
    grid_shape: tuple[int, ...]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def input_dim(self) -> int:
        """Number of input features."""
        return int(self.x_train.shape[1])


def _moons(n: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=n, noise=noise, random_state=int(rng.integers(2**31 - 1)))
    return x, y.astype(np.float64)


def two_moons(n_train: int = 100, noise: float = 0.2, seed: int = 0, n_query_in: int = 200,
              grid_size: int = 30, grid_extent: float = 3.5) -> Dataset:
    """Two-moons binary classification.

    Parameters
    ----------
    n_train : int
        Training points.
    noise : float
        Standard deviation of the Gaussian noise added by ``sklearn.datasets.make_moons``.
    seed : int
        Seed for the training set and the in-distribution queries.
    n_query_in : int
        In-distribution query points (fresh draws from the same distribution).
    grid_size : int
        The wide grid has ``grid_size**2`` points.
    grid_extent : float
        The grid covers ``[-grid_extent, grid_extent]^2`` in standardised units (the data
        lie within about ±2), so its corners are far from any data.

    Returns
    -------
    Dataset
    """
    rng = np.random.default_rng(seed)
    x, y = _moons(n_train, noise, rng)
    xq, _ = _moons(n_query_in, noise, rng)
    mu, sd = x.mean(0), x.std(0)
    g = np.linspace(-grid_extent, grid_extent, grid_size)
    gx, gy = np.meshgrid(g, g)
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
    config = dict(problem="two_moons", n_train=n_train, noise=noise, seed=seed, n_query_in=n_query_in,
                  grid_size=grid_size, grid_extent=grid_extent)
    return Dataset("classification", (x - mu) / sd, y, {"in": (xq - mu) / sd, "grid": grid},
                   (grid_size, grid_size), config)


def _gap_inputs(n: int, rng: np.random.Generator) -> np.ndarray:
    left = rng.uniform(-1.0, -0.35, size=n)
    right = rng.uniform(0.35, 1.0, size=n)
    return np.where(rng.uniform(size=n) < 0.5, left, right)


def gap_regression(n_train: int = 40, noise: float = 0.1, seed: int = 0, n_query_in: int = 200,
                   grid_size: int = 200, grid_extent: float = 3.0) -> Dataset:
    """1-D regression with a gap in the inputs: ``y = sin(3x) + x + noise``.

    Inputs are drawn uniformly from ``[-1, -0.35] ∪ [0.35, 1]`` (before standardising),
    so the interval between the clusters has no data.

    Parameters
    ----------
    n_train : int
        Training points.
    noise : float
        Standard deviation of the Gaussian target noise (also the model's likelihood
        noise, see :class:`gnuq_core.bayes.bnn.MLPConfig`).
    seed : int
        Seed for the training set and the in-distribution queries.
    n_query_in : int
        In-distribution query points.
    grid_size : int
        Points on the wide line.
    grid_extent : float
        The line covers ``[-grid_extent, grid_extent]`` in standardised units.

    Returns
    -------
    Dataset
    """
    rng = np.random.default_rng(seed)
    x = _gap_inputs(n_train, rng)
    y = np.sin(3 * x) + x + noise * rng.standard_normal(n_train)
    xq = _gap_inputs(n_query_in, rng)
    mu, sd = x.mean(), x.std()
    grid = np.linspace(-grid_extent, grid_extent, grid_size)[:, None]
    config = dict(problem="gap_regression", n_train=n_train, noise=noise, seed=seed, n_query_in=n_query_in,
                  grid_size=grid_size, grid_extent=grid_extent)
    return Dataset("regression", ((x - mu) / sd)[:, None], y, {"in": ((xq - mu) / sd)[:, None], "grid": grid},
                   (grid_size,), config)


def make_dataset(problem: str, **kwargs: Any) -> Dataset:
    """Build a problem by name: ``"two_moons"`` or ``"gap_regression"``."""
    makers = {"two_moons": two_moons, "gap_regression": gap_regression}
    if problem not in makers:
        raise ValueError(f"unknown problem {problem!r}; choose one of {', '.join(makers)}")
    return makers[problem](**kwargs)
