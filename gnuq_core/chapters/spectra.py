"""Chapter 03, Hessian spectra: is the curvature at θ* close enough to isotropic to rank like it?

Three parts, all through the results store (`gnuq_core.isotropy.stored`):

* **exact spectra** of the Hessian and GGN of MLPs of several widths on chapter 02's task,
  and, per damping λ, how well the isotropic score λ⁻¹‖g‖² ranks like the exact
  g⊤(GGN + λI)⁻¹g on a query grid;
* **stochastic Lanczos quadrature** (SLQ) on a large MLP (checked first against a
  spectrum known exactly), with the exact predictive variance from a Woodbury solve;
* SLQ of the **last block of a language model**.

`run` computes them, records claim C5 (Spearman ρ(exact, isotropic) of the widest exact
case at the natural damping) and returns the glued values, tables and figure data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnuq_core import stats
from gnuq_core.chapters.base import COUNT, ChapterParams, Result, param, store_words
from gnuq_core.isotropy import spectra, stored
from gnuq_core.options import Rule
from gnuq_core.repro import display as book
from gnuq_core.repro.claims import Measurement, judge, record

__all__ = ["Params", "run", "figure_exact_spectra", "figure_slq_mlp", "figure_slq_lm", "figure_damping"]

KINDS = ["hessian_exact", "hessian_slq_mlp", "hessian_slq_lm"]
LOG_T = np.linspace(-12, 2, 561)
"""Thresholds log₁₀ λ of the 'fraction of eigenvalues ≥ λ' curves of the MLPs."""
LOG_R = np.linspace(-6, 0, 241)
"""Thresholds log₁₀(λ / λ_max) of the LM block's spectral-mass curves."""


@dataclass(frozen=True)
class Params(ChapterParams):
    """Chapter 03's parameters (defaults: the paper edition)."""

    CHAPTER = "03_hessian_spectra"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        "quick": {"widths": [4, 8, 16, 32, 48], "big_width": 320, "big_steps": 1000, "slq_probes": 4,
                  "slq_steps": 40, "n_query": 20, "lm_source": "smollm2", "lm_tokens": 128, "lm_probes": 2,
                  "lm_steps": 20, "n_boot": 1000},
        "smoke": {"widths": [4], "n_train": 80, "train_steps": 200, "n_dampings": 5, "n_grid": 6, "big_width": 12,
                  "big_steps": 50, "slq_probes": 2, "slq_steps": 8, "n_query": 6, "lm_source": "tiny-random",
                  "lm_tokens": 24, "lm_probes": 1, "lm_steps": 4, "n_boot": 50},
    }
    seed: int = param(0, Rule(minimum=0, maximum=2**32 - 1, integer=True),
                      "seeds data, initialisation and Lanczos probes")
    widths: list = param([4, 8, 16, 32, 48, 64, 96], Rule(minimum=1, nonempty=True, integer=True),
                         "hidden widths (two layers) of the MLPs with exact spectra")
    n_train: int = param(400, Rule(minimum=2, integer=True), "training points of the 2-D task of chapter 02")
    train_steps: int = param(2000, COUNT, "full-batch Adam steps to θ*")
    weight_decay: float = param(0.001, Rule(minimum=0), "prior precision per example, also the natural damping λ")
    n_dampings: int = param(11, Rule(minimum=2, integer=True), "dampings on a log grid from 1e-5 to 1")
    n_grid: int = param(20, Rule(minimum=2, integer=True), "query grid n_grid × n_grid over [−4, 4]²")
    big_width: int = param(500, COUNT, "hidden width of the large MLP (about 2.5e5 parameters at 500)")
    big_steps: int = param(3000, COUNT, "its training steps")
    slq_probes: int = param(16, COUNT, "random probes of stochastic Lanczos quadrature")
    slq_steps: int = param(100, COUNT, "Lanczos steps per probe")
    n_query: int = param(200, COUNT, "queries for the Lanczos-quadrature check on the large MLP")
    lm_source: str = param("smollm2", Rule(choices=("smollm2", "tiny-random")),
                           "smollm2 (SmolLM2-135M-Instruct) or tiny-random (a random 2-layer Llama)")
    lm_tokens: int = param(512, Rule(minimum=2, integer=True), "tokens of local text for the LM block's curvature")
    lm_probes: int = param(8, COUNT, "SLQ probes for the LM block")
    lm_steps: int = param(60, COUNT, "Lanczos steps per probe for the LM block")
    n_boot: int = param(5000, COUNT, "bootstrap resamples of query points")
    store_verify: int = param(1, Rule(minimum=0, integer=True),
                              "stored items of each kind recomputed from scratch and compared (the paper edition)")

    @property
    def dampings(self) -> list[float]:
        """The damping grid λ: ``n_dampings`` values, log-spaced from 1e-5 to 1."""
        return list(np.logspace(-5, 0, self.n_dampings))


