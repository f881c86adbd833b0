"""gnuq_core.qa.table2: a cell as the paper computes it, and the rule that judges it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnuq_core.qa import table2


def _table(n: int, signal: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    wrong = rng.uniform(size=n) < 0.5
    return pd.DataFrame({"incorrect": wrong.astype(int), "combined": rng.standard_normal(n) + signal * wrong})


def test_a_cell_pools_bootstrap_runs_and_models() -> None:
    strong, none = _table(400, 2.0, 0), _table(400, 0.0, 1)
    c = table2.cell([strong, none], "combined", n_boot=100, seed=0)
    assert c.runs == 200 and c.per_model[0] > 0.85 and abs(c.per_model[1] - 0.5) < 0.06
    assert c.mean == pytest.approx(np.mean(c.per_model), abs=1e-9)
    assert c.std > 0.15  # the spread between the models is part of the pooled std, as the paper's ± over its LLMs


@pytest.mark.parametrize("mean, std, paper, want", [
    (0.60, 0.01, 0.63, "reproduced"), (0.50, 0.05, 0.59, "reproduced"), (0.45, 0.02, 0.63, "not reproduced"),
    (0.50, 0.02, None, "beyond the paper")])
def test_the_rule(mean, std, paper, want) -> None:
    assert table2.verdict(table2.Cell(mean, std, (mean,), 300), paper)[0] == want
