"""Run chapter notebooks: Jupytext source → ipynb → papermill with a profile's parameters.

A profile (`gnuq_core.repro.profiles.PROFILES`: ``smoke``, ``quick``, ``full``) names the
values a chapter runs with: ``full`` its ``Params`` defaults (the paper edition), a preview
profile those of its ``Params.PREVIEWS`` (``PREVIEWS = {"quick": {"n_mc": 4000}, …}``).

Every chapter's computation lives in `gnuq_core.chapters` (`gnuq_core.chapters.MODULES`),
which declares its parameters once, in the module's ``Params`` dataclass (defaults: the
paper edition) and its preview values: the runner creates ``Params`` from the profile and ``--set`` values (which
checks every value's type and range) and injects only ``profile`` and ``overrides`` into
the notebook, which resolves the same ``Params``. The checks run before the notebook
does, so ``--set n_mc=-5`` is one line, not a traceback from deep inside a chapter, and
nothing in the output folder changes before they pass.

Command line::

    gnuq chapter run 01 --profile smoke [--out DIR]     # or: python -m gnuq_core.book.runner run ...
    gnuq chapter list
    gnuq chapter runnable [01 ...] --out DIR [--profile quick]   # notebooks that run outside a checkout
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from gnuq_core.book.runnable import write_runnable
from gnuq_core.chapters import module_for
from gnuq_core.options import OneLineParser, output_path, run_command
from gnuq_core.repro import claims
from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.profiles import (CHAPTER_TIMES, ChapterError, chapters, check_profile, find_chapter,
                                      parse_overrides, profile_names, save_chapter_time, to_ipynb)

def declared_parameters(notebook: Path) -> dict[str, Any]:
    """The ``parameters`` cell's names and default values of an ipynb."""
    import papermill

    declared = papermill.inspect_notebook(str(notebook))
    if not declared:
        raise ChapterError(f"{notebook.name} has no cell tagged 'parameters'")
    cell = next(c for c in json.loads(Path(notebook).read_text())["cells"]
                if "parameters" in c.get("metadata", {}).get("tags", []))
    source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    assigned = [t.id for node in ast.parse(source).body if isinstance(node, ast.Assign)
                for t in node.targets if isinstance(t, ast.Name)]
    unparsed = [name for name in assigned if name not in declared]
    if unparsed:  # papermill skips a line it cannot parse, and the parameter would be silently fixed
        raise ChapterError(f"{notebook.name}: papermill cannot read the parameter line(s) of {', '.join(unparsed)}; "
                           "keep each to `name = literal  # comment` and try a simpler comment (papermill gave up on it)")
    return {name: ast.literal_eval(info["default"]) for name, info in declared.items()}


def chapter_module(source: Path) -> Any:
    """The `gnuq_core.chapters` module of a chapter notebook (a `ChapterError` if none is registered)."""
    module = module_for(source.stem)
    if module is None:
        raise ChapterError(f"{source.name} has no chapter module: register its Params and run() in "
                           "gnuq_core.chapters.MODULES")
    return module


