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
# # Why isotropy (2): Hessian spectra and the damped inverse
#
# ```{admonition} Learning goals
# :class: tip
#
# - Read a Hessian or {term}`GGN` spectrum: outliers, bulk, effective dimension, and where
#   the damping λ sits.
# - Estimate the spectrum of a matrix too large to form with {term}`stochastic Lanczos
#   quadrature`, and check it against an exact spectrum.
# - Predict from the spectrum when the damped Laplace form $g^\top(H+\lambda I)^{-1}g$
#   ranks queries like the isotropic $\lVert g\rVert^2$, and why their magnitudes differ.
# ```
#
# The {term}`Laplace approximation`'s predictive variance {cite}`mackay1992practical` of a query with gradient $g = \nabla_\theta p$ is
# $g^\top (H + \lambda I)^{-1} g$, with $H$ the curvature of the mean NLL at $\theta^*$ and
# $\lambda$ the damping (prior precision per training example). Write $H = \sum_i \lambda_i
# u_i u_i^\top$. Then
#
# $$
# g^\top (H + \lambda I)^{-1} g = \sum_i \frac{(u_i^\top g)^2}{\lambda_i + \lambda}
# \quad\text{and}\quad
# \lambda^{-1}\|g\|^2 = \sum_i \frac{(u_i^\top g)^2}{\lambda},
# $$
#
# so the two agree in every direction where $\lambda_i \ll \lambda$. If a spectrum is "a few
# outliers plus a bulk near zero", the damped inverse is $\lambda^{-1} I$ except on the few
# outlier directions, and the isotropic estimate $\|g\|^2$ is the Laplace estimate up to
# scale, plus an error confined to those directions. This chapter measures the spectra and
# then that error directly.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]

from gnuq_core.chapters import glue_figure, glue_values, spectra, start

params, store, prov = start(spectra, profile, overrides)  # one call: chapters.base.start

# %% [markdown]
# ## 1. Exact spectra of small MLPs
#
# ```{glue} store_words
# ```
#
# Tanh MLPs with two hidden layers of width $w$ are trained on the 2-D task of the previous
# chapter. For each, the Hessian of the mean NLL and its generalised Gauss-Newton part (GGN,
# equal to the Fisher here; positive semi-definite) are formed explicitly and diagonalised.
# Summaries at the natural damping λ = weight decay = {glue:text}`lam0:.0e`:
# *outliers* are eigenvalues ≥ 1% of the largest; *below damping* counts |λᵢ| < λ;
# the *effective dimension* is $\sum_i \lambda_i^+/(\lambda_i^+ + \lambda)$, the number of
# directions in which the data, not the prior, sets the posterior width.
# (The weight decay in training acts on the weights only, while the damping λ acts on every
# parameter, biases included: θ* is the MAP of a prior without bias terms, and the Laplace
# covariance is that of a prior with them. The two differ only in the bias directions, one per
# hidden unit plus the output bias; kept so that the chapters' numbers stay comparable.)

# %%
result = spectra.run(params, store, profile)  # the three parts, and claim C5
glue_values(result, params)  # and the preview profiles' values the exercises quote
result.show("spectra")
glue_figure("fig_exact_spectra", spectra.figure_exact_spectra(result, params))

# %% [markdown]
# ```{glue:figure} fig_exact_spectra
# :alt: Two panels of sorted eigenvalues on a log scale, Hessian and GGN, one curve per network width, with the damping as a dashed line.
# :name: fig-exact-spectra
#
# Sorted eigenvalues of the Hessian (left, absolute values; crosses mark eigenvalues below
# −λ) and of the GGN (right) of the mean NLL at θ*, for MLPs of increasing width. The
# dashed line is the damping λ.
# ```
#
# **What was found.** The spectra have the expected shape: a handful of large
# eigenvalues and a long tail falling many orders of magnitude below the damping. For the
# widest net (width {glue:text}`w_max`, {glue:text}`p_max` parameters) the GGN has
# {glue:text}`ggn_outliers` outliers, {glue:text}`ggn_below:.1f`% of its eigenvalues lie below λ, and
# its effective dimension is {glue:text}`ggn_deff:.1f` ({glue:text}`ggn_deff_frac:.1f`% of the parameters).
# The fraction below damping grows with width (the smallest net, {glue:text}`p_small`
# parameters: {glue:text}`ggn_below_small:.1f`%), while the number of outliers barely moves.
# The full Hessian adds small negative eigenvalues (θ* is only approximately a minimum, and
# the residual term is indefinite): {glue:text}`hess_neg:.1f`% lie below −λ; its bulk is as
# flat as the GGN's ({glue:text}`hess_below:.1f`% with |λᵢ| < λ).

