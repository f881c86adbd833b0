"""Chapter 04, MCMC validation: the isotropic score against NUTS on two small Bayesian networks.

For two moons (classification) and a regression with a gap in its data, ``n_seeds`` data
sets each get a NUTS reference (`gnuq_core.bayes.validation.stored_references`) and a MAP
fit with its local estimates (isotropic, Laplace, GGN, diagonal, GLM predictive;
`stored_local_estimates`), both through the results store. `run` compares every estimate's
ranking with the reference's (Spearman ρ per seed and query set, hierarchical bootstrap
over seeds and query points), records claims C1 (the paper's estimate ranks like the
reference) and C3 (it beats the Laplace baseline), and says, per setting, where the
isotropic estimate works and where it fails.

The paper's Table 1 (`gnuq_core.bayes.table1`): its eight problems, ``table1_seeds`` seeds
each, every cell (Pearson r and Spearman ρ of GN, LA and aleatoric against HMC) beside the
paper's value with a per-cell verdict, and Figure 2's uncertainty maps. Their NUTS
references are a campaign (``python -m gnuq_core.chapters.mcmc fill``, sharded under
``torchrun``); a build reads what is stored and says what is still missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnuq_core import paper
from gnuq_core import stats as metrics
from gnuq_core.bayes import table1
from gnuq_core.bayes.mcmc import NutsSettings
from gnuq_core.bayes.synthetic import PROBLEMS, TABLE1
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
from gnuq_core.repro.claims import (
    C1_MIN_RHO,
    C3_MIN_DIFFERENCE,
    SETTING_FAILS_BEYOND,
    SETTING_WORKS_WITHIN,
    Measurement,
    judge,
    record,
    record_cells,
)

__all__ = ["Params", "run", "ESTIMATE_NAMES", "figure_cls_maps", "figure_reg_bands", "figure_overstate",
           "figure_scatter", "figure_problems", "figure_table1_maps", "table1_settings", "fill_table1", "main"]

ESTIMATE_NAMES = {"iso_p": "‖∇p‖² (isotropic)", "iso_f": "‖∇f‖² (isotropic)", "laplace_p": "Laplace, delta method",
                  "laplace_f": "Laplace", "ggn_p": "GGN, delta method", "ggn_f": "GGN",
                  "laplace_glm_p": "Laplace, GLM predictive", "ggn_glm_p": "GGN, GLM predictive",
                  "diag_p": "diagonal Laplace", "diag_f": "diagonal Laplace", "prior_p": "prior-weighted",
                  "prior_f": "prior-weighted", "aleatoric": "p(1−p) alone"}
SPACE_NAMES = {"p": "probability", "logit": "logit", "f": "output f"}
COMPARISONS = {
    ("classification", "p"): ("var_p", ["iso_p", "prior_p", "laplace_p", "ggn_p", "diag_p", "laplace_glm_p",
                                         "ggn_glm_p", "aleatoric"]),
    ("classification", "logit"): ("var_f", ["iso_f", "prior_f", "laplace_f", "ggn_f", "diag_f"]),
    ("regression", "f"): ("var_f", ["iso_f", "prior_f", "laplace_f", "ggn_f", "diag_f"]),
}
"""(problem, space) -> (the reference's variance, the estimates compared with it; isotropic first)."""
C3_BASELINES = {"glm": ("iso_p", "ggn_glm_p", "var_p"), "glm_laplace": ("iso_p", "laplace_glm_p", "var_p"),
                "delta": ("iso_p", "laplace_p", "var_p"), "logit": ("iso_f", "laplace_f", "var_f")}
"""C3 against each Laplace baseline: (estimate, baseline, reference); ``glm`` is the claim's."""
GLUED_RHOS = [
    ("classification", "p", "grid", "iso_p", "rho_cls_p_grid_iso"),
    ("classification", "p", "grid", "laplace_p", "rho_cls_p_grid_laplace"),
    ("classification", "p", "grid", "ggn_glm_p", "rho_cls_p_grid_glm"),
    ("classification", "p", "in", "ggn_glm_p", "rho_cls_p_in_glm"),
    ("classification", "p", "grid", "aleatoric", "rho_cls_p_grid_alea"),
    ("classification", "p", "in", "iso_p", "rho_cls_p_in_iso"),
    ("classification", "p", "in", "aleatoric", "rho_cls_p_in_alea"),
    ("classification", "logit", "grid", "iso_f", "rho_cls_f_grid_iso"),
    ("classification", "logit", "grid", "laplace_f", "rho_cls_f_grid_laplace"),
    ("classification", "logit", "in", "iso_f", "rho_cls_f_in_iso"),
    ("classification", "logit", "in", "laplace_f", "rho_cls_f_in_laplace"),
    ("regression", "f", "grid", "iso_f", "rho_reg_grid_iso"),
    ("regression", "f", "grid", "laplace_f", "rho_reg_grid_laplace"),
    ("regression", "f", "in", "iso_f", "rho_reg_in_iso"),
    ("regression", "f", "in", "laplace_f", "rho_reg_in_laplace"),
]
"""The mean ρ's the page quotes: (problem, space, queries, estimate, glue name)."""


@dataclass(frozen=True)
class Params(BnnParams):
    """Chapter 04's parameters (defaults: the paper edition)."""

    CHAPTER = "04_mcmc_validation"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        "quick": {"n_seeds": 2, "width": 16, "depth": 1, "grid_size_cls": 20, "grid_size_reg": 100,
                  "num_warmup": 300, "num_samples": 300, "num_chains": 2, "n_restarts": 3, "n_boot": 500,
                  "store_verify": 2, "table1_seeds": 1, "table1_compute": True},
        "smoke": {"n_seeds": 1, "width": 4, "depth": 1, "store_verify": 2, "n_train_cls": 40, "n_train_reg": 20,
                  "grid_size_cls": 8, "grid_size_reg": 30, "n_query_in": 30, "num_warmup": 50, "num_samples": 50,
                  "num_chains": 1, "n_restarts": 1, "n_boot": 50, "table1_seeds": 1, "table1_compute": True,
                  "table1_problems": ["binary_xor", "multiclass_spirals", "regression_linear"]},
    }
    width: int = param(32, COUNT, "hidden width")
    depth: int = param(2, COUNT, "hidden layers")
    prior: str = param("plain", Rule(choices=PRIORS), "plain (α·I) or fan_in (variance 1/fan-in) prior")
    target_accept_cls: float = param(0.8, Rule(above=0, below=1), "NUTS target acceptance, two moons")
    target_accept_reg: float = param(0.95, Rule(above=0, below=1), "NUTS target acceptance, gap regression")
    table1_problems: list[str] = param(list(TABLE1), Rule(choices=tuple(TABLE1), nonempty=True),
                                       "the paper's Table 1 problems computed (its column order)")
    table1_seeds: int = param(table1.MIN_SEEDS, COUNT, "seeds per Table 1 problem (data, initialisation, NUTS)")
    table1_compute: bool = param(False, None, "compute missing Table 1 items in the build (previews; the paper "
                                              "edition reads what the campaign stored)")


