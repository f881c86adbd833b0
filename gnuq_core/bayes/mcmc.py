"""Reference posteriors by NUTS (NumPyro), cached on disk, with ArviZ diagnostics.

The reference for an uncertainty estimate at a query x is the posterior predictive
variance under NUTS samples θ_s:

* classification: Var_s[sigmoid f(x; θ_s)] (probability space) and Var_s[f(x; θ_s)]
  (logit space);
* regression: Var_s[f(x; θ_s)] (epistemic part; the known noise σ² is added by nobody).

Chains of a neural network usually disagree in parameter space (permutation and sign
symmetries, separate modes), so R-hat on θ is expected to be large. What matters here is
whether chains agree on the *predictive variance*: :func:`split_agreement` measures the
Spearman correlation between the variances from two disjoint halves of the samples, a
noise ceiling for any estimator compared with this reference.
"""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gnuq_core.bayes.bnn import MLPConfig, forward, numpyro_model, x64
from gnuq_core.bayes.synthetic import Dataset

__all__ = ["NutsSettings", "NutsResult", "run_nuts", "predictive_f", "reference_variance",
           "diagnostics", "split_agreement", "reference_summary"]



@dataclass(frozen=True)
class NutsSettings:
    """NUTS settings (all of them enter the cache key).

    Attributes
    ----------
    num_warmup, num_samples, num_chains : int
        Warm-up iterations, kept draws per chain, chains (run one after the other).
    target_accept : float
        Target acceptance probability of step-size adaptation (0.8 default; raise it
        when there are divergences).
    max_tree_depth : int
        Largest tree depth; a transition that reaches it is "saturated".
    dense_mass : bool
        Dense (True) or diagonal (False) mass matrix adaptation.
    """

    num_warmup: int = 500
    num_samples: int = 500
    num_chains: int = 2
    target_accept: float = 0.8
    max_tree_depth: int = 10
    dense_mass: bool = False


@dataclass(frozen=True)
class NutsResult:
    """Samples and sampler statistics.

    Attributes
    ----------
    theta : numpy.ndarray
        Draws ``(chains, draws, n_params)``.
    diverging, num_steps, accept_prob : numpy.ndarray
        Per-transition statistics ``(chains, draws)``.
    step_size : numpy.ndarray
        Adapted step size per chain.
    max_tree_depth : int
        The tree-depth limit used (for saturation).
    wall_s : float
        Seconds the sampling took (including compilation) when it was computed.
    """

    theta: np.ndarray
    diverging: np.ndarray
    num_steps: np.ndarray
    accept_prob: np.ndarray
    step_size: np.ndarray
    max_tree_depth: int
    wall_s: float


_SAMPLERS: dict[Any, Any] = {}


def _sampler(cfg: MLPConfig, settings: NutsSettings, shape: tuple[int, ...]) -> Any:
    """One compiled MCMC object per (model, settings, data shape): reused across data sets and seeds."""
    from numpyro.infer import MCMC, NUTS, init_to_sample

    key = (cfg, settings, shape)
    if key not in _SAMPLERS:
        kernel = NUTS(lambda x, y: numpyro_model(cfg, x, y), target_accept_prob=settings.target_accept,
                      max_tree_depth=settings.max_tree_depth, dense_mass=settings.dense_mass,
                      init_strategy=init_to_sample)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not enough devices to run parallel chains": we run them in sequence
            _SAMPLERS[key] = MCMC(kernel, num_warmup=settings.num_warmup, num_samples=settings.num_samples,
                                  num_chains=settings.num_chains, chain_method="sequential", progress_bar=False,
                                  jit_model_args=True)
    return _SAMPLERS[key]


def run_nuts(cfg: MLPConfig, data: Dataset, settings: NutsSettings, seed: int = 0) -> NutsResult:
    """Sample the posterior of ``cfg`` on ``data`` by NUTS, chains initialised from prior draws.

    Sampling runs in JAX's default float type (float32 unless x64 is enabled globally),
    about twice as fast as float64 on CPU; the draws are returned as float64.

    Parameters
    ----------
    cfg : MLPConfig
        Model (architecture, prior, likelihood).
    data : Dataset
        Training data.
    settings : NutsSettings
        Sampler settings.
    seed : int
        Seed of the sampler (initial points and momenta).

    Returns
    -------
    NutsResult
    """
    mcmc = _sampler(cfg, settings, data.x_train.shape)
    x = jnp.asarray(data.x_train)  # JAX's default float (float32 unless x64 is on): faster on CPU
    y = jnp.asarray(data.y_train)
    t0 = time.time()
    mcmc.run(jax.random.PRNGKey(seed), x, y,
             extra_fields=("diverging", "num_steps", "accept_prob", "adapt_state.step_size"))
    C, S = settings.num_chains, settings.num_samples
    th = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"], dtype=np.float64)
    ex = mcmc.get_extra_fields(group_by_chain=True)
    return NutsResult(
        theta=th,
        diverging=np.asarray(ex["diverging"]).reshape(C, S),
        num_steps=np.asarray(ex["num_steps"]).reshape(C, S),
        accept_prob=np.asarray(ex["accept_prob"]).reshape(C, S),
        step_size=np.asarray(ex["adapt_state.step_size"]).reshape(C, S)[:, -1],
        max_tree_depth=settings.max_tree_depth,
        wall_s=time.time() - t0,
    )


