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
# # QA benchmarks: TruthfulQA and TriviaQA on real language models
#
# ```{admonition} Learning goals
# :class: tip
# - Measure whether an uncertainty score flags wrong answers, with an {term}`AUROC` and a
#   bootstrap interval over questions.
# - Decompose the epistemic score, $\lVert\nabla_\theta p\rVert^2 = p^2\lVert\nabla_\theta \log p\rVert^2$,
#   before reading a ranking into it.
# - Compare the gradient scores with the baselines: {term}`P(True)`, the entropy of samples
#   and {term}`semantic entropy`.
# - Test whether a raw threshold transfers from one model to another (claim C9).
# ```
#
# The paper's language-model experiments ask a practical question: when a model answers a
# question, does the gradient-norm uncertainty of that answer tell us whether the answer is
# wrong? For an answer $y$ to a prompt $x$ with probability $p = p(y \mid x, \theta^*)$ the
# three scores are
#
# $$
# \begin{aligned}
# \text{epistemic} &= \lVert \nabla_\theta p \rVert^2,\\
# \text{aleatoric} &= p(1-p),\\
# \text{combined} &= \text{epistemic} + \text{aleatoric},
# \end{aligned}
# $$
#
# all from one forward and one backward pass of the unmodified model
# {cite}`grunefeld2026isotropic`. The paper reports three findings that this chapter
# re-measures on TruthfulQA {cite}`lin2022truthfulqa` and TriviaQA
# {cite}`joshi2017triviaqa`:
#
# - **C6** On TruthfulQA the combined score has the best AUROC for predicting correctness
#   (0.63 in the paper), above P(True) and entropy baselines.
# - **C7** On TriviaQA the epistemic score is near chance (the abstract says this of the
#   combined score) and P(True) is best.
# - **C9** Raw gradient norms do not transfer across models: a threshold fitted on one model
#   is at chance on another.
#
# ```{important}
# The paper used models of 7 billion parameters and more (Llama 2/3, OLMo, Phi-4). The two
# real models that install offline here are **far smaller**: SmolLM2-135M-Instruct (a chat
# model, 135 million parameters) and Gemma-3-270M (a base model, 270 million). They know
# much less, so most of their answers are wrong and every score has less to work with.
# Differences from the paper's numbers are a finding about scale as much as about the method.
# ```

# %% tags=["parameters"]
profile = "quick"  # injected by the chapter runner (its --profile)
overrides = {}  # and its --set: parameters changed from the profile

# %% tags=["remove-cell"]

from gnuq_core.chapters import glue, glue_figure, glue_values, qa, start

params, store, prov = start(qa, profile, overrides)  # one call: chapters.base.start

# %% [markdown]
# ## 1. Questions and protocol
#
# Both datasets are read from the local copies described in the data README (never from the
# repository). Each model answers the same fixed random subset of questions; the full
# profile uses every question. SmolLM2 is prompted through its chat template with the
# instruction "Answer the following question in a few words"; Gemma-3-270M is a base
# model and gets four short question–answer pairs before the question (few-shot), and its
# answer ends at the first newline. Answers are greedy and capped at `max_new_tokens`.
#
# For every answer we then run, on the same generation: the forward–backward pass that
# gives $\lVert\nabla_\theta \log p\rVert^2$ (and hence all gradient scores); a
# {term}`P(True)` self-check pass {cite}`kadavath2022language`; `n_samples` temperature-1
# samples for predictive and {term}`semantic entropy` {cite}`kuhn2023semantic,farquhar2024detecting`
# (samples clustered by meaning with the MiniLM sentence encoder); the baselines follow
# LM-Polygraph's definitions {cite}`fadeeva2023lmpolygraph,malinin2021uncertainty`.
# A sample ends at its stop token, which is not part of its text; its log-probability is
# the sum over its own tokens, and a sample that stops at once (empty) gets the stop
# token's log-probability as its length-1 sequence, as in the reference semantic-entropy
# code {cite}`farquhar2024detecting`. Each record's per-block gradient norms (embeddings,
# each decoder block, the rest) come from that same single gradient pass: the hooks see
# every parameter's gradient, so the split costs no second pass. Everything is
# cached per question and configuration, so a rebuild only recomputes what changed. The full
# profile keeps these per-question records in the repository's results store (ids, generated
# answers and numbers; never the question or reference texts, which are read from the data by
# id), recomputes only missing questions, and re-runs a random few stored ones to check them.

# %%
# every model answers the questions (records through the store), then graders, AUROCs, layers,
# transfer and the claims C6, C7 and C9: everything the page quotes
result = qa.run(params, store, profile)
glue_values(result, params)  # and the preview profiles' values the exercises quote

