"""Chapter 02, proxy bias: a covariance estimated on proxy data against the isotropic score.

Two experiments, both through the results store (`gnuq_core.isotropy.proxy_stored`):

* the **synthetic sweep**: an MLP on a 2-D task, its GGN on the training data (the
  reference) against the GGN on proxy data shifted by δ, the diagonal GGN, and isotropy,
  over ``n_seeds`` seeds and every shift of ``deltas``;
* the **sentence-encoder experiment**: an MLP head on MiniLM embeddings of TruthfulQA,
  its curvature on the fine-tuning data against proxies from the same and another source.

`run` computes both, records claim C4 (ρ(isotropic) − ρ(proxy) at the largest shift) and
returns the glued values, the tables and what the figures draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gnuq_core import stats
from gnuq_core.chapters.base import COUNT, NONNEG, ChapterParams, Result, param, store_words
from gnuq_core.isotropy import proxy, proxy_stored, text_proxy
from gnuq_core.isotropy.proxy import sample_task
from gnuq_core.options import Rule
from gnuq_core.repro import display as book
from gnuq_core.repro.claims import Measurement, record

__all__ = ["Params", "run", "TEXT_METHODS", "figure_rho_vs_shift", "figure_gain_loss", "figure_text_rho"]

TEXT_METHODS = {"proxy_same": "same-source proxy (TruthfulQA)", "proxy_other": "other-source proxy (TriviaQA)",
                "proxy_same_diag": "same-source proxy, diagonal", "proxy_other_diag": "other-source proxy, diagonal",
                "reference_diag": "training data, diagonal", "isotropic": "isotropic ‖g‖²"}
"""The covariances of the sentence-encoder experiment, as the page names them."""
GRID_EXTENT = 4.0
"""The query grid covers [−4, 4]²."""


@dataclass(frozen=True)
class Params(ChapterParams):
    """Chapter 02's parameters (defaults: the paper edition)."""

    CHAPTER = "02_proxy_bias"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        "quick": {"n_seeds": 5, "deltas": [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0], "n_grid": 25, "text_seeds": 3,
                  "n_boot": 1000},
        "smoke": {"n_seeds": 2, "deltas": [0.0, 4.0], "n_train": 80, "hidden_width": 6, "train_steps": 200,
                  "k_top": 3, "n_grid": 8, "text_n_truthfulqa": 60, "text_seeds": 1, "text_hidden": 4,
                  "text_steps": 100, "n_boot": 50},
    }
    seed: int = param(0, Rule(minimum=0, maximum=2**32 - 1, integer=True),
                      "first seed; the synthetic sweep uses seeds seed, seed+1, …")
    n_seeds: int = param(30, COUNT, "independent repetitions (data, network, proxy samples) of the synthetic sweep")
    deltas: list = param([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0], Rule(nonempty=True),
                         "shifts of the proxy distribution (in units of the input sd)")
    n_train: int = param(400, Rule(minimum=2, integer=True), "training points (the proxy sets have the same size)")
    hidden_width: int = param(32, COUNT, "width of both hidden layers of the synthetic MLP")
    train_steps: int = param(2000, COUNT, "full-batch Adam steps")
    weight_decay: float = param(0.001, NONNEG, "per-example prior precision; alpha is n_train times this")
    k_top: int = param(10, COUNT, "dimension of the top eigenspaces compared by principal angles")
    n_grid: int = param(40, Rule(minimum=2, integer=True), "the query grid is n_grid × n_grid over [−4, 4]²")
    text_n_truthfulqa: int = param(817, Rule(minimum=2, integer=True),
                                   "TruthfulQA questions of the transformer experiment (hash order)")
    text_seeds: int = param(10, COUNT, "head initialisations")
    text_hidden: int = param(16, COUNT, "hidden width of the head on the 384-d sentence embedding")
    text_steps: int = param(1500, COUNT, "Adam steps of the head")
    text_weight_decay: float = param(0.01, NONNEG, "head prior precision per example")
    n_boot: int = param(5000, COUNT, "bootstrap resamples of the query points")
    store_verify: int = param(1, Rule(minimum=0, integer=True),
                              "stored items of each kind recomputed from scratch and compared (the paper edition)")


def _with_ci(t: tuple[float, float, float]) -> str:
    """A mean and its 95% CI, e.g. ``0.912 [0.874, 0.951]``."""
    return f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"


