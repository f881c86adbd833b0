"""Chapter 06, QA benchmarks: does the gradient-norm uncertainty of an answer flag a wrong one?

Each model of ``models`` answers the same seeded subset of TruthfulQA and TriviaQA
questions; every question gets one record through the store (`gnuq_core.qa.study.run_dataset`:
greedy answer, gradient pass with its per-group split, P(True), temperature samples), and
TruthfulQA's multiple-choice questions their MC1/MC2 scores. `run` then grades every answer
under every grader (`gnuq_core.qa.grading`, `gnuq_core.qa.readings`), measures the graders
against the hand-labelled audit set (`gnuq_core.qa.audit`), decomposes the epistemic score,
computes every score's AUROC with its bootstrap interval, the per-layer split, the cheap
variants and their cost, the per-category AUROCs and the transfer of a threshold between
models, records claims C6, C7 (with their parts and every reading) and C9
(`gnuq_core.qa.headline`, `gnuq_core.qa.verdicts`), and says what the data can and cannot
show at 135 M–270 M parameters.

Every number the page quotes is in ``Result.values`` under the name the page glues it
under, every table the page shows in ``Result.tables``; the figure functions draw from
``Result.data``.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from IPython.display import Markdown
from scipy.stats import spearmanr

from gnuq_core.chapters.base import COUNT, NONNEG, ChapterParams, Result, param, store_words
from gnuq_core.lm.clustering import EmbeddingClusterer
from gnuq_core.lm.models import load_model
from gnuq_core.options import MAX_THREADS, OPTIONS, Rule
from gnuq_core.qa import audit as qa_audit
from gnuq_core.qa import auroc as evaluation
from gnuq_core import paper
from gnuq_core.qa import grading, headline, readings, scores, table2, transfer, verdicts
from gnuq_core.qa import study as qa_study
from gnuq_core.qa.data import load_qa
from gnuq_core.qa.config import QAConfig
from gnuq_core.qa.multiple_choice import load_mc, stored_mc_scores
from gnuq_core.repro import claims
from gnuq_core.repro import display as book

__all__ = ["Params", "qa_config", "run", "SHORT", "DATASETS", "NAMES", "SCORE_NAMES", "CLAIM_TABLES", "short", "score_name",
           "ci_text", "wide_table", "against", "chance_word", "reading_rows", "audit_labels_of", "figure_lengths",
           "figure_roc", "figure_layers", "figure_scales", "figure_scale"]

SHORT = {"smollm2-135m-instruct": "SmolLM2-135M", "gemma3-270m": "Gemma-3-270M"}
"""The book's short name of each model alias (other models keep their alias)."""
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
DECOMP = ["epistemic", "grad_log_p", "grad_log_p_per_token", "grad_log_p_norm", "aleatoric", "combined",
          "p_true", "mean_token_entropy", "semantic_entropy"]
"""The scores whose rank correlation with p and with the answer length section 5 shows."""
ROC_SCORES = ["epistemic", "aleatoric", "combined", "grad_log_p", "p_true", "semantic_entropy"]
CATEGORY_SCORES = ["combined", "epistemic", "p_true", "semantic_entropy"]
AUDIT_SCORES = ["epistemic", "combined", "grad_log_p", "p_true", "ln_predictive_entropy", "semantic_entropy"]
CAP_SCORES = ["epistemic", "combined", "grad_log_p", "p_true"]
VARIANTS = (("epistemic", "all"), ("epistemic_no_embeddings", "no_embeddings"), ("epistemic_last_block", "last_block"))
PARAMETER_SETS = {"all": "all", "no_embeddings": "all but the embeddings", "last_block": "last block only"}
SHORT_VERDICT = {"reproduced": "yes", "partly reproduced": "partly", "not reproduced": "no", "inconclusive": "?"}
CLAIM_TABLES = ["macro", "claims", "evidence", "differences", "parts", "readings_C6", "readings_C7", "readings_C9",
                "hand_labels", "cap"]
"""The tables of section 10 (the claims), in the order the page shows them (``hand_labels`` only
where the audit applies)."""
THREADS = Rule(minimum=0, maximum=MAX_THREADS, integer=True, why_maximum="4 per core; 0: torch's default")


@dataclass(frozen=True)
class Params(ChapterParams):
    """Chapter 06's parameters (defaults: the paper edition)."""

    CHAPTER = "06_qa_benchmarks"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        # its records are computed here: 2 models x 30 questions, a few seconds each
        "quick": {"n_truthfulqa": 12, "n_triviaqa": 18, "n_samples": 3, "max_new_tokens": 20, "n_mc": 8,
                  "n_boot": 1000, "n_layer_questions": 8, "compute_missing": True, "store_verify": 2},
        "smoke": {"n_truthfulqa": 3, "n_triviaqa": 3, "n_samples": 2, "max_new_tokens": 8, "n_mc": 2, "n_boot": 100,
                  "n_layer_questions": 2, "compute_missing": True, "store_verify": 2},
    }
    seed: int = param(0, OPTIONS["seed"], "question subsets, sampling and bootstrap all derive from it")
    models: list[str] = param(["smollm2-135m-instruct", "gemma3-270m"], Rule(nonempty=True),
                              "aliases of gnuq_core.lm.models")
    n_truthfulqa: int = param(0, NONNEG, "questions per model; 0 means all 817")
    n_triviaqa: int = param(0, NONNEG, "questions per model; 0 means all 2933")
    n_samples: int = param(QAConfig.n_samples, Rule(minimum=1, maximum=OPTIONS["n_samples"].maximum, integer=True,
                                                    why_maximum=OPTIONS["n_samples"].why_maximum),
                           "temperature samples per question for the entropy baselines")
    max_new_tokens: int = param(QAConfig.max_new_tokens, OPTIONS["max_new_tokens"], "answer-length cap, in tokens")
    n_mc: int = param(200, NONNEG, "TruthfulQA MC1/MC2 questions per model; 0 means all")
    n_boot: int = param(2000, COUNT, "bootstrap resamples for every confidence interval")
    n_layer_questions: int = param(0, NONNEG, "answers per model and dataset split by layer; 0 means all")
    embedding_judge: bool = param(True, None, "second TruthfulQA judge with the MiniLM sentence encoder")
    compute_missing: bool = param(False, None, "False reads only the stored records (the paper edition: the "
                                               "campaign fills the store)")
    store_verify: int = param(1, NONNEG, "stored questions recomputed and compared per model and dataset")
    torch_threads: int = param(0, THREADS, "0 keeps the torch default; 1 is faster on a machine shared with other jobs")


# ----------------------------------------------------------------------------- naming and formatting


def short(name: str) -> str:
    """The book's short name of model ``name`` (`SHORT`; the alias itself otherwise)."""
    return SHORT.get(name, name)


def score_name(m: str) -> str:
    """The book's name of score ``m`` (the registry's label when the book has none)."""
    return SCORE_NAMES.get(m) or scores.get(m).label


def ci_text(lo: float, hi: float) -> str:
    """An interval as ``[lo, hi]`` to two decimals; ``—`` when it could not be computed."""
    return f"[{lo:.2f}, {hi:.2f}]" if np.isfinite(lo) and np.isfinite(hi) else "—"


def _same(spec: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Columns already named in words: header = column name, with its format."""
    return {k: (k, f) for k, f in spec.items()}


def _yes_no(v: Any) -> str:
    return "yes" if v else "no"


def wide_table(long: pd.DataFrame, value: str, fmt: str, *, index: str = "score", header: str = "score",
               caption: str | None = None) -> book.Table:
    """``long[value]`` with one row per ``index`` and one column per dataset · model."""
    w = long.pivot_table(index=index, columns=["dataset", "model"], values=value, sort=False)
    w.columns = [f"{d} · {m}" for d, m in w.columns]
    w = w.reset_index()
    if index == "score":
        w["score"] = w["score"].map(score_name)
    return book.table(w, {index: header, **{c: (c, fmt) for c in w.columns[1:]}}, caption=caption)


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


def _interval_texts(values: Sequence[float], los: Sequence[float], his: Sequence[float], fmt: str) -> list[str]:
    """``"value [lo, hi]"`` per row."""
    return [f"{v:{fmt}} {ci_text(lo, hi)}" for v, lo, hi in zip(values, los, his)]


# ----------------------------------------------------------------------------- the records


@dataclass
class _Study:
    """What every section reads: the questions, the records, the score tables."""

    all_items: dict[str, list[Any]]
    subsets: dict[str, list[Any]]
    item_by_id: dict[str, Any]
    runs: dict[tuple[str, str], list[dict[str, Any]]]
    groups: dict[tuple[str, str], dict[str, dict[str, float]]]
    mc_rows: list[dict[str, Any]]
    reading_only: bool
    theta_sq: dict[str, float]
    tables: dict[tuple[str, str], pd.DataFrame] | None = None


def qa_config(model: str, p: Params) -> QAConfig:
    """The `~gnuq_core.qa.engine.QAConfig` chapter 06 runs ``model`` with (the key of its stored
    records), from the chapter's parameters of the same names."""
    return QAConfig(model=model, max_new_tokens=p.max_new_tokens, n_samples=p.n_samples, clusterer="embedding",
                    seed=p.seed)


def _questions(p: Params, out: Result) -> tuple[dict[str, list[Any]], dict[str, list[Any]], list[Any]]:
    """Every question of both datasets, this build's seeded subsets of them and of the MC questions."""
    all_items = {d: load_qa(d) for d in DATASETS}
    sizes = {"truthfulqa": p.n_truthfulqa, "triviaqa": p.n_triviaqa}
    subsets = {d: qa_study.select_items(all_items[d], sizes[d] or None, p.seed) for d in DATASETS}
    mc_subset = qa_study.select_items(load_mc(), p.n_mc or None, p.seed)
    out.values.update(n_tfqa_all=len(all_items["truthfulqa"]), n_tqa_all=len(all_items["triviaqa"]),
                      n_mc=len(mc_subset), n_samples=p.n_samples, max_new_tokens=p.max_new_tokens,
                      n_models=len(p.models))
    return all_items, subsets, mc_subset


def _answer(p: Params, store: Any, subsets: dict[str, list[Any]], mc_subset: list[Any]
            ) -> tuple[dict, list[dict[str, Any]], dict[str, float]]:
    """Each model's records of both datasets (through ``store``), its MC scores and its squared
    parameter norm ‖θ*‖² (tied weights once; C9's normalisation)."""
    from gnuq_core.estimators.core import unique_params

    runs: dict[tuple[str, str], list] = {}
    mc_rows, theta_sq = [], {}
    for name in p.models:
        lm = load_model(name)
        theta_sq[name] = float(sum(float(t.detach().double().pow(2).sum()) for t in unique_params(lm.model)[0].values()))
        config = qa_config(name, p)
        for d in DATASETS:
            runs[name, d] = qa_study.run_dataset(lm, subsets[d], config, progress=False, store=store,
                                                 verify=p.store_verify, read_only=not p.compute_missing)
        mc = stored_mc_scores(lm, name, mc_subset, store=store, verify=p.store_verify)
        mc_rows.append({"model": short(name), "MC1": float(np.mean([m["mc1"] for m in mc])),
                        "MC2": float(np.mean([m["mc2"] for m in mc])), "questions": len(mc)})
        del lm
        gc.collect()
    return runs, mc_rows, theta_sq


def _common(p: Params, store: Any, all_items: dict[str, list[Any]], subsets: dict[str, list[Any]],
            runs: dict[tuple[str, str], list], out: Result) -> tuple[dict, bool]:
    """Keep the questions every model has a record for (all of the subset, unless the paper edition
    reads a store that a campaign is still filling); say what the store holds."""
    stored = {(name, d): len(runs[name, d]) for name in p.models for d in DATASETS}
    groups: dict[tuple[str, str], dict] = {}
    for d in DATASETS:
        common = set.intersection(*({r["id"] for r in runs[name, d]} for name in p.models))
        subsets[d] = [it for it in subsets[d] if it.id in common]
        for name in p.models:
            runs[name, d] = [r for r in runs[name, d] if r["id"] in common]
            groups[name, d] = qa_study.group_norms_of(runs[name, d][:p.n_layer_questions or None])
    out.values.update(n_tfqa=len(subsets["truthfulqa"]), n_tqa=len(subsets["triviaqa"]))
    reading_only = bool(store.check and not p.compute_missing)
    complete = all(len(subsets[d]) == len(all_items[d]) for d in DATASETS)
    coverage = ("" if not reading_only else
                "Every question of both datasets is in the results store. " if complete else
                "The results store does not hold every question yet; the analysis uses the questions every model has "
                "answered (per model: " + "; ".join(f"{short(name)}: {NAMES[d]} {stored[name, d]:,} of "
                                                    f"{len(all_items[d]):,}" for name in p.models for d in DATASETS)
                + "), and the claims' evidence gates (section 10) decide whether that is enough to judge. ")
    out.values["store_state"] = Markdown(coverage + store_words(store,
        "The per-question records (answers, samples, gradient norms, baselines) and the multiple-choice scores",
        ["qa", "qa_mc"]))
    return groups, reading_only


# ----------------------------------------------------------------------------- 2. graders


def _score_tables(p: Params, s: _Study, out: Result) -> dict[tuple[str, str], pd.DataFrame]:
    """One `gnuq_core.qa.study.score_table` per model × dataset (MiniLM judge with ``embedding_judge``),
    with TruthfulQA's careful labels (`gnuq_core.qa.audit.careful_column`); where they are the
    primary reading (they label this build's answers) every TruthfulQA table's ``correct`` is
    theirs and the answers they call unclear are left out of every analysis."""
    embed = None
    if p.embedding_judge:
        enc = EmbeddingClusterer()
        embed = grading.MemoEmbedder(lambda texts: enc.embed(texts).numpy())  # each text encoded once, shared
    labels = qa_audit.careful_labels()
    trivia_labels = qa_audit.careful_labels(TRIVIA_AUDIT) if qa_audit.has_labels(TRIVIA_AUDIT) else None
    tables: dict[tuple[str, str], pd.DataFrame] = {}
    for (name, d), recs in s.runs.items():
        t = qa_study.score_table(recs, items=s.item_by_id, embed=embed, group_norms=s.groups[name, d])
        t.insert(0, "model", short(name))
        if d == "truthfulqa":
            t["correct_careful"] = qa_audit.careful_column(t, name, labels) if len(t) else []
        elif len(t) and trivia_labels is not None and qa_audit.triviaqa_disputes_labelled(t, name, trivia_labels):
            t["correct_careful"] = qa_audit.triviaqa_careful_column(t, name, trivia_labels)
        tables[name, d] = t
    tfqa = [tables[name, "truthfulqa"] for name in p.models]
    first = readings.primary("truthfulqa", readings.graders_in(tfqa, "truthfulqa"))
    agree = qa_audit.careful_agreement(n_boot=p.n_boot, seed=p.seed)
    out.values.update(tfqa_primary=readings.GRADERS["truthfulqa"][first.grader].text,
                      careful_kappa=agree["kappa"], careful_kappa_lo=agree["kappa_lo"], careful_kappa_hi=agree["kappa_hi"],
                      careful_decided=agree["decided"], careful_disagreements=len(agree["disagreements"]))
    out.values.update(_trivia_careful(p, tables, trivia_labels))
    unclear = {name: int(tables[name, "truthfulqa"]["correct_careful"].isna().sum()) for name in p.models}
    out.values["careful_words"] = (
        "they are the primary TruthfulQA label of this build: the " + " and ".join(
            f"{n:,} answers of {short(m)}" for m, n in unclear.items()) + " that careful reading calls unclear (or "
        "that are not the labelled answer) are left out of every TruthfulQA analysis, and the automatic rules below "
        "stay readings" if first.grader == "careful" else
        "this build's answers are not the labelled ones (a preview's other answer cap), so its TruthfulQA verdicts "
        "use the ROUGE rule below as their primary label instead")
    trivia_first = readings.primary("triviaqa", readings.graders_in([tables[m, "triviaqa"] for m in p.models],
                                                                      "triviaqa"))
    out.values["trivia_primary"] = readings.GRADERS["triviaqa"][trivia_first.grader].text
    for d, grader in (("truthfulqa", first.grader), ("triviaqa", trivia_first.grader)):
        if grader != "careful":
            continue
        for name in p.models:  # the careful label is `correct`; unclear answers are left out
            t = tables[name, d]
            t = t[t["correct_careful"].notna()].reset_index(drop=True)
            t["correct"] = t["correct_careful"].astype(bool)
            t["incorrect"] = (~t["correct"]).astype(int)
            tables[name, d] = t
    return tables


TRIVIA_AUDIT = qa_audit.AUDIT_DIR / "triviaqa"
"""The careful labels of the TriviaQA answers the graders dispute (`scripts/blind_triviaqa.py`)."""


def _trivia_careful(p: Params, tables: dict[tuple[str, str], pd.DataFrame], labels: pd.DataFrame | None) -> dict[str, Any]:
    """The TriviaQA careful labels in plain words (``trivia_careful_words``, glued inline) and
    numbers: how many disputed answers, the second reading's agreement (κ), and how often each rule gets a
    decided disputed answer right; where the labels are not (yet) committed, that the
    echo-aware rule stands in for them."""
    n_keys = sum(1 for _ in (TRIVIA_AUDIT / "keys.jsonl").open()) if (TRIVIA_AUDIT / "keys.jsonl").exists() else 0
    used = all("correct_careful" in tables[m, "triviaqa"] for m in p.models)
    if labels is None or not used:
        why = ("are being labelled by careful reading (audit/triviaqa/); until their labels are committed"
               if labels is None else "carry careful labels, but this build's answers are not the labelled ones, so")
        return dict(trivia_disputed=n_keys, trivia_careful_words=(
            f"The {n_keys:,} stored answers on which any two of them disagree {why} the echo-aware rule is the "
            "primary TriviaQA label."))
    right: dict[str, list[bool]] = {g: [] for g in qa_audit.TRIVIAQA_GRADERS}
    for name in p.models:
        t = tables[name, "triviaqa"]
        disputed = t[qa_audit.triviaqa_disputed(t) & t["correct_careful"].notna()]
        for g in right:
            right[g] += list(disputed[g].astype(bool) == disputed["correct_careful"].astype(bool))
    names = {"correct_no_echo": "the echo-aware rule", "correct_contains": "containment", "correct_em": "exact match"}
    n = len(right[qa_audit.TRIVIAQA_GRADERS[0]])
    sides = ", ".join(f"{names[g]} on {sum(v)}" for g, v in sorted(right.items(), key=lambda kv: -sum(kv[1])))
    words = (f"Where they agree, their label stands; the {len(labels):,} stored answers on which any two disagree "
             "were each read and labelled carefully, blind to model, rule and score (audit/triviaqa/, under the "
             "same rubric), and that is the primary TriviaQA label. "
             + (f"Of the {n:,} disputed answers careful reading decided, it sides with {sides}." if n else
                "None of this build's answers is disputed, so here it is the rules' shared label."))
    values: dict[str, Any] = dict(trivia_disputed=len(labels), trivia_rule_right={g: sum(v) for g, v in right.items()},
                                  trivia_rule_n=n)
    if (TRIVIA_AUDIT / "labels_second.jsonl").exists():
        agree = qa_audit.careful_agreement(TRIVIA_AUDIT, n_boot=p.n_boot, seed=p.seed)
        words += (f" An independent second reading of {agree['n']} of them agrees with the first at Cohen's κ "
                  f"{agree['kappa']:.2f} (95 % CI {agree['kappa_lo']:.2f}–{agree['kappa_hi']:.2f}, on the "
                  f"{agree['decided']} both decided).")
        values.update(trivia_kappa=agree["kappa"], trivia_kappa_lo=agree["kappa_lo"], trivia_kappa_hi=agree["kappa_hi"])
    return {**values, "trivia_careful_words": words}


def _graders(p: Params, tables: dict[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Each alternative grader against the primary one; the echo and tie shares."""
    agree = verdicts.grader_agreement(tables).assign(
        model=lambda f: f["model"].map(short), dataset=lambda f: f["dataset"].map(NAMES),
        grader=lambda f: [readings.GRADERS[d][g].text for d, g in zip(f["dataset"].map(
            {v: k for k, v in NAMES.items()}), f["grader"])])
    echo = {name: float(tables[name, "triviaqa"]["correct_contains"].mean() - tables[name, "triviaqa"]["correct_no_echo"].mean())
            for name in p.models}
    ties = {name: float(tables[name, "truthfulqa"]["rouge_tie"].mean()) for name in p.models}
    out.values.update(echo_share_smollm2=echo.get("smollm2-135m-instruct", 0.0), tie_share_max=max(ties.values()),
                      agree_min=float(agree["agreement"].min()), agree_max=float(agree["agreement"].max()))
    rouge = agree[(agree["dataset"] == NAMES["truthfulqa"]) & (agree["grader"] == readings.GRADERS["truthfulqa"]
                                                             ["rouge"].text)]
    out.values.update(rouge_kappa_min=float(rouge["kappa"].min()) if len(rouge) else float("nan"),
                      rouge_kappa_max=float(rouge["kappa"].max()) if len(rouge) else float("nan"))
    out.tables["agreement"] = book.table(
        agree, {"model": "model", "dataset": "dataset", "grader": "alternative grader",
                "primary_accuracy": ("accuracy, primary", ".3f"), "accuracy": ("accuracy, alternative", ".3f"),
                "agreement": ("agreement", ".2f"), "kappa": ("Cohen's κ", ".2f"), "n": ("answers", ",d")},
        caption="Each alternative grader against the primary one")


def audit_labels_of(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], labels: pd.DataFrame | None = None
                    ) -> pd.DataFrame:
    """The audit's hand labels (`gnuq_core.qa.audit.load_labels` unless ``labels`` is given) that are
    about this build's answers: its models, its answer configuration, its questions."""
    audit_labels = qa_audit.load_labels() if labels is None else labels
    audit_config = {"max_new_tokens": p.max_new_tokens, "n_samples": p.n_samples, "seed": p.seed}
    audit_labels = audit_labels[audit_labels["model"].isin(p.models)
                                & (audit_labels["config"].map(lambda c: c == audit_config))]
    return audit_labels[[i in set(tables[m, d]["id"]) for m, d, i in
                         zip(audit_labels["model"], audit_labels["dataset"], audit_labels["id"])]]


def _graded(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame]) -> dict[str, dict[tuple[str, str], bool]]:
    """``{"dataset:grader": {(model, id): correct}}`` for every grader a table holds."""
    graded = {}
    for d in DATASETS:
        for g in readings.graders_in([tables[name, d] for name in p.models], d):
            col = {}
            for name in p.models:
                t = tables[name, d].set_index("id")
                lab = readings.label_column(t, d, g)
                col.update({(name, i): bool(lab[i] == 0) for i in t.index if not np.isnan(lab[i])})
            graded[f"{d}:{g}"] = col
    return graded


def primary_grader(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], d: str) -> str:
    """The primary grader of dataset ``d`` in this build (`gnuq_core.qa.readings.primary` of the
    graders every model's table holds)."""
    return readings.primary(d, readings.graders_in([tables[m, d] for m in p.models], d)).grader


def _audit_findings(prim: pd.DataFrame, audit_labels: pd.DataFrame, audit_ok: bool, profile: str,
                    first: Mapping[str, str]) -> str:
    """What the audit says about the primary graders (Markdown), or why this build cannot say."""
    if not audit_ok:
        return ("*The audit's labels are about the answers of the paper edition (answer cap 32 tokens, 10 samples, "
                f"seed 0); this build's answers are others ({profile} profile), so the audit is not applied here.*")
    parts = []
    for d in DATASETS:
        rows = prim[prim["dataset"] == d]
        text = ", ".join(f"{short(m)} {p:.2f} {ci_text(lo, hi)}" for m, p, lo, hi in
                         zip(rows["model"], rows["precision"], rows["precision_lo"], rows["precision_hi"]))
        rec = ", ".join(f"{short(m)} {p:.2f}" for m, p in zip(rows["model"], rows["recall"]))
        acc = ", ".join(f"{short(m)} {a:.0%}" for m, a in zip(rows["model"], rows["true_accuracy"]))
        parts.append(f"- **{NAMES[d]}**, primary grader ({readings.GRADERS[d][first[d]].text}): "
                     f"precision {text}; recall {rec}. By the hand labels, {acc} of the answers are correct.")
    return (f"{len(audit_labels):,} audited answers ({int((audit_labels['label'] == 'unclear').sum())} unclear):\n\n"
            + "\n".join(parts))


def _audit(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], profile: str, out: Result
           ) -> tuple[pd.DataFrame, bool]:
    """Each grader's precision and recall for "correct" against the hand-labelled audit set."""
    audit_labels = audit_labels_of(p, tables)
    audit_ok = len(audit_labels) > 0  # the labels are about the paper edition's answers; a preview's answers differ
    quality = (qa_audit.grader_quality(audit_labels, _graded(p, tables), n_boot=p.n_boot, seed=p.seed) if audit_ok
               else pd.DataFrame(columns=["model", "dataset", "grader", "precision", "recall"]))
    quality = quality.loc[np.array([k.split(":")[0] == d for k, d in zip(quality["grader"], quality["dataset"])],
                                   dtype=bool)].copy()
    quality["grader_name"] = [readings.GRADERS[d][k.split(":")[1]].text for k, d in zip(quality["grader"],
                                                                                       quality["dataset"])]
    first = {d: primary_grader(p, tables, d) for d in DATASETS}
    prim = quality.loc[np.array([k.split(":")[1] == first[d]
                                 for k, d in zip(quality["grader"], quality["dataset"])], dtype=bool)]
    out.values["audit_findings"] = Markdown(_audit_findings(prim, audit_labels, audit_ok, profile, first))
    if audit_ok:
        out.tables["audit"] = book.table(
            quality.assign(model=lambda f: f["model"].map(short), dataset=lambda f: f["dataset"].map(NAMES),
                           prec=lambda f: _interval_texts(f["precision"], f["precision_lo"], f["precision_hi"], ".2f"),
                           rec=lambda f: _interval_texts(f["recall"], f["recall_lo"], f["recall_hi"], ".2f")),
            {"model": "model", "dataset": "dataset", "grader_name": "grader",
             "prec": ("precision [95% CI]", "", True), "rec": ("recall [95% CI]", "", True),
             "accuracy": ("its accuracy", ".3f"), "true_accuracy": ("hand-label accuracy", ".3f"),
             "judged": ("audited answers it labels", "d")},
            caption="Each grader's precision and recall for 'correct', against the hand-labelled audit set")
    return audit_labels, audit_ok