# %% [markdown]
# This build uses {glue:text}`n_tfqa` of the {glue:text}`n_tfqa_all` TruthfulQA questions
# and {glue:text}`n_tqa` of the {glue:text}`n_tqa_all` TriviaQA questions per model,
# {glue:text}`n_samples` samples per question for the sampling baselines, and an answer cap
# of {glue:text}`max_new_tokens` tokens.
#
# ```{glue} store_state
# ```

# %% [markdown]
# ## 2. Is the answer correct?
#
# Every AUROC below is only as good as the labels it is computed against, so the graders
# are declared, measured against hand labels, and every claim is judged under each of them
# (section 10). The **primary** reading takes the paper's formulas literally ($p$ the
# probability of the whole answer; combined = epistemic + aleatoric), and the careful labels
# described below. No verdict below rests on one reading alone.
#
# **TriviaQA.** Answers and the aliases of the reference answer are normalised the SQuAD
# way (lower case; punctuation and the articles *a*, *an*, *the* removed; spaces squashed).
# Three rules grade them: exact match (the answer *is* an alias), containment (an alias
# occurs in the answer on word boundaries) and the echo-aware rule: an alias occurs in the
# answer as a whole name, not inside a longer one ("The Times" is not in "The New York
# Times"), and an alias the question itself contains does not count at all. The chat models
# often restate the question ("The more common name for variola is variola"), and plain
# containment credits the echo. {glue:text}`trivia_careful_words` The rules stay readings.
#
# **TruthfulQA, careful labels (primary).** Every stored answer of both models was read with
# its question and references and labelled *correct*, *incorrect* or *unclear* against the
# written rubric of `audit/RUBRIC.md` (TruthfulQA's criterion: an answer is true if it asserts
# nothing false about the question; refusals are true), blind to model, grader and score, with
# a reason per answer (`audit/truthfulqa/`, whose README says how; the readers were instances
# of the AI model that develops this project, not people). An independent second reading of
# 240 answers drawn at random agrees with the first at Cohen's κ {glue:text}`careful_kappa:.2f`
# (95 % CI {glue:text}`careful_kappa_lo:.2f`–{glue:text}`careful_kappa_hi:.2f`, on the
# {glue:text}`careful_decided` answers both decided); its {glue:text}`careful_disagreements`
# disagreements were adjudicated in the open. The paper does not state its grader (its authors'
# earlier work used a language-model judge), so careful reading is the closest available reading
# of "correct", and {glue:text}`careful_words`. Each automatic grader's agreement with the
# primary label is in the table below.
#
# **TruthfulQA, automatic rules.** The rule of lm-evaluation-harness: an answer is true if its best ROUGE-L
# F-score against the true reference answers is higher than against the false ones, with
# "I have no comment." among the true references (refusals count as true, as in the
# benchmark). A *tie* (often both 0: the answer shares no word with any reference) is false
# under this rule; the alternatives count ties as true or leave them out, use ROUGE-L ≥ 0.3
# against the best answer (the rule of Kuhn et al. for free-form answers) or against any
# true answer, or replace ROUGE-L by the cosine similarity of MiniLM sentence embeddings
# (the offline all-MiniLM-L6-v2 encoder the engine uses for semantic clustering).

# %%
result.show("agreement")

# %% [markdown]
# On TriviaQA the echo rule takes {glue:text}`echo_share_smollm2:.1%` of SmolLM2's
# answers away from "correct" (questions it answered by repeating them); on TruthfulQA up
# to {glue:text}`tie_share_max:.1%` of a model's answers are ties. Agreement with the
# primary grader ranges from {glue:text}`agree_min:.2f` to {glue:text}`agree_max:.2f` (κ
# corrects for the agreement expected by chance).
#
# ### The graders measured against hand labels
#
# An automatic grader's "correct" is only evidence if it is usually right. The **audit
# set** (`audit/` in the repository: ids and labels, the rubric and how it was made) holds
# 400 answers of the paper edition, 100 per model and dataset, drawn at random half among
# the answers the primary grader calls correct and half among the others, each labelled *correct*, *incorrect* or *unclear* by reading the question, the
# references and the answer against a written rubric, blind to every grader and score.
# The readers were instances of the AI model that develops this project, not people (the
# audit's README says so). Weighted back to each grader's population (post-stratification;
# *unclear* answers left out), each grader's **precision** (of its "correct"s, the share
# truly correct) and **recall** (of the truly correct answers, the share it finds):

# %%
result.show(optional=["audit"])  # only where the audit's labels are about this build's answers

