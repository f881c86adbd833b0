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


def _parted_kind(code_root: Path):
    """A chaotic kind whose ``.v`` is its part ``p`` and whose ``.w`` lies outside it."""
    return demo_kind(code_root, Chaotic(GivenInputs((".v", ".w"), rtol=1e-3, atol=1e-9)), carry_sample=1,
                     carry_all_exact=True, carry_parts=("p",), carry_part_sample=2)


def _parted_fill(tmp_path: Path, code_root: Path) -> None:
    Store(tmp_path / "results", label="the test store").items(
        _parted_kind(code_root), {"n": 6}, IDS, lambda i: {"v": int(i) / 7, "w": int(i) / 3, "tokens": [int(i)]})


def test_a_carry_confined_to_a_part_plans_the_part_for_all_but_samples(tmp_path: Path) -> None:
    kind = _parted_kind(tmp_path)
    plan = carry_plan(kind, IDS, part="p")
    assert sorted(plan.values()) == ["exact", "exact", "full", "p", "p", "p"]
    assert carry_plan(kind, IDS, part="p") == plan  # fixed seeds
    assert sorted(carry_plan(kind, IDS).values()) == ["exact"] * 5 + ["full"]
    with pytest.raises(ValueError, match="cannot be confined to 'q': its parts are p"):
        carry_plan(kind, IDS, part="q")
    with pytest.raises(ValueError, match="its parts are none"):
        carry_plan(demo_kind(tmp_path, Chaotic(Within()), carry_sample=2), IDS, part="p")


def _from_outputs(w_shift: float = 0.0, v_shift: float = 0.0):
    seen: list[tuple[str, str | None]] = []

    def from_outputs(i: str, stored: dict, _: dict, part: str | None = None) -> dict:
        seen.append((i, part))
        v = int(i) / 7 + v_shift
        return {"v": v} if part == "p" else {"v": v, "w": int(i) / 3 + w_shift, "tokens": [int(i)]}

    return from_outputs, seen


def test_a_carry_confined_to_a_part_compares_only_that_part(tmp_path: Path, code_root: Path) -> None:
    _parted_fill(tmp_path, code_root)
    _change_code(code_root)
    kind = _parted_kind(code_root)
    from_outputs, seen = _from_outputs()
    store = Store(tmp_path / "results", label="the test store", carry=True, carry_part="p")
    store.items(kind, {"n": 6}, IDS, lambda i: {"v": int(i) / 7, "w": int(i) / 3, "tokens": [int(i)]},
                from_outputs=from_outputs)
    plan = carry_plan(kind, IDS, part="p")
    assert sorted(seen) == sorted((i, "p" if m == "p" else None) for i, m in plan.items() if m != "full")
    (report,) = (tmp_path / "results" / "demo").glob("*.carried.json")
    info = json.loads(report.read_text())
    assert (info["part"], info["verified_part_only"], info["verified_exact_part"], info["verified_full"]) == ("p", 3, 2, 1)
    assert any("only the p part recomputed and compared" in r for r in info["rules"])


@pytest.mark.parametrize("shift", ["v", "w"])
def test_a_change_beyond_the_part_is_caught_by_the_sampled_whole_exact_parts(tmp_path: Path, code_root: Path,
                                                                              shift: str) -> None:
    """A change to ``.v`` fails every item; one to ``.w`` (outside the part, claimed untouched)
    fails the items whose whole exact part is recomputed, so nothing is carried either way."""
    _parted_fill(tmp_path, code_root)
    _change_code(code_root)
    from_outputs, _ = _from_outputs(**{f"{shift}_shift": 1.0})
    store = Store(tmp_path / "results", label="the test store", carry=True, carry_part="p")
    with pytest.raises(CarryRefused, match=rf"recomputed differently.*\.{shift}"):
        store.items(_parted_kind(code_root), {"n": 6}, IDS,
                    lambda i: {"v": int(i) / 7, "w": int(i) / 3, "tokens": [int(i)]}, from_outputs=from_outputs)
    assert not list((tmp_path / "results" / "demo").glob("*.carried.json"))


def test_a_store_carries_kinds_without_the_part_in_full(tmp_path: Path, code_root: Path) -> None:
    _fill(tmp_path, demo_kind(code_root))
    _change_code(code_root)
    store = Store(tmp_path / "results", label="the test store", carry=True, carry_part="p")
    store.items(demo_kind(code_root), {"n": 6}, IDS, lambda i: {"v": int(i) / 7, "tokens": [int(i)]})
    (report,) = (tmp_path / "results" / "demo").glob("*.carried.json")
    info = json.loads(report.read_text())
    assert info["verified_full"] == 6 and "part" not in info


def test_an_unknown_carry_part_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from gnuq_core.store import open_store

    monkeypatch.setenv("GNUQ_STORE_CARRY_PART", "gradeint")
    with pytest.raises(ValueError, match="GNUQ_STORE_CARRY_PART='gradeint': no stored kind has that part; use one "
                                         "of gradient"):
        open_store("full")


def test_an_interrupted_part_carry_is_not_resumed_by_a_whole_one(tmp_path: Path, code_root: Path) -> None:
    """Items verified only in their part do not count for a carry of the whole exact part."""
    _parted_fill(tmp_path, code_root)
    _change_code(code_root)
    kind = _parted_kind(code_root)
    compute = lambda i: {"v": int(i) / 7, "w": int(i) / 3, "tokens": [int(i)]}  # noqa: E731
    from_outputs, seen = _from_outputs()

    def interrupted(i: str, stored: dict, records: dict, part: str | None = None) -> dict:
        if len(seen) == 3:
            raise KeyboardInterrupt
        return from_outputs(i, stored, records, part=part) if part else from_outputs(i, stored, records)

    with pytest.raises(KeyboardInterrupt):
        Store(tmp_path / "results", label="t", carry=True, carry_part="p").items(kind, {"n": 6}, IDS, compute,
                                                                               from_outputs=interrupted)
    assert list((tmp_path / "results" / "demo").glob("*.carry.jsonl"))  # the verification so far is kept
    seen.clear()
    Store(tmp_path / "results", label="t", carry=True).items(kind, {"n": 6}, IDS, compute, from_outputs=from_outputs)
    assert len(seen) == 5 and {p for _, p in seen} == {None}  # every item's whole exact part, from the start