def _examples(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Ten random answers per dataset with their labels (tables ``examples_<dataset>``)."""
    rng_show = np.random.default_rng(p.seed)
    for d in DATASETS:
        pool = pd.concat([tables[name, d] for name in p.models], ignore_index=True)
        cols = ["model", "question", "answer", "correct"] + (["correct_em"] if d == "triviaqa" else
                                                            ["rouge_true", "rouge_false"] +
                                                            (["correct_embed"] if p.embedding_judge else []))
        pick = pool.iloc[np.sort(rng_show.permutation(len(pool))[:10])][cols]
        shown = {"model": "model", "question": "question", "answer": "answer",
                 "correct": ("correct (primary)", _yes_no), "correct_em": ("exact match", _yes_no),
                 "rouge_true": ("ROUGE-L, true refs", ".2f"), "rouge_false": ("ROUGE-L, false refs", ".2f"),
                 "correct_embed": ("MiniLM judge", _yes_no)}
        out.tables[f"examples_{d}"] = book.table(pick, {k: v for k, v in shown.items() if k in cols},
                                                 caption=f"{NAMES[d]}: ten random answers")


# ----------------------------------------------------------------------------- 3.–5. accuracy, lengths, decomposition


def _accuracy(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], mc_rows: list[dict[str, Any]],
              out: Result) -> None:
    """Accuracy of the greedy answers (primary labels) and TruthfulQA MC1/MC2 per model."""
    acc_rows = []
    for name in p.models:
        row = {"model": short(name)}
        for d in DATASETS:
            row[f"{NAMES[d]} accuracy"] = float(tables[name, d]["correct"].mean())
        row["TriviaQA exact match"] = float(tables[name, "triviaqa"]["correct_em"].mean())
        acc_rows.append(row)
    acc = pd.DataFrame(acc_rows).merge(pd.DataFrame(mc_rows), on="model")
    for _, r in acc.iterrows():
        key = r["model"].split("-")[0].lower()
        out.values[f"acc_tfqa_{key}"] = r["TruthfulQA accuracy"]
        out.values[f"acc_tqa_{key}"] = r["TriviaQA accuracy"]
        out.values[f"mc1_{key}"] = r["MC1"]
    out.tables["accuracy"] = book.table(acc, _same({"model": "", "TruthfulQA accuracy": ".2f", "TriviaQA accuracy": ".2f",
                                                    "TriviaQA exact match": ".2f", "MC1": ".2f", "MC2": ".2f",
                                                    "questions": "d"}) | {"questions": ("MC questions", "d")})


def _lengths(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Answer lengths per model and dataset, and how many answers hit the cap."""
    len_rows = []
    for d in DATASETS:
        for name in p.models:
            t = tables[name, d]
            len_rows.append({"model": short(name), "dataset": NAMES[d], "median tokens": float(t["n_tokens"].median()),
                             "mean tokens": float(t["n_tokens"].mean()),
                             "hit the cap": int((t["stop_reason"] == "max_new_tokens").sum()), "answers": len(t)})
    lengths = pd.DataFrame(len_rows)
    out.values.update(cap_hits=int(lengths["hit the cap"].sum()), n_answers=int(lengths["answers"].sum()))
    out.tables["lengths"] = book.table(lengths, _same({"model": "", "dataset": "", "median tokens": ".1f",
                                                       "mean tokens": ".1f", "hit the cap": "d", "answers": "d"}))


TABLE2_RULE_READING = {"truthfulqa": "rouge", "triviaqa": "no_echo"}
"""The automatic grader each benchmark's Table 2 cells are also computed under (a reading beside careful labels)."""


def _graded_by(table: pd.DataFrame, dataset: str, grader: str) -> pd.DataFrame:
    """``table`` with ``incorrect`` from ``grader`` (`readings.label_column`), answers it leaves out dropped."""
    incorrect = readings.label_column(table, dataset, grader)
    return table.assign(incorrect=incorrect)[incorrect.notna()].astype({"incorrect": int}).reset_index(drop=True)


TABLE2_BOOT = 300
"""Bootstrap runs per model of each Table 2 cell, as in the paper."""
RHO_EPI_PTRUE_TOL = 0.10


def _table2(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """The paper's Table 2 under the primary reading: each method's AUROC, mean ± std over
    `TABLE2_BOOT` bootstrap runs and our models, beside the paper's; per model; and Spearman
    ρ(epistemic, P(True)) per model and benchmark against the paper's ≈ −0.2."""
    rows, per_model = [], []
    by_rule = {d: [_graded_by(tables[m, d], d, TABLE2_RULE_READING[d]) for m in p.models] for d in table2.COLUMNS.values()}
    for method, score in table2.METHODS.items():
        for column, d in table2.COLUMNS.items():
            c = table2.cell([tables[m, d] for m in p.models], score, n_boot=TABLE2_BOOT, seed=p.seed)
            want = paper.value("2", method, column, "auroc")
            want_std = next(x["std"] for x in paper.cells("2") if x["row"] == method and x["column"] == column)
            verdict, why = table2.verdict(c, want)
            r = table2.cell(by_rule[d], score, n_boot=TABLE2_BOOT, seed=p.seed)
            rows.append({"method": method, "benchmark": column, "paper": f"{want:.2f} ± {want_std:.2f}",
                         "ours": f"{c.mean:.2f} ± {c.std:.2f}", "verdict": verdict, "why": why, "mean": c.mean,
                         "std": c.std, "want": want, "rule_reading": [r.mean, r.mean - 2 * r.std, r.mean + 2 * r.std,
                                                                      table2.verdict(r, want)[0]]})
            per_model.append({"benchmark": column, "method": method,
                              **{short(m): v for m, v in zip(p.models, c.per_model)}})
    t2 = pd.DataFrame(rows)
    out.tables["table2"] = book.table(t2[["method", "benchmark", "paper", "ours", "verdict"]], {
        "method": "method", "benchmark": "benchmark", "paper": "paper (mean ± std)",
        "ours": ("ours (mean ± std)", "", True), "verdict": "verdict"},
        caption=f"The paper's Table 2 beside ours: AUROC for a wrong answer, mean ± std over {TABLE2_BOOT} bootstrap "
                "runs and the models")
    pm = pd.DataFrame(per_model).sort_values("benchmark", kind="stable", key=lambda b: b != "TriviaQA")
    out.tables["table2_models"] = book.table(pm, {"benchmark": "benchmark", "method": "method",
                                                  **{short(m): (short(m), ".3f") for m in p.models}},
                                             caption="Table 2 per model: mean AUROC over the bootstrap runs")
    claims.record_cells("Table 2", [
        {"column": r.benchmark, "row": r.method, "statistic": "AUROC", "paper": r.want, "ours": r.mean,
         "lo": r.mean - 2 * r.std, "hi": r.mean + 2 * r.std, "verdict": r.verdict, "why": r.why,
         "tolerance": f"±{table2.TOLERANCE:.2f} or within 2 of our std", "anchor": "table-2",
         "interval": "mean ± 2 std over bootstrap runs and models",
         "readings": {"ours, graded by rule": r.rule_reading}} for r in t2.itertuples()])
    changed = [f"{r.method} on {r.benchmark}" for r in t2.itertuples() if r.rule_reading[3] != r.verdict]
    out.values["t2_rule_changes"] = (
        f"Graded by rule instead (TruthfulQA: {readings.GRADERS['truthfulqa'][TABLE2_RULE_READING['truthfulqa']].text};"
        f" TriviaQA: {readings.GRADERS['triviaqa'][TABLE2_RULE_READING['triviaqa']].text}), "
        + (f"the verdict changes for {len(changed)} of {len(t2)} cells: {', '.join(changed)}" if changed
           else "no cell's verdict changes"))
    counts = t2["verdict"].value_counts()
    best = {column: t2[t2["benchmark"] == column].sort_values("mean").iloc[-1]["method"] for column in table2.COLUMNS}
    out.values.update(t2_rule=table2.RULE, t2_boot=TABLE2_BOOT, t2_cells=len(t2),
                      t2_reproduced=int(counts.get("reproduced", 0)), t2_not=int(counts.get("not reproduced", 0)),
                      t2_best_tqa=best["TriviaQA"], t2_best_tfqa=best["TruthfulQA"])
    _rho_epistemic_ptrue(p, tables, out)
    _significance(p, tables, out)
    _per_model_statements(p, tables, out)


TABLE2_BASELINES = ("P(True)", "Semantic entropy", "Naïve entropy")
"""The baselines of the paper's per-model statements (its Table 11)."""


def _per_model_statements(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """The paper's Table 11 statements, model by model: combined against the best baseline (the one
    with the highest AUROC for that model), with a paired bootstrap interval; and whether aleatoric
    or epistemic does better. On par: the difference's interval reaches 0 or above; the reverse:
    the best baseline significantly better (the interval wholly below 0)."""
    rows = []
    baselines = [table2.METHODS[b] for b in TABLE2_BASELINES]
    for d in DATASETS:
        for m in p.models:
            t = tables[m, d]
            tests = headline.paired_tests([t], "combined", baselines, min_per_class=claims.MIN_PER_CLASS,
                                          n_boot=p.n_boot, seed=p.seed)
            tests = [r for r in tests if np.isfinite(r["difference"])]
            ae = headline.paired_tests([t], "aleatoric", ["epistemic"], min_per_class=claims.MIN_PER_CLASS,
                                       n_boot=p.n_boot, seed=p.seed)[0]
            if not tests:
                continue
            best = min(tests, key=lambda r: r["difference"])  # the lowest combined − b: the best baseline
            reading = ("on par or better" if best["hi"] >= 0 else "the best baseline is better")
            helps = ("aleatoric" if ae["lo"] > 0 else "epistemic" if ae["hi"] < 0 else "neither significantly")
            rows.append({"benchmark": NAMES[d], "model": short(m), "baseline": score_name(best["baseline"]),
                         "difference": best["difference"], "CI": ci_text(best["lo"], best["hi"]), "reading": reading,
                         "helps": helps, "ae": ae["difference"], "dataset": d})
    pm = pd.DataFrame(rows, columns=["benchmark", "model", "baseline", "difference", "CI", "reading", "helps", "ae",
                                     "dataset"])
    out.tables["per_model_statements"] = book.table(pm, {
        "benchmark": "benchmark", "model": "model", "baseline": "best baseline",
        "difference": ("combined − best baseline", "+.3f"), "CI": ("95% CI", "", True), "reading": "combined is",
        "ae": ("aleatoric − epistemic", "+.3f"), "helps": "does better"},
        caption="The paper's per-model statements (its Table 11): combined against each model's best baseline")
    tf, tq = pm[pm.dataset == "truthfulqa"], pm[pm.dataset == "triviaqa"]
    par = int((tf.reading == "on par or better").sum())
    reverse = int((tq.reading == "the best baseline is better").sum())
    dependent = any(g.helps.nunique() > 1 for _, g in pm.groupby("dataset"))
    out.values.update(
        pm_par=par, pm_n_tfqa=len(tf), pm_reverse=reverse, pm_n_tqa=len(tq),
        pm_tfqa_verdict=("reproduced" if len(tf) and par == len(tf) else "not reproduced" if len(tf) else "inconclusive"),
        pm_tqa_verdict=("reproduced" if len(tq) and reverse > len(tq) / 2 else "not reproduced" if len(tq)
                        else "inconclusive"),
        pm_dependent_verdict="reproduced" if dependent else "not reproduced",
        pm_helps=", ".join(f"{r.model} on {r.benchmark}: {r.helps}" for r in pm.itertuples()))


SIGNIFICANCE_LEVEL = 0.01
"""The paper's level for "significantly outperforms" (after Benjamini–Hochberg)."""


def _significance(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Combined against P(True) and each entropy baseline per benchmark: paired bootstrap difference of the
    mean AUROC over models, two-sided p, Benjamini–Hochberg over the baselines (the paper's Appendix G.7)."""
    rows = []
    for d in DATASETS:
        for r in headline.paired_tests([tables[m, d] for m in p.models], "combined",
                                       ["p_true", *headline.ENTROPY_BASELINES], min_per_class=claims.MIN_PER_CLASS,
                                       n_boot=p.n_boot, seed=p.seed):
            rows.append({"benchmark": NAMES[d], "baseline": score_name(r["baseline"]), "difference": r["difference"],
                         "CI": ci_text(r["lo"], r["hi"]), "p": r["p"], "p (BH)": r["p_bh"], "dataset": d})
    sig = pd.DataFrame(rows, columns=["benchmark", "baseline", "difference", "CI", "p", "p (BH)", "dataset"])
    out.tables["significance"] = book.table(sig.drop(columns="dataset"), {
        "benchmark": "benchmark", "baseline": "baseline", "difference": ("combined − baseline", "+.3f"),
        "CI": ("95% CI", "", True), "p": ("p", ".3g"), "p (BH)": ("p, Benjamini–Hochberg", ".3g")},
        caption="Combined against each baseline: paired bootstrap differences of the mean AUROC over models")
    tf = sig[sig["dataset"] == "truthfulqa"]
    wins = int(((tf["p (BH)"] < SIGNIFICANCE_LEVEL) & (tf["difference"] > 0)).sum())
    losses = int(((tf["p (BH)"] < SIGNIFICANCE_LEVEL) & (tf["difference"] < 0)).sum())
    out.values.update(sig_level=SIGNIFICANCE_LEVEL, sig_wins=wins, sig_losses=losses, sig_n=len(tf),
                      sig_verdict="reproduced" if wins == len(tf) else "not reproduced")


def _classifier_transfer(p: Params, s: _Study, out: Result) -> None:
    """The paper's C9 protocol with our two models: a logistic correctness classifier on (epistemic,
    aleatoric), trained on one model and evaluated on the other, each direction and benchmark, the
    raw epistemic and the one normalised by the squared parameter norm ‖θ*‖²."""
    rows = []
    for d in DATASETS:
        for src, tgt in ((p.models[0], p.models[-1]), (p.models[-1], p.models[0])):
            if src == tgt:
                continue
            for norm in ("raw", "÷ ‖θ*‖²"):
                def features(m: str) -> np.ndarray:
                    t = s.tables[m, d]
                    e = t["epistemic"].to_numpy(float) - (np.log10(s.theta_sq[m]) if norm != "raw" else 0.0)
                    return np.column_stack([e, t["aleatoric"].to_numpy(float)])

                ok = all(np.isfinite(features(m)).all() and s.tables[m, d]["incorrect"].nunique() == 2
                         for m in (src, tgt))
                if not ok:
                    continue
                r = transfer.classifier_transfer(features(src), s.tables[src, d]["incorrect"], features(tgt),
                                                 s.tables[tgt, d]["incorrect"], n_boot=min(p.n_boot, 1000), seed=p.seed)
                rows.append({"benchmark": NAMES[d], "trained on → evaluated on": f"{short(src)} → {short(tgt)}",
                             "normalised": norm, "AUROC": r["auroc"], "AUROC CI": ci_text(r["auroc_lo"], r["auroc_hi"]),
                             "balanced accuracy": r["balanced_accuracy"], "BA CI": ci_text(r["ba_lo"], r["ba_hi"]),
                             "flagged": r["flagged"], "at chance or below": r["auroc_lo"] <= 0.5,
                             "inverted": r["auroc_hi"] < 0.5})
    ct = pd.DataFrame(rows, columns=["benchmark", "trained on → evaluated on", "normalised", "AUROC", "AUROC CI",
                                     "balanced accuracy", "BA CI", "flagged", "at chance or below", "inverted"])
    out.tables["classifier_transfer"] = book.table(ct, {
        "benchmark": "benchmark", "trained on → evaluated on": "trained on → evaluated on", "normalised": "epistemic",
        "AUROC": ("AUROC", ".3f"), "AUROC CI": ("95% CI", "", True), "balanced accuracy": ("balanced accuracy", ".3f"),
        "BA CI": ("95% CI ", "", True), "flagged": ("flagged wrong", ".0%")},
        caption="A correctness classifier trained on one model, evaluated on the other")
    out.values.update(ct_n=len(ct), ct_chance=int(ct["at chance or below"].sum()) if len(ct) else 0,
                      ct_all_flagged=int(((ct["flagged"] == 0) | (ct["flagged"] == 1)).sum()) if len(ct) else 0,
                      ct_inverted=int(ct["inverted"].sum()) if len(ct) else 0,
                      ct_verdict="reproduced" if len(ct) and bool(ct["at chance or below"].all()) else
                      "not reproduced" if len(ct) else "inconclusive")


def _rho_epistemic_ptrue(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Spearman ρ between epistemic and P(True) (the confidence, not its registered 1 − P(True)) per
    model and benchmark, with a bootstrap interval over questions, against the paper's ≈ −0.2."""
    target = paper.statement("rho_epistemic_ptrue")["values"][0]
    rows = []
    for (name, d), t in tables.items():
        ok = t["epistemic"].notna() & t["p_true"].notna()
        e, conf = t.loc[ok, "epistemic"].to_numpy(float), 1 - t.loc[ok, "p_true"].to_numpy(float)
        rho = float(spearmanr(e, conf).statistic)
        rng = np.random.default_rng(p.seed)
        boot = [spearmanr(e[i], conf[i]).statistic for i in (rng.integers(0, len(e), len(e)) for _ in range(500))]
        lo, hi = np.quantile(boot, [0.025, 0.975])
        near = lo <= target + RHO_EPI_PTRUE_TOL and hi >= target - RHO_EPI_PTRUE_TOL
        rows.append({"model": short(name), "benchmark": NAMES[d], "ρ": rho, "CI": ci_text(lo, hi),
                     "verdict": "reproduced" if near else "not reproduced"})
    rt = pd.DataFrame(rows)
    out.tables["rho_epi_ptrue"] = book.table(rt, {"model": "model", "benchmark": "benchmark", "ρ": ("ρ", ".2f"),
                                                  "CI": ("95% CI", "", True), "verdict": "verdict"},
                                             caption="Spearman ρ(epistemic, P(True)) per model and benchmark")
    out.values.update(rho_ep_target=target, rho_ep_tol=RHO_EPI_PTRUE_TOL, rho_ep_min=float(rt["ρ"].min()),
                      rho_ep_max=float(rt["ρ"].max()), rho_ep_reproduced=int((rt["verdict"] == "reproduced").sum()),
                      rho_ep_n=len(rt))


def _decomposition(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Spearman ρ of each score of `DECOMP` with p and with the answer length."""
    corr_rows = []
    for (name, d), t in tables.items():
        for m in DECOMP:
            ok = t[m].notna()
            corr_rows.append({"model": short(name), "dataset": NAMES[d], "score": m,
                              "ρ with p": spearmanr(t.loc[ok, m], t.loc[ok, "p"]).statistic,
                              "ρ with length": spearmanr(t.loc[ok, m], t.loc[ok, "n_tokens"]).statistic})
    corr = pd.DataFrame(corr_rows)
    epi_p = corr[corr["score"] == "epistemic"]["ρ with p"]
    gl_p = corr[corr["score"] == "grad_log_p"]["ρ with p"]
    out.values.update(rho_epi_p_min=float(epi_p.min()), rho_epi_p_max=float(epi_p.max()),
                      rho_glp_p_min=float(gl_p.min()), rho_glp_p_max=float(gl_p.max()))
    out.tables["rho_p"] = wide_table(corr, "ρ with p", ".2f",
                                     caption="Spearman ρ of each score with the answer's probability p")
    out.tables["rho_length"] = wide_table(corr, "ρ with length", ".2f",
                                          caption="Spearman ρ of each score with the answer's length")


# ----------------------------------------------------------------------------- 6. AUROCs


def _aurocs(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Every registered estimator, decomposition and baseline score's AUROC (bootstrap interval) and PRR."""
    auc_rows = []
    for (name, d), t in tables.items():
        for m in scores.names(kind=("estimator", "decomposition", "baseline")):  # the registry, gnuq_core.qa.scores
            if t[m].isna().any():
                continue
            r = evaluation.bootstrap_auroc(t["incorrect"], t[m], n_boot=p.n_boot, seed=p.seed)
            auc_rows.append({"model": short(name), "dataset": NAMES[d], "score": m, "AUROC": r.auroc,
                             "CI low": r.lo, "CI high": r.hi,
                             "PRR": evaluation.prr(t["correct"].astype(float), t[m]),
                             "n": r.n, "wrong": r.n_incorrect})
    aucs = pd.DataFrame(auc_rows)
    out.tables["auroc"] = wide_table(aucs, "AUROC", ".3f", caption="AUROC for predicting a wrong answer")
    out.tables["auroc_full"] = book.table(
        aucs.assign(score=aucs["score"].map(score_name)),
        _same({"model": "", "dataset": "", "score": "", "AUROC": ".3f", "CI low": ".2f", "CI high": ".2f",
               "PRR": ".2f", "n": "d"}) | {"n": ("answers", "d"), "wrong": ("wrong", "d")})


def _ablation(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """The three estimators under the sequence p and the length-normalised p̄."""
    abl_rows = []
    for (name, d), t in tables.items():
        for m in scores.names(kind="estimator"):  # each beside its "_norm" twin (kind "normalised")
            row = {"model": short(name), "dataset": NAMES[d], "score": m}
            for suffix, label in (("", "sequence p"), ("_norm", "normalised p̄")):
                r = evaluation.bootstrap_auroc(t["incorrect"], t[m + suffix], n_boot=p.n_boot, seed=p.seed)
                row[f"AUROC ({label})"] = r.auroc
                row[f"CI ({label})"] = ci_text(r.lo, r.hi)
            abl_rows.append(row)
    ablation = pd.DataFrame(abl_rows)
    out.tables["ablation"] = book.table(
        ablation.assign(score=ablation["score"].map(score_name)),
        _same({"model": "", "dataset": "", "score": "", "AUROC (sequence p)": ".3f", "CI (sequence p)": "",
               "AUROC (normalised p̄)": ".3f", "CI (normalised p̄)": ""}))


# ----------------------------------------------------------------------------- 7.–8. layers, variants, categories


def _layers(s: _Study, out: Result) -> None:
    """Each parameter group's share of ‖∇ log p‖² and the AUROC of its gradient term."""
    tables = s.tables
    share_rows, grp_auc_rows = [], []
    n_split = [int(tables[key]["epistemic_last_block"].notna().sum()) for key in tables]
    out.values.update(n_layer_min=min(n_split), n_layer_max=max(n_split))
    for name, d in s.runs:
        kept = set(tables[name, d]["id"])  # TruthfulQA's unclear answers are out of the tables
        g, epi, wrong = qa_study.group_scores(tables[name, d], {i: v for i, v in s.groups[name, d].items() if i in kept})
        share = g.div(g.sum(axis=1), axis=0).mean()
        share_rows.append(share.rename(f"{short(name)} · {NAMES[d]}"))
        for col in g.columns:
            grp_auc_rows.append({"model": short(name), "dataset": NAMES[d], "group": col,
                                 "AUROC of p²‖∇_group log p‖²": evaluation.auroc(wrong, epi[col]),
                                 "AUROC of ‖∇_group log p‖²": evaluation.auroc(wrong, g[col])})
    shares = pd.DataFrame(share_rows).T
    out.data["shares"] = shares
    emb_share = shares.loc["embeddings"] if "embeddings" in shares.index else pd.Series([np.nan])
    out.values.update(emb_share_min=float(emb_share.min()), emb_share_max=float(emb_share.max()))
    grp_auc = pd.DataFrame(grp_auc_rows)
    out.tables["group_auroc"] = wide_table(grp_auc, "AUROC of ‖∇_group log p‖²", ".3f", index="group",
                                           header="parameter group",
                                           caption="AUROC of each group's gradient term ‖∇_group log p‖²")
    out.tables["group_epistemic_auroc"] = wide_table(
        grp_auc, "AUROC of p²‖∇_group log p‖²", ".3f", index="group", header="parameter group",
        caption="AUROC of the epistemic score restricted to each group, p²‖∇_group log p‖²")


def _variants(p: Params, s: _Study, out: Result) -> None:
    """How well the cheap variants of the epistemic score rank answers (their cost is chapter 07's)."""
    var_rows = []
    for (name, d), t in s.tables.items():
        for m, sel in VARIANTS:
            if m not in t:
                continue
            t = t[t["epistemic_last_block"].notna()]  # the answers that were split by layer
            r = evaluation.bootstrap_auroc(t["incorrect"], t[m], n_boot=p.n_boot, seed=p.seed)
            var_rows.append({"model": short(name), "dataset": NAMES[d], "parameters": sel,
                             "AUROC": r.auroc, "CI": ci_text(r.lo, r.hi),
                             "ρ with full epistemic": spearmanr(t[m], t["epistemic"]).statistic})
    variants = pd.DataFrame(var_rows)
    out.data["variants"] = variants
    out.tables["variants"] = book.table(
        variants.assign(parameters=variants["parameters"].map(PARAMETER_SETS)),
        _same({"model": "", "dataset": "", "parameters": "", "AUROC": ".3f", "CI": "", "ρ with full epistemic": ".2f"}),
        caption="How well the cheaper variants of the epistemic score rank answers")


def _categories(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """Accuracy and AUROCs per TruthfulQA category family."""
    cat_rows = []
    for name in p.models:
        t = tables[name, "truthfulqa"]
        for grp, sub in t.groupby("category_group"):
            row = {"model": short(name), "group": grp, "questions": len(sub), "accuracy": float(sub["correct"].mean())}
            for m in CATEGORY_SCORES:
                row[m] = evaluation.auroc(sub["incorrect"], sub[m]) if sub[m].notna().all() else np.nan
            cat_rows.append(row)
    out.tables["categories"] = book.table(
        pd.DataFrame(cat_rows), {"model": "model", "group": "category family", "questions": ("questions", "d"),
                                 "accuracy": ("accuracy", ".2f"),
                                 **{m: (f"AUROC, {score_name(m)}", ".2f") for m in CATEGORY_SCORES}})


# ----------------------------------------------------------------------------- 9. transfer (C9's measurements)


def _transfer(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> list[Any]:
    """A threshold on log10 ‖∇p‖² fitted on one model and applied to the other (both ways, both
    datasets); the raw scales of the epistemic score per model."""
    tr_rows, tr_results = [], []
    if len(p.models) >= 2:
        for d in DATASETS:
            for src, tgt in ((p.models[0], p.models[1]), (p.models[1], p.models[0])):
                a, b = tables[src, d], tables[tgt, d]
                if a["incorrect"].nunique() < 2 or b["incorrect"].nunique() < 2:
                    continue
                r = transfer.transfer(a["epistemic"], a["incorrect"], b["epistemic"], b["incorrect"],
                                      n_boot=p.n_boot, seed=p.seed)
                tr_results.append(r)
                tr_rows.append({"dataset": NAMES[d], "source → target": f"{short(src)} → {short(tgt)}",
                                "threshold (source)": r.threshold_source, "threshold (target)": r.threshold_target,
                                "flagged on target": r.flagged_fraction, "transferred BA": r.transferred_ba,
                                "CI": ci_text(*r.transferred_ci), "transferred BA (logistic)": r.transferred_logistic_ba,
                                "within-model BA (CV)": r.within_ba,
                                "within-model BA (logistic, CV)": r.within_logistic_ba, "target AUROC": r.auroc_target})
    if tr_rows:
        out.tables["transfers"] = book.table(pd.DataFrame(tr_rows), _same(
            {"dataset": "", "source → target": "", "threshold (source)": ".2f", "threshold (target)": ".2f",
             "flagged on target": ".2f", "transferred BA": ".3f", "CI": "", "transferred BA (logistic)": ".3f",
             "within-model BA (CV)": ".3f", "within-model BA (logistic, CV)": ".3f", "target AUROC": ".3f"})
            | {"CI": ("CI", "", True)})
    scales = pd.DataFrame([{"model": short(name), "dataset": NAMES[d],
                            "median log10 ‖∇p‖²": float(t["epistemic"].median()),
                            "median log10 ‖∇ log p‖²": float(t["grad_log_p"].median()),
                            "IQR log10 ‖∇p‖²": float(t["epistemic"].quantile(0.75) - t["epistemic"].quantile(0.25))}
                           for (name, d), t in tables.items()])
    med = scales.groupby("model")["median log10 ‖∇ log p‖²"].mean()
    med_epi = scales.groupby("model")["median log10 ‖∇p‖²"].mean()
    out.values.update(scale_gap=float(med.max() - med.min()) if len(med) > 1 else float("nan"),
                      scale_gap_epi=float(med_epi.max() - med_epi.min()) if len(med_epi) > 1 else float("nan"))
    out.tables["scales"] = book.table(scales, _same({"model": "", "dataset": "", "median log10 ‖∇p‖²": ".2f",
                                                     "median log10 ‖∇ log p‖²": ".2f", "IQR log10 ‖∇p‖²": ".2f"}))
    return tr_results


# ----------------------------------------------------------------------------- 10. the claims


def _measure_claims(p: Params, profile: str, s: _Study, tr_results: list[Any], out: Result) -> dict[str, Any]:
    """Mean AUROCs over the models; C6, C7 and C9 measured under every reading and recorded."""
    tables = s.tables
    out.values["min_per_class"] = claims.MIN_PER_CLASS
    macro_res = {d: headline.mean_aurocs([tables[name, d] for name in p.models],
                                         scores.names(claim=True) + ["grad_log_p", "grad_log_p_norm", "perplexity"],
                                         min_per_class=claims.MIN_PER_CLASS, n_boot=p.n_boot, seed=p.seed)
                 for d in DATASETS}
    settings = {"profile": profile, "models": p.models, "n_truthfulqa": len(s.subsets["truthfulqa"]),
                "n_triviaqa": len(s.subsets["triviaqa"]), "n_samples": p.n_samples,
                "max_new_tokens": p.max_new_tokens, "n_boot": p.n_boot, "seed": p.seed,
                "labels": "; ".join(f"{NAMES[d]}: {readings.GRADERS[d][primary_grader(p, tables, d)].text}"
                                    for d in DATASETS)}
    kw = {"n_boot": p.n_boot, "seed": p.seed}
    m6, m7 = (headline.auroc_measurement(c, {name: tables[name, headline.CLAIM_SCORES[c][0]] for name in p.models},
                                         settings, **kw) for c in ("C6", "C7"))
    m9 = headline.transfer_measurement(tr_results, settings)
    # every reading of every claim (grader × p × combined), the primary one first
    parts6, readings6, primary6 = verdicts.compound_readings("C6", {n: tables[n, "truthfulqa"] for n in p.models},
                                                             settings, **kw)
    parts7, readings7, primary7 = verdicts.compound_readings("C7", {n: tables[n, "triviaqa"] for n in p.models},
                                                             settings, **kw)
    readings9, primary9 = verdicts.transfer_readings(tables, p.models, settings, **kw)
    return {"macro": macro_res, "m9": m9,
            "C6": claims.record(m6, parts=parts6, readings=readings6, primary=primary6),
            "C7": claims.record(m7, parts=parts7, readings=readings7, primary=primary7),
            "C9": claims.record(m9, readings=readings9, primary=primary9)}


def _claim_values(c: dict[str, Any], out: Result) -> None:
    """The numbers and words section 10 quotes: each claim's value, interval, verdict, best method,
    robustness and parts."""
    macro_res, e6, e7, e9 = c["macro"], c["C6"], c["C7"], c["C9"]
    tf, tq = macro_res["truthfulqa"], macro_res["triviaqa"]
    for d, abbr in (("truthfulqa", "tfqa"), ("triviaqa", "tqa")):
        for m in ("grad_log_p", "perplexity", "epistemic"):
            v = macro_res[d][m][0]
            out.values[f"macro_{abbr}_{m}"] = float(v) if np.isfinite(v) else 0.5
    for key, entry, aurocs in (("c6", e6, tf), ("c7", e7, tq)):
        best = headline.best_score(aurocs)
        out.values.update({f"{key}_value": float(entry["value"]), f"{key}_lo": float(entry["ci"][0]),
                           f"{key}_hi": float(entry["ci"][1]), f"{key}_verdict": entry["verdict"], f"{key}_best": best,
                           f"{key}_best_auroc": float(aurocs[best][0]), f"{key}_best_name": score_name(best)})
    out.values["c7_ptrue"] = float(tq["p_true"][0]) if np.isfinite(tq["p_true"][0]) else 0.5
    out.values.update(c9_value=float(e9["value"]), c9_lo=float(e9["ci"][0]), c9_hi=float(e9["ci"][1]),
                      c9_within=float(c["m9"].details["within_model_balanced_accuracy"]), c9_verdict=e9["verdict"])
    for key, entry in (("c6", e6), ("c7", e7), ("c9", e9)):
        out.values[f"{key}_robustness"] = entry["robustness"]["text"]
        out.values[f"{key}_n_readings"] = len(entry["readings"])
    for p_entry in e6["parts"] + e7["parts"]:
        out.values[f"{p_entry['id'].lower()}_verdict"] = p_entry["verdict"]
        out.values[f"{p_entry['id'].lower()}_value"] = float(p_entry["value"])
    c9_diff = e9["details"]["difference"]
    out.values.update(c9_diff=float(c9_diff[0]), c9_diff_lo=float(c9_diff[1]), c9_diff_hi=float(c9_diff[2]))


def _gates(c: dict[str, Any], out: Result) -> None:
    """The evidence behind each verdict: table, the reasons a gate failed, the models left out."""
    entries = (("C6", c["C6"]), ("C7", c["C7"]), ("C9", c["C9"]))
    evidence_rows = []
    for key, entry in entries:
        ev = entry["evidence"]
        evidence_rows.append({"claim": key, "models": ev.get("models", ev.get("transfers")),
                              "correct": ev["correct"], "wrong": ev["wrong"], "width": entry["width"],
                              "gate": "passed" if entry["gate"]["passed"] else "failed"})
    out.tables["evidence"] = book.table(
        pd.DataFrame(evidence_rows),
        {"claim": "claim", "models": ("models (C9: transfers) used", "d"), "correct": ("fewest correct answers", "d"),
         "wrong": ("fewest wrong answers", "d"), "width": ("interval width", ".3f"), "gate": "evidence gate"},
        caption="The evidence behind each QA verdict")
    gate_reasons = [f"- **{key}**: {entry['gate']['reason']}." for key, entry in entries if not entry["gate"]["passed"]]
    out.values["qa_gate_reasons"] = Markdown(
        "Every QA claim passed its evidence gate." if not gate_reasons else
        "Why a gate failed (the verdict is then *inconclusive*):\n\n" + "\n".join(gate_reasons))
    dropped = {f"{short(n)} on {NAMES[headline.CLAIM_SCORES[k][0]]}": why
               for k, e in entries[:2] for n, why in e["details"]["dropped"].items()}
    out.values["qa_dropped"] = Markdown(
        "No model was left out of C6 or C7." if not dropped else
        "Left out for lack of evidence (fewer than " + str(claims.MIN_PER_CLASS) + " answers of a kind): " +
        "; ".join(f"{k} ({v})" for k, v in dropped.items()) + ".")


def _claim_tables(c: dict[str, Any], out: Result) -> None:
    """Section 10's mean AUROCs, verdicts, paired differences and parts."""
    macro_res, e6, e7, e9 = c["macro"], c["C6"], c["C7"], c["C9"]
    macro_tab = pd.DataFrame({NAMES[d]: {m: "—" if not np.isfinite(macro_res[d][m][0]) else
                                         f"{macro_res[d][m][0]:.3f} {ci_text(*macro_res[d][m][1:3])}"
                                         for m in macro_res[d]} for d in DATASETS})
    out.tables["macro"] = book.table(
        macro_tab.rename_axis("score").reset_index().assign(score=lambda f: f["score"].map(score_name)),
        {"score": "score", **{NAMES[d]: (f"{NAMES[d]}: mean AUROC [95% CI]", "", True) for d in DATASETS}})
    claim_tab = pd.DataFrame([
        {"claim": "C6", "measured": "AUROC of combined, TruthfulQA", "value": e6["value"], "CI": e6["ci"],
         "paper": "0.63, best", "verdict": e6["verdict"]},
        {"claim": "C7", "measured": "AUROC of epistemic, TriviaQA", "value": e7["value"], "CI": e7["ci"],
         "paper": "≈ 0.5; P(True) best", "verdict": e7["verdict"]},
        {"claim": "C9", "measured": "transferred balanced accuracy", "value": e9["value"], "CI": e9["ci"],
         "paper": "chance", "verdict": e9["verdict"]}])
    out.tables["claims"] = book.table(claim_tab, {"claim": "claim", "measured": "measured", "value": ("value", ".3f"),
                                                  "CI": ("95% CI", lambda ci: f"[{ci[0]:.2f}, {ci[1]:.2f}]", True),
                                                  "paper": "paper", "verdict": "verdict"})
    _gates(c, out)
    diff_rows = []
    for key, entry in (("C6", e6), ("C7", e7)):
        best = entry["details"]["best_method"]
        measured = entry["evidence"]["models"] > 0  # else the details hold placeholders, not differences
        for other, (dv, lo, hi) in entry["details"]["differences"].items():
            diff_rows.append({"claim": key, "difference": f"{score_name(best)} − {score_name(other)}",
                              "value": dv if measured else np.nan, "CI": ci_text(lo, hi) if measured else "—"})
    out.tables["differences"] = book.table(
        pd.DataFrame(diff_rows), {"claim": "claim", "difference": "AUROC difference",
                                  "value": ("mean over models", lambda v: f"{v:+.3f}" if np.isfinite(v) else "—"),
                                  "CI": ("95% CI (paired)", "", True)},
        caption="Paired AUROC differences: the claimed best method minus each other method")
    part_rows = [{"part": pe["id"], "statement": pe["statement"], "measured": f"{pe['value']:.3f} {ci_text(*pe['ci'])}",
                  "verdict": pe["verdict"], "rule": pe["rule"]} for e in (e6, e7) for pe in e["parts"]]
    out.tables["parts"] = book.table(
        pd.DataFrame(part_rows), {"part": "part", "statement": "the paper says",
                                  "measured": ("measured [95% CI]", "", True), "verdict": "verdict", "rule": "rule"},
        caption="C6 and C7 split into the statements they make (primary reading); the claim's verdict "
                "is derived from its parts: " + claims.DERIVE_TEXT)


def reading_rows(entry: dict[str, Any], dataset: str) -> pd.DataFrame:
    """One row per reading of a compound claim's ledger ``entry``: each part's measured value and
    verdict, the claim's verdict."""
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


def _reading_tables(c: dict[str, Any], out: Result) -> None:
    """Each claim under every reading (tables ``readings_C6``, ``readings_C7``, ``readings_C9``)."""
    for entry, d in ((c["C6"], "truthfulqa"), (c["C7"], "triviaqa")):
        frame = reading_rows(entry, d)
        out.tables[f"readings_{entry['claim']}"] = book.table(
            frame, {col: col for col in frame.columns},
            caption=f"{entry['claim']} under every reading ({NAMES[d]}): {entry['robustness']['text']}")
    e9 = c["C9"]
    rows9 = [{"reading": r["reading"], "value": f"{r['values']['C9'][0]:.3f} {ci_text(*r['values']['C9'][1:])}",
              "C9": SHORT_VERDICT[r["verdict"]] + (" (primary)" if r["primary"] else "")} for r in e9["readings"]]
    out.tables["readings_C9"] = book.table(
        pd.DataFrame(rows9), {"reading": "reading (graders, p)",
                              "value": ("transferred balanced accuracy [95% CI]", "", True), "C9": "C9"},
        caption=f"C9 under every reading that changes its number: {e9['robustness']['text']}")


def _hand_labels(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], audit_labels: pd.DataFrame,
                 out: Result) -> None:
    """The hand labels as the ground truth, on the audited answers (weighted back to each stratum's population)."""
    hand = qa_audit.audited_aurocs(audit_labels, tables, AUDIT_SCORES, n_boot=min(p.n_boot, 1000), seed=p.seed)
    hand_tab = hand.assign(model=lambda f: f["model"].map(short), dataset=lambda f: f["dataset"].map(NAMES),
                           score=lambda f: f["score"].map(score_name),
                           value=lambda f: _interval_texts(f["auroc"], f["lo"], f["hi"], ".2f"))
    hand_wide = hand_tab.pivot_table(index=["dataset", "score"], columns="model", values="value", aggfunc="first",
                                     sort=False).reset_index()
    out.tables["hand_labels"] = book.table(
        hand_wide, {col: (str(col), "", True) if col not in ("dataset", "score") else str(col)
                    for col in hand_wide.columns},
        caption="AUROC for the hand labels on the audited answers (about 100 per model and dataset: "
                "wide intervals, no verdict rests on them)")


def _cap(p: Params, tables: Mapping[tuple[str, str], pd.DataFrame], out: Result) -> None:
    """The share of answers that hit the token cap, and the mean AUROCs without them."""
    cap_tab = verdicts.cap_summary(tables, p.max_new_tokens, CAP_SCORES, min_per_class=claims.MIN_PER_CLASS,
                                   n_boot=p.n_boot, seed=p.seed, models=p.models)
    capped = {(n, d): float((tables[n, d]["stop_reason"] == "max_new_tokens").mean())
              for n in p.models for d in DATASETS}
    out.values["cap_share_text"] = "; ".join(f"{short(n)} on {NAMES[d]} {v:.0%}" for (n, d), v in capped.items())
    out.tables["cap"] = book.table(
        cap_tab.assign(dataset=lambda f: f["dataset"].map(NAMES), score=lambda f: f["score"].map(score_name),
                       all_=lambda f: _interval_texts(f["auroc"], f["lo"], f["hi"], ".3f"),
                       uncapped=lambda f: _interval_texts(f["auroc_uncapped"], f["lo_uncapped"], f["hi_uncapped"],
                                                          ".3f")),
        {"dataset": "dataset", "score": "score", "all_": ("all answers", "", True),
         "uncapped": (f"answers shorter than the {p.max_new_tokens}-token cap", "", True)},
        caption="Mean AUROC with and without the answers that hit the token cap")


# ----------------------------------------------------------------------------- 11. scale


def _coverage_text(profile: str, s: _Study) -> str:
    """How many of each dataset's questions this build has, and why not all."""
    def coverage(d: str) -> str:
        n = len(s.subsets[d])
        if n == len(s.all_items[d]):
            return f"all {n:,} {NAMES[d]} questions"
        why = ("the campaign is still filling the store" if s.reading_only else
               f"a random subset: the {profile} profile; the full profile uses all")
        return f"{n:,} of the {len(s.all_items[d]):,} {NAMES[d]} questions ({why})"

    return "The numbers in this section rest on " + " and ".join(map(coverage, DATASETS)) + ", per model."


def _signal(macro_res: dict[str, dict[str, Any]]) -> str:
    """Per dataset, the claim methods whose mean AUROC interval lies above chance, and the best (Markdown list)."""
    methods = scores.names(claim=True)
    signal = {}
    for d in DATASETS:
        above = [m for m in methods if np.isfinite(macro_res[d][m][1]) and macro_res[d][m][1] > 0.5]
        best_d = headline.best_score(macro_res[d])
        if not np.isfinite(macro_res[d][best_d][0]):
            signal[d] = (f"on {NAMES[d]} no method can be evaluated: no model has {claims.MIN_PER_CLASS} right and "
                         f"{claims.MIN_PER_CLASS} wrong answers in this build")
            continue
        signal[d] = (f"on {NAMES[d]} {len(above)} of the {len(methods)} methods rank wrong answers above right "
                     f"ones better than chance (interval above 0.5)"
                     + (f": {', '.join(f'*{score_name(m)}*' for m in above)}" if above else "")
                     + f"; the best is *{score_name(best_d)}* at {macro_res[d][best_d][0]:.3f} "
                       f"{ci_text(*macro_res[d][best_d][1:3])}")
    return "- " + ";\n- ".join(signal[d] for d in DATASETS) + "."


def _scale(p: Params, profile: str, s: _Study, c: dict[str, Any], out: Result) -> None:
    """Section 11: what the data says at 135 M–270 M parameters (coverage, knowledge, signal, the
    p² factor, the paper's values against this build's intervals)."""
    tables, macro_res, e6, e7 = s.tables, c["macro"], c["C6"], c["C7"]
    know = []
    for name in p.models:
        parts = [f"{tables[name, d]['correct'].mean():.0%} of {NAMES[d]} ({int(tables[name, d]['correct'].sum()):,} "
                 f"of {len(tables[name, d]):,})" for d in DATASETS]
        know.append(f"{short(name)} answers {' and '.join(parts)} correctly")
    mirror = []  # the p² factor: epistemic against the sequence-probability baseline (−log p)
    for d in DATASETS:
        e, q = macro_res[d]["epistemic"], macro_res[d]["max_seq_prob"]
        if np.isfinite(e[0]) and np.isfinite(q[0]):
            mirror.append(f"{NAMES[d]}: epistemic {e[0]:.3f}, −log p {q[0]:.3f}, sum {e[0] + q[0]:.3f}")
    rho_p_len = [spearmanr(t["p"], t["n_tokens"]).statistic for t in tables.values()]
    c6_ci = e6["ci"]
    ptrue = {d: macro_res[d]["p_true"] for d in DATASETS}
    out.values.update(
        scale_coverage=Markdown(_coverage_text(profile, s)), scale_know=Markdown("; ".join(know)),
        scale_signal=Markdown(_signal(macro_res)),
        scale_mirror=Markdown("; ".join(mirror) if mirror else "not measurable in this build"),
        rho_p_len_min=float(np.nanmin(rho_p_len)), rho_p_len_max=float(np.nanmax(rho_p_len)),
        scale_c6_paper=Markdown(
            f"The paper's TruthfulQA AUROC of 0.63 for the combined score lies "
            f"{against(e6['value'], c6_ci[0], c6_ci[1], 0.63)} measured here ({c6_ci[0]:.2f}–{c6_ci[1]:.2f})"
            if e6["evidence"]["models"] else
            "The paper's TruthfulQA AUROC of 0.63 for the combined score has nothing to be compared with in this "
            "build (no model has enough answers of each kind)"),
        scale_c6_chance=chance_word(*c6_ci) if e6["evidence"]["models"] else "not measurable",
        scale_c7_chance=chance_word(*e7["ci"]) if e7["evidence"]["models"] else "not measurable",
        scale_ptrue=Markdown("; ".join(f"{NAMES[d]} {v[0]:.3f} {ci_text(*v[1:3])}, {chance_word(v[1], v[2])}"
                                       for d, v in ptrue.items() if np.isfinite(v[0])) or "not measurable"))


# ----------------------------------------------------------------------------- run


def _study(p: Params, store: Any, out: Result) -> _Study:
    """Sections 1 and 2: the questions, every model's records through ``store``, the score tables."""
    # torch is imported here, not at the top: the chapter runner and `gnuq study` import this
    # module for its Params alone and should start in a fraction of a second.
    import torch

    if p.torch_threads > 0:
        torch.set_num_threads(p.torch_threads)
    torch.manual_seed(p.seed)
    all_items, subsets, mc_subset = _questions(p, out)
    item_by_id = {it.id: it for d in DATASETS for it in all_items[d]}
    runs, mc_rows, theta_sq = _answer(p, store, subsets, mc_subset)
    groups, reading_only = _common(p, store, all_items, subsets, runs, out)
    s = _Study(all_items, subsets, item_by_id, runs, groups, mc_rows, reading_only, theta_sq)
    s.tables = _score_tables(p, s, out)
    return s


def run(p: Params, store: Any, profile: str) -> Result:
    """Compute chapter 06: records, graders, AUROCs, layers, transfer, claims C6, C7 and C9.

    Parameters
    ----------
    p : Params
        The build's parameters.
    store : gnuq_core.store.Store
        Where the per-question records and multiple-choice scores are read and written (the
        results store in the paper edition, the local cache in a preview).
    profile : str
        The profile's name (recorded with the claims; the audit's and coverage's words name it).

    Returns
    -------
    Result
        ``values``: every number and text the page glues (Markdown objects included);
        ``tables``: the tables the page shows, by section (`CLAIM_TABLES`: section 10's);
        ``data``: ``tables`` (score table per model × dataset), ``shares`` (per-group shares of
        ‖∇ log p‖²) and ``macro`` (mean AUROCs per dataset) for the figure functions.
    """
    out = Result()
    s = _study(p, store, out)
    tables = s.tables
    _graders(p, tables, out)
    audit_labels, audit_ok = _audit(p, tables, profile, out)
    _examples(p, tables, out)
    _accuracy(p, tables, s.mc_rows, out)
    _lengths(p, tables, out)
    _decomposition(p, tables, out)
    _aurocs(p, tables, out)
    _table2(p, tables, out)
    _ablation(p, tables, out)
    _layers(s, out)
    _variants(p, s, out)
    _categories(p, tables, out)
    tr_results = _transfer(p, tables, out)
    _classifier_transfer(p, s, out)
    c = _measure_claims(p, profile, s, tr_results, out)
    _claim_values(c, out)
    _claim_tables(c, out)
    _reading_tables(c, out)
    if audit_ok:
        _hand_labels(p, tables, audit_labels, out)
    _cap(p, tables, out)
    _scale(p, profile, s, c, out)
    out.data.update(tables=tables, macro=c["macro"])
    return out


# ----------------------------------------------------------------------------- figures


def _histograms(result: Result, p: Params, column: str, bins: Any, xlabel: str, *, sharey: bool = False) -> Any:
    """Histogram of one score-table ``column``, one panel per dataset, one colour per model."""
    tables = result.data["tables"]
    fig, axes = book.subplots(1, len(DATASETS), panel_height=3.0, sharey=sharey, squeeze=False)
    for ax, d in zip(axes[0], DATASETS):
        for name in p.models:
            ax.hist(tables[name, d][column], bins=bins, alpha=0.6, label=short(name))
        ax.set_title(NAMES[d])
        ax.set_xlabel(xlabel)
    axes[0, 0].set_ylabel("answers")
    axes[0, 0].legend()
    return fig


def figure_lengths(result: Result, p: Params) -> Any:
    """Histogram of answer lengths in tokens, one panel per dataset, one colour per model."""
    return _histograms(result, p, "n_tokens", np.arange(0.5, p.max_new_tokens + 1.5), "answer length (tokens)",
                       sharey=True)


def figure_roc(result: Result, p: Params) -> Any:
    """ROC curves for predicting a wrong answer of `ROC_SCORES`, per model (rows) and dataset (columns)."""
    tables = result.data["tables"]
    fig, axes = book.subplots(len(p.models), len(DATASETS), panel_height=2.9, squeeze=False, sharex=True, sharey=True)
    for i, name in enumerate(p.models):
        for j, d in enumerate(DATASETS):
            ax, t = axes[i, j], tables[name, d]
            for k, m in enumerate(ROC_SCORES):
                if t["incorrect"].nunique() == 2 and t[m].notna().all():
                    fpr, tpr = evaluation.roc(t["incorrect"], t[m])
                    ax.plot(fpr, tpr, color=f"C{k}", label=score_name(m))
            ax.plot([0, 1], [0, 1], "k:", lw=0.8)
            ax.set_title(f"{short(name)} · {NAMES[d]}")
            if i == len(p.models) - 1:
                ax.set_xlabel("false-positive rate")
            if j == 0:
                ax.set_ylabel("true-positive rate")
            if len(ax.lines) == 1:
                ax.text(0.5, 0.3, "only one class:\nno ROC curve", ha="center")
    handles = {h.get_label(): h for ax in axes.flat for h in ax.lines if not h.get_label().startswith("_")}
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=3)
    return fig


def figure_layers(result: Result, p: Params) -> Any:
    """Mean share of ‖∇ log p‖² per parameter group (log scale), one line per model × dataset."""
    shares = result.data["shares"]
    fig, ax = book.subplots(panel_height=3.8)
    for col in shares.columns:
        ax.plot(range(len(shares)), shares[col], marker="o", ms=4, label=col)
    ax.set_xticks(range(len(shares)))
    ax.set_xticklabels(shares.index, rotation=90)
    ax.set_ylabel("mean share of ‖∇ log p‖²")
    ax.set_yscale("log")
    ax.legend(ncol=2)
    return fig


def figure_scales(result: Result, p: Params) -> Any:
    """Histogram of the raw epistemic score log10 ‖∇p‖², one panel per dataset, one colour per model."""
    return _histograms(result, p, "epistemic", 15, "log10 ‖∇θ p‖²")


def figure_scale(result: Result, p: Params) -> Any:
    """Each claim method's mean AUROC over the models with its interval, one panel per dataset
    (red: the paper's gradient scores; the paper's 0.63 for combined on TruthfulQA as a star)."""
    import matplotlib.pyplot as plt  # only for its font sizes; figures are made by gnuq_core.repro.display

    macro_res = result.data["macro"]
    fig, axes = book.subplots(1, len(DATASETS), panel_height=3.4, sharey=True, squeeze=False)
    order = list(scores.names(claim=True))[::-1]
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
    return fig