@functools.lru_cache(maxsize=128)
def _predict_fn(cfg: MLPConfig) -> Any:
    return jax.jit(jax.vmap(lambda t, x: forward(cfg, t, x), in_axes=(0, None)))


@x64
def predictive_f(cfg: MLPConfig, theta: np.ndarray, xs: np.ndarray, batch: int = 256) -> np.ndarray:
    """f(x; θ_s) for every draw: ``(..., n_queries)`` for θ of shape ``(..., n_params)``
    (multiclass: ``(..., n_queries, n_classes)``)."""
    flat = theta.reshape(-1, theta.shape[-1])
    fn, x = _predict_fn(cfg), jnp.asarray(xs, jnp.float64)
    out = np.concatenate([np.asarray(fn(jnp.asarray(flat[i:i + batch]), x)) for i in range(0, len(flat), batch)])
    return out.reshape(*theta.shape[:-1], *out.shape[1:])


def probabilities(task: str, f: np.ndarray) -> np.ndarray:
    """The predicted probabilities of outputs ``f``: sigmoid f (binary), softmax over the last axis
    flattened with the queries (multiclass: ``(..., n_queries · n_classes)``, query-major)."""
    if task == "multiclass":
        z = np.exp(f - f.max(axis=-1, keepdims=True))
        return (z / z.sum(axis=-1, keepdims=True)).reshape(*f.shape[:-2], -1)
    return 1.0 / (1.0 + np.exp(-f))


def reference_variance(task: str, f: np.ndarray) -> dict[str, np.ndarray]:
    """Posterior predictive mean and variance from draws ``f`` of shape ``(chains, draws, n)``
    (multiclass: ``(chains, draws, n, n_classes)``).

    Returns ``var_f`` and ``mean_f`` (of f) for binary classification and regression; for
    classification also ``mean_p`` and ``var_p`` (of the probability), for multiclass those of
    every class's probability, query-major (``n · n_classes`` values), and no ``_f``.
    """
    if task == "multiclass":
        p = probabilities(task, f.reshape(-1, *f.shape[-2:]))
        return {"var_p": p.var(0), "mean_p": p.mean(0)}
    flat = f.reshape(-1, f.shape[-1])
    out = {"var_f": flat.var(0), "mean_f": flat.mean(0)}
    if task == "classification":
        p = probabilities(task, flat)
        out.update(var_p=p.var(0), mean_p=p.mean(0))
    return out


def _halves(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    C, S = f.shape[:2]
    if C >= 2:
        return f[: C // 2], f[C // 2:]
    return f[:, : S // 2], f[:, S // 2:]


def split_agreement(task: str, f: np.ndarray, key: str | None = None) -> dict[str, float]:
    """Noise ceiling of the reference: Spearman ρ between two disjoint halves' variances.

    The halves are the first and second half of the chains (or, with one chain, of its
    draws). ``rho_half`` compares two half-size references; ``rho_full`` is its
    Spearman–Brown extrapolation to the agreement expected of the full reference with
    an independent full-size replicate (an estimate, not a bound).
    """
    from scipy.stats import spearmanr

    key = key or ("var_f" if task == "regression" else "var_p")
    a, b = (reference_variance(task, h)[key] for h in _halves(f))
    r = float(spearmanr(a, b).statistic)
    return {"rho_half": r, "rho_full": 2 * r / (1 + r) if r > -1 else float("nan")}


def _az(fn: Any, draws: np.ndarray, **kw: Any) -> np.ndarray:
    """Apply an ArviZ diagnostic to draws ``(chains, draws, k)``; one value per k."""
    import arviz as az

    return np.asarray(fn(az.convert_to_dataset({"v": draws}), **kw)["v"].values, dtype=float)


def diagnostics(result: NutsResult, f: np.ndarray | None = None, task: str = "classification",
                max_params: int = 1000) -> dict[str, float]:
    """ArviZ diagnostics on θ and on the predictions compared.

    Parameters
    ----------
    result : NutsResult
        The sampler output.
    f : numpy.ndarray, optional
        Predictions ``(chains, draws, n_queries)`` (logits or means; multiclass with a last
        axis of classes); the R-hat and bulk ESS of the probabilities (classification) or
        means (regression) are reported as well.
    task : str
        ``"classification"``, ``"multiclass"`` or ``"regression"``.
    max_params : int
        θ diagnostics use at most this many (evenly spaced) parameters.

    Returns
    -------
    dict
        ``rhat_theta_max``, ``ess_theta_min`` (over parameters), ``rhat_pred_max``,
        ``rhat_pred_median``, ``ess_pred_min``, ``ess_pred_median`` (over queries),
        ``divergences``, ``divergence_rate``, ``treedepth_saturation`` (fraction of
        transitions that hit the depth limit), ``mean_accept``, ``mean_steps``.
    """
    import arviz as az

    out: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ warns about shape guesses and few chains
        th = result.theta
        if th.shape[-1] > max_params:  # an evenly spaced subset keeps ArviZ fast for wide nets
            th = th[..., np.linspace(0, th.shape[-1] - 1, max_params).astype(int)]
        out["rhat_theta_max"] = float(np.nanmax(_az(az.rhat, th)) if th.shape[0] > 1 else np.nan)
        out["ess_theta_min"] = float(np.nanmin(_az(az.ess, th, method="bulk")))
        if f is not None:
            pred = f if task == "regression" else probabilities(task, f)
            rh = _az(az.rhat, pred) if pred.shape[0] > 1 else np.full(pred.shape[-1], np.nan)
            es = _az(az.ess, pred, method="bulk")
            out.update(rhat_pred_max=float(np.nanmax(rh)) if np.isfinite(rh).any() else float("nan"),
                       rhat_pred_median=float(np.nanmedian(rh)) if np.isfinite(rh).any() else float("nan"),
                       ess_pred_min=float(np.nanmin(es)), ess_pred_median=float(np.nanmedian(es)))
    sat = result.num_steps >= 2 ** result.max_tree_depth - 1
    out.update(divergences=int(result.diverging.sum()), divergence_rate=float(result.diverging.mean()),
               treedepth_saturation=float(sat.mean()), mean_accept=float(result.accept_prob.mean()),
               mean_steps=float(result.num_steps.mean()))
    return out


def _rounded(a: np.ndarray, digits: int = 7) -> list[float]:
    """A float array as a JSON list with ``digits`` significant digits (keeps stored files small)."""
    return [float(f"{v:.{digits}g}") for v in np.asarray(a, dtype=float).ravel()]


def reference_summary(cfg: MLPConfig, data: Dataset, settings: NutsSettings, seed: int,
                      query_sets: tuple[str, ...]) -> dict[str, Any]:
    """Everything the chapters use from a NUTS reference, as a JSON-serialisable dict.

    This is what the results store keeps for the full profile: no draws, only per query
    point the posterior predictive mean and variance (7 significant digits) and the
    sampler's diagnostics.

    Parameters
    ----------
    cfg, data, settings, seed
        As for :func:`run_nuts`.
    query_sets : tuple of str
        Names of ``data.queries`` to summarise.

    Returns
    -------
    dict
        ``nuts`` (``step_size`` per chain, ``diagnostics`` on θ), ``q[name]`` with ``ref``
        (:func:`reference_variance` as lists), ``diag`` (:func:`diagnostics` with the
        predictions), ``split`` (and ``split_f`` in classification) from
        :func:`split_agreement`, and ``timings`` (``wall_s``, machine-dependent).
    """
    res = run_nuts(cfg, data, settings, seed)
    q: dict[str, Any] = {}
    for name in query_sets:
        f = predictive_f(cfg, res.theta, data.queries[name])
        entry = dict(ref={k: _rounded(v) for k, v in reference_variance(cfg.task, f).items()},
                     diag=diagnostics(res, f, cfg.task), split=split_agreement(cfg.task, f))
        if cfg.task == "classification":
            entry["split_f"] = split_agreement(cfg.task, f, key="var_f")
        q[name] = entry
    return dict(nuts=dict(step_size=_rounded(res.step_size), diagnostics=diagnostics(res)), q=q,
                timings=dict(wall_s=float(res.wall_s)))