# %% [markdown]
# ## 2. Spectral densities of larger models by stochastic Lanczos quadrature
#
# Beyond a few thousand parameters the Hessian cannot be formed. Stochastic Lanczos
# quadrature (SLQ) {cite}`ubaru2017fast` needs only Hessian-vector products: $m$ Lanczos steps from a random
# vector $v$ give a Gauss quadrature rule for $v^\top f(H) v$, and averaging over probes
# estimates the spectral density (`gnuq_core.isotropy.spectra.slq`; the same code runs on JAX and
# PyTorch HVPs). As a check, SLQ is first run on the exactly known GGN spectrum of the
# width-{glue:text}`w_max` net.

# %%
glue_figure("fig_slq_mlp", spectra.figure_slq_mlp(result, params))

# %% [markdown]
# ```{glue:figure} fig_slq_mlp
# :alt: Curves of the fraction of eigenvalues above a threshold against the threshold on a log scale: stochastic Lanczos estimates against exact eigenvalues.
# :name: fig-slq-mlp
#
# Spectral mass above a threshold: the fraction of eigenvalues whose |λ| is at least the
# value on the horizontal axis, on a log scale (eigenvalues smaller than 10⁻¹² in magnitude
# lie off the left edge; the curve ends at the largest eigenvalue). Left: SLQ (red steps, one per Ritz value) against the exact GGN eigenvalues of
# the width-{glue:text}`w_max` MLP (grey). Right: SLQ estimates for the Hessian and GGN of an MLP
# with {glue:text}`big_p` parameters. Dashed: the damping λ.
# ```
#
# {glue:text}`slq_check_words` where it matters here, from the outliers down to and
# around the damping: compare its steps with the exact curve there; the fraction of eigenvalues
# below λ is {glue:text}`check_below_slq:.1f`% by SLQ against {glue:text}`check_below_true:.1f`%
# exactly. Far below the damping it does not resolve the shape: with
# {glue:text}`slq_steps_val` Lanczos steps per probe it lumps the near-zero part of the spectrum
# into its smallest Ritz values, so only the *total* mass down there is right (where the red
# curve jumps to 1).
# For the {glue:text}`big_p`-parameter MLP, SLQ puts {glue:text}`big_below:.1f`% of the GGN's
# spectral mass below the damping (Hessian: {glue:text}`big_hess_below:.1f`%), with largest Ritz
# value {glue:text}`big_lmax:.2f` and effective dimension ≈ {glue:text}`big_deff:.0f`.
# (An outlier carries a mass of only about 1/P: invisible on a density plot, it shows on
# the log scale of the figure as one of the small steps at the right, at the level of its
# Ritz value's quadrature weight.)

# %% [markdown]
# ### A real language-model block
#
# The same code on PyTorch HVPs: the Hessian of the mean next-token NLL of the *last
# transformer block* of a pretrained LM, on {glue:text}`lm_tokens_val` tokens of local text
# (TruthfulQA questions), at the pretrained weights. Only that block's parameters vary; the
# input to the block is computed once.

# %%
glue_figure("fig_slq_lm", spectra.figure_slq_lm(result))

# %% [markdown]
# ```{glue:figure} fig_slq_lm
# :alt: Curves of the fraction of Hessian eigenvalues of a language model's last block above a threshold, and of negative eigenvalues beyond it.
# :name: fig-slq-lm
#
# Spectral mass of the Hessian of the next-token NLL with respect to the last transformer
# block of {glue:text}`lm_name`, estimated by SLQ: the fraction with |λ| at or above a
# threshold (purple) and the fraction of negative eigenvalues at or beyond minus that
# threshold (orange), against the threshold relative to the largest Ritz value (both axes
# logarithmic). Dotted: 10⁻³ and 10⁻² λ_max; the text's "below" fractions are 1 minus the
# purple curve there.
# ```
#
# For {glue:text}`lm_name` (last block, {glue:text}`lm_dim` parameters; NLL
# {glue:text}`lm_loss:.2f` nats/token on this text) the Ritz values span
# {glue:text}`lm_lmin:.3g` to {glue:text}`lm_lmax:.3g`. An estimated {glue:text}`lm_bulk3:.1f`% of the
# spectral mass has |λ| < 10⁻³ λ_max and {glue:text}`lm_bulk2:.1f`% has |λ| < 10⁻² λ_max:
# {glue:text}`lm_shape_words`. Negative curvature beyond 10⁻² λ_max carries
# {glue:text}`lm_neg:.1f`% of the mass: the pretrained weights are not a minimum of the NLL of
# *this* text, a reminder that "the Hessian at θ*" is only defined relative to some data.
# With {glue:text}`lm_probes_val` probes of {glue:text}`lm_steps_val` steps these are coarse
# estimates.

