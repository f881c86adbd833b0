"""Chapter 05, scaling: does the isotropic score agree better with NUTS as the network grows?

Every combination of problem, prior, depth, width and seed (at depth 2 and more only the
widths in ``deep_widths``) gets a NUTS reference and a MAP fit with its isotropic estimate
and tangent-kernel quantities, both through the results store
(`gnuq_core.bayes.validation.stored_references`, `stored_local_estimates`). `run` measures
the rank agreement (Spearman ρ) of each with its reference, leaves out the settings where ρ
is undefined or the reference cannot rank the queries (rules stated before any ρ is seen),
fits the slope of ρ per decade of parameters with a hierarchical bootstrap (series, seeds,
query points), follows the series of the lowest ρ, summarises the tangent-kernel view and
records claim C2 (ρ improves with size).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnuq_core import stats as metrics
from gnuq_core.bayes.mcmc import NutsSettings
from gnuq_core.bayes import table1
from gnuq_core.bayes.synthetic import PROBLEMS as SYNTHETIC
from gnuq_core.bayes.synthetic import TABLE1
from gnuq_core.bayes.validation import (
    PAPER_ESTIMATE,
    Setting,
    evaluate,
    setting_id,
    stored_local_estimates,
    stored_references,
)
from gnuq_core.chapters.base import COUNT, Result, param, store_words
from gnuq_core.chapters.bnn import PRIORS, BnnParams
from gnuq_core.options import Rule
from gnuq_core.repro import display as book
from gnuq_core.repro.claims import C1_MIN_RHO, Measurement, judge, record

__all__ = ["Params", "run", "grid", "settings", "trend_setups", "figure_scaling", "figure_ntk", "figure_trend",
           "PROBLEMS", "TARGET_ACCEPT"]

PROBLEMS = ("two_moons", "gap_regression")
TARGET_ACCEPT = {"two_moons": 0.8, "gap_regression": 0.95}
"""NUTS target acceptance per problem (as in chapter 04's paper edition, so shared settings are read back)."""
SIZES = dataclasses.replace(COUNT, nonempty=True)
SETTING_KEYS = ["problem", "prior", "depth", "width"]
SETTING_COLUMNS = {"problem": "problem", "prior": "prior", "depth": ("depth", "d"), "width": ("width", "d")}
MEASURE_NAMES = {"rho": "ρ, paper's estimate", "rho_logit": "ρ, logit space", "rho_prior": "ρ, prior-weighted"}
MARKERS = {1: "o", 2: "s", 3: "^"}
COLORS = {"plain": "tab:blue", "fan_in": "tab:orange"}


@dataclass(frozen=True)
class Params(BnnParams):
    """Chapter 05's parameters (defaults: the paper edition)."""

    CHAPTER = "05_scaling"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        # trend_problems: chapter 04's quick setup (width 16) at widths 4, 8, 16
        "quick": {"n_seeds": 2, "problems": ["two_moons"], "widths": [4, 16, 64],
                  "trend_problems": ["binary_xor", "multiclass_spirals"], "trend_widths": [4, 8, 16],
                  "trend_seeds": 1, "trend_compute": True, "depths": [1], "deep_widths": [],
                  "priors": ["plain", "fan_in"], "grid_size_cls": 20, "grid_size_reg": 100, "num_warmup": 300,
                  "num_samples": 300, "num_chains": 2, "n_boot": 300, "store_verify": 2},
        # trend_problems: chapter 04's smoke setup at widths 4 (its own) and 6
        "smoke": {"n_seeds": 1, "problems": ["two_moons"], "widths": [3, 6], "trend_problems": ["binary_xor"],
                  "trend_widths": [4, 6], "trend_seeds": 1, "trend_compute": True, "depths": [1], "deep_widths": [],
                  "priors": ["plain"], "store_verify": 2, "n_train_cls": 40, "grid_size_cls": 8,
                  "grid_size_reg": 100, "n_query_in": 30, "num_warmup": 50, "num_samples": 50, "num_chains": 1,
                  "n_restarts": 1, "n_boot": 50},
    }
    num_warmup: int = param(500, COUNT, "NUTS warm-up steps per chain")
    num_samples: int = param(500, COUNT, "NUTS samples per chain")
    n_restarts: int = param(3, COUNT, "MAP fits from different initialisations (the best is kept)")
    n_boot: int = param(1000, COUNT, "bootstrap resamples of each ρ and of the per-setting intervals "
                                     "(the trends use 1000)")
    problems: list[str] = param(list(PROBLEMS), Rule(choices=PROBLEMS, nonempty=True), "synthetic problems")
    widths: list[int] = param([4, 8, 16, 32, 64, 128, 256], SIZES, "hidden widths")
    depths: list[int] = param([1, 2, 3], SIZES, "hidden layers")
    deep_widths: list[int] = param([4, 16, 64], COUNT, "widths also run at depths 2 and 3; empty means all widths")
    priors: list[str] = param(list(PRIORS), Rule(choices=PRIORS, nonempty=True),
                              "plain (α·I) and/or fan_in (variance 1/fan-in) priors")
    trend_problems: list[str] = param(list(TABLE1), Rule(choices=tuple(TABLE1), nonempty=True),
                                      "the paper's Table 1 problems whose size trend is measured (claim C2)")
    trend_widths: list[int] = param([8, 16, 32, 64], SIZES, "widths of the size trend (chapter 04's Table 1 setup "
                                                            "in this profile otherwise: depth, prior, NUTS, data)")
    trend_seeds: int = param(5, COUNT, "seeds per problem and width of the size trend (chapter 04's seeds)")
    trend_compute: bool = param(False, None, "compute missing trend items in the build (previews; the paper edition "
                                             "reads what the campaign stored)")


