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
# # Scaling: does ‖∇θ p‖² agree better with the posterior as the network grows?
#
# ```{admonition} Learning goals
# :class: tip
# - Measure how the rank agreement of the isotropic estimate with a {term}`NUTS` reference changes
#   with the number of parameters, and read a slope per decade with its interval.
# - Use the tangent-kernel view to explain when the isotropic and the {term}`GGN`-Laplace variances
#   should agree.
# - See that "isotropic" depends on the parameterisation (plain versus fan-in prior).
# ```
#
# The paper reports that the rank correlation between the isotropic estimate and the MCMC reference
# improves with model size. This chapter measures ρ for networks of increasing width and depth,
# under two prior parameterisations and on both query sets, and then looks for the reason in the
# **tangent-kernel view**.
#
# For a network $f(x;\theta)$ the (empirical) neural tangent kernel {cite}`jacot2018neural` at $\theta^*$ is
# $\Theta(x, x') = \nabla_\theta f(x)^\top \nabla_\theta f(x')$, so the isotropic estimate in logit
# space is its diagonal, $\lVert g(x)\rVert^2 = \Theta(x,x)$. A linearised (GGN) Laplace posterior
# with prior covariance $\Sigma_0$ has predictive variance
#
# $$
# \operatorname{Var}[f(x)] \approx g^\top\Sigma_0 g - g^\top\Sigma_0 J_X^\top
#   \left(J_X \Sigma_0 J_X^\top + \Lambda^{-1}\right)^{-1} J_X \Sigma_0 g ,
# $$
#
# with $J_X$ the gradients at the training points: a prior term minus what the data explain. Only the
# part of $g$ that lies in the span of the training-point gradients can be "explained away". If, as
# the network grows, a smaller share of $\lVert g \rVert^2$ lies in that span, the subtracted term
# matters less and the posterior variance tends to its isotropic prior term — which is
# $\lVert g\rVert^2$ up to scale when $\Sigma_0 \propto I$. We measure that share directly.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]

from gnuq_core.chapters import glue_figure, glue_values, scaling, start

params, store, prov = start(scaling, profile, overrides)  # one call: chapters.base.start

# %% [markdown]
# ## Running the grid of models
#
# Every combination of problem, prior, depth, width and seed (at depth 2 and more only the widths in
# `deep_widths`, since NUTS on deep wide nets takes hours) gets its own data set (per seed), MAP
# and NUTS reference {cite}`hoffman2014nuts` (cached on disk; settings shared with the previous chapter are read back).
# Only the isotropic estimate and the tangent-kernel quantities are computed: the exact Hessian is
# out of reach for the larger networks, but the GGN-Laplace variance is cheap in its
# function-space (Woodbury) form above.

# %%
result = scaling.run(params, store, profile)  # the grid of models, trends, tangent-kernel view, claim C2
glue_values(result, params)  # and the preview profiles' values the exercises quote

# %% [markdown]
# We ran {glue:text}`n_models` models with {glue:text}`p_min` to {glue:text}`p_max` parameters. The
# sampler's health for each (divergences, tree-depth saturation, worst R-hat of the predictions,
# split agreement of the reference) is in the table below; the correlations are only as good as
# the reference they are measured against.
#
# ```{glue} store_words
# ```

# %%
result.show("health")

# %% [markdown]
# In total {glue:text}`sc_divergences` divergent transitions; the lowest split agreement was
# {glue:text}`sc_min_split:.3f`. Sampling the references took {glue:text}`sc_nuts_hours:.2f` hours
# of wall time in all (the NUTS-minutes column: summed over seeds, as recorded when each was sampled, on
# whatever machine and load that was; a rebuild reads them back from the cache or the results store).
#
# ### Settings where ρ is undefined
#
# A rank correlation needs an estimate that varies between query points. If the MAP sits at the
# critical point θ* = 0 of a network with two or more hidden layers (every layer's gradient is
# multiplied by the next layer's zero weights), the model predicts the same p everywhere and
# ‖∇θ p‖² is the same at every query: ρ is undefined. Such settings are listed here and left out of
# everything below; their NUTS references are kept.

# %%
result.show(optional=["undefined"])  # only when some setting's ρ is undefined

# %% [markdown]
# In this run {glue:text}`n_undefined` settings have an undefined ρ (listed above with the largest
# |θ*| of their MAP and the number of distinct values the estimate takes); the analysis below uses
# the other {glue:text}`n_defined`. One more rule, stated before looking at any ρ: a (setting, seed,
# query set) whose reference agrees with itself (split agreement) less than
# {glue:text}`split_rule` — the smallest ρ that C1 asks of the estimate — is left out, since
# such a reference cannot rank the queries. It leaves out {glue:text}`n_unreliable` in this run. No
# setting is left out because of its ρ.
#
# ## ρ against the number of parameters