# %% [markdown]
# ```{glue} audit_findings
# ```
#
# On TruthfulQA a word-overlap rule misses truthful answers that share no words with a
# reference and credits wrong ones that do, so every TruthfulQA verdict below is judged
# under every grader (section 10); the AUROCs for the hand labels themselves, on the
# audited answers, are in section 10 too. Ten random examples per dataset, with the
# primary label, show what the models write:

# %%
result.show(*(f"examples_{d}" for d in qa.DATASETS))

# %% [markdown]
# ## 3. How good are the models?
#
# Accuracy of the greedy answers (primary labels) and, as a reference for model quality,
# TruthfulQA multiple-choice accuracy by likelihood (MC1: the true answer is the most likely
# of about five choices; MC2: probability mass on the true choices) on
# {glue:text}`n_mc` questions.

# %%
result.show("accuracy")

# %% [markdown]
# ## 4. Answer lengths
#
# The sequence probability $p$ is a product over tokens, so longer answers have smaller
# $p$ almost automatically. Before reading anything into a score we need to know how long the
# answers are and how many were cut off by the cap.

# %%
glue_figure("fig_lengths", qa.figure_lengths(result, params))
result.show("lengths")

# %% [markdown]
# ```{glue:figure} fig_lengths
# :alt: Histograms of greedy answer lengths in tokens per model and dataset.
# Distribution of answer lengths in tokens per model and dataset (greedy answers).
# ```
#
# Of {glue:text}`n_answers` answers, {glue:text}`cap_hits` reached the cap of
# {glue:text}`max_new_tokens` tokens.
#
# ## 5. Decompose before concluding
#
# Since $\nabla_\theta p = p\,\nabla_\theta \log p$,
#
# $$
# \lVert\nabla_\theta p\rVert^2 = p^2\,\lVert\nabla_\theta \log p\rVert^2 .
# $$
#
# The epistemic score is the product of a *confidence* term $p^2$ and a *gradient* term. If
# $p$ varies over many orders of magnitude (it does: it is a product of token
# probabilities), the ranking of $\lVert\nabla p\rVert^2$ can be almost entirely the
# ranking of $p$, and $p$ in turn largely a function of answer length. The table gives,
# per model × dataset, the Spearman rank correlation of each score with $p$ (first table) and
# with the answer length (second); the gradient term $\lVert\nabla \log p\rVert^2$ and its length-normalised
# versions are evaluated as scores in their own right below.

# %%
result.show("rho_p", "rho_length")

# %% [markdown]
# Across model × dataset, Spearman ρ between the epistemic score and $p$ lies between
# {glue:text}`rho_epi_p_min:.2f` and {glue:text}`rho_epi_p_max:.2f`; for the gradient term
# alone, $\lVert\nabla\log p\rVert^2$, between {glue:text}`rho_glp_p_min:.2f` and
# {glue:text}`rho_glp_p_max:.2f`. A ρ near +1 means that, as a *ranking* of answers,
# "epistemic" says little beyond "how probable was the answer" — and a probable answer is a
# confident one, so a high score then marks answers the model is *sure* of.
#
# ## 6. Which score predicts a wrong answer?
#
# For each score, oriented so that larger means less certain, the AUROC of separating
# wrong from right answers (0.5 = chance, 1 = perfect), with a 95 % percentile-bootstrap
# interval over questions, and the prediction-rejection ratio (PRR: the share of the gap
# between random and oracle rejection that the score closes {cite}`malinin2021uncertainty`).

# %%
result.show("auroc")

# %%
glue_figure("fig_roc", qa.figure_roc(result, params))

# %% [markdown]
# ```{glue:figure} fig_roc
# :alt: Grid of ROC curves for predicting a wrong answer, one panel per model and dataset, six scores each, with the chance diagonal.
# ROC curves for predicting a wrong answer, per model (rows) and dataset (columns), for
# six of the scores (dotted: chance). Their AUROCs are in the table above; a panel
# whose answers are all wrong (or all right) has no curve.
# ```
#
# The full table with intervals and PRR:

# %%
result.show("auroc_full")

# %% [markdown]
# ### Sequence or length-normalised $p$?
#
# The paper's $p$ is the probability of the whole answer. The alternative,
# $\bar p = \exp(\tfrac1T \sum_t \log p_t)$, removes the direct effect of length; its
# gradient is $\nabla \log p / T$. The ablation evaluates the three scores under both
# definitions on the same answers.

# %%
result.show("ablation")