def settings(p: Params) -> dict[tuple[str, int], Any]:
    """The `~gnuq_core.bayes.validation.Setting` of each (problem, seed)."""
    model = dict(width=p.width, depth=p.depth, activation=p.activation, prior=p.prior, alpha=p.alpha)
    tasks = {
        "classification": ("two_moons", dict(n_train=p.n_train_cls, noise=p.noise_cls, n_query_in=p.n_query_in,
                                              grid_size=p.grid_size_cls),
                           NutsSettings(p.num_warmup, p.num_samples, p.num_chains, p.target_accept_cls)),
        "regression": ("gap_regression", dict(n_train=p.n_train_reg, noise=p.noise_reg, n_query_in=p.n_query_in,
                                              grid_size=p.grid_size_reg),
                       NutsSettings(p.num_warmup, p.num_samples, p.num_chains, p.target_accept_reg)),
    }
    return {(t, s): Setting(problem, data, model, nuts, seed=s, n_restarts=p.n_restarts)
            for t, (problem, data, nuts) in tasks.items() for s in p.seeds}


def _evaluate(p: Params, store: Any, out: Result) -> dict[tuple[str, int], dict[str, Any]]:
    from IPython.display import Markdown
    from tqdm.auto import tqdm

    jobs = settings(p)
    refs = stored_references(list(jobs.values()), store=store, verify=p.store_verify,
                             verify_max_seconds=p.store_verify_max_seconds)
    local = stored_local_estimates(list(jobs.values()), store=store, verify=p.store_verify)
    out.values["store_words"] = Markdown(store_words(store,
        "The NUTS summaries and the MAP fits with their local estimates", ["nuts_reference", "local_estimates"]))
    runs = {key: evaluate(setting, reference_summary=refs.get(setting_id(setting)),
                          local=local.get(setting_id(setting)))
            for key, setting in tqdm(jobs.items(), desc="settings")}
    first = p.seed
    out.values.update(n_params_cls=runs["classification", first]["n_params"],
                      n_params_reg=runs["regression", first]["n_params"])
    return runs


def _diagnostics(runs: dict[tuple[str, int], dict[str, Any]], out: Result) -> Any:
    import pandas as pd

    rows = []
    for (task, s), r in runs.items():
        d = r["nuts"]["diagnostics"]
        for qname, q in r["q"].items():
            rows.append({"problem": task, "seed": s, "queries": qname, "divergences": d["divergences"],
                         "tree-depth saturation": d["treedepth_saturation"], "R-hat θ (max)": d["rhat_theta_max"],
                         "R-hat pred (max)": q["diag"]["rhat_pred_max"], "ESS pred (min)": q["diag"]["ess_pred_min"],
                         "split agreement ρ": q["split"]["rho_half"], "MAP ‖∇‖": r["map"].grad_norm})
    diag = pd.DataFrame(rows)
    out.tables["diagnostics"] = book.table(diag, {
        "problem": "problem", "seed": ("seed", "d"), "queries": "queries", "divergences": ("divergences", "d"),
        "tree-depth saturation": ("tree-depth saturation", ".3g"), "R-hat θ (max)": ("R-hat θ (max)", ".3g"),
        "R-hat pred (max)": ("R-hat of predictions (max)", ".3g"),
        "ESS pred (min)": ("ESS of predictions (min)", ".0f"), "split agreement ρ": ("split agreement ρ", ".3f"),
        "MAP ‖∇‖": ("MAP gradient norm", ".1e")}, caption="NUTS diagnostics per problem, seed and query set")
    out.values.update(total_divergences=int(diag.drop_duplicates(["problem", "seed"])["divergences"].sum()),
                      max_saturation=float(diag["tree-depth saturation"].max()),
                      min_split=float(diag["split agreement ρ"].min()), max_map_grad=float(diag["MAP ‖∇‖"].max()))
    return diag


def log_ratio(q: dict[str, Any], key: str = "iso_f") -> np.ndarray:
    """log₁₀ of σ²·estimate / MCMC Var[f], σ² fitted on these queries (> 0: overstated)."""
    est, ref = q["est"][key], q["ref"]["var_f"]
    return np.log10(np.maximum(metrics.fit_isotropic_scale(est, ref) * est, 1e-300) / np.maximum(ref, 1e-300))


def unexplained(q: dict[str, Any]) -> np.ndarray:
    """Share of the prior variance gᵀΣ₀g left in the GGN posterior (1 − what the data explain)."""
    return q["est"]["ggn_f"] / q["est"]["prior_f"]


def _overstatement(p: Params, runs: dict[tuple[str, int], dict[str, Any]], out: Result) -> None:
    """How strongly 'left unexplained by the data' goes with 'understated' (Spearman over
    grid points, mean over seeds)."""
    seeds = p.seeds
    for task, key in (("regression", "reg"), ("classification", "cls")):
        out.values[f"overstate_{key}"] = float(np.mean([metrics.spearman(unexplained(runs[task, s]["q"]["grid"]),
                                                                         log_ratio(runs[task, s]["q"]["grid"]))
                                                        for s in seeds]))
    for key, task in (("reg", "regression"), ("cls", "classification")):
        q = runs[task, seeds[0]]["q"]["grid"]
        out.values[f"unexplained_{key}_lo"] = float(unexplained(q).min())
        out.values[f"unexplained_{key}_hi"] = float(unexplained(q).max())


def comparisons(p: Params) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """`COMPARISONS` of this build: with the plain prior (a multiple of I) the prior-weighted
    estimate equals the isotropic one, so it is left out."""
    if p.prior != "plain":
        return dict(COMPARISONS)
    return {k: (rk, [e for e in ek if not e.startswith("prior")]) for k, (rk, ek) in COMPARISONS.items()}


