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
# # Cross-checks with other libraries
#
# Every number in this book is computed by the project's own code, and its tests mostly
# check that code against itself (a dense `eigh`, exactness on a linear-Gaussian model). A
# reader who wants to trust a reproduction asks something else: does an *independent*,
# well-kept implementation give the same numbers on the same problems? This appendix runs
# such implementations in every build and shows, per comparison, one agreement table:
#
# - **quantity**: what is compared; **entries**: how many values;
# - **ours** and **theirs**: the two values at the entry where they differ most;
# - **max rel. error**: the largest |ours − theirs| / |theirs| (some rows measure it against a
#   stated scale instead, said in the quantity's name);
# - **tolerance**: what would count as *disagreement*: an error above it. Each tolerance is
#   set by the arithmetic involved (float64 linear algebra, float32 networks, stored values
#   rounded to 7 digits, Monte-Carlo noise) and stated with its reason below each table;
# - **agrees**: whether the error is within the tolerance.
#
# The same comparisons run as tests on tiny models (`tests/crosscheck/`), each with a
# perturbed input that must be reported as a disagreement, so a regression fails CI.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]

from gnuq_core.chapters import cross_checks, glue_values, start

params, store, prov = start(cross_checks, profile, overrides, store=False)  # one call: chapters.base.start

# %% [markdown]
# (xcheck-laplace)=
# ## Laplace and GGN variances vs laplace-torch
#
# The Laplace baselines of chapters 04 and 05 are computed in JAX on a flat parameter vector
# (`gnuq_core.bayes.laplace`), the parametrisation NUTS samples. Here the same MAP network is
# copied into a float64 PyTorch MLP and given to laplace-torch 0.3 {cite}`daxberger2021laplace`
# (`Laplace(model, "classification" | "regression", subset_of_weights="all",
# hessian_structure="full")`), with the same per-parameter prior precision (plain and
# fan-in priors) and the same training set. For classification the copy outputs the logits
# $[0, f]$: a two-class softmax whose class-1 probability is $\sigma(f)$ and whose
# cross-entropy GGN is $p(1-p)\nabla f\nabla f^\top$, the project's Bernoulli GGN.
# laplace-torch's GLM functional variance is $g^\top\Sigma g$ with $\Sigma$ the inverse of
# (curvature + prior precision), with its GGN backend and its exact-Hessian backend (both
# from curvlinops). ‖∇θ p‖² is compared with plain `torch.autograd`, and the GLM predictive
# Var[σ(f)] of chapter 04 (computed by quadrature) with the sample variance of σ(f) over draws
# of f from laplace-torch's Gaussian.

# %%
result = cross_checks.run(params)  # every comparison of the chapter, in the page's order
glue_values(result)
result.show("laplace")

# %% [markdown]
# Over {glue:text}`xc_laplace_cases` cases (two moons and gap regression, both priors) the
# largest relative error of the exact rows is {glue:text}`xc_laplace_err:.1e`, against a
# tolerance of {glue:text}`xc_laplace_tol:.0e`: both sides are float64 and solve the same
# linear system, so anything above it would be a real difference (a wrong prior, GGN or
# parameter copy). The GLM predictive row is a Monte-Carlo comparison
# ({glue:text}`xc_laplace_glm_samples:,` draws): its error is counted in Monte-Carlo standard
# errors of the sample variance, largest {glue:text}`xc_laplace_glm_z:.1f` (tolerance
# {glue:text}`xc_laplace_mc_tol:.0f`; σ(f) is heavy-tailed far from the data, so a relative
# tolerance would be arbitrary). Verdict: {glue:text}`xc_laplace_agree`.
#
# Why the chapters keep their own JAX path rather than calling laplace-torch: NUTS samples the
# same flat-θ network, so the MAP, the Laplace covariances and the MCMC reference live in one
# parametrisation; and laplace-torch would not make the book faster. Most of chapters 04 and
# 05's time goes into fitting the MAP by L-BFGS from several restarts (which laplace-torch does
# not do) and into compiling each network's functions once, not into the curvature itself; the
# paper edition reads the MAP fits and the estimates from the results store
# (`results/local_estimates`) and recomputes one of them from scratch as its check.
#
# ```{note}
# laplace-torch 0.3's curvlinops backends form the full curvature as `linop @ torch.eye(n)`
# in torch's *default* dtype. Under the usual float32 default, a float64 model's GGN comes out
# rounded to about 3·10⁻⁸ relative (measured here before the fix), so the cross-check fits
# with the default dtype set to float64. Its `predictive_samples` cannot be used for the
# $[0, f]$ logits either: it Cholesky-factors the singular 2×2 logit covariance.
# ```
#
# ```{admonition} Caveat: chapter 03's prior and damping differ in the biases
# :class: warning
#
# The classifier of chapters 02 and 03 (`gnuq_core.isotropy.classifier`) is trained with a
# weight decay on its **weights only**, while every Laplace covariance built on its θ*
# ($(G + \alpha I)^{-1}$, the damping λ) damps **all** parameters, biases included. θ* is
# therefore the MAP of a prior without bias terms and the covariance that of a prior with
# them; they differ in the bias directions only (one per hidden unit plus the output bias).
# The numbers of those chapters are kept as they are, so that they stay comparable; the
# Laplace comparisons above (chapters 04 and 05) use one prior for both.
# ```