# %% [markdown]
# (table-2)=
# ### The paper's Table 2, cell by cell
#
# The paper reports, for six methods on both benchmarks, the AUROC for a wrong answer as the
# mean ± standard deviation over 300 bootstrap runs and its four LLMs (two Llama models, OLMo,
# Phi-4). Ours is computed the same way over our two models: on each of
# {glue:text}`t2_boot` resamples of each model's questions the AUROC, pooled over runs and
# models (whether the paper's ± is pooled or averaged per model it does not say; pooled is our
# reading), under the primary labels. Naïve entropy is the predictive entropy of the samples,
# epistemic ‖∇p‖², aleatoric p(1 − p), "Epi. & Alea." their sum. The rule that judges a cell was
# fixed before the numbers:
#
# > {glue:text}`t2_rule`
#
# {glue:text}`t2_reproduced` of the {glue:text}`t2_cells` cells are reproduced and
# {glue:text}`t2_not` are not. The best method of ours is {glue:text}`t2_best_tqa` on TriviaQA
# and {glue:text}`t2_best_tfqa` on TruthfulQA (the paper: P(True) and Epi. & Alea.).
# {glue:text}`t2_rule_changes` (the ledger shows both beside each cell).

# %%
result.show("table2")

# %% [markdown]
# Per model (the analogue of the paper's Table 11; ours are two models of 135 M and 270 M
# parameters, the paper's four of 7 B and more):

# %%
result.show("table2_models")

# %% [markdown]
# The paper also says that epistemic and P(True) are only weakly correlated, Spearman ρ ≈
# {glue:text}`rho_ep_target:.1f` on both benchmarks. Ours (with P(True) as the confidence, not the
# registered score 1 − P(True)) runs from {glue:text}`rho_ep_min:.2f` to
# {glue:text}`rho_ep_max:.2f`; {glue:text}`rho_ep_reproduced` of {glue:text}`rho_ep_n` model ×
# benchmark pairs have a 95 % interval that reaches within {glue:text}`rho_ep_tol:.1f` of the paper's
# value:

# %%
result.show("rho_epi_ptrue")

# %% [markdown]
# On TruthfulQA the paper's combined estimate "significantly" outperforms P(True) and the entropy
# baselines (p < {glue:text}`sig_level` after Benjamini–Hochberg correction, its Appendix G.7). The
# same test on our answers: each difference of mean AUROC (combined − baseline) with a paired
# bootstrap over questions, a two-sided bootstrap p-value, and the Benjamini–Hochberg adjustment over
# the baselines. Combined is significantly better than {glue:text}`sig_wins` of the
# {glue:text}`sig_n` TruthfulQA baselines and significantly worse than {glue:text}`sig_losses`:
# the statement is **{glue:text}`sig_verdict`** here.

# %%
result.show("significance")

# %% [markdown]
# Model by model (its Table 11), the paper says that on TruthfulQA the combined estimate is at least
# on par with the best baseline for every model, while on TriviaQA the reverse holds for three of
# four, and that which of aleatoric and epistemic helps more depends on the model. We read "on par"
# as a paired bootstrap interval of combined − best baseline (P(True), semantic or naïve entropy,
# whichever has the highest AUROC for that model) that reaches 0 or above, and "the reverse" as one
# wholly below 0. On TruthfulQA combined is on par or better for {glue:text}`pm_par` of
# {glue:text}`pm_n_tfqa` models (**{glue:text}`pm_tfqa_verdict`**); on TriviaQA the best baseline is
# significantly better for {glue:text}`pm_reverse` of {glue:text}`pm_n_tqa`
# (**{glue:text}`pm_tqa_verdict`**, reading "three of four" as most models). Which of aleatoric and
# epistemic does better ({glue:text}`pm_helps`) is model-dependent: **{glue:text}`pm_dependent_verdict`**.

# %%
result.show("per_model_statements")

# %% [markdown]
# (qa-variants)=
# ## 7. Which layers carry the signal, and what do cheaper variants cost?
#
# The gradient pass of each answer also splits $\lVert\nabla_\theta \log p\rVert^2$ by parameter
# group: the embedding matrix (in both models it is tied to the output projection, so this
# group is also the LM head), each decoder block, and the rest (normalisation weights).
# Two cheap variants drop parameters from the estimator: all parameters *except* the
# embedding matrix, and the last decoder block only (the backward pass then stops early).
# The per-layer analysis uses the first `n_layer_questions` answers of each model × dataset
# (all of them in the full profile): in this build {glue:text}`n_layer_min` to
# {glue:text}`n_layer_max` answers per model × dataset.

# %%
glue_figure("fig_layers", qa.figure_layers(result, params))
result.show("group_auroc", "group_epistemic_auroc")

