"""A chapter as a notebook that runs outside a checkout ("Run it yourself").

The executed notebook a book page offers is the paper edition's record: it only reruns
inside a checkout, with the results store and the data beside it. `runnable_notebook`
turns a chapter's Jupytext source into a notebook for a reader's own Jupyter, JupyterLab,
VS Code or Colab, none of which knows MyST:

- a first Markdown cell says how long the chapter takes in its profile and what to read
  first; a code cell installs gnuq where it is missing (from the published repository),
  sends the chapter's outputs to a folder beside the notebook and says what else it needs;
- MyST's roles become plain text (glossary terms, citations as author and year, figure
  references as "Figure 2"), admonitions become quotes, each exercise is Markdown with its
  solution folded in a ``<details>`` block;
- a paragraph that quotes computed numbers becomes a small code cell (source folded) whose
  output is the paragraph with this run's numbers, its figures as PNG images and its tables
  (`gnuq_core.repro.glued.show`).

The parameters select a preview profile (``quick``: minutes on a laptop). The book links one
per chapter from its banner.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.glued import GLUE_BLOCK, GLUE_ROLE, block_options
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.profiles import CHAPTER_TIMES, to_ipynb
from gnuq_core.repro.repository import Repository

__all__ = ["NEEDS", "READ_FIRST", "runnable_notebook", "write_runnable", "plain_markdown", "OUTPUT_FOLDER",
           "CHECKOUT_ADVICE"]

OUTPUT_FOLDER = "gnuq_output"
"""Where a runnable chapter writes its provenance and other files (beside the notebook)."""

NEEDS: dict[str, str] = {
    "02_proxy_bias": "the QA data folder and the MiniLM encoder of the text proxy (set GNUQ_DATA_DIR; see the "
                     "README: Data and models)",
    "03_hessian_spectra": 'the SmolLM2 model for the language-model spectrum, or overrides = {"lm_source": '
                          '"tiny-random"}',
    "06_qa_benchmarks": "the QA data folder (set GNUQ_DATA_DIR) and the two real models (see the README: Data "
                        "and models)",
    "07_efficiency": "the QA data folder (set GNUQ_DATA_DIR) and the two real models (see the README: Data and "
                     "models)",
    "80_cross_checks": "the crosscheck extra (pip install '.[crosscheck]') and the QA data folder (set "
                       "GNUQ_DATA_DIR)",
    "90_claims_ledger": "the other chapters, run before it in the same folder (their claims)",
}
"""What a chapter needs beyond the package, in words (chapters not listed need nothing else)."""

READ_FIRST: dict[str, str] = {
    "01_derivation": "the prerequisites and notation page (probability, the gradient, a Gaussian's covariance)",
    "02_proxy_bias": "chapter 01 (the derivation: why the score is ‖∇θ p‖²)",
    "03_hessian_spectra": "chapters 01 and 02 (the score, and why a curvature-based covariance is not used)",
    "04_mcmc_validation": "chapter 01 (the score, and the Bayesian posterior it approximates)",
    "05_scaling": "chapter 04 (the MCMC reference and how a rank correlation is read)",
    "06_qa_benchmarks": "chapter 01 (the score); AUROC, the chance of ranking a wrong answer above a right one",
    "07_efficiency": "chapter 06 (the QA study whose answers are timed)",
    "80_cross_checks": "chapters 01 and 06 (what is computed, and on which models)",
    "90_claims_ledger": "the chapters whose claims it gathers (01 to 07)",
}
"""What a reader should know before a chapter, in words."""

SETUP = '''# Run this chapter yourself: this cell installs gnuq where it is missing ({install}),
# then sets where the chapter writes its files. Then run the cells in order (Run all).
import importlib.util
import os

if importlib.util.find_spec("gnuq_core") is None or importlib.util.find_spec("matplotlib") is None:
    {install_now}
for name, value in {{"GNUQ_OUTPUT_DIR": {output!r},  # provenance and other files of this run
                    "GNUQ_CHAPTER": {chapter!r}, "TQDM_DISABLE": "1"}}.items():
    os.environ.setdefault(name, value)
os.environ["GNUQ_RUNNABLE"] = "1"  # the text cells below show this run's numbers, figures and tables
from gnuq_core.repro.glued import show  # noqa: E402
# Also needed: {needs}.'''

CHECKOUT_ADVICE = "pip install -e '.[book]' in a checkout of the repository, then restart the kernel"

_BLOCK = r"^(?P<fence>`{{3,}})\{{(?P<name>{names})\}}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$"
_EXERCISE = re.compile(_BLOCK.format(names="exercise"), re.M | re.S)
_SOLUTION = re.compile(_BLOCK.format(names="solution"), re.M | re.S)
_ADMONITION = re.compile(_BLOCK.format(names="admonition|note|important|tip|warning"), re.M | re.S)
_ROLE = re.compile(r"\{(term|cite|cite:p|cite:t|numref|doc|ref)\}`([^`]+)`")
_TARGET = re.compile(r"^\([\w-]+\)=[ \t]*\n", re.M)


_ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303"}


def _unlatex(name: str) -> str:
    """A BibTeX name as text: ``Gr{\\"u}nefeld`` gives ``Grünefeld``."""
    import unicodedata

    text = re.sub(r"\\([\"'`^~])\{?(\w)\}?", lambda m: m.group(2) + _ACCENTS[m.group(1)], name)
    return unicodedata.normalize("NFC", text.replace("{", "").replace("}", "")).strip()


def _citations() -> dict[str, str]:
    """Bibliography key → "Author et al., year" from the book's references."""
    bib = REPO_ROOT / "book" / "references.bib"
    out: dict[str, str] = {}
    text = bib.read_text(encoding="utf-8") if bib.exists() else ""
    for entry in re.finditer(r"@\w+\{([^,]+),(.*?)\n\}", text, re.S):
        author = re.search(r"author\s*=\s*[{\"](.+?)[}\"],?\s*\n", entry.group(2))
        year = re.search(r"year\s*=\s*[{\"]?(\d{4})", entry.group(2))
        if author and year:
            last = [_unlatex(a.split(",")[0]) for a in author.group(1).split(" and ")]
            who = last[0] if len(last) == 1 else f"{last[0]} and {last[1]}" if len(last) == 2 else f"{last[0]} et al."
            out[entry.group(1).strip()] = f"{who}, {year.group(1)}"
    return out


def _shown(text: str) -> str:
    """A role's shown text: ``text <target>`` gives ``text``; otherwise the whole content."""
    match = re.fullmatch(r"(.*?)\s*<([^>]+)>", text, re.S)
    return match.group(1) if match else text


def plain_markdown(markdown: str, figures: dict[str, int], exercises: dict[str, int],
                   citations: dict[str, str]) -> str:
    """A chapter's MyST Markdown as plain Jupyter Markdown (see the module docstring).

    ``figures`` numbers the figures by their ``:name:``, ``exercises`` the exercises by
    their ``:label:``; ``citations`` gives each bibliography key's text. Glue roles and
    blocks are left for `gnuq_core.repro.glued.show` (their captions numbered here)."""
    def exercise(m: re.Match[str]) -> str:
        options, body = block_options(m.group("body"))
        number = exercises.get(options.get("label", ""), "")
        return f"---\n**Exercise {number}: {m.group('arg').strip()}**\n\n{body}\n"

    def solution(m: re.Match[str]) -> str:
        _, body = block_options(m.group("body"))
        number = exercises.get(m.group("arg").strip(), "")
        summary = f"<summary><b>Solution to exercise {number}</b> (click to open)</summary>"
        return f"<details>{summary}\n\n{body}\n\n</details>\n"

    def admonition(m: re.Match[str]) -> str:
        _, body = block_options(m.group("body"))
        title = m.group("arg").strip() or m.group("name").capitalize()
        return "\n".join([f"> **{title}**", ">"] + [f"> {line}".rstrip() for line in body.splitlines()]) + "\n"

    def figure(m: re.Match[str]) -> str:
        if not m.group("figure"):
            return m.group(0)
        options, caption = block_options(m.group("body"))
        number = figures[options.get("name", m.group("name"))]  # numbered by _numbering, name or glue key
        lines = [f":{k}: {v}" for k, v in options.items()] + ["", f"**Figure {number}.** {caption}"]
        return f"{m.group('fence')}{{glue:figure}} {m.group('name')}\n" + "\n".join(lines) + f"\n{m.group('fence')}"

    def role(m: re.Match[str]) -> str:
        kind, text = m.group(1), m.group(2)
        if kind.startswith("cite"):
            return "(" + "; ".join(citations.get(k.strip(), k.strip()) for k in text.split(",")) + ")"
        if kind == "numref":
            label = _shown(text) if "<" not in text else re.search(r"<([^>]+)>", text).group(1)
            number = figures.get(label.strip())
            return f"Figure {number}" if number else "the figure"
        if kind == "doc":
            return _shown(text) if "<" in text else Path(text).name
        return _shown(text)

    text = _SOLUTION.sub(solution, _EXERCISE.sub(exercise, markdown))
    text = _ADMONITION.sub(admonition, text)
    text = GLUE_BLOCK.sub(figure, _TARGET.sub("", text))
    return _ROLE.sub(role, text)


def _numbering(markdowns: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Figures (by ``:name:``) and exercises (by ``:label:``) numbered in the order they appear."""
    figures: dict[str, int] = {}
    exercises: dict[str, int] = {}
    for text in markdowns:
        for m in GLUE_BLOCK.finditer(text):
            if m.group("figure"):
                figures[block_options(m.group("body"))[0].get("name", m.group("name"))] = len(figures) + 1
        for m in _EXERCISE.finditer(text):
            exercises[block_options(m.group("body"))[0].get("label", f"exercise-{len(exercises) + 1}")] = \
                len(exercises) + 1
    return figures, exercises


def _sections(text: str) -> list[str]:
    """``text`` cut around each heading outside a fenced block (a heading is a Markdown cell of
    its own, so that Jupyter's table of contents finds it)."""
    parts: list[list[str]] = [[]]
    fence = ""
    for line in text.splitlines():
        marker = re.match(r"^(`{3,})", line)
        if marker and (not fence or marker.group(1) == fence):
            fence = "" if fence else marker.group(1)
        if line.startswith("#") and not fence:
            parts += [[line], []]
            continue
        parts[-1].append(line)
    return [t for t in ("\n".join(p).strip("\n") for p in parts) if t.strip()]


def _text_cell(nbformat: Any, text: str) -> Any:
    """A Markdown cell, or, where the text quotes computed values, a code cell that shows it."""
    if not (GLUE_ROLE.search(text) or GLUE_BLOCK.search(text)):
        return nbformat.v4.new_markdown_cell(text)
    quoted = f"r'''{text}'''" if "'''" not in text and not text.endswith("\\") else repr(text)
    return nbformat.v4.new_code_cell(f"# @title The text, with this run's numbers\nshow({quoted})",
                                     metadata={"cellView": "form", "jupyter": {"source_hidden": True}})


def _intro(stem: str, profile: str) -> str:
    """The first cell's Markdown: how long the chapter takes in ``profile`` and what to read first."""
    times = json.loads(CHAPTER_TIMES.read_text()) if CHAPTER_TIMES.exists() else {}
    took = times.get(profile, {}).get(stem)
    when = (f"In the `{profile}` profile it ran in about {max(1, round(took['seconds'] / 60))} min on a "
            f"{took['machine']} ({took['date']})." if took else f"It runs in the `{profile}` profile.")
    return (f"> **Run it yourself.** {when} Read first: {READ_FIRST.get(stem, 'the introduction')}. Run the cells "
            "in order; each paragraph that quotes a number is a small cell whose output is the text with this "
            "run's numbers, figures and tables. Exercise solutions are folded: open one after trying.")


def runnable_notebook(source: Path, profile: str = "quick", repository: Repository | None = None) -> Any:
    """The chapter at ``source`` (Jupytext ``.py``) as a notebook that runs outside a checkout.

    Parameters
    ----------
    source : Path
        A chapter's Jupytext source (``gnuq_core/notebooks/<stem>.py``).
    profile : str
        The profile its parameters cell selects (a preview: ``quick`` or ``smoke``).
    repository : Repository, optional
        The public repository the book comes from (`gnuq_core.repro.repository`): its first
        cell then names the exact install line; without one it names a checkout.

    Returns
    -------
    nbformat.NotebookNode
    """
    import tempfile

    import nbformat

    with tempfile.TemporaryDirectory() as tmp:
        nb = nbformat.read(to_ipynb(source, Path(tmp) / f"{source.stem}.ipynb"), as_version=4)
    params = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    if params is None:
        raise ValueError(f"{source.name} has no cell tagged 'parameters'")
    params.source = f'profile = {profile!r}  # "smoke" (seconds), "quick" (minutes) or "full" (the paper edition)\n' \
                    "overrides = {}  # parameters to change, e.g. {\"seed\": 1}"
    install = repository.install_line() if repository else '`%pip install "gnuq[book] @ git+<repository URL>"`'
    missing = f"gnuq (with its book extra) is not installed in this kernel: {CHECKOUT_ADVICE}"
    install_now = (f"get_ipython().run_line_magic('pip', {repository.install_line()[5:]!r})" if repository
                   else f"raise ModuleNotFoundError({missing!r})")
    setup = nbformat.v4.new_code_cell(SETUP.format(install=install, install_now=install_now, output=OUTPUT_FOLDER,
                                                   chapter=source.stem, needs=NEEDS.get(source.stem, "nothing else")),
                                      metadata={"tags": ["gnuq-setup"]})
    figures, exercises = _numbering([c.source for c in nb.cells if c.cell_type == "markdown"])
    citations = _citations()
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            plain = plain_markdown(cell.source, figures, exercises, citations)
            cells += [_text_cell(nbformat, part) for part in _sections(plain)]
            continue
        if cell is not params:  # the book's cell tags (folding, removal) mean nothing in Jupyter
            cell.metadata.pop("tags", None)
        cells.append(cell)
    nb.cells = cells
    nb.cells.insert(next(i for i, c in enumerate(nb.cells) if c.cell_type == "code"), setup)  # before any code
    first = 1 if nb.cells[0].cell_type == "markdown" else 0  # after the title
    nb.cells.insert(first, nbformat.v4.new_markdown_cell(_intro(source.stem, profile)))
    nb.metadata["gnuq"] = {"chapter": source.stem, "profile": profile}
    return nb


def write_runnable(source: Path, target: Path, profile: str = "quick", repository: Repository | None = None) -> Path:
    """Write `runnable_notebook` of ``source`` to ``target`` (only if it changed) and return ``target``."""
    import nbformat

    text = nbformat.writes(runnable_notebook(source, profile, repository))
    if not target.exists() or target.read_text() != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, text)  # an interrupted write leaves the old notebook or the new, never half
    return target
