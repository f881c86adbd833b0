"""gnuq_core.repro.files: reading that names the damage, writing that changes nothing when it fails."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from gnuq_core.repro import files
from gnuq_core.repro.files import DamagedFile, WriteFailed, json_lines, read_text


def test_text_accepts_a_byte_order_mark_and_windows_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n{"a": 2}\r\n')
    assert read_text(path) == '{"a": 1}\n{"a": 2}\n'
    assert [obj for _, obj in json_lines(path)] == [{"a": 1}, {"a": 2}]


def test_bytes_that_are_not_utf8_are_named_by_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_bytes(b"fine\nol\xe9\n")
    with pytest.raises(DamagedFile, match=r"a.txt, line 2: not UTF-8 text \(byte 0xe9 at column 3\)"):
        read_text(path)
    with pytest.raises(DamagedFile, match="is a folder"):
        read_text(tmp_path)


def test_json_lines_name_the_damaged_line_and_skip_only_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n\n[1, 2]\n{"a": 3}\n')
    with pytest.raises(DamagedFile, match=r"r.jsonl, line 3: an array, not a JSON object"):
        list(json_lines(path))
    path.write_text('{"a": 1}\n{"a": 2')  # interrupted mid-line
    assert [n for n, _ in json_lines(path)] == [1]
    with pytest.raises(DamagedFile, match="line 2: not valid JSON"):
        list(json_lines(path, torn_tail=False))
    path.write_text('{"a": 1}\n{"a": 2}')  # complete JSON without its newline: data files accept it
    assert len(list(json_lines(path, torn_tail=False))) == 2 and len(list(json_lines(path))) == 1


def test_an_append_that_fails_cuts_the_file_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.jsonl"
    files.append_line(path, "one\n")
    real = os.write

    def partial(fd: int, data: bytes) -> int:
        real(fd, bytes(data[:2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "write", partial)
    with pytest.raises(WriteFailed, match=r"cannot write .*r.jsonl: No space left on device \(free some space"):
        files.append_line(path, "two\n")
    assert path.read_text() == "one\n"


def test_an_atomic_write_leaves_the_old_file_when_it_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "out.json"
    files.write_atomic(path, "old")
    monkeypatch.setattr(files.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(WriteFailed, match="out.json: I/O error"):
        files.write_atomic(path, "new")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