# %% [markdown]
# ```{glue:figure} fig_layers
# :alt: Bar chart of each parameter group's mean share of the squared gradient norm, per model and dataset, on a log scale.
# Mean share of $\lVert\nabla_\theta \log p\rVert^2$ contributed by each parameter group
# (log scale), per model and dataset.
# ```
#
# The tied embedding / output matrix carries between {glue:text}`emb_share_min:.2f` and
# {glue:text}`emb_share_max:.2f` of the squared gradient norm on average. The two tables
# above give, for each group, the AUROC of the group's gradient term alone and of the
# epistemic score restricted to the group ($p^2$ times it). When the $p^2$ factor dominates the
# ranking (section 5), the second table is nearly the same for every group: which layers
# "carry the signal" can only be asked of the gradient term. How well the cheap variants
# rank answers:

# %%
glue("qa_variants_table", result.tables["variants"], display=True)

# %% [markdown]
# And what each costs, as the efficiency chapter measures it in this build (side by side
# with a no-grad forward, on the same questions; [section](efficiency-variants)):
#
# ```{glue} variants_table
# :doc: 07_efficiency.ipynb
# ```
#
# ## 8. TruthfulQA by category
#
# TruthfulQA's 38 categories are grouped into five families: misconceptions and myths,
# sayings and quotations, health and science, law/money/society, and trick questions
# (confusions, indexical errors, logical falsehoods). With a few dozen questions per model
# the per-group AUROCs are very noisy; the full profile has 817 per model.

# %%
result.show("categories")

# %% [markdown]
# ## 9. Does a raw threshold transfer between models? (C9)
#
# Fit a rule "wrong if $\log_{10}\lVert\nabla p\rVert^2 > t$" on one model's answers (the
# threshold that maximises balanced accuracy, or a logistic calibration) and apply it to
# the other model's answers. The within-model reference fits the rule on the target model
# itself, out of fold (5-fold cross-validation). AUROC does not change under any increasing
# map of the score, so a transferred *ranking* is exactly as good as the within-model one;
# only the *scale* can fail to transfer.

# %%
result.show(optional=["transfers"])  # only where both models have right and wrong answers
glue_figure("fig_scales", qa.figure_scales(result, params))
result.show("scales")

# %% [markdown]
# ```{glue:figure} fig_scales
# :alt: Distributions of the raw epistemic score per model on a log10 scale.
# Raw scale of the epistemic score, $\log_{10}\lVert\nabla_\theta p\rVert^2$, per model.
# ```
#
# The median of the raw epistemic score $\log_{10}\lVert\nabla p\rVert^2$ differs between
# the two models by {glue:text}`scale_gap_epi:.1f` decades, that of the gradient term
# $\log_{10}\lVert\nabla\log p\rVert^2$ by {glue:text}`scale_gap:.2f` (averaged over
# datasets): most of the raw-scale gap comes from $p^2$, i.e. from how long and how
# probable each model's answers are.
#
# (claim-c6)=
# (claim-c7)=
# (claim-c9)=
# ### The paper's own protocol: a correctness classifier across models
#
# The paper's limitation (the source of C9) is measured differently from the threshold transfer
# above: a correctness classifier trained on three models' uncertainty estimates and evaluated on
# the fourth is at chance or below, the relation sometimes inverting, even after normalising by
# the squared parameter norm. With our two models: a logistic regression on (epistemic, aleatoric),
# standardised on the training model, trained on one model's answers and evaluated on the other's,
# in both directions and on both benchmarks, with epistemic raw and divided by the model's
# ‖θ*‖². We judge the classifier by its AUROC on the other model (does its ranking of wrong answers
# carry over?): its interval reaches chance or lies below in {glue:text}`ct_chance` of the
# {glue:text}`ct_n` transfers and lies wholly below 0.5 (the relation inverted) in
# {glue:text}`ct_inverted`, so the statement is **{glue:text}`ct_verdict`** with our models. The
# balanced accuracy of its 0.5 decision is shown too, but read it with the share flagged: in
# {glue:text}`ct_all_flagged` transfers the classifier flags every answer or none (most TriviaQA
# answers are wrong, so a calibrated classifier calls them all wrong), which puts the balanced
# accuracy at exactly 0.5 whatever the ranking. A linear classifier's ranking is unchanged by the
# normalisation (a constant shift of one feature); only its decisions move.

# %%
result.show("classifier_transfer")

# %% [markdown]
# ## 10. The claims
#
# For C6 and C7 each method's AUROC is the **mean over the models** (each model's own
# AUROC, then averaged), with a bootstrap interval from averaging the models' bootstrap
# replicates (same resamples for every method within a model); the methods compared are
# those the score registry marks for the claims. Whether the claimed method is *best* is
# decided by **paired differences**: its AUROC minus each other method's on the same
# resampled questions, never by where an interval ends. C9's number is the mean
# transferred balanced accuracy over both directions and both datasets, and what decides
# it is the paired difference transferred − within-model.
#
# Before any rule judges, the claim's **evidence gate** checks that the data can decide: a
# model enters an AUROC claim only with at least {glue:text}`min_per_class` correct and
# {glue:text}`min_per_class` wrong answers (with fewer, its AUROC rests on a handful of
# answers), and the interval may be no wider than the claim allows. A claim that fails its
# gate is *inconclusive*, with the reason in the ledger; models left out are named below.

