"""Local uncertainty estimates at the MAP θ*: isotropic ‖g‖², Laplace (exact Hessian,
GGN, diagonal) and the aleatoric p(1−p).

With g_f = ∇θ f(x; θ*) (logit or regression mean) and a posterior covariance Σ, the
delta method gives Var[f(x)] ≈ g_fᵀ Σ g_f. The estimates differ only in Σ:

=============  ==========================================================
``iso``        Σ = I (up to one scale σ²): ‖g‖², the paper's estimate
``prior``      Σ = prior covariance: Σ_i prior_var_i g_i²
``laplace``    Σ = (∇²NLL + prior precision)⁻¹ with the exact Hessian
``ggn``        Σ = (Jᵀ Λ J + prior precision)⁻¹, Λ = p(1−p) or 1/σ²_noise
``diag``       Σ = diag(∇²NLL + prior precision)⁻¹ (diagonal of the exact Hessian)
=============  ==========================================================

Multiclass (``task="multiclass"``): the estimates are taken for the probability of the
class the MAP predicts, p_c = softmax(f)_c with c = argmax: g = ∇θ p_c directly, the same
covariances (the exact Hessian of the categorical likelihood; the GGN Σ_i J_iᵀ(diag p_i −
p_i p_iᵀ)J_i), and ``aleatoric`` = p_c(1−p_c), as the paper's Table 1 defines them.

In classification, p = sigmoid f and ∇θ p = p(1−p) g_f, so every probability-space
estimate is the logit-space one times the sigmoid factor (p(1−p))². :func:`estimates`
returns both (keys ``<name>_f`` and ``<name>_p``), plus ``sigmoid_sq`` = (p(1−p))² alone
and ``aleatoric`` = p(1−p), so that the share of the ranking carried by the sigmoid factor
can be measured separately from that of ‖g_f‖².

Relation to :mod:`gnuq_core.isotropy.ggn_laplace`: both are GGN-Laplace variances from
per-input Jacobians, and both take those from the one routine
:func:`gnuq_core.isotropy.mlp.jacobian_rows` (here on the flat-θ network of
:mod:`gnuq_core.bayes.bnn`, the parametrisation NUTS samples, so that the MAP, the
Laplace covariances and the MCMC reference live in the same coordinates). They differ in
what the comparison with MCMC needs: a per-layer, non-isotropic prior (so the precision is
``G + diag(prior precisions)``, not ``AᵀA + αI``), the *exact* Hessian and its diagonal
beside the GGN, and regression as well as classification. The P×P precisions are
therefore formed (P ≤ ``EXACT_HESSIAN_MAX_PARAMS``) and each ``g_fᵀ Σ g_f`` is a Cholesky
solve with that precision; the isotropic-prior, factor-only form of ``ggn_laplace`` (which
never forms P×P when n < P) cannot express them. The kernel (Woodbury) form of
:func:`ntk_view` is the shared :func:`gnuq_core.isotropy.damped.kernel_residual`.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gnuq_core.bayes.bnn import MLPConfig, forward, layer_shapes, log_likelihood, n_params, prior_std, x64
from gnuq_core.isotropy.damped import kernel_residual
from gnuq_core.isotropy.mlp import jacobian_rows

__all__ = ["jacobian", "hessian_nll", "ggn", "estimates", "posterior_precisions", "glm_predictive_variance",
           "with_probability_space",
           "EXACT_HESSIAN_MAX_PARAMS"]

EXACT_HESSIAN_MAX_PARAMS = 5000  # above this the (P, P) matrices are not formed


@functools.lru_cache(maxsize=128)
def _output_fn(cfg: MLPConfig) -> Any:
    """f(θ, x) for one input, one function per model (so its jitted gradient is reused)."""
    return lambda th, x: forward(cfg, th, x[None])[0]


@functools.lru_cache(maxsize=128)
def _class_output_fn(cfg: MLPConfig, probability: bool) -> Any:
    """``(θ, [x, c]) -> f_c(x)`` or ``p_c(x) = softmax(f(x))_c``: one output of a multiclass net,
    the class index ``c`` carried as the input's last entry (one jitted gradient for all classes)."""
    def fn(th: Any, xc: Any) -> Any:
        out = forward(cfg, th, xc[None, :-1])[0]
        out = jax.nn.softmax(out) if probability else out
        return out[xc[-1].astype(jnp.int32)]

    return fn


