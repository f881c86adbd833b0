"""Run chapter notebooks: Jupytext source → ipynb → papermill with a profile's parameters.

Profiles (``notebooks/profiles/<name>.yml``) map a chapter's notebook stem to the
parameters it should run with::

    01_derivation:
      n_mc: 2000

A chapter whose computation lives in `gnuq_core.chapters` (`gnuq_core.chapters.MODULES`)
declares its parameters once, in its module's ``Params`` dataclass (defaults: the paper
edition): the runner creates ``Params`` from the profile and ``--set`` values (which
checks every value) and injects only ``profile`` and ``overrides`` into the notebook,
which resolves the same ``Params``. For the chapters still computing in their notebook,
every parameter in a profile must be declared, with a value of the same type, in the
chapter's ``parameters`` cell (papermill only warns about unknown ones, we refuse them),
and values must lie in their range (`PARAMETER_RULES`). Either way the checks run
before the notebook does, so ``--set n_mc=-5`` is one line, not a traceback from deep
inside a chapter, and nothing in the output folder changes before they pass.

Command line::

    gnuq chapter run 01 --profile smoke [--out DIR]     # or: python -m gnuq_core.repro.chapters run ...
    gnuq chapter list
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from gnuq_core.chapters import module_for
from gnuq_core.chapters.base import ChapterError
from gnuq_core.options import (MAX_THREADS, OPTIONS, OneLineParser, Rule, finite_problem, output_path,
                               run_command, size_problem)
from gnuq_core.repro.files import DamagedFile, json_type, read_yaml_mapping
from gnuq_core.repro.paths import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
PROFILES = NOTEBOOKS / "profiles"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}




def chapters() -> list[Path]:
    """All chapter sources ``notebooks/NN_name.py``, in order."""
    return sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.py"))


def find_chapter(selector: str) -> Path:
    """The chapter whose number or stem is ``selector`` (``"01"``, ``"01_derivation"``)."""
    matches = [p for p in chapters() if p.stem == selector or p.stem.split("_")[0] == selector]
    if len(matches) != 1:
        known = ", ".join(p.stem for p in chapters())
        raise ChapterError(f"no chapter {selector!r}; known chapters: {known}")
    return matches[0]


def profile_names() -> list[str]:
    """Names of the available profiles."""
    return sorted(p.stem for p in PROFILES.glob("*.yml"))


def load_profile(name: str) -> dict[str, dict[str, Any]]:
    """The parameters of profile ``name``, per chapter stem."""
    path = PROFILES / f"{name}.yml"
    if not path.exists():
        raise ChapterError(f"unknown profile {name!r}; available profiles: {', '.join(profile_names())} "
                           f"(files in {PROFILES.relative_to(REPO_ROOT)}/)")
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    fix = f"fix {shown} (see the other profiles beside it)"
    try:
        data = read_yaml_mapping(path, what="a profile", fix=fix)
    except DamagedFile as err:
        raise ChapterError(str(err)) from None
    for stem, values in data.items():
        if not isinstance(values, dict):
            raise ChapterError(f"{path}: the entry {stem!r} must map parameter names to values, not be "
                               f"{json_type(values)}: {fix}")
    stems = {p.stem for p in chapters()}
    unknown = sorted(str(k) for k in set(data) - stems)
    if unknown:
        raise ChapterError(f"profile {name!r} names chapters that do not exist: {', '.join(unknown)}; "
                           f"known: {', '.join(sorted(stems))}")
    return data


def to_ipynb(source: Path, target: Path) -> Path:
    """Convert a Jupytext percent-format ``source`` to an unpaired ipynb at ``target``."""
    import jupytext

    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata.pop("jupytext", None)
    target.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(nb, target, fmt="ipynb")
    return target


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


def _same_type(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


_COUNT = Rule(minimum=1)
_THREADS = Rule(minimum=0, maximum=MAX_THREADS, why_maximum="4 per core; 0: torch's default")
_SIZES = Rule(minimum=1, nonempty=True)

# Accepted values per parameter: "*" for every chapter, then per chapter (which wins).
# A parameter without a rule is only type-checked.
PARAMETER_RULES: dict[str, dict[str, Rule]] = {
    "*": {"seed": OPTIONS["seed"],
          "max_new_tokens": OPTIONS["max_new_tokens"], "n_samples": Rule(minimum=1, maximum=OPTIONS["n_samples"].maximum),
          "models": Rule(nonempty=True)},
    "07_efficiency": {"n_questions": _COUNT, "repeats": _COUNT, "clusterer": Rule(choices=("embedding", "exact")),
                      "answer_lengths": _SIZES, "prompt_lengths": _SIZES, "sweep_repeats": _COUNT,
                      "memory_repeats": _COUNT, "threads": _THREADS},
}


def parameter_rule(chapter: str, name: str) -> Rule | None:
    """The `Rule` of parameter ``name`` in ``chapter`` (its own, else the shared one), or None."""
    return PARAMETER_RULES.get(chapter, {}).get(name) or PARAMETER_RULES["*"].get(name)


def check_values(chapter: str, params: dict[str, Any]) -> None:
    """Raise `ChapterError` (one line) for the first parameter whose value its `Rule` refuses."""
    for name, value in params.items():
        rule = parameter_rule(chapter, name)
        why = rule.problem(value) if rule is not None else finite_problem(value)  # every number finite
        if why is None and (rule is None or rule.maximum is None):
            why = size_problem(value)  # and every whole number below a ceiling, whatever its own rule
        if why is not None:
            raise ChapterError(f"{chapter}: parameter {name}={value!r} {why}")


def resolve_parameters(chapter: str, defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Defaults updated by ``overrides``; unknown names, wrong types and values out of range
    (`PARAMETER_RULES`) are errors."""
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        raise ChapterError(f"{chapter}: unknown parameter(s) {', '.join(unknown)}; the parameters cell "
                           f"declares: {', '.join(defaults)}. Fix the profile or declare them in the notebook.")
    for name, value in overrides.items():
        if not _same_type(defaults[name], value):
            raise ChapterError(f"{chapter}: parameter {name}={value!r} is a {type(value).__name__}, but its "
                               f"default {defaults[name]!r} is a {type(defaults[name]).__name__}")
    params = {**defaults, **overrides}
    check_values(chapter, params)
    return params