# %% [markdown]
# (xcheck-spectra)=
# ## Spectra: Lanczos, SLQ and Hessian-vector products
#
# Chapter 03 reads curvature spectra through the project's own Lanczos (full
# re-orthogonalisation) and stochastic Lanczos quadrature (SLQ). Here the Hessian of a
# chapter-03 classifier (two hidden layers of width `spectra_width`) is small enough to be
# formed and diagonalised exactly, so the project's Lanczos is compared with SciPy's ARPACK
# `eigsh` and with dense `eigvalsh`, the project's JAX Hessian-vector product with the
# explicit Hessian, and the project's SLQ estimates of the trace and of the effective
# dimension $\sum_i \lambda_i^+/(\lambda_i^+ + \delta)$ with their exact values. The
# double-backward HVP of an LM block (`gnuq_core.isotropy.lm_hessian`) is compared with
# `torch.autograd.functional.hvp`.

# %%
result.show("spectra")

# %% [markdown]
# Eigenvalue rows: a converged Lanczos run on a float64 matrix gives its extreme eigenvalues
# to rounding, so the tolerance is 10⁻⁸ (λ_min, near zero, is measured against ‖H‖).
# The classifier's HVP is a float32 computation (the chapter's network is float32), as is the
# LM block's: their tolerance is 10⁻⁴ of the largest entry.

# %%
result.show("slq")

# %% [markdown]
# SLQ is a Monte-Carlo estimate from a few random probes, so its error is counted in standard
# errors over the probes (tolerance {glue:text}`xc_spectra_slq_tol:.0f`); the project's SLQ
# (Rademacher probes, as in chapter 03) is within {glue:text}`xc_spectra_slq_err:.1f` of them.
# The eigenvalues agree to {glue:text}`xc_spectra_eig_err:.1e`, the HVPs to
# {glue:text}`xc_spectra_hvp_err:.1e`. Verdict: {glue:text}`xc_spectra_agree`.
#
# **Why the project keeps its own SLQ.** curvlinops 3.0 (installed with laplace-torch) ships Papyan's
# `fast_lanczos`, which does not re-orthogonalise: in floating point its Lanczos vectors lose
# orthogonality and converged eigenvalues reappear as "ghost" copies, shifting quadrature
# weight. Run from the *same* start vectors (so that only re-orthogonalisation differs), the
# trace estimates coincide (they depend on the first Lanczos coefficient only), while the
# effective dimension is {glue:text}`xc_spectra_deff_ours:.1f` with re-orthogonalisation and
# {glue:text}`xc_spectra_deff_curvlinops:.1f` without (exact: {glue:text}`xc_spectra_deff_exact:.1f`).
# Most of the remaining distance to the exact value in these two runs is the variance of
# Gaussian start vectors, which the project's Rademacher probes reduce. The project's
# Lanczos is also matrix-free on any NumPy, JAX or PyTorch product, which the large network of
# chapter 03 and the LM block need.

# %% [markdown]
# (xcheck-gradnorm)=
# ## Gradient norms of a causal LM vs plain autograd
#
# The engine's forward–backward pass (`gnuq_core.lm.gradient.forward_backward`) never forms
# most gradients: ghost norms for the linear layers, a hand-written $d\log p/d\text{logits}$,
# Gram-matrix forms for the tied embedding/output matrix. The reference is the obvious code:
# `model(input_ids).logits` (the model's own forward, Gemma's logit soft-capping included),
# log-softmax, the sum of the answer tokens' log-probabilities, `backward()`, and
# $\sum_\theta \lVert\texttt{p.grad}\rVert^2$ over every parameter. The answers are the
# greedy answers of stored QA records (prompts re-encoded from their questions), so the
# campaign's stored ‖∇θ log p‖² is checked too; a model without records uses a few fixed
# question/answer pairs.

# %%
result.show("gradnorm")

