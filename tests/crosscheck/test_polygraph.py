"""gnuq_core.crosscheck.polygraph: LM-Polygraph's ROC-AUC and normalised PRR beside the project's."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("lm_polygraph.ue_metrics")

from gnuq_core.crosscheck import polygraph  # noqa: E402
from gnuq_core.qa import auroc as au  # noqa: E402


def _table(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    wrong = rng.random(n) < 0.6
    informative = wrong + rng.normal(0, 0.8, n)  # larger when wrong: AUROC well above 0.5
    return pd.DataFrame({"incorrect": wrong, "correct": ~wrong, "good": informative, "noise": rng.normal(size=n),
                         "tied": np.round(informative), "with_inf": np.where(np.arange(n) < 5, -np.inf, informative)})


def test_lm_polygraph_agrees_with_the_project_and_ranks_the_informative_score_first() -> None:
    t = _table()
    rows = polygraph.polygraph_metrics(t, ["good", "noise", "tied", "with_inf", "absent"], label="demo")
    assert set(rows["score"]) == {"good", "noise", "tied", "with_inf"}  # absent columns are skipped
    assert rows["agrees"].all(), rows[["quantity", "score", "ours", "theirs", "max_rel_error"]]
    auc = rows[(rows["quantity"] == "AUROC")].set_index("score")["theirs"]
    assert auc["good"] == pytest.approx(au.auroc(t["incorrect"], t["good"]), rel=1e-12) and auc["good"] > 0.7
    assert abs(auc["noise"] - 0.5) < 0.1
    prr = rows[rows["quantity"] == "PRR (normalised)"].set_index("score")["theirs"]
    assert "tied" not in prr  # many ties: LM-Polygraph's tie order decides its PRR, so it is not compared
    ranking = polygraph.polygraph_ranking(t, ["noise", "good", "tied"], label="demo")
    assert list(ranking["score"])[0] == "good" and ranking["PRR"].is_monotonic_decreasing
    assert ranking.set_index("score").loc["good", "PRR"] == pytest.approx(prr["good"])
    assert ranking.set_index("score").loc["tied", "ties"] > 0.01 * len(t)


def test_a_real_difference_fails_the_check() -> None:
    t = _table()
    rows = polygraph.polygraph_metrics(t, ["good"], label="demo")
    row = rows[rows["quantity"] == "AUROC"].iloc[0]
    assert row["agrees"]
    flipped = polygraph.compare("AUROC", row["ours"] + 1e-6, row["theirs"], polygraph.AUROC_TOLERANCE)
    assert not flipped["agrees"]  # the tolerance is rounding, not a margin