# %%
glue_figure("fig_scaling", scaling.figure_scaling(result, params))

# %% [markdown]
# ```{glue:figure} fig_scaling
# :alt: Panels of rank correlation with MCMC against the number of parameters, one per problem and query set, with seed ranges as bars.
# :name: fig-scaling
#
# Spearman ρ between the paper's estimate (‖∇p‖² in classification, ‖∇f‖² in regression) and the
# MCMC reference, against the number of parameters, one panel per problem and query set; mean over
# seeds with the range across seeds as bars (colour: prior; marker: depth). Dotted: the logit-space
# ρ(‖∇f‖², Var[f]) per seed. Dashed: the pooled least-squares trend in log10(#parameters), its slope
# in the panel's title.
# ```

# %%
result.show("trends")

# %% [markdown]
# The table gives the slope of ρ per decade of parameters, pooled and per problem, prior and query
# set, for the paper's quantity (ρ, paper's estimate), in logit space and for the prior-weighted
# gradient norm (the isotropic estimate in whitened coordinates). The interval is a hierarchical
# bootstrap: the series (one curve over sizes: problem × prior × depth × query set; the "series"
# column counts them) are drawn with replacement, every size of a drawn series is kept, the seeds at
# each size are drawn with replacement and each ρ is replaced by one of its own bootstrap replicates
# over query points; the slope is refitted. A slope carried by one series or one seed therefore gets
# a wide interval (with one or two seeds the seed level is coarse). The verdict column applies the
# ledger's rule for C2, its evidence gate included, to each row.
#
# ### The setting that goes the other way
#
# The lowest ρ of any classification setting in this run (means over seeds) is in
# {glue:text}`worst_label`: ρ of the paper's estimate is {glue:text}`worst_rho:.3f`, while the
# prior-weighted norm reaches {glue:text}`worst_rho_prior:.3f` on the same queries against the same
# reference. The reference there: split agreement {glue:text}`worst_split:.3f` (lowest over its
# seeds), worst R-hat of the predictions {glue:text}`worst_rhat:.3f`,
# {glue:text}`worst_divergences` divergent transitions; the estimate takes
# {glue:text}`worst_distinct` distinct values on {glue:text}`worst_n_queries` queries.
# {glue:text}`worst_sampler_reading`
#
# In probability space ‖∇p‖² = (p(1−p))²·‖∇f‖², a sum in logs. Over these queries log10 ‖∇f‖² has
# standard deviation {glue:text}`worst_sd_iso:.3f` and log10 (p(1−p))² {glue:text}`worst_sd_sigmoid:.3f`,
# and their Spearman correlation is {glue:text}`worst_rho_iso_sigmoid:.3f`; the output layer's
# gradient (the hidden activations and 1, one entry per unit) carries {glue:text}`worst_out_share:.3f`
# of ‖∇f‖². {glue:text}`worst_factor_reading` The reference's logit variance varies less (standard
# deviation of log10 Var[f]: {glue:text}`worst_sd_var_f:.3f`), and in logit space ρ is
# {glue:text}`worst_rho_logit:.3f`. Why width matters under the fan-in prior: the output weights have
# prior standard deviation 1/√width, so the MAP's logits shrink as the network widens (the sigmoid
# factor's spread falls), while the output layer takes a growing share of ‖∇f‖², and the hidden
# units saturate far from the decision boundary, where ‖∇f‖² is then large. The table follows the
# series of the lowest ρ over widths. {glue:text}`worst_trend_reading` By the rules above nothing
# is left out for it: a ρ is never dropped for its value.

# %%
result.show("worst_series")

# %% [markdown]
# ## Why: the tangent-kernel view

# %%
glue_figure("fig_ntk", scaling.figure_ntk(result, params))

