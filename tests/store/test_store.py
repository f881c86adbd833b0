"""The one store interface: read and check, compute what is missing, check a sample under the kind's contract."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gnuq_core.repro.threads import blas_thread_variants, blas_threads
from gnuq_core.repro.records import read_records
from gnuq_core.store import Recipe, ResultsDisagree, Sample, Store, StoreDamaged, StoreIncomplete, open_store
from gnuq_core.store.contracts import Chaotic, GivenInputs, SeedSpread, Within
from gnuq_core.chapters.base import store_words
from tests.store.conftest import another_platform, demo_kind


def _store(tmp_path: Path, **kw) -> Store:
    return Store(tmp_path / "results", label="the test store", **kw)


def _file_without_logs(tmp_path: Path, kind: str = "demo") -> Path:
    (path,) = [p for p in (tmp_path / "results" / kind).glob("*.jsonl") if ".verify." not in p.name]
    return path


def _file(tmp_path: Path, kind: str = "demo") -> Path:
    (path,) = (tmp_path / "results" / kind).glob("*.jsonl")
    return path


def test_missing_items_are_computed_once_and_stamped(tmp_path: Path) -> None:
    kind, store = demo_kind(), _store(tmp_path)
    calls: list[str] = []

    def compute(i: str) -> dict:
        calls.append(i)
        return {"score": int(i) * 0.5, "seconds": 1.0}

    first = store.items(kind, {"n": 3}, ["1", "2"], compute)
    assert [r["score"] for r in first] == [0.5, 1.0] and calls == ["1", "2"] and "_made" not in first[0]
    second = store.items(kind, {"n": 3}, ["1", "2", "3"], Recipe(compute))
    assert [r["id"] for r in second] == ["1", "2", "3"] and calls == ["1", "2", "3"]
    config, records = read_records(_file(tmp_path))
    assert {json.dumps(r["_made"]) for r in records} == {json.dumps({"fp": store.fingerprint_id,
                                                                     "blas_threads": blas_threads()})}
    assert (config["_kind"], config["_version"], config["n"]) == ("demo", 1, 3)
    assert store.fingerprint_id in store.fingerprints()
    assert [(r.stored, r.computed) for r in store.reads] == [(0, 2), (2, 1)]


def test_read_only_computes_nothing_and_still_checks(tmp_path: Path) -> None:
    kind, store = demo_kind(), _store(tmp_path)
    store.items(kind, {}, ["1", "3"], lambda i: {"score": float(i)})
    files = {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}

    def compute(i: str) -> dict:
        if i == "2":
            raise AssertionError("a read-only call computed a missing item")
        return {"score": float(i)}

    got = store.items(kind, {}, ["3", "2", "1"], compute, verify=1, read_only=True)
    assert [r["id"] for r in got] == ["3", "1"]
    assert {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()} == files
    with pytest.raises(ResultsDisagree):
        store.items(kind, {}, ["1"], lambda i: {"score": 9.0}, verify=1, read_only=True)


def test_a_disagreement_names_the_file_the_item_the_value_and_the_fix(tmp_path: Path) -> None:
    kind, store = demo_kind(), _store(tmp_path)
    store.items(kind, {}, ["a", "b"], lambda i: {"score": 1.0})
    store.items(kind, {}, ["a", "b"], lambda i: {"score": 1.0 + 1e-9}, verify=2)  # within the contract
    with pytest.raises(ResultsDisagree) as err:
        store.items(kind, {}, ["a", "b"], lambda i: {"score": 2.0}, verify=1)
    text = str(err.value)
    assert "demo/" in text and ".jsonl: item " in text and "on the platform that made it" in text
    assert ".score: stored 1.0, recomputed 2.0" in text and "bump its version in gnuq_core/store/kinds.py" in text
    assert "gnuq store verify demo --all" in text and "\n" not in text


def test_checks_are_recorded_with_the_contract_platforms_and_largest_deviation(tmp_path: Path) -> None:
    kind, store = demo_kind(), _store(tmp_path)
    store.items(kind, {}, ["a"], lambda i: {"score": 1.0})
    again = _store(tmp_path)
    again.items(kind, {}, ["a"], lambda i: {"score": 1.0 + 5e-7}, verify=1)
    (check,) = again.checks()
    assert check.same_platform and check.contract == "exact" and check.compared == 1
    assert check.largest == pytest.approx(0.5, rel=1e-3) and check.worst.path == ".score"
    text = store_words(again, "The demo items", ["demo"])
    assert "1 items read" in text and "largest deviation 0.5 of what the contract allows" in text.lower()
    assert f"`{again.fingerprint_id}` (this build) = " in text and "version of its kind" in text


def test_a_sample_checks_what_the_page_quotes_then_draws_among_what_it_may_afford(tmp_path: Path) -> None:
    kind, store = demo_kind(), _store(tmp_path)
    store.items(kind, {}, ["1", "2", "3", "4"], lambda i: {"score": 1.0, "cost": float(i)})
    rechecked: list[str] = []

    def fresh(i: str) -> dict:
        rechecked.append(i)
        return {"score": 1.0, "cost": float(i)}

    for seed in range(5):
        sample = Sample(1, seed=seed, among=lambda r: r["cost"] <= 2, always=["4"], words="Item 4 always.")
        store.items(kind, {}, ["1", "2", "3", "4"], Recipe(lambda i: {}, fresh=fresh), verify=sample)
    assert rechecked[::2] == ["4"] * 5 and set(rechecked[1::2]) <= {"1", "2"} and len(rechecked) == 10
    assert "Item 4 always." in store_words(store, "The demo items", ["demo"])


def test_a_version_bump_or_another_config_is_another_file_and_status_calls_the_old_one_stale(tmp_path: Path) -> None:
    from gnuq_core.store.__main__ import status_rows

    store = _store(tmp_path)
    store.items(demo_kind(), {"a": 1}, ["1"], lambda i: {"v": 1})
    store.items(demo_kind(), {"a": 2}, ["1"], lambda i: {"v": 2})
    bumped = demo_kind(version=2)
    assert store.path(bumped, {"a": 1}) != store.path(demo_kind(), {"a": 1})
    store.items(bumped, {"a": 1}, ["1"], lambda i: {"v": 3})
    assert len(list((tmp_path / "results" / "demo").glob("*.jsonl"))) == 3
    import gnuq_core.store.kinds as registry

    registry.KINDS["demo"] = bumped
    try:
        states = sorted(r["state"].split(":")[0] for r in status_rows(store, ["demo"]))
    finally:
        del registry.KINDS["demo"]
    assert states == ["current", "stale", "stale"]


def test_the_paper_edition_says_loudly_or_fails_when_it_would_compute(tmp_path: Path, capsys) -> None:
    kind = demo_kind()
    _store(tmp_path, missing="warn").items(kind, {}, ["1"], lambda i: {"v": 1.0})
    assert "1 of 1 items of demo (version 1) are missing" in capsys.readouterr().err
    with pytest.raises(StoreIncomplete, match="2 of 2 items of demo .*are missing.*GNUQ_STORE_MISSING=error"):
        _store(tmp_path, missing="error").items(kind, {"other": 1}, ["1", "2"], lambda i: {"v": 1.0})
    with pytest.raises(ValueError, match="missing must be one of"):
        _store(tmp_path, missing="sometimes")


def test_floats_are_stored_rounded_and_nan_as_null_where_the_kind_allows_it(tmp_path: Path) -> None:
    kind, store = demo_kind(nullable=(".nan",)), _store(tmp_path)
    first = store.items(kind, {}, ["a"], lambda i: {"v": 1 / 3, "xs": (2 / 3, 7), "nan": float("nan")})
    assert first[0]["v"] == 0.3333333 and first[0]["xs"] == [0.6666667, 7] and first[0]["nan"] is None
    assert json.loads(_file(tmp_path).read_text().splitlines()[1])["v"] == 0.3333333
    again = store.items(kind, {}, ["a"], lambda i: {"v": 1 / 3, "xs": (2 / 3, 7), "nan": float("nan")}, verify=1)
    assert again == first


@pytest.mark.parametrize("altered", ["NaN", "Infinity", "null"])
def test_a_stored_non_finite_number_stops_the_read_naming_the_file_item_and_field(tmp_path: Path, altered) -> None:
    kind, store = demo_kind(nullable=(".ok",)), _store(tmp_path)
    store.items(kind, {}, ["a", "b"], lambda i: {"v": [1.0, 2.0], "ok": None})
    path = _file(tmp_path)
    path.write_text(path.read_text().replace('"v": [1.0, 2.0]', f'"v": [1.0, {altered}]', 1))
    with pytest.raises(StoreDamaged, match=r"demo/.*\.jsonl: item a holds .* at \.v\[1\], where demo stores only "
                                           r"finite numbers.*git checkout"):
        _store(tmp_path).items(kind, {}, ["a", "b"], lambda i: {"v": [1.0, 2.0], "ok": None})


def test_a_file_whose_header_is_another_kind_or_configuration_is_refused(tmp_path: Path) -> None:
    kind, other = demo_kind(), demo_kind(name="other")
    store = _store(tmp_path)
    store.items(other, {"x": 1}, ["a"], lambda i: {"v": 1.0})
    store.items(kind, {"x": 1}, ["a"], lambda i: {"v": 1.0})
    target, foreign = _file(tmp_path, "demo"), _file(tmp_path, "other")
    target.write_bytes(foreign.read_bytes())  # another kind's file under this kind's name
    with pytest.raises(StoreDamaged, match=r"demo/.*: its header is not the demo configuration its name stands for "
                                           r"\(it differs in _kind; header: kind 'other'"):
        _store(tmp_path).items(kind, {"x": 1}, ["a"], lambda i: {"v": 1.0})


def test_on_another_platform_the_foreign_rule_decides(tmp_path: Path) -> None:
    kind = demo_kind(Chaotic(Within(rtol=1e-2, atol=1e-9)))
    _store(tmp_path).items(kind, {}, ["a"], lambda i: {"v": 1.0})
    elsewhere = _store(tmp_path)
    elsewhere._fingerprint = another_platform(elsewhere.fingerprint)
    elsewhere.items(kind, {}, ["a"], lambda i: {"v": 1.003}, verify=1)  # bit-different, within the rule
    (check,) = elsewhere.checks()
    assert not check.same_platform and check.made_on != check.checked_on and check.largest < 1
    with pytest.raises(ResultsDisagree, match="differently on the platform that made it.*7 significant digits"):
        _store(tmp_path).items(kind, {}, ["a"], lambda i: {"v": 1.003}, verify=1)  # the same platform: bitwise


def test_given_inputs_recompute_from_the_stored_outputs_elsewhere(tmp_path: Path) -> None:
    kind = demo_kind(Chaotic(GivenInputs((".lp",), rtol=1e-3, atol=1e-6)))
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

    elsewhere.items(kind, {}, ["q"], Recipe(compute, from_outputs=from_outputs), verify=1)
    assert seen and seen[0]["tokens"] == [3, 4] and elsewhere.checks()[0].compared == 1
    with pytest.raises(ValueError, match="needs Recipe.from_outputs"):
        elsewhere.items(kind, {}, ["q"], compute, verify=1)


def test_seed_spread_kinds_are_checked_against_the_other_seeds(tmp_path: Path) -> None:
    kind = demo_kind(Chaotic(SeedSpread(k=3)))
    ids = [f"seed{k}" for k in range(8)]
    _store(tmp_path).items(kind, {}, ids, lambda i: {"rho": 0.9 + 0.01 * int(i[4:])})
    elsewhere = _store(tmp_path)
    elsewhere._fingerprint = {**elsewhere.fingerprint, "jax_isa": "SSE4_2"}
    elsewhere.items(kind, {}, ids, lambda i: {"rho": 0.9 + 0.01 * int(i[4:]) + 0.004}, verify=3)
    assert all(not c.same_platform and c.largest < 1 for c in elsewhere.checks())


def test_verify_all_checks_every_item_resumes_after_an_interruption_and_reports(tmp_path: Path) -> None:
    kind = demo_kind()
    _store(tmp_path).items(kind, {}, ["1", "2", "3"], lambda i: {"v": float(i)})
    done: list[str] = []

    def flaky(i: str) -> dict:
        if i == "3" and not any(d == "3" for d in done):
            done.append("3")
            raise KeyboardInterrupt  # killed while checking the third
        done.append(i)
        return {"v": float(i)}

    with pytest.raises(KeyboardInterrupt):
        _store(tmp_path, verify_all=True).items(kind, {}, ["1", "2", "3"], flaky, read_only=True)
    assert done == ["1", "2", "3"] and not list((tmp_path / "results" / "demo").glob("*.verified.json"))
    again = _store(tmp_path, verify_all=True)
    again.items(kind, {}, ["1", "2", "3"], flaky, read_only=True)
    assert done[3:] == ["3"] and len(again.checks()) == 1  # only what was not verified yet
    (report,) = (tmp_path / "results" / "demo").glob("*.verified.json")
    info = json.loads(report.read_text())
    assert (info["items"], info["whole"], info["exact_part"], info["largest_deviation"]) == (3, 3, 0, 0.0)
    assert "each recomputed" in store_words(again, "The demo items", ["demo"])


def test_sharded_runs_fill_one_file_in_the_one_process_order(tmp_path: Path) -> None:
    from gnuq_core.repro.shards import World, shard_paths

    kind = demo_kind()
    ids = [str(i) for i in range(7)]
    one = _store(tmp_path / "one").items(kind, {}, ids, lambda i: {"v": int(i) / 3})
    store = _store(tmp_path / "two")
    part = store.items(kind, {}, ids, lambda i: {"v": int(i) / 3}, world=World(1, 2))
    assert [r["id"] for r in part] == ["1", "3", "5"]
    both = store.items(kind, {}, ids, lambda i: {"v": int(i) / 3}, world=World(0, 2))
    assert both == one
    assert shard_paths(_file(tmp_path / "two")) == []


def test_open_store_picks_by_profile(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GNUQ_STORE_MISSING", "error")
    paper, preview = open_store("full"), open_store("quick")
    assert paper.label == "the results store" and paper.check and paper.missing == "error"
    assert not paper.verify_all
    assert preview.label == "the local cache" and not preview.check and preview.root == tmp_path / "cache" / "store"
    monkeypatch.setenv("GNUQ_RESULTS_DIR", str(tmp_path / "copy"))
    assert open_store("full").root == tmp_path / "copy"
    assert "does not check its cache" in store_words(preview, "X", ["demo"])
    monkeypatch.setenv("GNUQ_STORE_VERIFY", "all")
    assert open_store("full").verify_all is True
    monkeypatch.setenv("GNUQ_STORE_VERIFY", "qa,qa_mc")  # `gnuq store verify qa_mc --all`: that kind only
    assert open_store("full").verify_all == {"qa", "qa_mc"}
    for wrong in ("some", "qa,some"):
        monkeypatch.setenv("GNUQ_STORE_VERIFY", wrong)
        with pytest.raises(ValueError, match=f"GNUQ_STORE_VERIFY='{wrong}'.*known: proxy_synthetic"):
            open_store("full")


def test_verify_all_of_named_kinds_leaves_the_others_to_the_sample_and_a_declared_sample_is_reported(
        tmp_path: Path) -> None:
    named, other = demo_kind(), dataclasses.replace(demo_kind(), name="demo_other")
    sampled = dataclasses.replace(demo_kind(), name="demo_sampled", full_sample=2)
    ids = [str(i) for i in range(5)]
    for kind in (named, other, sampled):
        _store(tmp_path).items(kind, {}, ids, lambda i: {"v": float(i)})
    store = _store(tmp_path, verify_all=frozenset({"demo", "demo_sampled"}))
    for kind in (named, other, sampled):
        store.items(kind, {}, ids, lambda i: {"v": float(i)}, verify=1, read_only=True)
    assert [len(store.checks([k])) for k in ("demo", "demo_other", "demo_sampled")] == [5, 1, 2]
    report = json.loads(next((tmp_path / "results" / "demo_sampled").glob("*.verified.json")).read_text())
    assert (report["items"], report["of"], report["whole"]) == (2, 5, 2)
    assert not list((tmp_path / "results" / "demo_other").glob("*.verified.json"))


def test_no_pickle_and_no_code_keyed_machinery_remain() -> None:
    from gnuq_core.repro.paths import REPO_ROOT

    package = REPO_ROOT / "gnuq_core"
    assert not [p for p in package.rglob("*.py") if "import pickle" in p.read_text() or "pickle.load" in p.read_text()]
    assert not {"codeversion.py", "carry.py", "migrate.py"} & {p.name for p in (package / "store").iterdir()}
    lines = sum(len(p.read_text().splitlines()) for p in (package / "store").glob("*.py"))
    assert lines <= 1200, f"gnuq_core/store/ has {lines} lines"


def test_on_the_platform_that_made_it_an_item_is_recomputed_under_its_blas_threads(tmp_path: Path) -> None:
    """A result that depends on the BLAS thread count (an L-BFGS path) is checked under the count it was
    made with (stamped), or, made before the stamp, under this process's, then 1, then 2."""
    from threadpoolctl import threadpool_limits

    kind, store = demo_kind(Chaotic(Within(rtol=1e-6))), _store(tmp_path)

    def compute(i: str) -> dict:  # a number that depends on the thread count, as a fit's path can
        return {"v": float(blas_threads())}

    with threadpool_limits(limits=1, user_api="blas"):
        store.items(kind, {}, ["a"], compute)
    (record,) = read_records(_file(tmp_path))[1]
    assert record["_made"]["blas_threads"] == 1
    # checked later in a process with more threads: recomputed under the stamped 1, so it agrees
    with threadpool_limits(limits=2, user_api="blas"):
        assert store.items(kind, {}, ["a"], compute, verify=1)[0]["v"] == 1.0
        seen = [r["v"] for r in blas_thread_variants(compute, "a", {"_made": {"fp": "x"}})]  # no stamp
        here = float(blas_threads())
    assert seen[0] == here and 1.0 in seen


