"""Chapter 01, the derivation: each step from the delta method to ‖∇θ p‖² checked numerically.

Five checks on models small enough that the exact answer is known:

(a) the delta method against Monte Carlo as the perturbation σ shrinks (a trained MLP);
(b) ‖∇p‖² = p²‖∇log p‖² computed in log space against the direct gradient (float64, float32);
(c) Bayesian linear regression, where the delta method is exact, and where isotropy ranks badly;
(d) the isotropic score as the tangent-kernel diagonal, with and without conditioning on the data;
(e) the law of total variance on the Monte Carlo samples of (a).

`run` performs them in this order from one seed (the order fixes every random draw) and
returns a `Result` whose ``values`` are what the page glues; ``figure_*`` draw its figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gnuq_core.chapters.base import COUNT, ChapterParams, Result, param
from gnuq_core.estimators import jax_grad_sq_norm, torch_uncertainty
from gnuq_core.isotropy import delta_method, linear_gaussian, tangent_kernel
from gnuq_core.isotropy.mlp import init_mlp, mlp_apply, num_params
from gnuq_core.isotropy.train import fit_adam
from gnuq_core.options import Rule
from gnuq_core.repro import display

__all__ = ["Params", "run", "QUERY_POINTS", "figure_delta_method", "figure_logspace", "figure_blr", "figure_ntk"]

QUERY_POINTS = {"inside the data (x = 0.4)": 0.4, "decision boundary (x = 1.57)": 1.57, "far outside (x = 6)": 6.0}
"""Inputs of check (a): where the classifier saw data, its decision boundary, far outside."""
N_LOGSPACE_INPUTS = 200
"""Inputs of check (b), spread over many orders of magnitude of p."""
RBF_CENTRES = np.linspace(-4, 4, 25)
"""Feature centres of check (c)'s linear model (Gaussian bumps of width 0.5)."""
BLR_ALPHA, BLR_BETA = 1.0, 100.0
"""Prior precision and noise precision of check (c)."""


@dataclass(frozen=True)
class Params(ChapterParams):
    """Chapter 01's parameters (defaults: the paper edition)."""

    CHAPTER = "01_derivation"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        "quick": {"n_mc": 4000, "n_sigmas": 8, "train_steps": 3000},
        "smoke": {"n_mc": 400, "n_sigmas": 4, "width": 16, "train_steps": 500},
    }
    seed: int = param(0, Rule(minimum=0, maximum=2**32 - 1, integer=True), "every random draw derives from it")
    n_mc: int = param(20000, COUNT, "Monte Carlo samples of θ per perturbation scale σ")
    n_sigmas: int = param(12, COUNT, "perturbation scales σ in the delta-method check")
    width: int = param(32, COUNT, "hidden width of the small MLPs")
    n_train: int = param(40, Rule(minimum=2, integer=True), "training points of the toy problems")
    train_steps: int = param(6000, COUNT, "full-batch Adam steps to reach θ*")


