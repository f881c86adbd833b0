"""The one-off migration: legacy files become orphans of today's code, stamped, never reused unverified."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.records import read_records
from gnuq_core.store import kinds
from gnuq_core.store.migrate import LEGACY_CODE, LEGACY_COMMIT, legacy_hash, migrate


def test_every_kind_has_its_legacy_module_list() -> None:
    assert set(LEGACY_CODE) == set(kinds.KINDS)


def test_a_legacy_file_is_rewritten_as_a_stamped_orphan(tmp_path: Path) -> None:
    if subprocess.run(["git", "cat-file", "-e", LEGACY_COMMIT], cwd=REPO_ROOT).returncode != 0:
        import pytest

        pytest.skip(f"commit {LEGACY_COMMIT} is not in this clone")
    legacy = legacy_hash(LEGACY_CODE["nuts_reference"])
    folder = tmp_path / "nuts_reference"
    folder.mkdir()
    (folder / "old.jsonl").write_text(
        json.dumps({"type": "header", "config": {"_code": legacy, "version": 1}, "config_key": "x"}) + "\n"
        + json.dumps({"type": "record", "id": "a", "v": 1.0}) + "\n")
    (folder / "other.jsonl").write_text(
        json.dumps({"type": "header", "config": {"_code": "0123456789ab"}, "config_key": "y"}) + "\n")
    (moved,) = migrate(tmp_path)
    config, records = read_records(moved)
    assert config["_code"] == legacy and records[0]["_made"]["code"] == legacy
    assert (folder / "other.jsonl").exists() and not (folder / "old.jsonl").exists()
    assert records[0]["v"] == 1.0 and (tmp_path / "fingerprints.jsonl").exists()
