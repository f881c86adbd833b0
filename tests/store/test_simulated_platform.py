"""The paper edition's check passes on another CPU (simulated here) and still catches an altered number.

Chapter 02's stored synthetic sweep (30 seeds, trained in float32: chaotic) is checked on a
copy of the results store, once on this machine and once as on a CPU without AVX-512
(`gnuq_core.repro.fingerprint.SIMULATIONS`). Then one stored number of the item the check
draws is moved beyond what its contract allows, and both platforms must refuse it, naming it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.fingerprint import cpu_isa, simulated_env
from gnuq_core.store.store import RESULTS

KIND = "proxy_synthetic"


def _check(results: Path, simulate: str | None) -> subprocess.CompletedProcess:
    env = simulated_env(simulate) if simulate else dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "tests.store.check_stored", str(results)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    if not list((RESULTS / KIND).glob("*.jsonl")):
        pytest.skip(f"no stored {KIND} items in this checkout")
    copy = tmp_path_factory.mktemp("results")
    shutil.copytree(RESULTS / KIND, copy / KIND)
    shutil.copy(RESULTS / "fingerprints.jsonl", copy / "fingerprints.jsonl")
    return copy


@pytest.mark.subprocess
@pytest.mark.skipif(cpu_isa() in ("SSE4_2", "unknown"), reason="no instruction set to simulate away on this CPU")
def test_the_check_passes_here_and_on_a_simulated_cpu_and_an_altered_number_fails_on_both(results: Path) -> None:
    native = _check(results, None)
    assert native.returncode == 0, native.stderr[-2000:]
    here = json.loads(native.stdout.strip().splitlines()[-1])
    assert here["computed"] == 0 and here["largest"] <= 1
    for other in ("avx2", "sse4_2"):  # the first simulation that is not this platform (it may already be AVX2)
        simulated = _check(results, other)
        assert simulated.returncode == 0, simulated.stderr[-2000:]
        there = json.loads(simulated.stdout.strip().splitlines()[-1])
        if there["checked_on"] != here["checked_on"]:
            break
    assert there["item"] == here["item"] and there["checked_on"] != here["checked_on"]
    assert not there["same_platform"] and "stored seeds" in there["rule"] and there["largest"] <= 1
    # one stored number of the checked item, moved beyond what the seeds allow
    (path,) = (results / KIND).glob("*.jsonl")
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("id") == here["item"]:
            rec["rho_iso"] = rec["rho_iso"] - 0.5
            lines[n] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    for simulate in (None, other):
        failed = _check(results, simulate)
        assert failed.returncode == 1, failed.stdout
        assert f"item {here['item']} recomputed differently" in failed.stderr and ".rho_iso" in failed.stderr
