"""Checks of the plain arguments a caller passes to gnuq's public functions.

Each returns the value it accepts or raises one `~gnuq_core.options.InputTypeError` (a wrong
type) or `ValueError` (a wrong value) whose message names the argument and the fix. The
estimators (`gnuq_core.estimators`) and the LM front door (`gnuq_core.lm.validate`, which
adds the checks of prompts, models and tokenizers) share them; nothing here needs torch.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from gnuq_core.options import InputTypeError

__all__ = ["flag", "choice", "real", "real_list", "kind_of", "short_repr"]


def kind_of(value: Any) -> str:
    """``"None"``, ``"an int"``, ``"a list"``: a value's type for a message."""
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def short_repr(text: Any, width: int = 24) -> str:
    """``repr(text)``, cut to ``width`` characters for a message."""
    r = repr(text)
    return r if len(r) <= width else r[:width - 4] + "...'"


def flag(value: Any, argument: str) -> bool:
    """``value`` if it is a bool (``"no"`` and ``0`` are not)."""
    if not isinstance(value, bool):
        raise InputTypeError(f"{argument}={short_repr(value)} is {kind_of(value)}: pass True or False")
    return value


def choice(value: Any, argument: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"unknown {argument} {value!r}; use one of {', '.join(map(repr, choices))}")
    return value


def real(value: Any, argument: str) -> float:
    """``value`` as a float: a real number (numpy and 0-d torch scalars included), not text or a bool."""
    if type(value) is float:
        return value
    if isinstance(value, (str, bytes, bool)) or value is None:
        raise InputTypeError(f"{argument}={short_repr(value)} is {kind_of(value)}: pass a number")
    if isinstance(value, numbers.Real):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        raise InputTypeError(f"{argument} is {kind_of(value)}, not a number: pass a float") from None


def real_list(value: Any, argument: str) -> list[float]:
    """``value`` as a list of floats (a list, tuple or 1-d array of real numbers)."""
    if type(value) is list and all(type(v) is float for v in value):
        return value
    if isinstance(value, (str, bytes, Mapping)) or value is None:
        raise InputTypeError(f"{argument} is {kind_of(value)}: pass a list of numbers")
    try:
        items = list(value)
    except TypeError:
        raise InputTypeError(f"{argument} is {kind_of(value)}: pass a list of numbers") from None
    return [real(v, f"{argument}[{i}]") for i, v in enumerate(items)]
