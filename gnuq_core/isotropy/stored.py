"""Chapter 03's expensive results, item by item, through a store (`gnuq_core.store`).

Three stored kinds (``<store>/<kind>/<key>.jsonl``; their contracts are in
`gnuq_core.store.kinds`):

- ``hessian_exact``: per width ``"width{w}"``, the exact Hessian and GGN eigenvalues and the
  damped-vs-isotropic comparison of one small MLP (:func:`damping.exact_case_at`; the
  spectrum summaries are computed on reading), and ``"theta/width{w}"``, the trained
  parameters θ* it was computed at;
- ``hessian_slq_mlp``: the large MLP, one item per SLQ probe (``"hessian/probe{k}"``,
  ``"ggn/probe{k}"``: its Ritz values and weights), per query point (``"query{j}"``, ``j``
  its index in the query grid: the exact, Lanczos and isotropic quadratic forms), and
  ``"theta"``, the trained parameters;
- ``hessian_slq_lm``: the LM block, one item per SLQ probe (``"probe{k}"``).

Training is chaotic: on another CPU the same code trains to another θ*. So θ* is stored,
and a check on another platform recomputes the curvature of the *stored* θ* (exact
arithmetic on fixed inputs), while a check on the platform that made an item trains again
and must reproduce it to the stored digits. A stored Lanczos rule is compared by the first
coefficients of the run that made it (`gnuq_core.store.kinds.lanczos_view`), so checking
an LM probe costs one model load and a few Hessian-vector products. Small items keep the
check cheap: one training run (MLP) or one model load (LM), not a whole spectrum.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy import damping
from gnuq_core.isotropy import ggn_laplace as curvature
from gnuq_core.isotropy import lm_hessian
from gnuq_core.isotropy import proxy
from gnuq_core.isotropy import spectra
from gnuq_core.isotropy.damped import damped_quadratic_form
from gnuq_core.isotropy.mlp import decode_params, encode_params
from gnuq_core.stats import spearman_pair
from gnuq_core.store import Recipe, Sample, Store
from gnuq_core.store.kinds import PREFIX_STEPS

__all__ = ["exact_cases", "large_mlp", "lm_block", "query_indices", "theta_record"]

THETA = "theta"


def theta_record(params: Any) -> dict[str, Any]:
    """What is stored of a trained network: its parameters, bit for bit, and their count."""
    return {"theta_f32": encode_params(params), "n_params": classifier.n_params(params)}


def _made_here(store: Store) -> Any:
    """``Sample.among`` for kinds with θ* items: a θ* item is checked only on the platform that
    made it (elsewhere training takes another path; the items computed from it are checked
    from the stored θ* instead)."""
    return lambda rec: not str(rec["id"]).startswith(THETA) or (rec.get("_made") or {}).get("fp") == store.fingerprint_id


# ------------------------------------------------------------------ exact spectra, small MLPs


def exact_cases(widths: list[int], *, seed: int, n_train: int, steps: int, weight_decay: float,
                dampings: list[float], n_grid: int, store: Store, verify: int = 1) -> list[dict[str, Any]]:
    """:func:`damping.exact_case` per width (kind ``hessian_exact``), arrays as numpy arrays.

    The widest network's item, whose spectra the chapter quotes, is recomputed in every build
    (about a minute at width 96: its Hessian's eigenvalues; the GGN by its Gram matrix), and
    ``verify`` more stored items, drawn at random with a fixed seed among the widths and
    their θ*. On another platform an item is recomputed from the stored θ*.
    """
    cfg = dict(n_train=n_train, steps=steps, weight_decay=weight_decay, dampings=[float(d) for d in dampings],
               n_grid=n_grid)
    by_id = {f"width{w}": int(w) for w in widths}
    by_id.update({f"{THETA}/width{w}": int(w) for w in widths})
    trained: dict[int, Any] = {}

    def fit(width: int) -> tuple[Any, np.ndarray, np.ndarray]:
        return damping.train(width, seed, n_train, steps, weight_decay)

    def item(i: str, run: tuple[Any, np.ndarray, np.ndarray]) -> dict[str, Any]:
        params, x, y = run
        if i.startswith(THETA):
            return theta_record(params)
        return damping.exact_case_at(params, x, y, by_id[i], weight_decay=weight_decay,
                                     dampings=cfg["dampings"], n_grid=n_grid)

    def compute(i: str) -> dict[str, Any]:  # a width and its θ* share one training run
        if by_id[i] not in trained:
            trained[by_id[i]] = fit(by_id[i])
        return item(i, trained[by_id[i]])

    def from_outputs(i: str, stored: dict[str, Any], records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        w = by_id[i]
        if i.startswith(THETA):
            return stored
        params = decode_params(records[f"{THETA}/width{w}"]["theta_f32"], [2, w, w, 1])
        x, y = damping.task_data(seed, n_train)
        return item(i, (params, x, y))

    widest = f"width{max(widths)}"
    sample = Sample(verify, among=_made_here(store), always=[widest],
                    words=f"The widest network's spectra (`{widest}`), which the chapter quotes, are recomputed in "
                          "every build; the others are drawn at random.")
    recs = store.items("hessian_exact", {"seed": seed, **cfg}, list(by_id),
                       Recipe(compute, fresh=lambda i: item(i, fit(by_id[i])), from_outputs=from_outputs),
                       verify=sample, progress="exact spectra")
    by_rec = {r["id"]: r for r in recs}
    arrays = ("hess_eigs", "ggn_eigs", "exact", "isotropic")
    cases = [{k: np.asarray(v, dtype=float) if k in arrays else v for k, v in by_rec[f"width{w}"].items() if k != "id"}
             for w in widths]
    return [{**c, "summary": damping.summaries(c, weight_decay)} for c in cases]


# ------------------------------------------------------------------ SLQ, large MLP


def query_indices(n_grid: int, n_query: int) -> np.ndarray:
    """Indices into the ``n_grid × n_grid`` query grid of the large MLP's ``n_query`` evenly spaced queries."""
    return np.linspace(0, n_grid * n_grid - 1, n_query).round().astype(int)


def _setup_at(params: Any, x: np.ndarray, y: np.ndarray, weight_decay: float, n_grid: int,
              idx: np.ndarray) -> dict[str, Any]:
    """What the large MLP's items need at θ* = ``params`` (trained on ``x``, ``y``): the Hessian
    and GGN products, the queries' gradients and their exact (Woodbury) quadratic forms, as
    :func:`damping.slq_case` computes them."""
    import jax.numpy as jnp

    n_train = len(x)

    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    hvp, dim = spectra.jax_hvp(lambda p: classifier.nll(p, xs, ys), params)
    gvp, _ = spectra.jax_ggn_vp(classifier.logit, params, xs)
    gq = classifier.flat_grads(params, proxy.query_grid(n_grid, 4.0)[idx])
    a = curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x),
                             scale=1.0 / n_train)
    return {"hessian": hvp, "ggn": gvp, "dim": dim, "gq": gq, "params": params,
            "exact": damped_quadratic_form(a, gq, weight_decay, method="woodbury")}


