"""gnuq_core.bench.report: the side-by-side rows say what was and was not measured."""

from __future__ import annotations

import math

from gnuq_core.bench import report


def test_a_peer_row_without_memory_growth_shows_no_peak_and_says_why() -> None:
    rows = [{"batch_size": 4, "method": "gnuq", "seconds": 2.0, "ci": [1.5, 2.5], "answers_per_second": 2.0,
             "over_floor": 0.9, "peak_mb": 0.0, "runs": [2.0]},
            {"batch_size": 4, "method": "floor", "seconds": 2.2, "ci": [2.0, 2.4], "answers_per_second": 1.8,
             "over_floor": 1.0, "peak_mb": 512.0, "runs": [2.2]},
            {"batch_size": 64, "method": "opacus", "why": "too big"}]
    gnuq, floor, opacus = report.peer_rows({"models": {"m": {"peers": {"rows": rows}}}})
    assert math.isnan(gnuq["peak MB"]) and gnuq["note"] == report.NO_GROWTH  # not "0 MB"
    assert floor["peak MB"] == 512.0 and floor["note"] == "" and floor["answers / s [95% CI]"] == "1.8 [1.67, 2]"
    assert opacus["answers / s [95% CI]"] == "not run" and opacus["note"] == "not run: too big"
