"""Resumable JSON Lines result files: one header with the run's configuration, one line per record.

The first line is ``{"type": "header", "config": {...}, "config_key": "..."}``; every
other line is ``{"type": "record", "id": ..., ...}``. Appending writes one line and
flushes and fsyncs it, so a killed run loses at most the record in flight; a torn last
line (no newline, or not JSON) is cut off when the file is opened again. Records whose id
is already present are skipped, so resuming never duplicates. Opening an existing file
with a different configuration is an error (`ConfigMismatch`).

One writer per file: a `RecordFile` holds an advisory lock (``flock``, non-blocking) on
its file from opening until `RecordFile.close` (or until it is garbage-collected, or the
process ends), so a second process opening the same file is refused (`OutputLocked`,
naming the pid that holds it) before it changes anything. Several `RecordFile` objects of
one process share the lock. A path that cannot hold a result file (a folder, a parent that
is a file, no permission) is refused with `OutputPathError` before anything is written.
"""

from __future__ import annotations

import json
import os
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from gnuq_core.repro.keys import canonical, config_key
from gnuq_core.repro.files import DamagedFile, append_line, json_lines, json_type

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking
    fcntl = None  # type: ignore[assignment]

__all__ = ["ConfigMismatch", "OutputLocked", "OutputPathError", "RecordFile", "canonical_config", "check_output",
           "check_output_path", "new_output", "read_records"]


class ConfigMismatch(ValueError):
    """The output file was written by a run with a different configuration."""


class OutputLocked(ValueError):
    """Another process is writing the same result file."""


class OutputPathError(ValueError):
    """A result-file path that cannot be written (a folder, a parent that is a file, no permission)."""


def check_output_path(path: str | Path) -> None:
    """Raise `OutputPathError` (one line naming the path) unless a result file can be written at ``path``.

    Checks without creating anything: ``path`` is not a folder; every existing ancestor is
    a folder; the file (if it exists) or its nearest existing folder is writable.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{path} is a directory: --out needs a file path, e.g. {path / 'run.jsonl'}")
    if path.exists() and not path.is_file():
        raise OutputPathError(f"{path} is {_special_kind(path)}, not a regular file: --out needs a file path "
                              "(records are appended and read back)")
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise OutputPathError(f"{path}: {parent} is a file, not a folder: choose another --out")
            if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
                raise OutputPathError(f"{path}: no permission to create files in {parent}: choose another --out")
            break
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"{path} is not writable (permission denied): choose another --out")


def _special_kind(path: Path) -> str:
    """What a path that is neither a folder nor a regular file is, in words."""
    import stat

    mode = path.stat().st_mode
    for test, words in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "a special file"


# One lock per file and process, shared by the process's RecordFile objects: {resolved path: [fd, users]}.
_HELD: dict[str, list[int]] = {}


def _lock_holder(fd: int) -> str:
    """The pid holding a flock on the file of ``fd`` (from /proc/locks on Linux), or ``"unknown"``."""
    inode = os.fstat(fd).st_ino
    try:
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                if "FLOCK" in fields and len(fields) > 5 and fields[5].endswith(f":{inode}"):
                    return fields[4]
    except OSError:
        pass
    return "unknown"


def _acquire(path: Path) -> str:
    """Open (creating it empty if missing) and lock ``path`` for this process; returns the registry key."""
    key = str(path.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        return key
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise OutputPathError(f"{path}: cannot create the file ({err.strerror}): choose another --out") from None
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise OutputLocked(f"{path} is being written by another process (pid {holder}): wait for it to "
                               "finish, or choose another --out") from None
    _HELD[key] = [fd, 1]
    return key


def _release(key: str) -> None:
    entry = _HELD.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _HELD[key]
        os.close(entry[0])  # closing the descriptor releases the flock


def canonical_config(config: Any) -> Any:
    """The configuration as a header holds it: JSON values, floats rounded to 12 significant
    digits (`gnuq_core.repro.keys.canonical`), so a one-ulp difference is the same run."""
    return canonical(config)


class RecordFile:
    """An append-only JSONL result file tied to one configuration.

    Parameters
    ----------
    path : path
        The ``.jsonl`` file (created with its header if missing).
    config : dict
        JSON-serialisable configuration of the run.
    """

    def __init__(self, path: str | Path, config: dict[str, Any]) -> None:
        self.path = Path(path)
        self.config = canonical_config(config)
        self.done: set[str] = set()
        check_output_path(self.path)
        created = not self.path.exists()
        self._key = _acquire(self.path)
        self._finalizer = weakref.finalize(self, _release, self._key)
        try:
            if self.path.stat().st_size > 0:
                self._open_existing()
            else:
                self._write_line({"type": "header", "config": self.config, "config_key": config_key(self.config)})
        except BaseException:
            self.close()
            if created and self.path.exists() and self.path.stat().st_size == 0:
                self.path.unlink()
            raise

    def close(self) -> None:
        """Release this object's share of the file lock (idempotent)."""
        self._finalizer()

    def __enter__(self) -> "RecordFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open_existing(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good_bytes = 0
        parsed: list[dict[str, Any]] = []
        torn = False
        for i, line in enumerate(lines):
            complete = i < len(lines) - 1  # the part after the last newline is incomplete
            if not line.strip():
                good_bytes += len(line) + (1 if complete else 0)
                continue
            try:
                obj = json.loads(line) if complete else None
            except ValueError:  # not JSON, or not UTF-8
                obj = None
            if not isinstance(obj, dict):
                if parsed and parsed[0].get("type") == "header":
                    if any(x.strip() for x in lines[i + 1:]):
                        raise ValueError(f"{self.path}, line {i + 1} is not valid JSON and is not the last line: "
                                         "the file is damaged; move it away and rerun")
                    torn = True
                break
            parsed.append(obj)
            good_bytes += len(line) + 1
        # Refuse a foreign file before changing a byte of it.
        if not parsed or parsed[0].get("type") != "header":
            raise ConfigMismatch(_no_header(self.path))
        old = _header_config(self.path, parsed[0])
        seen: dict[str, tuple[int, dict[str, Any]]] = {}
        for n, r in enumerate(parsed[1:], 2):
            if r.get("type") == "record":
                rid = _record_id(self.path, n, r)
                if rid in seen and seen[rid][1] != r:
                    raise DamagedFile(f"{self.path}, lines {seen[rid][0]} and {n}: two different records for id "
                                      f"{rid!r}: the file is damaged; keep the right one and rerun")
                seen.setdefault(rid, (n, r))
        _same_config(self.path, old, self.config)
        if torn:
            warnings.warn(f"{self.path}: dropping an incomplete last line (interrupted run)", stacklevel=3)
        if good_bytes < len(raw):
            with self.path.open("r+b") as f:
                f.truncate(good_bytes)
        self.done = {str(r["id"]) for r in parsed[1:] if r.get("type") == "record"}

    def _write_line(self, obj: dict[str, Any]) -> None:
        append_line(self.path, json.dumps(obj, default=str, allow_nan=False) + "\n")

    def append(self, record_id: str, record: dict[str, Any]) -> bool:
        """Write one record unless its id is already present; returns whether it was written."""
        record_id = str(record_id)
        if record_id in self.done:
            return False
        self._write_line({"type": "record", "id": record_id, **record})
        self.done.add(record_id)
        return True


