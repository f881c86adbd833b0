"""gnuq_core.paper: the paper's own numbers, from one data file."""

from __future__ import annotations

import pytest

from gnuq_core import paper
from gnuq_core.bayes.synthetic import PROBLEMS, TABLE1


def test_every_cell_of_the_papers_two_tables_is_there_once() -> None:
    t1, t2 = paper.cells("1"), paper.cells("2")
    assert len(t1) == 38 and len(t2) == 12
    assert len({(c["problem"], c["row"], c["statistic"]) for c in t1}) == 38
    assert {c["problem"] for c in t1} == set(TABLE1) and all(PROBLEMS[c["problem"]].paper for c in t1)
    assert all(0 <= c["value"] <= 1 for c in t1 + t2) and all(c["std"] > 0 for c in t2)


def test_lookups() -> None:
    assert paper.value("1", "Epistemic (GN)", "", "rho", problem="binary_rings") == 0.44
    assert paper.value("1", "Epistemic (LA)", "", "r", problem="multiclass_spirals") is None  # not in the paper
    assert paper.value("2", "Epi. & Alea.", "TruthfulQA", "auroc") == 0.63
    assert paper.statement("rho_epistemic_ptrue")["values"] == [-0.2]
    with pytest.raises(KeyError, match="no paper statement 'nope'"):
        paper.statement("nope")
