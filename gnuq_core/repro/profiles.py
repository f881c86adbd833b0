"""The book's chapters and profiles, the ground the runner and the chapters stand on.

Which chapters exist (their Jupytext sources ship in the package, ``gnuq_core/notebooks``), which
profiles there are (`PROFILES`; a chapter's values for each preview profile are its own
``Params.PREVIEWS``, `gnuq_core.chapters.base`), each chapter's measured run time, ``--set``
values read as literals, and a source converted to a notebook. The runner
(`gnuq_core.book.runner`) and the runnable notebooks (`gnuq_core.book.runnable`) build on it.
"""

from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path
from typing import Any

from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.fingerprint import fingerprint

__all__ = ["ChapterError", "NOTEBOOKS", "PROFILES", "CHAPTER_TIMES", "chapters", "find_chapter", "profile_names",
           "check_profile", "to_ipynb", "chapter_times", "save_chapter_time", "parse_overrides"]


class ChapterError(ValueError):
    """A chapter, profile or parameter that cannot be used, with a message saying why."""


NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"  # package data: an installed gnuq has its chapters
PROFILES: dict[str, str] = {
    "smoke": "the fastest run that still executes every code path (`make test`; at most 5 min for all chapters)",
    "quick": "a preview: minutes per chapter on a laptop (at most 30 min for all chapters on 2 cores)",
    "full": "the paper edition: every chapter's Params defaults, its paper-grade numbers read from the results store",
}
"""The profiles, with what each is for. ``full`` is every chapter's ``Params`` defaults; a chapter's
values for a preview profile are its ``Params.PREVIEWS[profile]`` (`gnuq_core.chapters.base`)."""
CHAPTER_TIMES = Path(__file__).resolve().parents[1] / "profiles" / "times.json"  # package data
"""Each chapter's measured run time per profile (``gnuq chapter run --record-times``), which
its page states; recorded on request only, so a build never changes a tracked file."""
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}


def chapters() -> list[Path]:
    """All chapter sources ``gnuq_core/notebooks/NN_name.py``, in order."""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def find_chapter(selector: str) -> Path:
    """The chapter whose number or stem is ``selector`` (``"01"``, ``"01_derivation"``)."""
    matches = [p for p in chapters() if p.stem == selector or p.stem.split("_")[0] == selector]
    if len(matches) != 1:
        known = ", ".join(p.stem for p in chapters())
        raise ChapterError(f"no chapter {selector!r}; known chapters: {known}")
    return matches[0]


def profile_names() -> list[str]:
    """Names of the profiles, from the fastest to the paper edition."""
    return list(PROFILES)


def check_profile(name: str) -> str:
    """``name`` if it is a profile, else a `ChapterError` naming the profiles there are."""
    if name not in PROFILES:
        raise ChapterError(f"unknown profile {name!r}; available profiles: {', '.join(PROFILES)}")
    return name


def to_ipynb(source: Path, target: Path) -> Path:
    """Convert a Jupytext percent-format ``source`` to an unpaired ipynb at ``target``."""
    import jupytext

    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata.pop("jupytext", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, target, fmt="ipynb")
    return target

def chapter_times() -> dict[str, dict[str, dict[str, Any]]]:
    """The measured run time of each chapter per profile (`CHAPTER_TIMES`), ``{}`` if none is recorded."""
    return json.loads(CHAPTER_TIMES.read_text()) if CHAPTER_TIMES.exists() else {}


def save_chapter_time(stem: str, profile: str, seconds: float) -> None:
    """Record ``stem``'s run time in ``profile`` on this machine in `CHAPTER_TIMES` (``--record-times``)."""
    times = chapter_times()
    machine = fingerprint()
    times.setdefault(profile, {})[stem] = {
        "seconds": round(seconds, 1), "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{machine['cores']}-core {machine['cpu']}"}
    write_atomic(CHAPTER_TIMES, json.dumps(times, indent=1, sort_keys=True) + "\n")


NONFINITE_WORDS = ("inf", "infinity", "nan")
"""Words read as floats anywhere in a ``--set`` value (any case, with YAML's leading dot too), so
``deltas=[inf,-inf]`` reaches the range checks as numbers and is refused as not finite."""


class _NonFinite(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(float(node.id)) if node.id.lower() in NONFINITE_WORDS else node


def _literal(text: str) -> Any:
    """``text`` as a Python literal in which `NONFINITE_WORDS` are floats; ValueError/SyntaxError if it is none."""
    text = re.sub(r"(?<![\w.])\.(?=(?:inf|nan)\b)", "", text.strip(), flags=re.IGNORECASE)  # YAML's .inf, .nan
    return ast.literal_eval(_NonFinite().visit(ast.parse(text, mode="eval")))


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["n=3", "models=['a']"]`` -> ``{"n": 3, "models": ["a"]}`` (values are Python literals, with
    ``inf`` and ``nan`` as numbers; a bare word is taken as a string)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise ChapterError(f"--set {pair!r}: expected NAME=VALUE, e.g. --set n_truthfulqa=100")
        try:
            out[name.strip()] = _literal(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            out[name.strip()] = text
    return out
