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


def test_read_only_returns_the_stored_items_and_computes_nothing(tmp_path: Path, code: list[Path]) -> None:
    root = tmp_path / "store"
    run_stored("demo", {}, ["1", "3"], lambda i: {"score": float(i)}, code_files=code, verify=0, root=root)
    files = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    def compute(i: str) -> dict:
        if i == "2":
            raise AssertionError("a read-only run computed a missing item")
        return {"score": float(i)}

    got = run_stored("demo", {}, ["3", "2", "1"], compute, code_files=code, verify=1, root=root,
                     compute_missing=False)
    assert [r["id"] for r in got] == ["3", "1"]  # stored ids, in the requested order
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == files  # nothing written
    with pytest.raises(ResultsDisagree):  # the sample check still runs
        run_stored("demo", {}, ["1"], lambda i: {"score": 9.0}, code_files=code, verify=1, root=root,
                   compute_missing=False)


def test_a_sample_is_recomputed_and_must_agree(tmp_path: Path, code: list[Path]) -> None:
    root = tmp_path / "store"
    run_stored("demo", {}, ["1", "2"], lambda i: {"score": 1.0}, code_files=code, verify=0, root=root)
    run_stored("demo", {}, ["1", "2"], lambda i: {"score": 1.0 + 1e-9}, code_files=code, verify=2, root=root)
    with pytest.raises(ResultsDisagree, match=r"item [12] recomputed differently \(\.score: stored 1.0"):
        run_stored("demo", {}, ["1", "2"], lambda i: {"score": 2.0}, code_files=code, verify=1, root=root)


def test_the_check_draws_only_among_the_items_it_may_afford(tmp_path: Path, code: list[Path]) -> None:
    root = tmp_path / "store"
    run_stored("demo", {}, ["1", "2", "3"], lambda i: {"score": 1.0, "seconds": float(i)}, code_files=code,
               verify=0, root=root)
    rechecked: list[str] = []

    def recompute(i: str) -> dict:
        rechecked.append(i)
        return {"score": 1.0}

    for seed in range(5):  # whatever the draw, only the cheap items are recomputed
        run_stored("demo", {}, ["1", "2", "3"], recompute, code_files=code, verify=2, root=root, seed=seed,
                   verify_among=lambda r: r["seconds"] <= 2)
    assert set(rechecked) == {"1", "2"} and len(rechecked) == 10


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


def test_sharded_runs_fill_one_store_in_the_one_process_order(tmp_path: Path, code: list[Path]) -> None:
    from gnuq_core.repro.records import read_records
    from gnuq_core.repro.shards import ShardLocked, World, locked, shard_path, shard_paths

    ids = [str(i) for i in range(7)]
    calls: list[str] = []

    def compute(i: str) -> dict:
        calls.append(i)
        return {"v": int(i) / 3}

    one = run_stored("s", {}, ids, compute, code_files=code, verify=0, root=tmp_path / "one")
    # rank 1 of 2 runs first (no process group: the barriers are no-ops), leaving its shard
    root = tmp_path / "two"
    calls.clear()
    part = run_stored("s", {}, ids, compute, code_files=code, verify=0, root=root, world=World(1, 2))
    assert calls == ["1", "3", "5"] and [r["id"] for r in part] == ["1", "3", "5"]  # what it can read
    (shard,) = root.glob("s/*.rank1of2.jsonl")
    main = shard.with_name(shard.name.replace(".rank1of2", ""))
    # a one-process run must not write while a job holds a shard
    with locked(shard):
        with pytest.raises(ShardLocked):
            run_stored("s", {}, ids, compute, code_files=code, verify=0, root=root)
    calls.clear()
    both = run_stored("s", {}, ids, compute, code_files=code, verify=0, root=root, world=World(0, 2))
    assert calls == ["0", "2", "4", "6"] and both == one
    assert shard_paths(main) == [] and not shard_path(main, 0, 2).exists()
    assert read_records(main) == read_records(next((tmp_path / "one").glob("s/*.jsonl")))
    calls.clear()
    assert run_stored("s", {}, ids, compute, code_files=code, verify=0, root=root) == one and calls == []


def test_describe_says_what_is_read_and_how_it_is_checked() -> None:
    from gnuq_core.repro.results_store import describe, describe_without_store, pool_words

    one = describe("The summaries", ["a", "b"], 1, "sampled again", 1e-4)
    assert "(results/a, results/b;" in one and "1 stored item of each kind" in one and "is recomputed" in one
    assert "(sampled again)" in one and "1e-04" in one
    assert "2 stored items of each kind" in describe("X", ["a"], 2, "r", 1e-3) and "are recomputed" in describe(
        "X", ["a"], 2, "r", 1e-3)
    assert "the store is not checked" in describe("X", ["a"], 0, "r", 1e-3)
    assert describe("X", ["a"], 1, "r", 1e-3, extra="More.").endswith(" More.")
    assert "reads the runs from the repository's results store" in describe_without_store("the runs")
    pool = pool_words([10.0, 200.0, 2400.0], 300, "references", "sample")
    assert "among the 2 of these 3 that took at most 300 s to sample" in pool and "longest took 40 minutes" in pool
