"""SciPy, dense ``eigh``, PyTorch and curvlinops vs the project's Lanczos, SLQ and HVPs.

On the Hessian of a chapter-03 classifier (a tanh MLP, two hidden layers, trained on the
2-D task of :mod:`gnuq_core.isotropy.proxy`), small enough that its exact spectrum is known:

- the project's Lanczos (:func:`gnuq_core.isotropy.spectra.lanczos`, full
  re-orthogonalisation) top-k Ritz values and smallest Ritz value vs SciPy's ARPACK
  ``eigsh`` on the same operator and vs dense ``numpy.linalg.eigvalsh``;
- the project's JAX Hessian-vector product (:func:`~gnuq_core.isotropy.spectra.jax_hvp`)
  vs the explicit Hessian (:func:`~gnuq_core.isotropy.spectra.jax_hessian`) times v;
- the project's SLQ (:func:`~gnuq_core.isotropy.spectra.slq`) estimates of the trace and
  of the effective dimension Σ λ⁺/(λ⁺ + δ) vs the exact spectrum, beside curvlinops'
  ``fast_lanczos`` quadrature (Papyan 2020, *no* re-orthogonalisation) with the same probes
  and steps: the reason the project keeps its own SLQ;
- the project's double-backward HVP of an LM block (:func:`gnuq_core.isotropy.lm_hessian.block_hvp`)
  vs ``torch.autograd.functional.hvp`` (forward-over-backward through
  ``torch.func.functional_call``) on a causal LM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnuq_core.crosscheck.agreement import compare, frame
from gnuq_core.isotropy import classifier, proxy, spectra
from gnuq_core.isotropy.lm_hessian import block_hvp, block_inputs

__all__ = ["classifier_hessian", "lanczos_vs_eigsh", "slq_vs_exact", "same_start_runs", "lm_block_hvp", "TOL_EIG", "TOL_HVP",
           "TOL_SLQ", "TOL_LM_HVP"]

TOL_EIG = 1e-8
"""Ritz values of a converged Lanczos run vs ARPACK / dense eigh on the same float64 matrix."""
TOL_HVP = 1e-4
"""The JAX HVP vs the explicit Hessian: both are float32 computations (the classifier's dtype)."""
TOL_SLQ = 4.0
"""SLQ is a Monte-Carlo estimate: its error vs the exact value, in standard errors over the probes."""
TOL_LM_HVP = 1e-4
"""Two float32 double-backward passes through a transformer block, in different orders."""


def classifier_hessian(width: int, *, seed: int = 0, n_train: int = 200, steps: int = 500,
                       weight_decay: float = 1e-3) -> dict[str, Any]:
    """Train a chapter-03 classifier (two hidden layers of ``width``) and form its NLL Hessian.

    Returns
    -------
    dict
        ``hessian`` (P×P float64, from :func:`~gnuq_core.isotropy.spectra.jax_hessian`),
        ``hvp`` (the JAX HVP, float64 vectors in and out), ``n_params``.
    """
    import jax.numpy as jnp

    x, y = proxy.sample_task(np.random.default_rng([seed, 0]), n_train)
    params = classifier.train(x, y, [width, width], seed=seed, steps=steps, weight_decay=weight_decay)
    xs, ys = jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)
    hess = spectra.jax_hessian(lambda p: classifier.nll(p, xs, ys), params)
    hvp, dim = spectra.jax_hvp(lambda p: classifier.nll(p, xs, ys), params)
    return {"hessian": hess, "hvp": hvp, "n_params": dim, "width": width}


