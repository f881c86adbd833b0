"""Reading and writing the project's files so that damage is one line and a failed write changes nothing.

Every file the tools read (record and store files, data files, profiles) goes through
`read_text` (UTF-8, a byte-order mark and Windows line ends accepted, a bad byte reported
with its line and column), `json_lines` (each line a JSON object, or `DamagedFile` naming
the line). Every write goes through `append_line` (one line,
flushed and fsynced; a failure cuts the file back to its size before the write) or
`write_atomic` (a temporary file beside the target, renamed over it; a failure leaves
the target as it was). A failed write raises `WriteFailed` naming the file, why and
what to do, never a bare ``[Errno 28]``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["DamagedFile", "WriteFailed", "json_type", "decode_text", "read_text", "json_lines",
           "append_line", "write_atomic"]

BOM = "\ufeff"
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type ("an array", "null", …), for messages."""
    name = _JSON_TYPES.get(type(value), type(value).__name__)
    return name if name == "null" else f"an {name}" if name[0] in "aeiou" else f"a {name}"


class DamagedFile(ValueError):
    """A file the tools read that cannot be parsed: the message names the file, the line and the fix."""


class WriteFailed(ValueError):
    """A write that failed (disk full, a special file, no permission); the file is as it was before."""


_ADVICE = {28: "free some space and rerun", 122: "free some space (a quota is full) and rerun",
           13: "choose a path you can write", 30: "choose a path on a writable disk",
           21: "give a file path, not a folder"}


def _write_failed(path: Path, err: OSError, kept: str) -> WriteFailed:
    advice = _ADVICE.get(err.errno or 0, "choose another path")
    return WriteFailed(f"cannot write {path}: {err.strerror or err} ({advice}; {kept})")


def decode_text(raw: bytes, path: str | Path, fix: str = "re-save the file as UTF-8 or restore it from its source") -> str:
    """``raw`` as text: UTF-8 (a leading byte-order mark dropped), ``\\r\\n`` read as ``\\n``;
    `DamagedFile` with the line and column of the first byte that is not UTF-8."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise DamagedFile(f"{path}, line {line}: not UTF-8 text (byte 0x{raw[err.start]:02x} at column {column}): "
                          f"{fix}") from None
    return text.removeprefix(BOM).replace("\r\n", "\n")


def read_text(path: str | Path) -> str:
    """The text of ``path`` (see `decode_text`); a missing or unreadable file is `DamagedFile` too."""
    try:
        raw = Path(path).read_bytes()
    except IsADirectoryError:
        raise DamagedFile(f"{path} is a folder, not a file") from None
    except OSError as err:
        raise DamagedFile(f"cannot read {path}: {err.strerror or err}") from None
    return decode_text(raw, path)


def json_lines(path: str | Path, *, fix: str = "move the file away and rerun",
               torn_tail: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSON Lines file.

    A line that is not a JSON object is `DamagedFile` (naming the line and ``fix``), except,
    with ``torn_tail``, an incomplete last line (no newline at the end: a write that was
    interrupted), which is skipped.
    """
    text = read_text(path)
    lines = text.split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last = n == len(lines)  # after the final newline: an interrupted write
        try:
            obj = json.loads(line)
        except ValueError as err:
            if last and torn_tail:
                return
            raise DamagedFile(f"{path}, line {n}: not valid JSON ({err.msg}): {fix}") from None
        if not isinstance(obj, dict):
            if last and torn_tail:
                return
            raise DamagedFile(f"{path}, line {n}: {json_type(obj)}, not a JSON object: {fix}")
        if last and torn_tail:
            return  # no newline after it: the write was cut before it ended
        yield n, obj


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` (ending in a newline) to ``path``, flushed and fsynced. A failure cuts
    the file back to its size before the write and raises `WriteFailed`."""
    path = Path(path)
    data = line.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as err:
        raise _write_failed(path, err, "nothing was written") from None
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as err:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise _write_failed(path, err, "the file is as it was before this write") from None
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Replace ``path`` by ``data`` in one step (a temporary file beside it, fsynced, renamed
    over it): readers see the old file or the new one, and a failure leaves the old one."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise _write_failed(path, err, "nothing was written") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise _write_failed(path, err, "the file is as it was before") from None
