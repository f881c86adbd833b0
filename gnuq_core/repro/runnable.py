"""A chapter as a notebook that runs outside a checkout ("Run it yourself").

The executed notebook a book page offers is the paper edition's record: it only reruns
inside a checkout, with the results store and the data beside it. `runnable_notebook`
turns a chapter's Jupytext source into a notebook for a reader's own Jupyter or Colab:
a first code cell checks that gnuq is installed (and says how to install it), sends the
chapter's outputs to a folder beside the notebook and says what else the chapter needs
(the QA data, the two real models), and the parameters select a preview profile
(``quick``: minutes on a laptop). The book links one per chapter from its banner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gnuq_core.repro.chapters import to_ipynb
from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.repository import Repository

__all__ = ["NEEDS", "runnable_notebook", "write_runnable", "OUTPUT_FOLDER", "CHECKOUT_ADVICE"]

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

SETUP = '''# Run this chapter yourself. It needs the gnuq package with its book extra, installed
# from a checkout (`pip install -e ".[book]"`) or from the repository this book came from
# ({install}), then a kernel restart.
import importlib.util
import os

if importlib.util.find_spec("gnuq_core") is None or importlib.util.find_spec("myst_nb") is None:
    raise ModuleNotFoundError("gnuq (with its book extra) is not installed in this kernel: "
                              {advice!r})
for name, value in {{"GNUQ_OUTPUT_DIR": {output!r},  # provenance and other files of this run
                    "GNUQ_CHAPTER": {chapter!r}, "TQDM_DISABLE": "1"}}.items():
    os.environ.setdefault(name, value)
# Also needed: {needs}.'''

CHECKOUT_ADVICE = "pip install -e '.[book]' in a checkout of the repository, then restart the kernel"


def runnable_notebook(source: Path, profile: str = "quick", repository: Repository | None = None) -> Any:
    """The chapter at ``source`` (Jupytext ``.py``) as a notebook that runs outside a checkout.

    Parameters
    ----------
    source : Path
        A chapter's Jupytext source (``notebooks/<stem>.py``).
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
    advice = f"run {repository.install_line()}, then restart the kernel" if repository else CHECKOUT_ADVICE
    setup = nbformat.v4.new_code_cell(SETUP.format(install=install, advice=advice, output=OUTPUT_FOLDER,
                                                   chapter=source.stem, needs=NEEDS.get(source.stem, "nothing else")),
                                      metadata={"tags": ["gnuq-setup"]})
    nb.cells.insert(nb.cells.index(params), setup)
    for cell in nb.cells:  # the book's cell tags (folding, removal) mean nothing in Jupyter
        if cell is not params:
            cell.metadata.pop("tags", None)
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