def _classification(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Points on a line labelled by the sign of sin 2x, 10% of labels flipped."""
    x = rng.uniform(-3, 3, size=(n, 1))
    y = (np.sin(2 * x[:, 0]) > 0).astype(float)
    flip = rng.random(n) < 0.1
    return x, np.where(flip, 1 - y, y)


def _gap_inputs(n: int, rng: np.random.Generator) -> np.ndarray:
    """Inputs in [−3, −1] ∪ [1, 3]: a gap in the data around 0."""
    return np.concatenate([rng.uniform(-3, -1, n // 2), rng.uniform(1, 3, n - n // 2)])


def rbf_features(x: Any) -> Any:
    """Gaussian bumps of width 0.5 at `RBF_CENTRES` (NumPy or traced JAX arrays)."""
    import jax.numpy as jnp

    return jnp.exp(-0.5 * (jnp.asarray(x)[:, None] - RBF_CENTRES[None, :]) ** 2 / 0.5**2)


def _l2(params: Any) -> Any:
    import jax.numpy as jnp

    return 1e-4 * sum(jnp.sum(w**2) for w, _ in params)


def _delta_method(p: Params, key: Any, rng: np.random.Generator, out: Result) -> tuple[Any, Any, Any]:
    """Check (a). Returns (key, trained classifier parameters, σ grid)."""
    import jax
    import jax.numpy as jnp

    x_cls, y_cls = _classification(p.n_train, rng)
    key, k_init = jax.random.split(key)

    def loss(params: Any) -> Any:
        logits = jax.vmap(lambda x: mlp_apply(params, x))(jnp.asarray(x_cls))
        return jnp.mean(jnp.logaddexp(0.0, logits) - jnp.asarray(y_cls) * logits) + _l2(params)

    fit = fit_adam(loss, init_mlp(k_init, [1, p.width, p.width, 1]), steps=p.train_steps, lr=1e-2)
    sigmas = np.logspace(-4, -1, p.n_sigmas)
    checks = {}
    for name, x0 in QUERY_POINTS.items():
        def p_at(params: Any, x0: float = x0) -> Any:
            return jax.nn.sigmoid(mlp_apply(params, jnp.array([x0])))

        key, k_mc = jax.random.split(key)
        checks[name] = delta_method.mc_variance_ratio(p_at, fit.params, sigmas, p.n_mc, k_mc)
    small = np.array([res.ratio[0] for res in checks.values()])
    out.values.update(
        cls_n_params=num_params(fit.params), cls_grad_norm=fit.grad_norm, sigma_min=float(sigmas[0]),
        sigma_max=float(sigmas[-1]), ratio_small_sigma_maxdev=float(np.max(np.abs(small - 1))),
        ratio_small_sigma_se=float(max(res.ratio_se[0] for res in checks.values())),
        # what exercise 1 predicts for a quarter of the samples: the standard error ∝ 1/√n doubles
        ratio_small_sigma_se_quarter=2 * float(max(res.ratio_se[0] for res in checks.values())),
        ratio_large_sigma_min=float(min(res.ratio[-1] for res in checks.values())),
        ratio_large_sigma_max=float(max(res.ratio[-1] for res in checks.values())), n_mc=p.n_mc)
    out.data["delta_method"] = checks
    return key, fit.params, sigmas


def _log_space(p: Params, out: Result) -> None:
    """Check (b): the log-space estimator against backpropagating p itself."""
    import torch

    torch.manual_seed(p.seed)
    net = torch.nn.Sequential(torch.nn.Linear(2, p.width), torch.nn.Tanh(), torch.nn.Linear(p.width, 1)).double()
    with torch.no_grad():  # extremely confident on some inputs: logits up to several hundred
        net[2].weight.mul_(torch.logspace(0, 3, p.width, dtype=torch.float64))
    inputs = torch.randn(N_LOGSPACE_INPUTS, 2, dtype=torch.float64) * torch.logspace(
        -1, 1, N_LOGSPACE_INPUTS, dtype=torch.float64)[:, None]

    def log_p(model: Any, x: Any) -> Any:
        return torch.nn.functional.logsigmoid(-model(x[None])[0, 0])  # log p(y = 0 | x)

    log_space, direct64, direct32, log_ps = [], [], [], []
    for x in inputs:
        u = torch_uncertainty(net, lambda m, x=x: log_p(m, x))
        log_space.append(u.log10_epistemic)
        log_ps.append(u.log_p)
        for dtype, direct in ((torch.float64, direct64), (torch.float32, direct32)):
            model = net.to(dtype)
            grads = torch.autograd.grad(log_p(model, x.to(dtype)).exp(), list(model.parameters()))
            sq = sum(float((g.double() ** 2).sum()) for g in grads)
            direct.append(np.log10(sq) if sq > 0 else -np.inf)
        net.double()
    log_space_a, d64, d32 = map(np.asarray, (log_space, direct64, direct32))
    log10_p = np.asarray(log_ps) / np.log(10)
    ok64 = np.isfinite(d64)
    out.values.update(
        logspace_max_rel_err=float(np.abs(10 ** (log_space_a[ok64] - d64[ok64]) - 1).max()),
        logspace_n=int(ok64.sum()), direct32_underflow=int((~np.isfinite(d32)).sum()),
        logspace_finite=int(np.isfinite(log_space_a).sum()), log10_p_min=float(log10_p.min()))
    out.data["logspace"] = {"log10_p": log10_p, "log_space": log_space_a, "direct64": d64, "direct32": d32}


def _linear_regression(p: Params, rng: np.random.Generator, out: Result) -> dict[str, Any]:
    """Check (c): the delta method is exact for a linear model; isotropy is not."""
    import jax
    import jax.numpy as jnp
    from scipy.stats import spearmanr

    x_reg = _gap_inputs(p.n_train, rng)
    y_reg = np.sin(2 * x_reg) + rng.normal(0, BLR_BETA**-0.5, p.n_train)
    phi_train = np.asarray(rbf_features(x_reg))
    post = linear_gaussian.posterior(phi_train, y_reg, BLR_ALPHA, BLR_BETA)
    x_grid = np.linspace(-5, 5, 201)

    def f(w: Any, x: Any) -> Any:  # f(x) = φ(x)ᵀw
        return jnp.dot(rbf_features(x[None])[0], w)

    grads = np.asarray(jax.vmap(jax.grad(f), in_axes=(None, 0))(jnp.asarray(post.mean), jnp.asarray(x_grid)))
    delta_var = linear_gaussian.weight_space_variance(grads, post.cov)
    exact = linear_gaussian.function_space_variance(np.asarray(rbf_features(x_grid)), phi_train, BLR_ALPHA, BLR_BETA)
    iso = np.sum(grads**2, axis=1)
    in_gap = np.abs(x_grid) < 1
    near_train = np.min(np.abs(x_grid[:, None] - x_reg[None, :]), axis=1) < 0.1
    beyond = np.abs(x_grid) > 4.5

    def rel(v: np.ndarray, where: np.ndarray) -> float:  # median over `where`, relative to that at the data
        return float(np.median(v[where]) / np.median(v[near_train]))

    gap_ratio, beyond_ratio = rel(exact, in_gap), rel(exact, beyond)
    out.values.update(
        blr_max_rel_err=float(np.max(np.abs(delta_var / exact - 1))),
        blr_rho_iso=float(spearmanr(iso, exact).statistic),
        blr_rho_iso_gap=float(spearmanr(iso[in_gap], exact[in_gap]).statistic),
        blr_gap_ratio=gap_ratio, blr_gap_direction="larger" if gap_ratio > 1 else "smaller",
        blr_iso_gap_ratio=rel(iso, in_gap), blr_beyond_ratio=beyond_ratio, blr_iso_beyond_ratio=rel(iso, beyond),
        blr_beyond_vs_gap="lower than in the gap" if beyond_ratio < gap_ratio else "higher than in the gap",
        blr_beyond_vs_data="still above" if beyond_ratio > 1 else "below")
    out.data["blr"] = {"x_grid": x_grid, "x": x_reg, "y": y_reg, "mean": np.asarray(rbf_features(x_grid)) @ post.mean,
                       "exact": exact, "iso": iso}
    return {"x_reg": x_reg, "y_reg": y_reg, "x_grid": x_grid, "in_gap": in_gap}


def _tangent_kernel(p: Params, key: Any, gap: dict[str, Any], out: Result) -> Any:
    """Check (d): the isotropic score is Θ(x, x); conditioning on the data removes what the
    training gradients explain. Returns the key."""
    import jax
    import jax.numpy as jnp
    from scipy.stats import spearmanr

    key, k_init = jax.random.split(key)
    xr, yr = jnp.asarray(gap["x_reg"])[:, None], jnp.asarray(gap["y_reg"])

    def loss(params: Any) -> Any:
        pred = jax.vmap(lambda x: mlp_apply(params, x))(xr)
        return jnp.mean((pred - yr) ** 2) + _l2(params)

    params = fit_adam(loss, init_mlp(k_init, [1, p.width, p.width, 1]), steps=p.train_steps, lr=1e-2).params
    xq = jnp.asarray(gap["x_grid"])[:, None]
    diag = np.diag(tangent_kernel.tangent_kernel(mlp_apply, params, xq))
    grad_sq = np.asarray(jax_grad_sq_norm(mlp_apply, params, xq))
    theta_qx = tangent_kernel.tangent_kernel(mlp_apply, params, xq, xr)
    theta_xx = tangent_kernel.tangent_kernel(mlp_apply, params, xr)
    noise_ratio = 1e-2 * np.trace(theta_xx) / len(theta_xx)  # λ: 1% of the mean diagonal
    conditioned = tangent_kernel.linearised_posterior_variance(diag, theta_qx, theta_xx, noise_ratio)
    explained = 1 - conditioned / diag
    at_data = np.min(np.abs(gap["x_grid"][:, None] - gap["x_reg"][None, :]), axis=1) < 0.1
    out.values.update(
        ntk_diag_max_rel_err=float(np.max(np.abs(diag / grad_sq - 1))),
        ntk_explained_at_data=float(np.median(explained[at_data])),
        ntk_explained_gap=float(np.median(explained[gap["in_gap"]])),
        ntk_rho_iso_vs_conditioned=float(spearmanr(diag, conditioned).statistic))
    out.data["ntk"] = {"x_grid": gap["x_grid"], "x": gap["x_reg"], "diag": diag, "conditioned": conditioned}
    return key


def _total_variance(p: Params, key: Any, cls_params: Any, sigmas: np.ndarray, out: Result) -> None:
    """Check (e): p̄(1 − p̄) = E[p(1 − p)] + Var[p] on the Monte Carlo samples, to rounding."""
    import jax
    import jax.numpy as jnp

    sigma = float(sigmas[len(sigmas) // 2])
    _, k_ltv = jax.random.split(key)
    keys = jax.random.split(k_ltv, p.n_mc)
    ps = np.asarray(jax.vmap(lambda k: jax.nn.sigmoid(mlp_apply(delta_method.perturb(k, cls_params, sigma),
                                                                jnp.array([1.57]))))(keys))
    total = ps.mean() * (1 - ps.mean())
    aleatoric, epistemic = np.mean(ps * (1 - ps)), np.var(ps)
    out.values.update(ltv_sigma=sigma, ltv_abs_err=float(abs(total - aleatoric - epistemic)),
                      ltv_epistemic_share=float(epistemic / total))


def run(p: Params) -> Result:
    """All five checks, in the chapter's order (which fixes every random draw).

    JAX runs in 64-bit mode for the duration (the checks compare identities to float64
    precision).
    """
    import jax

    out = Result()
    with jax.enable_x64(True):
        key = jax.random.PRNGKey(p.seed)
        rng = np.random.default_rng(p.seed)
        key, cls_params, sigmas = _delta_method(p, key, rng, out)
        _log_space(p, out)
        gap = _linear_regression(p, rng, out)
        key = _tangent_kernel(p, key, gap, out)
        _total_variance(p, key, cls_params, sigmas, out)
    return out


# ----------------------------------------------------------------------------- figures


def figure_delta_method(result: Result) -> Any:
    """Check (a): Var_MC[p] / (σ²‖∇p‖²) against σ, ±2 standard errors, one line per input."""
    from matplotlib.ticker import FuncFormatter

    fig, ax = display.subplots(panel_height=3.6)
    for name, res in result.data["delta_method"].items():
        ax.errorbar(res.sigmas, res.ratio, yerr=2 * res.ratio_se, marker="o", capsize=3, label=name)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set(xscale="log", yscale="log", xlabel="perturbation scale σ", ylabel="Var_MC[p] / (σ² ‖∇p‖²)",
           title="Delta method vs Monte Carlo")
    for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        axis(FuncFormatter(lambda v, _: f"{v:g}"))  # ratios as 0.6, 1, 2, not 6×10⁻¹
    ax.legend()
    return fig


def figure_logspace(result: Result) -> Any:
    """Check (b): log₁₀‖∇p‖² in log space and directly (float64, float32) against log₁₀ p."""
    d = result.data["logspace"]
    fig, ax = display.subplots(panel_height=3.6)
    ax.plot(d["log10_p"], d["log_space"], "o", ms=5, mfc="none", label="log space: 2 log₁₀p + log₁₀‖∇log p‖²")
    ok64, ok32 = np.isfinite(d["direct64"]), np.isfinite(d["direct32"])
    ax.plot(d["log10_p"][ok64], d["direct64"][ok64], ".", ms=3, label="direct ‖∇p‖², float64")
    ax.plot(d["log10_p"][ok32], d["direct32"][ok32], "x", ms=4, label="direct ‖∇p‖², float32")
    ax.set(xlabel="log₁₀ p", ylabel="log₁₀ ‖∇θ p‖²", title="Epistemic score in log space and directly")
    ax.legend()
    return fig


def figure_blr(result: Result) -> Any:
    """Check (c): the exact posterior predictive (left); exact variance against ‖g‖² (right)."""
    d = result.data["blr"]
    fig, axes = display.subplots(1, 2, panel_height=3.4)
    sd = 2 * np.sqrt(d["exact"])
    axes[0].fill_between(d["x_grid"], d["mean"] - sd, d["mean"] + sd, alpha=0.3, label="±2 sd (exact)")
    axes[0].plot(d["x_grid"], d["mean"], label="posterior mean")
    axes[0].plot(d["x"], d["y"], "k.", label="data")
    axes[0].set(xlabel="x", ylabel="f(x)", title="Bayesian linear regression")
    axes[0].legend()
    axes[1].plot(d["x_grid"], d["exact"] / d["exact"].max(), label="exact predictive variance gᵀΣg")
    axes[1].plot(d["x_grid"], d["iso"] / d["iso"].max(), "--", label="isotropic ‖g‖²")
    axes[1].plot(d["x"], np.zeros_like(d["x"]), "k|", ms=10, label="training inputs")
    axes[1].set(xlabel="x", ylabel="normalised variance", title="Exact vs isotropic", ylim=(-0.03, 1.62))
    axes[1].legend(loc="upper center")
    return fig


def figure_ntk(result: Result) -> Any:
    """Check (d): Θ(x, x) and the variance conditioned on the training inputs."""
    d = result.data["ntk"]
    top = d["diag"].max()
    fig, ax = display.subplots(panel_height=3.9)
    ax.plot(d["x_grid"], d["diag"] / top, label="isotropic: Θ(x,x) = ‖∇θ f‖²")
    ax.plot(d["x_grid"], d["conditioned"] / top, "--",
            label="conditioned on the data: Θ(x,x) − Θ(x,X)(Θ(X,X)+λI)⁻¹Θ(X,x)")
    ax.plot(d["x"], np.zeros_like(d["x"]), "k|", ms=10, label="training inputs")
    ax.set(xlabel="x", ylabel="variance / max Θ(x,x)", title="Tangent-kernel view of the isotropic score")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=1)
    return fig