# %% [markdown]
# (claim-c5)=
# ## 3. From spectrum to estimator: how close is gᵀ(H+λI)⁻¹g to λ⁻¹‖g‖²?
#
# For every width and damping, the exact $g^\top (G + \lambda I)^{-1} g$ (GGN, from its
# eigendecomposition) is compared with $\lambda^{-1}\|g\|^2$ over the query grid, $g =
# \nabla_\theta p$. Two numbers: the median **relative error** of the isotropic value,
# $\lambda^{-1}\|g\|^2 / g^\top(G+\lambda I)^{-1}g - 1 \ge 0$ (a statement about magnitudes),
# and the **Spearman ρ** (a statement about rankings, which is what an uncertainty score
# is used for and what a free σ² cannot fix). For the {glue:text}`big_p`-parameter MLP the
# eigendecomposition is out of reach; its exact value comes from the Woodbury identity, and
# {glue:text}`slq_steps_val`-step Lanczos quadrature from $g$ is checked against it.

# %%
glue_figure("fig_damping", spectra.figure_damping(result, params))
result.show("rho")

# %% [markdown]
# ```{glue:figure} fig_damping
# :alt: Two panels against the damping: rank correlation between the damped Laplace and isotropic variances per width, and the median relative error of the isotropic value.
# :name: fig-damping
#
# Left: Spearman ρ between the damped Laplace quadratic form and the isotropic λ⁻¹‖g‖²
# over query points, against the damping, per width (star: the large MLP, exact by the
# Woodbury identity). Right: median relative error of the isotropic value. Dashed: λ = weight decay.
# ```
#
# **What was found.** At the natural damping (λ = weight decay), for the widest exact net
# the isotropic estimate ranks the queries like the damped Laplace form with
# ρ = {glue:text}`c5_rho:.3f` (95% bootstrap CI {glue:text}`c5_lo:.3f`–{glue:text}`c5_hi:.3f`): for the
# small exact nets isotropy is a good approximation of the *ranking*, and ρ rises towards 1
# as λ grows (at λ = {glue:text}`lam_big:.0e`: {glue:text}`rho_big_lam:.3f`), exactly as the spectrum
# predicts: more of the spectrum falls below λ. For the {glue:text}`big_p`-parameter MLP the
# exact value comes from the Woodbury identity (its GGN, built from {glue:text}`n_train_val`
# examples, has rank at most {glue:text}`n_train_val`; see `gnuq_core.isotropy.damped.damped_quadratic_form`),
# and the isotropic estimate ranks the {glue:text}`n_query_val` queries with
# ρ = {glue:text}`big_rho:.3f` (95% bootstrap CI {glue:text}`big_rho_lo:.3f`–{glue:text}`big_rho_hi:.3f`),
# {glue:text}`big_vs_small` ρ. The Lanczos quadrature from $g$ reproduces the exact values to a
# median relative error of {glue:text}`big_lanczos_err:.1e` (ranked against the isotropic values
# they give ρ = {glue:text}`big_rho_lanczos:.3f`): {glue:text}`lanczos_verdict`. Even though the data explain away a median {glue:text}`big_rank_share:.1f`%
# of $\lVert g\rVert^2$ at this damping ($1 - \lambda\, g^\top(G+\lambda I)^{-1}g / \lVert g\rVert^2$),
# what remains is nearly proportional to $\lVert g\rVert^2$ across queries, which is why the
# ranking survives while the magnitude does not.
#
# It is a poor approximation in two respects. *Magnitudes*: the median relative error is
# {glue:text}`c5_rel:.1f` (i.e. λ⁻¹‖g‖² overstates the variance by that factor plus one) at the
# natural damping, {glue:text}`big_rel:.1f` for the large MLP, and still {glue:text}`rel_big_lam:.2f`
# at λ = {glue:text}`lam_big:.0e`; the outlier directions, where the data constrains θ, are
# exactly those the isotropic form over-counts. So ‖g‖² is usable as a *score* (σ² is a free
# scale), not as a calibrated variance. *Small damping*: as λ → 0 (weak prior or much data)
# more eigenvalues exceed λ and the ranking degrades (at λ = {glue:text}`lam_small:.0e`:
# ρ = {glue:text}`rho_small_lam:.3f`).

