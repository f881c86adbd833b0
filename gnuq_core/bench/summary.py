"""From timings to numbers: medians, paired ratios with intervals, method costs, C8, targets.

Units. Every pass of a question runs once per repeat, all passes of a repeat in one
shuffled round; a *unit* is one (question, repeat) round. Ratios are paired within a unit
(numerator and denominator timed side by side), summarised per model by their median with
a percentile-bootstrap 95% interval that resamples *questions* (with all their repeats:
repeats of one question are not independent); with a single question it resamples the
repeats.

Method costs come from the score registry `gnuq_core.qa.scores`: each registered score
names the engine passes it needs (`Score.passes`), so its cost is the sum of those passes
(`gnuq_core.bench.passes.ENGINE_PASSES` maps the engine's pass names to the timed passes).
The greedy generation is shared by every method and left out (``with_generation`` puts it
back). Scores with the same passes cost the same and share a row. One cost is not a
registered score: P(True) with the reference implementation's prompt (the N samples shown
as brainstormed candidates), ``sample+p_true_reference``.

Each sampling baseline has two variants: ``optimised`` (as this project runs it: N answers
sampled as one batch, MiniLM clustering, a zero-shot P(True) prompt) and ``reference`` (as
the reference implementations run it: N answers sampled one at a time, DeBERTa-large
entailment clustering, few-shot P(True); :data:`REFERENCE_OF`). C8 is judged under two
readings (`c8_readings`), and `gap_factors` measures how much each difference multiplies
the speed-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gnuq_core.bench.config import (GRAD_GROUPS, PAPER_SPEEDUP, TARGET_ABOVE_FLOOR, TARGET_GRAD_OVER_FORWARD,
                                   TARGET_MEMORY_FRACTION)
from gnuq_core.bench.passes import ENGINE_PASSES
from gnuq_core.qa.scores import SCORES, get
from gnuq_core.repro.claims import Measurement
from gnuq_core.stats import cluster_bootstrap

__all__ = ["summary", "ratio_summary", "units", "estimator_passes", "method_costs",
           "summarize_model", "floor_ratios", "c8_measurement", "c8_readings", "gap_factors", "targets", "PASS_LABELS",
           "TARGET_SECONDS_PER_RECORD", "TARGET_CAMPAIGN_HOURS", "REFERENCE_OF", "READINGS"]

PASS_LABELS = {"sample": "N samples", "cluster": "clustering", "p_true": "P(True) forward",
               "p_true_reference": "P(True) forward with N candidates", "gradient": "forward-backward",
               "sample_sequential": "N samples one at a time", "nli_cluster": "entailment clustering (DeBERTa-large)",
               "p_true_fewshot": "few-shot P(True) forward with N candidates"}
REFERENCE_OF = {"sample": "sample_sequential", "cluster": "nli_cluster", "p_true_reference": "p_true_fewshot",
                "p_true": "p_true_fewshot"}
"""The pass the reference implementations run in place of each optimised one (zero-shot
P(True) becomes the reference's few-shot P(True), which needs the samples)."""
READINGS = {"reference": "each baseline as its reference implementation runs it",
            "optimised": "the fastest of this project's optimised baselines"}
"""C8's readings: the paper's wording ("faster than the baselines") and the conservative one;
each is also the ``variant`` of the baselines it is judged against."""
FASTEST = {"reference": "fastest_reference_baseline", "optimised": "fastest_sampling_baseline"}
"""The `summarize_model` entry naming each reading's fastest sampling baseline."""
ESTIMATOR = "epistemic"
REFERENCE_P_TRUE = ("sample", "p_true_reference")
TARGET_SECONDS_PER_RECORD = 5.0  # issue 14: whole record per model, this 2-core machine
TARGET_CAMPAIGN_HOURS = 10.0


# --------------------------------------------------------------------------- statistics


def summary(values: Sequence[float]) -> dict[str, float]:
    """``{"median", "q25", "q75", "mean", "n"}`` of finite ``values`` (NaN when empty)."""
    a = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if a.size == 0:
        return {"median": float("nan"), "q25": float("nan"), "q75": float("nan"), "mean": float("nan"), "n": 0}
    q25, med, q75 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "mean": float(a.mean()), "n": int(a.size)}