def _same_config(path: Path, old: dict[str, Any], config: dict[str, Any]) -> None:
    """Raise `ConfigMismatch` naming the differing keys unless ``old`` (a file's header) is ``config``."""
    config = canonical_config(config)
    if canonical_config(old) != config:
        keys = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
        diff = "; ".join(f"{k}: file has {old.get(k)!r}, this run {config.get(k)!r}" for k in keys)
        raise ConfigMismatch(f"{path} belongs to a run with a different configuration ({diff}): use a "
                             "different --out file, or delete this one to start over")


def check_output(path: str | Path, config: dict[str, Any]) -> None:
    """Raise what `RecordFile` would raise on opening ``path`` for ``config`` (a path that
    cannot be written, a foreign or damaged file, another configuration), without creating,
    locking or changing anything."""
    path = Path(path)
    check_output_path(path)
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            first = f.readline()
        try:
            header = json.loads(first)
        except ValueError:  # not JSON, or not UTF-8
            header = None
        if not isinstance(header, dict) or header.get("type") != "header":
            raise ConfigMismatch(_no_header(path))
        _same_config(path, _header_config(path, header), config)


def _no_header(path: Path) -> str:
    return f"{path} exists but has no gnuq header line: it is not a gnuq result file; choose another --out path"


def _header_config(path: Path, header: dict[str, Any]) -> dict[str, Any]:
    """The header's configuration, or `DamagedFile` if it is not a JSON object."""
    config = header.get("config", {})
    if not isinstance(config, dict):
        raise DamagedFile(f"{path}, line 1: the header's config is {json_type(config)}, not a JSON object: the file "
                          "is damaged; move it away and rerun")
    return config


def _record_id(path: Path, line: int, record: dict[str, Any]) -> str:
    """A record's id as a string, or `DamagedFile` naming the line."""
    rid = record.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        what = "without an id" if rid is None else f"whose id is {json_type(rid)}"
        raise DamagedFile(f"{path}, line {line}: a record {what}: the file is damaged; move it away and rerun")
    return str(rid)


def read_records(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(config, records)`` of a result file, each id once.

    A torn last line is ignored and a line repeating an earlier record exactly is dropped;
    a header whose config is not an object, a record without an id, or two different
    records with one id are `DamagedFile` naming the line.
    """
    path = Path(path)
    config: dict[str, Any] = {}
    records: dict[str, dict[str, Any]] = {}
    first_line: dict[str, int] = {}
    for n, obj in json_lines(path):
        if obj.get("type") == "header":
            config = _header_config(path, obj)
        elif obj.get("type") == "record":
            rid = _record_id(path, n, obj)
            if rid in records:
                if records[rid] != obj:
                    raise DamagedFile(f"{path}, lines {first_line[rid]} and {n}: two different records for id {rid!r}: "
                                      "the file is damaged; keep the right one and rerun")
                continue
            records[rid], first_line[rid] = obj, n
    return config, list(records.values())


@contextmanager
def new_output(path: str | Path) -> Iterator[None]:
    """Remove ``path`` again if the block fails before a record reached it and the file did not
    exist before: a run that stops on a model it cannot load leaves no header-only file behind."""
    path = Path(path)
    existed = path.exists()
    try:
        yield
    except BaseException:
        if not existed and path.is_file():
            with suppress(OSError, ValueError):
                if not read_records(path)[1]:
                    path.unlink()
        raise
