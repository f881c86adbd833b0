"""gnuq_core.repro.records: resumable JSONL result files."""

from __future__ import annotations

import json
from pathlib import Path

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


HOLD = """
import sys
from gnuq_core.repro.records import RecordFile
rf = RecordFile(sys.argv[1], {"a": 1})
rf.append("q1", {"x": 1})
print("locked", flush=True)
sys.stdin.read()  # hold the lock until the parent closes our stdin
rf.append("q2", {"x": 2})
"""


def _holder(path):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.subprocess
def test_second_writer_in_another_process_is_refused_naming_the_pid(tmp_path):
    from gnuq_core.repro.records import OutputLocked

    path = tmp_path / "out.jsonl"
    proc = _holder(path)
    try:
        before = path.read_bytes()
        with pytest.raises(OutputLocked, match=rf"out.jsonl is being written by another process \(pid {proc.pid}\)"):
            RecordFile(path, {"a": 1})
        assert path.read_bytes() == before  # the refused writer changed nothing
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    rf = RecordFile(path, {"a": 1})  # the lock is free once the holder is gone
    assert rf.done == {"q1", "q2"}
    rf.close()


def test_one_process_may_open_a_file_twice_and_close_releases(tmp_path):
    path = tmp_path / "out.jsonl"
    first = RecordFile(path, {"a": 1})
    second = RecordFile(path, {"a": 1})  # same process: shares the lock
    second.append("q1", {})
    second.close()
    first.close()
    first.close()  # idempotent
    with RecordFile(path, {"a": 1}) as again:
        assert again.done == {"q1"}


@pytest.mark.parametrize("case", ["directory", "parent_is_file", "unwritable"])
def test_unusable_paths_are_refused_before_writing(tmp_path, case):
    import os

    from gnuq_core.repro.records import OutputPathError

    if case == "directory":
        path, match = tmp_path, "is a directory: --out needs a file path"
    elif case == "parent_is_file":
        (tmp_path / "f").write_text("x")
        path, match = tmp_path / "f" / "run.jsonl", "f is a file, not a folder"
    else:
        if os.geteuid() == 0:  # root may write anywhere chmod forbids; /sys refuses even root
            path = Path("/sys/gnuq-test/run.jsonl")
        else:
            (tmp_path / "ro").mkdir()
            (tmp_path / "ro").chmod(0o500)
            path = tmp_path / "ro" / "run.jsonl"
        match = "(no permission|cannot create)"
    with pytest.raises(OutputPathError, match=match):
        RecordFile(path, {"a": 1})


@pytest.mark.parametrize("content", [b"not a result file\n", b"a,b\n1,2\n", b"[1, 2]\n", b"caf\xe9\n",
                                     b'{"type": "header", "config": {"a": 2}}\n{"type": "rec'])
def test_a_foreign_file_is_refused_and_left_untouched(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(ConfigMismatch, match="(not a gnuq result file|different configuration)"):
        RecordFile(path, {"a": 1})
    assert path.read_bytes() == content


def test_a_line_repeating_a_record_exactly_is_read_once(tmp_path):
    path = tmp_path / "out.jsonl"
    rf = RecordFile(path, {"a": 1})
    rf.append("q1", {"x": 1})
    rf.append("q2", {"x": 2})
    rf.close()
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[1]]) + "\n")  # q1's line twice (a copy-paste, a merge run twice)
    assert [r["id"] for r in read_records(path)[1]] == ["q1", "q2"]
    assert RecordFile(path, {"a": 1}).done == {"q1", "q2"}