@x64
def class_jacobian(cfg: MLPConfig, theta: np.ndarray, xs: np.ndarray, classes: np.ndarray, *,
                   probability: bool = True, batch: int = 512) -> np.ndarray:
    """Rows ∇θ p_c(xs[i]) (or ∇θ f_c with ``probability=False``) of a multiclass net, c = ``classes[i]``."""
    xc = np.concatenate([np.asarray(xs, float), np.asarray(classes, float)[:, None]], axis=1)
    return np.asarray(jacobian_rows(_class_output_fn(cfg, probability), jnp.asarray(theta, jnp.float64),
                                    jnp.asarray(xc, jnp.float64), chunk=batch))


def class_probabilities(cfg: MLPConfig, theta: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """softmax f(x; θ) of a multiclass net, ``(n, n_classes)``."""
    f = np.asarray(x64(lambda: forward(cfg, jnp.asarray(theta), jnp.asarray(xs)))())
    z = np.exp(f - f.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


@functools.lru_cache(maxsize=128)
def _hessian_fn(cfg: MLPConfig) -> Any:
    return jax.jit(jax.hessian(lambda t, x, y: -log_likelihood(cfg, t, x, y)))


@x64
def jacobian(cfg: MLPConfig, theta: np.ndarray, xs: np.ndarray, batch: int = 512) -> np.ndarray:
    """J[i] = ∇θ f(xs[i]; θ), shape ``(n, P)``: :func:`gnuq_core.isotropy.mlp.jacobian_rows` on the flat θ."""
    t = jnp.asarray(theta, jnp.float64)
    return np.asarray(jacobian_rows(_output_fn(cfg), t, jnp.asarray(xs, jnp.float64), chunk=batch))


@x64
def hessian_nll(cfg: MLPConfig, theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Exact Hessian of the negative log-likelihood at θ, ``(P, P)``."""
    xj, yj = jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.float64)
    h = _hessian_fn(cfg)(jnp.asarray(theta, jnp.float64), xj, yj)
    h = np.asarray(h)
    return 0.5 * (h + h.T)


def ggn(cfg: MLPConfig, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Generalised Gauss–Newton Jᵀ Λ J of the NLL (Λ = p(1−p) or 1/σ²; multiclass Σ_i J_iᵀ(diag p_i −
    p_i p_iᵀ)J_i over the logits), ``(P, P)``."""
    if cfg.task == "multiclass":
        p = class_probabilities(cfg, theta, x)
        J = [class_jacobian(cfg, theta, x, np.full(len(x), k), probability=False) for k in range(cfg.n_classes)]
        lam = p[:, :, None] * (np.eye(cfg.n_classes)[None] - p[:, None, :])  # diag(p) − ppᵀ per point
        return sum((J[k] * lam[:, k, m, None]).T @ J[m] for k in range(cfg.n_classes) for m in range(cfg.n_classes))
    J = jacobian(cfg, theta, x)
    if cfg.task == "classification":
        f = np.asarray(x64(lambda: forward(cfg, jnp.asarray(theta), jnp.asarray(x)))())
        p = 1.0 / (1.0 + np.exp(-f))
        lam = p * (1 - p)
    else:
        lam = np.full(len(x), 1.0 / cfg.noise_sigma**2)
    return (J * lam[:, None]).T @ J


def posterior_precisions(cfg: MLPConfig, theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Laplace posterior precisions at θ*: exact (``laplace``), ``ggn`` and ``diag``.

    The exact Hessian at a numerical MAP can have small negative eigenvalues (a saddle
    direction or an unconverged optimiser); they are reported in ``min_eig_laplace`` and
    clipped to the prior precision's smallest value before inversion, so that the
    covariance stays positive definite.
    """
    P = n_params(cfg)
    if P > EXACT_HESSIAN_MAX_PARAMS:
        raise ValueError(f"{P} parameters: exact Hessian too large (limit {EXACT_HESSIAN_MAX_PARAMS}); "
                         "use a smaller network or only the isotropic estimate")
    prec = 1.0 / prior_std(cfg) ** 2
    H = hessian_nll(cfg, theta, x, y) + np.diag(prec)
    w, V = np.linalg.eigh(H)
    floor = prec.min() * 1e-3
    Hc = (V * np.maximum(w, floor)) @ V.T
    G = ggn(cfg, theta, x) + np.diag(prec)
    return {"laplace": Hc, "ggn": G, "diag": np.diag(np.diag(Hc)), "min_eig_laplace": float(w.min()),
            "n_negative_eig": int((w < 0).sum())}


def _quad_inv(A: np.ndarray, J: np.ndarray) -> np.ndarray:
    """diag(J A⁻¹ Jᵀ) via a Cholesky factor of the precision A."""
    from scipy.linalg import cho_factor, cho_solve

    c = cho_factor(A, lower=True)
    return np.einsum("ij,ji->i", J, cho_solve(c, J.T))


def _log_cosh(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    return a + np.log1p(np.exp(-2 * a)) - np.log(2.0)


def _sigmoid_difference(f: np.ndarray, m: np.ndarray) -> np.ndarray:
    """σ(f) − σ(m) without cancellation: sinh((f−m)/2) / (2 cosh(f/2) cosh(m/2)), in logs."""
    d = np.abs(f - m) / 2
    with np.errstate(divide="ignore"):
        log_sinh = d + np.log1p(-np.exp(-2 * d)) - np.log(2.0)  # −inf at d = 0
    return np.sign(f - m) * np.exp(log_sinh - np.log(2.0) - _log_cosh(f / 2) - _log_cosh(m / 2))


def glm_predictive_variance(mean_f: np.ndarray, var_f: np.ndarray, nodes: int = 8) -> np.ndarray:
    """Var[σ(f)] for f ~ N(``mean_f``, ``var_f``): the GLM (linearised) Laplace predictive.

    This is the predictive of laplace-torch's ``"glm"`` mode for a binary classifier: the
    logit is linear in θ, so f is Gaussian with the functional variance gᵀΣg, and the
    variance of p = σ(f) is taken exactly under that Gaussian, not by a second
    linearisation ((p(1−p))²·gᵀΣg, the delta method, which it matches as ``var_f`` → 0).

    Computed by quadrature, not by the probit approximation or sampling: composite
    Gauss–Legendre (``nodes`` per panel) over f on 160 panels (at most half a standard
    deviation each) across m ± (12 + 2 sd) sd, capped at 40 sd, refined by unit panels
    across σ's transition (−40 … 40), of
    E[(σ(f) − σ(m))²] − E[σ(f) − σ(m)]², whose integrand is formed without cancellation.
    Relative error below 1e-8 wherever the variance is above 1e-300.

    Parameters
    ----------
    mean_f, var_f : numpy.ndarray
        Mean and variance of the logit (same shape; ``var_f`` ≥ 0).
    nodes : int
        Gauss–Legendre nodes per panel.

    Returns
    -------
    numpy.ndarray
        Var[σ(f)], the shape of ``mean_f``.
    """
    m, v = np.broadcast_arrays(np.asarray(mean_f, float), np.asarray(var_f, float))
    if np.any(v < 0) or not np.all(np.isfinite(v)):
        raise ValueError("var_f has negative or non-finite entries: pass the logit variances gᵀΣg (≥ 0)")
    shape, m, sd = m.shape, m.ravel(), np.sqrt(v).ravel()
    out = np.zeros(m.size)
    ok = sd > 0
    m, sd = m[ok], sd[ok]
    # In σ's exponential tails the integrand is a Gaussian shifted by up to 2 sd² towards σ's
    # transition, i.e. 2 sd standard deviations: the range reaches that far (to 40 sd at most).
    reach = np.clip(12 + 2 * sd, 12, 40)
    lo, hi = m - reach * sd, m + reach * sd
    gauss_edges = m[:, None] + (reach * sd)[:, None] * np.linspace(-1, 1, 161)[None, :]
    sig_edges = np.clip(np.linspace(-40, 40, 81)[None, :], lo[:, None], hi[:, None])
    edges = np.sort(np.concatenate([gauss_edges, sig_edges], axis=1), axis=1)
    a, b = edges[:, :-1], edges[:, 1:]
    t, w = np.polynomial.legendre.leggauss(nodes)
    f = (a + b)[..., None] / 2 + (b - a)[..., None] / 2 * t  # (n, panels, nodes)
    wt = (b - a)[..., None] / 2 * w
    z = (f - m[:, None, None]) / sd[:, None, None]
    dens = wt * np.exp(-0.5 * z**2) / (np.sqrt(2 * np.pi) * sd[:, None, None])
    dp = _sigmoid_difference(f, m[:, None, None])
    e1 = (dens * dp).sum(axis=(1, 2))
    e2 = (dens * dp**2).sum(axis=(1, 2))
    out[ok] = np.maximum(e2 - e1**2, 0.0)
    return out.reshape(shape)


def estimates(cfg: MLPConfig, theta: np.ndarray, data_x: np.ndarray, data_y: np.ndarray, xs: np.ndarray,
              laplace: bool = True) -> dict[str, np.ndarray]:
    """Every local estimate at θ* for the queries ``xs``.

    Parameters
    ----------
    cfg : MLPConfig
        Model.
    theta : numpy.ndarray
        The MAP θ*.
    data_x, data_y : numpy.ndarray
        Training data (for the Hessians).
    xs : numpy.ndarray
        Queries.
    laplace : bool
        Also compute the Hessian-based estimates (needs ``n_params ≤ EXACT_HESSIAN_MAX_PARAMS``).

    Returns
    -------
    dict of numpy.ndarray
        ``f`` (the MAP output), ``iso_f``, ``prior_f`` and (with ``laplace``) ``laplace_f``,
        ``ggn_f``, ``diag_f``;
        for classification also each ``<name>_p`` = (p(1−p))² × ``<name>_f`` (the delta
        method), with ``laplace`` the GLM predictives ``laplace_glm_p`` and ``ggn_glm_p``
        (:func:`glm_predictive_variance`), ``p``, ``aleatoric`` = p(1−p) and
        ``sigmoid_sq`` = (p(1−p))². Arrays of shape ``(n,)``.
    """
    if cfg.task == "multiclass":  # the predicted class's probability, directly
        p_all = class_probabilities(cfg, theta, xs)
        c = p_all.argmax(axis=1)
        J = class_jacobian(cfg, theta, xs, c)
        out = {"p": p_all[np.arange(len(xs)), c], "pred_class": c.astype(float)}
        space = "p"
    else:
        J = jacobian(cfg, theta, xs)
        out = {"f": np.asarray(x64(lambda: forward(cfg, jnp.asarray(theta), jnp.asarray(xs)))())}
        space = "f"
    out.update({f"iso_{space}": np.sum(J**2, axis=1), f"prior_{space}": J**2 @ prior_std(cfg) ** 2})
    if laplace:
        prec = posterior_precisions(cfg, theta, data_x, data_y)
        for name in ("laplace", "ggn", "diag"):
            out[f"{name}_{space}"] = _quad_inv(prec[name], J)
    return with_probability_space(cfg.task, out)


def with_probability_space(task: str, logit_space: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The logit-space estimates plus everything :func:`estimates` derives from them.

    Parameters
    ----------
    task : {"classification", "multiclass", "regression"}
        Regression has no probability space: the estimates come back unchanged; multiclass
        estimates are already in probability space: ``aleatoric`` = p(1−p) is added.
    logit_space : dict of numpy.ndarray
        ``f`` and the ``<name>_f`` estimates (what the results store keeps).

    Returns
    -------
    dict of numpy.ndarray
        For classification also ``<name>_p`` = (p(1−p))² × ``<name>_f`` (the delta method),
        the GLM predictives ``laplace_glm_p`` and ``ggn_glm_p`` when their ``_f`` is there,
        ``p``, ``aleatoric`` = p(1−p) and ``sigmoid_sq`` = (p(1−p))².
    """
    out = dict(logit_space)
    if task == "multiclass":
        out["aleatoric"] = out["p"] * (1 - out["p"])
        return out
    if task != "classification":
        return out
    f = out["f"]
    p = 1.0 / (1.0 + np.exp(-f))
    s2 = (p * (1 - p)) ** 2
    for k in [k for k in out if k.endswith("_f")]:
        out[k[:-2] + "_p"] = s2 * out[k]
    for name in ("laplace", "ggn"):  # the GLM predictive: Var[σ(f)] with f ~ N(f*, gᵀΣg), no second linearisation
        if f"{name}_f" in out:
            out[f"{name}_glm_p"] = glm_predictive_variance(f, out[f"{name}_f"])
    out.update(p=p, aleatoric=p * (1 - p), sigmoid_sq=s2)
    return out


def ntk_view(cfg: MLPConfig, theta: np.ndarray, x_train: np.ndarray, xs: np.ndarray,
             rel_tol: float = 1e-6) -> dict[str, np.ndarray]:
    """The tangent-kernel view of ‖g‖², cheap for any number of parameters.

    With J_X the training-point gradients (rows) and g = ∇θ f(x), the isotropic estimate
    is the NTK diagonal Θ(x, x) = ‖g‖². The GGN-Laplace variance under the prior
    covariance Σ₀ is, by Woodbury,
    gᵀΣ₀g − gᵀΣ₀J_Xᵀ (J_X Σ₀ J_Xᵀ + Λ⁻¹)⁻¹ J_X Σ₀ g: a prior term minus what the training
    data explain. How much of g lies in the span of the training gradients decides how
    far the two can differ.

    Returns
    -------
    dict of numpy.ndarray
        ``iso_f`` (‖g‖²), ``ggn_f`` (the GGN-Laplace variance above, at θ* = ``theta``),
        ``span_frac`` (‖Π g‖² / ‖g‖², Π the orthogonal projector onto span{rows of J_X},
        singular values below ``rel_tol``·max dropped), ``rank`` (dim of that span,
        broadcast to the queries' shape) and ``out_share`` (the share of ‖g‖² in the output
        layer's weights and bias, whose gradient is the last hidden activation and 1).
    """
    Jx = jacobian(cfg, theta, x_train)
    Jq = jacobian(cfg, theta, xs)
    s0 = prior_std(cfg) ** 2
    f = np.asarray(x64(lambda: forward(cfg, jnp.asarray(theta), jnp.asarray(x_train)))())
    if cfg.task == "classification":
        p = 1.0 / (1.0 + np.exp(-f))
        lam_inv = 1.0 / np.maximum(p * (1 - p), 1e-300)
    else:
        lam_inv = np.full(len(x_train), cfg.noise_sigma**2)
    ggn_f = kernel_residual((Jq**2) @ s0, (Jq * s0) @ Jx.T, (Jx * s0) @ Jx.T, lam_inv)
    _, sv, Vt = np.linalg.svd(Jx, full_matrices=False)
    V = Vt[sv > rel_tol * sv.max()]
    iso = np.sum(Jq**2, axis=1)
    span = np.sum((Jq @ V.T) ** 2, axis=1) / np.maximum(iso, 1e-300)
    fan_in, fan_out = layer_shapes(cfg)[-1]
    out = np.sum(Jq[:, -(fan_in * fan_out + fan_out):] ** 2, axis=1) / np.maximum(iso, 1e-300)
    return {"iso_f": iso, "ggn_f": ggn_f, "span_frac": span, "rank": np.full(len(xs), len(V)), "out_share": out}
