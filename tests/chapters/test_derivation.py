"""gnuq_core.chapters.derivation: chapter 01's checks at smoke size, without papermill."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from gnuq_core.chapters import derivation  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402

SMOKE = derivation.Params(n_mc=400, n_sigmas=4, width=16, train_steps=500)


@pytest.fixture(scope="module")
def result():
    return derivation.run(SMOKE)


def test_each_check_holds_to_its_precision(result) -> None:
    v = result.values
    # (a) Monte Carlo agrees with the delta method at the smallest σ, within its standard error
    assert v["ratio_small_sigma_maxdev"] < 5 * v["ratio_small_sigma_se"]
    # (b) log space equals the direct float64 gradient, and is finite where float32 underflows
    assert v["logspace_max_rel_err"] < 1e-9 and v["logspace_finite"] == derivation.N_LOGSPACE_INPUTS
    assert v["direct32_underflow"] > 0 and v["log10_p_min"] < -40
    # (c) the delta method is exact for a linear model; (d) Θ(x, x) is ‖∇f‖²; (e) an identity
    assert v["blr_max_rel_err"] < 1e-8 and v["ntk_diag_max_rel_err"] < 1e-8 and v["ltv_abs_err"] < 1e-12
    assert v["blr_gap_direction"] == "larger" and v["blr_gap_ratio"] > 1


def test_the_figures_draw_what_was_computed(result) -> None:
    for figure in (derivation.figure_delta_method, derivation.figure_logspace, derivation.figure_blr,
                   derivation.figure_ntk):
        fig = figure(result)
        assert fig.axes and all(ax.has_data() for ax in fig.axes)


def test_the_same_seed_gives_the_same_numbers() -> None:
    tiny = derivation.Params(n_mc=50, n_sigmas=2, width=4, train_steps=20)
    assert derivation.run(tiny).values == derivation.run(tiny).values


@pytest.mark.parametrize("bad, says", [({"n_mc": 0}, "n_mc=0 must be ≥ 1"), ({"width": 2.5}, "is a number"),
                                       ({"seed": -1}, "must be ≥ 0"), ({"n_train": 1}, "must be ≥ 2")])
def test_params_refuse_bad_values_on_creation(bad: dict, says: str) -> None:
    with pytest.raises(ChapterError, match=f"^01_derivation: parameter .*{says}"):
        derivation.Params(**bad)


def test_profiles_override_the_paper_edition_defaults() -> None:
    full, quick = derivation.Params.for_profile("full"), derivation.Params.for_profile("quick")
    assert full == derivation.Params() and quick.n_mc < full.n_mc
    assert derivation.Params.for_profile("smoke", {"n_mc": 7}).n_mc == 7
    with pytest.raises(ChapterError, match=r"unknown parameter\(s\) n_mcc; the chapter declares: seed, n_mc"):
        derivation.Params.resolve({}, {"n_mcc": 5})
