"""A chapter's parameters and results: one frozen dataclass per chapter, checked on creation.

Each chapter module declares ``Params(ChapterParams)`` whose defaults are the paper
edition's settings, and in ``PREVIEWS`` the few values a preview profile (``quick``,
``smoke``) changes. `ChapterParams.resolve` applies a profile and the command line's ``--set`` values,
and creating the dataclass checks every value: its type (that of the default), its
`~gnuq_core.options.Rule` (declared with `param`), that every number is finite and every
whole number at most `~gnuq_core.options.MAX_SIZE` unless its rule sets a maximum. The
chapter runner calls it before a notebook runs, so a bad value is one line, not a
traceback from deep inside a chapter.

`Result` holds what a chapter's ``run`` computed: ``values`` (the numbers and words the
page glues, by their glue name) and ``data`` (the arrays its figures draw).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from gnuq_core.options import OPTIONS, Rule, finite_problem, size_problem
from gnuq_core.repro.display import BookFigure, use_book_style
from gnuq_core.repro.fingerprint import describe as describe_fingerprint
from gnuq_core.repro.glued import glue
from gnuq_core.repro.profiles import ChapterError, check_profile
from gnuq_core.repro.provenance import Provenance
from gnuq_core.store import open_store

__all__ = ["ChapterError", "ChapterParams", "Result", "param", "start", "quiet_kernel", "glue", "glue_values",
           "glue_figure", "profile_values",
           "COUNT", "NONNEG"]

COUNT = OPTIONS["size"]
"""A count or size of a chapter: a whole number from 1 to `gnuq_core.options.MAX_SIZE`."""
NONNEG = Rule(minimum=0)
"""A non-negative number (a precision, a noise level)."""

P = TypeVar("P", bound="ChapterParams")


def param(default: Any, rule: Rule | None = None, doc: str = "") -> Any:
    """A chapter parameter: its paper-edition ``default``, the `Rule` its values obey, a
    one-line ``doc`` (lists get a fresh copy per instance)."""
    meta = {"rule": rule, "doc": doc}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc]


def _kind(value: Any) -> str:
    """``"a whole number"``, ``"a number"``, ``"text"``, ``"a list"``: a value's type in words for a sentence."""
    name = {"int": "whole number", "float": "number", "str": "text", "bool": "true or false"}.get(
        type(value).__name__, type(value).__name__)
    if name in ("text", "true or false"):
        return name
    return ("an " if name[0] in "aeiou" else "a ") + name


def _same_type(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


@dataclass(frozen=True)
class ChapterParams:
    """Base class of the chapters' ``Params``: validation on creation, profiles, a plain dict.

    Subclasses set ``CHAPTER`` (the notebook's stem, e.g. ``"01_derivation"``) and declare
    their fields with `param`.
    """

    CHAPTER: ClassVar[str] = ""
    PREVIEWS: ClassVar[dict[str, dict[str, Any]]] = {}
    """Each preview profile's values where they differ from the defaults (the paper edition):
    ``{"quick": {...}, "smoke": {...}}`` (`gnuq_core.repro.profiles.PROFILES`)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value, default = getattr(self, f.name), _default(f)
            if not _same_type(default, value):
                raise ChapterError(f"{self.CHAPTER}: parameter {f.name}={value!r} is {_kind(value)}, but its "
                                   f"default {default!r} is {_kind(default)}: give {_kind(default)}")
            if isinstance(default, float) and isinstance(value, int):
                object.__setattr__(self, f.name, float(value))  # 5 where 5.0 is meant
            rule = f.metadata.get("rule")
            why = rule.problem(value) if rule is not None else finite_problem(value)
            if why is None and (rule is None or rule.maximum is None):
                why = size_problem(value)  # every whole number has a ceiling, whatever its own rule
            if why is not None:
                raise ChapterError(f"{self.CHAPTER}: parameter {f.name}={value!r} {why}")

    @classmethod
    def names(cls) -> list[str]:
        """The declared parameter names, in order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def resolve(cls: type[P], profile: Mapping[str, Any] | None = None,
                overrides: Mapping[str, Any] | None = None) -> P:
        """The parameters of a build: the defaults, then ``profile`` (this chapter's values of a
        preview profile), then ``overrides``; an unknown name is a `ChapterError`."""
        values = {**(profile or {}), **(overrides or {})}
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise ChapterError(f"{cls.CHAPTER}: unknown parameter(s) {', '.join(unknown)}; the chapter "
                                 f"declares: {', '.join(cls.names())}")
        return cls(**values)

    @classmethod
    def for_profile(cls: type[P], profile: str, overrides: Mapping[str, Any] | None = None) -> P:
        """`resolve` with this chapter's values of profile ``profile`` (`PREVIEWS`; ``full``: none)."""
        return cls.resolve(cls.PREVIEWS.get(check_profile(profile), {}), overrides)

    def to_dict(self) -> dict[str, Any]:
        """The parameters as plain JSON values (what the provenance table shows)."""
        return dataclasses.asdict(self)

    def docs(self) -> dict[str, str]:
        """Each parameter's one-line description."""
        return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(self)}

    @classmethod
    def value_words(cls, values: Mapping[str, Any]) -> dict[str, str]:
        """How a page shows the parameters whose 0 stands for something else: ``n_triviaqa = 0``
        reads "all (2933)", ``threads = 0`` "0 (torch's default)", from the parameter's doc
        ("0 means all 2933", "(0: torch's default)")."""
        words = {}
        for f in dataclasses.fields(cls):
            if values.get(f.name) != 0 or isinstance(values.get(f.name), bool):
                continue
            m = re.search(r"\(0: ([^)]+)\)|\b0 means ([^;,)]+)", f.metadata.get("doc", ""))
            if m:
                meaning = (m.group(1) or m.group(2)).strip()
                count = re.fullmatch(r"all ([\d,]+)", meaning)
                words[f.name] = (f"all ({int(count.group(1).replace(',', '')):,})" if count else
                                 "all" if meaning == "all" else f"0 ({meaning})")
        return words


