"""Bayesian MLPs in JAX/NumPyro on a flat parameter vector, and their MAP estimate.

The parameters θ are one flat vector (layer by layer: weights row-major, then biases),
so that the MCMC samples, the MAP, the gradients g = ∇θ f(x) and the Hessians all live
in the same coordinates, the coordinates in which the isotropic estimate ‖g‖² is taken.

Priors (``MLPConfig.prior``), both zero-mean Gaussian and independent:

* ``"plain"``: θ ~ N(0, α⁻¹ I) for every weight and bias (isotropic in θ).
* ``"fan_in"``: weights of a layer with ``fan_in`` inputs ~ N(0, σ_w² / fan_in), biases
  ~ N(0, σ_b²) (the usual "He/LeCun"-style scaling; the prior is *not* isotropic in θ).

Likelihood: Bernoulli(sigmoid f(x)) for (binary) classification, Categorical(softmax f(x))
over ``n_classes`` outputs for multiclass, N(f(x), σ_noise²) with a known σ_noise for
regression. Computations run in float64 (``jax.enable_x64``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["MLPConfig", "x64", "n_params", "layer_shapes", "unflatten", "forward", "prior_std",
           "log_prior", "log_likelihood", "log_joint", "numpyro_model", "fit_map", "MapResult"]

TASKS = ("classification", "multiclass", "regression")

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh, "relu": jax.nn.relu, "gelu": jax.nn.gelu, "erf": jax.scipy.special.erf,
}


def x64(fn: Callable) -> Callable:
    """Run ``fn`` with 64-bit JAX types enabled (without changing the global setting)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class MLPConfig:
    """Architecture, prior and likelihood of a Bayesian MLP.

    Attributes
    ----------
    input_dim : int
        Number of input features.
    width, depth : int
        Hidden units per layer and number of hidden layers (depth 0 gives the linear
        model f = xᵀw + b, where Laplace is exact; used by the tests).
    activation : str
        One of ``tanh``, ``relu``, ``gelu``, ``erf``.
    prior : str
        ``"plain"`` (N(0, 1/alpha) everywhere) or ``"fan_in"`` (variance sigma_w²/fan_in
        for weights, sigma_b² for biases).
    alpha : float
        Prior precision of the plain prior.
    sigma_w, sigma_b : float
        Scales of the fan-in prior.
    task : str
        ``"classification"`` (binary, one logit), ``"multiclass"`` (``n_classes`` logits) or
        ``"regression"``.
    noise_sigma : float
        Known likelihood noise for regression (ignored in classification).
    n_classes : int
        Classes of a multiclass model (≥ 3; ignored otherwise).
    """

    input_dim: int = 2
    width: int = 16
    depth: int = 1
    activation: str = "tanh"
    prior: str = "plain"
    alpha: float = 1.0
    sigma_w: float = 1.0
    sigma_b: float = 1.0
    task: str = "classification"
    noise_sigma: float = 0.1
    n_classes: int = 2

    def __post_init__(self) -> None:
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} unknown; choose one of {', '.join(ACTIVATIONS)}")
        if self.prior not in ("plain", "fan_in"):
            raise ValueError(f"prior {self.prior!r} unknown; choose 'plain' or 'fan_in'")
        if self.task not in TASKS:
            raise ValueError(f"task {self.task!r} unknown; choose one of {', '.join(TASKS)}")
        if self.task == "multiclass" and self.n_classes < 3:
            raise ValueError(f"a multiclass model needs n_classes ≥ 3 (got {self.n_classes}); two classes are "
                             "task='classification'")
        if self.depth < 0 or self.width < 1:
            raise ValueError(f"width={self.width} must be ≥ 1 and depth={self.depth} ≥ 0 (0: a linear model)")

    def as_dict(self) -> dict[str, Any]:
        """The configuration as a plain dict (for keys; ``n_classes`` only where it matters, so
        the keys of binary and regression models stay what they were)."""
        out = asdict(self)
        if self.task != "multiclass":
            del out["n_classes"]
        return out

    @property
    def outputs(self) -> int:
        """Network outputs: ``n_classes`` logits for multiclass, one otherwise."""
        return self.n_classes if self.task == "multiclass" else 1


def layer_shapes(cfg: MLPConfig) -> list[tuple[int, int]]:
    """``(fan_in, fan_out)`` of each dense layer, input to output."""
    dims = [cfg.input_dim] + [cfg.width] * cfg.depth + [cfg.outputs]
    return list(zip(dims[:-1], dims[1:]))


def n_params(cfg: MLPConfig) -> int:
    """Number of parameters (weights and biases)."""
    return sum(i * o + o for i, o in layer_shapes(cfg))