def chapter_parameters(selector: str, profile: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A chapter's parameters as the runner injects them: the notebook's defaults, updated by
    ``profile`` (``notebooks/profiles/<profile>.yml``), then by ``overrides`` (same checks)."""
    source = find_chapter(selector)
    module = module_for(source.stem)
    if module is not None:
        return {**module.Params.resolve(load_profile(profile).get(source.stem, {}), overrides).to_dict(),
                "profile": profile}
    with tempfile.TemporaryDirectory() as tmp:
        defaults = declared_parameters(to_ipynb(source, Path(tmp) / f"{source.stem}.ipynb"))
    merged = {**load_profile(profile).get(source.stem, {}), **(overrides or {}), "profile": profile}
    return resolve_parameters(source.stem, defaults, merged)


def run_chapter(selector: str, profile: str = "quick", out_dir: Path | None = None,
                extra: dict[str, Any] | None = None) -> Path:
    """Execute one chapter with a profile's parameters; return the executed notebook.

    ``extra`` overrides the profile (same checks). The executed notebook, and the side
    files the chapter writes (claims, provenance), land in ``out_dir`` (default
    ``book/_generated``).
    """
    import papermill

    from gnuq_core.repro import claims

    source = find_chapter(selector)
    overrides = {**load_profile(profile).get(source.stem, {}), **(extra or {})}
    if "profile" in overrides:
        raise ChapterError(f"{source.stem}: 'profile' is set by the runner, not by a profile file")
    out_dir = Path(out_dir or REPO_ROOT / "book" / "_generated").resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise ChapterError(f"--out {out_dir} is a file: give a folder for the executed notebooks")
    module = module_for(source.stem)
    with tempfile.TemporaryDirectory() as scratch:  # check everything before touching out_dir
        draft = to_ipynb(source, Path(scratch) / f"{source.stem}.ipynb")
        if module is not None:  # the chapter's Params checks the values; the notebook resolves the same ones
            declared = declared_parameters(draft)
            if set(declared) != {"profile", "overrides"}:
                raise ChapterError(f"{source.name}: its parameters cell must declare only `profile` and `overrides` "
                                   f"(the parameters are {module.__name__}.Params); it declares {', '.join(declared)}")
            resolved = module.Params.resolve(load_profile(profile).get(source.stem, {}), extra)
            params = {"profile": profile, "overrides": dict(extra or {})}
            recorded = {**resolved.to_dict(), "profile": profile}
        else:
            params = resolve_parameters(source.stem, declared_parameters(draft), {**overrides, "profile": profile})
            recorded = params
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ChapterError(f"--out {out_dir}: cannot create the folder ({err.strerror})") from None
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
    papermill.execute_notebook(str(target), str(target), parameters=params, kernel_name="python3",
                               cwd=str(REPO_ROOT), progress_bar=False, log_output=False)
    print(f"[{source.stem}] done in {time.time() - started:.1f} s", flush=True)
    return target


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


def main(argv: list[str] | None = None, prog: str = "gnuq chapter") -> int:
    """Command-line entry point (``gnuq chapter``; see the module docstring)."""
    parser = OneLineParser(prog=prog, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute chapters with a profile")
    run.add_argument("chapters", nargs="*", help="chapter numbers or stems (default: all)")
    run.add_argument("--profile", default="quick")
    run.add_argument("--out", type=output_path, default=None, help="output folder (default book/_generated)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                     help="override one parameter of the profile (a Python literal; repeatable), "
                          "e.g. --set n_truthfulqa=100")
    sub.add_parser("list", help="list chapters and profiles")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.command == "list":
            print("chapters:", " ".join(p.stem for p in chapters()))
            print("profiles:", " ".join(profile_names()))
            return 0
        extra = parse_overrides(args.overrides)
        for selector in args.chapters or [p.stem for p in chapters()]:
            run_chapter(selector, args.profile, args.out, extra=extra)
        return 0

    return run_command(body, interrupted="interrupted: the chapter being executed is left incomplete in the output "
                                         "folder; rerun the same command to execute it")


if __name__ == "__main__":
    sys.exit(main())
