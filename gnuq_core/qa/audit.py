"""The hand-labelled audit of the QA graders: how often each grader's "correct" is right.

``audit/labels.jsonl`` holds one line per audited answer (ids and labels only, never the
question, reference or answer texts): ``model``, ``dataset``, ``id``, the hand ``label``
(``correct``, ``incorrect`` or ``unclear``, read against ``audit/RUBRIC.md`` blind to every
grader and score) and the sampling ``stratum``: the audit drew, per model and dataset, a
fixed-seed random sample of 50 answers the primary grader calls correct and 50 it calls
incorrect, out of ``stratum_size`` such answers. So every estimate weights an audited
answer by ``stratum_size / audited answers of its stratum`` (post-stratification; ``unclear``
answers are left out, as missing at random within their stratum), and every interval
resamples within the strata:

- `grader_quality`: each grader's precision (of its "correct"s, the share truly correct)
  and recall (of the truly correct answers, the share it calls correct), and the estimated
  accuracy, per model and dataset;
- `weighted_auroc`, `audited_aurocs`: each score's AUROC for hand-labelled incorrectness on
  the audited answers, with the same weights.

``audit/truthfulqa/`` holds careful labels of *every* TruthfulQA answer (not a sample; its
README says how they were made): `careful_labels` reads them, `careful_agreement` measures
the two independent labellings of the double-labelled answers (Cohen's κ).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.repro.files import json_lines
from gnuq_core.repro.paths import REPO_ROOT

__all__ = ["AUDIT_DIR", "LABELS", "load_labels", "weights", "grader_quality", "weighted_auroc", "audited_aurocs",
           "careful_labels", "has_labels", "careful_agreement", "careful_column", "answer_digest", "cohen_kappa",
           "stored_answers", "TRIVIAQA_GRADERS", "triviaqa_disputed", "triviaqa_disputes_labelled",
           "triviaqa_careful_column"]

AUDIT_DIR = REPO_ROOT / "audit"
LABELS = ("correct", "incorrect", "unclear")


def load_labels(path: str | Path | None = None) -> Any:
    """The audit's labels as a DataFrame (one row per audited answer); a damaged file is one clear error."""
    import pandas as pd

    path = Path(path) if path is not None else AUDIT_DIR / "labels.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: the audit labels are committed in audit/ of the repository")

    rows = []
    for n, row in json_lines(path, fix="restore the file from git", torn_tail=False):
        missing = {"model", "dataset", "id", "label", "stratum", "stratum_size"} - set(row)
        if missing or row["label"] not in LABELS:
            raise ValueError(f"{path}, line {n}: needs model, dataset, id, label (one of {', '.join(LABELS)}), "
                             f"stratum and stratum_size; it has {sorted(row)}")
        rows.append(row)
    return pd.DataFrame(rows)


def weights(labels: Any) -> Any:
    """The post-stratification weight of each decided (not ``unclear``) audited answer."""
    decided = labels[labels["label"] != "unclear"]
    n = decided.groupby(["model", "dataset", "stratum"])["id"].transform("count")
    return decided["stratum_size"] / n


def _strata(cell: Any) -> list[np.ndarray]:
    return [np.flatnonzero((cell["stratum"] == s).to_numpy()) for s in sorted(cell["stratum"].unique())]


def _resample(groups: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    return np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups if g.size])