# %% [markdown]
# **Verdict for C5: {glue:text}`c5_verdict`** (rule: the CI of ρ at the chosen damping lies above
# 0.9, measured on the widest exactly diagonalised MLP). The spectra are outliers plus a
# bulk below the damping, in small MLPs, a 10⁵-parameter MLP and a real LM block. For the
# small nets the damped inverse then ranks queries nearly as the identity does (not their
# magnitudes); for the large MLP the ranking agreement measured here is weaker (see above).
#
# ```{admonition} Key takeaways
# :class: important
#
# - Spectra of trained networks are a few outliers plus a bulk far below the damping: for
#   the widest exact net {glue:text}`ggn_below:.1f`% of the GGN's eigenvalues lie below λ and
#   its effective dimension is {glue:text}`ggn_deff:.1f` of {glue:text}`p_max` parameters; SLQ finds the
#   same shape in a {glue:text}`big_p`-parameter MLP and in a language-model block.
# - Below the damping, $(\lambda_i + \lambda)^{-1} \approx \lambda^{-1}$: the damped Laplace form
#   and $\lVert g\rVert^2$ differ only on the outlier directions.
# - Rankings survive (ρ = {glue:text}`c5_rho:.3f` at the natural damping for the widest exact
#   net), magnitudes do not (median relative error {glue:text}`c5_rel:.1f`): ‖g‖² is a score
#   with a free scale, not a calibrated variance.
# - Verdict for claim C5 in this build: {glue:text}`c5_verdict`.
# ```
#
# ## Exercises
#
# ```{exercise} Try it: more Lanczos steps
# :label: ex03-1
#
# SLQ's red curve in {numref}`fig-slq-mlp` has one step per Ritz value, and
# this build used {glue:text}`slq_steps_val` Lanczos steps per probe. Predict how the left
# panel changes with more steps, then run `gnuq chapter run 03 --profile smoke` (the `smoke`
# profile uses {glue:text}`smoke_slq_steps` steps; the chapter takes a few minutes on two
# cores) and `gnuq chapter run 03 --profile smoke --set slq_steps=N` with N three times that,
# and compare the SLQ and exact fractions below λ in the text.
# ```
#
# ````{solution} ex03-1
# :class: dropdown
#
# An $m$-step Lanczos run gives an $m$-node Gauss quadrature rule, exact for polynomials of
# degree up to $2m-1$; more steps mean more, finer steps in the curve, and the
# Ritz values converge first at the ends of the spectrum (the outliers). The fraction below
# λ moves towards the exact value, while the run time grows about linearly in the number of
# Hessian-vector products, $\text{probes} \times m$.
# ````
#
# ```{exercise} Where the isotropic form over-counts
# :label: ex03-2
#
# Using $g^\top (H + \lambda I)^{-1} g = \sum_i (u_i^\top g)^2/(\lambda_i + \lambda)$, show that
# $\lambda^{-1}\lVert g\rVert^2 \ge g^\top (H + \lambda I)^{-1} g$ for a positive semi-definite
# $H$, and say which directions contribute to the difference.
# ```
#
# ````{solution} ex03-2
# :class: dropdown
#
# $\lambda^{-1}\lVert g\rVert^2 - g^\top(H+\lambda I)^{-1}g = \sum_i (u_i^\top g)^2\,
# \frac{\lambda_i}{\lambda(\lambda_i+\lambda)} \ge 0$ since every $\lambda_i \ge 0$. A
# direction contributes only if $\lambda_i$ is not small next to $\lambda$: the outliers,
# where the data constrain the parameters. That is why the relative error is positive and
# large, while the ranking survives when $g$'s share on the outliers varies little across queries.
# ````
#
# ```{exercise} Effective dimension
# :label: ex03-3
#
# The effective dimension $\sum_i \lambda_i/(\lambda_i + \lambda)$ counts the directions in
# which the data, not the prior, set the posterior width. What happens to it as
# $\lambda \to 0$ and as $\lambda \to \infty$, and how does that match the left panel of
# {numref}`fig-damping`?
# ```
#
# ````{solution} ex03-3
# :class: dropdown
#
# As $\lambda \to \infty$ every term goes to 0: no direction is data-dominated, the damped
# inverse is $\lambda^{-1}I$ and ρ → 1. As $\lambda \to 0$ every positive eigenvalue
# contributes 1, so the effective dimension grows to the rank of $H$; more directions differ
# from isotropic and ρ falls, as the figure shows at the smallest damping.
# ````

# %% tags=["remove-input"]
prov.show()
