"""The readings grid: graders, p and combined; each reading's table; robustness of a verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnuq_core.qa import readings
from gnuq_core.qa.readings import PRIMARY, Reading, grid, reading_table
from gnuq_core.repro import claims


def _table(n: int = 8) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    t = pd.DataFrame({"id": [f"q{i}" for i in range(n)],
                      "correct_rouge": [True, False, False, True, False, True, False, False][:n],
                      "rouge_tie": [False, True, False, False, True, False, False, False][:n],
                      "correct_rouge_best": [True] * n, "correct_rouge_any": [True] * n,
                      "correct_embed": [False] * n})
    for c in ("epistemic", "combined", "epistemic_norm", "combined_norm", "p_true", "grad_log_p_norm"):
        t[c] = rng.standard_normal(n)  # log10 scale
    for c in ("aleatoric", "aleatoric_norm"):
        t[c] = rng.uniform(0.0, 0.25, n)  # p(1 - p)
    return t


def test_the_grid_covers_every_grader_p_and_combination_primary_first() -> None:
    g = grid("truthfulqa")
    assert g[0] == PRIMARY["truthfulqa"] == Reading("careful") and len(g) == 7 * 3 * 2 and len(set(g)) == len(g)
    # without the careful labels (a preview's other answers) the ROUGE rule comes first
    fallback = grid("truthfulqa", graders=["rouge", "embedding"])
    assert fallback[0] == readings.FALLBACK["truthfulqa"] == readings.primary("truthfulqa", ["rouge"])
    assert len(grid("triviaqa")) == 4 * 3 * 2 and grid("triviaqa")[0] == Reading("careful")
    with pytest.raises(ValueError, match="unknown truthfulqa grader"):
        grid("truthfulqa", graders=["magic"])


def test_ties_are_false_true_or_left_out() -> None:
    t = _table()
    strict = reading_table(t, "truthfulqa", Reading("rouge"))
    true = reading_table(t, "truthfulqa", Reading("rouge_ties_true"))
    dropped = reading_table(t, "truthfulqa", Reading("rouge_no_ties"))
    assert strict["incorrect"].tolist() == [0, 1, 1, 0, 1, 0, 1, 1]
    assert true["incorrect"].tolist() == [0, 0, 1, 0, 0, 0, 1, 1]
    assert len(dropped) == 6 and dropped["id"].tolist() == ["q0", "q2", "q3", "q5", "q6", "q7"]


def test_p_and_combined_readings_take_their_columns() -> None:
    t = _table()
    norm = reading_table(t, "truthfulqa", Reading("rouge", "normalized", "sum"))
    assert np.allclose(norm["epistemic"], t["epistemic_norm"]) and np.allclose(norm["combined"], t["combined_norm"])
    loss = reading_table(t, "truthfulqa", Reading("rouge", "loss", "sum"))
    assert np.allclose(loss["epistemic"], t["grad_log_p_norm"]) and np.allclose(loss["aleatoric"], t["aleatoric_norm"])
    assert np.allclose(loss["combined"], np.log10(10.0 ** t["grad_log_p_norm"] + t["aleatoric_norm"]))
    ranks = reading_table(t, "truthfulqa", Reading("rouge", "sequence", "rank_mean"))
    assert np.allclose(ranks["combined"], (t["epistemic"].rank() / 8 + t["aleatoric"].rank() / 8) / 2)
    assert np.allclose(ranks["p_true"], t["p_true"])  # the other scores are untouched
    with pytest.raises(KeyError, match="no column 'correct_no_echo'"):
        reading_table(t, "triviaqa", Reading("no_echo"))
    assert "MiniLM" in readings.Reading("embedding").text("truthfulqa")


def test_robustness_says_robust_or_names_the_readings_that_flip() -> None:
    same = claims.robustness({"a": "not reproduced", "b": "not reproduced"}, "a")
    assert same["robust"] and same["text"] == "robust: not reproduced under all 2 readings"
    flip = claims.robustness({"a": "not reproduced", "b": "partly reproduced", "c": "not reproduced"}, "a")
    assert not flip["robust"] and flip["flips"] == {"b": "partly reproduced"}
    assert flip["text"].startswith("depends on the reading: not reproduced under the primary reading and 1 other,")
    two = claims.robustness({"a": "partly reproduced", "b": "not reproduced"}, "a")  # no other reading agrees
    assert two["text"].startswith("depends on the reading: partly reproduced under the primary reading, not ")
    keys = {f"grader={g}, p={p}": "no" if g == "x" else "yes" for g in ("x", "y", "z") for p in ("s", "n")}
    text = claims.robustness(keys, "grader=x, p=s")["text"]
    assert "yes under 4 (grader ∈ {y, z})" in text  # p varies freely among them: not named


def test_careful_labels_drop_unclear_answers_and_count_only_where_they_cover_the_build() -> None:
    t = _table()
    t["correct_careful"] = [1.0, 0.0, np.nan, 1.0, 0.0, 1.0, 0.0, 0.0]
    careful = reading_table(t, "truthfulqa", Reading("careful"))
    assert careful["id"].tolist() == ["q0", "q1", "q3", "q4", "q5", "q6", "q7"]
    assert careful["incorrect"].tolist() == [0, 1, 0, 1, 0, 1, 1]
    assert "careful" not in readings.graders_in([t], "truthfulqa")  # 7 of 8 labelled: below 90 %
    t.loc[2, "correct_careful"] = 1.0
    assert "careful" in readings.graders_in([t], "truthfulqa")