def _agreement(p: Params, runs: dict[tuple[str, int], dict[str, Any]], out: Result) -> tuple[Any, dict]:
    """Rank agreement of every estimate with the reference: per seed, and the table over seeds."""
    import pandas as pd
    from tqdm.auto import tqdm

    seeds = p.seeds
    rows, agree = [], {}
    for (task, space), (ref_key, est_keys) in tqdm(comparisons(p).items(), desc="correlations"):
        for qname in ("in", "grid"):
            for ek in est_keys:
                for s in seeds:
                    q = runs[task, s]["q"][qname]
                    a = metrics.rank_agreement(q["est"][ek], q["ref"][ref_key], n_boot=p.n_boot, seed=s)
                    agree[task, space, qname, ek, s] = a
                    rows.append(dict(problem=task, space=space, queries=qname, estimate=ek, seed=s, rho=a.rho,
                                     rho_lo=a.rho_ci[0], rho_hi=a.rho_ci[1], tau=a.tau,
                                     ceiling=q["split_f" if space == "logit" else "split"]["rho_half"],
                                     **metrics.magnitude_view(q["est"][ek], q["ref"][ref_key])))
    long = pd.DataFrame(rows)
    summary = []
    for (task, space, qname, ek), grp in long.groupby(["problem", "space", "queries", "estimate"], sort=False):
        v, (lo, hi), _ = metrics.hierarchical_bootstrap(list(grp["rho"]),
                                                        [agree[task, space, qname, ek, s].boot for s in seeds],
                                                        [np.array(seeds)], how="mean", n_boot=p.n_boot, seed=p.seed)
        summary.append({"problem": task, "space": space, "queries": qname, "estimate": ek,
                        "ρ (mean over seeds)": f"{v:.3f} [{lo:.3f}, {hi:.3f}]", "τ": grp["tau"].mean(),
                        "split agreement": grp["ceiling"].mean(),
                        "median |log10 ratio|": grp["median_abs_log10_ratio"].mean(),
                        "within 2×": grp["frac_within_2x"].mean()})
    out.tables["agreement"] = book.table(pd.DataFrame(summary), {
        "problem": "problem", "space": ("space", SPACE_NAMES.get), "queries": "queries",
        "estimate": ("estimate", ESTIMATE_NAMES.get),
        "ρ (mean over seeds)": ("ρ, mean over seeds [95% CI, seeds and points resampled]", "", True),
        "τ": ("Kendall τ", ".3f"), "split agreement": ("split agreement", ".3f"),
        "median |log10 ratio|": ("median |log10 ratio|", ".3g"), "within 2×": ("share within 2×", ".3g")},
        caption="Rank agreement of each estimate with the MCMC reference")
    for task, space, qname, ek, key in GLUED_RHOS:
        out.values[key] = mean_rho(long, task, space, qname, ek)
    return long, agree


def mean_rho(long: Any, task: str, space: str, qname: str, ek: str) -> float:
    """Mean over seeds of one estimate's ρ with the reference."""
    return float(long.query("problem == @task and space == @space and queries == @qname and estimate == @ek")
                 ["rho"].mean())


def _judged(m: Measurement) -> dict[str, str]:
    """The verdict the ledger's rule gives ``m`` (the two own problems' view: shown, not recorded)."""
    return {"verdict": judge(m)}


def _claims(p: Params, runs: dict[tuple[str, int], dict[str, Any]], agree: dict, diag: Any, profile: str,
            out: Result) -> dict[str, Any]:
    """C1 (median ρ of the paper's estimate) and C3 (its ρ minus the Laplace baseline's),
    with hierarchical bootstrap intervals over seeds, then query points."""
    seeds = p.seeds
    c1_vals, c1_boots, c1_logit_vals, c1_logit_boots, c1_labels, c1_seeds = [], [], [], [], [], []
    for (task, s), _ in runs.items():
        ek, _rk = PAPER_ESTIMATE[task]
        space = "p" if task == "classification" else "f"
        for qname in ("in", "grid"):
            a = agree[task, space, qname, ek, s]
            c1_vals.append(a.rho), c1_boots.append(a.boot), c1_labels.append(f"{task}/{qname}/seed{s}")
            c1_seeds.append(s)
            b = agree[task, "logit", qname, "iso_f", s] if task == "classification" else a
            c1_logit_vals.append(b.rho), c1_logit_boots.append(b.boot)
    c1_seeds_a = np.array(c1_seeds)
    c1, c1_ci, _ = metrics.hierarchical_bootstrap(c1_vals, c1_boots, [c1_seeds_a], how="median", seed=p.seed)
    c1_logit, c1_logit_ci, _ = metrics.hierarchical_bootstrap(c1_logit_vals, c1_logit_boots, [c1_seeds_a],
                                                              how="median", seed=p.seed)
    _, c1_points_ci = metrics.combine(c1_vals, c1_boots, how="median", seed=p.seed)

    c3_per: dict[str, tuple[list, list]] = {b: ([], []) for b in C3_BASELINES}
    c3_labels, c3_seeds = [], []
    for s in seeds:
        for qname in ("in", "grid"):
            q = runs["classification", s]["q"][qname]
            for b, (ek, bk, rk) in C3_BASELINES.items():
                d, _, boot = metrics.rank_difference(q["est"][ek], q["est"][bk], q["ref"][rk], n_boot=p.n_boot, seed=s)
                c3_per[b][0].append(d), c3_per[b][1].append(boot)
            c3_labels.append(f"{qname}/seed{s}"), c3_seeds.append(s)
    c3_seeds_a = np.array(c3_seeds)
    c3_all = {b: metrics.hierarchical_bootstrap(v, bt, [c3_seeds_a], how="mean", seed=p.seed)[:2]
              for b, (v, bt) in c3_per.items()}
    c3, c3_ci = c3_all["glm"]
    c3_vals = c3_per["glm"][0]
    _, c3_points_ci = metrics.combine(c3_vals, c3_per["glm"][1], how="mean", seed=p.seed)

    n_query_min = int(min(len(r["q"][qn]["ref"]["var_f"]) for r in runs.values() for qn in ("in", "grid")))
    n_query_min_cls = int(min(len(runs["classification", s]["q"][qn]["ref"]["var_p"]) for s in seeds
                              for qn in ("in", "grid")))
    c1_evidence = {"seeds": len(seeds), "settings": len({lab.rsplit("/", 1)[0] for lab in c1_labels}),
                   "query_points": n_query_min}
    c3_evidence = {"seeds": len(seeds), "settings": len({lab.split("/")[0] for lab in c3_labels}),
                   "query_points": n_query_min_cls}

    def c3_verdict(b: str) -> str:
        v, ci = c3_all[b]
        return judge(Measurement("C3", v, tuple(ci), evidence=c3_evidence))

    def fmt(b: str) -> str:
        v, (lo, hi) = c3_all[b]
        return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"

    common = dict(profile=profile, seeds=seeds,
                  model=dict(width=p.width, depth=p.depth, activation=p.activation, prior=p.prior, alpha=p.alpha),
                  n_train_cls=p.n_train_cls, n_train_reg=p.n_train_reg,
                  nuts=dict(num_warmup=p.num_warmup, num_samples=p.num_samples, num_chains=p.num_chains))
    e1 = _judged(Measurement("C1", c1, c1_ci, settings=common,
                            details=dict(per_setting=dict(zip(c1_labels, c1_vals)),
                                         logit_space_per_setting=dict(zip(c1_labels, c1_logit_vals)),
                                         logit_space_median=c1_logit, logit_space_ci=list(c1_logit_ci),
                                         query_points_only_ci=list(c1_points_ci),
                                         interval="hierarchical bootstrap: seeds, then query points",
                                         min_split_agreement=float(diag["split agreement ρ"].min())),
                            note=(f"in logit space (the sigmoid factor removed) the median ρ is {c1_logit:.2f} "
                                  f"[{c1_logit_ci[0]:.2f}, {c1_logit_ci[1]:.2f}]; lowest single setting "
                                  f"{min(c1_vals):.2f}"),
                            evidence=c1_evidence))
    others = ("glm_laplace", "delta", "logit")
    e3 = _judged(Measurement("C3", c3, c3_ci, settings=common,
                            details=dict(baseline="GGN-Laplace, GLM predictive Var[σ(f)], f ~ N(f*, gᵀΣg) "
                                                  "(quadrature)",
                                         per_setting=dict(zip(c3_labels, c3_vals)),
                                         query_points_only_ci=list(c3_points_ci),
                                         interval="hierarchical bootstrap: seeds, then query points",
                                         **{f"{b}_difference": c3_all[b][0] for b in others},
                                         **{f"{b}_ci": list(c3_all[b][1]) for b in others},
                                         **{f"{b}_per_setting": dict(zip(c3_labels, c3_per[b][0])) for b in others},
                                         delta_method_verdict=c3_verdict("delta")),
                            note=(f"against the delta-method Laplace ((p(1−p))²·gᵀΣg, exact Hessian) the difference "
                                  f"is {fmt('delta')}, which the same rule judges '{c3_verdict('delta')}'; against "
                                  f"the exact-Hessian GLM predictive {fmt('glm_laplace')}; in logit space "
                                  f"{fmt('logit')}"),
                            evidence=c3_evidence))
    values = dict(c1=c1, c1_lo=c1_ci[0], c1_hi=c1_ci[1], c1_logit=c1_logit, c1_logit_lo=c1_logit_ci[0],
                  c1_logit_hi=c1_logit_ci[1], c1_points_lo=c1_points_ci[0], c1_points_hi=c1_points_ci[1],
                  c3=c3, c3_lo=c3_ci[0], c3_hi=c3_ci[1], c3_points_lo=c3_points_ci[0], c3_points_hi=c3_points_ci[1])
    for b, name in (("delta", "c3_delta"), ("glm_laplace", "c3_glm_laplace"), ("logit", "c3_logit")):
        v, (lo, hi) = c3_all[b]
        values.update({name: v, f"{name}_lo": lo, f"{name}_hi": hi})
    out.values.update({k: float(v) for k, v in values.items()})
    out.values.update(c1_verdict=e1["verdict"], c3_verdict=e3["verdict"], c3_delta_verdict=c3_verdict("delta"),
                      c1_min_rho=C1_MIN_RHO, c3_min_difference=C3_MIN_DIFFERENCE, c1_n_seeds=len(seeds))
    return {"c1_labels": c1_labels, "c1_vals": c1_vals, "c1_logit_vals": c1_logit_vals, "c3_labels": c3_labels,
            "c3_per": c3_per}