@dataclass
class Result:
    """What a chapter's ``run`` computed.

    Attributes
    ----------
    values : dict
        The numbers and words the page shows, by the name the page glues them under.
    tables : dict
        The tables the page shows (`gnuq_core.repro.display.table` objects), by name.
    data : dict
        Arrays and objects the chapter's figure functions draw (not glued).
    """

    values: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def show(self, *names: str, optional: Sequence[str] = ()) -> None:
        """Display the tables ``names`` in that order (each must exist), then those of ``optional``
        this build made (a table made only where its data allow it; the page's text says when)."""
        from IPython.display import display

        missing = [n for n in names if n not in self.tables]
        if missing:
            raise KeyError(f"the chapter made no table {missing[0]!r}; it made {', '.join(sorted(self.tables))}")
        display(*(self.tables[n] for n in names), *(self.tables[n] for n in optional if n in self.tables))


def profile_values(params: ChapterParams, profiles: tuple[str, ...] = ("smoke", "quick")) -> dict[str, Any]:
    """``{"smoke_n_mc": 400, "quick_n_mc": 2000, …}``: every parameter of ``params``'s chapter as the
    preview profiles set it, so that a "try it" exercise quotes the values of the profile it asks the
    reader to run (never a number typed into the text). Lists are shown as text."""
    cls = type(params)
    out: dict[str, Any] = {}
    for profile in profiles:
        resolved = cls.for_profile(profile)
        for name in cls.names():
            value = getattr(resolved, name)
            out[f"{profile}_{name}"] = str(value) if isinstance(value, (list, tuple, dict)) else value
    return out


def glue_values(result: Result, params: ChapterParams | None = None) -> None:
    """Glue every value of ``result`` (`gnuq_core.repro.glued.glue`), and with ``params`` the
    preview profiles' values of the chapter's parameters (`profile_values`)."""
    extra = profile_values(params) if params is not None else {}
    for name, value in {**extra, **result.values}.items():
        glue(name, value)


def glue_figure(name: str, fig: Any) -> None:
    """Glue ``fig`` under ``name`` for a ``{glue:figure}`` block and close it (so it is not
    shown a second time where the cell ran).

    Glued as a `~gnuq_core.repro.display.BookFigure`: the column-wide PNG, a narrow
    rendering that the book serves to phones (`gnuq_core.repro.picture`), and the function
    that drew it, read from the calling line (``glue_figure("fig_roc", qa.figure_roc(...))``
    gives ``gnuq_core.chapters.qa.figure_roc``), which the book prints under the figure."""
    import inspect

    import matplotlib.pyplot as plt

    caller = inspect.currentframe().f_back  # type: ignore[union-attr]
    line = (inspect.getframeinfo(caller).code_context or [""])[0] if caller else ""
    drawn = re.search(r"(\w+)\.(figure_\w+)\(", line)
    module = getattr(caller.f_globals.get(drawn.group(1)), "__name__", "") if caller and drawn else ""
    glue(name, BookFigure(fig, made_by=f"{module}.{drawn.group(2)}" if module else ""))
    plt.close(fig)


