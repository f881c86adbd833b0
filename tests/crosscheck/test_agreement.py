"""Agreement rows: the error, the tolerance and the worst entry."""

from __future__ import annotations

import numpy as np
import pytest

from gnuq_core.crosscheck.agreement import compare, frame


def test_compare_reports_worst_entry_and_tolerance() -> None:
    row = compare("x", [1.0, 2.0, 3.0], [1.0, 2.0, 3.3], 1e-3)
    assert row["ours"] == 3.0 and row["theirs"] == 3.3
    assert row["max_rel_error"] == pytest.approx(0.3 / 3.3)
    assert not row["agrees"]
    assert compare("x", [1.0, 0.0], [1.0, 0.0], 0.0)["agrees"]


def test_floor_scale_and_nan() -> None:
    assert compare("x", 1e-12, 2e-12, 1e-6, floor=1.0)["agrees"]
    assert not compare("x", 1e-12, 2e-12, 1e-6)["agrees"]
    assert compare("x", 1.1, 1.0, 3.0, scale=0.05)["max_rel_error"] == pytest.approx(2.0)
    assert not compare("x", [np.nan], [1.0], 1.0)["agrees"]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="shape"):
        compare("x", [1.0, 2.0], [1.0], 1e-3)
    with pytest.raises(ValueError, match="empty"):
        compare("x", [], [], 1e-3)
    assert list(frame([]).columns)[:3] == ["quantity", "n", "ours"]
