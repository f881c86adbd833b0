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
profile = "quick"  # injected by the chapter runner
seed = 0  # question subsets, sampling and bootstrap all derive from it
models = ["smollm2-135m-instruct", "gemma3-270m"]  # aliases of gnuq_core.lm.models
n_truthfulqa = 20  # questions per model; 0 means all 817
n_triviaqa = 30  # questions per model; 0 means all 2933
n_samples = 3  # temperature samples per question for the entropy baselines
max_new_tokens = 20  # answer-length cap, in tokens
n_mc = 15  # TruthfulQA MC1/MC2 questions per model; 0 means all
n_boot = 1000  # bootstrap resamples for every confidence interval
n_cost = 3  # answers timed per parameter-group variant
n_layer_questions = 8  # answers per model and dataset split by layer; 0 means all
embedding_judge = True  # second TruthfulQA judge with the MiniLM sentence encoder
compute_missing = True  # False reads only the stored records (the paper edition: the campaign fills the store)
store_verify = 2  # stored questions recomputed and compared per model and dataset (the paper edition's store)
torch_threads = 0  # 0 keeps the torch default; 1 is faster on a machine shared with other jobs

# %% tags=["remove-cell"]
import dataclasses
import gc
import logging
import os
import warnings

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # load reports would land in the page
os.environ.setdefault("TQDM_DISABLE", "1")  # progress bars go to stderr, which the book refuses
warnings.filterwarnings("ignore", message=".*os.fork.*")  # JAX in a papermill kernel; harmless
warnings.filterwarnings("ignore", category=FutureWarning)  # deprecation notes of transformers internals
warnings.filterwarnings("ignore", message=".*gguf.*")  # GGUF de-quantisation notes on a cold cache
warnings.filterwarnings("ignore", message=".*IProgress not found.*")  # tqdm without ipywidgets; bars are off
logging.getLogger("transformers").setLevel(logging.ERROR)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display
from myst_nb import glue
from scipy.stats import ConstantInputWarning, spearmanr

from gnuq_core.repro import claims
from gnuq_core.repro import display as book
from gnuq_core.qa import auroc as evaluation
from gnuq_core.qa import audit as qa_audit
from gnuq_core.qa import grading, headline, readings, scores, verdicts
from gnuq_core.qa import study as qa_study
from gnuq_core.qa import transfer
from gnuq_core.qa.data import load_qa
from gnuq_core.lm.models import load_model
from gnuq_core.repro.provenance import Provenance
from gnuq_core.qa.multiple_choice import load_mc, stored_mc_scores
from gnuq_core.store import open_store

warnings.filterwarnings("ignore", category=ConstantInputWarning)  # ρ of a constant column is NaN, shown as such
prov = Provenance.start()
store = open_store(profile)  # the results store in the paper edition, the local cache in a preview
book.use_book_style()
if torch_threads > 0:
    torch.set_num_threads(torch_threads)
torch.manual_seed(seed)
SHORT = {"smollm2-135m-instruct": "SmolLM2-135M", "gemma3-270m": "Gemma-3-270M"}
DATASETS = ("truthfulqa", "triviaqa")
NAMES = {"truthfulqa": "TruthfulQA", "triviaqa": "TriviaQA"}
SCORE_NAMES = {  # how the book names the registry's scores (gnuq_core.qa.scores) in tables and legends
    "epistemic": "epistemic ‖∇p‖²", "aleatoric": "aleatoric p(1−p)", "combined": "combined",
    "epistemic_norm": "epistemic, p̄", "aleatoric_norm": "aleatoric, p̄", "combined_norm": "combined, p̄",
    "grad_log_p": "gradient term ‖∇ log p‖²", "grad_log_p_per_token": "‖∇ log p‖² / T",
    "grad_log_p_norm": "‖∇ log p‖² / T²", "p_true": "1 − P(True)", "max_seq_prob": "−log p (sequence probability)",
    "perplexity": "log perplexity", "mean_token_entropy": "mean token entropy",
    "predictive_entropy": "predictive entropy", "ln_predictive_entropy": "predictive entropy, length-normalised",
    "semantic_entropy": "semantic entropy", "discrete_semantic_entropy": "discrete semantic entropy",
    "epistemic_no_embeddings": "epistemic, no embeddings", "epistemic_last_block": "epistemic, last block"}


def score_name(m: str) -> str:
    """The book's name of score ``m`` (the registry's label when the book has none)."""
    return SCORE_NAMES.get(m) or scores.get(m).label


def ci_text(lo: float, hi: float) -> str:
    """An interval as ``[lo, hi]`` to two decimals; ``—`` when it could not be computed."""
    return f"[{lo:.2f}, {hi:.2f}]" if np.isfinite(lo) and np.isfinite(hi) else "—"


def same(spec: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Columns already named in words: header = column name, with its format."""
    return {k: (k, f) for k, f in spec.items()}


def wide_table(long: pd.DataFrame, value: str, fmt: str, *, index: str = "score", header: str = "score",
               caption: str | None = None) -> book.Table:
    """``long[value]`` with one row per ``index`` and one column per dataset · model."""
    w = long.pivot_table(index=index, columns=["dataset", "model"], values=value, sort=False)
    w.columns = [f"{d} · {m}" for d, m in w.columns]
    w = w.reset_index()
    if index == "score":
        w["score"] = w["score"].map(score_name)
    return book.table(w, {index: header, **{c: (c, fmt) for c in w.columns[1:]}}, caption=caption)


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
all_items = {d: load_qa(d) for d in DATASETS}
sizes = {"truthfulqa": n_truthfulqa, "triviaqa": n_triviaqa}
subsets = {d: qa_study.select_items(all_items[d], sizes[d] or None, seed) for d in DATASETS}
item_by_id = {it.id: it for d in DATASETS for it in all_items[d]}
mc_items = load_mc()
mc_subset = qa_study.select_items(mc_items, n_mc or None, seed)
glue("n_tfqa_all", len(all_items["truthfulqa"]), display=False)
glue("n_tqa_all", len(all_items["triviaqa"]), display=False)
glue("n_mc", len(mc_subset), display=False)
glue("n_samples", n_samples, display=False)
glue("max_new_tokens", max_new_tokens, display=False)
glue("n_models", len(models), display=False)

# %% [markdown]
# This build uses {glue:text}`n_tfqa` of the {glue:text}`n_tfqa_all` TruthfulQA questions
# and {glue:text}`n_tqa` of the {glue:text}`n_tqa_all` TriviaQA questions per model,
# {glue:text}`n_samples` samples per question for the sampling baselines, and an answer cap
# of {glue:text}`max_new_tokens` tokens.
#
# ```{glue} store_state
# ```

# %%
runs: dict[tuple[str, str], list] = {}
groups: dict[tuple[str, str], dict] = {}
costs: dict[str, dict] = {}
mc_rows = []
for name in models:
    lm = load_model(name)
    config = qa_study.chapter_config(name, max_new_tokens=max_new_tokens, n_samples=n_samples, seed=seed)
    for d in DATASETS:
        runs[name, d] = qa_study.run_dataset(lm, subsets[d], config, progress=False, store=store,
                                             verify=store_verify, compute_missing=compute_missing)
    costs[name] = qa_study.variant_costs(lm, runs[name, "triviaqa"], n=n_cost)
    costs[name]["mean_generate"] = float(np.mean([r["timings"]["generate"] for d in DATASETS for r in runs[name, d]]))
    costs[name]["mean_sampling"] = float(np.mean([r["timings"].get("sample", np.nan) + r["timings"].get("cluster", 0)
                                                  for d in DATASETS for r in runs[name, d]]))
    costs[name]["mean_p_true"] = float(np.mean([r["timings"]["p_true"] for d in DATASETS for r in runs[name, d]]))
    mc = stored_mc_scores(lm, name, mc_subset, store=store, verify=store_verify)
    mc_rows.append({"model": SHORT.get(name, name), "MC1": float(np.mean([m["mc1"] for m in mc])),
                    "MC2": float(np.mean([m["mc2"] for m in mc])), "questions": len(mc)})
    del lm
    gc.collect()

# Every model is judged on the same questions: those every model has a record for (all of the
# subset, unless the paper edition reads a store that a campaign is still filling).
stored = {(name, d): len(runs[name, d]) for name in models for d in DATASETS}
for d in DATASETS:
    common = set.intersection(*({r["id"] for r in runs[name, d]} for name in models))
    subsets[d] = [it for it in subsets[d] if it.id in common]
    for name in models:
        runs[name, d] = [r for r in runs[name, d] if r["id"] in common]
        groups[name, d] = qa_study.group_norms_of(runs[name, d][:n_layer_questions or None])
glue("n_tfqa", len(subsets["truthfulqa"]), display=False)
glue("n_tqa", len(subsets["triviaqa"]), display=False)
reading_only = bool(store.check and not compute_missing)
complete = all(len(subsets[d]) == len(all_items[d]) for d in DATASETS)
coverage = ("" if not reading_only else
            "Every question of both datasets is in the results store. " if complete else
            "The results store does not hold every question yet; the analysis uses the questions every model has "
            "answered (per model: " + "; ".join(f"{SHORT.get(name, name)}: {NAMES[d]} {stored[name, d]:,} of "
                                                f"{len(all_items[d]):,}" for name in models for d in DATASETS)
            + "), and the claims' evidence gates (section 10) decide whether that is enough to judge. ")
glue("store_state", Markdown(coverage + store.describe(
    "The per-question records (answers, samples, gradient norms, baselines) and the multiple-choice scores",
    ["qa", "qa_mc"])), display=False)

# %% [markdown]
# ## 2. Is the answer correct?
#
# Every AUROC below is only as good as the labels it is computed against, so the graders
# are declared, measured against hand labels, and every claim is judged under each of them
# (section 10). The **primary** reading takes the paper's formulas literally ($p$ the
# probability of the whole answer; combined = epistemic + aleatoric) and, on TruthfulQA,
# the benchmark's own grader: all three were fixed before the QA campaign ran. TriviaQA's
# primary grader was not chosen blind: it replaced plain containment after a reviewer had
# read answers and computed AUROCs without the question-echo matches. That is one reason
# no verdict below rests on one reading alone.
#
# **TriviaQA.** Answers and the aliases of the reference answer are normalised the SQuAD
# way (lower case; punctuation and the articles *a*, *an*, *the* removed; spaces squashed).
# The primary label is *containment without the question's echo*: some alias occurs in the
# answer as a whole-word span, except that an alias the question itself contains counts
# only when the answer *is* that alias. The chat model often restates the question ("The
# more common name for variola is variola"), and plain containment credits the echo.
# Plain containment and exact match (the answer *is* an alias) are the alternatives.
#
# **TruthfulQA.** The rule of lm-evaluation-harness: an answer is true if its best ROUGE-L
# F-score against the true reference answers is higher than against the false ones, with
# "I have no comment." among the true references (refusals count as true, as in the
# benchmark). A *tie* (often both 0: the answer shares no word with any reference) is false
# under this rule; the alternatives count ties as true or leave them out, use ROUGE-L ≥ 0.3
# against the best answer (the rule of Kuhn et al. for free-form answers) or against any
# true answer, or replace ROUGE-L by the cosine similarity of MiniLM sentence embeddings
# (the offline all-MiniLM-L6-v2 encoder the engine uses for semantic clustering).

# %%
embed = None
if embedding_judge:
    from gnuq_core.lm.clustering import EmbeddingClusterer

    _enc = EmbeddingClusterer()
    embed = grading.MemoEmbedder(lambda texts: _enc.embed(texts).numpy())  # each text encoded once, shared

tables: dict[tuple[str, str], pd.DataFrame] = {}
for (name, d), recs in runs.items():
    t = qa_study.score_table(recs, items=item_by_id, embed=embed, group_norms=groups[name, d])
    t.insert(0, "model", SHORT.get(name, name))
    tables[name, d] = t
agree = verdicts.grader_agreement(tables).assign(
    model=lambda f: f["model"].map(lambda m: SHORT.get(m, m)), dataset=lambda f: f["dataset"].map(NAMES),
    grader=lambda f: [readings.GRADERS[d][g].text for d, g in zip(f["dataset"].map(
        {v: k for k, v in NAMES.items()}), f["grader"])])
echo = {name: float(tables[name, "triviaqa"]["correct_contains"].mean() - tables[name, "triviaqa"]["correct"].mean())
        for name in models}
ties = {name: float(tables[name, "truthfulqa"]["rouge_tie"].mean()) for name in models}
glue("echo_share_smollm2", echo.get("smollm2-135m-instruct", 0.0), display=False)
glue("tie_share_max", max(ties.values()), display=False)
glue("agree_min", float(agree["agreement"].min()), display=False)
glue("agree_max", float(agree["agreement"].max()), display=False)
display(book.table(agree, {"model": "model", "dataset": "dataset", "grader": "alternative grader",
                           "primary_accuracy": ("accuracy, primary", ".3f"), "accuracy": ("accuracy, alternative", ".3f"),
                           "agreement": ("agreement", ".2f"), "kappa": ("Cohen's κ", ".2f"), "n": ("answers", ",d")},
                   caption="Each alternative grader against the primary one"))

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
audit_labels = qa_audit.load_labels()
audit_config = {"max_new_tokens": max_new_tokens, "n_samples": n_samples, "seed": seed}
audit_labels = audit_labels[audit_labels["model"].isin(models)
                            & (audit_labels["config"].map(lambda c: c == audit_config))]
audit_labels = audit_labels[[i in set(tables[m, d]["id"]) for m, d, i in
                             zip(audit_labels["model"], audit_labels["dataset"], audit_labels["id"])]]
audit_ok = len(audit_labels) > 0  # the labels are about the paper edition's answers; a preview's answers differ
graded = {}
for d in DATASETS:
    for g in readings.graders_in([tables[name, d] for name in models], d):
        col = {}
        for name in models:
            t = tables[name, d].set_index("id")
            lab = readings.label_column(t, d, g)
            col.update({(name, i): bool(lab[i] == 0) for i in t.index if not np.isnan(lab[i])})
        graded[f"{d}:{g}"] = col
quality = (qa_audit.grader_quality(audit_labels, graded, n_boot=n_boot, seed=seed) if audit_ok else
           pd.DataFrame(columns=["model", "dataset", "grader", "precision", "recall"]))
quality = quality.loc[np.array([k.split(":")[0] == d for k, d in zip(quality["grader"], quality["dataset"])],
                               dtype=bool)].copy()
quality["grader_name"] = [readings.GRADERS[d][k.split(":")[1]].text for k, d in zip(quality["grader"],
                                                                                   quality["dataset"])]
prim = quality.loc[np.array([k.split(":")[1] == readings.PRIMARY[d].grader
                             for k, d in zip(quality["grader"], quality["dataset"])], dtype=bool)]


def audit_findings() -> str:
    """What the audit says about the primary graders (Markdown), or why this build cannot say."""
    if not audit_ok:
        return ("*The audit's labels are about the answers of the paper edition (answer cap 32 tokens, 10 samples, "
                f"seed 0); this build's answers are others ({profile} profile), so the audit is not applied here.*")
    parts = []
    for d in DATASETS:
        rows = prim[prim["dataset"] == d]
        text = ", ".join(f"{SHORT.get(m, m)} {p:.2f} {ci_text(lo, hi)}" for m, p, lo, hi in
                         zip(rows["model"], rows["precision"], rows["precision_lo"], rows["precision_hi"]))
        rec = ", ".join(f"{SHORT.get(m, m)} {p:.2f}" for m, p in zip(rows["model"], rows["recall"]))
        acc = ", ".join(f"{SHORT.get(m, m)} {a:.0%}" for m, a in zip(rows["model"], rows["true_accuracy"]))
        parts.append(f"- **{NAMES[d]}**, primary grader ({readings.GRADERS[d][readings.PRIMARY[d].grader].text}): "
                     f"precision {text}; recall {rec}. By the hand labels, {acc} of the answers are correct.")
    return (f"{len(audit_labels):,} audited answers ({int((audit_labels['label'] == 'unclear').sum())} unclear):\n\n"
            + "\n".join(parts))


glue("audit_findings", Markdown(audit_findings()), display=False)
if audit_ok:
    display(book.table(quality.assign(model=lambda f: f["model"].map(lambda m: SHORT.get(m, m)),
                                      dataset=lambda f: f["dataset"].map(NAMES),
                                      prec=lambda f: [f"{p:.2f} {ci_text(lo, hi)}" for p, lo, hi in
                                                      zip(f["precision"], f["precision_lo"], f["precision_hi"])],
                                      rec=lambda f: [f"{p:.2f} {ci_text(lo, hi)}" for p, lo, hi in
                                                     zip(f["recall"], f["recall_lo"], f["recall_hi"])]),
                       {"model": "model", "dataset": "dataset", "grader_name": "grader",
                        "prec": ("precision [95% CI]", "", True), "rec": ("recall [95% CI]", "", True),
                        "accuracy": ("its accuracy", ".3f"), "true_accuracy": ("hand-label accuracy", ".3f"),
                        "judged": ("audited answers it labels", "d")},
                       caption="Each grader's precision and recall for 'correct', against the hand-labelled audit set"))

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
rng_show = np.random.default_rng(seed)


def yes_no(v) -> str:
    return "yes" if v else "no"


for d in DATASETS:
    pool = pd.concat([tables[name, d] for name in models], ignore_index=True)
    cols = ["model", "question", "answer", "correct"] + (["correct_em"] if d == "triviaqa" else
                                                        ["rouge_true", "rouge_false"] +
                                                        (["correct_embed"] if embedding_judge else []))
    pick = pool.iloc[np.sort(rng_show.permutation(len(pool))[:10])][cols]
    shown = {"model": "model", "question": "question", "answer": "answer",
             "correct": ("correct (primary)", yes_no), "correct_em": ("exact match", yes_no),
             "rouge_true": ("ROUGE-L, true refs", ".2f"), "rouge_false": ("ROUGE-L, false refs", ".2f"),
             "correct_embed": ("MiniLM judge", yes_no)}
    display(book.table(pick, {k: v for k, v in shown.items() if k in cols}, caption=f"{NAMES[d]}: ten random answers"))

# %% [markdown]
# ## 3. How good are the models?
#
# Accuracy of the greedy answers (primary labels) and, as a reference for model quality,
# TruthfulQA multiple-choice accuracy by likelihood (MC1: the true answer is the most likely
# of about five choices; MC2: probability mass on the true choices) on
# {glue:text}`n_mc` questions.

# %%
acc_rows = []
for name in models:
    row = {"model": SHORT.get(name, name)}
    for d in DATASETS:
        row[f"{NAMES[d]} accuracy"] = float(tables[name, d]["correct"].mean())
    row["TriviaQA exact match"] = float(tables[name, "triviaqa"]["correct_em"].mean())
    acc_rows.append(row)
acc = pd.DataFrame(acc_rows).merge(pd.DataFrame(mc_rows), on="model")
for _, r in acc.iterrows():
    key = r["model"].split("-")[0].lower()
    glue(f"acc_tfqa_{key}", r["TruthfulQA accuracy"], display=False)
    glue(f"acc_tqa_{key}", r["TriviaQA accuracy"], display=False)
    glue(f"mc1_{key}", r["MC1"], display=False)
display(book.table(acc, same({"model": "", "TruthfulQA accuracy": ".2f", "TriviaQA accuracy": ".2f",
                               "TriviaQA exact match": ".2f", "MC1": ".2f", "MC2": ".2f", "questions": "d"})
                   | {"questions": ("MC questions", "d")}))

# %% [markdown]
# ## 4. Answer lengths
#
# The sequence probability $p$ is a product over tokens, so longer answers have smaller
# $p$ almost automatically. Before reading anything into a score we need to know how long the
# answers are and how many were cut off by the cap.

# %%
len_rows = []
fig, axes = book.subplots(1, len(DATASETS), panel_height=3.0, sharey=True, squeeze=False)
for ax, d in zip(axes[0], DATASETS):
    for name in models:
        t = tables[name, d]
        ax.hist(t["n_tokens"], bins=np.arange(0.5, max_new_tokens + 1.5), alpha=0.6, label=SHORT.get(name, name))
        len_rows.append({"model": SHORT.get(name, name), "dataset": NAMES[d],
                         "median tokens": float(t["n_tokens"].median()),
                         "mean tokens": float(t["n_tokens"].mean()),
                         "hit the cap": int((t["stop_reason"] == "max_new_tokens").sum()),
                         "answers": len(t)})
    ax.set_title(NAMES[d])
    ax.set_xlabel("answer length (tokens)")
axes[0, 0].set_ylabel("answers")
axes[0, 0].legend()
glue("fig_lengths", fig, display=False)
plt.close(fig)
lengths = pd.DataFrame(len_rows)
glue("cap_hits", int(lengths["hit the cap"].sum()), display=False)
glue("n_answers", int(lengths["answers"].sum()), display=False)
display(book.table(lengths, same({"model": "", "dataset": "", "median tokens": ".1f", "mean tokens": ".1f",
                                   "hit the cap": "d", "answers": "d"})))

# %% [markdown]
# ```{glue:figure} fig_lengths
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
DECOMP = ["epistemic", "grad_log_p", "grad_log_p_per_token", "grad_log_p_norm", "aleatoric", "combined",
          "p_true", "mean_token_entropy", "semantic_entropy"]
corr_rows = []
for (name, d), t in tables.items():
    for m in DECOMP:
        ok = t[m].notna()
        corr_rows.append({"model": SHORT.get(name, name), "dataset": NAMES[d], "score": m,
                          "ρ with p": spearmanr(t.loc[ok, m], t.loc[ok, "p"]).statistic,
                          "ρ with length": spearmanr(t.loc[ok, m], t.loc[ok, "n_tokens"]).statistic})
corr = pd.DataFrame(corr_rows)
corr_wide = corr.pivot_table(index="score", columns=["model", "dataset"], values=["ρ with p", "ρ with length"],
                             sort=False)
epi_p = corr[corr["score"] == "epistemic"]["ρ with p"]
glue("rho_epi_p_min", float(epi_p.min()), display=False)
glue("rho_epi_p_max", float(epi_p.max()), display=False)
gl_p = corr[corr["score"] == "grad_log_p"]["ρ with p"]
glue("rho_glp_p_min", float(gl_p.min()), display=False)
glue("rho_glp_p_max", float(gl_p.max()), display=False)
display(wide_table(corr, "ρ with p", ".2f", caption="Spearman ρ of each score with the answer's probability p"))
display(wide_table(corr, "ρ with length", ".2f", caption="Spearman ρ of each score with the answer's length"))

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
MAIN = scores.names(kind=("estimator", "decomposition", "baseline"))  # the registry, gnuq_core.qa.scores
res: dict[tuple[str, str, str], evaluation.AurocCI] = {}
auc_rows = []
for (name, d), t in tables.items():
    for m in MAIN:
        if t[m].isna().any():
            continue
        r = evaluation.bootstrap_auroc(t["incorrect"], t[m], n_boot=n_boot, seed=seed)
        res[name, d, m] = r
        auc_rows.append({"model": SHORT.get(name, name), "dataset": NAMES[d], "score": m, "AUROC": r.auroc,
                         "CI low": r.lo, "CI high": r.hi,
                         "PRR": evaluation.prr(t["correct"].astype(float), t[m]),
                         "n": r.n, "wrong": r.n_incorrect})
aucs = pd.DataFrame(auc_rows)
display(wide_table(aucs, "AUROC", ".3f", caption="AUROC for predicting a wrong answer"))

# %%
ROC_SCORES = ["epistemic", "aleatoric", "combined", "grad_log_p", "p_true", "semantic_entropy"]
fig, axes = book.subplots(len(models), len(DATASETS), panel_height=2.9, squeeze=False, sharex=True, sharey=True)
for i, name in enumerate(models):
    for j, d in enumerate(DATASETS):
        ax, t = axes[i, j], tables[name, d]
        for k, m in enumerate(ROC_SCORES):
            if t["incorrect"].nunique() == 2 and t[m].notna().all():
                fpr, tpr = evaluation.roc(t["incorrect"], t[m])
                ax.plot(fpr, tpr, color=f"C{k}", label=score_name(m))
        ax.plot([0, 1], [0, 1], "k:", lw=0.8)
        ax.set_title(f"{SHORT.get(name, name)} · {NAMES[d]}")
        if i == len(models) - 1:
            ax.set_xlabel("false-positive rate")
        if j == 0:
            ax.set_ylabel("true-positive rate")
        if len(ax.lines) == 1:
            ax.text(0.5, 0.3, "only one class:\nno ROC curve", ha="center")
handles = {h.get_label(): h for ax in axes.flat for h in ax.lines if not h.get_label().startswith("_")}
if handles:
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=3)
glue("fig_roc", fig, display=False)
plt.close(fig)

# %% [markdown]
# ```{glue:figure} fig_roc
# ROC curves for predicting a wrong answer, per model (rows) and dataset (columns), for
# six of the scores (dotted: chance). Their AUROCs are in the table above; a panel
# whose answers are all wrong (or all right) has no curve.
# ```
#
# The full table with intervals and PRR:

# %%
display(book.table(aucs.assign(score=aucs["score"].map(score_name)),
                   same({"model": "", "dataset": "", "score": "", "AUROC": ".3f", "CI low": ".2f", "CI high": ".2f",
                         "PRR": ".2f", "n": "d"}) | {"n": ("answers", "d"), "wrong": ("wrong", "d")}))

# %% [markdown]
# ### Sequence or length-normalised $p$?
#
# The paper's $p$ is the probability of the whole answer. The alternative,
# $\bar p = \exp(\tfrac1T \sum_t \log p_t)$, removes the direct effect of length; its
# gradient is $\nabla \log p / T$. The ablation evaluates the three scores under both
# definitions on the same answers.

# %%
abl_rows = []
for (name, d), t in tables.items():
    for m in scores.names(kind="estimator"):  # each beside its "_norm" twin (kind "normalised")
        row = {"model": SHORT.get(name, name), "dataset": NAMES[d], "score": m}
        for suffix, label in (("", "sequence p"), ("_norm", "normalised p̄")):
            r = evaluation.bootstrap_auroc(t["incorrect"], t[m + suffix], n_boot=n_boot, seed=seed)
            row[f"AUROC ({label})"] = r.auroc
            row[f"CI ({label})"] = ci_text(r.lo, r.hi)
        abl_rows.append(row)
ablation = pd.DataFrame(abl_rows)
display(book.table(ablation.assign(score=ablation["score"].map(score_name)),
                   same({"model": "", "dataset": "", "score": "", "AUROC (sequence p)": ".3f",
                         "CI (sequence p)": "", "AUROC (normalised p̄)": ".3f", "CI (normalised p̄)": ""})))

# %% [markdown]
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
share_rows, grp_auc_rows = [], []
n_split = [int(tables[key]["epistemic_last_block"].notna().sum()) for key in tables]
glue("n_layer_min", min(n_split), display=False)
glue("n_layer_max", max(n_split), display=False)
for (name, d), recs in runs.items():
    g, epi, wrong = qa_study.group_scores(tables[name, d], groups[name, d])
    share = g.div(g.sum(axis=1), axis=0).mean()
    share_rows.append(share.rename(f"{SHORT.get(name, name)} · {NAMES[d]}"))
    for col in g.columns:
        grp_auc_rows.append({"model": SHORT.get(name, name), "dataset": NAMES[d], "group": col,
                             "AUROC of p²‖∇_group log p‖²": evaluation.auroc(wrong, epi[col]),
                             "AUROC of ‖∇_group log p‖²": evaluation.auroc(wrong, g[col])})
shares = pd.DataFrame(share_rows).T
fig, ax = book.subplots(panel_height=3.8)
for col in shares.columns:
    ax.plot(range(len(shares)), shares[col], marker="o", ms=4, label=col)
ax.set_xticks(range(len(shares)))
ax.set_xticklabels(shares.index, rotation=90)
ax.set_ylabel("mean share of ‖∇ log p‖²")
ax.set_yscale("log")
ax.legend(ncol=2)
glue("fig_layers", fig, display=False)
plt.close(fig)
emb_share = shares.loc["embeddings"] if "embeddings" in shares.index else pd.Series([np.nan])
glue("emb_share_min", float(emb_share.min()), display=False)
glue("emb_share_max", float(emb_share.max()), display=False)
grp_auc = pd.DataFrame(grp_auc_rows)
display(wide_table(grp_auc, "AUROC of ‖∇_group log p‖²", ".3f", index="group", header="parameter group",
                   caption="AUROC of each group's gradient term ‖∇_group log p‖²"))
display(wide_table(grp_auc, "AUROC of p²‖∇_group log p‖²", ".3f", index="group", header="parameter group",
                   caption="AUROC of the epistemic score restricted to each group, p²‖∇_group log p‖²"))

# %% [markdown]
# ```{glue:figure} fig_layers
# Mean share of $\lVert\nabla_\theta \log p\rVert^2$ contributed by each parameter group
# (log scale), per model and dataset.
# ```
#
# The tied embedding / output matrix carries between {glue:text}`emb_share_min:.2f` and
# {glue:text}`emb_share_max:.2f` of the squared gradient norm on average. The two tables
# above give, for each group, the AUROC of the group's gradient term alone and of the
# epistemic score restricted to the group ($p^2$ times it). When the $p^2$ factor dominates the
# ranking (section 5), the second table is nearly the same for every group: which layers
# "carry the signal" can only be asked of the gradient term. Cost and AUROC of the cheap
# variants:

# %%
var_rows = []
for (name, d), t in tables.items():
    for m, sel in (("epistemic", "all"), ("epistemic_no_embeddings", "no_embeddings"),
                   ("epistemic_last_block", "last_block")):
        if m not in t:
            continue
        t = t[t["epistemic_last_block"].notna()]  # the answers that were split by layer
        r = evaluation.bootstrap_auroc(t["incorrect"], t[m], n_boot=n_boot, seed=seed)
        var_rows.append({"model": SHORT.get(name, name), "dataset": NAMES[d], "parameters": sel,
                         "AUROC": r.auroc, "CI": ci_text(r.lo, r.hi),
                         "ρ with full epistemic": spearmanr(t[m], t["epistemic"]).statistic,
                         "seconds / answer": costs[name][sel]})
variants = pd.DataFrame(var_rows)
cost_tab = pd.DataFrame([{"model": SHORT.get(n, n), "generate (greedy)": c["mean_generate"],
                          "gradient, all": c["all"], "gradient, no embeddings": c["no_embeddings"],
                          "gradient, last block": c["last_block"], "P(True)": c["mean_p_true"],
                          f"{n_samples} samples + clustering": c["mean_sampling"]} for n, c in costs.items()])
PARAMETER_SETS = {"all": "all", "no_embeddings": "all but the embeddings", "last_block": "last block only"}
display(book.table(variants.assign(parameters=variants["parameters"].map(PARAMETER_SETS)),
                   same({"model": "", "dataset": "", "parameters": "", "AUROC": ".3f", "CI": "",
                         "ρ with full epistemic": ".2f", "seconds / answer": ".3g"}),
                   caption="Cheaper variants of the epistemic score"))
display(book.table(cost_tab, {"model": "model", **{c: (c, ".3g") for c in cost_tab.columns[1:]}},
                   caption="Seconds per answer"))

# %% [markdown]
# Times are seconds per answer on this build's machine (see the provenance table; a
# machine shared with other jobs inflates all of them). The efficiency chapter measures
# cost properly.
#
# ## 8. TruthfulQA by category
#
# TruthfulQA's 38 categories are grouped into five families: misconceptions and myths,
# sayings and quotations, health and science, law/money/society, and trick questions
# (confusions, indexical errors, logical falsehoods). With a few dozen questions per model
# the per-group AUROCs are very noisy; the full profile has 817 per model.

# %%
cat_rows = []
for name in models:
    t = tables[name, "truthfulqa"]
    for grp, sub in t.groupby("category_group"):
        row = {"model": SHORT.get(name, name), "group": grp, "questions": len(sub),
               "accuracy": float(sub["correct"].mean())}
        for m in ["combined", "epistemic", "p_true", "semantic_entropy"]:
            row[m] = evaluation.auroc(sub["incorrect"], sub[m]) if sub[m].notna().all() else np.nan
        cat_rows.append(row)
display(book.table(pd.DataFrame(cat_rows), {"model": "model", "group": "category family",
                                            "questions": ("questions", "d"), "accuracy": ("accuracy", ".2f"),
                                            **{m: (f"AUROC, {score_name(m)}", ".2f")
                                               for m in ["combined", "epistemic", "p_true", "semantic_entropy"]}}))

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
tr_rows, tr_results = [], []
if len(models) >= 2:
    for d in DATASETS:
        for src, tgt in ((models[0], models[1]), (models[1], models[0])):
            a, b = tables[src, d], tables[tgt, d]
            if a["incorrect"].nunique() < 2 or b["incorrect"].nunique() < 2:
                continue
            r = transfer.transfer(a["epistemic"], a["incorrect"], b["epistemic"], b["incorrect"],
                                  n_boot=n_boot, seed=seed)
            tr_results.append(r)
            tr_rows.append({"dataset": NAMES[d], "source → target": f"{SHORT[src]} → {SHORT[tgt]}",
                            "threshold (source)": r.threshold_source, "threshold (target)": r.threshold_target,
                            "flagged on target": r.flagged_fraction,
                            "transferred BA": r.transferred_ba,
                            "CI": ci_text(*r.transferred_ci),
                            "transferred BA (logistic)": r.transferred_logistic_ba,
                            "within-model BA (CV)": r.within_ba, "within-model BA (logistic, CV)": r.within_logistic_ba,
                            "target AUROC": r.auroc_target})
transfers = pd.DataFrame(tr_rows)
if len(transfers):
    display(book.table(transfers, same({"dataset": "", "source → target": "", "threshold (source)": ".2f",
                                        "threshold (target)": ".2f", "flagged on target": ".2f",
                                        "transferred BA": ".3f", "CI": "", "transferred BA (logistic)": ".3f",
                                        "within-model BA (CV)": ".3f", "within-model BA (logistic, CV)": ".3f",
                                        "target AUROC": ".3f"}) | {"CI": ("CI", "", True)}))

scale_rows = []
for (name, d), t in tables.items():
    scale_rows.append({"model": SHORT.get(name, name), "dataset": NAMES[d],
                       "median log10 ‖∇p‖²": float(t["epistemic"].median()),
                       "median log10 ‖∇ log p‖²": float(t["grad_log_p"].median()),
                       "IQR log10 ‖∇p‖²": float(t["epistemic"].quantile(0.75) - t["epistemic"].quantile(0.25))})
scales = pd.DataFrame(scale_rows)
fig, axes = book.subplots(1, len(DATASETS), panel_height=3.0, squeeze=False)
for ax, d in zip(axes[0], DATASETS):
    for name in models:
        ax.hist(tables[name, d]["epistemic"], bins=15, alpha=0.6, label=SHORT.get(name, name))
    ax.set_title(NAMES[d])
    ax.set_xlabel("log10 ‖∇θ p‖²")
axes[0, 0].set_ylabel("answers")
axes[0, 0].legend()
glue("fig_scales", fig, display=False)
plt.close(fig)
med = scales.groupby("model")["median log10 ‖∇ log p‖²"].mean()
glue("scale_gap", float(med.max() - med.min()) if len(med) > 1 else float("nan"), display=False)
med_epi = scales.groupby("model")["median log10 ‖∇p‖²"].mean()
glue("scale_gap_epi", float(med_epi.max() - med_epi.min()) if len(med_epi) > 1 else float("nan"), display=False)
display(book.table(scales, same({"model": "", "dataset": "", "median log10 ‖∇p‖²": ".2f",
                                 "median log10 ‖∇ log p‖²": ".2f", "IQR log10 ‖∇p‖²": ".2f"})))

# %% [markdown]
# ```{glue:figure} fig_scales
# Raw scale of the epistemic score, $\log_{10}\lVert\nabla_\theta p\rVert^2$, per model.
# ```
#
# The median of the raw epistemic score $\log_{10}\lVert\nabla p\rVert^2$ differs between
# the two models by {glue:text}`scale_gap_epi:.1f` decades, that of the gradient term
# $\log_{10}\lVert\nabla\log p\rVert^2$ by {glue:text}`scale_gap:.2f` (averaged over
# datasets): most of the raw-scale gap comes from $p^2$, i.e. from how long and how
# probable each model's answers are.
#
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
CLAIM_METHODS = scores.names(claim=True)  # the methods C6 and C7 compare, from the registry
MIN_PER_CLASS = claims.MIN_PER_CLASS
glue("min_per_class", MIN_PER_CLASS, display=False)
macro_res = {d: headline.mean_aurocs([tables[name, d] for name in models],
                                     CLAIM_METHODS + ["grad_log_p", "grad_log_p_norm", "perplexity"],
                                     min_per_class=MIN_PER_CLASS, n_boot=n_boot, seed=seed)
             for d in DATASETS}
settings = {"profile": profile, "models": models, "n_truthfulqa": len(subsets["truthfulqa"]),
            "n_triviaqa": len(subsets["triviaqa"]), "n_samples": n_samples, "max_new_tokens": max_new_tokens,
            "n_boot": n_boot, "seed": seed,
            "labels": "; ".join(f"{NAMES[d]}: {readings.GRADERS[d][readings.PRIMARY[d].grader].text}" for d in DATASETS)}
tf, tq = macro_res["truthfulqa"], macro_res["triviaqa"]
m6, m7 = (headline.auroc_measurement(c, {name: tables[name, headline.CLAIM_SCORES[c][0]] for name in models},
                                     settings, n_boot=n_boot, seed=seed) for c in ("C6", "C7"))
m9 = headline.transfer_measurement(tr_results, settings)
# every reading of every claim (grader × p × combined), the primary one first
parts6, readings6, primary6 = verdicts.compound_readings("C6", {n: tables[n, "truthfulqa"] for n in models}, settings,
                                                         n_boot=n_boot, seed=seed)
parts7, readings7, primary7 = verdicts.compound_readings("C7", {n: tables[n, "triviaqa"] for n in models}, settings,
                                                         n_boot=n_boot, seed=seed)
readings9, primary9 = verdicts.transfer_readings(tables, models, settings, n_boot=n_boot, seed=seed)
e6 = claims.record(m6, parts=parts6, readings=readings6, primary=primary6)
e7 = claims.record(m7, parts=parts7, readings=readings7, primary=primary7)
e9 = claims.record(m9, readings=readings9, primary=primary9)
within = m9.details["within_model_balanced_accuracy"]

claim_tab = pd.DataFrame([
    {"claim": "C6", "measured": "AUROC of combined, TruthfulQA", "value": e6["value"], "CI": e6["ci"],
     "paper": "0.63, best", "verdict": e6["verdict"]},
    {"claim": "C7", "measured": "AUROC of epistemic, TriviaQA", "value": e7["value"], "CI": e7["ci"],
     "paper": "≈ 0.5; P(True) best", "verdict": e7["verdict"]},
    {"claim": "C9", "measured": "transferred balanced accuracy", "value": e9["value"], "CI": e9["ci"],
     "paper": "chance", "verdict": e9["verdict"]},
])
macro_tab = pd.DataFrame({NAMES[d]: {m: "—" if not np.isfinite(macro_res[d][m][0]) else
                                        f"{macro_res[d][m][0]:.3f} {ci_text(*macro_res[d][m][1:3])}"
                                        for m in macro_res[d]} for d in DATASETS})
for d, short in (("truthfulqa", "tfqa"), ("triviaqa", "tqa")):
    for m in ("grad_log_p", "perplexity", "epistemic"):
        v = macro_res[d][m][0]
        glue(f"macro_{short}_{m}", float(v) if np.isfinite(v) else 0.5, display=False)
for key, entry, aurocs in (("c6", e6, tf), ("c7", e7, tq)):
    best = headline.best_score(aurocs)
    glue(f"{key}_value", float(entry["value"]), display=False)
    glue(f"{key}_lo", float(entry["ci"][0]), display=False)
    glue(f"{key}_hi", float(entry["ci"][1]), display=False)
    glue(f"{key}_verdict", entry["verdict"], display=False)
    glue(f"{key}_best", best, display=False)
    glue(f"{key}_best_auroc", float(aurocs[best][0]), display=False)
    glue(f"{key}_best_name", score_name(best), display=False)
glue("c7_ptrue", float(tq["p_true"][0]) if np.isfinite(tq["p_true"][0]) else 0.5, display=False)
glue("c9_value", float(e9["value"]), display=False)
glue("c9_lo", float(e9["ci"][0]), display=False)
glue("c9_hi", float(e9["ci"][1]), display=False)
glue("c9_within", float(within), display=False)
glue("c9_verdict", e9["verdict"], display=False)
display(book.table(macro_tab.rename_axis("score").reset_index().assign(score=lambda f: f["score"].map(score_name)),
                   {"score": "score", **{NAMES[d]: (f"{NAMES[d]}: mean AUROC [95% CI]", "", True) for d in DATASETS}}))
display(book.table(claim_tab, {"claim": "claim", "measured": "measured", "value": ("value", ".3f"),
                               "CI": ("95% CI", lambda ci: f"[{ci[0]:.2f}, {ci[1]:.2f}]", True),
                               "paper": "paper", "verdict": "verdict"}))

# The evidence each verdict rests on, and the paired differences that decide "best".
evidence_rows = []
for key, entry in (("C6", e6), ("C7", e7), ("C9", e9)):
    ev = entry["evidence"]
    evidence_rows.append({"claim": key, "models": ev.get("models", ev.get("transfers")),
                          "correct": ev["correct"], "wrong": ev["wrong"], "width": entry["width"],
                          "gate": "passed" if entry["gate"]["passed"] else "failed"})
display(book.table(pd.DataFrame(evidence_rows),
                   {"claim": "claim", "models": ("models (C9: transfers) used", "d"),
                    "correct": ("fewest correct answers", "d"), "wrong": ("fewest wrong answers", "d"),
                    "width": ("interval width", ".3f"), "gate": "evidence gate"},
                   caption="The evidence behind each QA verdict"))
gate_reasons = [f"- **{key}**: {entry['gate']['reason']}." for key, entry in (("C6", e6), ("C7", e7), ("C9", e9))
                if not entry["gate"]["passed"]]
glue("qa_gate_reasons", Markdown("Every QA claim passed its evidence gate." if not gate_reasons else
                                 "Why a gate failed (the verdict is then *inconclusive*):\n\n" + "\n".join(gate_reasons)),
     display=False)
dropped = {f"{SHORT.get(n, n)} on {NAMES[headline.CLAIM_SCORES[c][0]]}": why
           for c, e in (("C6", e6), ("C7", e7)) for n, why in e["details"]["dropped"].items()}
glue("qa_dropped", Markdown(
    "No model was left out of C6 or C7." if not dropped else
    "Left out for lack of evidence (fewer than " + str(MIN_PER_CLASS) + " answers of a kind): " +
    "; ".join(f"{k} ({v})" for k, v in dropped.items()) + "."), display=False)
diff_rows = []
for key, entry in (("C6", e6), ("C7", e7)):
    best = entry["details"]["best_method"]
    measured = entry["evidence"]["models"] > 0  # else the details hold placeholders, not differences
    for other, (dv, lo, hi) in entry["details"]["differences"].items():
        diff_rows.append({"claim": key, "difference": f"{score_name(best)} − {score_name(other)}",
                          "value": dv if measured else np.nan, "CI": ci_text(lo, hi) if measured else "—"})
display(book.table(pd.DataFrame(diff_rows), {"claim": "claim", "difference": "AUROC difference",
                                             "value": ("mean over models",
                                                       lambda v: f"{v:+.3f}" if np.isfinite(v) else "—"),
                                             "CI": ("95% CI (paired)", "", True)},
                   caption="Paired AUROC differences: the claimed best method minus each other method"))
SHORT_VERDICT = {"reproduced": "yes", "partly reproduced": "partly", "not reproduced": "no", "inconclusive": "?"}
part_rows = [{"part": p["id"], "statement": p["statement"],
              "measured": f"{p['value']:.3f} {ci_text(*p['ci'])}", "verdict": p["verdict"], "rule": p["rule"]}
             for e in (e6, e7) for p in e["parts"]]
display(book.table(pd.DataFrame(part_rows), {"part": "part", "statement": "the paper says",
                                             "measured": ("measured [95% CI]", "", True), "verdict": "verdict",
                                             "rule": "rule"},
                   caption="C6 and C7 split into the statements they make (primary reading); the claim's verdict "
                           "is derived from its parts: " + claims.DERIVE_TEXT))


def reading_rows(entry: dict, dataset: str) -> pd.DataFrame:
    """One row per reading: each part's measured value and verdict, the claim's verdict."""
    rows = []
    for r in entry["readings"]:
        fields = dict(kv.split("=", 1) for kv in r["reading"].split(", "))
        row = {"grader": readings.GRADERS[dataset][fields["grader"]].text, "p": fields["p"],
               "combined": fields["combined"],
               **{k: f"{r['values'][k][0]:{'.3f' if headline.PART_SCORES[k][1] == 'level' else '+.3f'}} "
                     f"({SHORT_VERDICT[v]})" for k, v in r["parts"].items()},
               entry["claim"]: SHORT_VERDICT[r["verdict"]] + (" (primary)" if r["primary"] else "")}
        rows.append(row)
    return pd.DataFrame(rows)


for entry, d in ((e6, "truthfulqa"), (e7, "triviaqa")):
    frame = reading_rows(entry, d)
    display(book.table(frame, {c: c for c in frame.columns},
                       caption=f"{entry['claim']} under every reading ({NAMES[d]}): {entry['robustness']['text']}"))
rows9 = [{"reading": r["reading"], "value": f"{r['values']['C9'][0]:.3f} {ci_text(*r['values']['C9'][1:])}",
          "C9": SHORT_VERDICT[r["verdict"]] + (" (primary)" if r["primary"] else "")} for r in e9["readings"]]
display(book.table(pd.DataFrame(rows9), {"reading": "reading (graders, p)",
                                         "value": ("transferred balanced accuracy [95% CI]", "", True), "C9": "C9"},
                   caption=f"C9 under every reading that changes its number: {e9['robustness']['text']}"))
for key, entry in (("c6", e6), ("c7", e7), ("c9", e9)):
    glue(f"{key}_robustness", entry["robustness"]["text"], display=False)
    glue(f"{key}_n_readings", len(entry["readings"]), display=False)
for p_entry in e6["parts"] + e7["parts"]:
    glue(f"{p_entry['id'].lower()}_verdict", p_entry["verdict"], display=False)
    glue(f"{p_entry['id'].lower()}_value", float(p_entry["value"]), display=False)

# The hand labels as the ground truth, on the audited answers (weighted back to each stratum's population).
AUDIT_SCORES = ["epistemic", "combined", "grad_log_p", "p_true", "ln_predictive_entropy", "semantic_entropy"]
if audit_ok:
    hand = qa_audit.audited_aurocs(audit_labels, tables, AUDIT_SCORES, n_boot=min(n_boot, 1000), seed=seed)
    hand_tab = hand.assign(model=lambda f: f["model"].map(lambda m: SHORT.get(m, m)),
                           dataset=lambda f: f["dataset"].map(NAMES), score=lambda f: f["score"].map(score_name),
                           value=lambda f: [f"{a:.2f} {ci_text(lo, hi)}" for a, lo, hi in
                                            zip(f["auroc"], f["lo"], f["hi"])])
    hand_wide = hand_tab.pivot_table(index=["dataset", "score"], columns="model", values="value", aggfunc="first",
                                     sort=False).reset_index()
    display(book.table(hand_wide, {c: (str(c), "", True) if c not in ("dataset", "score") else str(c)
                                   for c in hand_wide.columns},
                       caption="AUROC for the hand labels on the audited answers (about 100 per model and dataset: "
                               "wide intervals, no verdict rests on them)"))
cap_tab = verdicts.cap_summary(tables, max_new_tokens, ["epistemic", "combined", "grad_log_p", "p_true"],
                               min_per_class=MIN_PER_CLASS, n_boot=n_boot, seed=seed, models=models)
capped = {(n, d): float((tables[n, d]["stop_reason"] == "max_new_tokens").mean()) for n in models for d in DATASETS}
glue("cap_share_text", "; ".join(f"{SHORT.get(n, n)} on {NAMES[d]} {v:.0%}" for (n, d), v in capped.items()),
     display=False)
display(book.table(cap_tab.assign(dataset=lambda f: f["dataset"].map(NAMES), score=lambda f: f["score"].map(score_name),
                                  all_=lambda f: [f"{a:.3f} {ci_text(lo, hi)}" for a, lo, hi in
                                                  zip(f["auroc"], f["lo"], f["hi"])],
                                  uncapped=lambda f: [f"{a:.3f} {ci_text(lo, hi)}" for a, lo, hi in
                                                      zip(f["auroc_uncapped"], f["lo_uncapped"], f["hi_uncapped"])]),
                   {"dataset": "dataset", "score": "score", "all_": ("all answers", "", True),
                    "uncapped": (f"answers shorter than the {max_new_tokens}-token cap", "", True)},
                   caption="Mean AUROC with and without the answers that hit the token cap"))

c9_diff = e9["details"]["difference"]
glue("c9_diff", float(c9_diff[0]), display=False)
glue("c9_diff_lo", float(c9_diff[1]), display=False)
glue("c9_diff_hi", float(c9_diff[2]), display=False)

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
def against(point: float, lo: float, hi: float, ref: float) -> str:
    """Where ``ref`` lies relative to an estimate's interval, in words."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "cannot be compared (no interval)"
    return "above the interval" if ref > hi else "below the interval" if ref < lo else "inside the interval"


def chance_word(lo: float, hi: float) -> str:
    """An AUROC interval against chance (0.5), in words."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undefined"
    return "better than chance" if lo > 0.5 else "worse than chance" if hi < 0.5 else "not distinguishable from chance"


n_q = {d: len(subsets[d]) for d in DATASETS}


def coverage(d: str) -> str:
    """How many of a dataset's questions this build has, and why not all."""
    if n_q[d] == len(all_items[d]):
        return f"all {n_q[d]:,} {NAMES[d]} questions"
    why = ("the campaign is still filling the store" if reading_only else
           f"a random subset: the {profile} profile; the full profile uses all")
    return f"{n_q[d]:,} of the {len(all_items[d]):,} {NAMES[d]} questions ({why})"


glue("scale_coverage", Markdown("The numbers in this section rest on " + " and ".join(map(coverage, DATASETS)) +
                                ", per model."), display=False)

# (1) Do the models know the answers? Accuracy and the number of correct answers.
know = []
for name in models:
    parts = [f"{tables[name, d]['correct'].mean():.0%} of {NAMES[d]} ({int(tables[name, d]['correct'].sum()):,} of "
             f"{len(tables[name, d]):,})" for d in DATASETS]
    know.append(f"{SHORT.get(name, name)} answers {' and '.join(parts)} correctly")
glue("scale_know", Markdown("; ".join(know)), display=False)

# (2) Is there any signal? Claim methods whose mean AUROC interval lies above chance, per dataset.
signal = {}
for d in DATASETS:
    above = [m for m in CLAIM_METHODS if np.isfinite(macro_res[d][m][1]) and macro_res[d][m][1] > 0.5]
    best_d = headline.best_score(macro_res[d])
    if not np.isfinite(macro_res[d][best_d][0]):
        signal[d] = (f"on {NAMES[d]} no method can be evaluated: no model has {MIN_PER_CLASS} right and "
                     f"{MIN_PER_CLASS} wrong answers in this build")
        continue
    signal[d] = (f"on {NAMES[d]} {len(above)} of the {len(CLAIM_METHODS)} methods rank wrong answers above right "
                 f"ones better than chance (interval above 0.5)"
                 + (f": {', '.join(f'*{score_name(m)}*' for m in above)}" if above else "")
                 + f"; the best is *{score_name(best_d)}* at {macro_res[d][best_d][0]:.3f} "
                   f"{ci_text(*macro_res[d][best_d][1:3])}")
glue("scale_signal", Markdown("- " + ";\n- ".join(signal[d] for d in DATASETS) + "."), display=False)

# (3) The p² factor: epistemic against the sequence-probability baseline (−log p), per dataset.
mirror = []
for d in DATASETS:
    e, q = macro_res[d]["epistemic"], macro_res[d]["max_seq_prob"]
    if np.isfinite(e[0]) and np.isfinite(q[0]):
        mirror.append(f"{NAMES[d]}: epistemic {e[0]:.3f}, −log p {q[0]:.3f}, sum {e[0] + q[0]:.3f}")
glue("scale_mirror", Markdown("; ".join(mirror) if mirror else "not measurable in this build"), display=False)
rho_p_len = [spearmanr(t["p"], t["n_tokens"]).statistic for t in tables.values()]
glue("rho_p_len_min", float(np.nanmin(rho_p_len)), display=False)
glue("rho_p_len_max", float(np.nanmax(rho_p_len)), display=False)

# The same in one picture: each claim method's mean AUROC with its interval, per dataset.
fig, axes = book.subplots(1, len(DATASETS), panel_height=3.4, sharey=True, squeeze=False)
order = list(CLAIM_METHODS)[::-1]
for ax, d in zip(axes[0], DATASETS):
    for y, m in enumerate(order):
        v, lo, hi = macro_res[d][m]
        if np.isfinite(v):
            ax.errorbar(v, y, xerr=[[v - lo], [hi - v]], fmt="o", ms=4, capsize=2,
                        color="C3" if m in ("epistemic", "aleatoric", "combined") else "C0")
    ax.axvline(0.5, color="k", ls=":", lw=0.8)
    if d == "truthfulqa":
        ax.plot([0.63], [order.index("combined")], marker="*", ms=10, color="C1", ls="none")  # the paper's value
    ax.set_title(NAMES[d])
fig.supxlabel("mean AUROC over the models", fontsize=plt.rcParams["axes.labelsize"])
ends = [x for d in DATASETS for m in order for x in macro_res[d][m][1:] if np.isfinite(x)]
axes[0, 0].set_xlim(min([0.3, *ends]) - 0.02, max([0.7, *ends]) + 0.02)  # shared y, so set each panel's x
for ax in axes[0, 1:]:
    ax.set_xlim(axes[0, 0].get_xlim())
axes[0, 0].set_yticks(range(len(order)))
axes[0, 0].set_yticklabels([score_name(m) for m in order])
glue("fig_scale", fig, display=False)
plt.close(fig)

# (4) The paper's reference values against this build's intervals.
c6_ci = e6["ci"]
glue("scale_c6_paper", Markdown(
    f"The paper's TruthfulQA AUROC of 0.63 for the combined score lies "
    f"{against(e6['value'], c6_ci[0], c6_ci[1], 0.63)} measured here ({c6_ci[0]:.2f}–{c6_ci[1]:.2f})"
    if e6["evidence"]["models"] else
    "The paper's TruthfulQA AUROC of 0.63 for the combined score has nothing to be compared with in this build "
    "(no model has enough answers of each kind)"), display=False)
glue("scale_c6_chance", chance_word(*c6_ci) if e6["evidence"]["models"] else "not measurable", display=False)
glue("scale_c7_chance", chance_word(*e7["ci"]) if e7["evidence"]["models"] else "not measurable", display=False)
ptrue = {d: macro_res[d]["p_true"] for d in DATASETS}
glue("scale_ptrue", Markdown("; ".join(f"{NAMES[d]} {v[0]:.3f} {ci_text(*v[1:3])}, {chance_word(v[1], v[2])}"
                                       for d, v in ptrue.items() if np.isfinite(v[0])) or "not measurable"),
     display=False)

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
# Rerun this chapter in the smoke profile with a cap of 4 answer tokens instead of 8:
# `python -m gnuq_core.repro.chapters run 06 --profile smoke --set max_new_tokens=4`
# (about a minute and a half on a 2-core machine, measured with the records recomputed;
# most of it is loading the two models and answering the questions again). Before you
# look: how many answers will hit the cap, and will the epistemic score's rank
# correlation with the answer length (section 5) get stronger or weaker?
# ```
#
# ````{solution} ex06-1
# :class: dropdown
#
# More answers end at the cap rather than at a stop token (compare the "hit the cap"
# column of section 4), and the lengths bunch up at 4 tokens. With lengths nearly equal,
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
# the AUROC falls below 0.5. The gradient term alone does not carry this reversal.
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