def _ritz(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    return np.linalg.eigvalsh(t)


def lanczos_vs_eigsh(hessian: np.ndarray, hvp: Any = None, *, k: int = 10, m: int | None = None,
                     seed: int = 0, label: str = "") -> Any:
    """Agreement rows: the project's Lanczos vs ARPACK ``eigsh`` and dense ``eigvalsh``.

    Parameters
    ----------
    hessian : numpy.ndarray
        A symmetric matrix (P×P).
    hvp : callable, optional
        The project's matrix-free product with the same matrix; compared with
        ``hessian @ v`` on a few random vectors.
    k : int
        Number of top eigenvalues compared.
    m : int, optional
        Lanczos steps (default ``min(P, 4k + 60)``).
    seed : int
        Seed of the start vectors.
    label : str
        The case, added as a column.

    Returns
    -------
    pandas.DataFrame
    """
    from scipy.sparse.linalg import LinearOperator, eigsh

    h = 0.5 * (np.asarray(hessian, np.float64) + np.asarray(hessian, np.float64).T)
    n = h.shape[0]
    if not 0 < k < n - 1:
        raise ValueError(f"k={k}: need 0 < k < P − 1 = {n - 1} (ARPACK's limit)")
    m = min(n, m or 4 * k + 60)
    rng = np.random.default_rng(seed)
    a, b = spectra.lanczos(spectra.dense_matvec(h), rng.standard_normal(n), m)
    ritz = _ritz(a, b)
    op = LinearOperator((n, n), matvec=spectra.dense_matvec(h), dtype=np.float64)
    v0 = rng.standard_normal(n)
    top_arpack = np.sort(eigsh(op, k=k, which="LA", v0=v0, tol=1e-12, return_eigenvectors=False))[::-1]
    min_arpack = float(eigsh(op, k=1, which="SA", v0=v0, tol=1e-12, return_eigenvectors=False)[0])
    exact = np.linalg.eigvalsh(h)
    top_ours = ritz[::-1][:k]
    scale = float(np.abs(exact).max())  # λ_min near 0: errors relative to the spectral norm
    extra = {"case": label, "n_params": n, "lanczos_steps": len(a)}
    rows = [
        compare(f"top-{k} eigenvalues, Lanczos vs eigsh", top_ours, top_arpack, TOL_EIG,
                theirs_by="scipy.sparse.linalg.eigsh (ARPACK)", **extra),
        compare(f"top-{k} eigenvalues, Lanczos vs eigh", top_ours, exact[::-1][:k], TOL_EIG,
                theirs_by="numpy.linalg.eigvalsh (dense)", **extra),
        compare("λ_min (error relative to ‖H‖), Lanczos vs eigsh", ritz[0], min_arpack, TOL_EIG, floor=scale,
                theirs_by="scipy.sparse.linalg.eigsh (ARPACK)", **extra),
        compare("λ_min (error relative to ‖H‖), Lanczos vs eigh", ritz[0], exact[0], TOL_EIG, floor=scale,
                theirs_by="numpy.linalg.eigvalsh (dense)", **extra),
    ]
    if hvp is not None:
        vs = rng.standard_normal((3, n))
        ours = np.concatenate([np.asarray(hvp(v), np.float64) for v in vs])
        theirs = np.concatenate([h @ v for v in vs])
        nrm = float(np.abs(theirs).max())
        rows.append(compare("Hessian-vector product (error relative to max |Hv|)", ours, theirs, TOL_HVP, floor=nrm,
                            theirs_by="explicit Hessian (jax.hessian) @ v", **extra))
    return frame(rows)


def _ritz_and_weights(alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    theta, vecs = np.linalg.eigh(t)
    return theta, vecs[0] ** 2


def _effective_dim(eigs: np.ndarray, damping: float) -> float:
    pos = np.clip(eigs, 0.0, None)
    return float(np.sum(pos / (pos + damping)))


def slq_vs_exact(hessian: np.ndarray, damping: float, *, n_probes: int = 8, m: int = 40, seed: int = 0,
                 label: str = "", curvlinops: bool = True) -> Any:
    """Agreement rows: SLQ estimates of tr H and of the effective dimension vs the exact spectrum.

    The SLQ error is measured in standard errors over the probes (SLQ is a Monte-Carlo
    estimate; tolerance :data:`TOL_SLQ`). With ``curvlinops=True`` also the trace from
    curvlinops' ``fast_lanczos`` vs the project's Lanczos from the same start vectors (equal
    by construction: it is the first Lanczos coefficient).

    Returns
    -------
    pandas.DataFrame
        Column ``exact`` holds the exact value in every row.
    """
    h = 0.5 * (np.asarray(hessian, np.float64) + np.asarray(hessian, np.float64).T)
    n = h.shape[0]
    exact = np.linalg.eigvalsh(h)
    res = spectra.slq(spectra.dense_matvec(h), n, n_probes=n_probes, m=m, seed=seed)
    extra = {"case": label, "n_params": n, "probes": n_probes, "lanczos_steps": m}
    rows = []
    for name, f, true in (("trace of H", lambda t: t, float(np.trace(h))),
                          (f"effective dimension at δ = {damping:g}", lambda t: _d_eff(t, damping),
                           _effective_dim(exact, damping))):
        per_probe = np.array([n * (w @ f(x)) for x, w in zip(res.nodes, res.weights)])
        se = float(per_probe.std(ddof=1) / np.sqrt(n_probes)) if n_probes > 1 else float("inf")
        rows.append(compare(f"{name} (error in probe standard errors)", per_probe.mean(), true, TOL_SLQ,
                            scale=max(se, 1e-300), ours_by="project SLQ (Rademacher probes)",
                            theirs_by="exact (dense eigh)", exact=true, **extra))
    if curvlinops:
        same = same_start_runs(h, damping, n_probes=n_probes, m=m, seed=seed)
        rows.append(compare("trace of H (first Lanczos coefficient: no orthogonality involved)", same["trace_project"],
                            same["trace_curvlinops"], TOL_EIG, exact=float(np.trace(h)),
                            ours_by="project Lanczos, curvlinops' start vectors",
                            theirs_by="curvlinops fast_lanczos, same start vectors", **extra))
    return frame(rows)


def _d_eff(t: np.ndarray, damping: float) -> np.ndarray:
    pos = np.clip(t, 0, None)
    return pos / (pos + damping)


def same_start_runs(hessian: np.ndarray, damping: float, *, n_probes: int = 8, m: int = 40,
                    seed: int = 0) -> dict[str, float]:
    """The project's Lanczos and curvlinops' ``fast_lanczos`` from identical start vectors.

    ``fast_lanczos`` draws its start vector with ``torch.randn(dim)``; the same draws are
    replayed for the project's Lanczos, so the two quadratures differ only by
    re-orthogonalisation.

    Returns
    -------
    dict
        ``trace_*`` and ``deff_*`` (effective dimension at ``damping``) for ``project``,
        ``curvlinops`` and ``exact``.
    """
    import torch
    from curvlinops.papyan2020traces.spectrum import fast_lanczos

    h = 0.5 * (np.asarray(hessian, np.float64) + np.asarray(hessian, np.float64).T)
    n = h.shape[0]
    torch.manual_seed(seed)
    starts = [torch.randn(n, dtype=torch.float64) for _ in range(n_probes)]
    torch.manual_seed(seed)
    ht = torch.as_tensor(h)
    theirs = [(th.numpy(), ev[0].numpy() ** 2) for th, ev in (fast_lanczos(ht, m) for _ in range(n_probes))]
    ours = [_ritz_and_weights(*spectra.lanczos(spectra.dense_matvec(h), v.numpy(), m)) for v in starts]

    def quad(runs: list, f: Any) -> float:
        return n * float(np.mean([w @ f(th) for th, w in runs]))

    return {"trace_project": quad(ours, lambda t: t), "trace_curvlinops": quad(theirs, lambda t: t),
            "trace_exact": float(np.trace(h)),
            "deff_project": quad(ours, lambda t: _d_eff(t, damping)),
            "deff_curvlinops": quad(theirs, lambda t: _d_eff(t, damping)),
            "deff_exact": _effective_dim(np.linalg.eigvalsh(h), damping)}


def lm_block_hvp(model: Any, input_ids: list[int], *, layer: int = -1, n_vectors: int = 2, seed: int = 0,
                 label: str = "") -> Any:
    """Agreement rows: :func:`~gnuq_core.isotropy.lm_hessian.block_hvp` vs ``torch.autograd.functional.hvp``.

    Both take the block's inputs from :func:`~gnuq_core.isotropy.lm_hessian.block_inputs`
    (what is checked is the Hessian-vector product, not the capture); the reference
    differentiates the same loss (mean next-token cross-entropy, the block's parameters
    only) through ``torch.func.functional_call``. ``model`` is left with eager attention
    and its parameters' ``requires_grad`` set by ``block_hvp``.
    """
    import torch

    matvec, dim, _ = block_hvp(model, input_ids, layer=layer)
    block = model.model.layers[layer]
    names = [n for n, _ in block.named_parameters()]
    params = tuple(p.detach() for _, p in block.named_parameters())
    args, kwargs = block_inputs(model, input_ids, layer)
    ids = torch.tensor([input_ids])

    def loss(*ps: torch.Tensor) -> torch.Tensor:
        out = torch.func.functional_call(block, dict(zip(names, ps)), args, kwargs)
        h = out[0] if isinstance(out, tuple) else out
        logits = model.lm_head(model.model.norm(h))[0, :-1].float()
        return torch.nn.functional.cross_entropy(logits, ids[0, 1:])

    gen = torch.Generator().manual_seed(seed)
    ours, theirs = [], []
    for _ in range(n_vectors):
        v = torch.randn(dim, generator=gen, dtype=torch.float64)
        ours.append(np.asarray(matvec(v.numpy()), np.float64))
        chunks, k = [], 0
        for p in params:
            chunks.append(v[k:k + p.numel()].reshape(p.shape).to(p.dtype))
            k += p.numel()
        _, hv = torch.autograd.functional.hvp(loss, params, tuple(chunks))
        theirs.append(torch.cat([t.reshape(-1) for t in hv]).double().numpy())
    ours_a, theirs_a = np.concatenate(ours), np.concatenate(theirs)
    return frame([compare("block Hessian-vector product (error relative to max |Hv|)", ours_a, theirs_a, TOL_LM_HVP,
                          floor=float(np.abs(theirs_a).max()), theirs_by="torch.autograd.functional.hvp",
                          case=label, n_params=dim)])
