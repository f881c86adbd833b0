"""gnuq_core.bayes.table1: the rule that judges a cell, and the cells of one run."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.bayes import table1


def _cell(median: float, lo: float, hi: float, seeds: int = 5) -> table1.Cell:
    return table1.Cell(median, lo, hi, seeds, (median,) * seeds)


@pytest.mark.parametrize("cell, paper, want", [
    (_cell(0.90, 0.85, 0.95), 0.99, "reproduced"),        # within 0.10 of the median
    (_cell(0.50, 0.40, 0.70), 0.68, "reproduced"),        # inside the interval
    (_cell(0.50, 0.45, 0.55), 0.68, "not reproduced"),    # 0.18 away, outside the interval
    (_cell(0.50, 0.10, 0.90), 0.99, "inconclusive"),      # too wide to decide
    (_cell(0.99, 0.98, 1.00, seeds=3), 0.44, "inconclusive"),  # too few seeds, whatever the values
    (_cell(0.80, 0.70, 0.90), None, "beyond the paper"),
])
def test_the_rule(cell, paper, want) -> None:
    assert table1.verdict(cell, paper)[0] == want


def test_cells_of_one_run_and_the_reference_per_task() -> None:
    rng = np.random.default_rng(0)
    ref = rng.uniform(size=40)
    run = {"q": {"grid": {"ref": {"var_f": ref}, "est": {"iso_f": ref ** 2, "laplace_f": -ref}}}}
    cells = table1.cell_values(run, "regression_nonlinear", n_boot=100)
    assert set(cells) == {(r, s) for r in ("Epistemic (GN)", "Epistemic (LA)") for s in ("r", "rho")}
    assert cells["Epistemic (GN)", "rho"][0] == pytest.approx(1.0) and cells["Epistemic (LA)", "rho"][0] == -1
    assert cells["Epistemic (GN)", "r"][0] < 1 and cells["Epistemic (GN)", "r"][1].shape == (100,)
    with pytest.raises(ValueError, match="not a Table 1 problem: two_moons"):
        table1.settings(["two_moons"], [0], {}, None, None, n_query_in=1, grid_size_2d=2, grid_size_1d=2,
                        n_restarts=1)
