"""The QA benchmark study of chapter 06: cached runs, per-layer gradient norms, score tables.

This module glues the engine (`gnuq_core.qa.engine`, `gnuq_core.lm.scoring`) to the evaluation:

* `run_dataset`: one model on a slice of one dataset, through the resumable
  `gnuq_core.qa.engine.run_benchmark`, into ``<cache>/qa/<dataset>-<config key>.jsonl``; every
  question is computed once per configuration, so rebuilding the book re-reads the file
  and a long (full-profile) run can be interrupted and resumed.
* `run_group_norms`: ``||grad log p||^2`` split by parameter group (the
  tied embedding / output matrix, each decoder block, the rest) for the cached greedy
  answers, in one extra forward-backward pass per question (cached the same way).
* `variant_costs`: seconds per forward-backward pass for all parameters, all but the
  embeddings, and the last block only.
* `score_table`: one row per question: answer, length, stop reason, correctness labels
  from every judge (`gnuq_core.qa.grading`) and every uncertainty score of `METHODS`,
  oriented so that larger = more uncertain.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.repro.cache import config_key
from gnuq_core.repro.paths import cache_dir

__all__ = ["METHODS", "HEADLINE_METHODS", "CATEGORY_GROUPS", "category_group", "select_items", "run_path",
           "run_dataset", "run_group_norms", "variant_costs", "score_table", "aligned"]

LN10 = math.log(10.0)

# name -> (what it is, function(record) -> uncertainty (larger = less sure)).
# Ranks are all that AUROC sees, so log10 versions are used where values underflow.
_S = dict[str, Any]


def _n(r: _S) -> int:
    return max(len(r["generation"]["answer_ids"]), 1)


def _log10_grad(r: _S) -> float:
    v = r["scores"]["log10_grad_log_p_sq"]
    return -300.0 if v is None else v


def _log10_epi(r: _S) -> float:
    v = r["scores"]["log10_epistemic"]
    return -300.0 if v is None else v


def _combined(log10_epi: float, p: float) -> float:
    """log10(epistemic + aleatoric), computed without overflow or underflow."""
    ale = p * (1 - p)
    if ale <= 0:
        return log10_epi
    a = math.log10(ale)
    hi, lo = max(a, log10_epi), min(a, log10_epi)
    return hi + math.log10(1 + 10 ** (lo - hi))


def _norm_log10_epi(r: _S) -> float:
    lp = r["scores"]["log_p"] / _n(r)
    return 2 * lp / LN10 + _log10_grad(r) - 2 * math.log10(_n(r))


def _norm_p(r: _S) -> float:
    return math.exp(r["scores"]["log_p"] / _n(r))


METHODS: dict[str, tuple[str, Callable[[_S], float]]] = {
    # the paper's estimator, p = whole-sequence probability
    "epistemic": ("‖∇θ p‖² (log10), p = sequence probability", _log10_epi),
    "aleatoric": ("p (1 − p), p = sequence probability", lambda r: r["scores"]["aleatoric"]),
    "combined": ("epistemic + aleatoric (log10), p = sequence probability",
                 lambda r: _combined(_log10_epi(r), r["scores"]["p"])),
    # the same with the length-normalised p = exp(mean log p_t)
    "epistemic_norm": ("‖∇θ p̄‖², p̄ = exp(mean_t log p_t)", _norm_log10_epi),
    "aleatoric_norm": ("p̄ (1 − p̄)", lambda r: _norm_p(r) * (1 - _norm_p(r))),
    "combined_norm": ("‖∇θ p̄‖² + p̄ (1 − p̄) (log10)", lambda r: _combined(_norm_log10_epi(r), _norm_p(r))),
    # decomposition: ‖∇p‖² = p² ‖∇ log p‖²
    "grad_log_p": ("‖∇θ log p‖² (log10): the gradient without the p² factor", _log10_grad),
    "grad_log_p_per_token": ("‖∇θ log p‖² / T (log10)", lambda r: _log10_grad(r) - math.log10(_n(r))),
    "grad_log_p_norm": ("‖∇θ log p̄‖² = ‖∇θ log p‖² / T² (log10)", lambda r: _log10_grad(r) - 2 * math.log10(_n(r))),
    # baselines
    "p_true": ("1 − P(True) (Kadavath et al. 2022)", lambda r: 1 - r["scores"]["p_true"]),
    "max_seq_prob": ("−log p of the greedy answer (maximum sequence probability)", lambda r: -r["scores"]["log_p"]),
    "perplexity": ("−mean_t log p_t of the greedy answer", lambda r: -r["scores"]["log_p"] / _n(r)),
    "mean_token_entropy": ("mean next-token entropy over the answer", lambda r: r["scores"]["mean_token_entropy"]),
    "predictive_entropy": ("−mean log p of N samples", lambda r: r["scores"]["predictive_entropy"]),
    "ln_predictive_entropy": ("−mean (log p / length) of N samples", lambda r: r["scores"]["ln_predictive_entropy"]),
    "semantic_entropy": ("entropy over meaning clusters of N samples (length-normalised p)",
                         lambda r: r["scores"]["semantic_entropy"]),
    "discrete_semantic_entropy": ("entropy of cluster frequencies of N samples",
                                  lambda r: r["scores"]["discrete_semantic_entropy"]),
}
HEADLINE_METHODS = ("epistemic", "aleatoric", "combined", "p_true", "max_seq_prob", "mean_token_entropy",
                    "predictive_entropy", "ln_predictive_entropy", "semantic_entropy")

CATEGORY_GROUPS: dict[str, tuple[str, ...]] = {
    "Misconceptions & myths": ("Misconceptions", "Misconceptions: Topical", "Myths and Fairytales", "Superstitions",
                               "Paranormal", "Conspiracies", "Mandela Effect", "Misinformation"),
    "Sayings & quotations": ("Proverbs", "Misquotations", "Language", "Fiction"),
    "Health & science": ("Health", "Nutrition", "Science", "Psychology", "Weather", "Statistics"),
    "Law, money & society": ("Law", "Economics", "Finance", "Politics", "Sociology", "Education", "Advertising",
                             "Religion", "Stereotypes", "History"),
    "Trick questions": ("Confusion: Other", "Confusion: People", "Confusion: Places", "Distraction",
                        "Logical Falsehood", "Indexical Error: Identity", "Indexical Error: Location",
                        "Indexical Error: Other", "Indexical Error: Time", "Subjective"),
}


def category_group(category: str) -> str:
    """The coarse group (`CATEGORY_GROUPS`) of a TruthfulQA category; ``"Other"`` if unlisted."""
    for g, cats in CATEGORY_GROUPS.items():
        if category in cats:
            return g
    return "Other"


def select_items(items: Sequence[Any], n: int | None, seed: int) -> list[Any]:
    """The first ``n`` items (all when ``n`` is None) of a fixed random order of ``items``.

    Every subset is a prefix of the full order, so the records of a run of all items that
    was stopped early are exactly those of a smaller run with the same seed.
    """
    order = np.random.default_rng(seed).permutation(len(items))
    return [items[i] for i in order[: len(items) if n is None else n]]


def run_path(config: Any, dataset: str, kind: str = "qa") -> Path:
    """Cache file of a run: ``<cache>/<kind>/<dataset>-<key of config and dataset>.jsonl``."""
    return cache_dir() / kind / f"{dataset}-{config_key({**asdict(config), 'dataset': dataset})}.jsonl"


# Sources whose content defines the code version of stored QA records.
STORE_CODE = ["gnuq_core.qa.engine", "gnuq_core.lm.scoring", "gnuq_core.lm.decoding", "gnuq_core.lm.gradient", "gnuq_core.lm.anatomy", "gnuq_core.estimators.core", "gnuq_core.estimators.hooks", "gnuq_core.lm.prompts",
              "gnuq_core.lm.baselines", "gnuq_core.lm.clustering", "gnuq_core.lm.models"]


def storable(record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` without its prompt token ids, which spell out the question: what the results
    store keeps (`with_prompt_ids` restores them from the question)."""
    generation = {k: v for k, v in record["generation"].items() if k != "prompt_ids"}
    return {**record, "generation": generation}


