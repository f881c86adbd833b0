"""The Gram-kernel timing: the widths are the gradient pass's, and the result says what it
timed (that every kernel forms the Gram matrix: tests/lm/test_floor.py)."""

from __future__ import annotations

import pytest
import torch

from gnuq_core.bench import grams
from gnuq_core.lm.floor import gram_products, gram_widths
from tests.tiny_models import tiny_llama


def test_gram_kernels_times_the_pass_widths() -> None:
    m = tiny_llama(dtype=torch.float32)
    prompt, answer = [3, 4, 5], [6]  # 4 rows: the ghost way for every layer of width 16
    out = grams.gram_kernels(m, prompt, answer, repeats=3)
    assert out["rows"] == 4 and out["repeats"] == 3
    assert out["widths"] == {str(w): n for w, n in sorted(gram_widths(m, 4).items())} and out["widths"]
    assert set(out["kernels"]) == set(gram_products("cpu", torch.get_num_threads()))
    full = out["kernels"]["full"]
    assert (full["ratio"]["median"], full["ratio"]["ci"], full["ratio"]["n"]) == (1.0, [1.0, 1.0], 3)
    assert full["over_forward"]["median"] > 0
    assert out["best"] in set(out["kernels"]) - {"full"} and out["forward_seconds"] > 0
    with pytest.raises(ValueError, match="repeats=0"):
        grams.gram_kernels(m, prompt, answer, repeats=0)


def test_nothing_to_time_where_no_layer_takes_the_ghost_way() -> None:
    m = tiny_llama(dtype=torch.float32)
    out = grams.gram_kernels(m, list(range(3, 40)), [5], repeats=2)  # 38 rows: explicit weight gradients
    assert out["widths"] == {} and out["kernels"] == {} and out["best"] is None


def test_gram_rows_report_the_full_products_and_the_fastest_symmetric_kernel() -> None:
    from gnuq_core.bench import report

    m = tiny_llama(dtype=torch.float32)
    timed = grams.gram_kernels(m, [3, 4, 5], [6], repeats=2)
    res = {"models": {"timed": {"grams": timed}, "explicit": {"grams": {**timed, "kernels": {}, "best": None}},
                      "older run": {}}}
    (row,) = report.gram_rows(res)
    assert row["model"] == "timed" and row["rows T"] == 4 and row["rounds"] == 2
    assert row["Gram products ÷ forward"] == timed["kernels"]["full"]["over_forward"]["median"]
    assert row["fastest symmetric kernel"] == timed["best"] and row["its 95% CI"].startswith("[")
    assert row["ideal"] == gram_products("cpu")[timed["best"]][1]
    header, line = report._text_table([row])
    assert "fastest symmetric kernel" in header and line.split()[0] == "timed"
