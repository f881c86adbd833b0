"""laplace-torch vs the project's Laplace / GGN variances on the synthetic problems.

The project computes its Laplace baselines in JAX on a flat θ (:mod:`gnuq_core.bayes.laplace`,
the parametrisation NUTS samples). Here the same MAP network is copied into a float64
PyTorch MLP and handed to laplace-torch 0.3 (Daxberger et al. 2021):
``Laplace(model, likelihood, subset_of_weights="all", hessian_structure="full")`` with the
same per-parameter prior precision, fitted on the same training set. Its GLM functional
variance ``f_var`` is ``gᵀΣg`` with Σ the inverse of (curvature + prior precision), which
is the project's ``<name>_f``:

- ``ggn_f`` vs laplace-torch's default backend (curvlinops' GGN);
- ``laplace_f`` (exact Hessian) vs the curvlinops Hessian backend;
- ``iso_p`` = ‖∇θ p‖² vs plain autograd of p = softmax([0, f])₁ = σ(f);
- (classification) ``ggn_glm_p`` = Var[σ(f)] under f ~ N(f*, gᵀΣg)
  (:func:`gnuq_core.bayes.laplace.glm_predictive_variance`, quadrature) vs the sample
  variance of σ(f) over draws from laplace-torch's GLM (f_mu, f_var) (Monte Carlo, so a
  looser tolerance; its ``predictive_samples`` cannot be used: it Cholesky-factors the
  2×2 logit covariance, singular for the logits [0, f]).

For classification the copy's logits are ``[0, f]``: a two-class softmax whose class-1
probability is σ(f) and whose cross-entropy GGN is p(1−p)∇f∇fᵀ, the project's Bernoulli GGN.
For regression laplace-torch's ``sigma_noise`` is the model's known noise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gnuq_core.bayes import laplace as ours
from gnuq_core.bayes.bnn import MLPConfig, fit_map, layer_shapes, n_params, prior_std
from gnuq_core.bayes.synthetic import make_dataset
from gnuq_core.crosscheck.agreement import compare, frame

__all__ = ["LaplaceCase", "torch_copy", "laplace_torch_variances", "autograd_grad_p_sq", "compare_case",
           "compare_cases", "TOLERANCE", "MC_TOLERANCE", "FLOAT64_NOTE"]

FLOAT64_NOTE = ("laplace-torch 0.3's curvlinops backends form the full curvature as `linop @ torch.eye(n)` with "
                 "torch's default dtype: under the usual float32 default a float64 model's curvature is rounded "
                 "to about 3e-8 relative; the cross-check fits with the default dtype set to float64")
"""Why :func:`laplace_torch_variances` switches torch's default dtype while fitting."""

TOLERANCE = 1e-8
"""Float64 on both sides, the same P×P solve: anything above this is a real difference."""

MC_TOLERANCE = 5.0
"""Largest difference, in Monte-Carlo standard errors, between the quadrature Var[σ(f)] and a
sample variance (σ(f) is heavy-tailed far from the data, so a relative tolerance would be
arbitrary)."""


@dataclass(frozen=True)
class LaplaceCase:
    """One synthetic problem and model to cross-check.

    Attributes
    ----------
    problem : str
        ``"two_moons"`` or ``"gap_regression"`` (:func:`gnuq_core.bayes.synthetic.make_dataset`).
    width, depth : int
        Hidden layer width and number of hidden layers.
    prior : str
        ``"plain"`` or ``"fan_in"`` (:class:`gnuq_core.bayes.bnn.MLPConfig`).
    seed : int
        Seed of the data and of the MAP restarts.
    data : dict
        Extra arguments of the problem (``n_train``, ``grid_size``, ...).
    """

    problem: str
    width: int
    depth: int = 1
    prior: str = "plain"
    seed: int = 0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Short name for tables: ``two_moons w16 d1 fan_in``."""
        return f"{self.problem} w{self.width} d{self.depth} {self.prior}"


def torch_copy(cfg: Any, theta: np.ndarray) -> Any:
    """The flat-θ MLP of :mod:`gnuq_core.bayes.bnn` as a float64 ``torch.nn.Sequential``.

    Classification models end in a layer that prepends a zero logit, so the output is
    ``[0, f]`` (2 classes); regression models output ``f`` (1 column). The parameter order
    is PyTorch's (weight as (out, in), then bias, layer by layer).
    """
    import torch
    from torch import nn

    acts = {"tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}
    if cfg.activation not in acts:
        raise ValueError(f"activation {cfg.activation!r} has no PyTorch copy here; use one of {', '.join(acts)}")

    class PrependZeroLogit(nn.Module):
        def forward(self, f: torch.Tensor) -> torch.Tensor:
            return torch.cat([torch.zeros_like(f), f], dim=-1)

    theta = np.asarray(theta, np.float64)
    if theta.ndim != 1 or theta.size != n_params(cfg):
        raise ValueError(f"theta has {theta.size} entries but the model {cfg} has {n_params(cfg)}: pass its flat θ")
    layers: list[nn.Module] = []
    k = 0
    shapes = layer_shapes(cfg)
    for j, (i, o) in enumerate(shapes):
        lin = nn.Linear(i, o).double()
        w = theta[k:k + i * o].reshape(i, o)
        k += i * o
        b = theta[k:k + o]
        k += o
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(b.copy()))
        layers.append(lin)
        if j < len(shapes) - 1:
            layers.append(acts[cfg.activation]())
    if cfg.task == "classification":
        layers.append(PrependZeroLogit())
    return nn.Sequential(*layers).double().eval()


def _prior_precision_torch(cfg: Any) -> np.ndarray:
    """The per-parameter prior precision in PyTorch's parameter order (weights transposed)."""
    prec = 1.0 / prior_std(cfg) ** 2
    out, k = [], 0
    for i, o in layer_shapes(cfg):
        out.append(prec[k:k + i * o].reshape(i, o).T.ravel())
        k += i * o
        out.append(prec[k:k + o])
        k += o
    return np.concatenate(out)


def laplace_torch_variances(cfg: Any, theta: np.ndarray, x_train: np.ndarray, y_train: np.ndarray,
                            xs: np.ndarray, backend: str = "ggn", glm_samples: int = 0,
                            seed: int = 0) -> dict[str, np.ndarray]:
    """laplace-torch's GLM functional variance gᵀΣg (and f) at the queries ``xs``.

    Parameters
    ----------
    cfg : MLPConfig
        Model (its prior and, for regression, its noise σ).
    theta : numpy.ndarray
        The MAP θ* (flat, the layout of :mod:`gnuq_core.bayes.bnn`).
    x_train, y_train : numpy.ndarray
        Training data (the curvature is summed over it).
    xs : numpy.ndarray
        Queries.
    backend : {"ggn", "hessian"}
        curvlinops' GGN (laplace-torch's default) or its exact Hessian.
    glm_samples : int
        If positive (classification), also the sample variance of p = σ(f) over this many
        draws of f from laplace-torch's GLM functional distribution N(f_mu, f_var).
    seed : int
        Seed of those draws.

    Returns
    -------
    dict
        ``f`` and ``var_f`` (shape ``(n,)``), ``seconds`` (fit + predict) and, with
        ``glm_samples``, ``glm_p`` and its standard error ``glm_p_se``.
    """
    import torch
    from laplace import Laplace
    from laplace.curvature import CurvlinopsGGN, CurvlinopsHessian
    from torch.utils.data import DataLoader, TensorDataset

    backends = {"ggn": CurvlinopsGGN, "hessian": CurvlinopsHessian}
    if backend not in backends:
        raise ValueError(f"backend {backend!r} unknown; choose one of {', '.join(backends)}")
    classification = cfg.task == "classification"
    model = torch_copy(cfg, theta)
    x = torch.as_tensor(np.asarray(x_train, np.float64))
    y = torch.as_tensor(np.asarray(y_train)).long() if classification else \
        torch.as_tensor(np.asarray(y_train, np.float64))[:, None]
    loader = DataLoader(TensorDataset(x, y), batch_size=len(x))
    started = time.perf_counter()
    la = Laplace(model, "classification" if classification else "regression", subset_of_weights="all",
                 hessian_structure="full", backend=backends[backend],
                 prior_precision=torch.as_tensor(_prior_precision_torch(cfg)),
                 **({} if classification else {"sigma_noise": float(cfg.noise_sigma)}))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # see FLOAT64_NOTE
    try:
        la.fit(loader)
    finally:
        torch.set_default_dtype(previous)
    xq = torch.as_tensor(np.asarray(xs, np.float64))
    f_mu, f_var = la._glm_predictive_distribution(xq)
    out_col = 1 if classification else 0
    out = {"f": f_mu[:, out_col].numpy().copy(), "var_f": f_var[:, out_col, out_col].numpy().copy()}
    if glm_samples > 0 and classification:
        # laplace-torch's own predictive_samples Cholesky-factors the 2×2 logit covariance,
        # which is singular for the logits [0, f]; draw f from its (f_mu, f_var) instead.
        gen = torch.Generator().manual_seed(seed)
        z = torch.randn(glm_samples, len(xq), generator=gen, dtype=torch.float64)
        f = f_mu[:, out_col] + f_var[:, out_col, out_col].clamp_min(0).sqrt() * z
        p = torch.sigmoid(f)
        dev2 = (p - p.mean(dim=0)) ** 2
        out["glm_p"] = dev2.sum(dim=0).numpy() / (glm_samples - 1)
        # standard error of a sample variance: sqrt((m4 − s⁴) / N)
        out["glm_p_se"] = np.sqrt(np.maximum((dev2**2).mean(dim=0).numpy() - out["glm_p"] ** 2, 0.0) / glm_samples)
    out["seconds"] = np.float64(time.perf_counter() - started)
    return out


def autograd_grad_p_sq(cfg: Any, theta: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """‖∇θ p(x)‖² by plain autograd on the PyTorch copy (p = σ(f), classification only)."""
    import torch

    if cfg.task != "classification":
        raise ValueError("‖∇θ p‖² is defined for classification (p = σ(f)); this model is a regression")
    model = torch_copy(cfg, theta)
    params = list(model.parameters())
    out = []
    for x in np.asarray(xs, np.float64):
        p = torch.softmax(model(torch.as_tensor(x)[None]), dim=-1)[0, 1]
        grads = torch.autograd.grad(p, params)
        out.append(float(sum((g.double() ** 2).sum() for g in grads)))
    return np.asarray(out)


def _cfg_and_data(case: LaplaceCase) -> tuple[Any, Any]:
    ds = make_dataset(case.problem, seed=case.seed, **case.data)
    cfg = MLPConfig(input_dim=ds.input_dim, width=case.width, depth=case.depth, prior=case.prior, task=ds.task,
                    **({"noise_sigma": float(ds.config["noise"])} if ds.task == "regression" else {}))
    return cfg, ds


def compare_case(case: LaplaceCase, *, glm_samples: int = 0, n_restarts: int = 2,
                 theta: np.ndarray | None = None) -> Any:
    """Agreement rows for one case: the project's Laplace variances vs laplace-torch's.

    Parameters
    ----------
    case : LaplaceCase
        Problem and model.
    glm_samples : int
        Monte-Carlo draws for the Var[σ(f)] row (classification; 0 skips it).
    n_restarts : int
        L-BFGS restarts of the MAP (:func:`gnuq_core.bayes.bnn.fit_map`).
    theta : numpy.ndarray, optional
        Use this θ instead of fitting the MAP (tests pass a perturbed one).

    Returns
    -------
    pandas.DataFrame
        Agreement rows (:func:`gnuq_core.crosscheck.agreement.compare`) with columns
        ``case``, ``theirs_by`` and ``seconds_ours`` / ``seconds_theirs`` added.
    """
    cfg, ds = _cfg_and_data(case)
    if theta is None:
        theta = fit_map(cfg, ds.x_train, ds.y_train, n_restarts=n_restarts, seed=case.seed).theta
    xs = np.concatenate([ds.queries["in"], ds.queries["grid"]])
    t0 = time.perf_counter()
    est = ours.estimates(cfg, theta, ds.x_train, ds.y_train, xs)
    t_ours = time.perf_counter() - t0
    ggn = laplace_torch_variances(cfg, theta, ds.x_train, ds.y_train, xs, backend="ggn",
                                  glm_samples=glm_samples, seed=case.seed)
    hess = laplace_torch_variances(cfg, theta, ds.x_train, ds.y_train, xs, backend="hessian")
    extra = {"case": case.label, "n_params": int(theta.size)}
    rows = [
        compare("output f at θ* (the copy)", est["f"], ggn["f"], TOLERANCE, theirs_by="PyTorch copy", **extra),
        compare("GGN-Laplace gᵀΣg", est["ggn_f"], ggn["var_f"], TOLERANCE, theirs_by="laplace-torch, curvlinops GGN",
                **extra),
        compare("Hessian-Laplace gᵀΣg", est["laplace_f"], hess["var_f"], TOLERANCE,
                theirs_by="laplace-torch, curvlinops Hessian", **extra),
    ]
    if cfg.task == "classification":
        rows.append(compare("‖∇θ p‖²", est["iso_p"], autograd_grad_p_sq(cfg, theta, xs), TOLERANCE,
                            theirs_by="torch.autograd", **extra))
        if glm_samples > 0 and "ggn_glm_p" in est:
            rows.append(compare("GLM predictive Var[σ(f)] (GGN; error in MC standard errors)", est["ggn_glm_p"],
                                ggn["glm_p"], MC_TOLERANCE, scale=np.maximum(ggn["glm_p_se"], 1e-300),
                                theirs_by=f"σ(f), f ~ laplace-torch GLM, {glm_samples:,} draws", **extra))
    df = frame(rows)
    df["seconds_ours"] = t_ours
    df["seconds_theirs"] = float(ggn["seconds"] + hess["seconds"])
    return df


def compare_cases(cases: list[LaplaceCase], **kwargs: Any) -> Any:
    """:func:`compare_case` for each case, one table."""
    import pandas as pd

    return pd.concat([compare_case(c, **kwargs) for c in cases], ignore_index=True)
