"""A verified carry moves an orphaned file across a code change only if the new code reproduces it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnuq_core.repro.records import read_records
from gnuq_core.store import Store
from gnuq_core.store.carry import CarryRefused, carry_plan
from gnuq_core.store.contracts import Chaotic, Exact, GivenInputs, Within
from tests.store.conftest import demo_kind, write_code

IDS = [str(i) for i in range(6)]


def _fill(tmp_path: Path, kind) -> Store:
    store = Store(tmp_path / "results", label="the test store")
    store.items(kind, {"n": 6}, IDS, lambda i: {"v": int(i) / 7, "tokens": [int(i)]})
    return store


def _change_code(code_root: Path) -> None:
    write_code(code_root, "def f(x):\n    return 2 * x + 0\n")


def test_an_exact_kind_is_carried_after_every_item_agrees(tmp_path: Path, code_root: Path) -> None:
    _fill(tmp_path, demo_kind(code_root))
    _change_code(code_root)
    kind = demo_kind(code_root)
    calls: list[str] = []

    def compute(i: str) -> dict:
        calls.append(i)
        return {"v": int(i) / 7, "tokens": [int(i)]}

    store = Store(tmp_path / "results", label="the test store", carry=True, missing="error")
    recs = store.items(kind, {"n": 6}, IDS, compute)
    assert sorted(calls) == IDS and [r["v"] for r in recs] == [round(int(i) / 7, 7) for i in IDS]
    (report,) = (tmp_path / "results" / "demo").glob("*.carried.json")
    info = json.loads(report.read_text())
    assert info["items"] == 6 and info["verified_full"] == 6 and info["to_code"] == kind.code
    (main,) = [p for p in (tmp_path / "results" / "demo").glob("*.jsonl")]
    _, records = read_records(main)
    assert all(r["_made"]["code"] != kind.code for r in records)  # each keeps the code that made it
    assert store.reads[-1].carried_from is not None and store.orphans(kind, {"n": 6}) == []


def test_a_disagreeing_item_stops_the_carry_and_nothing_moves(tmp_path: Path, code_root: Path) -> None:
    _fill(tmp_path, demo_kind(code_root))
    _change_code(code_root)
    before = sorted(p.name for p in (tmp_path / "results" / "demo").iterdir())
    store = Store(tmp_path / "results", label="the test store", carry=True)
    with pytest.raises(CarryRefused, match=r"item 3 recomputed differently"):
        store.items(demo_kind(code_root), {"n": 6}, IDS, lambda i: {"v": 1.0 if i == "3" else int(i) / 7,
                                                                   "tokens": [int(i)]})
    after = sorted(p.name for p in (tmp_path / "results" / "demo").iterdir() if ".carry" not in p.name)
    assert after == before


def test_a_chaotic_kind_verifies_a_sample_and_given_inputs_every_exact_part(tmp_path: Path) -> None:
    sample = demo_kind(tmp_path, Chaotic(Within()), carry_sample=2)
    plan = carry_plan(sample, IDS)
    assert sorted(plan.values()) == ["full", "full"]
    given = demo_kind(tmp_path, Chaotic(GivenInputs((".v",), rtol=1e-3, atol=1e-9)), carry_sample=1,
                      carry_all_exact=True)
    plan = carry_plan(given, IDS)
    assert sorted(plan.values()) == ["exact"] * 5 + ["full"]
    assert set(carry_plan(demo_kind(tmp_path, Exact(1e-6, 0)), IDS).values()) == {"full"}
    assert set(carry_plan(sample, IDS, pool=["4", "5"])) == {"4", "5"}


def test_a_run_that_knows_only_some_items_cannot_carry_an_exact_kind(tmp_path: Path, code_root: Path) -> None:
    _fill(tmp_path, demo_kind(code_root))
    _change_code(code_root)
    store = Store(tmp_path / "results", label="the test store", carry=True)
    with pytest.raises(CarryRefused, match="holds 3 items this run does not compute"):
        store.items(demo_kind(code_root), {"n": 6}, IDS[:3], lambda i: {"v": int(i) / 7, "tokens": [int(i)]})


def test_the_carry_of_a_sharded_run_resumes_its_verification(tmp_path: Path, code_root: Path) -> None:
    from gnuq_core.repro.shards import World

    _fill(tmp_path, demo_kind(code_root))
    _change_code(code_root)
    kind = demo_kind(code_root)
    seen: list[str] = []

    def compute(i: str) -> dict:
        seen.append(i)
        return {"v": int(i) / 7, "tokens": [int(i)]}

    store = Store(tmp_path / "results", label="the test store", carry=True)
    # as `qa.study carry` runs it: read only; rank 1 verifies its share (without a process group it does not wait)
    store.items(kind, {"n": 6}, IDS, compute, world=World(1, 2), compute_missing=False)
    assert sorted(seen) == ["1", "3", "5"] and list((tmp_path / "results" / "demo").glob("*.carry.rank1of2.jsonl"))
    store.items(kind, {"n": 6}, IDS, compute, world=World(0, 2), compute_missing=False)  # rank 0: its share, the carry
    assert sorted(seen) == IDS and list((tmp_path / "results" / "demo").glob("*.carried.json"))


def test_a_second_carry_keeps_the_first_report_as_history(tmp_path: Path, code_root: Path) -> None:
    _fill(tmp_path, demo_kind(code_root))
    folder = tmp_path / "results" / "demo"
    same = lambda i: {"v": int(i) / 7, "tokens": [int(i)]}  # noqa: E731
    for body in ("def f(x):\n    return 2 * x + 0\n", "def f(x):\n    return 2 * x + 1 - 1\n"):
        write_code(code_root, body)
        Store(tmp_path / "results", label="the test store", carry=True).items(demo_kind(code_root), {"n": 6}, IDS, same)
    (report,) = folder.glob("*.carried.json")  # the first carry's report went with its items
    info = json.loads(report.read_text())
    (first,) = info["earlier_carries"]
    assert first["to_code"] == info["from_code"] and first["to"] == info["from"]
    assert len(list(folder.glob("*.jsonl"))) == 1
