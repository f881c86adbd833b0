"""The thread counts a stored result can depend on, and recomputing under them.

A sum over threads adds in another order, and an optimiser's path (an L-BFGS fit) can then end
elsewhere. Measured (2026-12-05): a width-64 MAP fit made by a one-thread ``torchrun`` rank is
reproduced to every digit under 1 BLAS thread, not under 2. So the store stamps each item with
the BLAS thread count it was made under (`blas_threads`), and its check on the platform that
made an item recomputes under that count (`blas_thread_variants`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["blas_threads", "blas_thread_variants"]


def blas_threads() -> int:
    """The BLAS thread count of this process (OpenBLAS/MKL under NumPy and SciPy; 1 if none is loaded)."""
    from threadpoolctl import threadpool_info

    return max((int(pool["num_threads"]) for pool in threadpool_info() if pool.get("user_api") == "blas"), default=1)


def blas_thread_variants(compute: Callable[[str], dict[str, Any]], item: str,
                         stored: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """``compute(item)`` under the BLAS thread count(s) ``stored`` may have been made with: its
    stamped count (``_made.blas_threads``), or for an item made before the stamp this process's
    count, then 1, then 2 (a lazy iterator: the check stops at the first that agrees)."""
    from threadpoolctl import threadpool_limits

    made = (stored.get("_made") or {}).get("blas_threads")
    for threads in [made] if made else dict.fromkeys([blas_threads(), 1, 2]):
        with threadpool_limits(limits=int(threads), user_api="blas"):
            fresh = compute(item)
        yield fresh
