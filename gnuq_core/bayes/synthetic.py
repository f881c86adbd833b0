"""Synthetic problems for validating uncertainty estimates against MCMC: THE registry, `PROBLEMS`.

Each problem has a training set and two query sets: ``in`` (fresh draws from the data
distribution) and ``grid`` (a regular grid, or a line in 1-D, reaching far beyond the data,
where a good epistemic estimate should grow; the uncertainty maps are drawn on it).
Inputs are standardised with the training set's mean and standard deviation, so the same
network and prior make sense for every problem.

The project's own two (chapters 04 and 05 since the start):

* **two moons** (2-D binary classification);
* **gap regression** (1-D): inputs in two clusters with a gap between them.

The eight of the paper's Table 1, by the standard constructions (the paper does not give
its data: every size, noise and class count below is a declared reading, `PROBLEMS`):

* binary: **linear** (two overlapping Gaussian blobs), **XOR** (four blobs at the corners of
  a square, opposite corners one class), **rings** (two concentric noisy rings);
* multiclass: **clusters** (four Gaussian blobs), **spirals** (three interleaved spiral arms),
  **rings** (three concentric noisy rings);
* regression (1-D): **linear** (y = 0.8 x + 0.3 + noise) and **nonlinear**
  (y = sin 3x + x + noise), inputs uniform on [−1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Dataset", "Problem", "PROBLEMS", "TABLE1", "two_moons", "gap_regression", "make_dataset"]


@dataclass(frozen=True)
class Dataset:
    """A training set with its query sets.

    Attributes
    ----------
    task : str
        ``"classification"`` (labels 0/1), ``"multiclass"`` (labels 0 … K−1) or
        ``"regression"`` (real targets).
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

    @property
    def n_classes(self) -> int:
        """Classes of a multiclass problem (2 for binary, 0 for regression)."""
        if self.task == "multiclass":
            return int(self.y_train.max()) + 1
        return 2 if self.task == "classification" else 0


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


def _grid_2d(grid_size: int, grid_extent: float) -> np.ndarray:
    g = np.linspace(-grid_extent, grid_extent, grid_size)
    gx, gy = np.meshgrid(g, g)
    return np.stack([gx.ravel(), gy.ravel()], axis=1)


