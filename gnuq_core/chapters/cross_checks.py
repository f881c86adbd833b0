"""Chapter 80, cross-checks: the project's numbers against independent implementations.

Four comparisons, each an agreement table (`gnuq_core.crosscheck.agreement`) with a
tolerance set by the arithmetic involved:

1. Laplace and GGN variances of small MAP networks against laplace-torch, ‖∇θ p‖² against
   plain autograd, the GLM predictive against Monte-Carlo draws
   (`gnuq_core.crosscheck.laplace`);
2. the project's Lanczos, SLQ and Hessian-vector products against ARPACK, dense
   ``eigvalsh``, curvlinops and ``torch.autograd`` (`gnuq_core.crosscheck.spectra`);
3. the engine's log p and ‖∇θ log p‖² of causal LMs, and the stored records' values,
   against plain autograd (`gnuq_core.crosscheck.gradnorm`);
4. the QA baselines, AUROC and PRR of the stored QA records against the published formulas
   in separate code (`gnuq_core.crosscheck.baselines`).

`run` performs them in this order (each draw is seeded from ``Params.seed``) and returns a
`Result` whose ``values`` are what the page glues and whose ``tables`` are the agreement
tables it shows; ``data`` holds the raw agreement frames. The chapter draws no figures.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gnuq_core.chapters.base import COUNT, ChapterError, ChapterParams, Result, param
from gnuq_core.crosscheck import agreement, polygraph
from gnuq_core.crosscheck import baselines as xbase
from gnuq_core.crosscheck import gradnorm as xgrad
from gnuq_core.crosscheck import laplace as xlap
from gnuq_core.crosscheck import spectra as xspec
from gnuq_core.isotropy import lm_hessian
from gnuq_core.options import OPTIONS, Rule
from gnuq_core.qa import scores, study
from gnuq_core.qa import data as qa_data
from gnuq_core.repro import display as book

__all__ = ["Params", "run", "worst", "laplace_cases_of", "PROBLEMS", "PRIORS", "LM_BLOCK_MODELS", "BLOCK_TEXT"]

PROBLEMS = ("two_moons", "gap_regression")
"""The synthetic problems of the Laplace cross-check (`gnuq_core.bayes.synthetic`)."""
PRIORS = ("plain", "fan_in")
"""The priors of the Laplace cross-check (`gnuq_core.bayes.bnn.MLPConfig`)."""
LM_BLOCK_MODELS = ("tiny-random", "smollm2")
"""Whose last block's Hessian-vector product is checked."""
BLOCK_TEXT = ("The capital of France is Paris. Spiders have eight legs. "
              "Shakespeare wrote Romeo and Juliet.")
"""The text (repeated four times) whose first tokens feed SmolLM2's last block."""
METRIC_SCORES = ("epistemic", "combined", "p_true")
"""Scores whose AUROC and PRR are recomputed besides the baselines'."""


