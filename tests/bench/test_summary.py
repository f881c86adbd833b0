"""Statistics, method costs and claim C8 (gnuq_core.bench.summary) on hand-made timings."""

from __future__ import annotations

import numpy as np
from dataclasses import replace

import pytest

from gnuq_core.bench import summary as sm
from gnuq_core.qa import scores
from gnuq_core.repro import claims


def test_summary() -> None:
    s = sm.summary([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert s["n"] == 4 and s["median"] == 2.5 and s["q25"] == 1.75 and s["q75"] == 3.25
    assert np.isnan(sm.summary([])["median"])


def test_ratio_summary_is_paired() -> None:
    r = sm.ratio_summary([2.0, 4.0, 9.0], [1.0, 2.0, 3.0])
    assert r["values"] == [2.0, 2.0, 3.0]
    assert r["median"] == 2.0 and r["ci"][0] <= 2.0 <= r["ci"][1]
    assert r["ratio_of_medians"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="paired"):
        sm.ratio_summary([1.0], [1.0, 2.0])
    assert sm.ratio_summary([1.0, 5.0], [0.0, 1.0])["values"] == [5.0]  # zero time dropped


def test_method_costs_come_from_the_score_registry() -> None:
    """Every registered baseline that needs a pass beyond the estimator's has a cost row, and
    every scored name in the rows is registered (no list of methods of the benchmark's own)."""
    costs = sm.method_costs()
    named = {n for m in costs.values() for n in m["scores"]} - {"p_true (reference prompt)"}
    est = set(sm.estimator_passes())
    expected = {s.name for s in scores.SCORES.values() if s.kind == "baseline"
                and not {p for p in s.passes if p != "generate"} <= {"gradient"} | est}
    assert named == expected
    assert sm.estimator_passes() == ("gradient",)
    assert costs["sample+cluster"]["sampling"] and not costs["p_true"]["sampling"]
    assert "semantic_entropy" in costs["sample+cluster"]["scores"]


def _record(times: dict[str, list[float]]) -> dict:
    return {"times": times, "cpu_times": times, "gradient_split": {"forward": [0.1], "backward": [0.2], "post": [0.0]}}


def test_summarize_model_pairs_passes_within_a_round() -> None:
    recs = [_record({"generate": [1.0, 1.0], "forward": [0.1, 0.2], "gradient": [0.3, 0.4], "sample": [3.0, 8.0],
                     "cluster": [0.3, 0.0], "p_true": [0.1, 0.1], "p_true_reference": [0.2, 0.2]}),
            _record({"generate": [1.0, 1.0], "forward": [0.1, 0.1], "gradient": [0.2, 0.2], "sample": [2.0, 2.0],
                     "cluster": [0.0, 0.0], "p_true": [0.1, 0.1], "p_true_reference": [0.2, 0.2]})]
    s = sm.summarize_model(recs)
    assert s["units"] == 4 and s["questions"] == 2
    assert sorted(s["ratios"]["gradient_over_forward"]["values"]) == pytest.approx([2.0, 2.0, 2.0, 3.0])
    assert sorted(s["speedup"]["sample"]["values"]) == pytest.approx([10.0, 10.0, 10.0, 20.0])
    assert s["speedup"]["sample+cluster"]["values"][0] == pytest.approx(11.0)
    assert s["fastest_sampling_baseline"] == "sample"
    assert s["costs"]["estimator"]["median"] == pytest.approx(0.25)
    assert "with_generation" in s["speedup"]["p_true"]


def test_c8_is_the_least_favourable_model_with_its_own_interval() -> None:
    def model(factor: float) -> dict:
        recs = [_record({"generate": [1.0] * 3, "forward": [0.1] * 3, "gradient": [0.1] * 3,
                         "sample": [factor * (1 + 0.1 * q + 0.01 * r) * 0.1 for r in range(3)],
                         "cluster": [0.0] * 3, "p_true": [0.1] * 3, "p_true_reference": [0.1] * 3})
                for q in range(4)]
        return {"summary": sm.summarize_model(recs)}

    res = {"config": {"device": "cpu", "n_samples": 10}, "models": {"a": model(50.0), "b": model(20.0)}}
    m = sm.c8_measurement(res)
    assert m.claim == "C8" and m.settings["model_judged"] == "b"
    assert m.value == pytest.approx(res["models"]["b"]["summary"]["speedup"]["sample"]["median"])
    assert m.ci[0] <= m.value <= m.ci[1] and m.details["a"]["median"] > m.value
    assert m.details["b"]["rounds"] == 12 and m.details["b"]["questions"] == 4
    assert m.evidence == {"questions": 4, "rounds": 12}
    assert m.note.startswith("timed on 4 questions (12 rounds) per model on cpu")  # the caveat the ledger shows
    assert "optimised baselines (N = 10 answers" in m.note
    a = claims.assess(m)  # 4 questions are too few for C8's gate (≥ 5)
    assert a.verdict == claims.INCONCLUSIVE and "4 questions (needs ≥ 5)" in a.reason
    assert claims.judge(replace(m, evidence={"questions": 5, "rounds": 12})) == claims.NOT_REPRODUCED


def test_every_optimised_sampling_baseline_has_its_reference_variant() -> None:
    costs = sm.method_costs()
    ref = {k: m for k, m in costs.items() if m["variant"] == "reference"}
    assert set(ref) == {"sample_sequential", "sample_sequential+nli_cluster", "sample_sequential+p_true_fewshot"}
    assert all(m["sampling"] for m in ref.values())
    # zero-shot P(True) and P(True) with candidates both become the reference's few-shot P(True)
    assert {"p_true", "p_true (reference prompt)"} <= set(ref["sample_sequential+p_true_fewshot"]["scores"])
    assert "semantic_entropy" in ref["sample_sequential+nli_cluster"]["scores"]


def _model_with_reference(factor: float, questions: int = 5) -> dict:
    recs = [_record({"generate": [1.0] * 2, "forward": [0.1] * 2, "gradient": [0.1] * 2,
                     "sample": [factor * 0.1 * (1 + 0.1 * q)] * 2, "cluster": [0.01] * 2, "p_true": [0.1] * 2,
                     "p_true_reference": [0.2] * 2, "sample_sequential": [factor * 0.4 * (1 + 0.1 * q)] * 2,
                     "nli_cluster": [3.0] * 2, "p_true_fewshot": [2.0] * 2}) for q in range(questions)]
    return {"summary": sm.summarize_model(recs)}


def test_c8_readings_and_the_measured_gap() -> None:
    res = {"config": {"device": "cpu", "n_samples": 10, "p_true_shots": 20},
           "models": {"a": _model_with_reference(30.0), "b": _model_with_reference(10.0)}}
    ms = sm.c8_readings(res)
    assert list(ms) == ["reference", "optimised"]  # the paper's wording first
    ref, opt = ms["reference"], ms["optimised"]
    assert ref.settings["reading"] == "reference" and opt.settings["reading"] == "optimised"
    assert ref.settings["model_judged"] == opt.settings["model_judged"] == "b"
    assert opt.details["b"]["baseline"] == "sample" and ref.details["b"]["baseline"] == "sample_sequential"
    assert ref.value == pytest.approx(4 * opt.value, rel=1e-9)  # sequential sampling costs 4× here
    assert "reference implementations" in ref.note and "20-shot" in ref.note and "optimised" in opt.note
    gap = res["models"]["b"]["summary"]["gap"]
    assert gap["sampling one answer at a time"]["median"] == pytest.approx(
        np.median([(4.0 * (1 + 0.1 * q) + 0.01) / ((1 + 0.1 * q) + 0.01) for q in range(5)]))
    assert gap["entailment clustering (DeBERTa-large pairs)"]["with"] == "sample_sequential+nli_cluster"
    entry = claims.record(ref, readings={sm.READINGS[r]: {"C8": m} for r, m in ms.items()},
                          primary=sm.READINGS["reference"])
    assert [r["verdict"] for r in entry["readings"]] == [claims.judge(ref), claims.judge(opt)]


def test_c8_readings_without_reference_timings_keep_the_conservative_one() -> None:
    res = {"config": {"device": "cpu", "n_samples": 10},
           "models": {"a": {"summary": sm.summarize_model([_record({"gradient": [0.1], "sample": [1.0],
                                                                     "generate": [1.0]})])}}}
    assert list(sm.c8_readings(res)) == ["optimised"]
    with pytest.raises(ValueError, match="reference sampling baseline"):
        sm.c8_measurement(res, reading="reference")
    with pytest.raises(ValueError, match="unknown C8 reading"):
        sm.c8_measurement(res, reading="paper")


def test_gradient_above_floor_is_paired_per_round_and_judged() -> None:
    """(gradient − floor) ÷ forward round by round, against issue 29's target of 0.15 forwards;
    a model whose floor was not timed gets no above-floor target."""
    recs = [_record({"forward": [0.1, 0.2], "gradient": [0.25, 0.46], "backward_floor": [0.2, 0.4]}),
            _record({"forward": [0.1, 0.1], "gradient": [0.22, 0.21], "backward_floor": [0.2, 0.2]})]
    s = sm.summarize_model(recs)
    assert sorted(s["ratios"]["gradient_above_floor_over_forward"]["values"]) == pytest.approx([0.1, 0.2, 0.3, 0.5])
    t = sm.targets({"models": {"m": {"summary": s}}})["m"]["gradient_above_floor"]
    assert t["value"] == pytest.approx(0.25) and t["threshold"] == 0.15 and t["met"] is False
    no_floor = sm.summarize_model([_record({"forward": [0.1], "gradient": [0.2]})])
    assert "gradient_above_floor" not in sm.targets({"models": {"m": {"summary": no_floor}}})["m"]


def test_the_floor_split_pools_the_ordinary_and_the_extra_rounds_and_nothing_else_does() -> None:
    """The floor, the pass above it, the Gram products and the rest are paired within each round,
    over the ordinary repeats and the floor's extra rounds; the speed-ups use the ordinary ones."""
    rec = _record({"forward": [0.1], "gradient": [0.30], "backward_floor": [0.2], "backward_floor_grams": [0.25]})
    rec["floor_times"] = {"forward": [0.1, 0.2], "gradient": [0.26, 0.5], "backward_floor": [0.2, 0.4],
                          "backward_floor_grams": [0.25, 0.48]}
    rec["floor_cpu_times"] = rec["floor_times"]
    s = sm.summarize_model([rec])
    r = s["ratios"]
    assert sorted(r["gradient_above_grams_over_forward"]["values"]) == pytest.approx([0.1, 0.1, 0.5])
    assert sorted(r["grams_above_floor_over_forward"]["values"]) == pytest.approx([0.4, 0.5, 0.5])
    assert r["backward_floor_over_forward"]["n"] == 3 and r["gradient_over_forward"]["n"] == 1 and s["units"] == 1
    assert sm.summarize_model([rec], clock="cpu")["ratios"]["backward_floor_over_forward"]["n"] == 3
    del rec["floor_times"], rec["floor_cpu_times"]  # a run made before the extra rounds
    assert sm.summarize_model([rec])["ratios"]["gradient_above_grams_over_forward"]["values"] == pytest.approx([0.5])


def test_arithmetic_is_the_counted_norm_over_the_counted_forward_per_question() -> None:
    records = [{"multiply_adds": {"forward": 100, "norm": 20, "norm_symmetric": 11}},
               {"multiply_adds": {"forward": 200, "norm": 30, "norm_symmetric": 16}},
               {"multiply_adds": {"forward": 100, "norm": 40, "norm_symmetric": 21}}, {}]
    out = sm.arithmetic(records)
    assert out["norm_over_forward"] == {"median": 0.2, "min": 0.15, "max": 0.4, "n": 3}
    assert out["norm_symmetric_over_forward"]["median"] == pytest.approx(0.11)
    assert sm.arithmetic([{}]) == {}  # records made before the count: nothing, not zero