def _exact(p: Params, store: Any, out: Result) -> list[dict[str, Any]]:
    import pandas as pd

    cases = stored.exact_cases(p.widths, seed=p.seed, n_train=p.n_train, steps=p.train_steps,
                               weight_decay=p.weight_decay, dampings=p.dampings, n_grid=p.n_grid, store=store,
                               verify=p.store_verify)
    rows = [{"width": c["width"], "n_params": c["n_params"], "kind": "GGN" if kind == "ggn" else "Hessian",
             **c["summary"][kind]} for c in cases for kind in ("hessian", "ggn")]
    out.tables["spectra"] = book.table(pd.DataFrame(rows), {
        "width": ("width", "d"), "n_params": ("parameters", ","), "kind": "curvature",
        "lambda_max": ("largest eigenvalue", ".3g"), "n_outliers": ("outliers", "d"),
        "frac_below_damping": ("below damping", ".1%"), "frac_negative": ("negative (< −λ)", ".1%"),
        "effective_dim": ("effective dimension", ".1f"), "effective_frac": ("effective dim. / P", ".1%")},
        caption="Exact spectra at the natural damping λ = weight decay")
    widest = cases[-1]
    sg, sh = widest["summary"]["ggn"], widest["summary"]["hessian"]
    out.values.update(
        lam0=p.weight_decay, w_max=widest["width"], p_max=widest["n_params"], ggn_outliers=sg["n_outliers"],
        ggn_below=100 * sg["frac_below_damping"], ggn_deff=sg["effective_dim"], ggn_deff_frac=100 * sg["effective_frac"],
        hess_neg=100 * sh["frac_negative"], hess_below=100 * sh["frac_below_damping"],
        ggn_below_small=100 * cases[0]["summary"]["ggn"]["frac_below_damping"], p_small=cases[0]["n_params"])
    return cases


def _large(p: Params, store: Any, widest: dict[str, Any], out: Result) -> dict[str, Any]:
    # The diagonal matrix of the exact eigenvalues as a matrix-vector product (elementwise, exact).
    check = spectra.slq(lambda v: widest["ggn_eigs"] * v, widest["n_params"], n_probes=p.slq_probes,
                        m=p.slq_steps, seed=p.seed)
    big = stored.large_mlp(p.big_width, seed=p.seed, n_train=p.n_train, steps=p.big_steps,
                           weight_decay=p.weight_decay, n_probes=p.slq_probes, m=p.slq_steps, n_query=p.n_query,
                           n_grid=p.n_grid, store=store, verify=p.store_verify)
    lam = p.weight_decay
    check_below = check.fraction(lambda x: np.abs(x) < lam)
    check_gap = abs(check_below - widest["summary"]["ggn"]["frac_below_damping"])  # 2 points of mass below λ
    out.values.update(
        big_p=big["n_params"], big_below=100 * big["ggn"].fraction(lambda x: np.abs(x) < lam),
        big_hess_below=100 * big["hessian"].fraction(lambda x: np.abs(x) < lam),
        big_deff=big["ggn"].trace(lambda x: np.clip(x, 0, None) / (np.clip(x, 0, None) + lam)),
        big_lmax=float(max(n.max() for n in big["ggn"].nodes)),
        check_below_true=100 * widest["summary"]["ggn"]["frac_below_damping"], check_below_slq=100 * check_below,
        slq_check_words="SLQ reproduces the known spectrum" if check_gap <= 0.02 else
        "With this few probes and Lanczos steps SLQ reproduces the known spectrum only roughly")
    out.data.update(check=check, big=big)
    return big