# %% [markdown]
# ```{glue:figure} fig_ntk
# :alt: Panels against the number of parameters: the numerical rank of the training-point Jacobian and how the tangent-kernel view of the estimate agrees with MCMC.
# :name: fig-ntk
#
# The tangent-kernel view, logit space, mean over seeds (solid: grid queries; dashed: in-distribution;
# the legend panel names the lines). Top left: numerical rank of the training-point Jacobian $J_X$ at
# the MAP (singular values above 10⁻⁶ of the largest); dotted, the rank it could have (two moons'
# training set). The share of ‖g(x)‖² outside the span of the training gradients is in the table
# below (column "outside span", floored at 10⁻¹²). Top right: how well the isotropic ‖∇f‖² ranks like
# the GGN-Laplace variance computed at the same θ*. Bottom left: how much better the GGN-Laplace
# estimate agrees with MCMC than the isotropic one.
# ```
#
# For the smallest network the share of ‖g‖² *outside* the span of the training gradients has median
# {glue:text}`span_small:.2e` (with fewer parameters than training points the span is the whole
# parameter space and the share is 0 up to rounding, shown as 10⁻¹²); for the largest network it is
# {glue:text}`span_large:.2e`. The numerical rank of the training Jacobian $J_X$ at the MAP
# (singular values above 10⁻⁶ of the largest) is {glue:text}`rank_small` for the smallest and
# {glue:text}`rank_large` for the largest network (median over settings). With two-dimensional
# inputs the gradient features $g(x)$ vary smoothly with $x$, and at the MAP many hidden units are
# redundant, so even with more parameters than training points the training gradients can span
# almost all of the directions that a query's gradient takes: then the "explained-away" term does
# not vanish with width, and the isotropic and GGN-Laplace rankings need not converge. The isotropic estimate's rank agreement with the GGN-Laplace variance at the
# same θ* goes from {glue:text}`iso_ggn_small:.3f` (smallest) to {glue:text}`iso_ggn_large:.3f`
# (largest network).
#
# **The parameterisation matters.** With the fan-in prior, the prior covariance Σ₀ is not a multiple
# of I in these coordinates, so "isotropic" is a choice of coordinates: the prior-weighted
# $\sum_i \sigma_{0,i}^2 g_i^2$ is exactly the isotropic ‖g‖² in the "NTK parameterisation"
# θ = σ₀ ⊙ u (isotropic in u). The prior-weighted rows of the trend table and the table below (means over seeds) compare
# the two. In the widest depth-1 network (grid queries, median over points, mean over seeds and
# problems) the output layer's weights and bias, whose gradient is the last hidden activation and 1,
# carry {glue:text}`out_share_fan_in:.2f` of ‖g‖² under the fan-in prior and
# {glue:text}`out_share_plain:.2f` under the plain prior; the rank correlation of ‖g‖² with the
# distance of the query from the origin is {glue:text}`dist_fan_in:.2f` and {glue:text}`dist_plain:.2f`.

# %%
result.show("by_size")

# %% [markdown]
# (trend-table-1)=
# ## The size trend on the paper's eight problems
#
# The paper's conclusion speaks of "an improving trend at larger model sizes" across its settings,
# without the sizes. The two problems above are ours; the claim is judged on the eight problems of
# the paper's Table 1 (chapter {doc}`04 <04_mcmc_validation>`), each run with chapter 04's Table 1
# setup (depth, activation, prior, data, NUTS, {glue:text}`trend_seeds` seeds) at widths
# {glue:text}`trend_widths`, so that one width is Table 1 itself. The measure is Table 1's GN cell:
# Spearman ρ between ‖∇θ p_c‖² (regression ‖∇θ f‖²) and the HMC variance, on each query set.
# The NUTS references are a campaign outside the book (`python -m gnuq_core.chapters.mcmc fill
# --set width=W` for each width); this build found {glue:text}`trend_stored` of its
# {glue:text}`trend_wanted` (problem, width, seed) settings stored and uses those.

# %%
glue_figure("fig_trend", scaling.figure_trend(result, params))

# %% [markdown]
# ```{glue:figure} fig_trend
# :alt: Spearman rho of the gradient norm against the number of parameters, one panel per Table 1 problem
# :name: fig-trend
#
# GN's ρ with the HMC variance against the number of parameters, one panel per problem of the
# paper's Table 1: mean over seeds (bars: the seeds' range) on the wide grid (solid) and on
# in-distribution points (dashed).
# ```

# %%
result.show(optional=["trend"])

# %% [markdown]
# (claim-c2)=
# ## Claim C2
#
# The ledger's measure for C2 is the slope of ρ against log10(#parameters). It is recorded on the
# eight problems above: the slope of GN's ρ on the grid, pooled over the problems (each kept), with
# an interval that resamples each problem's seeds (a seed keeps its curve over widths, since its
# data set is shared) and then query points: **{glue:text}`c2_table1:.3f`** per decade (95% CI
# {glue:text}`c2_table1_lo:.3f` to {glue:text}`c2_table1_hi:.3f`), **{glue:text}`c2_table1_verdict`**
# ({glue:text}`c2_table1_reason`). Per problem, {glue:text}`trend_up` rise and {glue:text}`trend_down`
# fall by the same rule on the grid. Under the other readings (in-distribution points: slope
# {glue:text}`trend_in:.3f`, {glue:text}`trend_in_lo:.3f` to {glue:text}`trend_in_hi:.3f`; this
# chapter's own grid below) the verdict is {glue:text}`c2_robust`.
#
# **On this chapter's own grid** (two moons and the gap regression, priors and depths), the pooled
# slope over all problems, priors, depths and query sets is {glue:text}`c2:.3f` per decade (95% CI
# {glue:text}`c2_lo:.3f` to {glue:text}`c2_hi:.3f`, over {glue:text}`c2_n_series` series):
# **{glue:text}`c2_verdict`** by the same rule. Resampling only seeds and query points, with every
# series in every replicate, would give {glue:text}`c2_seeds_lo:.3f` to {glue:text}`c2_seeds_hi:.3f`:
# far narrower, because it ignores that the slope differs from series to series. Per subset
# (problem × prior × query set, in probability and logit space), the rule says "reproduced" in
# {glue:text}`c2_subsets_reproduced` rows of the trend table above. A positive pooled trend that the
# subsets do not share would be carried by a few settings; read the table.