def _synthetic(p: Params, store: Any, out: Result) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import pandas as pd

    runs = proxy_stored.synthetic_runs(range(p.seed, p.seed + p.n_seeds), p.deltas, n_train=p.n_train,
                                       hidden=[p.hidden_width, p.hidden_width], steps=p.train_steps,
                                       weight_decay=p.weight_decay, k_top=p.k_top, n_grid=p.n_grid,
                                       store=store, verify=p.store_verify)
    summary = proxy.summarise(runs, p.deltas)
    sweep = pd.DataFrame({"delta": p.deltas, **{k: [_with_ci(summary[k][j]) for j in range(len(p.deltas))]
                                                for k in ("rho_proxy", "rho_proxy_diag", "diff", "overlap")}})
    out.tables["sweep"] = book.table(sweep, {"delta": ("proxy shift δ", "g"),
                                             "rho_proxy": ("ρ proxy, full GGN", "", True),
                                             "rho_proxy_diag": ("ρ proxy, diagonal GGN", "", True),
                                             "diff": ("ρ isotropic − ρ proxy", "", True),
                                             "overlap": (f"top-{p.k_top} eigenspace overlap", "", True)},
                                     caption=f"Synthetic sweep: mean [95% CI] over {p.n_seeds} seeds")
    j_max = len(p.deltas) - 1
    mi, loi, hii = summary["rho_iso"]
    diff_max, diff_lo, diff_hi = summary["diff"][j_max]
    cross_point, cross_ci = summary["crossover_point"], summary["crossover_ci"]
    struct = summary["structure"][j_max]
    lr_max = np.array([r["log_ratio"][j_max] for r in runs]) / np.log(10)
    out.values.update(
        n_params_synth=runs[0]["n_params"], n_seeds=p.n_seeds, train_acc=float(np.mean([r["train_acc"] for r in runs])),
        delta_max=float(p.deltas[j_max]), rho_iso=mi, rho_iso_lo=loi, rho_iso_hi=hii,
        rho_proxy_0=summary["rho_proxy"][0][0], rho_proxy_max=summary["rho_proxy"][j_max][0],
        rho_proxy_diag_max=summary["rho_proxy_diag"][j_max][0], rho_ref_diag=summary["rho_ref_diag"][0],
        diff_max=diff_max, diff_max_lo=diff_lo, diff_max_hi=diff_hi, diff_0=summary["diff"][0][0],
        overlap_0=summary["overlap"][0][0], overlap_max=summary["overlap"][j_max][0],
        crossover_text=(f"from δ = {cross_ci:g} on, the whole 95% CI of ρ(isotropic) − ρ(proxy) lies above zero"
                        if np.isfinite(cross_ci) else
                        "at no shift in this sweep does the CI of ρ(isotropic) − ρ(proxy) lie entirely above zero")
        + (f"; the point estimate first turns positive at δ = {cross_point:g}" if np.isfinite(cross_point)
           else "; the point estimate is never positive"),
        k_top_val=p.k_top, structure_max=struct[0], structure_max_lo=struct[1], structure_max_hi=struct[2],
        structure_0=summary["structure"][0][0], lr_range_lo=float(np.percentile(lr_max, 5)),
        lr_range_hi=float(np.percentile(lr_max, 95)))
    out.data.update(runs=runs, summary=summary)
    return runs, summary