def test_a_full_verification_read_in_several_calls_reports_every_item_verified(tmp_path: Path) -> None:
    kind = demo_kind()
    ids = [str(i) for i in range(5)]
    _store(tmp_path).items(kind, {}, ids, lambda i: {"v": float(i)})
    store = _store(tmp_path, verify_all=True)
    store.items(kind, {}, ids[:2], lambda i: {"v": float(i)}, read_only=True)  # a chapter's first call
    store.items(kind, {}, ids[1:4], lambda i: {"v": float(i)}, read_only=True)  # its second, on the same file
    report = json.loads(next((tmp_path / "results" / "demo").glob("*.verified.json")).read_text())
    assert (report["items"], report["of"], sorted(report["verified"])) == (4, 5, ids[:4])


def test_a_full_verification_goes_on_on_another_platform_and_reports_which_checked_what(tmp_path: Path) -> None:
    """A verification longer than a session resumes in the next one, whatever its CPU: the log is
    the version's, each line names the platform that checked it, and the report counts both."""
    kind = demo_kind()
    ids = [str(i) for i in range(4)]
    _store(tmp_path).items(kind, {}, ids, lambda i: {"v": float(i)})
    calls: list[str] = []

    def stopping(i: str) -> dict:
        calls.append(i)
        if i == "2" and calls.count("2") == 1:
            raise KeyboardInterrupt  # the session ends here
        return {"v": float(i)}

    with pytest.raises(KeyboardInterrupt):
        _store(tmp_path, verify_all=True).items(kind, {}, ids, stopping, read_only=True)
    (log,) = (tmp_path / "results" / "demo").glob("*.verify.jsonl")
    from gnuq_core.store.store import stored_files

    assert stored_files(log.parent) == [_file_without_logs(tmp_path)]  # readers of the folder never take the log
    elsewhere = _store(tmp_path, verify_all=True)
    elsewhere._fingerprint = {**elsewhere.fingerprint, "jax_isa": "SSE4_2"}
    elsewhere.items(kind, {}, ids, stopping, read_only=True)
    assert calls == ["0", "1", "2", "2", "3"] and not log.exists()
    report = json.loads(next((tmp_path / "results" / "demo").glob("*.verified.json")).read_text())
    first, second = _store(tmp_path).fingerprint_id, elsewhere.fingerprint_id
    assert report["platforms"] == {first: ["0", "1"], second: ["2", "3"]} and report["items"] == 4
    from gnuq_core.store.verify import describe_report

    listed = ", ".join(f"{fp} (2)" for fp in sorted([first, second]))  # by fingerprint, whichever came first
    assert f"on {listed}: 4 of 4 items" in describe_report(_file(tmp_path))
