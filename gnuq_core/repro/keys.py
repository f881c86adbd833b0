"""JSON values of results, and canonical configuration keys: the same configuration gives the
same key on every machine.

A store file is named by a hash of its configuration. Configurations hold floats that are
computed, not typed (``np.logspace(-5, 0, 11)`` gives ``1e-05`` on one machine and
``9.999999999999999e-06`` on another), so a hash of their raw ``repr`` would change with
the last bit. Before hashing, every float is rounded to :data:`KEY_DIGITS` significant
digits (far below any parameter a person chooses, far above float64 noise), ``-0.0``
becomes ``0.0``, tuples become lists and numpy scalars Python numbers.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Iterable

__all__ = ["KEY_DIGITS", "canonical", "config_key", "plain", "rounded", "without"]

KEY_DIGITS = 12
"""Significant digits a float keeps in a key (two configurations closer than that are the same)."""


def canonical(obj: Any) -> Any:
    """``obj`` as plain JSON values with every float rounded to :data:`KEY_DIGITS` significant digits.

    Non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"``; numpy scalars and
    arrays become Python numbers and lists; dict keys become strings.
    """
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
        value = float(f"{obj:.{KEY_DIGITS}g}")
        return 0.0 if value == 0 else value
    if isinstance(obj, dict):
        return {str(k): canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canonical(v) for v in obj]
    item = getattr(obj, "item", None)  # numpy scalars
    if callable(item) and getattr(obj, "shape", None) == ():
        return canonical(item())
    tolist = getattr(obj, "tolist", None)  # numpy arrays
    if callable(tolist):
        return canonical(tolist())
    return str(obj)


def config_key(config: dict[str, Any]) -> str:
    """Stable 16-hex-digit hash of a configuration, after :func:`canonical`."""
    text = json.dumps(canonical(config), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rounded(obj: Any, digits: int) -> Any:
    """``obj`` with every float rounded to ``digits`` significant digits and NaN/inf as ``None``
    (store files are strict JSON)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}") if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj


def plain(obj: Any) -> Any:
    """``obj`` as a store file holds it: numpy arrays and scalars as lists and Python numbers,
    NaN and inf as ``None``, tuples as lists, dict keys as strings (nothing rounded)."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, bytes, bool, int)) or obj is None:
        return obj
    tolist = getattr(obj, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return plain(tolist())
    return str(obj)


def without(obj: Any, keys: Iterable[str]) -> Any:
    """``obj`` without the dict entries named ``keys``, at every level."""
    keys = set(keys)
    if isinstance(obj, dict):
        return {k: without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [without(v, keys) for v in obj]
    return obj
