"""A content-addressed disk cache for heavy results (MCMC samples, LLM scores).

Results are keyed by a hash of their full configuration, so changing any parameter
recomputes, and an unchanged one is read back.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path
from typing import Any, Callable, TypeVar

from gnuq_core.repro.paths import cache_dir

T = TypeVar("T")


def config_key(config: dict[str, Any]) -> str:
    """Stable 16-hex-digit hash of a JSON-serialisable configuration, the same on every machine
    (floats rounded to 12 significant digits first: `gnuq_core.store.keys.config_key`)."""
    # Here: importing gnuq_core.store imports this module (a cycle).
    from gnuq_core.store.keys import config_key as canonical_key

    return canonical_key(config)


def cached(kind: str, config: dict[str, Any], compute: Callable[[], T], *, root: Path | None = None) -> T:
    """Return ``compute()``, stored under ``<root>/<kind>/<key>.pkl`` keyed by ``config``.

    Writes go through a temporary file and an atomic rename, so a killed run leaves no
    half-written entry. The configuration is stored beside the result for inspection. An
    entry that no longer loads (pickled by code that has since moved or changed, e.g. a
    class from a module that was renamed) is recomputed with a warning, not an error.
    """
    folder = (root or cache_dir()) / kind
    path = folder / f"{config_key(config)}.pkl"
    if path.exists():
        try:
            with path.open("rb") as f:
                return pickle.load(f)["result"]
        except (ModuleNotFoundError, AttributeError, ImportError, pickle.UnpicklingError, EOFError) as e:
            warnings.warn(f"cache entry {path} does not load with this code ({type(e).__name__}: {e}); "
                          "recomputing it", stacklevel=2)
    result = compute()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with tmp.open("wb") as f:
        pickle.dump({"config": config, "result": result}, f)
    os.replace(tmp, path)
    return result