def _per_setting(p: Params, runs: dict[tuple[str, int], dict[str, Any]], c: dict[str, Any], out: Result) -> None:
    """The GLM predictive's magnitudes, and the claims' numbers per setting."""
    import pandas as pd

    rows = []
    for s in p.seeds:
        for qname in ("in", "grid"):
            q = runs["classification", s]["q"][qname]
            ref = q["ref"]["var_p"]
            rows.append(dict(queries=qname, seed=s, var_f=float(np.median(q["est"]["ggn_f"])),
                             ratio=float(np.median(q["est"]["ggn_glm_p"] / np.maximum(q["est"]["ggn_p"], 1e-300))),
                             mag_glm=float(np.median(np.abs(np.log10(np.maximum(q["est"]["ggn_glm_p"], 1e-300)
                                                                     / ref)))),
                             mag_delta=float(np.median(np.abs(np.log10(np.maximum(q["est"]["ggn_p"], 1e-300)
                                                                       / ref))))))
    mag = pd.DataFrame(rows).groupby("queries").mean(numeric_only=True)
    for qname in ("in", "grid"):
        out.values[f"glm_var_f_{qname}"] = float(mag.loc[qname, "var_f"])
        out.values[f"glm_delta_ratio_{qname}"] = float(mag.loc[qname, "ratio"])
    out.values.update(mag_glm_grid=float(mag.loc["grid", "mag_glm"]), mag_delta_grid=float(mag.loc["grid", "mag_delta"]))

    c3_by_label = {b: dict(zip(c["c3_labels"], c["c3_per"][b][0])) for b in C3_BASELINES}
    per_seed = []
    for label, v, v_logit in zip(c["c1_labels"], c["c1_vals"], c["c1_logit_vals"]):
        task, qname, seed_label = label.split("/")
        cls = task == "classification"  # C3 is measured in classification only
        per_seed.append({"problem": task, "queries": qname, "seed": int(seed_label.removeprefix("seed")),
                         "c1": v, "c1_logit": v_logit,
                         **{f"c3_{b}": c3_by_label[b][f"{qname}/{seed_label}"] if cls else np.nan
                            for b in ("glm", "delta", "logit")}})
    per_seed_df = pd.DataFrame(per_seed)
    out.tables["per_setting"] = book.table(per_seed_df, {
        "problem": "problem", "queries": "queries", "seed": ("seed", "d"),
        "c1": ("C1: ρ of the paper's estimate", ".3f"), "c1_logit": ("C1: ρ in logit space", ".3f"),
        "c3_glm": ("C3: ρ(‖∇p‖²) − ρ(GGN, GLM predictive)", ".3f"),
        "c3_delta": ("C3 against the delta-method Laplace", ".3f"), "c3_logit": ("C3 in logit space", ".3f")},
        caption="The claims' numbers per setting (no interval: one data set and one NUTS run each)")
    c3_per_seed = per_seed_df.dropna(subset=["c3_glm"]).groupby("seed")["c3_glm"].mean()
    out.values.update(c1_setting_min=float(min(c["c1_vals"])), c1_setting_max=float(max(c["c1_vals"])),
                      c3_seed_min=float(c3_per_seed.min()), c3_seed_max=float(c3_per_seed.max()))
    out.values.update(c1_setting_range=range_words(min(c["c1_vals"]), max(c["c1_vals"]), "setting"),
                      c3_seed_range=range_words(c3_per_seed.min(), c3_per_seed.max(), "seed"))


def range_words(lo: float, hi: float, unit: str) -> str:
    """"runs from lo to hi", or "is lo" when both ends read the same at 3 decimals (one ``unit``)."""
    a, b = f"{lo:.3f}", f"{hi:.3f}"
    return f"runs from {a} to {b}" if a != b else f"is {a} (the same for every {unit} of this build)"


