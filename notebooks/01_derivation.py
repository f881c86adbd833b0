# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Derivation: from a Taylor expansion to ‖∇θ p‖²
#
# ```{admonition} Learning goals
# :class: tip
#
# - Derive the epistemic score $\lVert\nabla_\theta p\rVert^2$ from the {term}`delta method`
#   and an {term}`isotropic covariance`, and the aleatoric score $p(1-p)$ from the law of
#   total variance.
# - See numerically where the first-order expansion is exact and where it breaks down.
# - Explain why the score is computed in log space.
# - Recognise what isotropy throws away: where the training data were.
# ```
#
# This chapter derives the estimator step by step and checks every step numerically on
# models small enough that the exact answer is known. Nothing here is specific to
# language models: the same three lines of algebra apply to any differentiable model
# with a probability output.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner
seed = 0  # every random draw in this chapter derives from it
n_mc = 4000  # Monte Carlo samples of θ per perturbation scale σ
n_sigmas = 8  # number of perturbation scales σ in the delta-method check
width = 32  # hidden width of the small MLPs
n_train = 40  # training points of the toy problems
train_steps = 3000  # full-batch Adam steps to reach θ*

# %% tags=["remove-cell"]
import warnings

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.ticker import FuncFormatter
from myst_nb import glue
from scipy.stats import spearmanr

from gnuq_core.isotropy import delta_method
from gnuq_core.isotropy import linear_gaussian
from gnuq_core.isotropy import tangent_kernel
from gnuq_core.estimators import jax_grad_sq_norm, torch_uncertainty
from gnuq_core.isotropy.mlp import init_mlp, mlp_apply, num_params
from gnuq_core.repro import display
from gnuq_core.repro.provenance import Provenance
from gnuq_core.isotropy.train import fit_adam

warnings.filterwarnings("ignore", message=".*os.fork.*")  # JAX + papermill kernel; harmless here
jax.config.update("jax_enable_x64", True)  # this chapter checks identities to float64 precision
display.use_book_style()
prov = Provenance.start()
key = jax.random.PRNGKey(seed)
rng = np.random.default_rng(seed)

# %% [markdown]
# ## 1. The delta method
#
# Let $p(\theta) = p(y \mid x, \theta)$ be the probability a model with parameters
# $\theta \in \mathbb{R}^P$ gives to an outcome $y$. Training produced a point estimate
# $\theta^*$; suppose our uncertainty about the parameters is a distribution with mean
# $\theta^*$ and covariance $\Sigma = \operatorname{Cov}[\theta]$. Expand $p$ to first order
# around $\theta^*$:
#
# $$
# p(\theta) \approx p(\theta^*) + g^\top (\theta - \theta^*), \qquad g = \nabla_\theta p(\theta^*).
# $$
#
# The right-hand side is linear in $\theta$, so its variance is
#
# $$
# \operatorname{Var}_\theta[p] \approx g^\top \Sigma\, g .
# $$
#
# This is the **delta method** {cite}`casella2002statistical`. It needs the gradient (one backward pass) and $\Sigma$,
# which for a network with $10^8$ parameters can neither be estimated nor stored.
#
# ## 2. The isotropic collapse
#
# Assume $\Sigma = \sigma^2 I$. Then
#
# $$
# \operatorname{Var}_\theta[p] \approx \sigma^2\, g^\top g = \sigma^2 \lVert \nabla_\theta p \rVert^2 .
# $$
#
# For *ranking* inputs by uncertainty the unknown $\sigma^2$ does not matter: the
# **epistemic score is $\lVert \nabla_\theta p(y\mid x,\theta^*) \rVert^2$**. Chapters 2 and 3
# ask when isotropy is a reasonable assumption; here we take it as given.
#
# ## 3. The aleatoric term and the law of total variance
#
# The outcome itself ({term}`aleatoric uncertainty`) is a Bernoulli variable: "is $y$ the answer?" has success
# probability $p$. Averaging over parameters, the law of total variance splits the
# variance of that indicator into two parts:
#
# $$
# \operatorname{Var}[\mathbb{1}_y] =
# \underbrace{\mathbb{E}_\theta\big[p(1-p)\big]}_{\text{aleatoric}} +
# \underbrace{\operatorname{Var}_\theta[p]}_{\text{epistemic}} .
# $$
#
# At the point estimate the aleatoric part is $p(1-p)$ and the epistemic part is
# $\sigma^2 \lVert\nabla_\theta p\rVert^2$: both come from one forward and one backward
# pass. The paper's combined score adds the two.
#
# ## 4. Log space
#
# For a language-model answer, $p$ is a product of token probabilities and can be
# astronomically small ($10^{-40}$ is common); $\nabla p$ then underflows. Because
# $\nabla p = p \nabla \log p$,
#
# $$
# \lVert\nabla_\theta p\rVert^2 = p^2 \lVert\nabla_\theta \log p\rVert^2, \qquad
# \log_{10}\lVert\nabla_\theta p\rVert^2 = 2\log_{10} p + \log_{10}\lVert\nabla_\theta \log p\rVert^2,
# $$
#
# and `gnuq_core.estimators` computes the right-hand side, which never underflows.
#
# The rest of the chapter checks each step.