def grid(p: Params) -> list[tuple[str, str, int, int, int]]:
    """The (problem, prior, depth, width, seed) of every model run (deep nets: ``deep_widths`` only)."""
    return [(prob, pr, dp, wd, s) for prob, pr, dp, wd, s in
            itertools.product(p.problems, p.priors, p.depths, p.widths, p.seeds)
            if dp == 1 or not p.deep_widths or wd in p.deep_widths]


def settings(p: Params) -> dict[tuple[str, str, int, int, int], Any]:
    """The `~gnuq_core.bayes.validation.Setting` of each entry of `grid`."""
    data = {"two_moons": dict(n_train=p.n_train_cls, noise=p.noise_cls, n_query_in=p.n_query_in,
                              grid_size=p.grid_size_cls),
            "gap_regression": dict(n_train=p.n_train_reg, noise=p.noise_reg, n_query_in=p.n_query_in,
                                   grid_size=p.grid_size_reg)}
    nuts = {prob: NutsSettings(p.num_warmup, p.num_samples, p.num_chains, TARGET_ACCEPT[prob]) for prob in PROBLEMS}
    return {(prob, pr, dp, wd, s): Setting(prob, data[prob],
                                           dict(width=wd, depth=dp, activation=p.activation, prior=pr, alpha=p.alpha),
                                           nuts[prob], seed=s, n_restarts=p.n_restarts)
            for prob, pr, dp, wd, s in grid(p)}


def _rows(p: Params, key: tuple[str, str, int, int, int], r: dict[str, Any],
          boots: dict[str, list[np.ndarray]]) -> list[dict[str, Any]]:
    """One table row per query set of one model: its ρ's, tangent-kernel numbers and sampler health."""
    prob, pr, dp, wd, s = key
    task = r["cfg"].task
    cls = task == "classification"
    ek, rk = PAPER_ESTIMATE[task]
    rows = []
    for qname, q in r["q"].items():
        a = metrics.rank_agreement(q["est"][ek], q["ref"][rk], n_boot=p.n_boot, seed=s, kendall=False)
        a_f = metrics.rank_agreement(q["est"]["iso_f"], q["ref"]["var_f"], n_boot=p.n_boot, seed=s, kendall=False)
        a_pr = metrics.rank_agreement(q["est"][ek.replace("iso", "prior")], q["ref"][rk], n_boot=p.n_boot, seed=s,
                                      kendall=False)
        ntk, diag = q["ntk"], r["nuts"]["diagnostics"]
        rows.append(dict(
            problem=prob, prior=pr, depth=dp, width=wd, seed=s, queries=qname, n_params=r["n_params"],
            rho=a.rho, rho_lo=a.rho_ci[0], rho_hi=a.rho_ci[1], rho_logit=a_f.rho, rho_prior=a_pr.rho,
            rho_ggn=metrics.spearman(ntk["ggn_f"], q["ref"]["var_f"]),
            rho_iso_vs_ggn=metrics.spearman(ntk["iso_f"], ntk["ggn_f"]),
            rho_alea=metrics.spearman(q["est"]["aleatoric"], q["ref"]["var_p"]) if cls else np.nan,
            span_resid=float(np.median(np.clip(1 - ntk["span_frac"], SPAN_FLOOR, None))),
            rank=int(ntk["rank"][0]), out_share=float(np.median(ntk["out_share"])),
            rho_iso_dist=metrics.spearman(ntk["iso_f"], np.linalg.norm(r["data"].queries[qname], axis=1)),
            split=q["split"]["rho_half"], divergences=diag["divergences"], saturation=diag["treedepth_saturation"],
            rhat_pred=q["diag"]["rhat_pred_max"], map_grad=r["map"].grad_norm, nuts_s=r["nuts"]["wall_s"],
            map_max_abs=r["map"].theta_max_abs, est_distinct=len(np.unique(q["est"][ek])),
            ess_pred=q["diag"]["ess_pred_min"],
            # spread (sd of log10 over the queries) of the factors of ‖∇p‖² = (p(1−p))² ‖∇f‖², and of Var[f]
            sd_log_iso_f=float(np.log10(q["est"]["iso_f"]).std()),
            sd_log_var_f=float(np.log10(q["ref"]["var_f"]).std()),
            sd_log_sigmoid=float(np.log10(q["est"]["sigmoid_sq"]).std()) if cls else np.nan,
            rho_iso_f_sigmoid=metrics.spearman(q["est"]["iso_f"], q["est"]["sigmoid_sq"]) if cls else np.nan))
        boots["rho"].append(a.boot), boots["rho_logit"].append(a_f.boot), boots["rho_prior"].append(a_pr.boot)
    return rows