@dataclass(frozen=True)
class Params(ChapterParams):
    """Chapter 80's parameters (defaults: the paper edition)."""

    CHAPTER = "80_cross_checks"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        "quick": {"n_answers": 2, "max_records": 200},
        "smoke": {"laplace_cases": [["two_moons", 4, 1, "plain"], ["gap_regression", 4, 1, "fan_in"]],
                  "laplace_grid": 6, "laplace_in": 10, "glm_samples": 2000, "spectra_width": 6, "spectra_train": 60,
                  "spectra_steps": 100, "top_k": 5, "slq_probes": 8, "slq_steps": 20, "lm_block_tokens": 12,
                  "gradnorm_models": ["tiny-llama"], "n_answers": 2, "max_records": 40},
    }
    seed: int = param(0, OPTIONS["seed"], "data, MAP restarts, probes and Monte-Carlo draws")
    laplace_cases: list[list[Any]] = param([["two_moons", 8, 1, "plain"], ["two_moons", 8, 1, "fan_in"],
                                 ["gap_regression", 8, 1, "plain"], ["gap_regression", 8, 1, "fan_in"]],
                                Rule(nonempty=True), "Laplace cases: [problem, width, depth, prior] each")
    laplace_grid: int = param(15, Rule(minimum=2, integer=True),
                              "two moons: grid_size² wide-grid queries; gap regression: 4 × grid_size points")
    laplace_in: int = param(50, COUNT, "in-distribution queries per problem")
    glm_samples: int = param(20000, Rule(minimum=0, integer=True),
                             "Monte-Carlo draws of σ(f) for the GLM predictive row (0: no such row)")
    spectra_width: int = param(16, COUNT, "hidden width (two layers) of the chapter-03 classifier whose Hessian "
                                          "is checked")
    spectra_train: int = param(200, Rule(minimum=2, integer=True), "its training points")
    spectra_steps: int = param(500, COUNT, "its Adam steps")
    spectra_weight_decay: float = param(0.001, Rule(above=0), "its weight decay, also the damping of the "
                                                              "effective dimension")
    top_k: int = param(10, COUNT, "top eigenvalues compared")
    slq_probes: int = param(8, Rule(minimum=2, integer=True), "SLQ probes (at least 2: errors are counted in "
                                                              "standard errors over them)")
    slq_steps: int = param(40, COUNT, "Lanczos steps per probe")
    lm_block_tokens: int = param(32, Rule(minimum=2, integer=True), "tokens of the LM block whose HVP is checked")
    lm_block_model: str = param("tiny-random", Rule(choices=LM_BLOCK_MODELS),
                                '"tiny-random" or "smollm2" (the last block of SmolLM2-135M)')
    gradnorm_models: list[str] = param(["smollm2-135m-instruct", "gemma3-270m"], Rule(nonempty=True),
                                  'models of the gradient-norm check: real aliases, or "tiny-llama"')
    n_answers: int = param(3, COUNT, "answers per model for the gradient-norm check")
    max_records: int = param(0, Rule(minimum=0, integer=True),
                             "stored QA records per run for the baselines (0: all)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for case in self.laplace_cases:
            why = _case_problem(case)
            if why is not None:
                raise ChapterError(f"{self.CHAPTER}: parameter laplace_cases: case {case!r} {why}")
        if any(not isinstance(m, str) or not m.strip() for m in self.gradnorm_models):
            raise ChapterError(f"{self.CHAPTER}: parameter gradnorm_models={self.gradnorm_models!r} must list "
                               'model names (real aliases or "tiny-llama")')


def _case_problem(case: Any) -> str | None:
    """Why one entry of ``laplace_cases`` is refused (None if it is accepted)."""
    if not isinstance(case, (list, tuple)) or len(case) != 4:
        return "must be [problem, width, depth, prior]"
    problem, width, depth, prior = case
    if problem not in PROBLEMS:
        return f"has problem {problem!r}; use one of {', '.join(map(repr, PROBLEMS))}"
    for name, v in (("width", width), ("depth", depth)):
        why = COUNT.problem(v) if isinstance(v, int) and not isinstance(v, bool) else "must be a whole number"
        if why is not None:
            return f"has {name} {v!r}: {why}"
    if prior not in PRIORS:
        return f"has prior {prior!r}; use one of {', '.join(map(repr, PRIORS))}"
    return None


def worst(df: Any, mask: Any = None) -> float:
    """Largest ``max_rel_error`` among the rows of ``df`` (``mask``: a subset); NaN if none.

    Parameters
    ----------
    df : pandas.DataFrame
        Agreement rows (`gnuq_core.crosscheck.agreement.frame`).
    mask : pandas.Series of bool, optional
        The rows to consider.
    """
    d = df if mask is None else df[mask]
    return float(d["max_rel_error"].max()) if len(d) else float("nan")


def laplace_cases_of(p: Params) -> list[Any]:
    """The `~gnuq_core.crosscheck.laplace.LaplaceCase` of each entry of ``p.laplace_cases``."""
    return [xlap.LaplaceCase(prob, w, d, prior, seed=p.seed,
                             data=({"grid_size": p.laplace_grid, "n_query_in": p.laplace_in} if prob == "two_moons"
                                   else {"grid_size": 4 * p.laplace_grid, "n_query_in": p.laplace_in}))
            for prob, w, d, prior in p.laplace_cases]


def _show(out: Result, name: str, df: Any, caption: str, first: dict[str, Any] | None = None) -> None:
    """One agreement table in the book's format, under ``name``; its frame kept in ``data["frames"]``."""
    out.data.setdefault("frames", {})[name] = df
    out.tables[name] = book.table(df, agreement.display_columns(first), caption=caption)


def _verdict(*ok: bool) -> str:
    return "all agree" if all(ok) else "NOT all agree"


def _laplace(p: Params, out: Result) -> None:
    """Laplace and GGN variances, ‖∇θ p‖² and the GLM predictive vs laplace-torch and autograd."""
    cases = laplace_cases_of(p)
    lap = xlap.compare_cases(cases, glm_samples=p.glm_samples, n_restarts=1)
    _show(out, "laplace", lap, "The project's Laplace variances vs laplace-torch 0.3 (float64)", {"case": "case"})
    exact_rows = ~lap["quantity"].str.startswith("GLM")
    out.values.update(xc_laplace_cases=len(cases), xc_laplace_err=worst(lap, exact_rows),
                      xc_laplace_glm_z=worst(lap, ~exact_rows), xc_laplace_tol=xlap.TOLERANCE,
                      xc_laplace_mc_tol=xlap.MC_TOLERANCE, xc_laplace_glm_samples=p.glm_samples,
                      xc_laplace_agree=_verdict(lap["agrees"].all()))


def _lm_block(p: Params) -> tuple[Any, list[int], str]:
    """The LM whose last block is checked, its input token ids and the case's name."""
    import numpy as np

    if p.lm_block_model == "smollm2":
        model, tok = lm_hessian.load_smollm2()
        return model, lm_hessian.text_token_ids(tok, [BLOCK_TEXT] * 4, p.lm_block_tokens), "SmolLM2-135M, last block"
    model = lm_hessian.tiny_random_llama(seed=p.seed)
    ids = [int(t) for t in np.random.default_rng(p.seed).integers(3, 120, p.lm_block_tokens)]
    return model, ids, "tiny random Llama, last block"


def _spectra(p: Params, out: Result) -> None:
    """Lanczos vs ARPACK and dense eigh, HVPs vs explicit Hessians and autograd, SLQ vs exact."""
    import pandas as pd

    hc = xspec.classifier_hessian(p.spectra_width, seed=p.seed, n_train=p.spectra_train, steps=p.spectra_steps,
                                  weight_decay=p.spectra_weight_decay)
    case = f"w{p.spectra_width}, {hc['n_params']:,} parameters"
    eig = xspec.lanczos_vs_eigsh(hc["hessian"], hc["hvp"], k=p.top_k, seed=p.seed, label=case)
    slq = xspec.slq_vs_exact(hc["hessian"], p.spectra_weight_decay, n_probes=p.slq_probes, m=p.slq_steps,
                             seed=p.seed, label=case)
    lm_model, block_ids, block_name = _lm_block(p)
    lmh = xspec.lm_block_hvp(lm_model, block_ids, seed=p.seed, label=block_name)
    spec_tab = pd.concat([eig, lmh], ignore_index=True)
    _show(out, "spectra", spec_tab, "The project's Lanczos and HVPs vs ARPACK, dense eigh and torch.autograd",
          {"case": "case"})
    _show(out, "slq", slq, "SLQ estimates vs the exact spectrum; curvlinops' Lanczos from the same start vectors",
          {"ours_by": "ours by", "theirs_by": "theirs by"})
    same = xspec.same_start_runs(hc["hessian"], p.spectra_weight_decay, n_probes=p.slq_probes, m=p.slq_steps,
                                 seed=p.seed)
    out.values.update(
        xc_spectra_eig_err=worst(eig, eig["quantity"].str.contains("eigen|λ_min")),
        xc_spectra_hvp_err=worst(spec_tab, spec_tab["quantity"].str.contains("vector product")),
        xc_spectra_slq_err=worst(slq, slq["ours_by"].str.startswith("project SLQ")),
        xc_spectra_slq_tol=xspec.TOL_SLQ, xc_spectra_deff_exact=same["deff_exact"],
        xc_spectra_deff_ours=same["deff_project"], xc_spectra_deff_curvlinops=same["deff_curvlinops"],
        xc_spectra_agree=_verdict(spec_tab["agrees"].all(), slq["agrees"].all()))


def _gradnorm(p: Params, runs: dict[tuple[str, str], list[dict[str, Any]]], out: Result) -> None:
    """The engine's log p and ‖∇θ log p‖² (and the stored records') vs plain autograd."""
    import pandas as pd

    grad_tabs = []
    questions: dict[str, str] = {}
    for spec in p.gradnorm_models:
        lm = xgrad.load(spec)
        recs = [r for (m, _d), rs in runs.items() if m == spec for r in rs]
        answers = []
        if recs:
            for d in sorted({d for (m, d) in runs if m == spec}):
                questions.update({it.id: it.question for it in qa_data.load_qa(d)})
            answers = xgrad.record_answers(lm, recs, questions, p.n_answers)
        if not answers:
            answers = xgrad.fixed_answers(lm)[:p.n_answers]
        grad_tabs.append(xgrad.compare_answers(lm.model, answers, label=spec))
        del lm
    grad = pd.concat(grad_tabs, ignore_index=True)
    _show(out, "gradnorm", grad, "The engine's log p and ‖∇θ log p‖² vs plain autograd (float32 models)",
          {"case": "model", "ours_by": "ours by"})
    out.values.update(xc_grad_err=worst(grad, grad["ours_by"].str.startswith("engine")),
                      xc_grad_stored_err=worst(grad, grad["ours_by"].str.startswith("stored")),
                      xc_grad_answers=int(grad.groupby("case")["answers"].first().sum()),
                      xc_grad_models=", ".join(p.gradnorm_models), xc_grad_agree=_verdict(grad["agrees"].all()))


def _baselines(p: Params, runs: dict[tuple[str, str], list[dict[str, Any]]], out: Result) -> None:
    """Registry scores vs the published formulas, and qa.auroc's AUROC and PRR vs independent code.

    A run whose questions cannot be loaded is compared on its scores only; a note saying so
    is kept in ``tables["baseline_notes"]``.
    """
    from IPython.display import Markdown

    base_tabs, metric_tabs, n_records, notes = [], [], 0, []
    for (m, d), recs in sorted(runs.items()):
        recs = recs[:p.max_records] if p.max_records else recs
        n_records += len(recs)
        base_tabs.append(xbase.compare_scores(recs, label=f"{m} · {d}"))
        try:
            items = {it.id: it for it in qa_data.load_qa(d)}
            table = study.score_table(recs, items)
            out.data.setdefault("score_tables", {})[f"{m} · {d}"] = table
            metric_tabs.append(xbase.compare_metrics(table, list(xbase.BASELINES) + list(METRIC_SCORES),
                                                     label=f"{m} · {d}"))
        except (FileNotFoundError, KeyError, ValueError) as err:  # no question file: scores only
            notes.append(f"*{m} · {d}: no labels ({err}); scores compared, AUROC/PRR skipped.*")
    if notes:
        out.tables["baseline_notes"] = Markdown("\n\n".join(notes))
    base = agreement.frame([r for t in base_tabs for r in t.to_dict("records")])
    metrics = agreement.frame([r for t in metric_tabs for r in t.to_dict("records")])
    out.values.update(xc_base_records=n_records, xc_base_runs=len(runs))
    if len(base):
        _show(out, "baselines", base, "Registry scores vs the published formulas, per stored run", {"case": "run"})
        out.values.update(xc_base_err=worst(base, base["score"] != "max_seq_prob"),
                          xc_base_msp_err=worst(base, base["score"] == "max_seq_prob"))
    else:
        out.tables["baselines"] = Markdown("*No stored QA records in `results/qa`: nothing to recompute.*")
        out.values.update(xc_base_err=float("nan"), xc_base_msp_err=float("nan"))
    if len(metrics):
        _show(out, "metrics", metrics, "AUROC and PRR: qa.auroc vs independent code, per run and score",
              {"case": "run", "score": "score", "ties": ("tied scores", "d")})
    out.values["xc_metric_err"] = worst(metrics) if len(metrics) else float("nan")
    out.values["xc_base_agree"] = _verdict(base["agrees"].all() if len(base) else True,
                                           metrics["agrees"].all() if len(metrics) else True)


def _polygraph(out: Result) -> None:
    """The stored runs' scores ranked by LM-Polygraph's own ROC-AUC and normalised PRR, and
    checked against the project's numbers (`gnuq_core.crosscheck.polygraph`)."""
    from IPython.display import Markdown

    import pandas as pd

    tables = out.data.get("score_tables", {})
    if not polygraph.available() or not tables:
        why = ("LM-Polygraph is not installed (`pip install --no-deps` the `polygraph` extra: see pyproject.toml)"
               if not polygraph.available() else "no stored QA records with labels")
        out.tables["polygraph"] = Markdown(f"*Not run in this build: {why}.*")
        out.values.update(xc_pg_runs=0, xc_pg_auroc_err=float("nan"), xc_pg_prr_err=float("nan"), xc_pg_prr_n=0,
                          xc_pg_agree="not run", xc_pg_top=Markdown("not run in this build"))
        return
    ranked = scores.names(kind=("estimator", "decomposition", "baseline"))  # chapter 06's AUROC table's scores
    rows = agreement.frame([r for label, t in tables.items()
                            for r in polygraph.polygraph_metrics(t, ranked, label=label).to_dict("records")])
    out.data.setdefault("frames", {})["polygraph"] = rows
    ranking = pd.concat([polygraph.polygraph_ranking(t, ranked, label=label) for label, t in tables.items()],
                        ignore_index=True)
    out.tables["polygraph"] = book.table(
        ranking, {"case": "run", "score": "score", "answers": ("answers", "d"), "ties": ("tied answers", "d"),
                  "ROC-AUC": ("ROC-AUC", ".3f"), "PRR": ("PRR, normalised", ".3f")},
        caption="The stored answers' scores ranked by LM-Polygraph's own metric code, per run (best PRR first)")
    is_auroc = rows["quantity"] == "AUROC"
    out.values.update(
        xc_pg_runs=len(tables), xc_pg_auroc_err=float(rows.loc[is_auroc, "max_rel_error"].max()),
        xc_pg_prr_err=float(rows.loc[~is_auroc, "max_rel_error"].max()) if (~is_auroc).any() else float("nan"),
        xc_pg_prr_n=int((~is_auroc).sum()), xc_pg_agree=_verdict(rows["agrees"].all()),
        xc_pg_top=Markdown("; ".join(f"{r['case']}: `{r['score']}` ({r['PRR']:.3f})"
                                     for _, r in ranking.groupby("case").head(1).iterrows())))


def run(p: Params, qa_root: str | Path | None = None) -> Result:
    """Every cross-check of the chapter, in the page's order, and its summary.

    Parameters
    ----------
    p : Params
        The build's parameters.
    qa_root : path, optional
        Folder of stored QA records (default: the results store's ``results/qa``; tests pass
        their own). Records of the QA kind's current version are read
        (`gnuq_core.crosscheck.baselines.stored_runs`).

    Returns
    -------
    Result
        ``values``: the glued numbers and verdicts (``xc_*``); ``tables``: ``laplace``,
        ``spectra``, ``slq``, ``gradnorm``, ``baselines`` (a note when there are no stored
        records), ``baseline_notes`` (only when some run was compared without labels),
        ``metrics`` (only when some run has labels) and ``polygraph`` (LM-Polygraph's metric
        code on the labelled runs, or a note); ``data``: ``frames`` (the agreement frames by
        table name) and ``score_tables`` (the labelled runs' score tables).
    """
    started = time.perf_counter()
    out = Result()
    _laplace(p, out)
    _spectra(p, out)
    runs = xbase.stored_runs(qa_root)
    _gradnorm(p, runs, out)
    _baselines(p, runs, out)
    _polygraph(out)
    frames = list(out.data.setdefault("frames", {}).values())
    out.values.update(xc_rows=sum(len(f) for f in frames),
                      xc_disagree=int(sum((~f["agrees"].astype(bool)).sum() for f in frames)),
                      xc_seconds=time.perf_counter() - started)
    out.data["runs"] = sorted(runs)
    return out
