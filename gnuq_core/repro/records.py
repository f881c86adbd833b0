"""Resumable JSON Lines result files: one header with the run's configuration, one line per record.

The first line is ``{"type": "header", "config": {...}, "config_key": "..."}``; every
other line is ``{"type": "record", "id": ..., ...}``. Appending writes one line and
flushes and fsyncs it, so a killed run loses at most the record in flight; a torn last
line (no newline, or not JSON) is cut off when the file is opened again. Records whose id
is already present are skipped, so resuming never duplicates. Opening an existing file
with a different configuration is an error (`ConfigMismatch`).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Iterator

from gnuq_core.repro.cache import config_key

__all__ = ["ConfigMismatch", "RecordFile", "read_records"]


class ConfigMismatch(ValueError):
    """The output file was written by a run with a different configuration."""


def _canonical(config: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(config, sort_keys=True, default=str))


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
        self.config = _canonical(config)
        self.done: set[str] = set()
        if self.path.exists() and self.path.stat().st_size > 0:
            self._open_existing()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_line({"type": "header", "config": self.config, "config_key": config_key(self.config)})

    def _open_existing(self) -> None:
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good_bytes = 0
        parsed = []
        for i, line in enumerate(lines):
            complete = i < len(lines) - 1  # the part after the last newline is incomplete
            if not line.strip():
                good_bytes += len(line) + (1 if complete else 0)
                continue
            try:
                obj = json.loads(line) if complete else None
            except json.JSONDecodeError:
                obj = None
            if obj is None:
                if any(x.strip() for x in lines[i + 1:]):
                    raise ValueError(f"{self.path}, line {i + 1} is not valid JSON and is not the last line: the "
                                     "file is damaged; move it away and rerun")
                warnings.warn(f"{self.path}: dropping an incomplete last line (interrupted run)", stacklevel=3)
                break
            parsed.append(obj)
            good_bytes += len(line) + 1
        if good_bytes < len(raw):
            with self.path.open("r+b") as f:
                f.truncate(good_bytes)
        if not parsed or parsed[0].get("type") != "header":
            raise ConfigMismatch(f"{self.path} exists but has no gnuq header line: it is not a gnuq result file; "
                                 "choose another --out path")
        old = parsed[0].get("config", {})
        if old != self.config:
            keys = sorted(k for k in set(old) | set(self.config) if old.get(k) != self.config.get(k))
            diff = "; ".join(f"{k}: file has {old.get(k)!r}, this run {self.config.get(k)!r}" for k in keys)
            raise ConfigMismatch(f"{self.path} belongs to a run with a different configuration ({diff}): use a "
                                 "different --out file, or delete this one to start over")
        self.done = {str(r["id"]) for r in parsed[1:] if r.get("type") == "record"}

    def _write_line(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, default=str, allow_nan=False) + "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def append(self, record_id: str, record: dict[str, Any]) -> bool:
        """Write one record unless its id is already present; returns whether it was written."""
        record_id = str(record_id)
        if record_id in self.done:
            return False
        self._write_line({"type": "record", "id": record_id, **record})
        self.done.add(record_id)
        return True


def read_records(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(config, records)`` of a result file (a torn last line is ignored)."""
    config: dict[str, Any] = {}
    records = []
    for obj in _iter_json(Path(path)):
        if obj.get("type") == "header":
            config = obj.get("config", {})
        elif obj.get("type") == "record":
            records.append(obj)
    return config, records


def _iter_json(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n") and line.strip():
                yield json.loads(line)
