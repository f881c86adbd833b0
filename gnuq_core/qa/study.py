"""The QA benchmark study of chapter 06: cached runs, per-layer gradient norms, score tables.

This module glues the engine (`gnuq_core.qa.engine`, `gnuq_core.lm.scoring`) to the evaluation:

* `run_dataset`: one model on a slice of one dataset, one record per question through a
  store (`gnuq_core.store`: the results store of the paper edition, the local cache of a
  preview); every question is computed once per configuration and kind version, so
  rebuilding the book re-reads it and a long (full-profile) run can be interrupted and
  resumed. A stored record is checked on another platform from its stored answers
  (`gnuq_core.qa.engine.rescore_answers`).
* `group_norms_of`: ``||grad log p||^2`` split by parameter group (the tied embedding /
  output matrix, each decoder block, the rest), read from the records (the engine's one
  gradient pass per question computes the split; the groups sum to the total).
* the campaign that fills the chapter's store outside the notebook (``gnuq study``) is
  `gnuq_core.chapters.campaign`.
* `score_table`: one row per question: answer, length, stop reason, correctness labels
  from every judge (`gnuq_core.qa.grading`) and every uncertainty score of the registry
  `gnuq_core.qa.scores`, oriented so that larger = more uncertain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from gnuq_core.estimators import log10_epistemic
from gnuq_core.lm.clustering import get_clusterer
from gnuq_core.lm.prompts import encode_prompt, format_prompt
from gnuq_core.qa import grading, scores
from gnuq_core.store import Recipe, Sample, Store

__all__ = ["CATEGORY_GROUPS", "category_group", "select_items", "store_config", "run_dataset", "group_norms_of",
           "score_table", "group_scores", "aligned"]

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


def store_config(config: Any, dataset: str) -> dict[str, Any]:
    """The store configuration of ``config``'s records on ``dataset`` (kind ``qa``)."""
    return {**asdict(config), "dataset": dataset}


# Records note the number of CPU threads torch used: the order of floating-point sums in a
# matrix product depends on it, and a sampled token whose inverse-CDF draw falls within that
# rounding of a boundary between two tokens changes with it (seen: one of 10 samples of a
# TriviaQA answer diverged after 13 tokens under 2 threads, for a record made under 1).
THREADS_FIELD = "torch_threads"


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