# %%
# mean AUROCs, verdicts, evidence, differences, parts, readings, hand labels, cap: those this build made
result.show(optional=qa.CLAIM_TABLES)

# %% [markdown]
# ```{glue} qa_gate_reasons
# ```
#
# The table lists each method's mean AUROC over the models with its interval (the last
# three rows are the decomposition scores, not part of the claims). One contrast to read
# off it: on TriviaQA the gradient term alone, $\lVert\nabla\log p\rVert^2$, reaches
# {glue:text}`macro_tqa_grad_log_p:.3f` while the epistemic score
# $p^2\lVert\nabla\log p\rVert^2$ reaches {glue:text}`macro_tqa_epistemic:.3f` (TruthfulQA:
# {glue:text}`macro_tfqa_grad_log_p:.3f` and {glue:text}`macro_tfqa_epistemic:.3f`). Values
# well below 0.5 mean the score ranks wrong answers as *more certain*, which is what a
# $p^2$ factor does when $p$ itself is a (weak) confidence signal.
#
# **C6 (TruthfulQA)** makes three statements, each judged on its own (the table of parts
# above): (a) combined has the highest mean AUROC of the methods: **{glue:text}`c6a_verdict`**
# (combined minus its closest competitor: {glue:text}`c6a_value:+.3f`); (b) that AUROC is
# about 0.63: **{glue:text}`c6b_verdict`** (combined reaches {glue:text}`c6_value:.3f`, 95 %
# CI {glue:text}`c6_lo:.2f`–{glue:text}`c6_hi:.2f`; the best method here is
# {glue:text}`c6_best_name` at {glue:text}`c6_best_auroc:.3f`); (c) it beats P(True) and
# the entropy baselines: **{glue:text}`c6c_verdict`** (smallest paired difference
# {glue:text}`c6c_value:+.3f`). Derived verdict: **{glue:text}`c6_verdict`**; across the
# {glue:text}`c6_n_readings` readings (grader × p × combined) it is
# {glue:text}`c6_robustness`. {glue:md}`qa_dropped`
#
# **C7 (TriviaQA)**: (a) epistemic near chance: **{glue:text}`c7a_verdict`** (mean AUROC
# {glue:text}`c7_value:.3f`, CI {glue:text}`c7_lo:.2f`–{glue:text}`c7_hi:.2f`); (b) combined
# near chance, as the abstract says: **{glue:text}`c7b_verdict`** ({glue:text}`c7b_value:.3f`);
# (c) P(True) is best: **{glue:text}`c7c_verdict`** (P(True) reaches {glue:text}`c7_ptrue:.3f`,
# the best method is {glue:text}`c7_best_name` at {glue:text}`c7_best_auroc:.3f`). Derived
# verdict: **{glue:text}`c7_verdict`**; across the {glue:text}`c7_n_readings` readings it
# is {glue:text}`c7_robustness`.
#
# **C9 (transfer).** A threshold on $\log_{10}\lVert\nabla p\rVert^2$ fitted on one model
# gives a balanced accuracy of {glue:text}`c9_value:.3f` (CI {glue:text}`c9_lo:.2f`–
# {glue:text}`c9_hi:.2f`) on the other, against {glue:text}`c9_within:.3f` within model; the
# paired difference is {glue:text}`c9_diff:+.3f` ({glue:text}`c9_diff_lo:+.3f` to
# {glue:text}`c9_diff_hi:+.3f`). Verdict: **{glue:text}`c9_verdict`**; across the
# {glue:text}`c9_n_readings` readings that change its number it is
# {glue:text}`c9_robustness`. Note what this test can and cannot show: if the score
# carries little signal even within a model, a transferred threshold is at chance for that
# reason alone, so read it together with the within-model column.
#
# **The readings.** The paper leaves three things open, so each claim is judged under every
# combination (the tables "under every reading" above; each cell is the part's measured
# value and its verdict). *Grader*: the rules of section 2. *p*: `sequence` is the whole
# answer's probability $p$ (primary, the paper's formula), `normalized` the length-normalised
# $\bar p = \exp(\frac1T\sum_t \log p_t)$ in its place, and `loss` drops the $\bar p^2$ factor:
# epistemic $= \lVert\nabla\log\bar p\rVert^2 = \lVert\nabla\log p\rVert^2/T^2$, the gradient of the
# mean-token log-likelihood (the training loss), as the first author's earlier code
# computed it. *Combined*: `sum` adds the two scores at the isotropic scale $\sigma^2 = 1$
# (primary), `rank_mean` averages their ranks, the one combination that does not depend on
# the unknown $\sigma^2$. A verdict is **robust** when every reading gives it; otherwise the
# caption names the readings that flip it.
#
# **The token cap.** Answers stop after {glue:text}`max_new_tokens` tokens; the share that
# hit the cap: {glue:text}`cap_share_text`. The last table shows the headline AUROCs with
# those answers left out.
#
# ```{admonition} Reading these numbers
# :class: warning
# The models here have 135 M and 270 M parameters, 25–50 times fewer than the smallest
# model in the paper, and most of their answers are wrong (section 3). Section 11 reads the
# verdicts against that scale. A preview profile uses a few dozen questions per model, so
# every interval is wide; the paper edition (all 817 + 2,933 questions per model) is the
# one to cite.
# ```

