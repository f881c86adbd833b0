"""gnuq_core.repro.records: resumable JSONL result files."""

from __future__ import annotations

import json

import pytest

from gnuq_core.repro.records import ConfigMismatch, RecordFile, read_records


def test_header_append_resume(tmp_path):
    path = tmp_path / "out.jsonl"
    rf = RecordFile(path, {"model": "m", "n": 1})
    assert rf.append("q1", {"x": 1}) and rf.append("q2", {"x": 2})
    assert not rf.append("q1", {"x": 99})  # duplicate skipped
    again = RecordFile(path, {"n": 1, "model": "m"})  # key order does not matter
    assert again.done == {"q1", "q2"}
    assert not again.append("q2", {"x": 3}) and again.append("q3", {"x": 3})
    config, recs = read_records(path)
    assert config == {"model": "m", "n": 1} and [r["id"] for r in recs] == ["q1", "q2", "q3"]
    assert json.loads(path.read_text().splitlines()[0])["type"] == "header"


def test_torn_last_line_is_dropped(tmp_path):
    path = tmp_path / "out.jsonl"
    rf = RecordFile(path, {"a": 1})
    rf.append("q1", {"x": 1})
    with path.open("a") as f:
        f.write('{"type": "record", "id": "q2", "x"')  # killed mid-write
    with pytest.warns(UserWarning, match="incomplete last line"):
        rf = RecordFile(path, {"a": 1})
    assert rf.done == {"q1"}
    rf.append("q2", {"x": 2})
    assert [r["id"] for r in read_records(path)[1]] == ["q1", "q2"]


def test_different_configuration_is_an_error(tmp_path):
    path = tmp_path / "out.jsonl"
    RecordFile(path, {"model": "a", "limit": 5})
    with pytest.raises(ConfigMismatch, match="model: file has 'a', this run 'b'.*different --out"):
        RecordFile(path, {"model": "b", "limit": 5})
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(ConfigMismatch, match="not a gnuq result file"):
        RecordFile(other, {"model": "a"})


def test_damaged_middle_line(tmp_path):
    path = tmp_path / "out.jsonl"
    rf = RecordFile(path, {"a": 1})
    rf.append("q1", {})
    path.write_text(path.read_text() + "garbage\n" + '{"type": "record", "id": "q2"}\n')
    with pytest.raises(ValueError, match="damaged"):
        RecordFile(path, {"a": 1})


def test_non_finite_values_rejected(tmp_path):
    rf = RecordFile(tmp_path / "o.jsonl", {})
    with pytest.raises(ValueError):
        rf.append("q", {"x": float("inf")})
