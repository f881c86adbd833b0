"""The one store interface: read, compute what is missing, check a sample under the kind's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnuq_core.repro.records import read_records
from gnuq_core.store import ResultsDisagree, Store, StoreIncomplete, open_store
from gnuq_core.store.contracts import Chaotic, GivenInputs, SeedSpread, Within
from tests.store.conftest import another_platform, demo_kind, write_code


def _store(tmp_path: Path, **kw) -> Store:
    return Store(tmp_path / "results", label="the test store", **kw)


def test_missing_items_are_computed_once_and_stamped(tmp_path: Path, code_root: Path) -> None:
    kind, store = demo_kind(code_root), _store(tmp_path)
    calls: list[str] = []

    def compute(i: str) -> dict:
        calls.append(i)
        return {"score": int(i) * 0.5, "seconds": 1.0}

    first = store.items(kind, {"n": 3}, ["1", "2"], compute)
    assert [r["score"] for r in first] == [0.5, 1.0] and calls == ["1", "2"] and "_made" not in first[0]
    second = store.items(kind, {"n": 3}, ["1", "2", "3"], compute)
    assert [r["id"] for r in second] == ["1", "2", "3"] and calls == ["1", "2", "3"]
    (path,) = (tmp_path / "results" / "demo").glob("*.jsonl")
    _, records = read_records(path)
    assert {r["_made"]["fp"] for r in records} == {store.fingerprint_id}
    assert {r["_made"]["code"] for r in records} == {kind.code}
    assert store.fingerprint_id in store.fingerprints()
    assert [(r.stored, r.computed) for r in store.reads] == [(0, 2), (2, 1)]


def test_read_only_computes_nothing_and_still_checks(tmp_path: Path, code_root: Path) -> None:
    kind, store = demo_kind(code_root), _store(tmp_path)
    store.items(kind, {}, ["1", "3"], lambda i: {"score": float(i)})
    files = {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}

    def compute(i: str) -> dict:
        if i == "2":
            raise AssertionError("a read-only call computed a missing item")
        return {"score": float(i)}

    got = store.items(kind, {}, ["3", "2", "1"], compute, verify=1, compute_missing=False)
    assert [r["id"] for r in got] == ["3", "1"]
    assert {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()} == files
    with pytest.raises(ResultsDisagree):
        store.items(kind, {}, ["1"], lambda i: {"score": 9.0}, verify=1, compute_missing=False)


def test_a_disagreement_names_the_file_the_item_the_value_and_the_fix(tmp_path: Path, code_root: Path) -> None:
    kind, store = demo_kind(code_root), _store(tmp_path)
    store.items(kind, {}, ["a", "b"], lambda i: {"score": 1.0})
    store.items(kind, {}, ["a", "b"], lambda i: {"score": 1.0 + 1e-9}, verify=2)  # within the contract
    with pytest.raises(ResultsDisagree) as err:
        store.items(kind, {}, ["a", "b"], lambda i: {"score": 2.0}, verify=1)
    text = str(err.value)
    assert "demo/" in text and ".jsonl: item " in text and "on the platform that made it" in text
    assert ".score: stored 1.0, recomputed 2.0" in text and "gnuq store carry 00_demo" in text
    assert "\n" not in text


def test_checks_are_recorded_with_the_contract_platforms_and_largest_deviation(tmp_path: Path,
                                                                                code_root: Path) -> None:
    kind, store = demo_kind(code_root), _store(tmp_path)
    store.items(kind, {}, ["a"], lambda i: {"score": 1.0})
    again = _store(tmp_path)
    again.items(kind, {}, ["a"], lambda i: {"score": 1.0 + 5e-7}, verify=1)
    (check,) = again.checks()
    assert check.same_platform and check.contract == "exact" and check.compared == 1
    assert check.largest == pytest.approx(0.5, rel=1e-3) and check.worst.path == ".score"
    text = again.describe("The demo items", ["demo"])
    assert "1 items read" in text and "largest deviation 0.5 of what the contract allows" in text.lower()
    assert f"`{again.fingerprint_id}` (this build) = " in text
    assert again.check_rows()[0]["item"] == "a"


def test_the_check_draws_only_among_the_items_it_may_afford(tmp_path: Path, code_root: Path) -> None:
    kind, store = demo_kind(code_root), _store(tmp_path)
    store.items(kind, {}, ["1", "2", "3"], lambda i: {"score": 1.0, "cost": float(i)})
    rechecked: list[str] = []

    def recompute(i: str) -> dict:
        rechecked.append(i)
        return {"score": 1.0, "cost": float(i)}

    for seed in range(5):
        store.items(kind, {}, ["1", "2", "3"], recompute, verify=2, seed=seed, verify_among=lambda r: r["cost"] <= 2)
    assert set(rechecked) == {"1", "2"} and len(rechecked) == 10


def test_changed_code_or_config_is_another_file_and_the_old_one_an_orphan(tmp_path: Path, code_root: Path) -> None:
    store = _store(tmp_path)
    store.items(demo_kind(code_root), {"a": 1}, ["1"], lambda i: {"v": 1})
    store.items(demo_kind(code_root), {"a": 2}, ["1"], lambda i: {"v": 2})
    write_code(code_root, "def f(x):\n    return 3 * x\n")
    kind = demo_kind(code_root)
    assert len(store.orphans(kind, {"a": 1})) == 1
    store.items(kind, {"a": 1}, ["1"], lambda i: {"v": 3})
    assert len(list((tmp_path / "results" / "demo").glob("*.jsonl"))) == 3
    assert store.reads[-1].orphan is not None


def test_the_paper_edition_says_loudly_or_fails_when_it_would_compute(tmp_path: Path, code_root: Path,
                                                                      capsys) -> None:
    kind = demo_kind(code_root)
    _store(tmp_path, missing="warn").items(kind, {}, ["1"], lambda i: {"v": 1.0})
    assert "1 of 1 items of demo are missing" in capsys.readouterr().err
    with pytest.raises(StoreIncomplete, match="2 of 2 items of demo are missing.*GNUQ_STORE_MISSING=error"):
        _store(tmp_path, missing="error").items(kind, {"other": 1}, ["1", "2"], lambda i: {"v": 1.0})
    with pytest.raises(ValueError, match="missing must be one of"):
        _store(tmp_path, missing="sometimes")


def test_floats_are_stored_rounded_and_nan_as_null(tmp_path: Path, code_root: Path) -> None:
    kind, store = demo_kind(code_root), _store(tmp_path)
    first = store.items(kind, {}, ["a"], lambda i: {"v": 1 / 3, "xs": (2 / 3, 7), "nan": float("nan")})
    assert first[0]["v"] == 0.3333333 and first[0]["xs"] == [0.6666667, 7] and first[0]["nan"] is None
    (path,) = (tmp_path / "results" / "demo").glob("*.jsonl")
    assert json.loads(path.read_text().splitlines()[1])["v"] == 0.3333333
    again = store.items(kind, {}, ["a"], lambda i: {"v": 1 / 3, "xs": (2 / 3, 7), "nan": float("nan")}, verify=1)
    assert again == first


def test_on_another_platform_the_foreign_rule_decides(tmp_path: Path, code_root: Path, monkeypatch) -> None:
    kind = demo_kind(code_root, Chaotic(Within(rtol=1e-2, atol=1e-9)))
    _store(tmp_path).items(kind, {}, ["a"], lambda i: {"v": 1.0})
    elsewhere = _store(tmp_path)
    elsewhere._fingerprint = another_platform(elsewhere.fingerprint)
    elsewhere.items(kind, {}, ["a"], lambda i: {"v": 1.003}, verify=1)  # bit-different, within the rule
    (check,) = elsewhere.checks()
    assert not check.same_platform and check.made_on != check.checked_on and check.largest < 1
    with pytest.raises(ResultsDisagree, match="differently on the platform that made it.*7 significant digits"):
        _store(tmp_path).items(kind, {}, ["a"], lambda i: {"v": 1.003}, verify=1)  # the same platform: bitwise


def test_given_inputs_recompute_from_the_stored_outputs_elsewhere(tmp_path: Path, code_root: Path) -> None:
    kind = demo_kind(code_root, Chaotic(GivenInputs((".lp",), rtol=1e-3, atol=1e-6)))
    store = _store(tmp_path)
    store.items(kind, {}, ["q"], lambda i: {"tokens": [3, 4], "lp": -1.5})
    elsewhere = _store(tmp_path)
    elsewhere._fingerprint = {**elsewhere.fingerprint, "torch_isa": "DEFAULT"}
    seen: list[dict] = []

    def from_outputs(i: str, stored: dict, records: dict) -> dict:
        seen.append(stored)
        return {**stored, "lp": -1.5000001}

    def compute(i: str) -> dict:
        return {"tokens": [9, 9], "lp": -7.0}  # sampling elsewhere gives other tokens: never compared

    elsewhere.items(kind, {}, ["q"], compute, from_outputs=from_outputs, verify=1)
    assert seen and seen[0]["tokens"] == [3, 4] and elsewhere.checks()[0].compared == 1
    with pytest.raises(ValueError, match="needs from_outputs"):
        elsewhere.items(kind, {}, ["q"], compute, verify=1)


def test_seed_spread_kinds_are_checked_against_the_other_seeds(tmp_path: Path, code_root: Path) -> None:
    kind = demo_kind(code_root, Chaotic(SeedSpread(k=3)))
    ids = [f"seed{k}" for k in range(8)]
    _store(tmp_path).items(kind, {}, ids, lambda i: {"rho": 0.9 + 0.01 * int(i[4:])})
    elsewhere = _store(tmp_path)
    elsewhere._fingerprint = {**elsewhere.fingerprint, "jax_isa": "SSE4_2"}
    elsewhere.items(kind, {}, ids, lambda i: {"rho": 0.9 + 0.01 * int(i[4:]) + 0.004}, verify=3)
    assert all(not c.same_platform and c.largest < 1 for c in elsewhere.checks())


def test_sharded_runs_fill_one_file_in_the_one_process_order(tmp_path: Path, code_root: Path) -> None:
    from gnuq_core.repro.shards import World, shard_paths

    kind = demo_kind(code_root)
    ids = [str(i) for i in range(7)]
    one = _store(tmp_path / "one").items(kind, {}, ids, lambda i: {"v": int(i) / 3})
    store = _store(tmp_path / "two")
    part = store.items(kind, {}, ids, lambda i: {"v": int(i) / 3}, world=World(1, 2))
    assert [r["id"] for r in part] == ["1", "3", "5"]
    both = store.items(kind, {}, ids, lambda i: {"v": int(i) / 3}, world=World(0, 2))
    assert both == one
    (main,) = (tmp_path / "two" / "results" / "demo").glob("*.jsonl")
    assert shard_paths(main) == []


def test_open_store_picks_by_profile(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GNUQ_STORE_MISSING", "error")
    paper, preview = open_store("full"), open_store("quick")
    assert paper.label == "the results store" and paper.check and paper.missing == "error"
    assert preview.label == "the local cache" and not preview.check and preview.root == tmp_path / "cache" / "store"
    monkeypatch.setenv("GNUQ_RESULTS_DIR", str(tmp_path / "copy"))
    assert open_store("full").root == tmp_path / "copy"
    assert "does not check its cache" in preview.describe("X", ["demo"])