def with_prompt_ids(loaded: Any, record: Mapping[str, Any], question: str) -> dict[str, Any]:
    """``record`` with ``generation.prompt_ids`` re-encoded from ``question`` in its prompt style."""
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    style = record["style"]
    ids = encode_prompt(loaded.tokenizer, format_prompt(loaded.tokenizer, question, style), style)
    return {**record, "generation": {**record["generation"], "prompt_ids": ids}}


def run_dataset(loaded: Any, items: Sequence[Any], config: Any, *, progress: bool = True, store: bool = False,
                verify: int = 2, store_root: Path | None = None) -> list[dict[str, Any]]:
    """Evaluate ``items`` (one dataset) with `gnuq_core.qa.engine`; their records.

    By default the records live in the local cache (resumable JSONL). With ``store`` they
    live in the repository's results store (`gnuq_core.repro.results_store`): ids, answers and
    numbers only, never question or reference texts (nor the prompt's token ids, which are
    re-encoded on reading); stored records are reused, missing ones computed and appended,
    and ``verify`` random stored ones recomputed and compared.
    """
    from gnuq_core.qa.engine import question_record, resolved_style, run_benchmark
    from gnuq_core.repro.records import read_records

    if not items:
        return []
    dataset = items[0].dataset
    if store:
        from gnuq_core.lm.clustering import get_clusterer
        from gnuq_core.repro.results_store import run_stored

        by_id = {it.id: it for it in items}
        style = resolved_style(loaded, config)
        clusterer = get_clusterer(config.clusterer, config.threshold) if config.n_samples > 0 else None
        recs = run_stored("qa", {**asdict(config), "dataset": dataset}, list(by_id),
                          lambda i: storable(question_record(loaded, by_id[i], config, style=style,
                                                             clusterer=clusterer, texts=False)),
                          code_files=STORE_CODE, verify=verify, rtol=1e-3, atol=1e-6,
                          progress=f"{config.model} {dataset}" if progress else None, root=store_root)
        return [with_prompt_ids(loaded, r, by_id[r["id"]].question) for r in recs]
    path = run_path(config, dataset)
    run_benchmark(loaded, list(items), config, path, progress=progress)
    _, recs = read_records(path)
    by_id = {r["id"]: r for r in recs}
    return [by_id[it.id] for it in items]