def _evaluate(p: Params, store: Any, out: Result) -> tuple[dict, Any, dict[str, list[np.ndarray]]]:
    """Every model's reference and estimates through ``store``; the per-(model, query set) table."""
    import pandas as pd
    from IPython.display import Markdown
    from tqdm.auto import tqdm

    jobs = settings(p)
    # The full profile reads the NUTS summaries from the results store (see the MCMC chapter).
    refs = stored_references(list(jobs.values()), store=store, verify=p.store_verify,
                             verify_max_seconds=p.store_verify_max_seconds)
    local = stored_local_estimates(list(jobs.values()), laplace_estimates=False, ntk=True, store=store,
                                   verify=p.store_verify)
    out.values["store_words"] = Markdown(store_words(store,
        "The NUTS summaries and the MAP fits with their local estimates", ["nuts_reference", "local_estimates"]))
    rows, results = [], {}
    boots: dict[str, list[np.ndarray]] = {"rho": [], "rho_logit": [], "rho_prior": []}
    for key, setting in tqdm(jobs.items(), desc="models"):
        r = evaluate(setting, laplace_estimates=False, ntk=True, reference_summary=refs.get(setting_id(setting)),
                     local=local.get(setting_id(setting)))
        results[key] = r
        rows += _rows(p, key, r, boots)
    df = pd.DataFrame(rows)
    df["log10_params"] = np.log10(df["n_params"])
    out.values.update(n_models=len(grid(p)), p_min=int(df["n_params"].min()), p_max=int(df["n_params"].max()))
    return results, df, boots


def _health(df: Any, out: Result) -> None:
    """Sampler health per setting (over seeds and query sets)."""
    health = (df.groupby(SETTING_KEYS, sort=False)
              .agg(n_params=("n_params", "first"), divergences=("divergences", "sum"),
                   saturation=("saturation", "max"), rhat_pred_max=("rhat_pred", "max"),
                   split_agreement_min=("split", "min"), map_grad_max=("map_grad", "max"))
              .reset_index())
    nuts_minutes = (df.drop_duplicates(SETTING_KEYS + ["seed"]).groupby(SETTING_KEYS)["nuts_s"].sum() / 60)
    health = health.merge(nuts_minutes.rename("nuts_minutes").reset_index(), on=SETTING_KEYS)
    out.tables["health"] = book.table(health, {
        **SETTING_COLUMNS, "n_params": ("parameters", "d"), "divergences": ("divergences", "d"),
        "saturation": ("tree-depth saturation (max)", ".3g"), "rhat_pred_max": ("R-hat of predictions (max)", ".3g"),
        "split_agreement_min": ("split agreement (min)", ".3f"), "map_grad_max": ("MAP gradient norm (max)", ".1e"),
        "nuts_minutes": ("NUTS minutes", ".3g")},
        caption="Sampler health per setting (over seeds and query sets)")
    out.values.update(sc_divergences=int(health["divergences"].sum()),
                      sc_min_split=float(health["split_agreement_min"].min()),
                      sc_nuts_hours=float(health["nuts_minutes"].sum() / 60))


def _leave_out(df: Any, n_models: int, out: Result) -> tuple[Any, Any]:
    """Drop the settings whose ρ is undefined (a constant estimate) and the (setting, seed, query
    set) whose reference agrees with itself less than C1 asks of the estimate; never for a ρ's value."""
    undefined = df[df[["rho", "rho_logit", "rho_prior"]].isna().any(axis=1)]
    undefined_settings = (undefined.groupby(SETTING_KEYS + ["seed"], sort=False)
                          .agg(map_max_abs=("map_max_abs", "max"), map_grad=("map_grad", "max"),
                               est_distinct=("est_distinct", "max"))
                          .reset_index())
    if len(undefined_settings):
        out.tables["undefined"] = book.table(undefined_settings, {
            **SETTING_COLUMNS, "seed": ("seed", "d"), "map_max_abs": ("largest |θ*|", ".1e"),
            "map_grad": ("MAP gradient norm", ".1e"), "est_distinct": ("distinct estimate values", "d")},
            caption="Settings where ρ is undefined")
    df = df.drop(index=undefined.index)
    # The one other rule that leaves a setting out: a reference whose two halves agree (Spearman) less
    # than C1 asks of the estimate cannot rank the queries; computed, never chosen by hand.
    unreliable = df[df.split < C1_MIN_RHO]
    out.values.update(n_undefined=len(undefined_settings), n_defined=n_models - len(undefined_settings),
                      n_unreliable=int(len(unreliable.drop_duplicates(SETTING_KEYS + ["seed", "queries"]))),
                      split_rule=C1_MIN_RHO)
    return df.drop(index=unreliable.index), undefined_settings


def evidence(sub: Any) -> dict[str, int]:
    """The counts C2's gate checks: seeds, model settings (problem × prior × depth × width), sizes."""
    return {"seeds": int(sub.seed.nunique()), "settings": int(len(sub.drop_duplicates(SETTING_KEYS))),
            "sizes": int(sub.n_params.nunique())}


