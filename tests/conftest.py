"""Shared fixtures: the book built in the smoke profile (once per test session)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from gnuq_core.repro import netguard
from gnuq_core.repro.paths import REPO_ROOT

# Tests never touch the network: model and data hubs are switched to offline mode.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# Under ``make check`` each of the xdist workers (one per core) computes on one thread: two
# workers each asking torch and XLA for every core oversubscribe the machine (measured: the
# unit tests took 370 s on 2 cores with default threads).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    os.environ["XLA_FLAGS"] = " ".join(filter(None, (os.environ.get("XLA_FLAGS"),
                                                     "--xla_cpu_multi_thread_eigen=false",
                                                     "intra_op_parallelism_threads=1")))
# ... and every socket to a non-loopback address is refused, in this process and in every
# Python subprocess (chapter kernels included) through tests/netguard/sitecustomize.py.
os.environ["GNUQ_BLOCK_NETWORK"] = "1"
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(Path(__file__).parent / "netguard"), os.environ.get("PYTHONPATH")) if p)
netguard.install()


def copy_book_sources(target: Path) -> Path:
    """Copy the book's sources (config, toc, pages, static assets) without executed chapters."""
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(REPO_ROOT / name, target / name)
    shutil.copytree(REPO_ROOT / "book", target / "book", ignore=shutil.ignore_patterns("_generated"))
    return target


def build_book(root: Path) -> subprocess.CompletedProcess:
    """``jupyter-book build root -W -n --keep-going``; the result carries its output."""
    exe = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run([str(exe), "build", str(root), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True, timeout=900)


def _build_smoke_book(base: Path) -> Path:
    """Every chapter executed in the smoke profile under ``base``, then the book built: its HTML."""
    root = copy_book_sources(base)
    run = subprocess.run([sys.executable, "-m", "gnuq_core.book.runner", "run", "--profile", "smoke",
                          "--out", str(root / "book" / "_generated")],
                         capture_output=True, text=True, timeout=1800, cwd=REPO_ROOT)
    assert run.returncode == 0, f"a chapter failed in the smoke profile:\n{run.stdout[-5000:]}\n{run.stderr[-5000:]}"
    build = build_book(root)
    assert build.returncode == 0, f"book build failed:\n{build.stdout[-5000:]}\n{build.stderr[-3000:]}"
    return root / "_build" / "html"


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HTML of the whole book, every chapter executed in the smoke profile.

    Built once per test run: under pytest-xdist the first worker that needs it builds it and
    the others wait for it (a file lock beside the workers' temporary folders; a failed build
    fails every worker's book tests with its message, and is not retried).
    ``GNUQ_BOOK_HTML`` points at an already built book instead (CI uses it to check the
    paper edition in the browser).
    """
    if os.environ.get("GNUQ_BOOK_HTML"):
        return Path(os.environ["GNUQ_BOOK_HTML"]).resolve()
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process (also under -p no:xdist)
        return _build_smoke_book(tmp_path_factory.mktemp("smoke_book"))
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent
    outcome = shared / "smoke_book.outcome"
    with FileLock(str(shared / "smoke_book.lock")):
        if not outcome.is_file():
            try:
                html = _build_smoke_book(Path(tempfile.mkdtemp(prefix="smoke_book", dir=shared)))
                outcome.write_text(f"built {html}")
            except Exception as err:  # noqa: BLE001 - told to the waiting workers, then raised here too
                outcome.write_text(f"failed {type(err).__name__}: {err}")
        told = outcome.read_text()
    assert told.startswith("built "), told.removeprefix("failed ")
    return Path(told.removeprefix("built "))


QUICK_PROBES = {"git", "pandoc"}
"""Programs the library itself asks a version or a commit (provenance, notebook conversion):
milliseconds, allowed in ``make check``."""


@pytest.fixture(autouse=True)
def _a_process_needs_its_mark(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``make check`` (``GNUQ_CHECK=1``) a test that starts a process fails unless it carries
    the ``subprocess`` mark, which ``make check`` leaves to ``make test``: the marks stay true."""
    if os.environ.get("GNUQ_CHECK") != "1" or request.node.get_closest_marker("subprocess"):
        return

    real = subprocess.Popen.__init__

    def refuse(self: subprocess.Popen, args: Any, *rest: Any, **kw: Any) -> None:
        program = Path(str(args[0] if isinstance(args, (list, tuple)) else args).split()[0]).name
        if program in QUICK_PROBES:
            return real(self, args, *rest, **kw)
        raise AssertionError(f"this test starts a process ({str(args)[:80]}): mark it @pytest.mark.subprocess "
                             "(make check leaves such tests to make test)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
