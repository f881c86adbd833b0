"""Chapter 03's expensive results, item by item, through the results store.

Three kinds of stored items (``results/<kind>/<key>.jsonl``, see
:mod:`gnuq_core.repro.results_store`):

- ``hessian_exact``: one item per width, ``"width{w}"``: the exact Hessian and GGN spectra
  and the damped-vs-isotropic comparison of one small MLP (:func:`damping.exact_case`).
- ``hessian_slq_mlp``: the large MLP, one item per SLQ probe (``"hessian/probe{k}"``,
  ``"ggn/probe{k}"``: its Ritz values and weights) and per query point (``"query{j}"``,
  ``j`` its index in the query grid: the exact, Lanczos and isotropic quadratic forms).
- ``hessian_slq_lm``: the LM block, one item per SLQ probe (``"probe{k}"``).

Small items make the build's from-scratch check cheap: re-checking one probe costs one
training run (MLP) or one model load (LM) and ``m`` Hessian-vector products, not the
whole spectrum. A probe recomputed alone gives the numbers of the full run
(:func:`gnuq_core.isotropy.spectra.slq_probe`). Missing items are read from a whole run
in the local cache (:func:`gnuq_core.repro.cache.cached`) when it has one, and otherwise
computed one by one and appended as they come (one training run or model load per
build), so a killed run resumes; the check always recomputes from scratch.

Without the store (``use_store=False``: the quick and smoke profiles) the same functions
return the same structures from the local cache alone, so nothing is written under
``results/`` by a preview build.

The numbers of every item come from the modules in :data:`STORE_CODE` (this one included:
it assembles the per-item recomputation); a change to any of them starts new store files.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

import numpy as np

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy import damping
from gnuq_core.isotropy import ggn_laplace as curvature
from gnuq_core.isotropy import lm_hessian
from gnuq_core.isotropy import proxy
from gnuq_core.isotropy import spectra
from gnuq_core.isotropy.damped import damped_quadratic_form
from gnuq_core.repro import results_store
from gnuq_core.repro.cache import cached, config_key
from gnuq_core.repro.paths import cache_dir
from gnuq_core.stats import spearman_pair

__all__ = ["STORE_CODE", "TOLERANCE", "exact_cases", "large_mlp", "lm_block", "lanczos_prefix", "query_indices"]

# Sources whose content defines the code version of chapter 03's stored items (the import
# closure of this module, infrastructure excluded; tests/repro/test_store_code.py checks it).
STORE_CODE = [
    "gnuq_core.isotropy.stored", "gnuq_core.isotropy.damping", "gnuq_core.isotropy.spectra",
    "gnuq_core.isotropy.lm_hessian", "gnuq_core.isotropy.classifier", "gnuq_core.isotropy.ggn_laplace",
    "gnuq_core.isotropy.proxy", "gnuq_core.isotropy.damped", "gnuq_core.isotropy.mlp", "gnuq_core.isotropy.train",
    "gnuq_core.stats", "gnuq_core.lm.models", "gnuq_core.qa.data",
]

# (rtol, atol) of the from-scratch check per kind. Recomputing on the same machine gives
# the same bits; ``atol`` covers eigenvalues and Ritz values at float32 noise level (the
# bulk far below the damping), whose relative error is meaningless.
TOLERANCE = {"hessian_exact": (1e-4, 1e-6), "hessian_slq_mlp": (1e-4, 1e-6), "hessian_slq_lm": (1e-4, 1e-5)}


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


def _items(kind: str, config: dict[str, Any], ids: Sequence[str], compute: Callable[[str], dict[str, Any]],
           recompute: Callable[[str], dict[str, Any]], use_store: bool, verify: int, progress: str,
           pool: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """id -> record, through the store (``use_store``) or straight from ``compute``.

    With the store, missing items are computed first; then ``verify`` items drawn at random
    (fixed seed) from ``pool`` (default: all ``ids``) are recomputed from scratch and compared.
    """
    if not use_store:
        return {i: _plain(compute(i)) for i in ids}
    rtol, atol = TOLERANCE[kind]
    kw = dict(recompute=lambda i: _plain(recompute(i)), code_files=STORE_CODE, rtol=rtol, atol=atol)
    key = {**config, "version": 1}
    recs = results_store.run_stored(kind, key, list(ids), lambda i: _plain(compute(i)), verify=0,
                                    progress=progress, **kw)
    if verify:  # everything is stored now: this call only reads and checks
        results_store.run_stored(kind, key, list(pool if pool is not None else ids), lambda i: _plain(compute(i)),
                                 verify=verify, **kw)
    return {r["id"]: r for r in recs}


# ------------------------------------------------------------------ exact spectra, small MLPs


def exact_cases(widths: Sequence[int], *, seed: int, n_train: int, steps: int, weight_decay: float,
                dampings: Sequence[float], n_grid: int, use_store: bool = False, verify: int = 1,
                verify_max_width: int | None = None) -> list[dict[str, Any]]:
    """:func:`damping.exact_case` per width (kind ``hessian_exact``), arrays as numpy arrays.

    ``verify`` stored widths, drawn at random with a fixed seed among those up to
    ``verify_max_width`` (default: all), are recomputed from scratch. An exact spectrum
    costs O(P³) with P ≈ w² parameters: width 96 takes minutes, width 64 a tenth of that.
    """
    cfg = dict(n_train=n_train, steps=steps, weight_decay=weight_decay, dampings=[float(d) for d in dampings],
               n_grid=n_grid)
    by_id = {f"width{w}": w for w in widths}

    def fresh(i: str) -> dict[str, Any]:
        return damping.exact_case(by_id[i], seed=seed, **cfg)

    def compute(i: str) -> dict[str, Any]:
        return cached("spectra_exact", {"width": by_id[i], "seed": seed, **cfg, "v": 1}, lambda: fresh(i))

    pool = [i for i, w in by_id.items() if verify_max_width is None or w <= verify_max_width]
    recs = _items("hessian_exact", {"seed": seed, **cfg}, list(by_id), compute, fresh, use_store, verify,
                  "exact spectra", pool=pool)
    arrays = ("hess_eigs", "ggn_eigs", "exact", "isotropic")
    return [{k: np.asarray(v, dtype=float) if k in arrays else v for k, v in recs[i].items() if k != "id"}
            for i in by_id]


# ------------------------------------------------------------------ SLQ, large MLP


def query_indices(n_grid: int, n_query: int) -> np.ndarray:
    """Indices into the ``n_grid × n_grid`` query grid of the large MLP's ``n_query`` evenly spaced queries."""
    return np.linspace(0, n_grid * n_grid - 1, n_query).round().astype(int)