def _trends(p: Params, df: Any, boots: dict[str, list[np.ndarray]], out: Result) -> Any:
    """Slope of each ρ per decade of parameters, pooled and per problem × prior × query set, with
    C2's rule applied to each row."""
    import pandas as pd

    trend_rows = []
    for keys, sub in [(("all", "all", "all"), df)] + [
            ((prob, pr, qn), g) for (prob, pr, qn), g in df.groupby(["problem", "prior", "queries"], sort=False)]:
        idx = sub.index.to_numpy()
        for col in ("rho", "rho_logit", "rho_prior"):
            # series drawn with replacement, every size of a drawn series kept, seeds drawn at each size,
            # and each ρ replaced by one of its query-point replicates
            t = metrics.hierarchical_trend(sub.log10_params, sub[col], [sub.series, sub.n_params, sub.seed],
                                           [True, False, True], boots=[boots[col][i] for i in idx],
                                           seed=p.seed, n_boot=1000)
            verdict = judge(Measurement("C2", t.slope, t.slope_ci, evidence=evidence(sub)))
            trend_rows.append(dict(problem=keys[0], prior=keys[1], queries=keys[2], measure=col, slope=t.slope,
                                   lo=t.slope_ci[0], hi=t.slope_ci[1], verdict=verdict, points=t.n_points,
                                   series=t.n_groups))
    trends = pd.DataFrame(trend_rows)
    out.tables["trends"] = book.table(trends, {
        "problem": "problem", "prior": "prior", "queries": "queries", "measure": ("measure", MEASURE_NAMES.get, True),
        "slope": ("slope per decade", ".3f"), "lo": ("95% CI low", ".3f"), "hi": ("95% CI high", ".3f"),
        "verdict": ("C2 rule", "", True), "points": ("points", "d"), "series": ("series", "d")},
        caption="Slope of ρ against log10(#parameters), pooled ('all') and per subset")
    return trends


def _worst(df: Any, results: dict, out: Result) -> None:
    """The lowest ρ of any classification setting (means over seeds), what its reference and its
    factors say, and its series over widths."""
    by_series = (df.groupby(SETTING_KEYS + ["queries"], sort=False)
                 [["n_params", "rho", "rho_prior", "rho_logit", "split", "rhat_pred", "divergences", "est_distinct",
                   "out_share", "sd_log_iso_f", "sd_log_sigmoid", "sd_log_var_f", "rho_iso_f_sigmoid"]]
                 .agg({"n_params": "first", "rho": "mean", "rho_prior": "mean", "rho_logit": "mean", "split": "min",
                       "rhat_pred": "max", "divergences": "sum", "est_distinct": "min", "out_share": "mean",
                       "sd_log_iso_f": "mean", "sd_log_sigmoid": "mean", "sd_log_var_f": "mean",
                       "rho_iso_f_sigmoid": "mean"})
                 .reset_index())
    classification = by_series[by_series.sd_log_sigmoid.notna()]  # the sigmoid factor exists there only
    pool = classification if len(classification) else by_series  # (a run without classification: any setting)
    worst = pool.loc[pool.rho.idxmin()]
    n_queries = {qn: len(next(iter(results.values()))["q"][qn]["ref"]["var_f"]) for qn in ("in", "grid")}
    v = out.values
    v["worst_label"] = (f"{worst.problem}, {worst.prior.replace('_', '-')} prior, depth {worst.depth}, "
                        f"width {worst.width}, {'in-distribution' if worst.queries == 'in' else 'grid'} queries")
    for k, col in dict(worst_rho="rho", worst_rho_prior="rho_prior", worst_rho_logit="rho_logit",
                       worst_split="split", worst_rhat="rhat_pred", worst_out_share="out_share",
                       worst_sd_iso="sd_log_iso_f", worst_sd_sigmoid="sd_log_sigmoid", worst_sd_var_f="sd_log_var_f",
                       worst_rho_iso_sigmoid="rho_iso_f_sigmoid").items():
        v[k] = float(worst[col])
    v.update(worst_divergences=int(worst.divergences), worst_distinct=int(worst.est_distinct),
             worst_n_queries=int(n_queries[worst.queries]))
    v.update(_worst_readings(worst, n_queries))
    worst_series = by_series[(by_series.problem == worst.problem) & (by_series.prior == worst.prior)
                             & (by_series.depth == worst.depth) & (by_series.queries == worst.queries)]
    falls = len(worst_series) >= 3 and bool(np.all(np.diff(worst_series.sort_values("width").rho.to_numpy()) < 0))
    v["worst_trend_reading"] = (
        f"In it ρ falls at every step in width ({len(worst_series)} widths), so the lowest value is the end of a "
        "trend, not an accident of one run." if falls else
        f"In it ρ does not fall at every step in width ({len(worst_series)} widths).")
    out.tables["worst_series"] = book.table(worst_series, {
        "width": ("width", "d"), "n_params": ("parameters", "d"), "rho": ("ρ, paper's estimate", ".3f"),
        "rho_prior": ("ρ, prior-weighted", ".3f"), "rho_logit": ("ρ, logit space", ".3f"),
        "split": ("split agreement (min)", ".3f"), "out_share": ("output-layer share of ‖∇f‖²", ".3f"),
        "sd_log_iso_f": ("sd log10 ‖∇f‖²", ".3f"), "sd_log_sigmoid": ("sd log10 (p(1−p))²", ".3f"),
        "sd_log_var_f": ("sd log10 Var[f] (MCMC)", ".3f"), "rho_iso_f_sigmoid": ("ρ(‖∇f‖², (p(1−p))²)", ".3f")},
        caption=f"The series of the lowest ρ over widths ({worst.problem}, {worst.prior} prior, depth {worst.depth}, "
                f"{worst.queries} queries; means over seeds)")