def _mlp_item(setup: dict[str, Any], item: str, seed: int, m: int, weight_decay: float,
              idx: np.ndarray) -> dict[str, Any]:
    """One item of the large MLP: its θ*, probe ``k`` of the Hessian (probes drawn with
    ``seed``) or the GGN (``seed + 1``), or one query's quadratic forms."""
    if item == THETA:
        return theta_record(setup["params"])
    if item.startswith(("hessian/", "ggn/")):
        kind, probe = item.split("/")
        nodes, weights = spectra.slq_probe(setup[kind], setup["dim"], int(probe.removeprefix("probe")), m=m,
                                           seed=seed if kind == "hessian" else seed + 1)
        return {"nodes": nodes, "weights": weights, "dim": setup["dim"]}
    pos = int(np.flatnonzero(idx == int(item.removeprefix("query")))[0])
    g, lam = setup["gq"][pos], weight_decay
    lanczos = spectra.lanczos_quadratic_form(setup["ggn"], g, lambda t: 1 / (np.clip(t, 0, None) + lam), m)
    return {"exact": setup["exact"][pos], "lanczos": lanczos, "isotropic": float((g ** 2).sum() / lam)}


def large_mlp(width: int, *, seed: int, n_train: int, steps: int, weight_decay: float, n_probes: int, m: int,
              n_query: int, n_grid: int, store: Store, verify: int = 1) -> dict[str, Any]:
    """:func:`damping.slq_case` (kind ``hessian_slq_mlp``): SLQ spectra of the Hessian and GGN and
    the per-query comparison at ``λ = weight_decay`` (Lanczos quadrature with ``m`` steps too).

    ``verify`` stored items (probes, queries or θ*, drawn at random with a fixed seed) are
    recomputed from scratch: on the platform that made them with their own training run,
    elsewhere from the stored θ*.

    Returns
    -------
    dict
        The keys of :func:`damping.slq_case` (``train_acc`` aside).
    """
    idx = query_indices(n_grid, n_query)
    ids = ([f"hessian/probe{k}" for k in range(n_probes)] + [f"ggn/probe{k}" for k in range(n_probes)]
           + [f"query{j}" for j in idx] + [THETA])
    memo: dict[str, Any] = {}

    def setup_fresh() -> dict[str, Any]:
        params, x, y = damping.train(width, seed, n_train, steps, weight_decay)
        return _setup_at(params, x, y, weight_decay, n_grid, idx)

    def compute(i: str) -> dict[str, Any]:  # one training run per build for all missing items
        if "setup" not in memo:
            memo["setup"] = setup_fresh()
        return _mlp_item(memo["setup"], i, seed, m, weight_decay, idx)

    def from_outputs(i: str, stored: dict[str, Any], records: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        if i == THETA:
            return stored
        if "stored_setup" not in memo:
            params = decode_params(records[THETA]["theta_f32"], [2, width, width, 1])
            x, y = damping.task_data(seed, n_train)
            memo["stored_setup"] = _setup_at(params, x, y, weight_decay, n_grid, idx)
        return _mlp_item(memo["stored_setup"], i, seed, m, weight_decay, idx)

    config = {"width": width, "seed": seed, "n_train": n_train, "steps": steps, "weight_decay": weight_decay,
              "m": m, "n_grid": n_grid}
    recipe = Recipe(compute, fresh=lambda i: _mlp_item(setup_fresh(), i, seed, m, weight_decay, idx),
                    from_outputs=from_outputs)
    recs = {r["id"]: r for r in store.items("hessian_slq_mlp", config, ids, recipe,
                                            verify=Sample(verify, among=_made_here(store)),
                                            progress="large MLP (probes, queries)")}

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


def lm_block(source: str, *, n_tokens: int, n_probes: int, m: int, seed: int, store: Store,
             verify: int = 1) -> dict[str, Any]:
    """SLQ spectrum of the last block's Hessian (kind ``hessian_slq_lm``, one item per probe).

    ``verify`` stored probes (drawn at random with a fixed seed) are checked by recomputing
    the first :data:`~gnuq_core.store.kinds.PREFIX_STEPS` Lanczos steps from scratch (one
    model load and that many Hessian-vector products), compared with the coefficients
    rebuilt from the stored rule.

    Returns
    -------
    dict
        ``slq`` (:class:`~gnuq_core.isotropy.spectra.SLQResult`), ``dim``, ``loss`` (NLL in
        nats per token) and ``name`` of the model.
    """
    if source not in lm_hessian.SOURCES:
        raise ValueError(f"source must be one of {', '.join(map(repr, lm_hessian.SOURCES))}, not {source!r}")
    memo: dict[str, Any] = {}

    def operator() -> dict[str, Any]:
        if "op" not in memo:
            memo["op"] = lm_hessian.block_operator(source, n_tokens, seed=seed)
        return memo["op"]

    def compute(i: str) -> dict[str, Any]:  # one model load per build for all missing probes
        op = operator()
        nodes, weights = spectra.slq_probe(op["matvec"], op["dim"], int(i.removeprefix("probe")), m=m, seed=seed)
        return {"nodes": nodes, "weights": weights, "dim": op["dim"], "loss": op["loss"]()}

    def prefix(i: str) -> dict[str, Any]:
        op = lm_hessian.block_operator(source, n_tokens, seed=seed)
        probe = spectra.rademacher_probe(op["dim"], seed, int(i.removeprefix("probe")))
        alpha, beta = spectra.lanczos(op["matvec"], probe, min(PREFIX_STEPS, m))
        return {"alpha": alpha, "beta": beta, "dim": op["dim"], "loss": op["loss"]()}

    ids = [f"probe{k}" for k in range(n_probes)]
    config = {"source": source, "tokens": n_tokens, "m": m, "seed": seed, "layer": -1}
    recs = {r["id"]: r for r in store.items("hessian_slq_lm", config, ids, Recipe(compute, fresh=prefix),
                                            verify=verify, progress="LM block (probes)")}
    probes = [recs[i] for i in ids]
    res = spectra.SLQResult([np.asarray(p["nodes"], float) for p in probes],
                            [np.asarray(p["weights"], float) for p in probes], int(probes[0]["dim"]))
    return {"slq": res, "dim": res.dim, "loss": float(probes[0]["loss"]), "name": lm_hessian.SOURCES[source]}