def _slq_dict(res: spectra.SLQResult, k: int) -> dict[str, Any]:
    return {"nodes": res.nodes[k], "weights": res.weights[k], "dim": res.dim}


def _mlp_setup(width: int, seed: int, n_train: int, steps: int, weight_decay: float, n_grid: int,
               idx: np.ndarray) -> dict[str, Any]:
    """Train the large MLP from scratch and build what its items need: the Hessian and GGN
    products, the queries' gradients and their exact (Woodbury) quadratic forms.

    The same computation as :func:`damping.slq_case` (same training; gradients and exact
    values computed for the whole query batch)."""
    import jax.numpy as jnp

    x, y = proxy.sample_task(np.random.default_rng([seed, 0]), n_train)
    params = classifier.train(x, y, [width, width], seed=seed, steps=steps, weight_decay=weight_decay)
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    hvp, dim = spectra.jax_hvp(lambda p: classifier.nll(p, xs, ys), params)
    gvp, _ = spectra.jax_ggn_vp(classifier.logit, params, xs)
    gq = classifier.flat_grads(params, proxy.query_grid(n_grid, 4.0)[idx])
    a = curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x),
                             scale=1.0 / n_train)
    return {"hessian": hvp, "ggn": gvp, "dim": dim, "gq": gq,
            "exact": damped_quadratic_form(a, gq, weight_decay, method="woodbury")}