def _worst_readings(worst: Any, n_queries: dict[str, int]) -> dict[str, str]:
    """What the reference's checks and the factors of ‖∇p‖² say about the lowest ρ (sentences)."""
    sound = (worst.split >= 0.9 and worst.rhat_pred <= 1.05 and worst.divergences == 0
             and worst.est_distinct == n_queries[worst.queries])
    outweighs = worst.sd_log_iso_f > worst.sd_log_sigmoid and worst.rho_iso_f_sigmoid < 0
    return {
        "worst_sampler_reading":
            "By these checks (split agreement ≥ 0.9, R-hat ≤ 1.05, no divergences, no ties) the reference is sound, "
            "so the low ρ is a property of the estimate, not of the sampler." if sound else
            "These checks (split agreement ≥ 0.9, R-hat ≤ 1.05, no divergences, no ties) do not all pass here, so "
            "part of the low ρ may come from the reference.",
        "worst_factor_reading":
            ("So ‖∇f‖² varies more than the sigmoid factor and against it: it outweighs the factor and "
             + ("reverses its ranking (ρ < 0)." if worst.rho < 0 else "pulls the ranking away from it."))
            if outweighs else
            "Here ‖∇f‖² varies less than the sigmoid factor, or with it, so the factor keeps the ranking.",
    }


SPAN_FLOOR = 1e-12
"""The share of ‖g‖² outside the training gradients' span is clipped here (float rounding)."""


def span_words(small: float, large: float) -> str:
    """How the share of ‖g‖² outside the span of the training gradients moves with size, in words
    (a share that stays put says so instead of "goes from 1.00e-12 to 1.00e-12")."""
    if f"{small:.2e}" != f"{large:.2e}":
        return f"goes from {small:.2e} (smallest network) to {large:.2e} (largest)"
    if small <= SPAN_FLOOR * 1.0001:
        return (f"stays at the floor of the computation (below {SPAN_FLOOR:.0e}) from the smallest network to the "
                "largest: the training gradients span every query's gradient, so this view gives no reason for a "
                "trend at these sizes")
    return f"stays at {small:.2e} from the smallest network to the largest"


def _tangent_kernel(df: Any, out: Result) -> None:
    """The tangent-kernel summaries of the smallest and the largest network, and the output layer's
    share and the distance correlation of the widest depth-1 network per prior."""
    smallest, largest = df[df.n_params == df.n_params.min()], df[df.n_params == df.n_params.max()]
    out.values.update(rank_small=int(smallest["rank"].median()), rank_large=int(largest["rank"].median()),
                      span_small=float(smallest.span_resid.mean()), span_large=float(largest.span_resid.mean()),
                      iso_ggn_small=float(smallest.rho_iso_vs_ggn.mean()),
                      iso_ggn_large=float(largest.rho_iso_vs_ggn.mean()))
    out.values["span_words"] = span_words(out.values["span_small"], out.values["span_large"])
    widest = df[(df.depth == 1) & (df.width == df.width.max()) & (df.queries == "grid")]
    for pr in ("plain", "fan_in"):  # NaN for a prior this run left out
        sub = widest[widest.prior == pr]
        out.values[f"out_share_{pr}"] = float(sub.out_share.mean()) if len(sub) else float("nan")
        out.values[f"dist_{pr}"] = float(sub.rho_iso_dist.mean()) if len(sub) else float("nan")


def _by_size(p: Params, df: Any, boots: dict[str, list[np.ndarray]], out: Result) -> None:
    """Per setting, means over seeds; ρ with its interval over seeds, then query points."""
    by_size = (df.groupby(["problem", "prior", "depth", "width", "queries"], sort=False)
               [["n_params", "rho", "rho_prior", "rho_logit", "rho_ggn", "rho_alea", "split", "rank", "span_resid",
                 "out_share"]].mean().reset_index())
    rho_ci = []
    for _, g in df.groupby(["problem", "prior", "depth", "width", "queries"], sort=False):
        v, (lo, hi), _ = metrics.hierarchical_bootstrap(list(g.rho), [boots["rho"][i] for i in g.index],
                                                        [g.seed.to_numpy()], how="mean", n_boot=p.n_boot, seed=p.seed)
        rho_ci.append(f"{v:.3f} [{lo:.3f}, {hi:.3f}]")
    by_size["rho"] = rho_ci
    out.tables["by_size"] = book.table(by_size, {
        **SETTING_COLUMNS, "queries": "queries", "n_params": ("parameters", ".0f"),
        "rho": ("ρ, paper's estimate [95% CI]", "", True), "rho_prior": ("ρ, prior-weighted", ".3f"),
        "rho_logit": ("ρ, logit space", ".3f"), "rho_ggn": ("ρ, GGN-Laplace", ".3f"),
        "rho_alea": ("ρ, p(1−p) alone", ".3f"), "split": ("split agreement", ".3f"), "rank": ("rank of J_X", ".3g"),
        "span_resid": ("outside span", ".1e"), "out_share": ("output-layer share of ‖g‖²", ".3g")},
        caption="Per setting, means over seeds (ρ's interval: seeds, then query points, resampled)")


def _claim(p: Params, df: Any, boots: dict[str, list[np.ndarray]], trends: Any, undefined_settings: Any,
           trend: dict[str, Measurement], profile: str, out: Result) -> None:
    """C2 on the size trend of the paper's eight problems (the primary query set), with the other
    query set and this chapter's own grid (two moons, gap regression) as readings."""
    pooled = trends[(trends.problem == "all") & (trends.measure == "rho")].iloc[0]
    # for comparison: the interval that resamples only seeds (all series at once) and query points
    t_seeds = metrics.trend(df.log10_params, df.rho, df.seed, boots=[boots["rho"][i] for i in df.index], seed=p.seed,
                            n_boot=1000)
    n_rep = int((trends.verdict == "reproduced").sum())
    own = Measurement("C2", float(pooled.slope), (float(pooled.lo), float(pooled.hi)), evidence=evidence(df))
    primary = f"problems=Table 1, queries={table1.PRIMARY_QUERIES}"
    readings = {f"problems=Table 1, queries={q}": {"C2": m} for q, m in trend.items()}
    readings["problems=two moons and gap, queries=both"] = {"C2": own}
    m = trend[table1.PRIMARY_QUERIES]
    e2 = record(dataclasses.replace(
        m, settings=dict(profile=profile, problems=p.trend_problems, widths=p.trend_widths, seeds=p.trend_seeds,
                         setup="chapter 04's Table 1 parameters in this profile, at each width"),
        details=dict(own_grid=dict(slope=own.value, ci=list(own.ci), problems=p.problems, widths=p.widths,
                                   depths=p.depths, priors=p.priors, seeds_only_ci=list(t_seeds.slope_ci),
                                   subsets_reproduced=f"{n_rep} of {len(trends)}"),
                     interval="hierarchical bootstrap: each problem kept, its seeds resampled (a seed's curve over "
                              "widths together), then query points"),
        note=(f"{out.values['trend_up']} of {out.values['trend_n_problems']} problems rise and "
              f"{out.values['trend_down']} fall by C2's rule on the grid; on this chapter's own grid (two moons, gap) "
              f"the slope is {own.value:+.3f} [{own.ci[0]:+.3f}, {own.ci[1]:+.3f}]")),
        readings=readings, primary=primary)
    out.values.update(c2=float(pooled.slope), c2_lo=float(pooled.lo), c2_hi=float(pooled.hi), c2_verdict=judge(own),
                      c2_seeds_lo=float(t_seeds.slope_ci[0]), c2_seeds_hi=float(t_seeds.slope_ci[1]),
                      c2_n_series=int(pooled.series), c2_subsets_reproduced=f"{n_rep} of {len(trends)}",
                      c2_table1=m.value, c2_table1_lo=m.ci[0], c2_table1_hi=m.ci[1], c2_table1_verdict=e2["verdict"],
                      c2_table1_reason=e2["reason"], c2_robust=e2["robustness"]["text"])


def trend_setups(p: Params, profile: str) -> dict[int, Any]:
    """Per width of ``p.trend_widths``, chapter 04's parameters in ``profile`` (its Table 1 setup)
    at that width, for ``p.trend_problems`` and ``p.trend_seeds`` seeds: width 32 of the paper
    edition is Table 1 itself, so its items are shared."""
    from gnuq_core.chapters import mcmc

    base = mcmc.Params.for_profile(profile)
    return {w: dataclasses.replace(base, width=w, table1_problems=list(p.trend_problems),
                                   table1_seeds=p.trend_seeds, table1_compute=p.trend_compute)
            for w in p.trend_widths}


def _trend_cells(p: Params, store: Any, profile: str, out: Result) -> Any:
    """GN's ρ and r with the reference for every stored (problem, width, seed) of the size trend,
    on each query set (`table1.QUERIES`), with each ρ's query-point replicates."""
    import pandas as pd
    from tqdm.auto import tqdm

    from gnuq_core.chapters import mcmc

    rows, wanted = [], 0
    for w, q in trend_setups(p, profile).items():
        jobs = mcmc.table1_settings(q)
        wanted += len(jobs)
        refs, local = mcmc.fill_table1(q, store, progress=False)
        for (name, s), setting in tqdm(jobs.items(), desc=f"trend, width {w}"):
            sid = setting_id(setting)
            if sid not in refs or sid not in local:
                continue
            r = evaluate(setting, reference_summary=refs[sid], local=local[sid])
            for qname in table1.QUERIES:
                cells = table1.cell_values(r, name, qname, n_boot=p.n_boot, seed=s)
                rho, boot = cells["Epistemic (GN)", "rho"]
                rows.append(dict(problem=name, width=w, seed=s, queries=qname, n_params=r["n_params"], rho=rho,
                                 boot=boot, r=cells["Epistemic (GN)", "r"][0]))
    df = pd.DataFrame(rows, columns=["problem", "width", "seed", "queries", "n_params", "rho", "boot", "r"])
    stored = int(len(df) // max(len(table1.QUERIES), 1))
    out.values.update(trend_stored=stored, trend_wanted=wanted, trend_widths=", ".join(map(str, p.trend_widths)),
                      trend_n_problems=len(p.trend_problems), trend_seeds=p.trend_seeds)
    return df


def _trend_measure(p: Params, df: Any) -> Measurement:
    """C2 on ``df`` (one query set): the slope of GN's ρ per decade of parameters, pooled over the
    problems (each kept), its interval resampling each problem's seeds (a seed's curve over
    widths stays together: its data set is shared), then query points."""
    df = df[np.isfinite(df.rho)]
    ev = {"seeds": int(df.groupby("problem").seed.nunique().min()) if len(df) else 0,
          "sizes": int(df.groupby("problem").width.nunique().min()) if len(df) else 0}
    if len(df) < 2 or df.n_params.nunique() < 2:
        return Measurement("C2", 0.0, (-1.0, 1.0), evidence=ev)  # nothing to fit: the gate refuses it
    t = metrics.hierarchical_trend(np.log10(df.n_params), df.rho, [df.problem, df.seed, df.width],
                                   [False, True, False], boots=list(df.boot), seed=p.seed, n_boot=1000)
    return Measurement("C2", float(t.slope), (float(t.slope_ci[0]), float(t.slope_ci[1])), evidence=ev)


def _trend(p: Params, store: Any, profile: str, out: Result) -> dict[str, Measurement]:
    """The size trend on the paper's eight problems: per problem and query set, GN's ρ by width
    and its slope per decade of parameters with its interval and C2's rule; pooled slopes per
    query set (the C2 readings)."""
    import pandas as pd

    df = _trend_cells(p, store, profile, out)
    rows = []
    for (name, qname), g in df.groupby(["problem", "queries"], sort=False):
        m = _trend_measure(p, g)
        by_width = g.groupby("width").rho.mean()
        rows.append(dict(problem=SYNTHETIC[name].paper, queries=qname,
                         **{f"w{w}": by_width.get(w, np.nan) for w in p.trend_widths},
                         slope=f"{m.value:+.3f} [{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]", verdict=judge(m)))
    table = pd.DataFrame(rows)
    if len(table):
        out.tables["trend"] = book.table(table, {
            "problem": "problem", "queries": "queries",
            **{f"w{w}": (f"ρ, width {w}", ".2f") for w in p.trend_widths},
            "slope": ("slope per decade [95% CI]", "", True), "verdict": ("C2's rule", "", True)},
            caption="GN's ρ with the HMC variance by width (mean over seeds) and its slope per decade of parameters")
    pooled = {qname: _trend_measure(p, df[df.queries == qname]) for qname in table1.QUERIES}
    for qname, m in pooled.items():
        out.values.update({f"trend_{qname}": m.value, f"trend_{qname}_lo": m.ci[0], f"trend_{qname}_hi": m.ci[1],
                           f"trend_{qname}_verdict": judge(m)})
    n_up = sum(1 for r in rows if r["queries"] == table1.PRIMARY_QUERIES and r["verdict"] == "reproduced")
    n_down = sum(1 for r in rows if r["queries"] == table1.PRIMARY_QUERIES and r["verdict"] == "not reproduced")
    out.values.update(trend_up=n_up, trend_down=n_down)
    out.data.update(trend=df)
    return pooled


def run(p: Params, store: Any, profile: str) -> Result:
    """The grid of models through ``store``, the rank agreements, the trends, the lowest ρ's
    series, the tangent-kernel view and claim C2.

    Parameters
    ----------
    p : Params
        The build's parameters.
    store : Store
        Where the NUTS references and local estimates are read back or written.
    profile : str
        The profile's name (recorded with the claim).

    Returns
    -------
    Result
        ``values`` under the page's glue names; ``tables`` ``health``, ``undefined`` (only
        when some ρ is undefined), ``trends``, ``worst_series``, ``by_size``; ``data``
        ``df`` (the per-(model, query set) table the analysis uses) for the figures.
    """
    out = Result()
    results, df, boots = _evaluate(p, store, out)
    _health(df, out)
    df, undefined_settings = _leave_out(df, out.values["n_models"], out)
    # A series is one curve over sizes: problem × prior × depth × query set.
    df["series"] = df.problem + "/" + df.prior + "/d" + df.depth.astype(str) + "/" + df.queries
    trends = _trends(p, df, boots, out)
    _worst(df, results, out)
    _tangent_kernel(df, out)
    _by_size(p, df, boots, out)
    trend = _trend(p, store, profile, out)
    _claim(p, df, boots, trends, undefined_settings, trend, profile, out)
    out.data.update(df=df)
    return out


# ----------------------------------------------------------------------------- figures


def _size_axis(ax: Any, df: Any) -> None:
    """Log x axis labelled at the model sizes that were run."""
    sizes = sorted(df.n_params.unique())
    ax.set_xscale("log"), ax.set_xlabel("number of parameters")
    ax.set_xticks(sizes, [str(v) for v in sizes])
    ax.minorticks_off()


def figure_scaling(result: Result, p: Params) -> Any:
    """ρ of the paper's estimate against the number of parameters, one panel per problem and query
    set (mean over seeds, range as bars; dotted: logit space; dashed: the pooled trend)."""
    df = result.data["df"]
    fig, axes = book.subplots(len(p.problems), 2, panel_height=3.0, squeeze=False, sharey=True)
    for ax, (prob, qname) in zip(axes.ravel(), itertools.product(p.problems, ["in", "grid"])):
        sub = df[(df.problem == prob) & (df.queries == qname)]
        for (pr, dp), g in sub.groupby(["prior", "depth"]):
            m = g.groupby("n_params").agg(rho=("rho", "mean"), lo=("rho", "min"), hi=("rho", "max")).reset_index()
            ax.errorbar(m.n_params, m.rho, yerr=[m.rho - m.lo, m.hi - m.rho], marker=MARKERS.get(dp, "o"),
                        color=COLORS[pr], capsize=2, lw=1, label=f"{pr}, depth {dp}")
            ax.plot(g.n_params, g.rho_logit, marker=MARKERS.get(dp, "o"), color=COLORS[pr], ls=":", alpha=0.5,
                    lw=0.8)
        t = metrics.trend(sub.log10_params, sub.rho, sub.seed, seed=p.seed, n_boot=500)
        xx = np.linspace(sub.log10_params.min(), sub.log10_params.max(), 10)
        ax.plot(10**xx, t.intercept + t.slope * xx, "k--", lw=1, label="pooled trend")
        _size_axis(ax, df)
        ax.set_ylabel("Spearman ρ")
        ax.set_title(f"{prob}, {qname} queries\ntrend {t.slope:+.3f} per decade", fontsize=9)
    for ax in axes[:, 1]:
        ax.set_ylabel("")  # the y axis is shared along each row
    handles, labels = axes.ravel()[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3)
    return fig


def figure_ntk(result: Result, p: Params) -> Any:
    """The tangent-kernel view against the number of parameters, means over seeds: rank of J_X,
    ρ(‖∇f‖², GGN Var[f]) and the GGN's gain over the isotropic estimate (a fourth panel: the legend)."""
    df = result.data["df"]
    fig, axes = book.subplots(2, 2, panel_height=3.0)
    legend_ax = axes[1, 1]
    axes = axes.ravel()[:3]
    for (pr, dp, qn), g in df.groupby(["prior", "depth", "queries"]):
        m = g.groupby("n_params")[["rank", "rho_iso_vs_ggn", "rho_ggn", "rho_logit"]].mean().reset_index()
        style = dict(ls="-" if qn == "grid" else "--", marker=MARKERS.get(dp, "o"), color=COLORS[pr],
                     label=f"{pr}, d{dp}, {qn}")
        axes[0].plot(m.n_params, m["rank"], **style)
        axes[1].plot(m.n_params, m.rho_iso_vs_ggn, **style)
        axes[2].plot(m.n_params, m.rho_ggn - m.rho_logit, **style)
    sizes = np.array(sorted(df.n_params.unique()))
    axes[0].plot(sizes, np.minimum(sizes, p.n_train_cls), "k:", lw=1, label="full rank: min(#params, #train)")
    axes[0].set_ylabel("rank of J_X at the MAP")
    axes[0].set_title("numerical rank of J_X", fontsize=9)
    axes[0].set_yscale("log")
    axes[1].set_ylabel("ρ(‖∇f‖², GGN Var[f])")
    axes[1].set_title("isotropic vs GGN-Laplace, same θ*", fontsize=9)
    axes[2].set_ylabel("ρ(GGN) − ρ(isotropic)")
    axes[2].set_title("gain of GGN against MCMC Var[f]", fontsize=9)
    axes[2].axhline(0, color="k", lw=0.5)
    for ax in axes:
        _size_axis(ax, df)
    legend_ax.axis("off")
    legend_ax.legend(*axes[0].get_legend_handles_labels(), loc="center", title="prior, depth, queries")
    return fig


def figure_trend(result: Result, p: Params) -> Any:
    """GN's ρ with the HMC variance against the number of parameters, one panel per Table 1
    problem: mean over seeds with the seeds' range, on the grid (solid) and in-distribution
    points (dashed); a problem with nothing stored says so."""
    df = result.data["trend"]
    n = len(p.trend_problems)
    fig, axes = book.subplots((n + 1) // 2, 2, panel_height=2.3, squeeze=False, sharey=True)
    styles = {"grid": dict(ls="-", marker="o", color="tab:blue"), "in": dict(ls="--", marker="s", color="tab:orange")}
    for ax, name in zip(axes.ravel(), p.trend_problems):
        sub = df[df.problem == name]
        for qname, style in styles.items():
            g = sub[sub.queries == qname].groupby("n_params").rho.agg(["mean", "min", "max"]).reset_index()
            if len(g):
                ax.errorbar(g.n_params, g["mean"], yerr=[g["mean"] - g["min"], g["max"] - g["mean"]], capsize=2, lw=1,
                            label={"grid": "grid queries", "in": "in-distribution"}[qname], **style)
        if len(sub):
            sizes = sorted(sub.n_params.unique())
            ax.set_xscale("log")
            ax.set_xticks(sizes, [str(v) for v in sizes])
            ax.minorticks_off()
        else:
            ax.text(0.5, 0.5, "not stored yet", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
        ax.axhline(0, color="k", lw=0.5)
        ax.set_title(SYNTHETIC[name].paper)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("Spearman ρ (GN)")
    for ax in axes[-1, :]:
        ax.set_xlabel("number of parameters")
    handles, labels = next((a.get_legend_handles_labels() for a in axes.ravel() if a.get_legend_handles_labels()[0]),
                           ([], []))
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=2)
    return fig