def where_it_works(p: Params, long: Any) -> str:
    """Per problem, space and query set: does the isotropic estimate rank as well as the best
    alternative (Markdown, computed from this run's mean ρ's)?"""
    names = dict(ESTIMATE_NAMES, iso_p="‖∇p‖²", iso_f="‖∇f‖²")
    lines = []
    for (task, space), (_ref_key, est_keys) in comparisons(p).items():
        iso = est_keys[0]
        for qname in ("in", "grid"):
            m = {ek: mean_rho(long, task, space, qname, ek) for ek in est_keys}
            ceiling = float(long.query("problem == @task and space == @space and queries == @qname")["ceiling"].mean())
            best = max((k for k in m if k != iso), key=m.get)
            gap = m[iso] - m[best]
            verdict = ("works: as good as the best alternative" if gap > -SETTING_WORKS_WITHIN else
                       "works less well than the best alternative" if gap > -SETTING_FAILS_BEYOND
                       else "fails against the alternatives")
            if m[iso] < C1_MIN_RHO:
                verdict = "fails: weak rank agreement"
            lines.append(f"- {task}, {space} space, `{qname}` queries: {names[iso]} ρ = {m[iso]:.3f} "
                         f"(best other: {names[best]} {m[best]:.3f}; split agreement of the reference {ceiling:.3f}) "
                         f"→ {verdict}.")
            if "aleatoric" in m:
                lines.append(f"  The sigmoid factor alone, p(1−p), gives {m['aleatoric']:.3f}.")
    return ("**Where the isotropic estimate works and where it fails (computed from this run; "
            f"thresholds: within {SETTING_WORKS_WITHIN} of the best alternative = works, more than "
            f"{SETTING_FAILS_BEYOND} below = fails, ρ < {C1_MIN_RHO} (C1's rule) = fails):**\n\n" + "\n".join(lines))


def table1_settings(p: Params) -> dict[tuple[str, int], Setting]:
    """The `Setting` of each (Table 1 problem, seed): the chapter's network, prior and NUTS."""
    model = dict(width=p.width, depth=p.depth, activation=p.activation, prior=p.prior, alpha=p.alpha)
    return table1.settings(p.table1_problems, range(p.seed, p.seed + p.table1_seeds), model,
                           NutsSettings(p.num_warmup, p.num_samples, p.num_chains, p.target_accept_cls),
                           NutsSettings(p.num_warmup, p.num_samples, p.num_chains, p.target_accept_reg),
                           n_query_in=p.n_query_in, grid_size_2d=p.grid_size_cls, grid_size_1d=p.grid_size_reg,
                           n_restarts=p.n_restarts)


def fill_table1(p: Params, store: Any, world: Any = None, progress: bool = True) -> tuple[dict, dict]:
    """Compute (or, without ``p.table1_compute``, read) Table 1's NUTS references and local
    estimates through ``store``; ``world`` shards the missing ones over ``torchrun`` ranks."""
    jobs = list(table1_settings(p).values())
    read_only = not p.table1_compute
    # The NUTS kind is re-sampled in every build through the chapter's own settings (`_evaluate`); a Table 1
    # reference takes 2-4 minutes, so each is checked by `gnuq store verify 04 --all`, not in every build.
    refs = stored_references(jobs, store=store, verify=0, progress=progress, world=world, read_only=read_only)
    local = stored_local_estimates(jobs, store=store, verify=p.store_verify, progress=progress, world=world,
                                   read_only=read_only)
    return refs, local


_QUERY_WORDS = {"grid": "grid", "in": "in-distribution"}
"""Each query-set reading of `table1.QUERIES` in a word for sentences."""

SHORT = {"reproduced": "✓ reproduced", "not reproduced": "✗ not reproduced", "inconclusive": "? inconclusive",
         "beyond the paper": "beyond the paper"}
"""A cell's verdict with a mark that survives a narrow screen."""


def _table1(p: Params, store: Any, out: Result) -> None:
    """Every cell of the paper's Table 1 that the stored seeds allow, beside the paper's value,
    under each query-set reading (`table1.QUERIES`; the primary first)."""
    import pandas as pd
    from tqdm.auto import tqdm

    jobs = table1_settings(p)
    refs, local = fill_table1(p, store, progress=False)
    runs = {key: evaluate(s, reference_summary=refs[setting_id(s)], local=local[setting_id(s)])
            for key, s in tqdm(jobs.items(), desc="Table 1 settings")
            if setting_id(s) in refs and setting_id(s) in local}
    per_seed = {q: {k: table1.cell_values(r, k[0], q, n_boot=p.n_boot, seed=k[1]) for k, r in runs.items()}
                for q in table1.QUERIES}
    rows = []
    for name in p.table1_problems:
        seeds = [s for (prob, s) in runs if prob == name]
        for row in table1.rows_of(name):
            for stat in ("r", "rho"):
                want = paper.value("1", row, "", stat, problem=name)
                entry = {"problem": PROBLEMS[name].paper, "estimate": row, "statistic": "r" if stat == "r" else "ρ",
                         "paper": want, "key": name, "row": row, "stat": stat}
                for q in table1.QUERIES:
                    cell = table1.summarise([per_seed[q][name, s][row, stat][0] for s in seeds],
                                            [per_seed[q][name, s][row, stat][1] for s in seeds], seeds,
                                            n_boot=p.n_boot, seed=p.seed)
                    verdict, why = table1.verdict(cell, want)
                    entry.update({f"ours_{q}": cell.median, f"lo_{q}": cell.lo, f"hi_{q}": cell.hi,
                                  f"verdict_{q}": verdict, f"why_{q}": why, "seeds": cell.seeds})
                rows.append(entry)
    cells = pd.DataFrame(rows)
    primary = table1.PRIMARY_QUERIES
    cells["ours"], cells["lo"], cells["hi"], cells["verdict"], cells["why"] = (
        cells[f"ours_{primary}"], cells[f"lo_{primary}"], cells[f"hi_{primary}"], cells[f"verdict_{primary}"],
        cells[f"why_{primary}"])

    def shown(q: str) -> list[str]:
        return [f"{m:.2f} [{lo:.2f}, {hi:.2f}] {SHORT[v].split(' ')[0]}" if n else "—" for m, lo, hi, v, n in
                zip(cells[f"ours_{q}"], cells[f"lo_{q}"], cells[f"hi_{q}"], cells[f"verdict_{q}"], cells["seeds"])]

    view = cells.assign(paper=["—" if v is None or v != v else f"{v:.2f}" for v in cells["paper"]],
                        grid=shown("grid"), inside=shown("in"))
    out.tables["table1"] = book.table(view[["problem", "estimate", "statistic", "paper", "grid", "inside"]], {
        "problem": "problem", "estimate": "estimate", "statistic": "", "paper": "paper",
        "grid": ("ours, grid: median [95 % CI] (primary)", "", True),
        "inside": ("ours, in-distribution: median [95 % CI]", "", True)},
        caption="The paper's Table 1 beside ours, cell by cell (✓ reproduced, ✗ not, ? inconclusive)")
    judged = cells[cells["paper"].notna()]
    counts = {q: judged[f"verdict_{q}"].value_counts() for q in table1.QUERIES}
    same = int((judged["verdict_grid"] == judged["verdict_in"]).sum())
    gap = {q: float((judged[f"ours_{q}"] - judged["paper"]).abs().mean()) for q in table1.QUERIES}
    closer, farther = sorted(gap, key=gap.get)
    out.values.update(
        t1_rule=table1.RULE, t1_cells=int(len(judged)), t1_settings=int(len(runs)), t1_wanted=int(len(jobs)),
        t1_reproduced=int(counts[primary].get("reproduced", 0)), t1_not=int(counts[primary].get("not reproduced", 0)),
        t1_inconclusive=int(counts[primary].get("inconclusive", 0)),
        t1_in_reproduced=int(counts["in"].get("reproduced", 0)), t1_in_not=int(counts["in"].get("not reproduced", 0)),
        t1_in_inconclusive=int(counts["in"].get("inconclusive", 0)), t1_same=same,
        t1_gap_grid=gap["grid"], t1_gap_in=gap["in"],
        t1_closer=(f"Overall the {_QUERY_WORDS[closer]} cells lie closer to the paper's values: they differ from "
                   f"them by {gap[closer]:.2f} on average, the {_QUERY_WORDS[farther]} ones by {gap[farther]:.2f}"
                   if gap[closer] == gap[closer] else "With no cell computed, neither reading can be set against "
                                                      "the paper's values yet"),
        t1_seeds_wanted=p.table1_seeds, t1_missing_words=_missing_words(p, runs, jobs))
    record_cells("Table 1", [
        {"column": r.problem, "row": r.estimate, "statistic": r.statistic,
         "paper": r.paper, "ours": r.ours, "lo": r.lo, "hi": r.hi, "seeds": r.seeds, "verdict": r.verdict,
         "why": r.why, "tolerance": f"±{table1.TOLERANCE:.2f} or in our CI", "anchor": "table-1",
         "readings": {"ours, in-distribution": [r.ours_in, r.lo_in, r.hi_in, r.verdict_in]}}
        for r in judged.itertuples()])
    out.data.update(table1_cells=cells, table1_runs=runs, table1_per_seed=per_seed)


