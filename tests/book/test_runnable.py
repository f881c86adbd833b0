"""gnuq_core.book.runnable: a chapter runs in a fresh kernel outside the repository folder."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from gnuq_core.book import runner as chapters_cli
from gnuq_core.repro.profiles import find_chapter
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.repository import Repository
from gnuq_core.book.runnable import (
    CHECKOUT_ADVICE,
    NEEDS,
    OUTPUT_FOLDER,
    plain_markdown,
    runnable_notebook,
    write_runnable,
)

MYST_LEFT = re.compile(r"\{(glue|glue:\w+|term|cite|numref|doc|ref|exercise|solution|admonition)\}")


def setup_cell(nb):
    """The runnable notebook's set-up cell: its first code cell."""
    return next(c for c in nb.cells if c.cell_type == "code")


def shown_text(nb) -> list[str]:
    """What a reader of the executed notebook sees as text: Markdown cells and Markdown outputs."""
    return [c.source for c in nb.cells if c.cell_type == "markdown"] + [
        o["data"]["text/markdown"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
        if "text/markdown" in o.get("data", {})]


@pytest.mark.subprocess
def test_chapter_01_runs_in_a_fresh_kernel_outside_the_repository(tmp_path: Path, monkeypatch) -> None:
    assert not tmp_path.is_relative_to(REPO_ROOT)
    target = write_runnable(find_chapter("01"), tmp_path / "01_derivation.ipynb", profile="smoke")
    nb = nbformat.read(target, as_version=4)
    for name in ("GNUQ_OUTPUT_DIR", "GNUQ_CHAPTER"):  # the notebook sets them itself
        monkeypatch.delenv(name, raising=False)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # what the book page shows, Jupyter shows: every figure as a PNG, every number filled in, no MyST
    figures = find_chapter("01").read_text().count("{glue:figure}")
    pngs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert figures >= 4 and len(pngs) == figures
    text = "\n".join(shown_text(nb))
    assert not MYST_LEFT.search(text) and "not computed in this run" not in text
    assert all(f"Figure {n}." in text for n in range(1, figures + 1)) and "Figure None" not in text
    # each solution is folded: its text only ever inside a <details> block
    unfolded = re.sub(r"<details>.*?</details>", "", text, flags=re.S)
    assert text.count("<details>") == 3 and "Solution to exercise" not in unfolded
    assert "the two sides agree to rounding error" in text and "rounding error" not in unfolded
    record = json.loads((tmp_path / OUTPUT_FOLDER / "01_derivation.provenance.json").read_text())
    assert record["profile"] == "smoke" and record["chapter"] == "01_derivation"
    assert os.environ.get("GNUQ_OUTPUT_DIR") is None  # the kernel's settings stay in the kernel


def test_the_first_cell_says_what_a_chapter_needs_and_the_profile_is_a_preview() -> None:
    nb = runnable_notebook(find_chapter("06"))
    setup = setup_cell(nb)
    params = nb.cells[nb.cells.index(setup) + 1]
    assert "pip install" in setup.source and NEEDS["06_qa_benchmarks"] in setup.source
    assert params.source.startswith("profile = 'quick'") and "parameters" in params.metadata["tags"]
    assert setup.metadata["tags"] == ["gnuq-setup"]
    assert not any(c.metadata.get("tags") for c in nb.cells if c not in (setup, params))  # book-only tags are gone
    nbformat.validate(nb)
    assert "nothing else" in setup_cell(runnable_notebook(find_chapter("01"))).source


def test_the_first_cell_names_the_published_repository_install_line() -> None:
    repo = Repository("github.com", "acme", "gnuq", "main")
    setup = setup_cell(runnable_notebook(find_chapter("01"), repository=repo)).source
    assert repo.install_line() in setup, "in the comment a reader sees"
    assert f"get_ipython().run_line_magic('pip', {repo.install_line()[5:]!r})" in setup, "and run where missing"
    offline = setup_cell(runnable_notebook(find_chapter("01"))).source
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


def test_plain_markdown_turns_myst_into_what_jupyter_renders() -> None:
    source = """(sec-a)=
Under the {term}`delta method <Delta method>` {cite}`a2020,b2021`, {numref}`fig-x` and {doc}`04 <04_mcmc>`.

```{admonition} Key takeaways
:class: important

- one
```

```{exercise} Try it
:label: ex-1

Run {glue:text}`n_mc` samples.
```

````{solution} ex-1
:class: dropdown

Four times as many.
````

```{glue:figure} fig_a
:name: fig-x

The caption.
```
"""
    text = plain_markdown(source, figures={"fig-x": 2}, exercises={"ex-1": 1},
                          citations={"a2020": "A, 2020", "b2021": "B and C, 2021"})
    assert text.startswith("Under the delta method (A, 2020; B and C, 2021), Figure 2 and 04.")
    assert "> **Key takeaways**\n>\n> - one" in text
    assert "**Exercise 1: Try it**\n\nRun {glue:text}`n_mc` samples." in text  # the number: filled in when run
    assert "<details><summary><b>Solution to exercise 1</b> (click to open)</summary>\n\nFour times" in text
    assert "**Figure 2.** The caption." in text and ":class:" not in text and ":label:" not in text


def test_paragraphs_that_quote_numbers_become_folded_cells_that_show_them() -> None:
    nb = runnable_notebook(find_chapter("01"))
    shows = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# @title")]
    assert shows and all(c.metadata["jupyter"]["source_hidden"] and c.metadata["cellView"] == "form" for c in shows)
    headings = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("#")]
    assert headings and all("\n" not in c.source for c in headings)  # each its own cell: Jupyter's contents
    intro = nb.cells[1].source
    assert "Run it yourself" in intro and "Read first" in intro and "min on a" in intro