def _text(p: Params, store: Any, out: Result) -> list[dict[str, Any]]:
    import pandas as pd

    split = text_proxy.make_split(text_proxy.load_truthfulqa(), text_proxy.load_triviaqa(),
                                  n_truthfulqa=p.text_n_truthfulqa)
    texts = {k: [r[0] if isinstance(r, tuple) else r for r in v] for k, v in split.items()}
    labels = {k: np.array([y for _, y in split[k]], float) for k in ("train", "query_same")}
    runs = proxy_stored.text_runs(texts, labels, range(p.seed, p.seed + p.text_seeds), hidden=[p.text_hidden],
                                  steps=p.text_steps, weight_decay=p.text_weight_decay, k_top=p.k_top,
                                  store=store, verify=p.store_verify)
    methods = list(TEXT_METHODS)
    r0 = runs[0]  # CI: bootstrap over query points (first head seed), paired with the reference
    ci = {m: stats.bootstrap_spearman(r0["u"][m], r0["u"]["reference"], n_boot=p.n_boot, seed=p.seed) for m in methods}
    d_other = stats.bootstrap_spearman_difference(r0["u"]["reference"], r0["u"]["isotropic"], r0["u"]["proxy_other"],
                                                  n_boot=p.n_boot, seed=p.seed)
    d_same = stats.bootstrap_spearman_difference(r0["u"]["reference"], r0["u"]["isotropic"], r0["u"]["proxy_same"],
                                                 n_boot=p.n_boot, seed=p.seed)
    rho_mean = {m: float(np.mean([r["rho"][m] for r in runs])) for m in methods}
    table = pd.DataFrame({
        "method": [TEXT_METHODS[m] for m in methods], "rho": [rho_mean[m] for m in methods],
        "ci": [f"[{ci[m][1]:.3f}, {ci[m][2]:.3f}]" for m in methods],
        "rho_same": [np.mean([r["rho_by_domain"]["same"][m] for r in runs]) for m in methods],
        "rho_other": [np.mean([r["rho_by_domain"]["other"][m] for r in runs]) for m in methods]})
    out.tables["text"] = book.table(table, {"method": "covariance from",
                                            "rho": ("ρ with reference, all queries", ".3f"),
                                            "ci": ("95% CI (first seed)", "", True),
                                            "rho_same": ("ρ, TruthfulQA queries", ".3f"),
                                            "rho_other": ("ρ, TriviaQA queries", ".3f")},
                                    caption=f"Spearman ρ with the reference, mean over {p.text_seeds} head seeds")
    sizes = {k: len(v) for k, v in split.items()}
    out.values.update(
        text_sizes=", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sizes.items()), text_n_params=runs[0]["n_params"],
        text_test_acc=float(np.mean([r["test_acc"] for r in runs])),
        text_train_acc=float(np.mean([r["train_acc"] for r in runs])),
        **{f"text_rho_{m}": rho_mean[m] for m in methods},
        text_diff_other=d_other[0], text_diff_other_lo=d_other[1], text_diff_other_hi=d_other[2],
        text_diff_same=d_same[0], text_diff_same_lo=d_same[1], text_diff_same_hi=d_same[2],
        text_overlap_same=float(np.mean([r["overlap"]["proxy_same"] for r in runs])),
        text_overlap_other=float(np.mean([r["overlap"]["proxy_other"] for r in runs])), text_seeds_val=p.text_seeds,
        text_same_vs_iso="better than" if rho_mean["proxy_same"] > rho_mean["isotropic"] else "worse than",
        text_other_vs_same="worse" if rho_mean["proxy_other"] < rho_mean["proxy_same"] else "no worse")
    out.data.update(text_runs=runs, text_ci=ci, text_diffs=(d_other, d_same))
    return runs


def run(p: Params, store: Any, profile: str) -> Result:
    """Both experiments through ``store``; records claim C4 (settings name ``profile``)."""
    from IPython.display import Markdown

    out = Result()
    runs, summary = _synthetic(p, store, out)
    text_runs = _text(p, store, out)
    out.values["store_words"] = Markdown(store_words(store,
        "The expensive results of this chapter (the synthetic sweep, one item per seed: a training run and the GGN of "
        "every proxy shift; the sentence-encoder experiment, one item per head seed: the MiniLM embeddings, the head's "
        "training and curvatures)", proxy_stored.KINDS))
    out.values["synth_0_vs_iso"] = "more" if summary["rho_proxy"][0][0] > summary["rho_iso"][0] else "less"
    diff_max, diff_lo, diff_hi = summary["diff"][len(p.deltas) - 1]
    d_other, d_same = out.data["text_diffs"]
    c4 = record(Measurement(
        "C4", float(diff_max), (float(min(diff_lo, diff_max)), float(max(diff_hi, diff_max))),
        settings={"profile": profile, "n_seeds": p.n_seeds, "deltas": p.deltas, "n_train": p.n_train,
                  "hidden": [p.hidden_width, p.hidden_width], "n_params": runs[0]["n_params"],
                  "weight_decay": p.weight_decay, "text_model": "all-MiniLM-L6-v2 + MLP head",
                  "text_n_truthfulqa": p.text_n_truthfulqa},
        details={"rho_iso": summary["rho_iso"][0], "rho_proxy_by_delta": [t[0] for t in summary["rho_proxy"]],
                 "overlap_by_delta": [t[0] for t in summary["overlap"]],
                 "crossover_point": summary["crossover_point"], "crossover_ci": summary["crossover_ci"],
                 "text_rho": {m: float(np.mean([r["rho"][m] for r in text_runs])) for m in TEXT_METHODS},
                 "text_iso_minus_other_proxy": list(d_other), "text_iso_minus_same_proxy": list(d_same)},
        evidence={"seeds": len(runs)}))
    out.values["c4_verdict"] = c4["verdict"]
    return out