def _table1_claims(p: Params, profile: str, out: Result) -> None:
    """C1 and C3 on the Table 1 cells: C1 the median GN ρ over the six classification problems,
    C3 GN ρ − LA ρ over the binary problems (the paper's LA rows in classification); each under
    both query-set readings (the primary recorded, the other as a reading), and C3 also over all
    six classification problems (multiclass LA is ours, beyond the paper)."""
    per_seed, runs = out.data["table1_per_seed"], out.data["table1_runs"]
    cls = [n for n in p.table1_problems if PROBLEMS[n].task != "regression"]
    binary = [n for n in cls if PROBLEMS[n].task == "classification"]
    n_query = min((len(r["q"][q]["ref"]["var_p"]) for (n, _), r in runs.items() if n in cls for q in table1.QUERIES),
                  default=0)

    def measure(claim: str, problems: list[str], q: str, minus: str | None, how: str) -> Measurement:
        v, ci, n = table1.pooled(per_seed[q], problems, "Epistemic (GN)", minus, how=how, n_boot=p.n_boot,
                                 seed=p.seed)
        seeds = min((sum(k[0] == name for k in per_seed[q]) for name in problems), default=0)
        if n == 0:  # nothing stored yet: a placeholder the gate refuses
            v, ci = 0.0, (-1.0, 1.0)
        return Measurement(claim, v, ci, evidence={"seeds": seeds, "settings": len({k[0] for k in per_seed[q]
                                                                                     if k[0] in problems}),
                                                   "query_points": n_query})

    common = dict(profile=profile, problems=p.table1_problems, seeds=p.table1_seeds,
                  model=dict(width=p.width, depth=p.depth, activation=p.activation, prior=p.prior, alpha=p.alpha),
                  nuts=dict(num_warmup=p.num_warmup, num_samples=p.num_samples, num_chains=p.num_chains))
    c1 = {q: measure("C1", cls, q, None, "median") for q in table1.QUERIES}
    c3 = {f"queries={q}, problems={which}": measure("C3", probs, q, "Epistemic (LA)", "mean")
          for q in table1.QUERIES for which, probs in (("binary (the paper's LA cells)", binary),
                                                       ("all six classification", cls))}
    primary = table1.PRIMARY_QUERIES
    c3_primary = f"queries={primary}, problems=binary (the paper's LA cells)"
    cells = out.data["table1_cells"]
    gn = cells[(cells.key.isin(cls)) & (cells.row == "Epistemic (GN)") & (cells.stat == "rho")]
    lowest = gn.loc[gn.ours.idxmin()] if len(gn) and gn.ours.notna().any() else None
    per_problem = {r.problem: [r.ours, r.lo, r.hi, r.paper] for r in gn.itertuples()}
    m1 = c1[primary]
    e1 = record(dataclasses.replace(m1, settings=common, details=dict(
        per_problem=per_problem, queries=primary, interval="hierarchical bootstrap: each problem kept, its seeds "
                                                           "resampled, then query points"),
                note=(f"on in-distribution queries the median is {c1['in'].value:.2f} "
                      f"[{c1['in'].ci[0]:.2f}, {c1['in'].ci[1]:.2f}]"
                      + (f"; lowest problem on the grid: {lowest.problem} ρ {lowest.ours:.2f} (paper {lowest.paper:.2f})"
                         if lowest is not None else ""))),
                readings={f"queries={q}": {"C1": m} for q, m in c1.items()}, primary=f"queries={primary}")
    m3 = c3[c3_primary]
    e3 = record(dataclasses.replace(m3, settings=common, details=dict(
        baseline="the paper's LA row: exact-Hessian Laplace, delta method (gᵀH⁻¹g)", queries=primary,
        interval="hierarchical bootstrap: each problem kept, its seeds resampled, then query points (paired)"),
                note="readings: " + "; ".join(f"{k}: {m.value:+.3f} [{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]"
                                              for k, m in c3.items() if k != c3_primary)),
                readings={k: {"C3": m} for k, m in c3.items()}, primary=c3_primary)
    out.values.update(
        t1c1=m1.value, t1c1_lo=m1.ci[0], t1c1_hi=m1.ci[1], t1c1_verdict=e1["verdict"], t1c1_reason=e1["reason"],
        t1c1_in=c1["in"].value, t1c1_in_lo=c1["in"].ci[0], t1c1_in_hi=c1["in"].ci[1],
        t1c1_robust=e1["robustness"]["text"],
        t1c3=m3.value, t1c3_lo=m3.ci[0], t1c3_hi=m3.ci[1], t1c3_verdict=e3["verdict"], t1c3_reason=e3["reason"],
        t1c3_robust=e3["robustness"]["text"])


def _missing_words(p: Params, runs: dict, jobs: dict) -> str:
    """One sentence on the Table 1 settings not stored yet (the campaign's progress)."""
    missing = {name: sum((name, s) not in runs for (n, s) in jobs if n == name) for name in p.table1_problems}
    left = {n: k for n, k in missing.items() if k}
    if not left:
        return (f"All {len(jobs)} settings ({len(p.table1_problems)} problems × {p.table1_seeds} "
                f"seed{'s' if p.table1_seeds != 1 else ''} each) are stored.")
    return (f"{len(runs)} of {len(jobs)} settings are stored; still to sample: "
            + ", ".join(f"{PROBLEMS[n].paper} ({k} of {p.table1_seeds} seeds)" for n, k in left.items())
            + " (the campaign: `python -m gnuq_core.chapters.mcmc fill`).")