def grader_quality(labels: Any, graded: Mapping[str, Mapping[tuple[str, str], bool]], *, n_boot: int = 2000,
                   seed: int = 0) -> Any:
    """Precision and recall of each grader for "correct", and the estimated accuracy, per model and dataset.

    Parameters
    ----------
    labels : DataFrame
        `load_labels`.
    graded : mapping
        ``{grader: {(model, id): says correct}}`` for every audited answer of its dataset.
    n_boot, seed : int
        Stratified bootstrap.

    Returns
    -------
    DataFrame
        One row per (model, dataset, grader): ``precision``, ``recall``, ``accuracy`` (the
        grader's) and ``true_accuracy`` (estimated from the hand labels), each with a 95%
        interval (``*_lo``, ``*_hi``), ``audited``, ``unclear``.
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    out = []
    for (model, dataset), cell in labels.groupby(["model", "dataset"], sort=False):
        unclear = int((cell["label"] == "unclear").sum())
        cell = cell[cell["label"] != "unclear"].reset_index(drop=True)
        w = weights(cell).to_numpy(float)
        h = (cell["label"] == "correct").to_numpy(float)
        groups = _strata(cell)
        boots = [_resample(groups, rng) for _ in range(n_boot)]
        for name, says in graded.items():
            keys = [(model, i) for i in cell["id"]]
            present = np.array([k in says for k in keys])
            if not present.any():
                continue  # a grader of another dataset
            g = np.array([says.get(k, False) for k in keys], float)

            def stats(idx: np.ndarray) -> tuple[float, float, float, float]:
                idx = idx[present[idx]]  # answers the grader leaves out (ROUGE ties) are left out of its numbers
                ww, gg, hh = w[idx], g[idx], h[idx]
                tp = float(np.sum(ww * gg * hh))
                prec = tp / np.sum(ww * gg) if np.sum(ww * gg) > 0 else np.nan
                rec = tp / np.sum(ww * hh) if np.sum(ww * hh) > 0 else np.nan
                return prec, rec, float(np.sum(ww * gg) / np.sum(ww)), float(np.sum(ww * hh) / np.sum(ww))

            point = stats(np.arange(len(cell)))
            reps = np.array([stats(b) for b in boots], float)
            row: dict[str, Any] = {"model": model, "dataset": dataset, "grader": name, "audited": len(cell) + unclear,
                                   "unclear": unclear, "judged": int(present.sum())}
            for k, key in enumerate(("precision", "recall", "accuracy", "true_accuracy")):
                col = reps[:, k][np.isfinite(reps[:, k])]
                lo, hi = (np.quantile(col, [0.025, 0.975]) if col.size else (np.nan, np.nan))
                row.update({key: point[k], f"{key}_lo": float(lo), f"{key}_hi": float(hi)})
            out.append(row)
    return pd.DataFrame(out)


def weighted_auroc(incorrect: Sequence[float], score: Sequence[float], w: Sequence[float]) -> float:
    """AUROC of ``score`` for ``incorrect`` with weights: the weighted share of (incorrect,
    correct) pairs the score orders right (ties count half)."""
    y, s, w = np.asarray(incorrect, bool), np.asarray(score, float), np.asarray(w, float)
    pos, neg = s[y], s[~y]
    wp, wn = w[y], w[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).astype(float) + 0.5 * (pos[:, None] == neg[None, :])
    return float(wp @ greater @ wn / (wp.sum() * wn.sum()))


def audited_aurocs(labels: Any, tables: Mapping[tuple[str, str], Any], score_names: Sequence[str], *,
                   n_boot: int = 1000, seed: int = 0) -> Any:
    """Each score's weighted AUROC for the hand labels on the audited answers, per model and dataset.

    ``tables`` maps ``(model, dataset)`` to a score table with an ``id`` column and the
    scores (`gnuq_core.qa.study.score_table`). Returns one row per (model, dataset, score)
    with ``auroc``, ``lo``, ``hi``, ``n``.
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    out = []
    for (model, dataset), cell in labels.groupby(["model", "dataset"], sort=False):
        if (model, dataset) not in tables:
            continue
        cell = cell[cell["label"] != "unclear"].reset_index(drop=True)
        w = weights(cell).to_numpy(float)
        y = (cell["label"] == "incorrect").to_numpy(float)
        table = tables[model, dataset].set_index("id")
        groups = _strata(cell)
        boots = [_resample(groups, rng) for _ in range(n_boot)]
        for name in score_names:
            s = table.loc[cell["id"], name].to_numpy(float)
            point = weighted_auroc(y, s, w)
            reps = np.array([weighted_auroc(y[b], s[b], w[b]) for b in boots])
            reps = reps[np.isfinite(reps)]
            lo, hi = np.quantile(reps, [0.025, 0.975]) if reps.size else (np.nan, np.nan)
            out.append({"model": model, "dataset": dataset, "score": name, "auroc": point, "lo": float(lo),
                        "hi": float(hi), "n": len(cell)})
    return pd.DataFrame(out)


def _keyed(path: Path) -> dict[str, dict[str, Any]]:
    """``{key: row}`` of a careful-labels file; a damaged line or label is one clear error."""
    out = {}
    for n, row in json_lines(path, fix="restore the file from git", torn_tail=False):
        if not {"key", "label", "reason"} <= set(row) or row["label"] not in LABELS or row["key"] in out:
            raise ValueError(f"{path}, line {n}: needs a new key, a label (one of {', '.join(LABELS)}) and a reason")
        out[row["key"]] = row
    return out


