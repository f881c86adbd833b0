"""The stored QA scores judged by LM-Polygraph's own metric code (extra ``polygraph``).

LM-Polygraph ranks uncertainty estimators by ROC-AUC (`lm_polygraph.ue_metrics.ROCAUC`,
wrong answers as the positive class) and by the prediction-rejection area normalised
between a random and an oracle order (`PredictionRejectionArea` with `normalize_metric`
and `get_random_scores`, as its `UEManager` does). `polygraph_metrics` runs that code on a
`gnuq_core.qa.study.score_table` and sets each number beside the project's own
(`gnuq_core.qa.auroc`): the AUROCs must agree to rounding; the normalised PRR within
`PRR_TOLERANCE`, because LM-Polygraph estimates the random order's area from 1,000
shuffles (its seed 42) where the project uses the exact expectation. The PRRs are compared
only for scores with few ties (`MAX_TIE_SHARE`): LM-Polygraph orders tied scores by
``np.argsort`` where the project averages over tie orders, which moves a heavily tied score's
PRR (a discrete semantic entropy) by more than any tolerance would mean.
`polygraph_ranking` gives LM-Polygraph's two numbers for every score, tied or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gnuq_core.crosscheck.agreement import compare, frame
from gnuq_core.crosscheck.baselines import labelled_scores
from gnuq_core.qa import auroc as au

__all__ = ["AUROC_TOLERANCE", "PRR_TOLERANCE", "MAX_TIE_SHARE", "available", "polygraph_metrics",
           "polygraph_ranking"]

AUROC_TOLERANCE = 1e-9
"""Largest relative difference between the two AUROCs (both exact: rounding only)."""
PRR_TOLERANCE = 0.03
"""Largest absolute difference between the two normalised PRRs (LM-Polygraph's random area
is a 1,000-shuffle estimate)."""
MAX_TIE_SHARE = 0.01
"""Largest share of tied answers for which the two PRRs are compared."""


def available() -> bool:
    """Whether LM-Polygraph's metric code can be imported (the ``polygraph`` extra)."""
    try:
        import lm_polygraph.ue_metrics  # noqa: F401
    except ImportError:
        return False
    return True


def _theirs(wrong: Any, s: Any) -> tuple[float, float]:
    """LM-Polygraph's ROC-AUC and normalised PRR of scores ``s`` (larger = more uncertain)."""
    from lm_polygraph.ue_metrics import PredictionRejectionArea, ROCAUC
    from lm_polygraph.ue_metrics.ue_metric import get_random_scores, normalize_metric

    right = 1.0 - wrong
    prr = PredictionRejectionArea()
    return (ROCAUC()(list(s), list(wrong.astype(int))),
            normalize_metric(prr(s, right), prr(-right, right), get_random_scores(prr, right)))


def polygraph_metrics(table: Any, scores: Sequence[str], *, label: str = "") -> Any:
    """Agreement rows, per score: AUROC and normalised PRR from LM-Polygraph's code against the
    project's, with LM-Polygraph's values in ``theirs`` (the PRR only for scores with at most
    `MAX_TIE_SHARE` tied answers).

    Parameters
    ----------
    table : DataFrame
        A `gnuq_core.qa.study.score_table` (``incorrect``, ``correct`` and score columns,
        larger = more uncertain); rows with a non-finite score are dropped per score.
    scores : sequence of str
        The score columns to judge.
    label : str
        The run (model · dataset), kept in the ``case`` column.

    Returns
    -------
    DataFrame
        `gnuq_core.crosscheck.agreement.frame` rows, with ``score`` and ``ties``.
    """
    rows = []
    for k, wrong, s, ties in labelled_scores(table, scores):
        auc, prr = _theirs(wrong, s)
        rows.append(compare("AUROC", au.auroc(wrong, s), auc, AUROC_TOLERANCE, case=label, score=k,
                            theirs_by="lm_polygraph ROCAUC", ties=ties))
        if ties <= MAX_TIE_SHARE * len(s):
            rows.append(compare("PRR (normalised)", au.prr(1.0 - wrong, s), prr, PRR_TOLERANCE, floor=1.0, case=label,
                                score=k, theirs_by="lm_polygraph PredictionRejectionArea, UEManager's normalisation",
                                ties=ties))
    return frame(rows)


def polygraph_ranking(table: Any, scores: Sequence[str], *, label: str = "") -> Any:
    """LM-Polygraph's ROC-AUC and normalised PRR of every score, best PRR first.

    Returns
    -------
    DataFrame
        Columns ``case``, ``score``, ``answers``, ``ties``, ``ROC-AUC``, ``PRR``.
    """
    import pandas as pd

    rows = [{"case": label, "score": k, "answers": len(s), "ties": ties, **dict(zip(("ROC-AUC", "PRR"), _theirs(w, s)))}
            for k, w, s, ties in labelled_scores(table, scores)]
    out = pd.DataFrame(rows, columns=["case", "score", "answers", "ties", "ROC-AUC", "PRR"])
    return out.sort_values("PRR", ascending=False, ignore_index=True)