# ----------------------------------------------------------------------------- figures


def figure_rho_vs_shift(result: Result, p: Params) -> Any:
    """Agreement with the reference against the proxy shift (left); eigenspace overlap (right)."""
    summary, dl = result.data["summary"], np.array(p.deltas)
    fig, ax = book.subplots(1, 2, panel_height=3.4)
    for key, label, color in [("rho_proxy", "proxy, full GGN", "C3"), ("rho_proxy_diag", "proxy, diagonal GGN", "C1")]:
        m, lo, hi = (np.array([t[k] for t in summary[key]]) for k in range(3))
        ax[0].plot(dl, m, "o-", color=color, label=label)
        ax[0].fill_between(dl, lo, hi, color=color, alpha=0.2)
    mi, loi, hii = summary["rho_iso"]
    ax[0].axhline(mi, color="C0", label="isotropic ‖g‖²")
    ax[0].axhspan(loi, hii, color="C0", alpha=0.15)
    ax[0].set(xlabel="proxy shift δ", ylabel="Spearman ρ with the reference", title="Agreement with the reference")
    ax[0].legend()
    overlap = summary["overlap"]
    ax[1].plot(dl, [t[0] for t in overlap], "o-", color="C2")
    ax[1].fill_between(dl, [t[1] for t in overlap], [t[2] for t in overlap], color="C2", alpha=0.2)
    ax[1].set(xlabel="proxy shift δ", ylabel="mean cos² of principal angles",
              title=f"Top-{p.k_top} eigenspace overlap", ylim=(0, 1.02))
    return fig


def figure_gain_loss(result: Result, p: Params) -> Any:
    """Where on the grid the proxy covariance gains or loses variance (first seed), at δ = 0
    and at the largest shift, with the training and proxy inputs."""
    runs, j_max, ext = result.data["runs"], len(p.deltas) - 1, GRID_EXTENT
    x_tr, _ = sample_task(np.random.default_rng([p.seed, 0]), p.n_train)
    fig, axes = book.subplots(1, 2, panel_height=3.4, sharey=True)
    for ax, j in zip(axes, [0, j_max]):
        lr = runs[0]["log_ratio"][j].reshape(p.n_grid, p.n_grid) / np.log(10)
        vmax = np.abs(lr).max()
        im = ax.imshow(lr, origin="lower", extent=(-ext, ext, -ext, ext), cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        x_px, _ = sample_task(np.random.default_rng([p.seed, 1, j]), p.n_train, p.deltas[j])
        ax.scatter(*x_tr.T, s=3, c="k", alpha=0.4, label="training inputs (A)")
        ax.scatter(*x_px.T, s=3, c="gold", alpha=0.5, label="proxy inputs B(δ), δ as titled")
        ax.set(xlim=(-ext, ext), ylim=(-ext, ext), xlabel="x₁", title=f"δ = {p.deltas[j]:g}")
        fig.colorbar(im, ax=ax, label="log₁₀(proxy / reference)")
    axes[0].set_ylabel("x₂")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, markerscale=4)
    return fig


def figure_text_rho(result: Result) -> Any:
    """The sentence-encoder experiment: Spearman ρ with the reference per covariance, 95% CI."""
    ci, methods = result.data["text_ci"], list(TEXT_METHODS)
    fig, ax = book.subplots(panel_height=3.2)
    pos = np.arange(len(methods))
    vals = [ci[m][0] for m in methods]
    err = np.array([[ci[m][0] - ci[m][1], ci[m][2] - ci[m][0]] for m in methods]).T
    ax.barh(pos, vals, xerr=err, color=["C3", "C3", "C1", "C1", "C1", "C0"], alpha=0.8)
    ax.set_yticks(pos, [TEXT_METHODS[m] for m in methods])
    ax.set(xlabel="Spearman ρ with the reference (head GGN on the fine-tuning data)",
           xlim=(min(0.0, min(vals) - 0.1), 1.0))
    return fig