# %% [markdown]
# ## Check (a): the delta method becomes exact as σ → 0
#
# A small tanh network classifies points on a line (label: the sign of $\sin 2x$,
# with 10% of labels flipped). After training, we perturb its parameters,
# $\theta = \theta^* + \sigma\varepsilon$ with $\varepsilon \sim \mathcal N(0, I)$, and
# compare the Monte Carlo variance of $p$ with $\sigma^2\lVert g\rVert^2$.

# %%
def make_classification(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-3, 3, size=(n, 1))
    y = (np.sin(2 * x[:, 0]) > 0).astype(float)
    flip = rng.random(n) < 0.1
    return x, np.where(flip, 1 - y, y)


x_cls, y_cls = make_classification(n_train, rng)
key, k_init = jax.random.split(key)
cls_params0 = init_mlp(k_init, [1, width, width, 1])


def cls_loss(params):
    logits = jax.vmap(lambda x: mlp_apply(params, x))(jnp.asarray(x_cls))
    nll = jnp.mean(jnp.logaddexp(0.0, logits) - jnp.asarray(y_cls) * logits)
    return nll + 1e-4 * sum(jnp.sum(w**2) for w, _ in params)


cls_fit = fit_adam(cls_loss, cls_params0, steps=train_steps, lr=1e-2)
cls_params = cls_fit.params
glue("cls_n_params", num_params(cls_params), display=False)
glue("cls_grad_norm", cls_fit.grad_norm, display=False)

# %%
query_points = {"inside the data (x = 0.4)": 0.4, "decision boundary (x = 1.57)": 1.57, "far outside (x = 6)": 6.0}
sigmas = np.logspace(-4, -1, n_sigmas)
checks = {}
for name, x0 in query_points.items():
    def p_at(params, x0=x0):
        return jax.nn.sigmoid(mlp_apply(params, jnp.array([x0])))

    key, k_mc = jax.random.split(key)
    checks[name] = delta_method.mc_variance_ratio(p_at, cls_params, sigmas, n_mc, k_mc)

fig, ax = display.subplots(panel_height=3.6)
for name, res in checks.items():
    ax.errorbar(res.sigmas, res.ratio, yerr=2 * res.ratio_se, marker="o", capsize=3, label=name)
ax.axhline(1.0, color="k", lw=0.8, ls="--")
ax.set(xscale="log", yscale="log", xlabel="perturbation scale σ",
       ylabel="Var_MC[p] / (σ² ‖∇p‖²)", title="Delta method vs Monte Carlo")
for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
    axis(FuncFormatter(lambda v, _: f"{v:g}"))  # ratios as 0.6, 1, 2, not 6×10⁻¹