def run_group_norms(loaded: Any, records: Sequence[Mapping[str, Any]], config: Any, dataset: str, *,
                    progress: bool = True, store: bool = False, verify: int = 2,
                    store_root: Path | None = None) -> dict[str, dict[str, float]]:
    """Per-group ``||grad log p||^2`` of each record's greedy answer (cached, resumable;
    with ``store``, in the results store like `run_dataset`).

    Returns ``{record id: {group: value}}``.
    """
    from tqdm.auto import tqdm

    from gnuq_core.repro.records import RecordFile, read_records
    from gnuq_core.lm.gradient import forward_backward

    from gnuq_core.lm.anatomy import per_block_groups

    groups = per_block_groups(loaded.model)
    by_id = {r["id"]: r for r in records}

    def compute(rid: str) -> dict[str, Any]:
        g = by_id[rid]["generation"]
        gp = forward_backward(loaded.model, g["prompt_ids"], g["answer_ids"], groups=groups, per_group=True)
        return {"group_sq": gp.group_sq, "grad_sq": gp.grad_sq, "seconds": gp.seconds}

    config_dict = {**asdict(config), "dataset": dataset, "groups": list(groups)}
    if store:
        from gnuq_core.repro.results_store import run_stored

        recs = run_stored("qa_groups", config_dict, list(by_id), compute, code_files=STORE_CODE, verify=verify,
                          rtol=1e-3, atol=1e-6, progress=f"{config.model} per-layer" if progress else None,
                          root=store_root)
        return {r["id"]: r["group_sq"] for r in recs}
    path = run_path(config, dataset, kind="qa_groups")
    rf = RecordFile(path, config_dict)
    for rid in tqdm([i for i in by_id if i not in rf.done], desc=f"{config.model} per-layer", disable=not progress):
        rf.append(rid, compute(rid))
    _, recs = read_records(path)
    out = {x["id"]: x["group_sq"] for x in recs}
    return {r["id"]: out[r["id"]] for r in records}


def variant_costs(loaded: Any, records: Sequence[Mapping[str, Any]], *, n: int = 5, repeats: int = 1
                  ) -> dict[str, float]:
    """Median seconds of one forward-backward pass per parameter selection, on ``n`` answers.

    Selections: ``all`` (the estimator as specified), ``no_embeddings`` and ``last_block``.
    Also ``log10_ratio_*``: how the cheap variants' values relate is in `score_table`.
    Timings depend on the machine and its load; they are measured, not cached.
    """
    from gnuq_core.lm.gradient import forward_backward

    out: dict[str, float] = {}
    for sel in ("all", "no_embeddings", "last_block"):
        secs = []
        for r in list(records)[:n]:
            g = r["generation"]
            for _ in range(repeats):
                t0 = time.perf_counter()
                forward_backward(loaded.model, g["prompt_ids"], g["answer_ids"], groups=None if sel == "all" else sel)
                secs.append(time.perf_counter() - t0)
        out[sel] = float(np.median(secs)) if secs else float("nan")
    return out