def chapter_parameters(selector: str, profile: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A chapter's parameters for a build: its ``Params`` defaults, updated by ``profile``
    (its ``Params.PREVIEWS``), then by ``overrides``, every value checked."""
    source = find_chapter(selector)
    params = chapter_module(source).Params.for_profile(profile, overrides)
    return {**params.to_dict(), "profile": profile}


def run_chapter(selector: str, profile: str = "quick", out_dir: Path | None = None,
                extra: dict[str, Any] | None = None, record_time: bool = False) -> Path:
    """Execute one chapter with a profile's parameters; return the executed notebook.

    ``extra`` overrides the profile (same checks). The executed notebook, and the side
    files the chapter writes (claims, provenance), land in ``out_dir`` (default
    ``book/_generated``). ``record_time`` saves the run time in `CHAPTER_TIMES`.
    """
    import papermill

    if record_time and extra:
        raise ChapterError("--record-times records a profile's own run time: drop the --set overrides")
    source = find_chapter(selector)
    check_profile(profile)
    if "profile" in (extra or {}):
        raise ChapterError(f"{source.stem}: 'profile' is set by the runner (--profile), not by --set")
    out_dir = Path(out_dir or REPO_ROOT / "book" / "_generated").resolve()
    refuse_a_file(out_dir, "the executed notebooks")
    module = chapter_module(source)
    with tempfile.TemporaryDirectory() as scratch:  # check everything before touching out_dir
        draft = to_ipynb(source, Path(scratch) / f"{source.stem}.ipynb")
        declared = declared_parameters(draft)  # the chapter's Params checks the values; the notebook resolves them
        if set(declared) != {"profile", "overrides"}:
            raise ChapterError(f"{source.name}: its parameters cell must declare only `profile` and `overrides` "
                               f"(the parameters are {module.__name__}.Params); it declares {', '.join(declared)}")
        resolved = module.Params.for_profile(profile, extra)
        params = {"profile": profile, "overrides": dict(extra or {})}
        recorded = {**resolved.to_dict(), "profile": profile}
        make_output_folder(out_dir, "the executed notebooks")
        try:
            target = Path(shutil.copyfile(draft, out_dir / f"{source.stem}.ipynb"))
        except OSError as err:
            raise ChapterError(f"--out {out_dir}: cannot write {source.stem}.ipynb there ({err.strerror}); "
                               "free space or choose another folder") from None
    # The kernel inherits this environment. Figures must render inline (as PNG) whatever
    # backend the caller uses (tests set Agg), or glued figures degrade to text. Progress
    # bars are for people at a terminal: in the book they would be stderr output, so the
    # runner reports progress per chapter instead.
    os.environ.update(GNUQ_OUTPUT_DIR=str(out_dir), GNUQ_CHAPTER=source.stem,
                      GNUQ_PARAMETERS=json.dumps(recorded),
                      MPLBACKEND="module://matplotlib_inline.backend_inline", TQDM_DISABLE="1")
    claims.reset(source.stem)
    (out_dir / f"{source.stem}.provenance.json").unlink(missing_ok=True)
    started = time.time()
    changed = "".join(f" {k}={v!r}" for k, v in (extra or {}).items())
    print(f"[{source.stem}] profile={profile}{' with' + changed if changed else ''} → {target.relative_to(REPO_ROOT) if target.is_relative_to(REPO_ROOT) else target}",
          flush=True)
    try:
        papermill.execute_notebook(str(target), str(target), parameters=params, kernel_name="python3",
                                   cwd=str(REPO_ROOT), progress_bar=False, log_output=False)
    except papermill.PapermillExecutionError as err:
        if err.ename not in ONE_LINE_ERRORS:
            raise  # a bug in the chapter: its traceback is the report
        raise ChapterError(f"chapter {source.stem} stopped: {err.ename}: {err.evalue} (the executed cells are in "
                           f"{target})") from None
    seconds = time.time() - started
    print(f"[{source.stem}] done in {seconds:.1f} s", flush=True)
    if record_time:
        save_chapter_time(source.stem, profile, seconds)
    return target


ONE_LINE_ERRORS = frozenset({"ResultsDisagree", "StoreDamaged", "StoreIncomplete", "ChapterError", "DamagedFile",
                             "FileNotFoundError", "UsageError"})
"""Errors inside a chapter that are about its inputs (a damaged or incomplete results store, a
missing data file, a bad parameter), not a bug: `gnuq chapter run` reports them in one line."""


def refuse_a_file(out_dir: Path, what: str) -> None:
    """`ChapterError` (one line) if ``--out`` names a file, not a folder for ``what``."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ChapterError(f"--out {out_dir} is a file: give a folder for {what}")


def make_output_folder(out_dir: Path, what: str) -> Path:
    """Create ``out_dir`` (and its parents) for ``what``; `ChapterError` (one line) where it cannot
    be a folder."""
    refuse_a_file(out_dir, what)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ChapterError(f"--out {out_dir}: cannot create the folder ({err.strerror})") from None
    return out_dir


def write_runnables(selectors: list[str], out_dir: Path, profile: str = "quick") -> int:
    """Write each selected chapter (default: all) as ``out_dir/<stem>.ipynb`` that runs outside a
    checkout (`gnuq_core.book.runnable`), naming the published repository where one is set
    (`gnuq_core.repro.repository`); print each path."""
    from gnuq_core.repro.repository import published_repository

    check_profile(profile)  # an unknown profile is refused before anything is written
    repository = published_repository()
    sources = [find_chapter(s) for s in selectors] or chapters()
    out_dir = make_output_folder(Path(out_dir).resolve(), "the runnable notebooks")
    for source in sources:
        try:
            print(write_runnable(source, out_dir / f"{source.stem}.ipynb", profile, repository))
        except OSError as err:
            raise ChapterError(f"--out {out_dir}: cannot write {source.stem}.ipynb there ({err.strerror}); "
                               "free space or choose another folder") from None
    return 0


def main(argv: list[str] | None = None, prog: str = "gnuq chapter") -> int:
    """Command-line entry point (``gnuq chapter``; see the module docstring)."""
    parser = OneLineParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute chapters with a profile")
    run.add_argument("chapters", nargs="*", help="chapter numbers or stems (default: all)")
    run.add_argument("--profile", default="quick")
    run.add_argument("--out", type=output_path, default=None, help="output folder (default book/_generated)")
    run.add_argument("--record-times", action="store_true",
                     help=f"record each chapter's run time in {CHAPTER_TIMES.name} (the page states it)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                     help="override one parameter of the profile (a Python literal; repeatable), "
                          "e.g. --set n_truthfulqa=100")
    sub.add_parser("list", help="list chapters and profiles")
    notebooks = sub.add_parser("runnable", help="write chapters as notebooks that run outside a checkout (Binder, "
                                                "Colab, a course's JupyterHub), in a preview profile")
    notebooks.add_argument("chapters", nargs="*", help="chapter numbers or stems (default: all)")
    notebooks.add_argument("--out", type=output_path, required=True, help="folder for <chapter>.ipynb")
    notebooks.add_argument("--profile", default="quick", help="the profile their parameters cell selects")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.command == "list":
            print("chapters:", " ".join(p.stem for p in chapters()))
            print("profiles:", " ".join(profile_names()))
            return 0
        if args.command == "runnable":
            return write_runnables(args.chapters, args.out, args.profile)
        extra = parse_overrides(args.overrides)
        for selector in args.chapters or [p.stem for p in chapters()]:
            run_chapter(selector, args.profile, args.out, extra=extra, record_time=args.record_times)
        return 0

    return run_command(body, interrupted="interrupted: the chapter being executed is left incomplete in the output "
                                         "folder; rerun the same command to execute it")


if __name__ == "__main__":
    sys.exit(main())
