"""scripts/glued_diff.py: every glued value of two executed books compared."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gnuq_core.repro.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "glued_diff.py"
spec = importlib.util.spec_from_file_location("glued_diff", SCRIPT)
glued_diff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(glued_diff)


def _book(folder: Path, values: dict[str, str]) -> Path:
    folder.mkdir()
    outs = [{"output_type": "display_data", "metadata": {"scrapbook": {"name": k}},
             "data": {"application/papermill.record/text/plain": v}} for k, v in values.items()]
    (folder / "01_x.ipynb").write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": outs}]}))
    return folder


@pytest.mark.subprocess
def test_identical_books_have_no_change(tmp_path: Path) -> None:
    a = _book(tmp_path / "a", {"rho": "0.5", "n": "3"})
    b = _book(tmp_path / "b", {"rho": "0.5", "n": "3"})
    assert glued_diff.diff_books(a, b)["01_x"]["changed"] == []
    assert subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)]).returncode == 0


@pytest.mark.subprocess
def test_changes_added_removed_and_ignored_keys_are_listed(tmp_path: Path) -> None:
    a = _book(tmp_path / "a", {"rho": "0.5", "gone": "1", "wall_seconds": "3.0"})
    b = _book(tmp_path / "b", {"rho": "0.5000001", "new": "2", "wall_seconds": "9.0"})
    d = glued_diff.diff_books(a, b, ignore="seconds")["01_x"]
    assert d["changed"] == ["rho: 0.5 -> 0.5000001"] and d["added"] == ["new"] and d["removed"] == ["gone"]
    assert d["ignored"] == ["wall_seconds: 3.0 -> 9.0"]
    assert glued_diff.diff_books(a, b, rtol=1e-5)["01_x"]["changed"] == ["wall_seconds: 3.0 -> 9.0"]
    run = subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)], capture_output=True, text=True)
    assert run.returncode == 1 and "changed: rho" in run.stdout


@pytest.mark.subprocess
def test_a_folder_without_notebooks_is_a_one_line_error(tmp_path: Path) -> None:
    a = _book(tmp_path / "a", {"rho": "0.5"})
    run = subprocess.run([sys.executable, str(SCRIPT), str(a), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "no executed notebooks" in run.stderr
