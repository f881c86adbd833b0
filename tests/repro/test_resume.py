"""A long run killed midway resumes without losing or duplicating finished records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.records import read_records

SCRIPT = """
import sys, time
from pathlib import Path
from gnuq_core.store import Store
from tests.store.conftest import demo_kind

root, code = Path(sys.argv[1]), Path(sys.argv[2])

def compute(i):
    time.sleep(float(sys.argv[3]))            # a slow item
    return {"square": int(i) ** 2}

Store(root, label="the test store").items(demo_kind(), {"n": 12}, [str(i) for i in range(12)], compute, verify=2)
"""


def _records(root: Path) -> list[dict]:
    files = list((root / "demo").glob("*.jsonl"))
    return read_records(files[0])[1] if files else []


@pytest.mark.subprocess
def test_killed_run_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    script, code, root = tmp_path / "run.py", tmp_path / "src", tmp_path / "store"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(root), str(code), "0.3"], cwd=REPO_ROOT,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    deadline = time.time() + 120
    while len(_records(root)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _records(root)
    assert 3 <= len(before) < 12, "the run should have been killed midway"

    done = subprocess.run([sys.executable, str(script), str(root), str(code), "0"], cwd=REPO_ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0
    after = _records(root)
    ids = [r["id"] for r in after]
    assert sorted(ids, key=int) == [str(i) for i in range(12)], "every item exactly once"
    assert after[: len(before)] == before, "finished records are kept as they were"
    assert all(r["square"] == int(r["id"]) ** 2 for r in after)
    header = json.loads((next((root / "demo").glob("*.jsonl"))).read_text().splitlines()[0])
    assert header["type"] == "header" and header["config"]["n"] == 12