def _blobs(centres: np.ndarray, spread: float, n: int, rng: np.random.Generator,
           labels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points from isotropic Gaussians at ``centres`` (equal shares, in turn), with the
    label of their centre (``labels``, default the centre's index)."""
    which = np.arange(n) % len(centres)
    x = centres[which] + spread * rng.standard_normal((n, 2))
    y = (np.arange(len(centres)) if labels is None else labels)[which]
    return x, y.astype(np.float64)


def _rings(radii: tuple[float, ...], noise: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points on concentric circles of ``radii`` (equal shares; label = ring), radial noise ``noise``."""
    which = np.arange(n) % len(radii)
    angle = rng.uniform(0, 2 * np.pi, n)
    r = np.asarray(radii)[which] + noise * rng.standard_normal(n)
    return np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1), which.astype(np.float64)


def _spirals(arms: int, noise: float, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points on ``arms`` interleaved spiral arms (equal shares; label = arm): radius t,
    angle 2.5·t + 2πk/arms for t uniform on [0.25, 2.5], Gaussian noise ``noise``."""
    which = np.arange(n) % arms
    t = rng.uniform(0.25, 2.5, n)
    angle = 2.5 * t + 2 * np.pi * which / arms
    x = np.stack([t * np.cos(angle), t * np.sin(angle)], axis=1) + noise * rng.standard_normal((n, 2))
    return x, which.astype(np.float64)


_SHAPES: dict[str, Callable[[int, float, np.random.Generator], tuple[np.ndarray, np.ndarray]]] = {
    "binary_linear": lambda n, noise, rng: _blobs(np.array([[-1.0, -1.0], [1.0, 1.0]]), noise, n, rng),
    "binary_xor": lambda n, noise, rng: _blobs(np.array([[-1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [1.0, -1.0]]),
                                               noise, n, rng, labels=np.array([0, 0, 1, 1])),
    "binary_rings": lambda n, noise, rng: _rings((1.0, 2.0), noise, n, rng),
    "multiclass_clusters": lambda n, noise, rng: _blobs(np.array([[-1.5, 0.0], [1.5, 0.0], [0.0, -1.5], [0.0, 1.5]]),
                                                        noise, n, rng),
    "multiclass_spirals": lambda n, noise, rng: _spirals(3, noise, n, rng),
    "multiclass_rings": lambda n, noise, rng: _rings((1.0, 2.0, 3.0), noise, n, rng),
}


def plane(shape: str, n_train: int = 120, noise: float = 0.5, seed: int = 0, n_query_in: int = 200,
          grid_size: int = 30, grid_extent: float = 3.5) -> Dataset:
    """A 2-D classification problem of Table 1 (``shape`` a key of the binary and multiclass ones).

    ``noise`` is the blobs' standard deviation, or the rings' and spirals' noise, in the
    units of the construction (before standardising); the grid covers
    ``[−grid_extent, grid_extent]²`` in standardised units.
    """
    if shape not in _SHAPES:
        raise ValueError(f"unknown 2-D problem {shape!r}; choose one of {', '.join(_SHAPES)}")
    rng = np.random.default_rng(seed)
    x, y = _SHAPES[shape](n_train, noise, rng)
    xq, _ = _SHAPES[shape](n_query_in, noise, rng)
    mu, sd = x.mean(0), x.std(0)
    config = dict(problem=shape, n_train=n_train, noise=noise, seed=seed, n_query_in=n_query_in, grid_size=grid_size,
                  grid_extent=grid_extent)
    task = "multiclass" if shape.startswith("multiclass") else "classification"
    return Dataset(task, (x - mu) / sd, y, {"in": (xq - mu) / sd, "grid": _grid_2d(grid_size, grid_extent)},
                   (grid_size, grid_size), config)


_CURVES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "regression_linear": lambda x: 0.8 * x + 0.3,
    "regression_nonlinear": lambda x: np.sin(3 * x) + x,
}


def line(shape: str, n_train: int = 40, noise: float = 0.1, seed: int = 0, n_query_in: int = 200,
         grid_size: int = 200, grid_extent: float = 3.0) -> Dataset:
    """A 1-D regression problem of Table 1: ``y = curve(x) + noise``, x uniform on [−1, 1]."""
    if shape not in _CURVES:
        raise ValueError(f"unknown 1-D problem {shape!r}; choose one of {', '.join(_CURVES)}")
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, n_train)
    y = _CURVES[shape](x) + noise * rng.standard_normal(n_train)
    xq = rng.uniform(-1.0, 1.0, n_query_in)
    mu, sd = x.mean(), x.std()
    config = dict(problem=shape, n_train=n_train, noise=noise, seed=seed, n_query_in=n_query_in, grid_size=grid_size,
                  grid_extent=grid_extent)
    grid = np.linspace(-grid_extent, grid_extent, grid_size)[:, None]
    return Dataset("regression", ((x - mu) / sd)[:, None], y, {"in": ((xq - mu) / sd)[:, None], "grid": grid},
                   (grid_size,), config)


@dataclass(frozen=True)
class Problem:
    """One registered problem: its maker, task, the paper's name for it and its data defaults."""

    name: str
    task: str
    make: Callable[..., Dataset]
    paper: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)


def _registry() -> dict[str, Problem]:
    from functools import partial

    out = {"two_moons": Problem("two_moons", "classification", two_moons),
           "gap_regression": Problem("gap_regression", "regression", gap_regression)}
    paper = {"binary_linear": "binary Linear", "binary_xor": "binary XOR", "binary_rings": "binary Rings",
             "multiclass_clusters": "multiclass Clusters", "multiclass_spirals": "multiclass Spirals",
             "multiclass_rings": "multiclass Rings"}
    noise = {"binary_linear": 0.8, "binary_xor": 0.5, "binary_rings": 0.2, "multiclass_clusters": 0.6,
             "multiclass_spirals": 0.15, "multiclass_rings": 0.2}
    for shape, name in paper.items():
        task = "multiclass" if shape.startswith("multiclass") else "classification"
        out[shape] = Problem(shape, task, partial(plane, shape), name,
                             {"n_train": 150 if task == "multiclass" else 120, "noise": noise[shape]})
    for shape, name in (("regression_linear", "regression Linear"), ("regression_nonlinear", "regression Nonlinear")):
        out[shape] = Problem(shape, "regression", partial(line, shape), name, {"n_train": 40, "noise": 0.1})
    return out


PROBLEMS: dict[str, Problem] = _registry()
"""Every problem by name, the paper's eight with their declared data defaults."""

TABLE1 = [name for name, p in PROBLEMS.items() if p.paper]
"""The paper's Table 1 problems, in its column order."""


def make_dataset(problem: str, **kwargs: Any) -> Dataset:
    """Build a registered problem by name (`PROBLEMS`), with its defaults under ``kwargs``."""
    if problem not in PROBLEMS:
        raise ValueError(f"unknown problem {problem!r}; choose one of {', '.join(PROBLEMS)}")
    spec = PROBLEMS[problem]
    return spec.make(**{**spec.defaults, **kwargs})
