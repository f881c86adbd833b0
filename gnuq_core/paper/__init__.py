"""The paper's own numbers, read from one data file (``values.json``), never typed in prose.

Every cell of the paper's Table 1 (Pearson r and Spearman ρ of each estimate against HMC on
eight problems) and Table 2 (AUROC, mean ± std, six methods on two benchmarks), and the
statements around them, with the paper's table, row and column labels. Chapters and the
claims ledger read them through :func:`value`, :func:`cells` and :func:`statement`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

__all__ = ["SOURCE", "cells", "value", "statement"]

SOURCE = Path(__file__).with_name("values.json")


@functools.lru_cache(maxsize=1)
def _doc() -> dict[str, Any]:
    return json.loads(SOURCE.read_text(encoding="utf-8"))


def cells(table: str | None = None) -> list[dict[str, Any]]:
    """Every cell of ``table`` (``"1a"``, ``"1b"``, ``"1c"``, ``"2"``; a prefix such as ``"1"`` selects
    all of Table 1), each a dict with ``table``, ``row``, ``column``, ``statistic``, ``value``
    (and ``problem`` for Table 1, ``std`` for Table 2)."""
    return [dict(c) for c in _doc()["cells"] if table is None or c["table"].startswith(table)]


def value(table: str, row: str, column: str, statistic: str, *, problem: str | None = None) -> float | None:
    """The paper's value of one cell, or None where the paper reports none (a row it leaves out)."""
    for c in _doc()["cells"]:
        if c["table"].startswith(table) and c["row"] == row and c["statistic"] == statistic and (
                c["column"] == column if problem is None else c.get("problem") == problem):
            return float(c["value"])
    return None


def statement(key: str) -> dict[str, Any]:
    """One of the paper's statements around the tables (``where``, ``text``, ``values``)."""
    for s in _doc()["statements"]:
        if s["id"] == key:
            return dict(s)
    raise KeyError(f"no paper statement {key!r}; known: {', '.join(s['id'] for s in _doc()['statements'])}")
