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
# # Efficiency: what one forward-backward pass costs, and what a QA record costs
#
# ```{admonition} Learning goals
# :class: tip
# - Measure the cost of the gradient pass against its floor, one no-grad forward over the
#   same tokens, and say why an ordinary backward costs about two forwards more.
# - Compare the estimator's cost with the sampling baselines ({term}`semantic entropy`,
#   predictive entropy) and {term}`P(True)`, paired within a round (claim C8).
# - Read how cost grows with prompt length, answer length and model size, and where the
#   time goes.
# - Turn records per hour into the wall time of the full QA study.
# ```
#
# The paper's selling point is cost: its estimator needs one forward and one backward
# pass of the unmodified model, where the sampling baselines need $N$ generated answers
# (and semantic entropy a clustering of them). The paper reports it **46–107× faster**
# than the baselines (claim C8) {cite}`grunefeld2026isotropic`, which sample answers for
# semantic entropy {cite}`kuhn2023semantic,farquhar2024detecting` or ask the model about
# its own answer, P(True) {cite}`kadavath2022language`. This chapter measures that ratio on the machine that
# builds the book, how close the gradient pass comes to its floor (one forward over the
# same tokens), and how many complete QA records per hour the whole pipeline produces,
# which decides how long the full QA study takes.
#
# Every timed call is a function of the engine itself (`gnuq_core.lm`, `gnuq_core.qa`);
# the benchmark (`gnuq_core.bench`) only chooses the questions, interleaves the calls and
# summarises. Per question it times, side by side and in a fresh random order each repeat
# (so that drift in machine load hits every pass alike):
#
# - greedy **generation** of the answer (`lm.decoding.generate`; every method needs it);
# - one no-grad **forward** over prompt + answer with the LM head at the answer positions
#   (`lm.gradient.answer_log_probs`): the unit of the floor;
# - the **gradient** pass (`lm.gradient.forward_backward`), split into its forward,
#   backward and post-backward parts, over all parameters and over fewer (embeddings
#   excluded, last block only, LM head only);
# - the plain **reference** path (`lm.gradient.reference_pass`: full-vocabulary logits at
#   every position and an ordinary backward), where the profile does not skip it;
# - **N samples** (`lm.decoding.sample_answers`) and, where the profile does not skip it,
#   the greedy answer and N samples from one prefill (`lm.decoding.decode`);
# - **clustering** of the samples (`lm.clustering`) and **P(True)** (`lm.baselines.p_true`),
#   zero-shot as the QA study runs it and with the samples as brainstormed candidates as
#   its reference implementation does.
#
# A method's cost is the sum of the passes the score registry (`gnuq_core.qa.scores`) says
# it needs. Ratios are paired within a round (the two passes timed side by side) and
# summarised per model by their median over questions × repeats, with a bootstrap 95%
# interval that resamples questions.

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]

from gnuq_core.chapters import efficiency, glue, glue_figure, glue_values, start

params, store, prov = start(efficiency, profile, overrides, store=False)  # one call: chapters.base.start

# %% [markdown]
# ## Running the benchmark
#
# The questions are a fixed, seeded choice from TruthfulQA and TriviaQA. Models without a
# tokenizer of their own (random weights at a real architecture's size, `random:<arch>`)
# get synthetic token-id questions of realistic length, and no records/hour run.

# %%
# the benchmark (written to 07_efficiency.bench.json beside the chapter), then every table and
# number the page quotes, and claim C8; the timings are of this machine, so no results store
result = efficiency.run(params, None, profile)
glue_values(result, params)  # and the preview profiles' values the exercises quote

# %% [markdown]
# The run timed {glue:text}`n_models` models on {glue:text}`n_q_total` questions in
# {glue:text}`bench_wall:.0f` s on {glue:md}`machine_cpu`; the load average (other
# processes competing for the cores) was {glue:text}`load_avg:.1f` when it started, which
# is why absolute times are noisy and ratios are measured side by side. Clustering for
# semantic entropy used {glue:md}`clusterer_name`. The largest parts of the run were:
# {glue:md}`largest_parts`.
#
# ## The cost table
#
# Median seconds per round (interquartile range over questions × repeats), without the
# greedy generation that every method shares. Scores that need the same passes share a
# row; the scores named in each row are those of the registry.

