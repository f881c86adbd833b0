"""The results store: reuse, compute only what is missing, verify a sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnuq_core.repro.results_store import ResultsDisagree, compare, run_stored


@pytest.fixture()
def code(tmp_path: Path) -> list[Path]:
    src = tmp_path / "code.py"
    src.write_text("x = 1\n")
    return [src]


def test_missing_items_are_computed_once(tmp_path: Path, code: list[Path]) -> None:
    calls: list[str] = []

    def compute(i: str) -> dict:
        calls.append(i)
        return {"score": int(i) * 0.5, "seconds": 1.0}

    root = tmp_path / "store"
    first = run_stored("demo", {"n": 3}, ["1", "2"], compute, code_files=code, verify=0, root=root)
    assert [r["score"] for r in first] == [0.5, 1.0] and calls == ["1", "2"]
    second = run_stored("demo", {"n": 3}, ["1", "2", "3"], compute, code_files=code, verify=0, root=root)
    assert [r["id"] for r in second] == ["1", "2", "3"] and calls == ["1", "2", "3"]


def test_a_sample_is_recomputed_and_must_agree(tmp_path: Path, code: list[Path]) -> None:
    root = tmp_path / "store"
    run_stored("demo", {}, ["1", "2"], lambda i: {"score": 1.0}, code_files=code, verify=0, root=root)
    run_stored("demo", {}, ["1", "2"], lambda i: {"score": 1.0 + 1e-9}, code_files=code, verify=2, root=root)
    with pytest.raises(ResultsDisagree, match=r"item [12] recomputed differently \(\.score: stored 1.0"):
        run_stored("demo", {}, ["1", "2"], lambda i: {"score": 2.0}, code_files=code, verify=1, root=root)


def test_changed_code_or_config_gets_a_new_file(tmp_path: Path, code: list[Path]) -> None:
    root = tmp_path / "store"
    run_stored("demo", {"a": 1}, ["1"], lambda i: {"v": 1}, code_files=code, verify=0, root=root)
    run_stored("demo", {"a": 2}, ["1"], lambda i: {"v": 2}, code_files=code, verify=0, root=root)
    code[0].write_text("x = 2\n")
    run_stored("demo", {"a": 1}, ["1"], lambda i: {"v": 3}, code_files=code, verify=0, root=root)
    assert len(list((root / "demo").glob("*.jsonl"))) == 3


def test_compare_recurses() -> None:
    assert compare({"a": [1.0, {"b": 2.0}]}, {"a": [1.0, {"b": 2.0}]}, 1e-6, 0) == []
    assert compare({"a": [1.0, {"b": 2.0}]}, {"a": [1.0, {"b": 2.1}]}, 1e-6, 0) == [".a[1].b: stored 2.0, recomputed 2.1"]


def test_floats_are_stored_and_returned_rounded(tmp_path):
    import json

    from gnuq_core.repro.results_store import run_stored

    code = tmp_path / "code.py"
    code.write_text("x = 1\n")
    first = run_stored("r", {}, ["a"], lambda i: {"v": 1 / 3, "xs": [2 / 3, 7], "nan": float("nan")},
                       code_files=[code], root=tmp_path, digits=4)
    assert first[0]["v"] == 0.3333 and first[0]["xs"] == [0.6667, 7] and first[0]["nan"] is None
    (path,) = tmp_path.glob("r/*.jsonl")
    assert json.loads(path.read_text().splitlines()[1])["v"] == 0.3333
    # A later build (reading the store, checking the item) returns the same numbers.
    again = run_stored("r", {}, ["a"], lambda i: {"v": 1 / 3, "xs": [2 / 3, 7], "nan": float("nan")},
                       code_files=[code], root=tmp_path, digits=4, rtol=1e-3)
    assert again[0]["v"] == first[0]["v"] and again[0]["xs"] == first[0]["xs"]


def test_tuples_in_a_fresh_record_compare_equal_to_stored_lists(tmp_path):
    from gnuq_core.repro.results_store import run_stored

    code = tmp_path / "code.py"
    code.write_text("x = 1\n")
    for _ in range(2):  # the second call verifies the stored item against a fresh one
        run_stored("t", {}, ["a"], lambda i: {"pair": (1.5, 2)}, code_files=[code], root=tmp_path, verify=1)