def _variant_scores(r: Mapping[str, Any], group_sq: Mapping[str, float] | None) -> dict[str, float]:
    if not group_sq:
        return {}
    lp = r["scores"]["log_p"]
    total = sum(group_sq.values())
    blocks = sorted(g for g in group_sq if g.startswith("block"))
    out = {}
    for name, v in (("epistemic_no_embeddings", total - group_sq.get("embeddings", 0.0)),
                    ("epistemic_last_block", group_sq[blocks[-1]] if blocks else 0.0)):
        out[name] = 2 * lp / LN10 + (math.log10(v) if v > 0 else -300.0)
    return out


def score_table(records: Sequence[Mapping[str, Any]], items: Mapping[str, Any], *,
                embed: Callable[[list[str]], Any] | None = None,
                group_norms: Mapping[str, Mapping[str, float]] | None = None) -> Any:
    """One row per record: labels from every judge and every score in `METHODS`.

    Parameters
    ----------
    records : sequence of dict
        Records of one model on one dataset (`run_dataset`).
    items : mapping id -> QAItem
        The questions: their reference answers grade the records (which carry only ids),
        and TruthfulQA's ``category`` and ``category_group`` are added.
    embed : callable, optional
        Sentence encoder for the TruthfulQA embedding judge (``correct_embed``).
    group_norms : mapping, optional
        Output of `run_group_norms`: adds the cheap-variant scores.

    Returns
    -------
    pandas.DataFrame
        ``correct`` is the primary label (TriviaQA: alias contained; TruthfulQA: ROUGE-L
        rule); ``incorrect = 1 - correct``.
    """
    import pandas as pd

    from gnuq_core.qa import grading

    missing = [r["id"] for r in records if r["id"] not in items]
    if missing:
        raise KeyError(f"{len(missing)} records have no question in `items` (first: {missing[0]!r}): load the "
                       "dataset the records were made from (same file, same version)")
    rows = []
    for r in records:
        it = items[r["id"]]
        ci = {"correct_answers": list(it.correct_answers), "incorrect_answers": list(it.incorrect_answers)}
        ans = r["answer"]
        row: dict[str, Any] = {"id": r["id"], "dataset": r["dataset"], "question": it.question, "answer": ans,
                               "n_tokens": len(r["generation"]["answer_ids"]),
                               "stop_reason": r["generation"]["stop_reason"], "p": r["scores"]["p"],
                               "log_p": r["scores"]["log_p"]}
        if r["dataset"] == "triviaqa":
            row["correct_contains"] = grading.triviaqa_contains(ans, ci["correct_answers"])
            row["correct_em"] = grading.triviaqa_exact_match(ans, ci["correct_answers"])
            row["correct"] = row["correct_contains"]
        else:
            j = grading.truthfulqa_rouge(ans, ci["correct_answers"], ci["incorrect_answers"])
            row.update(correct_rouge=j.correct, rouge_true=j.best_true, rouge_false=j.best_false, correct=j.correct)
            if embed is not None:
                row["correct_embed"] = grading.truthfulqa_embedding(ans, ci["correct_answers"],
                                                                    ci["incorrect_answers"], embed)
            cat = it.extra.get("category", "")
            row.update(category=cat, category_group=category_group(cat))
        for name, (_, fn) in METHODS.items():
            try:
                row[name] = float(fn(r))
            except (KeyError, TypeError):
                row[name] = float("nan")  # a baseline that was not run (e.g. no samples)
        row.update(_variant_scores(r, (group_norms or {}).get(r["id"])))
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        df["correct"] = df["correct"].astype(bool)
        df["incorrect"] = (~df["correct"]).astype(int)
    return df


def aligned(a: Any, b: Any, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``column`` in two tables on their common question ids (same order)."""
    common = [i for i in a["id"] if i in set(b["id"])]
    return (a.set_index("id").loc[common, column].to_numpy(), b.set_index("id").loc[common, column].to_numpy())