def unflatten(cfg: MLPConfig, theta: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
    """Split a flat θ of length ``n_params(cfg)`` into ``[(W, b), ...]`` with W of shape (fan_in, fan_out)."""
    out, k = [], 0
    for i, o in layer_shapes(cfg):
        w = theta[k:k + i * o].reshape(i, o)
        k += i * o
        b = theta[k:k + o]
        k += o
        out.append((w, b))
    return out


def forward(cfg: MLPConfig, theta: jax.Array, x: jax.Array) -> jax.Array:
    """Network output f(x; θ): logits (classification) or means (regression), shape ``x.shape[:-1]``
    (multiclass: ``x.shape[:-1] + (n_classes,)``)."""
    act = ACTIVATIONS[cfg.activation]
    h = x
    layers = unflatten(cfg, theta)
    for w, b in layers[:-1]:
        h = act(h @ w + b)
    w, b = layers[-1]
    out = h @ w + b
    return out if cfg.task == "multiclass" else out[..., 0]


def prior_std(cfg: MLPConfig) -> np.ndarray:
    """Prior standard deviation of every entry of θ (flat, float64)."""
    parts = []
    for i, o in layer_shapes(cfg):
        if cfg.prior == "plain":
            sw = sb = 1.0 / math.sqrt(cfg.alpha)
        else:
            sw, sb = cfg.sigma_w / math.sqrt(i), cfg.sigma_b
        parts += [np.full(i * o, sw), np.full(o, sb)]
    return np.concatenate(parts)


def log_prior(cfg: MLPConfig, theta: jax.Array) -> jax.Array:
    """log N(θ; 0, diag(prior_std²))."""
    s = jnp.asarray(prior_std(cfg), dtype=theta.dtype)
    return jnp.sum(-0.5 * (theta / s) ** 2 - jnp.log(s) - 0.5 * math.log(2 * math.pi))


def log_likelihood(cfg: MLPConfig, theta: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    """Sum over the data of log p(y | x, θ)."""
    f = forward(cfg, theta, x)
    if cfg.task == "classification":
        return jnp.sum(y * jax.nn.log_sigmoid(f) + (1 - y) * jax.nn.log_sigmoid(-f))
    if cfg.task == "multiclass":
        logp = jax.nn.log_softmax(f, axis=-1)
        return jnp.sum(jnp.take_along_axis(logp, y.astype(jnp.int32)[:, None], axis=-1))
    s = cfg.noise_sigma
    return jnp.sum(-0.5 * ((y - f) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi))


def log_joint(cfg: MLPConfig, theta: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    """Unnormalised log posterior log p(θ) + log p(y | x, θ)."""
    return log_prior(cfg, theta) + log_likelihood(cfg, theta, x, y)


def numpyro_model(cfg: MLPConfig, x: jax.Array, y: jax.Array | None = None) -> None:
    """NumPyro model: one flat site ``"theta"`` with the prior, observations ``"y"``."""
    import numpyro
    import numpyro.distributions as dist

    s = jnp.asarray(prior_std(cfg), dtype=x.dtype)
    theta = numpyro.sample("theta", dist.Normal(jnp.zeros_like(s), s).to_event(1))
    f = forward(cfg, theta, x)
    if cfg.task == "classification":
        numpyro.sample("y", dist.Bernoulli(logits=f).to_event(1), obs=y)
    elif cfg.task == "multiclass":
        numpyro.sample("y", dist.Categorical(logits=f).to_event(1), obs=None if y is None else y.astype(jnp.int32))
    else:
        numpyro.sample("y", dist.Normal(f, cfg.noise_sigma).to_event(1), obs=y)


@dataclass(frozen=True)
class MapResult:
    """The MAP estimate θ* and how the optimiser got there.

    Attributes
    ----------
    theta : numpy.ndarray
        The best θ over all restarts.
    neg_log_joint : float
        −log p(θ*, y | x) (up to the constant) at θ*.
    grad_norm : float
        ‖∇θ log p(θ, y | x)‖ at θ* (0 at an exact stationary point).
    restarts : list of dict
        Per restart: final objective, gradient norm, iterations, optimiser message.
    """

    theta: np.ndarray
    neg_log_joint: float
    grad_norm: float
    restarts: list[dict[str, Any]]


@functools.lru_cache(maxsize=128)
def _objective(cfg: MLPConfig) -> Callable:
    """Jitted value and gradient of −log p(θ, y | x), one per model."""
    return jax.jit(jax.value_and_grad(lambda t, x, y: -log_joint(cfg, t, x, y)))


@x64
def fit_map(cfg: MLPConfig, x: np.ndarray, y: np.ndarray, n_restarts: int = 3, seed: int = 0,
            maxiter: int = 5000, gtol: float = 1e-8) -> MapResult:
    """MAP estimate by L-BFGS (SciPy, deterministic) from ``n_restarts`` prior draws.

    Parameters
    ----------
    cfg : MLPConfig
        Model.
    x, y : numpy.ndarray
        Training data.
    n_restarts : int
        Independent starts drawn from the prior (seeded); the lowest objective wins.
    seed : int
        Seed of the starting points.
    maxiter : int
        L-BFGS iterations per restart.
    gtol : float
        Stop when the projected gradient's largest entry falls below this.

    Returns
    -------
    MapResult
    """
    from scipy.optimize import minimize

    xj, yj = jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.float64)
    obj = _objective(cfg)

    def fun(t: np.ndarray) -> tuple[float, np.ndarray]:
        v, g = obj(jnp.asarray(t), xj, yj)
        return float(v), np.asarray(g, dtype=np.float64)

    rng = np.random.default_rng(seed)
    s = prior_std(cfg)
    runs, best = [], None
    for r in range(n_restarts):
        t0 = s * rng.standard_normal(s.size)
        res = minimize(fun, t0, jac=True, method="L-BFGS-B",
                       options=dict(maxiter=maxiter, gtol=gtol, ftol=1e-15, maxcor=30))
        gn = float(np.linalg.norm(fun(res.x)[1]))
        runs.append(dict(restart=r, neg_log_joint=float(res.fun), grad_norm=gn, iterations=int(res.nit),
                         message=str(res.message)))
        if best is None or res.fun < best.fun:
            best = res
    gn = float(np.linalg.norm(fun(best.x)[1]))
    return MapResult(np.asarray(best.x), float(best.fun), gn, runs)