def _mlp_item(setup: dict[str, Any], item: str, seed: int, m: int, weight_decay: float,
              idx: np.ndarray) -> dict[str, Any]:
    """One item of the large MLP: probe ``k`` of the Hessian (probes drawn with ``seed``) or
    the GGN (``seed + 1``), or one query's quadratic forms."""
    if item.startswith(("hessian/", "ggn/")):
        kind, probe = item.split("/")
        nodes, weights = spectra.slq_probe(setup[kind], setup["dim"], int(probe.removeprefix("probe")), m=m,
                                           seed=seed if kind == "hessian" else seed + 1)
        return {"nodes": nodes, "weights": weights, "dim": setup["dim"]}
    pos = int(np.flatnonzero(idx == int(item.removeprefix("query")))[0])
    g, lam = setup["gq"][pos], weight_decay
    lanczos = spectra.lanczos_quadratic_form(setup["ggn"], g, lambda t: 1 / (np.clip(t, 0, None) + lam), m)
    return {"exact": setup["exact"][pos], "lanczos": lanczos, "isotropic": float((g ** 2).sum() / lam)}


def _local(kind: str, config: dict[str, Any]) -> Any | None:
    """The local cache's entry for ``config`` if there is one (:func:`gnuq_core.repro.cache.cached`)."""
    if not (cache_dir() / kind / f"{config_key(config)}.pkl").exists():
        return None
    return cached(kind, config, lambda: None)


def large_mlp(width: int, *, seed: int, n_train: int, steps: int, weight_decay: float, n_probes: int, m: int,
              n_query: int, n_grid: int, use_store: bool = False, verify: int = 1) -> dict[str, Any]:
    """:func:`damping.slq_case` (kind ``hessian_slq_mlp``): SLQ spectra of the Hessian and GGN and
    the per-query comparison at ``λ = weight_decay`` (Lanczos quadrature with ``m`` steps too).

    ``verify`` stored items (probes or queries, drawn at random with a fixed seed) are
    recomputed from scratch, each with its own training run.

    Returns
    -------
    dict
        The keys of :func:`damping.slq_case` (``train_acc`` aside).
    """
    idx = query_indices(n_grid, n_query)
    ids = ([f"hessian/probe{k}" for k in range(n_probes)] + [f"ggn/probe{k}" for k in range(n_probes)]
           + [f"query{j}" for j in idx])

    memo: dict[str, Any] = {}

    def compute(i: str) -> dict[str, Any]:
        # a whole run in the local cache (a previous build without the store) is read back;
        # otherwise item by item (one training run per call), so a killed run resumes
        res = _local("spectra_slq_mlp", {"width": width, "seed": seed, "n_train": n_train, "steps": steps,
                                         "wd": weight_decay, "probes": n_probes, "m": m, "n_query": n_query,
                                         "n_grid": n_grid, "v": 2}) if use_store else None
        if res is None and use_store:
            if "setup" not in memo:
                memo["setup"] = _mlp_setup(width, seed, n_train, steps, weight_decay, n_grid, idx)
            return _mlp_item(memo["setup"], i, seed, m, weight_decay, idx)
        if res is None:
            res = memo.setdefault("whole", cached(
                "spectra_slq_mlp", {"width": width, "seed": seed, "n_train": n_train, "steps": steps,
                                    "wd": weight_decay, "probes": n_probes, "m": m, "n_query": n_query,
                                    "n_grid": n_grid, "v": 2},
                lambda: damping.slq_case(width, seed=seed, n_train=n_train, steps=steps,
                                         weight_decay=weight_decay, n_probes=n_probes, m=m,
                                         n_query=n_query, m_query=m, n_grid=n_grid)))
        if i.startswith(("hessian/", "ggn/")):
            kind, probe = i.split("/")
            return _slq_dict(res[kind], int(probe.removeprefix("probe")))
        pos = int(np.flatnonzero(idx == int(i.removeprefix("query")))[0])
        return {key: res[key][pos] for key in ("exact", "lanczos", "isotropic")}

    config = {"width": width, "seed": seed, "n_train": n_train, "steps": steps, "weight_decay": weight_decay,
              "m": m, "n_grid": n_grid}
    recs = _items("hessian_slq_mlp", config, ids, compute,
                  lambda i: _mlp_item(_mlp_setup(width, seed, n_train, steps, weight_decay, n_grid, idx), i, seed, m,
                                      weight_decay, idx),
                  use_store, verify, "large MLP (probes, queries)")

    def slq_result(kind: str) -> spectra.SLQResult:
        probes = [recs[f"{kind}/probe{k}"] for k in range(n_probes)]
        return spectra.SLQResult([np.asarray(p["nodes"], float) for p in probes],
                                 [np.asarray(p["weights"], float) for p in probes], int(probes[0]["dim"]))

    q = {key: np.array([recs[f"query{j}"][key] for j in idx], dtype=float) for key in ("exact", "lanczos", "isotropic")}
    exact, lanczos, iso = q["exact"], q["lanczos"], q["isotropic"]
    g2 = iso * weight_decay
    h = slq_result("hessian")
    return {"width": width, "n_params": h.dim, "hessian": h, "ggn": slq_result("ggn"),
            "exact": exact, "isotropic": iso, "lanczos": lanczos, "rho": spearman_pair(exact, iso),
            "median_rel_error": float(np.median(iso / exact - 1)),
            "rho_lanczos": spearman_pair(lanczos, iso), "rho_lanczos_vs_exact": spearman_pair(lanczos, exact),
            "lanczos_rel_error": float(np.median(lanczos / exact - 1)),
            "rank_share": float(np.median(1 - weight_decay * exact / np.maximum(g2, 1e-300)))}