def store_words(store: Any, what: str, kinds: Sequence[str], extra: str = "") -> str:
    """Markdown (a paragraph, a bullet per check, the platforms): where ``what`` came from in
    this build and how it was checked, from what ``store`` (`gnuq_core.store.Store`) read,
    computed and checked of ``kinds`` (the page's statement of its stored results).
    ``extra`` ends the paragraph."""
    reads = [r for r in store.reads if r.kind in kinds]
    folders = ", ".join(f"`{f}/`" for f in sorted({Path(r.file).parent.name for r in reads})) or ", ".join(kinds)
    stored = sum(r.stored for r in reads)
    computed = sum(r.computed for r in reads)
    if not store.check:
        return (f"{what} come from {store.label} ({folders}): {stored:,} items read back, {computed:,} computed in "
                "this build. A preview does not check its cache against recomputation; the paper edition reads "
                "the repository's results store and recomputes a random sample from scratch, under each kind's "
                "reproducibility contract.")
    text = (f"{what} are read from {store.label} ({folders}; each file keyed by the run's configuration and the "
            f"version of its kind; every number checked finite on reading): {stored:,} items read")
    text += (f", and {computed:,} computed in this build because they were missing." if computed else ".")
    checks = store.checks(kinds)
    if not checks:
        return text + " No stored item was recomputed from scratch in this build: the store was not checked."
    rules = " ".join(dict.fromkeys(r.rule for r in reads if r.rule and r.checks))
    how = "each" if store.verify_all else "drawn at random (with a fixed seed)," if not rules else ""
    text += (f" To check the store, {len(checks)} stored item{'s were' if len(checks) != 1 else ' was'} "
             f"{how + ' ' if how else ''}recomputed from scratch and compared under its kind's reproducibility "
             f"contract.{' ' + rules if rules else ''}"
             f"{' ' + extra if extra else ''}\n\n")
    for c in checks[:40]:
        where = ("the platform that made it" if c.same_platform else
                 f"another platform than the one that made it (`{c.made_on or 'not recorded'}`)")
        top = f" (at `{c.worst.path}`)" if c.worst is not None and c.largest > 0 else ""
        text += (f"- **{c.kind}** `{c.item}`, checked on {where}, {c.contract} contract: {c.rule}. Largest "
                 f"deviation {c.largest:.2g} of what the contract allows{top}, over {c.compared:,} compared "
                 "values.\n")
    if len(checks) > 40:
        text += f"- … and {len(checks) - 40:,} more, the largest deviation {max(c.largest for c in checks):.2g}.\n"
    fids = sorted({c.checked_on for c in checks} | {c.made_on for c in checks if c.made_on})
    prints = store.fingerprints() | {store.fingerprint_id: store.fingerprint}
    text += "\nPlatforms: " + "; ".join(
        f"`{fid}`{' (this build)' if fid == store.fingerprint_id else ''} = "
        f"{describe_fingerprint(prints[fid]) if fid in prints else 'not registered'}" for fid in fids) + "."
    return text


QUIET_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
                     "TQDM_DISABLE": "1"}
"""Set (where the caller has not) in a chapter's kernel: no hub access, no progress bars (they
would be stderr on the page; the runner reports progress per chapter), no load reports."""

QUIET_WARNINGS: tuple[tuple[str, str, type[Warning]], ...] = (
    (".*os.fork.*", "JAX in a papermill kernel: it warns about fork, which the kernel never does", RuntimeWarning),
    ("", "deprecation notes of transformers', ArviZ's and JAX's internals", FutureWarning),
    ("", "NumPyro's sequential chains on one CPU device, transformers' and torch's load notes", UserWarning),
    (".*IProgress not found.*", "tqdm without ipywidgets (its bars are off)", Warning),
    (".*gguf.*", "GGUF de-quantisation notes on a cold model cache", Warning),
    (".*The BCa confidence interval cannot be calculated.*",
     "a degenerate bootstrap of a constant estimate, which the chapter reports itself", Warning),
    (".*is constant; the correlation coefficient is not defined.*",
     "ρ of a constant column is NaN, and the table shows it as such", Warning),
)
"""The warnings a chapter's kernel does not print, each with why it says nothing about a number
on the page: ``(message pattern, why, category)``. Every other warning shows on the page, where
the book's build refuses it as error output."""


def quiet_kernel() -> None:
    """The one set-up of a chapter's kernel: `QUIET_ENVIRONMENT` and `QUIET_WARNINGS`, and the
    transformers logger at errors only (a runnable notebook gets the same as the book)."""
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    for message, _why, category in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    logging.getLogger("transformers").setLevel(logging.ERROR)


def start(module: Any, profile: str, overrides: Mapping[str, Any] | None = None, *,
          store: bool = True) -> tuple[Any, Any, Provenance]:
    """A chapter notebook's set-up in one call: ``params, store, prov = start(module, profile, overrides)``.

    Quiets the kernel (`quiet_kernel`), sets the book's figure style, starts the provenance
    record, opens the store of ``profile`` (the results store in the paper edition, the local
    cache in a preview; None with ``store=False``) and resolves ``module.Params`` from the
    profile and ``overrides`` (a bad value is a `ChapterError`)."""
    quiet_kernel()
    use_book_style()
    overrides = dict(overrides or {})
    params = module.Params.for_profile(profile, overrides)
    prov = Provenance.start(profile=profile, **overrides)  # the runner adds every resolved parameter
    return params, open_store(profile) if store else None, prov
