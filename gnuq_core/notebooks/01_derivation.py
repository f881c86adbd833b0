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
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]
from gnuq_core.chapters import derivation, glue_figure, glue_values, start

params, store, prov = start(derivation, profile, overrides, store=False)  # one call: chapters.base.start

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
# ## Running the checks
#
# `gnuq_core.chapters.derivation.run` performs the five checks below in order, from one
# seed, and returns every number this page quotes; each section then shows its figure.
# The parameters of this build (Monte Carlo samples, σ grid, network width, training
# steps) are in the table at the end of the page.

# %%
result = derivation.run(params)
glue_values(result, params)  # and the preview profiles' values the exercises quote

# %% [markdown]
# ## Check (a): the delta method becomes exact as σ → 0
#
# A small tanh network classifies points on a line (label: the sign of $\sin 2x$,
# with 10% of labels flipped). After training, we perturb its parameters,
# $\theta = \theta^* + \sigma\varepsilon$ with $\varepsilon \sim \mathcal N(0, I)$, and
# compare the Monte Carlo variance of $p$ with $\sigma^2\lVert g\rVert^2$.

# %%
glue_figure("fig_delta_method", derivation.figure_delta_method(result))

# %% [markdown]
# ```{glue:figure} fig_delta_method
# :alt: Line plot: Monte Carlo variance divided by the delta-method prediction against the perturbation scale sigma, for three inputs, approaching 1 as sigma shrinks.
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
glue_figure("fig_logspace", derivation.figure_logspace(result))

# %% [markdown]
# ```{glue:figure} fig_logspace
# :alt: Scatter plot of log10 squared gradient norms for 200 inputs: the log-space values against the direct float64 and float32 computations.
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
glue_figure("fig_blr", derivation.figure_blr(result))

# %% [markdown]
# ```{glue:figure} fig_blr
# :alt: Two panels: the exact predictive band of Bayesian linear regression over a gap in the data, and the exact predictive variance against the isotropic score along the input.
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
glue_figure("fig_ntk", derivation.figure_ntk(result))

# %% [markdown]
# ```{glue:figure} fig_ntk
# :alt: Line plots of the isotropic score and its version conditioned on the training inputs.
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
# smallest σ changes if `n_mc` is divided by 4. Then run the chapter in the `smoke` profile,
# which draws {glue:text}`smoke_n_mc` samples per σ (the whole chapter runs in about a minute
# on two cores): `gnuq chapter run 01 --profile smoke`, and once more with a quarter of them,
# `gnuq chapter run 01 --profile smoke --set n_mc=N` with N = {glue:text}`smoke_n_mc` / 4.
# Compare the provenance tables' parameters and the text's standard errors.
# ```
#
# ````{solution} ex01-1
# :class: dropdown
#
# A Monte Carlo variance estimate has a standard error proportional to $1/\sqrt{n}$, so
# a quarter of the samples doubles it: on this page the ratio's standard error at the
# smallest σ is {glue:text}`ratio_small_sigma_se:.3f` with {glue:text}`n_mc` samples, so
# expect about {glue:text}`ratio_small_sigma_se_quarter:.3f` with a quarter of them. The
# ratio there stays close to 1 (the delta method is still exact), but its deviation from 1
# (here {glue:text}`ratio_small_sigma_maxdev:.3f`) becomes about twice as large, and the
# figure's error bars about twice as long.
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
