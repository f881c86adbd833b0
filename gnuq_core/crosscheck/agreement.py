"""Agreement rows: our numbers beside an independent implementation's, with a tolerance."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["COLUMNS", "compare", "frame", "display_columns"]

COLUMNS = ("quantity", "n", "ours", "theirs", "max_rel_error", "tolerance", "agrees")


def compare(quantity: str, ours: Any, theirs: Any, tolerance: float, *, floor: float = 0.0,
            scale: Any = None, **extra: Any) -> dict[str, Any]:
    """One agreement row: the largest relative error between ``ours`` and ``theirs``.

    Parameters
    ----------
    quantity : str
        What is compared (shown to readers).
    ours, theirs : float or array_like
        The same quantity from the project's code and from the independent one (same shape).
    tolerance : float
        Largest relative error that still counts as agreement.
    floor : float
        The error is ``|ours − theirs| / max(|theirs|, floor)``: a floor keeps values near
        zero (a smallest eigenvalue) from turning rounding into a large relative error.
    scale : float or array_like, optional
        Measure the error as ``|ours − theirs| / scale`` instead (e.g. in Monte-Carlo
        standard errors of ``theirs``); say so in ``quantity``.
    **extra
        More columns (the case, the backend).

    Returns
    -------
    dict
        ``quantity``, ``n`` (entries compared), ``ours`` and ``theirs`` at the entry where
        they differ most, ``max_rel_error``, ``tolerance``, ``agrees``, then ``extra``.
    """
    a = np.atleast_1d(np.asarray(ours, dtype=np.float64))
    b = np.atleast_1d(np.asarray(theirs, dtype=np.float64))
    if a.shape != b.shape:
        raise ValueError(f"{quantity}: ours has shape {a.shape} and theirs {b.shape}; compare the same entries")
    if a.size == 0:
        raise ValueError(f"{quantity}: nothing to compare (empty arrays)")
    finite = np.isfinite(a) & np.isfinite(b)
    err = np.full(a.shape, np.inf)
    denom = np.maximum(np.abs(b), floor) if scale is None else np.broadcast_to(np.asarray(scale, np.float64), a.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        err[finite] = np.abs(a[finite] - b[finite]) / denom[finite]
    err[finite & (a == b)] = 0.0  # exact agreement, also 0 == 0
    err[~np.isfinite(a) & (a == b)] = 0.0  # the same infinity (never for NaN)
    i = int(np.argmax(err))
    worst = float(err[i])
    return {"quantity": quantity, "n": int(a.size), "ours": float(a[i]), "theirs": float(b[i]),
            "max_rel_error": worst, "tolerance": float(tolerance), "agrees": bool(worst <= tolerance), **extra}


def frame(rows: list[dict[str, Any]]) -> Any:
    """The rows as a ``pandas.DataFrame`` (columns in :data:`COLUMNS` order, extras after)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    first = [c for c in COLUMNS if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def display_columns(first: dict[str, Any] | None = None) -> dict[str, Any]:
    """Column specs for :func:`gnuq_core.repro.display.table` (``first``: extra columns shown first)."""
    def yes_no(v: Any) -> str:
        return "yes" if bool(v) else "NO"

    return {**(first or {}), "quantity": "quantity", "n": ("entries", "d"), "ours": ("ours (worst entry)", ".6g"),
            "theirs": ("theirs (same entry)", ".6g"), "max_rel_error": ("max rel. error", ".1e"),
            "tolerance": ("tolerance", ".0e"), "agrees": ("agrees", yes_no)}