def run(p: Params, store: Any, profile: str) -> Result:
    """The NUTS references and local estimates through ``store``, the comparisons, claims C1 and C3,
    and the paper's Table 1 from what is stored."""
    from IPython.display import Markdown

    out = Result()
    _table1(p, store, out)
    _table1_claims(p, profile, out)
    runs = _evaluate(p, store, out)
    diag = _diagnostics(runs, out)
    _overstatement(p, runs, out)
    long, agree = _agreement(p, runs, out)
    c = _claims(p, runs, agree, diag, profile, out)
    _per_setting(p, runs, c, out)
    out.tables["where_it_works"] = Markdown(where_it_works(p, long))
    out.data.update(runs=runs)
    return out


# ----------------------------------------------------------------------------- figures


def _plot_field(ax: Any, values: np.ndarray, data: Any, title: str, log: bool = True) -> None:
    import matplotlib.pyplot as plt

    g = data.grid_shape[0]
    xs = data.queries["grid"]
    z = np.log10(np.maximum(values, 1e-300)) if log else values
    im = ax.pcolormesh(xs[:, 0].reshape(g, g), xs[:, 1].reshape(g, g), z.reshape(g, g), shading="auto",
                       cmap="viridis")
    ax.scatter(*data.x_train[data.y_train == 0].T, s=6, c="white", edgecolors="k", linewidths=0.3)
    ax.scatter(*data.x_train[data.y_train == 1].T, s=6, c="tab:red", edgecolors="k", linewidths=0.3)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    plt.colorbar(im, ax=ax, fraction=0.046, pad=0.02)


def figure_cls_maps(result: Result, p: Params, space: str) -> Any:
    """Two moons, first seed: the MCMC variance and three estimates on the grid (``space``:
    ``"p"`` or ``"logit"``), log₁₀ colour scales."""
    r0 = result.data["runs"]["classification", p.seed]
    q0 = r0["q"]["grid"]
    panels = {"p": [(q0["ref"]["var_p"], "MCMC Var[p]"), (q0["est"]["iso_p"], "‖∇p‖² (isotropic)"),
                    (q0["est"]["laplace_p"], "Laplace, p space"), (q0["est"]["aleatoric"], "p(1−p)")],
              "logit": [(q0["ref"]["var_f"], "MCMC Var[f] (logit)"), (q0["est"]["iso_f"], "‖∇f‖² (isotropic)"),
                        (q0["est"]["laplace_f"], "Laplace, logit space"), (q0["est"]["ggn_f"], "GGN, logit space")]}
    fig, axes = book.subplots(2, 2, panel_height=2.9)
    for ax, (v, t) in zip(axes.ravel(), panels[space]):
        _plot_field(ax, v, r0["data"], "log10 " + t)
    return fig


TABLE1_PANELS = (("ref", "var_p", "epistemic, MCMC"), ("est", "iso_p", "epistemic, ‖∇p‖²"),
                 ("ref", "alea_p", "aleatoric, MCMC"), ("est", "aleatoric", "aleatoric, p(1−p)"))
"""Figure 2's four panels: (where, key, title); each map is normalised to [0, 1]."""


def _scatter_classes(ax: Any, data: Any) -> None:
    for k in range(max(data.n_classes, 2)):
        ax.scatter(*data.x_train[data.y_train == k].T, s=5, color=f"C{k}", edgecolors="k", linewidths=0.25)


def _normalised_map(ax: Any, values: np.ndarray, data: Any, title: str) -> Any:
    g = data.grid_shape[0]
    xs = data.queries["grid"]
    v = np.asarray(values, float)
    v = (v - v.min()) / max(v.max() - v.min(), 1e-300)
    im = ax.pcolormesh(xs[:, 0].reshape(g, g), xs[:, 1].reshape(g, g), v.reshape(g, g), shading="auto",
                       cmap="viridis", vmin=0, vmax=1)
    _scatter_classes(ax, data)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    return im