ax.legend()
glue("fig_delta_method", fig, display=False)
plt.close(fig)

ratio_small_sigma = np.array([res.ratio[0] for res in checks.values()])
glue("sigma_min", float(sigmas[0]), display=False)
glue("sigma_max", float(sigmas[-1]), display=False)
glue("ratio_small_sigma_maxdev", float(np.max(np.abs(ratio_small_sigma - 1))), display=False)
glue("ratio_small_sigma_se", float(max(res.ratio_se[0] for res in checks.values())), display=False)
glue("ratio_large_sigma_min", float(min(res.ratio[-1] for res in checks.values())), display=False)
glue("ratio_large_sigma_max", float(max(res.ratio[-1] for res in checks.values())), display=False)
glue("n_mc", n_mc, display=False)

# %% [markdown]
# ```{glue:figure} fig_delta_method
# :name: fig-01-delta-method
#
# Ratio of the Monte Carlo variance of $p$ ({glue:text}`n_mc` samples per σ, error bars
# ±2 standard errors) to the delta-method prediction $\sigma^2\lVert\nabla_\theta p\rVert^2$,
# for three inputs of a trained MLP with {glue:text}`cls_n_params` parameters.
# ```
#
# At $\sigma =$ {glue:text}`sigma_min:.0e` the ratio is within
# {glue:text}`ratio_small_sigma_maxdev:.3f` of 1 for all three inputs (the Monte Carlo
# standard error is about {glue:text}`ratio_small_sigma_se:.3f`). At
# $\sigma =$ {glue:text}`sigma_max:.2f` the ratios range from
# {glue:text}`ratio_large_sigma_min:.2f` to {glue:text}`ratio_large_sigma_max:.3g`: the
# curvature of $p$ in $\theta$ matters once the perturbation is large, and the
# first-order expansion is a small-uncertainty approximation. It breaks down soonest
# where the sigmoid is saturated ($p$ close to 0 or 1, as far outside the data): there
# the gradient, and with it the first-order term, is tiny, and the second-order term
# takes over at a smaller σ. (The fit ended with
# $\lVert\nabla\text{loss}\rVert =$ {glue:text}`cls_grad_norm:.1e`.)

# %% [markdown]
# ## Check (b): ‖∇p‖² = p²‖∇ log p‖², and why log space matters
#
# The library's PyTorch estimator backpropagates $\log p$ once and assembles
# $\log_{10}\lVert\nabla p\rVert^2$ in log space. We compare it, in float64, with the
# direct $\lVert\nabla p\rVert^2$ from backpropagating $p$ itself, over inputs whose
# $p$ ranges over hundreds of orders of magnitude (the network's output is scaled up so
# that some inputs are extremely confident).

# %%
torch.manual_seed(seed)
net = torch.nn.Sequential(torch.nn.Linear(2, width), torch.nn.Tanh(), torch.nn.Linear(width, 1)).double()
with torch.no_grad():  # make the network extremely confident on some inputs: logits up to several hundred
    net[2].weight.mul_(torch.logspace(0, 3, width, dtype=torch.float64))
inputs = torch.randn(200, 2, dtype=torch.float64) * torch.logspace(-1, 1, 200, dtype=torch.float64)[:, None]


def log_p_fn(model, x):
    return torch.nn.functional.logsigmoid(-model(x[None])[0, 0])  # log p(y = 0 | x)


log_space, direct64, direct32, log_p = [], [], [], []
for x in inputs:
    u = torch_uncertainty(net, lambda m, x=x: log_p_fn(m, x))
    log_space.append(u.log10_epistemic)
    log_p.append(u.log_p)
    for dtype, out in ((torch.float64, direct64), (torch.float32, direct32)):
        model = net.to(dtype)
        p = log_p_fn(model, x.to(dtype)).exp()
        grads = torch.autograd.grad(p, list(model.parameters()))
        sq = sum(float((g.double() ** 2).sum()) for g in grads)
        out.append(np.log10(sq) if sq > 0 else -np.inf)
    net.double()

