"""The property-based fault battery: generated bad values per option type and damaged files
per format, through the real entry points.

Every case must end as the fault battery's do (`tests/test_faults.py`): exit status 2, one
line on stderr, no traceback, the files already there unchanged. Options are checked as
they are parsed (`gnuq_core.options`) and files as they are read
(`gnuq_core.repro.files`), so no case loads a model and the battery stays fast.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gnuq_core.options import MAX_SIZE, MAX_THREADS, OPTIONS, Rule  # noqa: E402
from tests.test_faults import _call, _snapshot, place  # noqa: E402,F401  (place: the shared fixture)

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
QA = ["qa", "--model", "{chat}", "--dataset", "triviaqa", "--data-dir", "{data}", "--samples", "0", "--no-p-true",
      "--no-progress", "--limit", "1"]
BENCH = ["--tiny", "--quiet", "--out", "{outputs}/bench.json"]

# (program, arguments before the flag, flag, the rule its values obey)
NUMERIC_FLAGS = [
    ("gnuq", QA + ["--out", "{out}"], "--max-new-tokens", "max_new_tokens"),
    ("gnuq", QA + ["--out", "{out}"], "--samples", "n_samples"),
    ("gnuq", QA + ["--out", "{out}", "--samples", "2"], "--temperature", "temperature"),
    ("gnuq", QA + ["--out", "{out}"], "--threads", "threads"),
    ("gnuq", QA + ["--out", "{out}"], "--seed", "seed"),
    ("gnuq", QA + ["--out", "{out}"], "--threshold", "threshold"),
    ("gnuq", ["score", "--model", "{chat}", "Q?"], "--max-new-tokens", "max_new_tokens"),
    ("bench", BENCH, "--threads", "threads"),
    ("bench", BENCH, "--questions", "size"),
    ("bench", BENCH, "--repeats", "size"),
    ("bench", BENCH, "--sweep-repeats", "size"),
    ("bench", BENCH, "--samples", "n_samples"),
    ("bench", BENCH, "--floor-rounds", "nonnegative_size"),
    ("bench", BENCH, "--gram-repeats", "nonnegative_size"),
    ("bench", BENCH, "--sequential-timed", "nonnegative_size"),
    ("bench", BENCH, "--peer-repeats", "size"),
    ("study", ["fill", "--dataset", "triviaqa"], "--threads", "threads"),
    ("study", ["fill", "--dataset", "triviaqa"], "--verify", "nonnegative_count"),
]


def _outside(rule: Rule) -> st.SearchStrategy[str]:
    """Text a user might type that ``rule`` refuses: out of range, not finite, not a number,
    a fraction where a whole number is needed, numbers too large for any type."""
    bad: list[st.SearchStrategy[str]] = [
        st.sampled_from(["nan", "inf", "-inf", "1e999", "", " ", "ten", "0x10", "1,5", "½"]),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-!", min_size=1, max_size=8),
        st.integers(min_value=10**20, max_value=10**40).map(str),
    ]
    if rule.minimum is not None:
        low = rule.minimum
        bad.append(st.floats(max_value=low, exclude_max=True, allow_nan=False, allow_infinity=False,
                             min_value=-1e12).map(lambda v: str(int(math.floor(v))) if rule.integer else repr(v)))
    if rule.maximum is not None:
        high = rule.maximum
        bad.append(st.floats(min_value=high, exclude_min=True, max_value=high * 1e3 + 1e3, allow_nan=False).map(
            lambda v: str(math.ceil(v)) if rule.integer else repr(v)))
    if rule.integer:
        bad.append(st.floats(min_value=0.01, max_value=50, allow_nan=False).filter(lambda v: v != int(v)).map(repr))
    return st.one_of(bad)


def _entry(program: str, argv: list[str]) -> int:
    if program in ("bench", "study"):
        from gnuq_core.bench.__main__ import main as bench
        from gnuq_core.chapters.campaign import main as study

        try:
            return (bench if program == "bench" else study)(argv)
        except SystemExit as stop:
            return int(stop.code)
    return _call(program, argv)


def _one_clean_line(code: int, err: str, out: str) -> None:
    assert code == 2, f"exit status {code}; stderr: {err!r}"
    assert "Traceback" not in err and "Traceback" not in out
    assert len(err.splitlines()) == 1 and err.startswith("error: "), f"expected one error line, got {err!r}"


@pytest.mark.parametrize("program, before, flag, rule", NUMERIC_FLAGS,
                         ids=[f"{p}{' ' + b[0] if p == 'gnuq' else ''} {f}" for p, b, f, _ in NUMERIC_FLAGS])
@SETTINGS
@given(data=st.data())
def test_a_bad_value_of_any_numeric_option_is_one_line_before_anything_loads(
        program: str, before: list[str], flag: str, rule: str, data: st.DataObject, place: dict[str, str],
        capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = data.draw(_outside(OPTIONS[rule]), label=flag)
    assert OPTIONS[rule].problem(_number(text)) is not None or _number(text) is None  # the draw is bad indeed
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gnuq_core.lm.models.load_model", _no_load)  # a refused value never reaches the model
    snapshot = _snapshot(place["outputs"])
    code = _entry(program, [a.format(**place) for a in before] + [f"{flag}={text}"])
    out, err = capfd.readouterr()
    _one_clean_line(code, err, out)
    assert flag in err and _snapshot(place["outputs"]) == snapshot


# A chapter's sizes through the runner's --set (Python literals, inf/nan words as numbers; a list element too)
CHAPTER_SIZES = [("01", "n_mc"), ("02", "n_seeds"), ("03", "widths"), ("04", "num_samples"), ("05", "num_chains"),
                 ("07", "repeats")]
bad_sizes = st.one_of(
    st.integers(min_value=MAX_SIZE + 1, max_value=10**40).map(str),
    st.integers(min_value=-10**12, max_value=0).map(str),
    st.floats(min_value=0.01, max_value=1e6, allow_nan=False).filter(lambda v: v != int(v)).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e999", ".nan", "-.inf", "Infinity", "ten", "", "[]", "{}", "None"]),
)


@pytest.mark.parametrize("chapter, name", CHAPTER_SIZES, ids=[f"{c} {n}" for c, n in CHAPTER_SIZES])
@SETTINGS
@given(text=bad_sizes)
def test_a_bad_chapter_size_is_one_line_before_the_notebook_runs(
        chapter: str, name: str, text: str, place: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    value = f"[8,{text}]" if name == "widths" and text not in ("", "[]") else text
    snapshot = _snapshot(place["outputs"])
    code = _call("chapters", ["run", chapter, "--out", place["book"], "--set", f"{name}={value}"])
    out, err = capfd.readouterr()
    _one_clean_line(code, err, out)
    assert name in err and _snapshot(place["outputs"]) == snapshot


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _no_load(*args: object, **kwargs: object) -> None:
    raise AssertionError("the model was loaded although an option was bad")


def test_the_rules_accept_their_own_bounds() -> None:
    """The battery's complement: the edges of each range are accepted (so the bad draws above
    are bad because of the value, not because every value is refused)."""
    for name, rule in OPTIONS.items():
        for edge in (rule.minimum, rule.maximum):
            if edge is not None:
                assert rule.problem(int(edge) if rule.integer else edge) is None, (name, edge)
    assert OPTIONS["threads"].maximum == MAX_THREADS


# --------------------------------------------------------------------------- damaged files

HEADER = {"type": "header", "config": {"model": "x"}}


def _lines(objs: list[object]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                       max_size=3), max_leaves=6)
damaged_record_files = st.one_of(
    st.binary(min_size=1, max_size=200).filter(lambda b: b.strip()),  # any bytes
    st.builds(lambda v: _lines([{"type": "header", "config": v}]),
              json_values.filter(lambda v: not isinstance(v, dict))),  # a header whose config is not an object
    st.builds(lambda v: _lines([HEADER, {"type": "record", "id": v, "x": 1}]),
              json_values.filter(lambda v: isinstance(v, bool) or not isinstance(v, (str, int)))),  # a bad id
    st.builds(lambda v: _lines([HEADER]) + json.dumps(v).encode() + b"\n" + _lines([{"type": "record", "id": "a"}]),
              json_values.filter(lambda v: not isinstance(v, dict))),  # a line that is not an object
    st.builds(lambda k: _lines([HEADER, {"type": "record", "id": "a", "x": 1}, {"type": "record", "id": "a", "x": k}]),
              st.integers().filter(lambda k: k != 1)),  # two different records for one id
)


@SETTINGS
@given(content=damaged_record_files)
def test_a_damaged_result_file_is_one_line_and_stays_as_it_was(content: bytes, place: dict[str, str],
                                                                capfd: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    """``gnuq qa --out`` and the study's readers on a record file damaged in any way."""
    from gnuq_core.repro.files import DamagedFile
    from gnuq_core.repro.records import read_records
    from gnuq_core.repro.shards import read_merged

    folder = tmp_path_factory.mktemp("damaged")
    path = folder / "run.jsonl"
    path.write_bytes(content)
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(folder / "cache"))
    monkeypatch.setattr("gnuq_core.lm.models.load_model", _no_load)
    code = _call("gnuq", [a.format(**place) for a in QA] + ["--out", str(path)])
    out, err = capfd.readouterr()
    _one_clean_line(code, err, out)
    assert str(path) in err and path.read_bytes() == content
    for read in (read_records, read_merged):  # the library: a DamagedFile or a clean read, nothing else
        try:
            read(path)
        except DamagedFile as e:
            assert str(path) in str(e) and "\n" not in str(e)
    assert path.read_bytes() == content