def thread_variants(compute: Callable[[str], dict[str, Any]], item: str,
                    stored: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """``compute(item)`` again under the torch thread count(s) its stored record may have been made with.

    The store's check recomputes a record from scratch, and greedy answers, log-probabilities
    and gradient norms agree across thread counts to rounding, but a sampled answer can
    change (see :data:`THREADS_FIELD`). So the check runs under the stored record's count;
    a record that predates the field (made under 1 or 2 threads, not recorded) is tried
    under this process's count, then 1, then 2 (``Recipe.variants``: the check stops at the
    first that reproduces it). Every field is compared at the usual tolerance.
    """
    import torch

    current = _torch_threads()
    for threads in ([stored[THREADS_FIELD]] if THREADS_FIELD in stored else dict.fromkeys([current, 1, 2])):
        torch.set_num_threads(int(threads))
        try:
            fresh = compute(item)
        finally:
            torch.set_num_threads(current)
        yield fresh


def with_prompt_ids(loaded: Any, record: Mapping[str, Any], question: str) -> dict[str, Any]:
    """``record`` with ``generation.prompt_ids`` re-encoded from ``question`` in its prompt style."""
    style = record["style"]
    ids = encode_prompt(loaded.tokenizer, format_prompt(loaded.tokenizer, question, style), style)
    return {**record, "generation": {**record["generation"], "prompt_ids": ids}}


def run_dataset(loaded: Any, items: Sequence[Any], config: Any, *, store: Store, progress: bool = True,
                verify: int = 2, world: Any = None, read_only: bool = False, texts: bool = False) -> list[dict[str, Any]]:
    """Evaluate ``items`` (one dataset) with `gnuq_core.qa.engine`; their records, in order.

    The records live in ``store`` (kind ``qa``): ids, answers and numbers only, never question
    or reference texts (nor the prompt's token ids, which are re-encoded on reading); stored
    records are reused, missing ones computed and appended, and ``verify`` random stored
    ones checked under the kind's contract: recomputed whole on the platform (and under the
    thread count) that made them, from their stored answers elsewhere. With ``read_only``
    only the stored records are returned (in the order of ``items``); with ``texts`` (``gnuq qa``'s
    own files, `gnuq_core.store.store.OneFile`) each record also carries its question and reference
    answers, so that it can be graded on its own.

    With ``world`` (`gnuq_core.repro.shards.World` of a ``torchrun`` job) this process
    computes the missing items at positions ≡ rank (mod size) of ``items`` into its own
    shard; rank 0 merges the shards at the end, and every rank returns all the records.
    """
    # Looked up when called: tests stand in for `question_record` on its module.
    from gnuq_core.qa.engine import question_record, rescore_answers, resolved_style, storable

    if not items:
        return []
    dataset = items[0].dataset
    wrong = sorted({it.dataset for it in items} - {config.dataset or dataset})
    if wrong:
        raise ValueError(f"the items come from {', '.join(wrong)}, not only from {config.dataset or dataset} "
                         "(one file holds one dataset)")
    by_id = {it.id: it for it in items}
    style = resolved_style(loaded, config)
    memo: dict[str, Any] = {}

    def clusterer() -> Any:
        if "clusterer" not in memo:
            memo["clusterer"] = get_clusterer(config.clusterer, config.threshold) if config.n_samples > 0 else None
        return memo["clusterer"]

    def compute(i: str) -> dict[str, Any]:
        record = storable(question_record(loaded, by_id[i], config, style=style, clusterer=clusterer(), texts=texts))
        return {**record, THREADS_FIELD: _torch_threads()}

    def from_outputs(i: str, stored: dict[str, Any], _: Mapping[str, Any]) -> dict[str, Any]:
        public = {k: v for k, v in stored.items() if k not in ("type", "id", "_made")}
        return rescore_answers(loaded.model, loaded.tokenizer, by_id[i].question, public, config, style=style,
                               clusterer=clusterer())

    recipe = Recipe(compute, from_outputs=from_outputs, variants=lambda i, stored: thread_variants(compute, i, stored))
    recs = store.items("qa", store_config(config, dataset), list(by_id), recipe, verify=Sample(verify),
                       progress=f"{config.model} {dataset}" if progress else None, world=world, read_only=read_only)
    return [with_prompt_ids(loaded, r, by_id[r["id"]].question) for r in recs]


def group_norms_of(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{record id: {group: ||grad_group log p||^2}}`` from the records' ``group_sq``
    (embeddings, ``block 00`` …, other: computed by the record's own gradient pass).

    Raises ``KeyError`` naming the first record without the split (made by older code).
    """
    out = {}
    for r in records:
        if not r.get("group_sq"):
            raise KeyError(f"record {r['id']!r} has no per-group norms (group_sq): it was made by older code; "
                           "recompute it")
        out[r["id"]] = dict(r["group_sq"])
    return out


def score_table(records: Sequence[Mapping[str, Any]], items: Mapping[str, Any], *,
                embed: Callable[[list[str]], Any] | None = None,
                group_norms: Mapping[str, Mapping[str, float]] | None = None) -> Any:
    """One row per record: labels from every judge and every score of `gnuq_core.qa.scores`.

    Parameters
    ----------
    records : sequence of dict
        Records of one model on one dataset (`run_dataset`).
    items : mapping id -> QAItem
        The questions: their reference answers grade the records (which carry only ids),
        and TruthfulQA's ``category`` and ``category_group`` are added.
    embed : callable, optional
        Sentence encoder for the TruthfulQA embedding judge (``correct_embed``); wrapped in a
        `gnuq_core.qa.grading.MemoEmbedder` (pass one to share its memo between tables).
    group_norms : mapping, optional
        Output of `group_norms_of` (the field ``group_sq`` of the variant scores; NaN for
        records without it).

    Returns
    -------
    pandas.DataFrame
        ``correct`` is the primary label (TriviaQA: an alias contained, not only as the
        question's echo, ``correct_no_echo``; TruthfulQA: the ROUGE-L rule, ``correct_rouge``);
        ``incorrect = 1 - correct``. The other graders' columns: TriviaQA ``correct_contains``,
        ``correct_em``; TruthfulQA ``rouge_tie``, ``correct_rouge_best``, ``correct_rouge_any``
        and, with ``embed``, ``correct_embed`` (`gnuq_core.qa.readings` reads them).
    """
    import pandas as pd

    missing = [r["id"] for r in records if r["id"] not in items]
    if missing:
        raise KeyError(f"{len(missing)} records have no question in `items` (first: {missing[0]!r}): load the "
                       "dataset the records were made from (same file, same version)")
    if embed is not None:  # every distinct text encoded once, in batches
        embed = embed if isinstance(embed, grading.MemoEmbedder) else grading.MemoEmbedder(embed)
        embed.prime(text for r in records if r["dataset"] != "triviaqa"
                    for text in grading.truthfulqa_embedding_texts(r["answer"], items[r["id"]].correct_answers,
                                                                   items[r["id"]].incorrect_answers))
    rows = []
    for r in records:
        it = items[r["id"]]
        ci = {"correct_answers": list(it.correct_answers), "incorrect_answers": list(it.incorrect_answers)}
        ans = r["answer"]
        row: dict[str, Any] = {"id": r["id"], "dataset": r["dataset"], "question": it.question, "answer": ans,
                               "n_tokens": len(r["generation"]["answer_ids"]),
                               "stop_reason": r["generation"]["stop_reason"], "p": float(np.exp(r["log_p"])),
                               "log_p": r["log_p"]}
        if r["dataset"] == "triviaqa":
            row["correct_contains"] = grading.triviaqa_contains(ans, ci["correct_answers"])
            row["correct_em"] = grading.triviaqa_exact_match(ans, ci["correct_answers"])
            row["correct_no_echo"] = grading.triviaqa_contains_no_echo(ans, ci["correct_answers"], it.question)
            row["correct"] = row["correct_no_echo"]
        else:
            j = grading.truthfulqa_rouge(ans, ci["correct_answers"], ci["incorrect_answers"])
            row.update(correct_rouge=j.correct, rouge_true=j.best_true, rouge_false=j.best_false, rouge_tie=j.tie,
                       correct=j.correct,
                       correct_rouge_best=grading.truthfulqa_rouge_threshold(ans, ci["correct_answers"]),
                       correct_rouge_any=grading.truthfulqa_rouge_threshold(ans, ci["correct_answers"],
                                                                           against="any"))
            if embed is not None:
                row["correct_embed"] = grading.truthfulqa_embedding(ans, ci["correct_answers"],
                                                                    ci["incorrect_answers"], embed)
            cat = it.extra.get("category", "")
            row.update(category=cat, category_group=category_group(cat))
        group_sq = (group_norms or {}).get(r["id"])
        # a score whose pass was not run (no samples, no per-group split) is NaN
        row.update(scores.score_record({**r, "group_sq": group_sq} if group_sq else r))
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        df["correct"] = df["correct"].astype(bool)
        df["incorrect"] = (~df["correct"]).astype(int)
    return df


def group_scores(table: Any, group_norms: Mapping[str, Mapping[str, float]]) -> tuple[Any, Any, Any]:
    """Per parameter group, the scores of the records that were split by group.

    Parameters
    ----------
    table : pandas.DataFrame
        `score_table` of the records (one model, one dataset).
    group_norms : mapping
        `group_norms_of` output, ``{record id: {group: ||grad_group log p||^2}}``.

    Returns
    -------
    grad_sq, log10_epistemic : pandas.DataFrame
        One row per record of ``group_norms`` (in its order), one column per group: the
        squared gradient norm of the group and log10 p² ||grad_group log p||² (as
        `gnuq_core.estimators.log10_epistemic`, the variant scores' formula).
    incorrect : numpy.ndarray
        The records' labels, same order.
    """
    import pandas as pd

    t = table.set_index("id").loc[list(group_norms)]
    grad_sq = pd.DataFrame(list(group_norms.values()))
    log_p = t["log_p"].to_numpy(float)
    epi = pd.DataFrame({g: [log10_epistemic(lp, v) for lp, v in zip(log_p, grad_sq[g].to_numpy(float))]
                        for g in grad_sq.columns})
    return grad_sq, epi, t["incorrect"].to_numpy()


def aligned(a: Any, b: Any, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Values of ``column`` in two tables on their common question ids (same order)."""
    common = [i for i in a["id"] if i in set(b["id"])]
    return (a.set_index("id").loc[common, column].to_numpy(), b.set_index("id").loc[common, column].to_numpy())