# ------------------------------------------------------------------ SLQ, LM block


def lanczos_prefix(nodes: np.ndarray, weights: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``steps`` Lanczos coefficients (``alpha``, ``beta``) of the run whose quadrature
    rule is ``(nodes, weights)``.

    The rule is the eigendecomposition of the run's tridiagonal matrix ``T`` (nodes: its
    eigenvalues, weights: the squared first components of its eigenvectors), so Lanczos on
    ``diag(nodes)`` from ``sqrt(weights)`` rebuilds ``T``. A stored probe can so be checked
    against the first steps of a run from scratch, which cost a fraction of the whole run.
    """
    nodes = np.asarray(nodes, dtype=float)
    return spectra.lanczos(lambda v: nodes * v, np.sqrt(np.asarray(weights, dtype=float)), steps)


def _check_prefix(kind: str, key: dict[str, Any], recs: dict[str, dict[str, Any]], ids: Sequence[str],
                  verify: int, steps: int, fresh: Callable[[str, int], tuple[np.ndarray, np.ndarray]]) -> None:
    """Recompute the first ``steps`` Lanczos steps of ``verify`` random probes (fixed seed) from
    scratch and compare their coefficients with those of the stored rules."""
    rtol, atol = TOLERANCE[kind]
    for i in random.Random(0).sample(list(ids), min(verify, len(ids))):
        a, b = lanczos_prefix(recs[i]["nodes"], recs[i]["weights"], steps)
        fa, fb = fresh(i, steps)
        scale = max(1.0, float(np.max(np.abs(recs[i]["nodes"]))))  # coefficients are on the spectrum's scale
        diffs = results_store.compare({"alpha": a.tolist(), "beta": b.tolist()},
                                      {"alpha": fa.tolist(), "beta": fb.tolist()}, rtol, atol * scale)
        if diffs:
            path = results_store.store_path(kind, key, results_store.code_version(STORE_CODE))
            raise results_store.ResultsDisagree(
                f"{path}: the first {steps} Lanczos steps of {i}, recomputed from scratch, differ from the stored "
                f"rule's ({'; '.join(diffs[:5])}). The stored result is stale or the computation is not "
                "deterministic: delete the file to recompute.")


def lm_block(source: str, *, n_tokens: int, n_probes: int, m: int, seed: int, use_store: bool = False,
             verify: int = 1, verify_steps: int | None = None) -> dict[str, Any]:
    """SLQ spectrum of the last block's Hessian (kind ``hessian_slq_lm``, one item per probe).

    ``verify`` stored probes (drawn at random with a fixed seed) are recomputed from
    scratch: one model load and ``m`` Hessian-vector products each, or only the first
    ``verify_steps`` Lanczos steps (their coefficients are compared with those of the
    stored rule, :func:`lanczos_prefix`), which makes the check ``m / verify_steps``
    times cheaper.

    Returns
    -------
    dict
        ``slq`` (:class:`~gnuq_core.isotropy.spectra.SLQResult`), ``dim``, ``loss`` (NLL in
        nats per token) and ``name`` of the model.
    """
    if source not in lm_hessian.SOURCES:
        raise ValueError(f"source must be one of {', '.join(map(repr, lm_hessian.SOURCES))}, not {source!r}")

    def run() -> dict[str, Any]:
        op = lm_hessian.block_operator(source, n_tokens, seed=seed)
        res = spectra.slq(op["matvec"], op["dim"], n_probes=n_probes, m=m, seed=seed)
        return {"slq": res, "dim": op["dim"], "loss": op["loss"](), "name": op["name"], "n_layers": op["n_layers"]}

    local = {"source": source, "tokens": n_tokens, "probes": n_probes, "m": m, "seed": seed, "v": 1}
    memo: dict[str, Any] = {}

    def probe(op: dict[str, Any], i: str) -> dict[str, Any]:
        nodes, weights = spectra.slq_probe(op["matvec"], op["dim"], int(i.removeprefix("probe")), m=m, seed=seed)
        return {"nodes": nodes, "weights": weights, "dim": op["dim"], "loss": op["loss"]()}

    def compute(i: str) -> dict[str, Any]:
        # a whole run in the local cache is read back; with the store, missing probes are
        # otherwise computed one by one (one model load per build), so a killed run resumes
        res = _local("spectra_slq_lm", local)
        if res is None and use_store:
            if "op" not in memo:
                memo["op"] = lm_hessian.block_operator(source, n_tokens, seed=seed)
            return probe(memo["op"], i)
        if res is None:
            res = memo.setdefault("whole", cached("spectra_slq_lm", local, run))
        return {**_slq_dict(res["slq"], int(i.removeprefix("probe"))), "loss": res["loss"]}

    def fresh(i: str) -> dict[str, Any]:
        return probe(lm_hessian.block_operator(source, n_tokens, seed=seed), i)

    def fresh_prefix(i: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
        op = lm_hessian.block_operator(source, n_tokens, seed=seed)
        probe = spectra.rademacher_probe(op["dim"], seed, int(i.removeprefix("probe")))
        return spectra.lanczos(op["matvec"], probe, steps)

    ids = [f"probe{k}" for k in range(n_probes)]
    config = {"source": source, "tokens": n_tokens, "m": m, "seed": seed, "layer": -1}
    partial = bool(verify_steps) and verify_steps < m
    recs = _items("hessian_slq_lm", config, ids, compute, fresh, use_store, 0 if partial else verify,
                  "LM block (probes)")
    if use_store and partial and verify:
        _check_prefix("hessian_slq_lm", {**config, "version": 1}, recs, ids, verify, verify_steps, fresh_prefix)
    probes = [recs[i] for i in ids]
    res = spectra.SLQResult([np.asarray(p["nodes"], float) for p in probes],
                            [np.asarray(p["weights"], float) for p in probes], int(probes[0]["dim"]))
    return {"slq": res, "dim": res.dim, "loss": float(probes[0]["loss"]), "name": lm_hessian.SOURCES[source]}