# %%
result.show("costs")

# %% [markdown]
# ## Against the floor: gradient pass ÷ one forward
#
# The floor of the gradient pass is one forward over the same tokens; an ordinary backward
# costs about two more (one matrix product for the gradient with respect to the
# activations, one for the weights). The engine's target is at most
# {glue:text}`target_ratio:.1f` forwards: with exact "ghost" norms the weight-gradient
# products of short answers can be skipped altogether.

# %%
glue("floor_table", result.tables["floor"], display=True)

# %% [markdown]
# Gradient pass ÷ one no-grad forward, per model: {glue:md}`floor_list`. The target is
# met on {glue:text}`floor_n_met` of {glue:text}`floor_n` models. The pass never
# materialises a full-vocabulary logit matrix for the prompt, never stores a
# parameter-sized gradient, and computes the embedding/LM-head part of the norm from two
# small Gram matrices instead of the $V \times d$ gradient.
#
# How far below the target can an exact norm go? Every exact $\lVert\nabla_\theta \log p\rVert^2$
# needs the gradient of $\log p$ at every layer's output, so one forward with autograd and one
# backward into the activations (no parameter gradient, no norm; `lm.floor.activation_backward`,
# timed in the same rounds) is its floor: {glue:md}`floor_bound_list`. The rest is the
# Gram matrices of the ghost norms, which grow with the square of the sequence length
# (prompt + answer), and the few explicit gradients of short or shared parameters.
# Paired round by round (the ordinary rounds and more rounds of these passes alone, since what
# the pass costs above its floor is the difference of two passes of about two forwards each),
# the gradient pass costs {glue:md}`above_floor_list`. The target of
# at most {glue:text}`target_above_floor:.2f` forwards above the floor is met on
# {glue:text}`above_floor_n_met` of {glue:text}`above_floor_n` models. The split comes from a
# third pass timed in the same rounds, the floor with the Gram matrices formed as the
# gradient pass forms them and nothing else: the Gram products are the cost of the exact
# norm itself (the engine already takes, layer by layer, the cheaper of the Gram matrices
# and the weight gradient), the rest is what hooks, bookkeeping and the embedding and head
# pieces add.
#
# Is the target within reach of an exact norm at all? Counted rather than timed, the matrix
# products the norm adds to the floor (the Gram matrices, the explicit weight gradients of
# layers too wide for them, the head's pieces; `lm.floor.norm_multiply_adds`, which the
# tests check against PyTorch's flop counter on the real passes) come, in forwards'
# multiply-adds at these lengths (median over the questions), to {glue:md}`arithmetic_list`.
# {glue:md}`arithmetic_verdict`
#
# {glue:md}`gram_kernel_verdict`

# %%
glue_figure("fig_floor", efficiency.figure_floor(result))

# %% [markdown]
# ```{glue:figure} fig_floor
# :alt: Bar chart: gradient pass time divided by one forward, per model and parameter group, with intervals, the ordinary-backward level and the target.
# :name: fig-efficiency-floor
#
# Gradient pass time divided by one no-grad forward over the same tokens, per parameter
# group (median over questions × repeats, bars: bootstrap 95% interval over questions).
# Dotted: forward + an ordinary backward; dashed: the target.
# ```
#
# The cheaper variants still pay the full forward, so they cannot go below 1. The last
# block needs a backward through that block only. The LM head would need none (its
# gradient norm comes from two Gram matrices) if it were its own matrix, but both models
# here tie it to the input embedding: its gradient then includes the embedding rows of
# the prompt and answer tokens, and the backward runs through every layer to reach them
# (the table below).
#
# (efficiency-variants)=
# ### What each variant costs
#
# Cost in no-grad forwards, seconds and peak extra memory of each variant (the memory is
# measured in a separate process; as a fraction of one fp32 gradient of the model, it
# shows that no variant stores a parameter-sized gradient). Per model: {glue:text}`variant_cost_list`.
# Chapter 06 measures how well each variant ranks answers, and the
# [practitioner's page](../practice.md) puts the two together.

# %%
glue("variants_table", result.tables["variants"], display=True)

# %% [markdown]
# (claim-c8)=
# ## Against the baselines
#
# Speed-up = baseline cost ÷ estimator cost in the same round, without the greedy
# generation that every method shares (and with it).

# %%
result.show("speedup")
glue_figure("fig_speedup", efficiency.figure_speedup(result))

# %% [markdown]
# ```{glue:figure} fig_speedup
# :alt: Horizontal bar chart on a log scale: speed-up of the gradient estimator over each baseline per model, one row per baseline, with the paper's range as a grey band.
# :name: fig-efficiency-speedup
#
# Speed-up of the gradient-norm estimator over each baseline's extra passes (median over
# questions × repeats, whiskers: bootstrap 95% interval over questions; log scale), one row
# per baseline. Grey band: the paper's 46–107×; black line: as fast as the baseline.
# ```
#
# Each sampling baseline is timed twice: **optimised**, as this project runs it (the N
# answers sampled as one batch sharing the prompt's KV cache, MiniLM clustering in one
# batched call, a zero-shot P(True) prompt), and as its **reference** implementation runs
# it (Kuhn et al. 2023; Farquhar et al. 2024): the N answers sampled one at a time, each
# with its own prefill ({glue:md}`sequential_timed_words`); semantic clusters by bidirectional entailment with a
# DeBERTa-large-MNLI cross-encoder, one pair per forward pass, compared in the reference
# loop's order ({glue:md}`nli_comparison_range` per question here, counted on the
# samples' clusters, times one timed comparison); and P(True) with
# {glue:text}`p_true_shots_used` worked examples before the question and its brainstormed
# answers ({glue:md}`fewshot_tokens`). Each reference pass takes seconds to tens of
# seconds here, so each is timed once per question (the interval resamples questions;
# this build times {glue:md}`timed_once_list`),
# and the entailment comparison and the few-shot P(True) on {glue:md}`reference_questions_used`
# (the rounds column of the table says how many). No DeBERTa weights install
# offline, so the cross-encoder has **random weights of the same architecture and size**
# (406M parameters): its decisions would be meaningless, but its cost is the reference's,
# and the number of comparisons comes from the real clusters.
#
# **C8, as the paper words it** (each baseline as its reference implementation runs it; the
# claim must hold against every baseline on every model, so it is judged on the cheapest
# baseline on the least favourable model, {glue:md}`c8_reference_model`):
# {glue:text}`c8_reference_value:.1f`× (95% CI
# {glue:text}`c8_reference_lo:.1f`–{glue:text}`c8_reference_hi:.1f`); verdict:
# **{glue:md}`c8_reference_verdict`**. Per model: {glue:md}`c8_reference_per_model`.
# Against semantic entropy as its reference implementation runs it (one answer at a time,
# entailment clustering) the speed-up is {glue:md}`se_reference_range` across models: the
# paper's 46–107× is what this baseline costs, not what every baseline costs.
#
# **C8, conservatively** (the fastest of this project's optimised baselines, on
# {glue:md}`c8_optimised_model`): {glue:text}`c8_optimised_value:.1f`× (95% CI
# {glue:text}`c8_optimised_lo:.1f`–{glue:text}`c8_optimised_hi:.1f`); verdict:
# **{glue:md}`c8_optimised_verdict`**. Per model: {glue:md}`c8_optimised_per_model`. Over
# optimised semantic entropy with N = {glue:text}`n_samples_used` the speed-up is
# {glue:text}`se_speedup_min:.1f`–{glue:text}`se_speedup_max:.1f`× across models; the
# zero-shot P(True) costs one forward over a short prompt, close to the gradient pass
# (speed-up {glue:text}`p1_speedup:.2f`×). The ledger shows both readings; its verdict is
# the first one's.
#
# ### Where the gap comes from, measured
#
# Each row is one difference between the reference and the optimised baselines, and how
# much it multiplies the speed-up: the cost of the baseline with it ÷ without it, paired
# within a round (median over rounds, 95% interval over questions).

# %%
result.show("gap")

# %% [markdown]
# Measured: {glue:md}`gap_list`.
#
# The last row per model is **answer length**. Our answers are short: the row names the
# median length of the sampled answers. The semantic-entropy reference code lets answers
# run to {glue:text}`reference_answer_cap` tokens (its generation cap); this build compares
# answers of {glue:text}`long_answer_tokens_used` tokens with them. Sampling costs a
# decoding step per token for each of the N answers, while the gradient pass grows only
# with prompt + answer length (the sweep below). So on the prompts of
# {glue:md}`reference_questions_used`, we time N answers sampled as one batch to exactly
# each length (the real sampler with its stop tokens switched off) and the gradient pass
# over an answer of the same length. The row is the ratio of the two speed-ups. Answers that stop before the cap gain less, so
# the row is the upper end of what answer length adds.
#
# One cause is not measured here: **model size and hardware.** On a GPU, sequential
# decoding is latency-bound, while a forward-backward over a short sequence is one burst
# of large matrix products; on this CPU both are compute-bound. `scripts/gpu_bench.sh`
# records the same tables on a GPU.
#
# ## Scoring many answers at once
#
# `gnuq_core.lm.batched` scores B answers in one forward–backward pass and still gives each
# answer the squared norm of *its own* gradient (not of the batch's sum): one registered
# rule per module type (`gnuq_core.estimators.norm_rules`, the engine the single answer's
# pass uses too) turns the activations a layer saw and the gradients that reached its
# output into per-answer norms (ghost norms for linear layers, the normalised input for RMS
# norms, embedding rows and the LM head per answer), equal to one-at-a-time scoring to 1e-6
# in float64 (tested). The same answers, scored B at a time:

# %%
result.show("batching")

# %% [markdown]
# Best per model: {glue:md}`batching_list`. The column checks ÷ passes is what `score_many`'s checks
# of its arguments cost (the model, the tokenizer, every prompt and answer, timed on the
# same pairs in the same rounds): {glue:md}`checks_share`. On this CPU a batched pass is only modestly
# cheaper per sequence (both are compute-bound); on a GPU a single answer leaves most of
# the device idle, which is where batching pays.
#
# ## Against the libraries people use for per-example norms
#
# A batch of answers is a per-example gradient-norm problem: $\lVert\nabla_\theta p\rVert^2 =
# p^2\lVert\nabla_\theta \sum_t \log p_t\rVert^2$, one norm per answer of its *summed*
# log-probability. Differential-privacy libraries compute exactly that. The same answers, B
# at a time, by gnuq's batched pass, by Opacus (per-sample gradients instantiated by its
# per-layer rules, and its ghost norms, which need two backward passes), by `torch.func`
# (each answer's gradient instantiated, one at a time) and by the floor (one forward and one
# backward of the summed log-probabilities, no norm at all). All four give the same numbers:
# equal to 1e-6 in float64 on tiny Llama, GPT-2 and Gemma models (tested). Compared on:
# {glue:md}`peer_parameters`. Each time is the median of the rounds (interval: bootstrap over
# rounds); a method that could not run says why.

# %%
result.show("peers")

# %% [markdown]
# Where gnuq stands, at each model's largest batch: {glue:md}`peer_words`.
#
# A build times few batch sizes (the page's budget). The newest committed run of
# `make bench` ({glue:md}`peers_committed_where`) timed B = 1 to 64 answers of the QA study's
# real lengths, interleaved in rounds, on both real models:

# %%
result.show("peers_committed")

# %% [markdown]
# In that run, {glue:md}`peers_committed_words` (The single-answer target is issue 46's: what
# the pass costs above the floor besides its own Gram products, at most that many no-grad
# forwards.)
#
# ## Records per hour: the whole QA pipeline
#
# The QA study stores one record per question: the greedy answer, the gradient pass,
# P(True), N = 10 samples and their clustering (`qa.engine.question_record`, with the
# study's settings: a 32-token cap, T = 1). Here worker processes run exactly that on the
# same questions in two layouts: one process with two torch threads, and two processes
# with one thread each that score disjoint halves of the questions at the same time (as a
# sharded run does). Loading and a short warm-up happen before a common start signal and
# are not counted. The shares are the engine's own per-pass timings inside the records.

# %%
glue("throughput_table", result.tables["throughput"], display=True)  # a sentence where no records/hour ran

# %% [markdown]
# Measured: {glue:md}`rph_list`. Sampling takes {glue:md}`sample_share_range` of a
# record's time and the gradient pass {glue:md}`gradient_share_range`.
#
# **The full study on this machine.** Every question of both datasets
# ({glue:md}`study_desc` per model, {glue:text}`study_records` records in all) would take
# about {glue:text}`campaign_best_hours:.1f` h of wall time in the fastest layout
# ({glue:md}`campaign_best_layout`); per layout: {glue:md}`campaign_list`. The estimate
# scales each layout's measured wall time by the study's work over the measured work, per
# dataset (TruthfulQA prompts are longer). It rests on the few records of the table
# above, and the machine may be shared with other jobs: read it as an order of
# magnitude, and `make bench` (more questions) for the number to plan with.
#
# ## Memory
#
# Peak memory above the model's own weights, for one question of median prompt length.
# On CPU it is the resident set size in a separate process whose allocator returns every
# freed tensor to the system (so that the peak is the tensors' peak); on a GPU the CUDA
# allocator's statistics. Target: the extra peak of the gradient pass is at most
# {glue:text}`mem_target` of one full fp32 gradient of the model.

# %%
result.show(optional=["memory"])  # only where peak memory was measured

# %% [markdown]
# The largest extra peak of the gradient pass, relative to one fp32 gradient, is
# {glue:text}`mem_worst_frac:.3f` ({glue:md}`mem_worst_model`; target:
# {glue:md}`mem_verdict`), {glue:text}`mem_vs_forward:.2f`× the peak of the no-grad
# forward. The plain reference path (full logits, ordinary backward) needs
# {glue:text}`mem_ref_frac:.2f` gradients' worth. (Measured with {glue:md}`mem_method`.)
# The saving comes from freeing each parameter's gradient in a hook as soon as its squared
# norm is taken, and from never forming the $V\times d$ gradient of the tied embedding
# matrix.
#
# ## How cost grows with length and size

# %%
glue_figure("fig_scaling", efficiency.figure_scaling(result))

# %% [markdown]
# ```{glue:figure} fig_scaling
# :alt: Three panels: gradient-pass and forward time against answer length, prompt length and model size.
# :name: fig-efficiency-scaling
#
# Left and middle: time of the gradient pass (solid) and of one forward (dashed) against
# answer length with the prompt fixed, and against prompt length with an 8-token answer
# (random token ids). Right: both against the number of parameters for a ladder of random
# Llama models; triangles: the gradient time of the models above on real questions.
# ```
#
# Both costs grow about linearly in the number of tokens at these lengths (attention's
# quadratic term is still small); for the first model the gradient pass's slope against
# prompt length is {glue:text}`slope_ratio_prompt:.2f`× the forward's slope, against
# answer length {glue:text}`slope_ratio_answer:.2f`×. Across the size ladder the ratio of
# the two {glue:text}`ladder_words`: very small models are dominated by
# per-operator overhead, which the backward pays as well.
#
# ## Where the time goes
#
# A `torch.profiler` trace of one forward and one gradient pass (first model), top
# operators by self time:

# %%
result.show(optional=["operators"])  # only where the profiler ran

# %% [markdown]
# Matrix products (`aten::mm`, `aten::addmm`, `aten::bmm`, attention) take
# {glue:text}`mm_share_forward:.0%` of the forward's operator self time and
# {glue:text}`mm_share_gradient:.0%` of the gradient pass's. The rest is element-wise work
# (RMSNorm, rotary embeddings, SiLU/GELU, the softmax over the vocabulary) and
# per-operator overhead, which the backward pays again for every operator it
# differentiates.
#
# ## On a GPU
#
# `scripts/gpu_bench.sh` runs the same benchmark on one GPU with randomly initialised
# models at the real architectures' sizes (SmolLM2-135M, Gemma-3-270M and a 1B Llama).
# When its results are committed as `bench/gpu_results.json`, they appear here.