def _lm(p: Params, store: Any, out: Result) -> dict[str, Any]:
    import torch

    torch.manual_seed(p.seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    lm = stored.lm_block(p.lm_source, n_tokens=p.lm_tokens, n_probes=p.lm_probes, m=p.lm_steps, seed=p.seed,
                         store=store, verify=p.store_verify)
    res = lm["slq"]
    lmax = float(max(n.max() for n in res.nodes))
    out.values.update(
        lm_tokens_val=p.lm_tokens, lm_name=lm["name"], lm_dim=lm["dim"], lm_loss=lm["loss"], lm_lmax=lmax,
        lm_lmin=float(min(n.min() for n in res.nodes)),
        lm_bulk3=100 * res.fraction(lambda x: np.abs(x) < 1e-3 * lmax),
        lm_bulk2=100 * res.fraction(lambda x: np.abs(x) < 1e-2 * lmax),
        lm_neg=100 * res.fraction(lambda x: x < -1e-2 * lmax),
        lm_shape_words="the same outliers-plus-bulk shape as the MLPs"
        if res.fraction(lambda x: np.abs(x) < 1e-2 * lmax) > 0.9 else
        "unlike the MLPs, no dominant bulk near zero in this build's model and settings",
        lm_probes_val=p.lm_probes, lm_steps_val=p.lm_steps)
    out.data["lm"] = lm
    return lm


def _damping(p: Params, cases: list[dict[str, Any]], big: dict[str, Any], out: Result) -> tuple[float, float, float]:
    """The isotropic ranking against the exact one, per width and damping; C5's ρ and CI."""
    import pandas as pd

    dampings, widest = p.dampings, cases[-1]
    j0 = int(np.argmin(np.abs(np.log(np.array(dampings) / p.weight_decay))))
    rho_c5, lo_c5, hi_c5 = stats.bootstrap_spearman(widest["exact"], widest["isotropic"], n_boot=p.n_boot, seed=p.seed)
    _, big_lo, big_hi = stats.bootstrap_spearman(big["exact"], big["isotropic"], n_boot=p.n_boot, seed=p.seed)
    lanczos_err = float(np.median(np.abs(big["lanczos"] / big["exact"] - 1)))
    out.values.update(
        slq_steps_val=p.slq_steps, n_train_val=p.n_train, n_query_val=p.n_query, c5_rho=rho_c5, c5_lo=lo_c5,
        c5_hi=hi_c5, c5_rel=float(np.median(widest["isotropic"] / widest["exact"] - 1)),
        rho_small_lam=widest["rho"][0], lam_small=float(dampings[0]), rho_big_lam=widest["rho"][-1],
        rel_big_lam=widest["median_rel_error"][-1], lam_big=float(dampings[-1]), rho_w_min=cases[0]["rho"][j0],
        big_rho=big["rho"], big_rel=big["median_rel_error"], big_rho_lo=big_lo, big_rho_hi=big_hi,
        big_lanczos_err=lanczos_err, big_rho_lanczos=big["rho_lanczos"], big_rank_share=100 * big["rank_share"],
        lanczos_verdict="the quadrature adds no visible error" if lanczos_err < 1e-3
        else "part of any gap between the Lanczos and the exact ranking is quadrature error",
        big_vs_small=("lower than" if big_hi < rho_c5 else "higher than" if big_lo > rho_c5 else "consistent with")
        + f" the width-{widest['width']} net's")
    shown = range(0, len(dampings), 2)
    table = pd.DataFrame([{"width": c["width"], "n_params": c["n_params"], **{f"lam{j}": c["rho"][j] for j in shown}}
                          for c in cases])
    out.tables["rho"] = book.table(table, {"width": ("width", "d"), "n_params": ("parameters", ","),
                                           **{f"lam{j}": (f"λ = {dampings[j]:.0e}", ".3f") for j in shown}},
                                   caption="Spearman ρ(exact, isotropic) by width and damping")
    out.data["j0"] = j0
    return rho_c5, lo_c5, hi_c5


def run(p: Params, store: Any, profile: str) -> Result:
    """All three parts through ``store``; records claim C5 (settings name ``profile``)."""
    from IPython.display import Markdown

    out = Result()
    cases = _exact(p, store, out)
    big = _large(p, store, cases[-1], out)
    lm = _lm(p, store, out)
    out.values["store_words"] = Markdown(store_words(store,
        "The expensive results of this chapter (per width the exact spectra and the trained parameters; the large "
        "MLP's SLQ probes, query points and trained parameters; the LM block's SLQ probes)", KINDS))
    rho_c5, lo_c5, hi_c5 = _damping(p, cases, big, out)
    widest, j0 = cases[-1], out.data["j0"]
    v = out.values
    big_verdict = judge(Measurement("C5", float(v["big_rho"]), (float(v["big_rho_lo"]), float(v["big_rho_hi"])),
                                    evidence={"query_points": int(len(big["exact"])), "seeds": 1}))
    note = (f"the same rule applied to the {big['n_params']:,}-parameter MLP (its quadratic forms by Woodbury) says "
            f"'{big_verdict}' (ρ = {v['big_rho']:.3f} [{v['big_rho_lo']:.3f}, {v['big_rho_hi']:.3f}]); the claim's "
            f"number is the width-{widest['width']} net's, whose Hessian is exact")
    c5 = record(Measurement(
        "C5", float(rho_c5), (float(lo_c5), float(hi_c5)),
        settings={"profile": profile, "width": widest["width"], "n_params": widest["n_params"],
                  "damping": p.weight_decay, "n_queries": int(len(widest["exact"])), "n_train": p.n_train,
                  "seed": p.seed},
        details={"ggn_summary": widest["summary"]["ggn"], "hessian_summary": widest["summary"]["hessian"],
                 "rho_by_width": {str(c["width"]): c["rho"][j0] for c in cases},
                 "median_rel_error": float(np.median(widest["isotropic"] / widest["exact"] - 1)),
                 "large_mlp": {"n_params": big["n_params"], "rho": big["rho"],
                               "median_rel_error": big["median_rel_error"]},
                 "lm_block": {"model": lm["name"], "n_params": lm["dim"], "lambda_max": out.values["lm_lmax"],
                              "lambda_min": out.values["lm_lmin"]}},
        note=note, evidence={"query_points": int(len(widest["exact"])), "seeds": 1}))
    out.values["c5_verdict"] = c5["verdict"]
    out.data["cases"] = cases
    return out


# ----------------------------------------------------------------------------- figures


def figure_exact_spectra(result: Result, p: Params) -> Any:
    """Sorted |eigenvalues| of the Hessian (× = negative) and GGN per width, with the damping."""
    fig, axes = book.subplots(1, 2, panel_height=3.4, sharey=True)
    for ax, key, title in [(axes[0], "hess_eigs", "Hessian (|λ|; × = negative)"), (axes[1], "ggn_eigs", "GGN")]:
        for i, c in enumerate(result.data["cases"]):
            e = np.sort(c[key])[::-1]
            rank = np.arange(1, e.size + 1) / e.size
            ax.plot(rank, np.maximum(np.abs(e), 1e-12), color=f"C{i}", label=f"w={c['width']} (P={c['n_params']})")
            if key == "hess_eigs":
                neg = e < -p.weight_decay
                ax.plot(rank[neg], np.abs(e[neg]), "x", ms=3, color=f"C{i}")
        ax.axhline(p.weight_decay, color="k", ls="--", lw=1, label="damping λ")
        ax.set(yscale="log", xlabel="eigenvalue rank / P", title=title, ylim=(1e-10, None))
    axes[0].set_ylabel("eigenvalue")
    fig.legend(*axes[1].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig


def _fraction_above(res: Any) -> np.ndarray:
    """SLQ's fraction of eigenvalues with |λ| ≥ 10^t for each t of `LOG_T`."""
    return np.array([res.fraction(lambda x, t=t: np.abs(x) >= 10.0**t) for t in LOG_T])


def figure_slq_mlp(result: Result, p: Params) -> Any:
    """SLQ against the exact spectrum of the widest exact case (left); SLQ of the large MLP (right).

    The fraction of eigenvalues with |λ| ≥ 10^t on a log scale: SLQ estimates exactly this
    (a sum of quadrature weights), and the log scale shows the outliers (about 1/P each)
    and the mass below the damping in one picture (a density would be one tall spike)."""
    widest, check, big = result.data["cases"][-1], result.data["check"], result.data["big"]
    true_abs = np.sort(np.abs(widest["ggn_eigs"]))
    fig, axes = book.subplots(1, 2, panel_height=3.2, sharey=True)
    axes[0].plot(LOG_T, 1 - np.searchsorted(true_abs, 10.0**LOG_T) / true_abs.size, color="0.4", lw=3,
                 label="exact eigenvalues")
    axes[0].step(LOG_T, _fraction_above(check), where="post", color="C3",
                 label=f"SLQ ({p.slq_probes}×{p.slq_steps} HVPs)")
    axes[0].set(xlabel="log₁₀ λ", ylabel="fraction of eigenvalues ≥ λ", yscale="log",
                title=f"Check: GGN, width {widest['width']}", ylim=(0.3 / widest["n_params"], 1.5))
    axes[0].legend(loc="lower left")
    for res, label, color in [(big["hessian"], "Hessian (|λ|)", "C0"), (big["ggn"], "GGN", "C2")]:
        axes[1].step(LOG_T, _fraction_above(res), where="post", color=color, label=label)
    for ax in axes:
        ax.axvline(np.log10(p.weight_decay), color="k", ls="--", lw=1, label="damping λ" if ax is axes[1] else None)
    axes[1].set(xlabel="log₁₀ |λ|", title=f"MLP width {p.big_width}, P = {big['n_params']:,}")
    axes[1].legend(loc="lower left")
    return fig


def figure_slq_lm(result: Result) -> Any:
    """The LM block's spectral mass above a threshold relative to λ_max, and of negative curvature."""
    lm = result.data["lm"]
    res, lmax = lm["slq"], result.values["lm_lmax"]
    above = np.array([res.fraction(lambda x, r=r: np.abs(x) >= 10.0**r * lmax) for r in LOG_R])
    negative = np.array([res.fraction(lambda x, r=r: x <= -(10.0**r) * lmax) for r in LOG_R])
    fig, ax = book.subplots(panel_height=3.2)
    ax.step(LOG_R, above, where="post", color="C4", label="|λ| ≥ threshold")
    ax.step(LOG_R, negative, where="post", color="C1", label="λ ≤ −threshold (negative curvature)")
    for r in (-3, -2):
        ax.axvline(r, color="k", ls=":", lw=1)
    ax.set(xlabel="log₁₀(threshold / λ_max)", ylabel="fraction of spectral mass", yscale="log",
           ylim=(0.3 / lm["dim"], 1.5), title=f"{lm['name']}: last block ({lm['dim']:,} parameters)")
    ax.legend(loc="lower left")
    return fig


def figure_damping(result: Result, p: Params) -> Any:
    """Ranking agreement (left) and magnitude error (right) of the isotropic score per damping."""
    cases, big, dampings = result.data["cases"], result.data["big"], p.dampings
    fig, axes = book.subplots(1, 2, panel_height=3.2)
    for i, c in enumerate(cases):
        axes[0].plot(dampings, c["rho"], "o-", ms=3, color=f"C{i}", label=f"w={c['width']} (P={c['n_params']})")
        axes[1].plot(dampings, c["median_rel_error"], "o-", ms=3, color=f"C{i}")
    axes[0].plot([p.weight_decay], [big["rho"]], "k*", ms=10, label=f"P={big['n_params']:,} (Woodbury)")
    axes[1].plot([p.weight_decay], [big["median_rel_error"]], "k*", ms=10)
    for ax in axes:
        ax.axvline(p.weight_decay, color="k", ls="--", lw=1)
        ax.set(xscale="log", xlabel="damping λ")
    axes[0].set(ylabel="Spearman ρ(exact, isotropic)", title="Ranking agreement")
    axes[1].set(yscale="log", ylabel="median relative error", title="Magnitude: λ⁻¹‖g‖² / exact − 1")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig
