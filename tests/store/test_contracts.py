"""Each contract passes what its platform allows and fails a real change, in its own units."""

from __future__ import annotations

import copy
import math

import pytest

from gnuq_core.store.contracts import (Chaotic, Context, Exact, GivenInputs, MonteCarloError, SeedSpread, Within,
                                       leaves, worst)
from gnuq_core.store.kinds import lanczos_view, nuts_standard_errors


def test_leaves_and_worst() -> None:
    assert list(leaves({"b": [1, {"c": 2}], "a": 0})) == [(".a", 0), (".b[0]", 1), (".b[1].c", 2)]
    assert worst([]) is None


def test_exact_is_a_tolerance_on_every_value() -> None:
    rule = Exact(rtol=1e-3, atol=1e-6)
    assert worst(rule.compare({"x": 1.0, "s": "a"}, {"x": 1.0005, "s": "a"}, True, Context())).units == \
        pytest.approx(0.5, rel=1e-3)
    devs = rule.compare({"x": 1.0, "s": "a"}, {"x": 1.01, "s": "a"}, False, Context())
    assert worst(devs).path == ".x" and worst(devs).units > 1
    assert math.isinf(worst(rule.compare({"s": "a"}, {"s": "b"}, True, Context())).units)
    assert math.isinf(worst(rule.compare({"x": [1, 2]}, {"x": [1]}, True, Context())).units)  # a length
    assert math.isinf(worst(rule.compare({"x": 1}, {"y": 1}, True, Context())).units)  # a missing key
    assert worst(rule.compare({"x": None}, {"x": math.nan}, True, Context())).units == 0  # NaN is stored as null


def test_chaotic_is_bitwise_to_the_stored_digits_on_its_platform() -> None:
    rule = Chaotic(Within(rtol=1e-2))
    stored = {"x": 0.1234568}  # 7 significant digits of 0.12345678
    assert worst(rule.compare(stored, {"x": 0.12345678}, True, Context())).units < 1
    assert worst(rule.compare(stored, {"x": 0.1234590}, True, Context())).units > 1  # a last-bit path apart
    assert worst(rule.compare(stored, {"x": 0.1234590}, False, Context())).units < 1  # fine elsewhere
    assert "7 significant digits" in rule.rule(True) and "1e-02" in rule.rule(False)


SEEDS = [{"rho": 0.90 + 0.01 * k, "acc": 0.84, "grid": [0.1 * k, 1.0]} for k in range(10)]


def test_seed_spread_passes_a_perturbed_or_other_basin_replicate_and_fails_an_alteration() -> None:
    rule = SeedSpread(k=3)
    ctx = Context(SEEDS)
    near = {"rho": 0.915, "acc": 0.84, "grid": [0.31, 1.0]}  # seed 1, perturbed by a fraction of the spread
    assert worst(rule.compare(SEEDS[1], near, ctx)).units < 1
    other_basin = dict(SEEDS[7])  # seed 1 recomputed elsewhere landed where seed 7 did
    assert worst(rule.compare(SEEDS[1], other_basin, ctx)).units < 1
    altered = copy.deepcopy(SEEDS)
    altered[1]["rho"] = 1.5  # far beyond what the seeds allow
    assert worst(rule.compare(altered[1], SEEDS[1], Context(altered))).path == ".rho"
    assert worst(rule.compare(altered[1], SEEDS[1], Context(altered))).units > 1
    zero_spread = {**SEEDS[1], "acc": 0.85}  # every seed gives 0.84: only the stored digits are allowed
    assert worst(rule.compare(SEEDS[1], zero_spread, ctx)).units > 1
    counted = SeedSpread(k=3, floors=((".acc", 0.02),))  # an accuracy's resolution, declared
    assert worst(counted.compare(SEEDS[1], zero_spread, ctx)).units < 1
    assert worst(counted.compare(SEEDS[1], {**SEEDS[1], "acc": 0.9}, ctx)).units > 1
    assert "acc also within 0.02" in counted.rule()
    with pytest.raises(ValueError, match="at least 5 stored items"):
        rule.compare(SEEDS[0], SEEDS[0], Context(SEEDS[:3]))


def _nuts(var: float, mean: float, ess: float) -> dict:
    return {"q": {"in": {"ref": {"mean_f": [mean], "var_f": [var]}, "diag": {"ess_pred_min": ess}}},
            "nuts": {"step_size": [0.1]}}


def test_monte_carlo_error_allows_another_chain_within_its_standard_errors() -> None:
    rule = MonteCarloError(nuts_standard_errors, k=5)
    stored = _nuts(1.0, 0.0, 400.0)  # se(var) = 1·√(2/400) ≈ 0.071, se(mean) = √(1/400) = 0.05
    assert worst(rule.compare(stored, _nuts(1.1, 0.05, 400.0), Context())).units < 1
    bad = worst(rule.compare(stored, _nuts(2.0, 0.0, 400.0), Context()))
    assert bad.path == ".q.in.ref.var_f[0]" and bad.units > 1
    assert ".nuts.step_size[0]" not in nuts_standard_errors(stored)  # diagnostics are not compared


def test_within_and_given_inputs_compare_the_selected_fields_only() -> None:
    rule = GivenInputs((".grad_sq", ".samples[*].lp[*]"), rtol=1e-3, atol=1e-5)
    stored = {"grad_sq": 100.0, "samples": [{"lp": [-1.0, -2.0], "text": "a"}], "answer": "x"}
    fresh = {"grad_sq": 100.05, "samples": [{"lp": [-1.0, -2.0001], "text": "b"}], "answer": "y"}
    devs = rule.compare(stored, fresh, Context())
    assert {d.path for d in devs} == {".grad_sq", ".samples[0].lp[0]", ".samples[0].lp[1]"}
    assert worst(devs).units < 1 and rule.needs_inputs and not Within().needs_inputs
    assert worst(rule.compare(stored, {**fresh, "grad_sq": 101.0}, Context())).units > 1


def test_a_lanczos_rule_is_compared_by_its_first_coefficients() -> None:
    import numpy as np

    from gnuq_core.isotropy import spectra

    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 40))
    h = a @ a.T
    v = rng.standard_normal(40)
    alpha, beta = spectra.lanczos(lambda x: h @ x, v, 30)
    t = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
    nodes, vecs = np.linalg.eigh(t)
    view = lanczos_view({"nodes": nodes.tolist(), "weights": (vecs[0] ** 2).tolist(), "dim": 40})
    assert set(view) == {"alpha", "beta", "dim"} and len(view["alpha"]) == 10
    assert np.allclose(view["alpha"], alpha[:10], rtol=1e-8) and np.allclose(view["beta"], beta[:9], rtol=1e-8)
    assert lanczos_view({"exact": 1.0}) == {"exact": 1.0}
