"""``gnuq store``: status honours GNUQ_RESULTS_DIR and a closed pipe; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.store import Store
from gnuq_core.store import kinds as registry
from gnuq_core.store.__main__ import main


def _fill(root: Path) -> Path:
    """A results store with one current file of a registered kind (``qa_mc``: exact, tiny)."""
    Store(root, label="test").items("qa_mc", {"model": "m", "style": "chat"}, ["q1", "q2"],
                                    lambda i: {"mc1": 1.0, "mc2": 0.5})
    (path,) = (root / "qa_mc").glob("*.jsonl")
    return path


def test_status_reads_gnuq_results_dir_and_says_what_to_recompute(tmp_path, monkeypatch, capsys) -> None:
    path = _fill(tmp_path / "copy")
    monkeypatch.setenv("GNUQ_RESULTS_DIR", str(tmp_path / "copy"))
    assert main(["status", "qa_mc"]) == 0
    out = capsys.readouterr().out
    assert f"file: {path.name}" in out and "state: current" in out and "nothing to recompute" in out
    # a NaN planted in the file, and a file of an older version: both named, not current
    path.write_text(path.read_text().replace('"mc2": 0.5', '"mc2": NaN', 1))
    stale = path.with_name("0" * 16 + ".jsonl")
    header = {"type": "header", "config": {"_kind": "qa_mc", "_version": 0, "model": "m"}, "config_key": "x"}
    stale.write_text(json.dumps(header) + "\n")
    assert main(["status", "qa_mc"]) == 0
    out = capsys.readouterr().out
    assert "damaged:" in out and "holds nan at .mc2" in out
    assert f"stale: made under version 0 of qa_mc, the kind is at version {registry.get('qa_mc').version}" in out
    assert "2 not current" in out


@pytest.mark.subprocess
def test_status_under_a_closed_pipe_is_quiet(tmp_path) -> None:
    for k in range(30):
        Store(tmp_path, label="t").items("qa_mc", {"model": f"m{k}", "style": "chat"}, ["q"],
                                         lambda i: {"mc1": 1.0, "mc2": 0.5})
    env = {**os.environ, "GNUQ_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run(f"{sys.executable} -m gnuq_core.store status | head -1", shell=True, cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("kind: qa_mc") and "Traceback" not in run.stderr


@pytest.mark.parametrize("argv, message", [
    (["status", "nosuchkind"], "unknown stored kind 'nosuchkind'"),
    (["simulate", "avx2"], "give a command after --"),
    (["simulate", "avx2", "--", "no-such-program-here"], "no such command: no-such-program-here"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


@pytest.mark.subprocess
def test_simulate_refuses_a_script_it_cannot_run_in_one_line(tmp_path, capsys) -> None:
    script = tmp_path / "no-shebang.sh"
    script.write_text("echo hello\n")
    assert main(["simulate", "avx2", "--", str(script)]) == 2
    assert "is not executable" in capsys.readouterr().err
    script.chmod(0o755)
    assert main(["simulate", "avx2", "--", str(script)]) == 2  # executable, but no #! line: Exec format error
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: simulate: cannot run") and "#! line" in err


def test_verify_passes_every_argument_after_the_target_to_it(monkeypatch) -> None:
    seen: list[tuple[list[str], str]] = []
    monkeypatch.setattr(subprocess, "call", lambda cmd, env: seen.append((cmd, env["GNUQ_STORE_VERIFY"])) or 0)
    assert main(["verify", "qa", "--all", "--", "--dataset", "truthfulqa", "--model", "m"]) == 0
    assert seen[-1][0][-5:] == ["verify", "--dataset", "truthfulqa", "--model", "m"] and seen[-1][1] == "qa"
    assert main(["verify", "hessian_exact"]) == 0  # a kind: its chapter is built, with the build's sample
    assert seen[-1][0][3:6] == ["run", "03_hessian_spectra", "--profile"] and seen[-1][1] == ""
    assert main(["verify", "hessian_exact", "--all"]) == 0 and seen[-1][1] == "hessian_exact"  # that kind only
    assert main(["verify", "03", "--all"]) == 0 and seen[-1][1] == "all"  # a chapter: every kind it reads