# %% [markdown]
# On {glue:text}`xc_grad_answers` answers of {glue:text}`xc_grad_models`, the engine and plain
# autograd agree to {glue:text}`xc_grad_err:.1e` (largest relative error over log p and
# ‖∇θ log p‖²). The models run in float32, and the two paths sum the same products in
# different orders (Gram matrices vs explicit gradients), and a float32 log-softmax over a
# vocabulary of 49k (SmolLM2) or 262k (Gemma-3) tokens rounds at about 3·10⁻⁵ per token, so the
# tolerance is 10⁻⁴ for both. The stored records (7 significant digits, another
# process) agree with autograd to {glue:text}`xc_grad_stored_err:.1e` (a dash: no stored
# record was used). Verdict: {glue:text}`xc_grad_agree`.

# %% [markdown]
# (xcheck-baselines)=
# ## QA baselines, AUROC and PRR from the stored records
#
# The baselines of chapter 06 are functions of stored records (`gnuq_core.qa.scores`); here
# they are recomputed from the records' raw fields by the published formulas in separate
# code (`gnuq_core.crosscheck.baselines`): maximum sequence probability
# {cite}`fadeeva2023lmpolygraph`, mean token entropy and predictive entropy with its
# length-normalised form {cite}`malinin2021uncertainty`, and semantic entropy as in the
# reference code of {cite}`farquhar2024detecting` (length-normalised sample likelihoods,
# class probabilities normalised over the samples). AUROC is recomputed as the Mann–Whitney
# statistic over all pairs and the prediction-rejection ratio (PRR) by a direct formula for
# the expected rejection curve with ties broken at random.
#
# LM-Polygraph's own metric code judges the same scores in the next section. Two
# differences from its code: its PRR orders tied scores by `np.argsort` (the project breaks
# ties at random in expectation), and its default `SemanticEntropy` is the estimator of
# Kuhn et al. (2023) with unnormalised class probabilities, not Farquhar et al.'s (2024).

# %%
result.show("baselines", optional=["baseline_notes", "metrics"])  # notes: runs compared without labels

# %% [markdown]
# Over {glue:text}`xc_base_records` stored records in {glue:text}`xc_base_runs` runs, the
# entropy baselines agree to {glue:text}`xc_base_err:.1e` (tolerance 2·10⁻⁵, relative or,
# below 1 nat, absolute: the stored values carry 7 significant digits). The maximum sequence
# probability differs by up to {glue:text}`xc_base_msp_err:.1e` (tolerance 2·10⁻⁴): the
# registry takes log p from the gradient pass (a full float32 forward), the published
# definition sums the greedy decoding pass's token log-probabilities (float32 with a KV
# cache), two float32 computations of the same number. AUROC and PRR agree to
# {glue:text}`xc_metric_err:.1e` (tolerance 10⁻⁹), tied scores included.
# Verdict: {glue:text}`xc_base_agree`.

# %% [markdown]
# (xcheck-polygraph)=
# ## gnuq inside LM-Polygraph
#
# LM-Polygraph {cite}`fadeeva2023lmpolygraph` compares uncertainty estimators for LLMs
# through stat calculators (the expensive passes) and estimators (cheap functions of them).
# `gnuq_core.integrations.polygraph` adds a calculator that runs gnuq's forward-backward
# pass on LM-Polygraph's `WhiteboxModel` and estimators for epistemic, aleatoric, combined
# and $\lVert\nabla_\theta\log p\rVert^2$, usable from `polygraph_eval`'s YAML or
# `UEManager` (the module's docstring has the configuration; the `polygraph` extra installs
# LM-Polygraph with `--no-deps`, and `pyproject.toml` says why). Here LM-Polygraph's own
# metric code ranks the stored answers' scores, per run: ROC-AUC for flagging a wrong
# answer, and the prediction-rejection area normalised between a random and an oracle order
# as its `UEManager` computes it (`gnuq_core.crosscheck.polygraph`).

# %%
result.show("polygraph")

# %% [markdown]
# Best by LM-Polygraph's normalised PRR, per run: {glue:md}`xc_pg_top`. Over
# {glue:text}`xc_pg_runs` runs its ROC-AUC equals the project's AUROC to
# {glue:text}`xc_pg_auroc_err:.1e` (tolerance 10⁻⁹, every score), and its normalised PRR the
# project's to {glue:text}`xc_pg_prr_err:.3f` ({glue:text}`xc_pg_prr_n` score × run pairs;
# tolerance 0.03, because LM-Polygraph estimates the random order's area from 1,000
# shuffles). The PRRs of scores with more than 1% tied answers are shown but not compared:
# LM-Polygraph orders tied answers by position, the project averages over their orders.
# Verdict: {glue:text}`xc_pg_agree`.

# %% [markdown]
# ## Summary

# %% [markdown]
# {glue:text}`xc_rows` comparisons ran in this build, {glue:text}`xc_disagree` of them outside
# their tolerance; they took {glue:text}`xc_seconds:.0f` s.

# %% tags=["remove-input"]
prov.show()