log_space, direct64, direct32 = map(np.asarray, (log_space, direct64, direct32))
log10_p = np.asarray(log_p) / np.log(10)
ok64 = np.isfinite(direct64)
rel_err = np.abs(10 ** (log_space[ok64] - direct64[ok64]) - 1)
glue("logspace_max_rel_err", float(rel_err.max()), display=False)
glue("logspace_n", int(ok64.sum()), display=False)
glue("direct32_underflow", int((~np.isfinite(direct32)).sum()), display=False)
glue("logspace_finite", int(np.isfinite(log_space).sum()), display=False)
glue("log10_p_min", float(log10_p.min()), display=False)

fig, ax = display.subplots(panel_height=3.6)
ax.plot(log10_p, log_space, "o", ms=5, mfc="none", label="log space: 2 log₁₀p + log₁₀‖∇log p‖²")
ax.plot(log10_p[ok64], direct64[ok64], ".", ms=3, label="direct ‖∇p‖², float64")
fin32 = np.isfinite(direct32)
ax.plot(log10_p[fin32], direct32[fin32], "x", ms=4, label="direct ‖∇p‖², float32")
ax.set(xlabel="log₁₀ p", ylabel="log₁₀ ‖∇θ p‖²", title="Epistemic score in log space and directly")
ax.legend()
glue("fig_logspace", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_logspace
# :name: fig-01-logspace
#
# $\log_{10}\lVert\nabla_\theta p\rVert^2$ computed in log space (circles) and directly (dots:
# float64, crosses: float32) for 200 inputs of a small network. Direct float32 values
# are missing where they underflowed to zero.
# ```
#
# Where the direct float64 computation is finite ({glue:text}`logspace_n` inputs), the
# two agree to a relative error of at most {glue:text}`logspace_max_rel_err:.1e`. The
# direct float32 computation underflowed to exactly zero for
# {glue:text}`direct32_underflow` of the 200 inputs (the smallest $p$ here has
# $\log_{10} p$ = {glue:text}`log10_p_min:.0f`), while the log-space value is finite for
# {glue:text}`logspace_finite` of 200.

# %% [markdown]
# ## Check (c): Bayesian linear regression, where the delta method is exact
#
# For a model linear in its parameters, $f(x) = \phi(x)^\top w$, the first-order
# expansion has no remainder, and with a Gaussian prior and noise the posterior
# covariance $\Sigma$ is known in closed form. So $g^\top\Sigma g$ with $g = \nabla_w f$
# (computed here by automatic differentiation) must equal the closed-form predictive
# variance, which we compute by a different route (the kernel form, which never forms
# $\Sigma$). The data have a gap between $x = -1$ and $x = 1$.

# %%
def gap_inputs(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.concatenate([rng.uniform(-3, -1, n // 2), rng.uniform(1, 3, n - n // 2)])


centres = np.linspace(-4, 4, 25)


def rbf_features(x):
    """Gaussian bumps of width 0.5 at 25 centres (works on NumPy and traced JAX arrays)."""
    return jnp.exp(-0.5 * (jnp.asarray(x)[:, None] - centres[None, :]) ** 2 / 0.5**2)


alpha, beta = 1.0, 100.0
x_reg = gap_inputs(n_train, rng)
y_reg = np.sin(2 * x_reg) + rng.normal(0, beta**-0.5, n_train)
phi_train = np.asarray(rbf_features(x_reg))
post = linear_gaussian.posterior(phi_train, y_reg, alpha, beta)
x_grid = np.linspace(-5, 5, 201)
f_blr = lambda w, x: jnp.dot(rbf_features(x[None])[0], w)  # noqa: E731  f(x) = φ(x)ᵀw
grads = np.asarray(jax.vmap(jax.grad(f_blr), in_axes=(None, 0))(jnp.asarray(post.mean), jnp.asarray(x_grid)))
delta_var = linear_gaussian.weight_space_variance(grads, post.cov)
exact_var = linear_gaussian.function_space_variance(np.asarray(rbf_features(x_grid)), phi_train, alpha, beta)
iso = np.sum(grads**2, axis=1)
glue("blr_max_rel_err", float(np.max(np.abs(delta_var / exact_var - 1))), display=False)
rho_iso_blr = spearmanr(iso, exact_var).statistic
glue("blr_rho_iso", float(rho_iso_blr), display=False)
in_gap = np.abs(x_grid) < 1
glue("blr_rho_iso_gap", float(spearmanr(iso[in_gap], exact_var[in_gap]).statistic), display=False)
# What the figure shows, in numbers: the variances in the gap and beyond the outermost features,
# each relative to its median at the training inputs.
near_train = np.min(np.abs(x_grid[:, None] - x_reg[None, :]), axis=1) < 0.1
beyond = np.abs(x_grid) > 4.5
gap_ratio = float(np.median(exact_var[in_gap]) / np.median(exact_var[near_train]))
glue("blr_gap_ratio", gap_ratio, display=False)
glue("blr_gap_direction", "larger" if gap_ratio > 1 else "smaller", display=False)
glue("blr_iso_gap_ratio", float(np.median(iso[in_gap]) / np.median(iso[near_train])), display=False)
glue("blr_beyond_ratio", float(np.median(exact_var[beyond]) / np.median(exact_var[near_train])), display=False)
glue("blr_iso_beyond_ratio", float(np.median(iso[beyond]) / np.median(iso[near_train])), display=False)
beyond_ratio = float(np.median(exact_var[beyond]) / np.median(exact_var[near_train]))
glue("blr_beyond_vs_gap", "lower than in the gap" if beyond_ratio < gap_ratio else "higher than in the gap",
     display=False)
glue("blr_beyond_vs_data", "still above" if beyond_ratio > 1 else "below", display=False)

fig, axes = display.subplots(1, 2, panel_height=3.4)
mean = np.asarray(rbf_features(x_grid)) @ post.mean
axes[0].fill_between(x_grid, mean - 2 * np.sqrt(exact_var), mean + 2 * np.sqrt(exact_var), alpha=0.3,
                     label="±2 sd (exact)")
axes[0].plot(x_grid, mean, label="posterior mean")
axes[0].plot(x_reg, y_reg, "k.", label="data")
axes[0].set(xlabel="x", ylabel="f(x)", title="Bayesian linear regression")
axes[0].legend()
axes[1].plot(x_grid, exact_var / exact_var.max(), label="exact predictive variance gᵀΣg")
axes[1].plot(x_grid, iso / iso.max(), "--", label="isotropic ‖g‖²")
axes[1].plot(x_reg, np.zeros_like(x_reg), "k|", ms=10, label="training inputs")
axes[1].set(xlabel="x", ylabel="normalised variance", title="Exact vs isotropic", ylim=(-0.03, 1.62))
axes[1].legend(loc="upper center")
glue("fig_blr", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_blr
# :name: fig-01-blr
#
# Left: the exact posterior predictive of Bayesian linear regression with a gap in the
# data. Right: the exact predictive variance against the isotropic score $\lVert g\rVert^2$,
# each divided by its maximum (the exact variance's maximum lies in the gap, so at the
# training inputs it is close to 0 on this scale).
# ```
#
# The delta-method variance $g^\top\Sigma g$ and the closed form agree to a maximum
# relative error of {glue:text}`blr_max_rel_err:.1e`. The isotropic score, however, is a
# poor ranking here: Spearman $\rho$ = {glue:text}`blr_rho_iso:.2f` over the grid
# ({glue:text}`blr_rho_iso_gap:.2f` inside the gap). Here $g = \phi(x)$, and with RBF features
# $\lVert\phi(x)\rVert^2$ is nearly constant wherever features exist: its median in the gap is
# {glue:text}`blr_iso_gap_ratio:.2f` times its median at the training inputs. The exact variance
# knows where the data were: in the gap it is {glue:text}`blr_gap_ratio:.3g` times
# ({glue:text}`blr_gap_direction`) its value at the training inputs. Farther out
# ($|x| > 4.5$, past the outermost feature centre at 4) the features fade, and the two
# scores part ways: $\lVert g\rVert^2$ falls to {glue:text}`blr_iso_beyond_ratio:.2g` of its
# value at the data, while the exact variance is {glue:text}`blr_beyond_ratio:.3g` times its
# value at the data ({glue:text}`blr_beyond_vs_gap`, as the fading features carry less prior
# variance, but {glue:text}`blr_beyond_vs_data` the data). That is why the figure's right
# panel shows the exact variance peaking where there are no data but features still reach
# (in the gap and around $|x| = 4$) and dropping at the edges, and why the isotropic ranking
# is poor. Isotropy discards exactly the information that $\Sigma$ carries
# about *where the data were*. That is the subject of the next check.

# %% [markdown]
# ## Check (d): the isotropic score is the diagonal of the tangent kernel
#
# Under $\Sigma = \sigma^2 I$, the delta-method covariance between the outputs at two
# inputs is $\sigma^2\,\nabla_\theta f(x)^\top\nabla_\theta f(x') = \sigma^2\,\Theta(x, x')$,
# the **neural tangent kernel** {cite}`jacot2018neural` at $\theta^*$. The isotropic score is its diagonal,
# $\lVert\nabla_\theta f(x)\rVert^2 = \Theta(x,x)$. We train an MLP on the gap data and
# compute both.
#
# What this implies: $\Theta(x,x)$ depends on the training data *only through*
# $\theta^*$. A Bayesian treatment of the linearised network would instead condition on
# the data explicitly, subtracting what the training-point gradients explain:
# $\Theta(x,x) - \Theta(x,X)\,(\Theta(X,X) + \lambda I)^{-1}\,\Theta(X,x)$.

# %%
key, k_init = jax.random.split(key)
reg_params0 = init_mlp(k_init, [1, width, width, 1])
xr, yr = jnp.asarray(x_reg)[:, None], jnp.asarray(y_reg)


def reg_loss(params):
    pred = jax.vmap(lambda x: mlp_apply(params, x))(xr)
    return jnp.mean((pred - yr) ** 2) + 1e-4 * sum(jnp.sum(w**2) for w, _ in params)


reg_params = fit_adam(reg_loss, reg_params0, steps=train_steps, lr=1e-2).params
f_reg = lambda params, x: mlp_apply(params, x)  # noqa: E731
xq = jnp.asarray(x_grid)[:, None]
theta_diag = np.diag(tangent_kernel.tangent_kernel(f_reg, reg_params, xq))
grad_sq = np.asarray(jax_grad_sq_norm(f_reg, reg_params, xq))
glue("ntk_diag_max_rel_err", float(np.max(np.abs(theta_diag / grad_sq - 1))), display=False)

theta_qx = tangent_kernel.tangent_kernel(f_reg, reg_params, xq, xr)
theta_xx = tangent_kernel.tangent_kernel(f_reg, reg_params, xr)
noise_ratio = 1e-2 * np.trace(theta_xx) / len(theta_xx)  # λ: 1% of the mean diagonal
conditioned = tangent_kernel.linearised_posterior_variance(theta_diag, theta_qx, theta_xx, noise_ratio)
explained = 1 - conditioned / theta_diag
at_data = np.min(np.abs(x_grid[:, None] - x_reg[None, :]), axis=1) < 0.1
glue("ntk_explained_at_data", float(np.median(explained[at_data])), display=False)
glue("ntk_explained_gap", float(np.median(explained[in_gap])), display=False)
glue("ntk_rho_iso_vs_conditioned", float(spearmanr(theta_diag, conditioned).statistic), display=False)

fig, ax = display.subplots(panel_height=3.9)
ax.plot(x_grid, theta_diag / theta_diag.max(), label="isotropic: Θ(x,x) = ‖∇θ f‖²")
ax.plot(x_grid, conditioned / theta_diag.max(), "--", label="conditioned on the data: Θ(x,x) − Θ(x,X)(Θ(X,X)+λI)⁻¹Θ(X,x)")
ax.plot(x_reg, np.zeros_like(x_reg), "k|", ms=10, label="training inputs")
ax.set(xlabel="x", ylabel="variance / max Θ(x,x)", title="Tangent-kernel view of the isotropic score")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=1)
glue("fig_ntk", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_ntk
# :name: fig-01-ntk
#
# The isotropic score of a trained MLP (solid) is the diagonal of its tangent kernel.
# Conditioning the linearised network on the training inputs (dashed) removes the part
# of the variance that the training gradients explain.
# ```
#
# The tangent-kernel diagonal and the per-input $\lVert\nabla_\theta f\rVert^2$ agree to
# {glue:text}`ntk_diag_max_rel_err:.1e` (they are the same quantity computed two ways).
# Conditioning on the data removes a median {glue:text}`ntk_explained_at_data:.0%` of
# the variance near training inputs and {glue:text}`ntk_explained_gap:.0%` inside the
# gap; the two curves rank the grid with Spearman $\rho$ =
# {glue:text}`ntk_rho_iso_vs_conditioned:.2f`.
#
# **What this means for the method.** The isotropic score can only know about the
# training data through what training did to $\theta^*$: where the network's output is
# sensitive to its parameters. Whether that sensitivity tracks the true posterior
# variance is an empirical question, which chapters 4 and 5 test against MCMC, and
# which, by the tangent-kernel argument, should depend on how much training changes
# the gradients (it changes them less as networks get wider).

# %% [markdown]
# ## Check (e): the law of total variance
#
# Under the perturbation $\theta \sim \mathcal N(\theta^*, \sigma^2 I)$ of check (a), the
# indicator of the label has variance $\bar p(1-\bar p)$ with $\bar p = \mathbb E_\theta[p]$.
# The decomposition $\bar p(1-\bar p) = \mathbb E[p(1-p)] + \operatorname{Var}[p]$ holds
# exactly for any distribution of $p$, so on the same samples it must hold to rounding.

# %%
sigma_check = float(sigmas[len(sigmas) // 2])
key, k_ltv = jax.random.split(key)
keys = jax.random.split(k_ltv, n_mc)
ps = np.asarray(jax.vmap(lambda k: jax.nn.sigmoid(mlp_apply(delta_method.perturb(k, cls_params, sigma_check),
                                                            jnp.array([1.57]))))(keys))
total = ps.mean() * (1 - ps.mean())
aleatoric_part, epistemic_part = np.mean(ps * (1 - ps)), np.var(ps)
glue("ltv_sigma", sigma_check, display=False)
glue("ltv_abs_err", float(abs(total - aleatoric_part - epistemic_part)), display=False)
glue("ltv_epistemic_share", float(epistemic_part / total), display=False)

# %% [markdown]
# At $\sigma =$ {glue:text}`ltv_sigma:.3f` and $x = 1.57$ the two sides differ by
# {glue:text}`ltv_abs_err:.1e`; the epistemic part is
# {glue:text}`ltv_epistemic_share:.2%` of the total variance there.
#
# ## Summary
#
# ```{admonition} Key takeaways
# :class: important
#
# - The delta method is exact in the limit of small parameter uncertainty (at
#   σ = {glue:text}`sigma_min:.0e` the Monte Carlo ratio is within
#   {glue:text}`ratio_small_sigma_maxdev:.3f` of 1) and exact for models linear in their
#   parameters (relative error {glue:text}`blr_max_rel_err:.1e`); its error at large σ is curvature.
# - Isotropy turns $g^\top\Sigma g$ into $\lVert g\rVert^2$, the tangent-kernel diagonal:
#   cheap, but blind to where the data were except through $\theta^*$. In Bayesian linear
#   regression with local features this ranking was poor (Spearman ρ =
#   {glue:text}`blr_rho_iso:.2f` with the exact variance).
# - Computing in log space keeps the score finite for answers whose probability
#   underflows: {glue:text}`logspace_finite` of 200 finite, against
#   {glue:text}`direct32_underflow` float32 underflows computed directly.
# - The law of total variance splits the answer's variance into aleatoric and epistemic
#   parts exactly (difference {glue:text}`ltv_abs_err:.1e` on the samples).
# ```
#
# ## Exercises
#
# ```{exercise} Try it: fewer Monte Carlo samples
# :label: ex01-1
#
# {numref}`fig-01-delta-method`'s error bars come from `n_mc` =
# {glue:text}`n_mc` samples per σ. Predict how the standard error of the ratio at the
# smallest σ changes if `n_mc` is divided by 4, then run the chapter in the `smoke` profile
# (400 samples; the whole chapter runs in about a minute on two cores) with
# `python -m gnuq_core.repro.chapters run 01 --profile smoke --set n_mc=100`
# and compare the provenance table's parameters and the text's standard error.
# ```
#
# ````{solution} ex01-1
# :class: dropdown
#
# A Monte Carlo variance estimate has a standard error proportional to $1/\sqrt{n}$, so
# a quarter of the samples doubles it. The ratio at the smallest σ stays close to 1 (the
# delta method is still exact there), but its deviation from 1 becomes about twice as
# large, and the figure's error bars about twice as long.
# ````
#
# ```{exercise} The law of total variance
# :label: ex01-2
#
# Let $p$ be a random probability (it depends on the random $\theta$) and
# $Y \mid p \sim \mathrm{Bernoulli}(p)$. Show that
# $\operatorname{Var}[Y] = \mathbb E[p(1-p)] + \operatorname{Var}[p]$, and that it equals
# $\bar p(1-\bar p)$ with $\bar p = \mathbb E[p]$.
# ```
#
# ````{solution} ex01-2
# :class: dropdown
#
# $\operatorname{Var}[Y] = \mathbb E[\operatorname{Var}[Y\mid p]] + \operatorname{Var}[\mathbb E[Y\mid p]]
# = \mathbb E[p(1-p)] + \operatorname{Var}[p]$. Since $Y \in \{0, 1\}$, $Y^2 = Y$ and
# $\operatorname{Var}[Y] = \mathbb E[Y] - \mathbb E[Y]^2 = \bar p(1-\bar p)$. Check (e)
# verifies this on samples: the identity holds for *any* distribution of $p$, which is
# why the two sides agree to rounding error, not to Monte Carlo error.
# ````
#
# ```{exercise} Why the isotropic score misses the gap
# :label: ex01-3
#
# In check (c) the model is $f(x) = \phi(x)^\top w$. What is $g = \nabla_w f(x)$, and why
# can $\lVert g\rVert^2$ not depend on the training data at all? Which term of the exact
# variance $\phi(x)^\top(\alpha I + \beta\Phi^\top\Phi)^{-1}\phi(x)$ carries the data?
# ```
#
# ````{solution} ex01-3
# :class: dropdown
#
# $g = \phi(x)$ for every $w$, so $\lVert g\rVert^2 = \lVert\phi(x)\rVert^2$ is fixed by the
# features alone: a linear model's gradient does not change in training. The data enter the
# exact variance only through $\beta\Phi^\top\Phi$, which shrinks the variance along feature
# directions the training inputs excite; in the gap nothing shrinks it, so it stays near the
# prior value $\lVert\phi(x)\rVert^2/\alpha$. For a neural network $g$ depends on
# $\theta^*$, and so indirectly on the data (check (d)).
# ````

# %% tags=["remove-input"]
prov.show()
