"""gnuq_core.repro.runnable: a chapter runs in a fresh kernel outside the repository folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from gnuq_core.repro import chapters as chapters_cli
from gnuq_core.repro.chapters import find_chapter
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.repository import Repository
from gnuq_core.repro.runnable import (
    CHECKOUT_ADVICE,
    NEEDS,
    OUTPUT_FOLDER,
    runnable_notebook,
    write_runnable,
)


def test_chapter_01_runs_in_a_fresh_kernel_outside_the_repository(tmp_path: Path, monkeypatch) -> None:
    assert not tmp_path.is_relative_to(REPO_ROOT)
    target = write_runnable(find_chapter("01"), tmp_path / "01_derivation.ipynb", profile="smoke")
    nb = nbformat.read(target, as_version=4)
    for name in ("GNUQ_OUTPUT_DIR", "GNUQ_CHAPTER"):  # the notebook sets them itself
        monkeypatch.delenv(name, raising=False)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    record = json.loads((tmp_path / OUTPUT_FOLDER / "01_derivation.provenance.json").read_text())
    assert record["profile"] == "smoke" and record["chapter"] == "01_derivation"
    assert os.environ.get("GNUQ_OUTPUT_DIR") is None  # the kernel's settings stay in the kernel


def test_the_first_cell_says_what_a_chapter_needs_and_the_profile_is_a_preview() -> None:
    nb = runnable_notebook(find_chapter("06"))
    setup, params = nb.cells[1], nb.cells[2]
    assert "pip install" in setup.source and NEEDS["06_qa_benchmarks"] in setup.source
    assert params.source.startswith("profile = 'quick'") and "parameters" in params.metadata["tags"]
    assert not any(c.metadata.get("tags") for c in nb.cells if c is not params)  # book-only tags are gone
    nbformat.validate(nb)
    assert "nothing else" in runnable_notebook(find_chapter("01")).cells[1].source


def test_the_first_cell_names_the_published_repository_install_line() -> None:
    repo = Repository("github.com", "acme", "gnuq", "main")
    setup = runnable_notebook(find_chapter("01"), repository=repo).cells[1].source
    assert setup.count(repo.install_line()) == 2, "in the comment and in the error a reader sees"
    offline = runnable_notebook(find_chapter("01")).cells[1].source
    assert CHECKOUT_ADVICE in offline and "git+<repository URL>" in offline


def test_the_command_line_writes_runnable_chapters_and_refuses_an_unknown_profile(tmp_path: Path,
                                                                                 capsys) -> None:
    assert chapters_cli.main(["runnable", "01", "--out", str(tmp_path / "nb")]) == 0
    assert (tmp_path / "nb" / "01_derivation.ipynb").exists()
    assert chapters_cli.main(["runnable", "01", "--profile", "nope", "--out", str(tmp_path / "other")]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err and not (tmp_path / "other").exists()


def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for out in (a_file, a_file / "below"):
        assert chapters_cli.main(["runnable", "01", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --out {out}") and err.count("\n") == 1 and "Traceback" not in err
    assert a_file.read_text() == "x"
