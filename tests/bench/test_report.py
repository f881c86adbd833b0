"""gnuq_core.bench.report: the side-by-side rows say what was and was not measured."""

from __future__ import annotations

import math

from gnuq_core.bench import report


def test_a_peer_row_without_memory_growth_shows_no_peak_and_says_why() -> None:
    rows = [{"batch_size": 4, "method": "gnuq", "seconds": 2.0, "ci": [1.5, 2.5], "answers_per_second": 2.0,
             "over_floor": 0.9, "peak_mb": 0.0, "runs": [2.0]},
            {"batch_size": 4, "method": "floor", "seconds": 2.2, "ci": [2.0, 2.4], "answers_per_second": 1.8,
             "over_floor": 1.0, "peak_mb": 512.0, "runs": [2.0, 2.2, 2.4]},
            {"batch_size": 64, "method": "opacus", "why": "too big"}]
    gnuq, floor, opacus = report.peer_rows({"models": {"m": {"peers": {"rows": rows}}}})
    assert math.isnan(gnuq["peak MB"]) and gnuq["note"] == report.NO_GROWTH  # not "0 MB"
    assert floor["peak MB"] == 512.0 and floor["note"] == "" and floor["answers / s [95% CI]"] == "1.8 [1.67, 2]"
    assert opacus["answers / s [95% CI]"] == "not run" and opacus["note"] == "not run: too big"


def test_the_ratio_to_the_floor_is_read_from_the_seconds_wherever_the_floor_was_timed() -> None:
    """A floor timed once (over the cap) is the floor too; a run that stored NaN there still reads right."""
    rows = [{"batch_size": 64, "method": "gnuq", "seconds": 24.0, "ci": [23.0, 25.0], "answers_per_second": 64 / 24,
             "over_floor": math.nan, "peak_mb": 0.0, "runs": [24.0]},
            {"batch_size": 64, "method": "floor", "seconds": 32.0, "ci": [32.0, 32.0], "answers_per_second": 2.0,
             "over_floor": math.nan, "peak_mb": 0.0, "runs": [32.0], "note": "timed once"},
            {"batch_size": 16, "method": "gnuq", "seconds": 6.0, "ci": [6.0, 6.0], "answers_per_second": 16 / 6,
             "over_floor": 1.0, "peak_mb": 0.0, "runs": [6.0]},
            {"batch_size": 16, "method": "floor", "why": "RuntimeError: out of memory"}]
    assert report.floor_ratios(rows)[64, "gnuq"] == 0.75 and report.floor_ratios(rows)[64, "floor"] == 1.0
    assert math.isnan(report.floor_ratios(rows)[16, "gnuq"])  # no floor at B = 16: no ratio, not a stored one
    gnuq64, floor64, gnuq16, _ = report.peer_rows({"models": {"m": {"peers": {"rows": rows}}}})
    assert gnuq64["÷ floor"] == 0.75 and floor64["÷ floor"] == 1.0 and math.isnan(gnuq16["÷ floor"])
    assert floor64["answers / s [95% CI]"] == "2 (one call)"  # one timed call has no interval to show