# %%
result.show("gpu_note", optional=["gpu_floor", "gpu_speedup"])  # tables: where bench/gpu_results.json is of this version

# %% [markdown]
# ## Summary
#
# ````{admonition} Key takeaways
# :class: important
# - The gradient pass costs {glue:text}`floor_ratio_0:.2f` forwards on
#   {glue:md}`floor_model_0` (all models: {glue:md}`floor_list`); its extra peak memory is
#   at most {glue:text}`mem_worst_frac:.3f` of one fp32 gradient (target:
#   {glue:md}`mem_verdict`).
# - {glue:md}`gram_takeaway`
# - Against the baselines as their reference implementations run them it is
#   {glue:text}`c8_reference_value:.1f`× faster on the least favourable model and baseline
#   (C8: {glue:md}`c8_reference_verdict`); against this project's fastest optimised baseline
#   only {glue:text}`c8_optimised_value:.1f`× ({glue:md}`c8_optimised_verdict`). The
#   difference is measured, cause by cause: {glue:md}`gap_list`.
# - The whole QA pipeline produces {glue:md}`rph_list`; the full study would take about
#   {glue:text}`campaign_best_hours:.1f` h on this machine ({glue:md}`campaign_best_layout`).
# ````
#
# ## Exercises
#
# ```{exercise} Try it: more samples
# :label: ex07-1
#
# The sampling baselines draw `n_samples` answers ({glue:text}`quick_n_samples` in the quick
# profile). Rerun the chapter in the quick profile with twice as many:
# `gnuq chapter run 07 --profile quick --set n_samples=N` (the banner at the top of the page
# says how long the quick profile took on a 2-core machine; more samples add a little).
# Before you look: what happens to the cost of the gradient pass, and to the speed-up over
# "N samples" and over semantic entropy?
# ```
#
# ````{solution} ex07-1
# :class: dropdown
#
# The gradient pass does not depend on N, so its cost and its ratio to one forward stay
# where they were (up to timing noise). The sampling baselines decode twice as many rows
# per step; on a CPU a decoding step is compute-bound, so their cost grows by up to about
# two, and the speed-up over them grows by up to the same factor. Clustering twice as many
# answers costs a little more too. On a GPU, where a batched step costs little more than a
# single one, the speed-up would grow less.
# ````
#
# ```{exercise} Why does a backward cost two forwards?
# :label: ex07-2
#
# For one linear layer $y = Wx$ the forward is one matrix product. Which products does
# an ordinary backward need, and which of them can a pass that only wants
# $\lVert\nabla_W \log p\rVert^2$ avoid?
# ```
#
# ````{solution} ex07-2
# :class: dropdown
#
# The backward needs the gradient with respect to the input, $W^\top g$ (to continue to
# earlier layers), and with respect to the weights, $\sum_t g_t x_t^\top$: two products of
# the forward's size, hence forward + backward ≈ 3 forwards. The norm of the weight
# gradient does not need the gradient itself:
# $\lVert\sum_t g_t x_t^\top\rVert_F^2 = \sum_{t,s} (g_t^\top g_s)(x_t^\top x_s)$, two small
# $T\times T$ Gram matrices for an answer of $T$ tokens (the "ghost" norm). For short
# answers this is much cheaper than forming the weight gradient, which is how the pass
# can come in under the ordinary backward's cost.
# ````
#
# ```{exercise} From records per hour to a campaign
# :label: ex07-3
#
# Compare the two layouts of the records-per-hour table: one process with two torch
# threads, and two processes with one thread each, on the same cores. Which produced more
# records per hour in this build? Why can two processes beat two threads, and when would
# they not?
# ```
#
# ````{solution} ex07-3
# :class: dropdown
#
# Two processes often win: much of a record's time is spent in small operations (decoding one token at a time,
# per-operator overhead) that do not split well across two threads, so a second thread
# inside one process is often idle; two processes keep both cores busy with independent
# work. It stops paying when the processes compete for memory bandwidth or memory itself
# (two copies of the model), or on a GPU, where one process can already keep the device
# busy.
# ````

# %% tags=["remove-input"]
prov.show()