# %% [markdown]
# ## 11. What the data says at 135 M–270 M parameters, against the paper's 7 B+
#
# The paper's QA findings come from models of 7 billion parameters and more; the two models
# here are 25–50 times smaller. {glue:md}`scale_coverage` Four questions decide how the
# verdicts above should be read.

# %%
glue_figure("fig_scale", qa.figure_scale(result, params))

# %% [markdown]
# **Do the models know the answers?** {glue:md}`scale_know`. For a model that is right
# most of the time, wrong answers are the exception a score must find; here they are the
# rule, and the few right answers are what every AUROC rests on.
#
# **Is there any signal to find?** Mean AUROC over the models, each method with its
# bootstrap interval:
#
# ```{glue} scale_signal
# ```
#
# ```{glue:figure} fig_scale
# :alt: Dot plot of each method's mean AUROC with 95% intervals, gradient scores in red and baselines in blue, with chance and the paper's value marked.
# Each method's AUROC for flagging a wrong answer, averaged over the models, with its 95 %
# bootstrap interval (red: the paper's gradient scores; blue: the baselines; dotted:
# chance; orange star: the paper's 0.63 for the combined score on TruthfulQA). A method without
# enough right and wrong answers in this build has no point.
# ```
#
# **What does the epistemic score rank by?** The epistemic score is $p^2$ times the gradient
# term (section 5). Its mean AUROC and that of the plain sequence-probability baseline
# ($-\log p$, the same $p$ with the opposite orientation) are {glue:md}`scale_mirror`. A
# sum near 1 means the epistemic score is the mirror image of a confidence score: it ranks
# answers by how *probable* they are, and probable answers are the right ones more often, so
# it flags right answers. The paper's argument needs the gradient term to carry signal of
# its own and $p$ to be calibrated enough for the aleatoric term $p(1-p)$ to mean something.
# Here the gradient term alone, $\lVert\nabla\log p\rVert^2$, reaches a mean AUROC of
# {glue:text}`macro_tfqa_grad_log_p:.3f` on TruthfulQA and {glue:text}`macro_tqa_grad_log_p:.3f`
# on TriviaQA, and the rank correlation of $p$ with the answer's length is
# {glue:text}`rho_p_len_min:.2f` to {glue:text}`rho_p_len_max:.2f` across model × dataset.
#
# **How do the paper's numbers compare?** {glue:md}`scale_c6_paper`; the combined score
# itself is {glue:text}`scale_c6_chance`. On TriviaQA the paper finds the epistemic score near chance;
# here it is {glue:text}`scale_c7_chance`. The paper's other TriviaQA finding, P(True)
# best, needs a model that can judge its own answers; P(True) here: {glue:md}`scale_ptrue`.
#
# What this does and does not say about the method: the isotropic estimate is computed
# exactly here (chapter 80 checks it against plain autograd on both models), so the
# differences from the paper are differences in what the *score* says about correctness
# when the model is small and mostly wrong, not errors in computing it. Whether the
# paper's ranking of methods holds at 7 B+ cannot be tested on this machine; the command
# line (`gnuq qa --model <a Hugging Face causal LM> --dataset truthfulqa --out answers.jsonl`)
# runs this same study on a larger model where one is available.