def ratio_summary(numerator: Sequence[float], denominator: Sequence[float], *, clusters: Sequence[Any] | None = None,
                  n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Paired ratios ``numerator[i] / denominator[i]``: median, IQR, bootstrap 95% CI of the
    median (resampling ``clusters`` when given), the ratio of the medians, and the values."""
    num = np.asarray(numerator, dtype=float)
    den = np.asarray(denominator, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"{num.size} numerators but {den.size} denominators: ratios must be paired")
    cl = np.asarray(clusters if clusters is not None else np.arange(num.size))
    ok = np.isfinite(num) & np.isfinite(den) & (den > 0)
    r = num[ok] / den[ok]
    lo, hi = cluster_bootstrap(r, clusters=cl[ok], n_boot=n_boot, seed=seed)
    med_num = float(np.median(num[ok])) if ok.any() else float("nan")
    med_den = float(np.median(den[ok])) if ok.any() else float("nan")
    return {**summary(r), "ci": [lo, hi], "ratio_of_medians": med_num / med_den if med_den else float("nan"),
            "values": r.tolist(), "questions": int(np.unique(cl[ok]).size)}


# --------------------------------------------------------------------------- costs


def units(records: Sequence[dict[str, Any]], clock: str = "wall",
          rounds: str = "times") -> list[tuple[int, dict[str, float]]]:
    """``(question index, {pass: seconds})`` per (question, repeat) round, on the ``"wall"``
    or ``"cpu"`` clock; ``rounds="floor_times"``: the floor split's extra rounds
    (`gnuq_core.bench.passes.floor_rounds`; none in records made before them)."""
    key = rounds if clock == "wall" else rounds.replace("times", "cpu_times")
    out = []
    for qi, rec in enumerate(records):
        times = {k: v for k, v in rec.get(key, {}).items() if v}
        n = min((len(v) for v in times.values()), default=0)
        out += [(qi, {k: float(v[r]) for k, v in times.items()}) for r in range(n)]
    return out


def _bench_passes(engine_passes: Sequence[str]) -> tuple[str, ...]:
    """The timed passes behind a score's engine passes, without the shared generation."""
    return tuple(dict.fromkeys(ENGINE_PASSES.get(p, p) for p in engine_passes if p != "generate"))


def estimator_passes() -> tuple[str, ...]:
    """The timed passes of the paper's estimator (registry score ``epistemic``)."""
    return _bench_passes(get(ESTIMATOR).passes)


def method_costs() -> dict[str, dict[str, Any]]:
    """The baselines' costs, from the registry: ``{key: {"passes", "scores", "sampling", "label"}}``.

    One entry per distinct set of passes among the registered baselines that need more
    than the estimator's passes (those that need no more cost the same), plus P(True) with
    the reference implementation's prompt. The key joins the passes with ``+``.
    """
    est = set(estimator_passes())
    out: dict[str, dict[str, Any]] = {}
    for s in SCORES.values():
        if s.kind != "baseline":
            continue
        passes = _bench_passes(s.passes)
        if set(passes) <= est:
            continue
        out.setdefault("+".join(passes), {"passes": passes, "scores": []})["scores"].append(s.name)
    out["+".join(REFERENCE_P_TRUE)] = {"passes": REFERENCE_P_TRUE, "scores": ["p_true (reference prompt)"]}
    for v in out.values():
        v["variant"] = "optimised"
    for v in list(out.values()):
        passes = _reference_passes(v["passes"])
        entry = out.setdefault("+".join(passes), {"passes": passes, "scores": [], "variant": "reference"})
        entry["scores"] += [s for s in v["scores"] if s not in entry["scores"]]
    for v in out.values():
        v["sampling"] = bool({"sample", "sample_sequential"} & set(v["passes"]))
        v["label"] = " + ".join(PASS_LABELS.get(p, p) for p in v["passes"]) + ": " + ", ".join(v["scores"])
    return out


def _reference_passes(passes: Sequence[str]) -> tuple[str, ...]:
    """The reference implementation's passes for an optimised baseline's ``passes``."""
    ref = [REFERENCE_OF.get(p, p) for p in passes]
    if "p_true_fewshot" in ref and "sample_sequential" not in ref:
        ref.insert(0, "sample_sequential")  # its brainstormed candidates are the N samples
    return tuple(dict.fromkeys(ref))


def _cost(unit: dict[str, float], passes: Sequence[str]) -> float:
    return float(sum(unit[p] for p in passes)) if all(p in unit for p in passes) else float("nan")


# --------------------------------------------------------------------------- per model


def summarize_model(records: Sequence[dict[str, Any]], seed: int = 0, clock: str = "wall") -> dict[str, Any]:
    """Per-pass medians, method costs, paired ratios and speed-ups of one model.

    Returns ``{"passes", "costs", "ratios", "speedup", "gradient_split",
    "fastest_sampling_baseline", "units"}`` (see the module docstring for units and
    intervals).
    """
    us = units(records, clock)
    cl = [q for q, _ in us]
    names = sorted({k for _, u in us for k in u})
    passes = {p: summary([u.get(p, float("nan")) for _, u in us]) for p in names}
    est = estimator_passes()
    grad = [_cost(u, est) for _, u in us]
    gen = [u.get("generate", float("nan")) for _, u in us]

    def ratio(num: list[float], den: list[float]) -> dict[str, Any]:
        return ratio_summary(num, den, clusters=cl, seed=seed)

    ratios: dict[str, Any] = {}
    if "forward" in names:
        fwd = [u["forward"] for _, u in us]
        ratios["gradient_over_forward"] = ratio(grad, fwd)
        ratios.update(floor_ratios(us + units(records, clock, "floor_times"), seed))
        for g in GRAD_GROUPS:
            if f"gradient_{g}" in names:
                ratios[f"gradient_{g}_over_forward"] = ratio([u[f"gradient_{g}"] for _, u in us], fwd)
    if "reference" in names:
        ratios["reference_over_gradient"] = ratio([u["reference"] for _, u in us], grad)
    if "decode" in names and "sample" in names:
        ratios["decode_over_generate_plus_sample"] = ratio([u["decode"] for _, u in us],
                                                           [u["generate"] + u["sample"] for _, u in us])
    costs = {"estimator": summary(grad)}
    speedup: dict[str, Any] = {}
    for key, m in method_costs().items():
        c = [_cost(u, m["passes"]) for _, u in us]
        if not np.isfinite(c).any():
            continue
        costs[key] = summary(c)
        speedup[key] = {**ratio(c, grad), "with_generation": ratio([a + b for a, b in zip(c, gen)],
                                                                   [a + b for a, b in zip(grad, gen)])}
    def fastest_of(variant: str) -> str | None:
        keys = [k for k, m in method_costs().items() if m["sampling"] and m["variant"] == variant and k in costs]
        return min(keys, key=lambda k: costs[k]["median"]) if keys else None

    fastest = fastest_of("optimised")
    split = {k: summary([float(np.median(r["gradient_split"][k])) for r in records if r["gradient_split"][k]])
             for k in ("forward", "backward", "post")}
    return {"passes": passes, "costs": costs, "ratios": ratios, "speedup": speedup, "gradient_split": split,
            "arithmetic": arithmetic(records), "fastest_sampling_baseline": fastest,
            "fastest_reference_baseline": fastest_of("reference"),
            "gap": gap_factors(us), "units": len(us), "questions": len(records)}


def floor_ratios(us: Sequence[tuple[int, dict[str, float]]], seed: int = 0) -> dict[str, Any]:
    """The gradient pass's cost above a no-grad forward, split (paired per round, in forwards):
    the floor (``backward_floor``), the pass above it, and that split into the Gram products
    (``backward_floor_grams`` − floor) and the rest (gradient − ``backward_floor_grams``), over
    the rounds ``us`` that timed them (the ordinary repeats and the floor's extra rounds)."""
    us = [(q, u) for q, u in us if {"forward", "gradient", "backward_floor"} <= set(u)]
    if not us:
        return {}
    cl = [q for q, _ in us]
    fwd, grad, floor = ([u[k] for _, u in us] for k in ("forward", "gradient", "backward_floor"))

    def ratio(num: list[float]) -> dict[str, Any]:
        return ratio_summary(num, fwd, clusters=cl, seed=seed)

    out = {"backward_floor_over_forward": ratio(floor),
           "gradient_above_floor_over_forward": ratio([g - f for g, f in zip(grad, floor)])}
    if all("backward_floor_grams" in u for _, u in us):  # what the pass costs above the floor, split in two
        grams = [u["backward_floor_grams"] for _, u in us]
        out["grams_above_floor_over_forward"] = ratio([g - f for g, f in zip(grams, floor)])
        out["gradient_above_grams_over_forward"] = ratio([g - f for g, f in zip(grad, grams)])
    return out


def arithmetic(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What the exact norm multiplies beyond the floor, in forwards, counted (not timed):
    per question ``multiply_adds`` ``norm`` ÷ ``forward`` (and the same with symmetric Gram
    products), their median, least and largest over the questions; empty for records made
    before the count was recorded."""
    counts = [r["multiply_adds"] for r in records if r.get("multiply_adds")]
    out: dict[str, Any] = {}
    for key in ("norm", "norm_symmetric"):
        v = [c[key] / c["forward"] for c in counts]
        if v:
            out[f"{key}_over_forward"] = {"median": float(np.median(v)), "min": min(v), "max": max(v), "n": len(v)}
    return out


GAP_FACTORS = {
    "sampling one answer at a time": ("sample_sequential+cluster", "sample+cluster"),
    "entailment clustering (DeBERTa-large pairs)": ("sample_sequential+nli_cluster", "sample_sequential+cluster"),
    "few-shot P(True) prompt": ("sample_sequential+p_true_fewshot", "sample_sequential+p_true_reference"),
}
"""The measured causes of the gap: ``{cause: (cost with it, cost without it)}``, pass sums."""


def gap_factors(us: Sequence[tuple[int, dict[str, float]]], seed: int = 0) -> dict[str, Any]:
    """How much each difference between the reference and the optimised baselines multiplies
    the speed-up (:data:`GAP_FACTORS`): per cause the paired ratio of the two costs per round
    (median and bootstrap 95% interval over questions); causes whose passes were not timed
    are left out."""
    cl = [q for q, _ in us]
    out: dict[str, Any] = {}
    for cause, (with_, without) in GAP_FACTORS.items():
        a = [_cost(u, with_.split("+")) for _, u in us]
        b = [_cost(u, without.split("+")) for _, u in us]
        if np.isfinite(a).any() and np.isfinite(b).any():
            out[cause] = {**ratio_summary(a, b, clusters=cl, seed=seed), "with": with_, "without": without}
    return out


def c8_measurement(res: dict[str, Any], settings: dict[str, Any] | None = None,
                   reading: str = "optimised") -> Any:
    """C8's `gnuq_core.repro.claims.Measurement` under ``reading`` (:data:`READINGS`): the
    estimator's speed-up over the fastest sampling baseline, optimised or as its reference
    implementation runs it.

    Per model: the median over (question, repeat) rounds, with its bootstrap interval over
    questions. The claim ("46–107× faster") must hold for every model, so the measurement
    is the model with the smallest median speed-up (its value and interval); every model's
    numbers are in ``details``, and its questions and rounds are the ``evidence`` for C8's gate.
    """
    if reading not in READINGS:
        raise ValueError(f"unknown C8 reading {reading!r}; known: {', '.join(READINGS)}")
    details: dict[str, Any] = {}
    for spec, e in res["models"].items():
        s = e["summary"]
        fb = s.get(FASTEST[reading])
        if not fb:
            continue
        sp = s["speedup"]
        se = next((k for k, m in method_costs().items()
                   if "semantic_entropy" in m["scores"] and m["variant"] == reading), None)
        details[spec] = {"baseline": fb, "median": sp[fb]["median"], "ci": sp[fb]["ci"], "rounds": sp[fb]["n"],
                         "questions": sp[fb]["questions"],
                         "semantic_entropy": sp.get(se, {}).get("median"), "p_true": sp.get("p_true", {}).get("median")}
    if not details:
        raise ValueError(f"no model has a {reading} sampling baseline timed: C8 needs the 'sample' pass (and, for "
                         "the reference reading, BenchConfig.reference)")
    worst = min(details, key=lambda k: details[k]["median"])
    value = float(details[worst]["median"])
    lo, hi = details[worst]["ci"]
    cfg, d = res["config"], details[worst]
    se = [v["semantic_entropy"] for v in details.values() if v["semantic_entropy"] is not None]
    against = (f"this project's optimised baselines (N = {cfg['n_samples']} answers sampled as one batch)"
               if reading == "optimised" else
               f"the baselines as their reference implementations run them (N = {cfg['n_samples']} answers sampled "
               f"one at a time, DeBERTa-large-sized entailment clustering, {cfg.get('p_true_shots', 20)}-shot "
               "P(True); each timed once per question)")
    note = (f"timed on {d['questions']} questions ({d['rounds']} rounds) per model on {cfg['device']} with "
            f"{cfg.get('threads', 0) or 'the default number of'} thread(s), against {against}"
            + (f"; over semantic entropy the speed-up is {min(se):.1f}–{max(se):.1f}×" if se else ""))
    return Measurement("C8", value, (min(lo, value), max(hi, value)), note=note,
                       settings={"device": res["config"]["device"], "models": list(res["models"]),
                                 "n_samples": res["config"]["n_samples"], "model_judged": worst,
                                 "reading": reading, **(settings or {})},
                       details=details,
                       evidence={"questions": int(details[worst]["questions"]), "rounds": int(details[worst]["rounds"])})


def c8_readings(res: dict[str, Any], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """C8 under every reading whose baselines were timed: ``{reading: Measurement}`` (the
    reference reading first: it is the paper's wording)."""
    out = {}
    for reading in ("reference", "optimised"):
        if any(e["summary"].get(FASTEST[reading]) for e in res["models"].values()):
            out[reading] = c8_measurement(res, settings, reading)
    return out


def targets(res: dict[str, Any]) -> dict[str, Any]:
    """The targets, per model: measured value, threshold and met/missed."""
    out: dict[str, Any] = {}
    for spec, e in res["models"].items():
        s = e["summary"]
        t: dict[str, Any] = {}
        r = s["ratios"].get("gradient_over_forward")
        if r:
            t["gradient_over_forward"] = {"value": r["median"], "ci": r["ci"], "threshold": TARGET_GRAD_OVER_FORWARD,
                                          "met": bool(r["median"] <= TARGET_GRAD_OVER_FORWARD)}
        r = s["ratios"].get("gradient_above_floor_over_forward")
        if r and r["n"]:
            t["gradient_above_floor"] = {"value": r["median"], "ci": r["ci"], "threshold": TARGET_ABOVE_FLOOR,
                                         "met": bool(r["median"] <= TARGET_ABOVE_FLOOR)}
        if "memory" in e:
            v = e["memory"]["gradient_over_gradient"]
            t["extra_memory_over_gradient"] = {"value": v, "threshold": TARGET_MEMORY_FRACTION,
                                               "met": bool(v <= TARGET_MEMORY_FRACTION)}
        fb = s["fastest_sampling_baseline"]
        if fb:
            sp = s["speedup"][fb]
            t["speedup_vs_fastest_sampling"] = {"baseline": fb, "value": sp["median"], "ci": sp["ci"],
                                                "paper": list(PAPER_SPEEDUP),
                                                "within_paper_range": bool(sp["median"] >= PAPER_SPEEDUP[0])}
        best = e.get("throughput", {}).get("best")
        if best:
            v = best["seconds_per_record"]
            t["seconds_per_record"] = {"value": v, "layout": best["layout"], "threshold": TARGET_SECONDS_PER_RECORD,
                                       "met": bool(v <= TARGET_SECONDS_PER_RECORD)}
        out[spec] = t
    camp = res.get("campaign", {}).get("best")
    if camp:
        out["campaign"] = {"value": camp["hours"], "layout": camp["layout"], "threshold": TARGET_CAMPAIGN_HOURS,
                           "met": bool(camp["hours"] <= TARGET_CAMPAIGN_HOURS)}
    return out