def figure_problems(result: Result, p: Params) -> Any:
    """The training data of each Table 1 problem (first seed): classes by colour, regression as points."""
    from gnuq_core.bayes.reference import prepare

    jobs = table1_settings(p)
    names = list(p.table1_problems)
    fig, axes = book.subplots(-(-len(names) // 3), 3, panel_height=2.0, squeeze=False)
    for ax in axes.ravel()[len(names):]:
        ax.set_axis_off()
    for ax, name in zip(axes.ravel(), names):
        data, _ = prepare(jobs[name, p.seed])
        if data.task == "regression":
            ax.scatter(data.x_train[:, 0], data.y_train, s=5, color="C0")
        else:
            _scatter_classes(ax, data)
        ax.set_title(PROBLEMS[name].paper, fontsize=9)
        ax.set_xticks([]), ax.set_yticks([])
    return fig


def figure_table1_maps(result: Result, p: Params, problem: str) -> Any:
    """Figure 2's four maps of ``problem`` (`TABLE1_PANELS`, each normalised to [0, 1]), its first stored seed."""
    runs = result.data["table1_runs"]
    seeds = sorted(s for (n, s) in runs if n == problem)
    if not seeds:
        fig, ax = book.subplots(1, 1, panel_height=1.0)
        ax.set_axis_off()
        why = "not stored yet" if problem in p.table1_problems else "not in this build's problems"
        ax.text(0.5, 0.5, f"{PROBLEMS[problem].paper}: {why}", ha="center", va="center", fontsize=10)
        return fig
    fig, axes = book.subplots(2, 2, panel_height=2.6)
    q, data = runs[problem, seeds[0]]["q"]["grid"], runs[problem, seeds[0]]["data"]
    for ax, (where, key, title) in zip(axes.ravel(), TABLE1_PANELS):
        im = _normalised_map(ax, q[where][key], data, title)
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02)
    return fig


def _band(ax: Any, x: np.ndarray, mean: np.ndarray, var: np.ndarray, label: str, color: str,
          alpha: float = 0.25) -> None:
    sd = np.sqrt(np.maximum(var, 0))
    ax.plot(x, mean, color=color, lw=1.2, label=label)
    ax.fill_between(x, mean - 2 * sd, mean + 2 * sd, color=color, alpha=alpha, lw=0)


def _regression(result: Result, p: Params) -> tuple[Any, Any, np.ndarray, np.ndarray, tuple[float, float]]:
    rr = result.data["runs"]["regression", p.seed]
    x = rr["data"].queries["grid"][:, 0]
    xtr = rr["data"].x_train[:, 0]
    return rr, rr["q"]["grid"], x, xtr, (xtr[xtr < 0].max(), xtr[xtr > 0].min())


def figure_reg_bands(result: Result, p: Params) -> Any:
    """Gap regression, first seed: ±2 sd bands of MCMC, isotropic (σ² fitted) and Laplace (top);
    the variances of f on a log scale (bottom)."""
    rr, qr, x, xtr, gap = _regression(result, p)
    ref_var = qr["ref"]["var_f"]
    s2_iso = metrics.fit_isotropic_scale(qr["est"]["iso_f"], ref_var)
    fig, axes = book.subplots(2, 1, panel_height=2.9)
    ax = axes[0]
    _band(ax, x, qr["ref"]["mean_f"], ref_var, "MCMC mean ± 2 sd", "k", 0.15)
    _band(ax, x, qr["est"]["f"], s2_iso * qr["est"]["iso_f"], "MAP ± 2 sd, isotropic σ²‖∇f‖²", "tab:blue")
    _band(ax, x, qr["est"]["f"], qr["est"]["laplace_f"], "MAP ± 2 sd, Laplace", "tab:orange", 0.2)
    ax.scatter(xtr, rr["data"].y_train, s=8, c="k", zorder=3)
    ax.axvspan(*gap, color="grey", alpha=0.15)
    ax.set_ylim(-4, 4), ax.set_xlabel("x (standardised)"), ax.set_ylabel("f")
    ax.legend(loc="upper left", ncols=1)
    ax = axes[1]
    for key, label, c in [("iso_f", "isotropic (σ² fitted)", "tab:blue"), ("laplace_f", "Laplace", "tab:orange"),
                          ("ggn_f", "GGN", "tab:green"), ("diag_f", "diagonal Laplace", "tab:purple")]:
        ax.plot(x, qr["est"][key] * (s2_iso if key == "iso_f" else 1.0), color=c, label=label)
    ax.plot(x, ref_var, "k", lw=2, label="MCMC Var[f]")
    ax.axvspan(*gap, color="grey", alpha=0.15)
    ax.set_yscale("log"), ax.set_xlabel("x (standardised)"), ax.set_ylabel("variance of f")
    ax.legend(ncols=2)
    return fig


def figure_overstate(result: Result, p: Params) -> Any:
    """Where the isotropic score over- and understates the variance, next to how much prior
    variance the data leave (gap regression top, two moons bottom; first seed)."""
    _, qr, x, xtr, gap = _regression(result, p)
    r0 = result.data["runs"]["classification", p.seed]
    q0 = r0["q"]["grid"]
    fig, axes = book.subplots(2, 2, panel_height=3.0)
    axes = axes.ravel()
    ax = axes[0]
    ax.plot(x, log_ratio(qr), color="tab:blue", label="isotropic ‖∇f‖²")
    ax.plot(x, log_ratio(qr, "ggn_f"), color="tab:green", label="GGN (σ² fitted too)")
    ax.axhline(0, color="k", lw=0.8)
    ax.axvspan(*gap, color="grey", alpha=0.15)
    ax.plot(xtr, np.full_like(xtr, ax.get_ylim()[0]), "|", color="k", ms=8)
    ax.set_xlabel("x (standardised)"), ax.set_ylabel("log10 (σ² × estimate / Var[f])")
    ax.set_title("gap regression: over (>0), under (<0)", fontsize=9), ax.legend()
    ax = axes[1]
    ax.semilogy(x, unexplained(qr), color="tab:red")
    ax.axvspan(*gap, color="grey", alpha=0.15)
    ax.plot(xtr, np.full_like(xtr, ax.get_ylim()[0]), "|", color="k", ms=8)
    ax.set_xlabel("x (standardised)"), ax.set_ylabel("GGN variance / prior term")
    ax.set_title("gap regression: prior variance left", fontsize=9)
    _plot_field(axes[2], log_ratio(q0), r0["data"], "two moons: log10 (σ²‖∇f‖² / Var[f])", log=False)
    _plot_field(axes[3], unexplained(q0), r0["data"], "two moons: log10 (GGN / prior term)")
    return fig


def figure_scatter(result: Result, p: Params) -> Any:
    """Estimate (σ² fitted) against the MCMC reference per grid point, first seed."""
    runs = result.data["runs"]
    q0, qr = runs["classification", p.seed]["q"]["grid"], runs["regression", p.seed]["q"]["grid"]
    fig, axes = book.subplots(2, 2, panel_height=3.0)
    scat = [(q0, "iso_p", "var_p", "two moons: ‖∇p‖² vs Var[p]"), (q0, "iso_f", "var_f", "two moons: ‖∇f‖² vs Var[f]"),
            (q0, "laplace_f", "var_f", "two moons: Laplace vs Var[f]"),
            (qr, "iso_f", "var_f", "gap regression: ‖∇f‖² vs Var[f]")]
    for ax, (q, ek, rk, t) in zip(axes.ravel(), scat):
        e, ref = q["est"][ek], q["ref"][rk]
        s2 = metrics.fit_isotropic_scale(e, ref)
        ax.loglog(s2 * e, ref, ".", ms=3, alpha=0.6)
        lim = [min((s2 * e).min(), ref.min()), max((s2 * e).max(), ref.max())]
        ax.plot(lim, lim, "k--", lw=0.8)
        ax.set_title(f"{t}\nρ = {metrics.spearman(e, ref):.2f}", fontsize=9)
        ax.set_xlabel("σ² × estimate"), ax.set_ylabel("MCMC reference")
        ax.tick_params(which="minor", labelbottom=False, labelleft=False)  # narrow log ranges: labels would overlap
    return fig


def main(argv: list[str] | None = None, prog: str = "python -m gnuq_core.chapters.mcmc") -> int:
    """``fill``: compute the missing Table 1 references and local estimates into the store of
    ``--profile`` (default full: the results store), resumable, sharded under ``torchrun
    --nproc-per-node N`` (each rank one thread)."""
    from gnuq_core.options import OneLineParser, flag, run_command
    from gnuq_core.repro.profiles import parse_overrides
    from gnuq_core.repro.shards import distributed
    from gnuq_core.store import ResultsDisagree, open_store

    parser = OneLineParser(prog=prog, description="Fill chapter 04's Table 1 campaign (NUTS references, MAP fits).")
    sub = parser.add_subparsers(dest="command", required=True)
    fill = sub.add_parser("fill", help="compute what is missing (resumable; sharded under torchrun)")
    fill.add_argument("--profile", default="full", help="chapter profile (default: full, the results store)")
    fill.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                      help="override one chapter parameter, as the chapter runner's --set")
    fill.add_argument("--threads", type=flag("threads"), default=None, help="threads per process")
    args = parser.parse_args(argv)

    def body() -> int:
        with distributed("cpu", args.threads) as world:
            p = Params.for_profile(args.profile, {**parse_overrides(args.overrides), "table1_compute": True})
            store = open_store(args.profile)
            store.missing = "compute"  # computing what is missing is this command's purpose
            refs, local = fill_table1(p, store, world=world)
            print(f"Table 1: {len(refs)} NUTS references and {len(local)} local estimates stored "
                  f"(of {len(table1_settings(p))} settings)")
        return 0

    return run_command(body, bad_input=(ResultsDisagree,),
                       interrupted="interrupted: every setting finished so far is stored; rerun to resume")


if __name__ == "__main__":
    raise SystemExit(main())