damaged_data_files = st.one_of(
    st.binary(min_size=1, max_size=200).filter(lambda b: b.strip() and not b.isascii()),
    st.builds(lambda v: _lines([v]), json_values),  # anything that is not {'id', 'question', 'answers'}
    st.builds(lambda q: _lines([{"id": "a", "question": q, "answers": ["x"]}] * 2), st.text(min_size=1, max_size=5)
              .filter(str.strip)),  # a duplicated id
)


@SETTINGS
@given(content=damaged_data_files)
def test_a_damaged_data_file_is_one_line_naming_the_file(content: bytes, place: dict[str, str],
                                                         capfd: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    from gnuq_core.qa.data import load_qa

    folder = tmp_path_factory.mktemp("data")
    (folder / "triviaqa").mkdir()
    data = folder / "triviaqa" / "validation.jsonl"
    data.write_bytes(content)
    try:
        items = load_qa("triviaqa", data_dir=folder)
    except ValueError as err:
        assert str(data) in str(err) and "\n" not in str(err)
    else:  # what a generated file may legitimately be: well-formed rows
        assert all(it.question.strip() and it.correct_answers for it in items)
        return
    monkeypatch.setattr("gnuq_core.lm.models.load_model", _no_load)
    out_file = folder / "out.jsonl"
    code = _call("gnuq", ["qa", "--model", place["chat"], "--dataset", "triviaqa", "--data-dir", str(folder),
                          "--samples", "0", "--out", str(out_file)])
    out, err = capfd.readouterr()
    _one_clean_line(code, err, out)
    assert data.read_bytes() == content and not out_file.exists()


def test_a_write_that_fails_names_the_file_and_leaves_it_as_it_was(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Disk full half-way through a record: the file is cut back to its previous size."""
    import errno

    from gnuq_core.repro import files
    from gnuq_core.repro.records import RecordFile

    path = tmp_path / "run.jsonl"
    rf = RecordFile(path, {"model": "x"})
    rf.append("a", {"x": 1})
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 10:
            real_write(fd, bytes(data[:10]))  # part of the line reaches the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", half_then_full)
    with pytest.raises(files.WriteFailed, match=rf"^cannot write {re.escape(str(path))}: No space left on device "
                                                r"\(free some space and rerun; the file is as it was"):
        rf.append("b", {"x": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before and rf.done == {"a"}
    rf.append("b", {"x": 2})  # the next write, after space was freed, continues the file
    rf.close()
    from gnuq_core.repro.records import read_records

    assert [r["id"] for r in read_records(path)[1]] == ["a", "b"]
    monkeypatch.setattr(files.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space")))
    target = tmp_path / "bench.json"
    target.write_text("old")
    with pytest.raises(files.WriteFailed, match="bench.json: No space"):
        files.write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