def _primary_files(folder: Path) -> dict[str, Path]:
    """``{labeller: file}`` of a folder's primary labellings: ``labels_a.jsonl`` and
    ``labels_b.jsonl`` where the keys were split between two labellers, else ``labels.jsonl``."""
    split = {who: folder / f"labels_{who}.jsonl" for who in ("a", "b")}
    if all(path.exists() for path in split.values()):
        return split
    if (folder / "labels.jsonl").exists():
        return {"primary": folder / "labels.jsonl"}
    raise FileNotFoundError(f"{folder} holds no primary labels (labels.jsonl, or labels_a.jsonl and labels_b.jsonl)")


def has_labels(folder: str | Path) -> bool:
    """Whether an audit folder holds its keys and a primary labelling (`careful_labels` can read it)."""
    folder = Path(folder)
    return (folder / "keys.jsonl").exists() and (
        (folder / "labels.jsonl").exists() or all((folder / f"labels_{w}.jsonl").exists() for w in ("a", "b")))


def careful_labels(folder: str | Path | None = None) -> Any:
    """The careful label of every answer of an audit folder (default ``audit/truthfulqa``: every
    TruthfulQA answer; ``audit/triviaqa``: every TriviaQA answer the graders dispute): one row
    per answer with ``key``, ``model``, ``id``, ``label``, ``reason`` and ``labeller`` (``a``,
    ``b`` or ``primary``: the primary labellings; ``adjudicated``: where the second labelling
    disagreed, the adjudication's final label).

    Raises a `ValueError` naming the key when an answer has no label or two."""
    import pandas as pd

    folder = Path(folder) if folder is not None else AUDIT_DIR / "truthfulqa"
    keys = [row for _, row in json_lines(folder / "keys.jsonl", fix="restore the file from git", torn_tail=False)]
    labelled: dict[str, dict[str, Any]] = {}
    for who, path in _primary_files(folder).items():
        for key, row in _keyed(path).items():
            if key in labelled:
                raise ValueError(f"{folder}: answer {key} is labelled by both primary labellers")
            labelled[key] = {**row, "labeller": who}
    missing = [k["key"] for k in keys if k["key"] not in labelled]
    if missing:
        raise ValueError(f"{folder}: {len(missing)} answers have no primary label (first: {missing[0]})")
    adjudicated = folder / "adjudication.jsonl"
    for n, row in (json_lines(adjudicated, fix="restore the file from git", torn_tail=False)
                   if adjudicated.exists() else []):
        if row.get("key") not in labelled or row.get("final") not in LABELS:
            raise ValueError(f"{adjudicated}, line {n}: needs the key of a labelled answer and a final label")
        labelled[row["key"]] = {"label": row["final"], "reason": row["why"], "labeller": "adjudicated"}
    return pd.DataFrame([{**k, **{f: labelled[k["key"]][f] for f in ("label", "reason", "labeller")}} for k in keys])


def stored_answers(results: str | Path, dataset: str) -> dict[tuple[str, str], str]:
    """``{(model, question id): answer}`` of every stored ``dataset`` record under ``results``
    (the store's ``qa/`` files, each read with its shards): what the careful labels are about."""
    from gnuq_core.repro.shards import read_merged
    from gnuq_core.store.store import stored_files

    out = {}
    for path in stored_files(Path(results) / "qa"):
        config, records = read_merged(path)
        if config.get("dataset") == dataset:
            out.update({(config["model"], r["id"]): r["answer"] for r in records})
    return out


def answer_digest(answer: str) -> str:
    """The first 16 hex digits of the SHA-1 of an answer's text: what a careful label is about."""
    import hashlib

    return hashlib.sha1(answer.encode("utf-8")).hexdigest()[:16]


def careful_column(table: Any, model: str, labels: Any | None = None) -> Any:
    """The careful labels of a TruthfulQA score table's answers (`careful_labels`): 1.0 correct,
    0.0 incorrect, NaN for an unclear answer or one that is not the labelled answer (another
    answer text to the same question: a preview's other answer cap)."""
    labels = careful_labels() if labels is None else labels
    mine = labels[labels["model"] == model].set_index("id")
    value = {"correct": 1.0, "incorrect": 0.0, "unclear": np.nan}
    return table.apply(lambda row: value[mine.at[row["id"], "label"]] if row["id"] in mine.index and
                       mine.at[row["id"], "answer_sha1"] == answer_digest(row["answer"]) else np.nan, axis=1)