# %% [markdown]
# ```{admonition} Key takeaways
# :class: important
# - Decompose before concluding: across model × dataset the epistemic score's rank
#   correlation with $p$ is {glue:text}`rho_epi_p_min:.2f` to {glue:text}`rho_epi_p_max:.2f`;
#   where it is near 1, the score ranks answers as $p^2$, a confidence, does.
# - **C6** (TruthfulQA): the combined score's mean {term}`AUROC` is {glue:text}`c6_value:.3f`
#   ({glue:text}`c6_lo:.2f`–{glue:text}`c6_hi:.2f`); the best score is
#   {glue:text}`c6_best_name`. Verdict: {glue:text}`c6_verdict`.
# - **C7** (TriviaQA): epistemic {glue:text}`c7_value:.3f` against P(True)
#   {glue:text}`c7_ptrue:.3f`. Verdict: {glue:text}`c7_verdict`.
# - **C9**: a threshold fitted on one model reaches a balanced accuracy of
#   {glue:text}`c9_value:.3f` on the other ({glue:text}`c9_within:.3f` within model); the
#   raw scales differ by {glue:text}`scale_gap_epi:.1f` decades. Verdict: {glue:text}`c9_verdict`.
# - **Scale** (section 11): {glue:md}`scale_c6_paper`, on models 25–50 times smaller than
#   the paper's that get most answers wrong; read the verdicts as findings about this scale.
# ```
#
# ## Exercises
#
# ```{exercise} Try it: a shorter answer cap
# :label: ex06-1
#
# This page capped answers at {glue:text}`max_new_tokens` tokens; the smoke profile caps them
# at {glue:text}`smoke_max_new_tokens`. Rerun the chapter in the smoke profile with half that
# cap: `gnuq chapter run 06 --profile smoke --set max_new_tokens=N` (about a minute and a half
# on a 2-core machine; most of it is loading the two models and answering the questions again). Before you
# look: how many answers will hit the cap, and will the epistemic score's rank
# correlation with the answer length (section 5) get stronger or weaker?
# ```
#
# ````{solution} ex06-1
# :class: dropdown
#
# More answers end at the cap rather than at a stop token (compare the "hit the cap"
# column of section 4), and the lengths bunch up at the new cap. With lengths nearly equal,
# length orders the answers less, so its rank correlation with the scores usually
# weakens (it is undefined, shown as —, when every answer has the same length). The ranking of
# $\lVert\nabla_\theta p\rVert^2$ is then carried by how probable the tokens are, not by how many there are.
# With three questions per dataset the AUROCs say nothing either way: the smoke profile
# tests the machinery, not the claims.
# ````
#
# ```{exercise} An epistemic AUROC below one half
# :label: ex06-2
#
# The epistemic score $p^2\lVert\nabla_\theta\log p\rVert^2$ can have an AUROC below 0.5
# while the gradient term $\lVert\nabla_\theta\log p\rVert^2$ alone has a higher one
# (compare the two in section 10's table). Explain how a factor $p^2$ can push an AUROC
# *below* chance.
# ```
#
# ````{solution} ex06-2
# :class: dropdown
#
# The AUROC asks whether wrong answers get *higher* scores. If $p$ varies over many orders
# of magnitude while $\lVert\nabla_\theta\log p\rVert^2$ varies over few, the product ranks
# answers by $p$. A probable answer is one the model is confident in, and confident answers
# are more often right, so a high score marks *right* answers: the ranking is reversed and
# the AUROC falls below 0.5. The gradient term alone does not carry this reversal. On this
# page (mean AUROC over the models) the epistemic score reaches
# {glue:text}`macro_tfqa_epistemic:.3f` on TruthfulQA and {glue:text}`macro_tqa_epistemic:.3f`
# on TriviaQA, the gradient term alone {glue:text}`macro_tfqa_grad_log_p:.3f` and
# {glue:text}`macro_tqa_grad_log_p:.3f`.
# ````
#
# ```{exercise} Good ranking, bad threshold
# :label: ex06-3
#
# AUROC is unchanged by any increasing map of a score. Why can a threshold fitted on one
# model then fail on another even when both models rank their answers equally well?
# ```
#
# ````{solution} ex06-3
# :class: dropdown
#
# A ranking is invariant to scale, a threshold is not. If the second model's scores are
# shifted by some decades (its answers are longer or less probable, so $p^2$ is smaller),
# the first model's threshold flags almost all or almost none of its answers, and the
# balanced accuracy drops to about 0.5 although the within-model AUROC is unchanged. This is
# why section 9 reports the within-model balanced accuracy next to the transferred one.
# ````
#
# ```{exercise} The empty sample
# :label: ex06-4
#
# A sample that stops at its first token has no answer tokens. Why give it the stop token's
# log-probability, with length 1, instead of $\log p = 0$?
# ```
#
# ````{solution} ex06-4
# :class: dropdown
#
# $\log p = 0$ means probability 1: the empty answer would look certain, however unlikely
# the model found stopping at once, and it would dominate predictive and semantic entropy.
# The stop token's log-probability is what the model actually assigned to ending there, and
# length 1 keeps the length-normalised versions defined. This is the convention of the
# reference semantic-entropy code {cite}`farquhar2024detecting`.
# ````

# %% tags=["remove-input"]
prov.show()