# %% [markdown]
# ```{admonition} What to take away
# :class: important
# - The paper's claim is a trend: on its eight problems the slope of GN's ρ per decade of
#   parameters is {glue:text}`c2_table1:.3f` ({glue:text}`c2_table1_lo:.3f` to
#   {glue:text}`c2_table1_hi:.3f`), **{glue:text}`c2_table1_verdict`**; on this chapter's own grid
#   {glue:text}`c2:.3f` ({glue:text}`c2_lo:.3f` to {glue:text}`c2_hi:.3f`), **{glue:text}`c2_verdict`**.
#   A pooled slope can hide problems that go the other way: read the per-problem rows.
# - The lowest ρ ({glue:text}`worst_rho:.3f`, {glue:text}`worst_label`):
#   {glue:text}`worst_sampler_reading` {glue:text}`worst_factor_reading` No setting is left out for its ρ.
# - The tangent-kernel view predicts agreement only if a growing share of ‖g‖² falls outside the span
#   of the training gradients. Measured, that share {glue:text}`span_words`; the rank agreement of
#   ‖∇f‖² with the GGN-Laplace variance goes from {glue:text}`iso_ggn_small:.3f` (smallest network) to
#   {glue:text}`iso_ggn_large:.3f` (largest).
# - "Isotropic" is a statement about coordinates: under the fan-in prior the prior-weighted norm is the
#   isotropic estimate of the NTK parameterisation, so the two can rank points differently (under the
#   plain prior they coincide).
# ```
#
# ## Exercises
#
# ```{exercise} The prior term is the kernel's diagonal
# :label: ex05-1
#
# Show that with $\Sigma_0 = \sigma_0^2 I$ the prior term $g^\top\Sigma_0 g$ of the linearised
# posterior variance is $\sigma_0^2\,\Theta(x, x)$, the diagonal of the tangent kernel. When is the
# subtracted ("explained-away") term zero?
# ```
#
# ````{solution} ex05-1
# :class: dropdown
#
# $g^\top \sigma_0^2 I g = \sigma_0^2 \lVert g\rVert^2 = \sigma_0^2\, \nabla_\theta f(x)^\top
# \nabla_\theta f(x) = \sigma_0^2\,\Theta(x,x)$. The subtracted term is
# $\sigma_0^4\, g^\top J_X^\top (\cdot)^{-1} J_X g$; it vanishes when $J_X g = 0$, i.e. when $g$ is
# orthogonal to every training-point gradient. Only then is the posterior variance exactly the
# isotropic prior term; the "outside span" column measures how close the networks come to that.
# ````
#
# ```{exercise} Why a slope per decade?
# :label: ex05-2
#
# The trend is fitted against $\log_{10}$(#parameters), not the number of parameters. What would a
# linear fit in the raw count be dominated by, and what does a slope of +0.1 per decade mean for a
# network 100 times larger?
# ```
#
# ````{solution} ex05-2
# :class: dropdown
#
# The sizes grow geometrically (each width a multiple of the last), so in the raw count the largest network sits far
# to the right and alone fixes the slope. On a log axis the sizes are evenly spaced and each weighs
# the same. A slope of +0.1 per decade means ρ rises by about 0.2 from one network to one 100 times
# larger, if the trend is linear in the log, which the per-setting points above let you check.
# ````
#
# ```{exercise} Try it: a wider network
# :label: ex05-3
#
# The smoke profile runs the widths {glue:text}`smoke_widths`. Add one twice its largest and
# rebuild: `gnuq chapter run 05 --profile smoke --set "widths=[…]"` with the longer list. The
# new width adds one NUTS run per seed and prior, and wider networks sample more slowly. Predict first: will the share of ‖g‖² outside the training span grow,
# and will the pooled slope's verdict change?
# ```
#
# ````{solution} ex05-3
# :class: dropdown
#
# Once a width has more parameters than the smoke profile has training points
# ({glue:text}`smoke_n_train_cls` for two moons), the training span no longer covers the whole
# parameter space and the outside-span share can leave 10⁻¹². Whether it
# grows enough to matter is what the tangent-kernel figure shows; the slope's verdict rests on few
# sizes and one seed in the smoke profile, so its interval is wide and a change of verdict between
# such runs is expected, not evidence.
# ````

# %% tags=["remove-input"]
prov.show()