TRIVIAQA_GRADERS = ("correct_em", "correct_contains", "correct_no_echo")
"""The TriviaQA graders whose disagreement sends an answer to careful reading (`scripts/blind_triviaqa.py`)."""


def triviaqa_disputed(table: Any) -> Any:
    """Per row of a TriviaQA score table: whether its graders (`TRIVIAQA_GRADERS`) disagree."""
    return table[list(TRIVIAQA_GRADERS)].astype(bool).nunique(axis=1) > 1


def triviaqa_disputes_labelled(table: Any, model: str, labels: Any) -> bool:
    """Whether every answer of ``table`` the TriviaQA graders dispute carries a careful label
    (the same question, model and answer text): only then are the careful labels a reading of
    the build (a preview's answers differ)."""
    mine = {(i, sha) for i, sha in zip(labels.loc[labels["model"] == model, "id"],
                                       labels.loc[labels["model"] == model, "answer_sha1"])}
    disputed = table[triviaqa_disputed(table)]
    return all((i, answer_digest(a)) in mine for i, a in zip(disputed["id"], disputed["answer"]))


def triviaqa_careful_column(table: Any, model: str, labels: Any) -> Any:
    """Careful TriviaQA labels of a score table's answers: where the graders (`TRIVIAQA_GRADERS`)
    disagree, the careful label (``audit/triviaqa``; NaN if unclear or not the labelled answer);
    where they agree, their shared label (1.0 / 0.0)."""
    careful = careful_column(table, model, labels)
    shared = table[TRIVIAQA_GRADERS[0]].astype(float)
    return careful.where(triviaqa_disputed(table), shared)


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Cohen's κ of two labellings of the same items: (agreement − chance) / (1 − chance)."""
    a, b = list(a), list(b)
    cats = sorted(set(a) | set(b))
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    chance = sum((a.count(c) / n) * (b.count(c) / n) for c in cats)
    return float((observed - chance) / (1 - chance)) if chance < 1 else float("nan")


def careful_agreement(folder: str | Path | None = None, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """How the independent second labelling agrees with the primary labels on the answers both read.

    Returns ``n`` (double-labelled answers), ``decided`` (both said correct or incorrect),
    ``agreement`` and ``kappa`` on the decided ones with a bootstrap 95 % interval
    (``kappa_lo``, ``kappa_hi``), ``kappa_all`` over all three labels, ``table`` (counts of
    each (primary, second) pair) and ``disagreements`` (the keys and both labels and reasons).
    """
    folder = Path(folder) if folder is not None else AUDIT_DIR / "truthfulqa"
    primary = careful_labels(folder).set_index("key")
    for key, row in {k: r for path in _primary_files(folder).values() for k, r in _keyed(path).items()}.items():
        primary.at[key, "label"], primary.at[key, "reason"] = row["label"], row["reason"]  # before adjudication
    second = _keyed(folder / "labels_second.jsonl")
    both = [k for k in second if k in primary.index]
    pairs = [(primary.at[k, "label"], second[k]["label"]) for k in both]
    decided = [(x, y) for x, y in pairs if "unclear" not in (x, y)]
    rng = np.random.default_rng(seed)
    boots = [cohen_kappa(*zip(*[decided[i] for i in rng.integers(0, len(decided), len(decided))]))
             for _ in range(n_boot)]
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    table: dict[str, int] = {}
    for x, y in pairs:
        table[f"{x} / {y}"] = table.get(f"{x} / {y}", 0) + 1
    return {"n": len(pairs), "decided": len(decided), "agreement": float(np.mean([x == y for x, y in decided])),
            "kappa": cohen_kappa(*zip(*decided)), "kappa_lo": float(lo), "kappa_hi": float(hi),
            "kappa_all": cohen_kappa(*zip(*pairs)), "table": table,
            "disagreements": [{"key": k, "model": primary.at[k, "model"], "id": primary.at[k, "id"],
                               "primary": primary.at[k, "label"], "primary_reason": primary.at[k, "reason"],
                               "second": second[k]["label"], "second_reason": second[k]["reason"]}
                              for k in both if primary.at[k, "label"] != second[k]["label"]]}
