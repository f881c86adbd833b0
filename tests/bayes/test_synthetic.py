"""Tests for gnuq_core.bayes.synthetic."""

import numpy as np
import pytest

from gnuq_core.bayes.synthetic import PROBLEMS, TABLE1, gap_regression, make_dataset, two_moons


def test_two_moons_shapes_and_determinism():
    d = two_moons(n_train=50, noise=0.1, seed=3, n_query_in=30, grid_size=7)
    assert d.task == "classification" and d.x_train.shape == (50, 2) and set(np.unique(d.y_train)) <= {0.0, 1.0}
    assert d.queries["in"].shape == (30, 2) and d.queries["grid"].shape == (49, 2) and d.grid_shape == (7, 7)
    np.testing.assert_allclose(d.x_train.mean(0), 0, atol=1e-12)
    again = two_moons(n_train=50, noise=0.1, seed=3, n_query_in=30, grid_size=7)
    np.testing.assert_array_equal(d.x_train, again.x_train)
    assert not np.array_equal(d.x_train, two_moons(n_train=50, noise=0.1, seed=4).x_train)
    # the grid reaches well beyond the data
    assert np.abs(d.queries["grid"]).max() > 1.5 * np.abs(d.x_train).max()


def test_gap_regression_has_a_gap():
    d = gap_regression(n_train=200, seed=0, grid_size=50)
    x = d.x_train[:, 0]
    # standardised gap: no training input between the two clusters
    mid = (x[x < 0].max(), x[x > 0].min())
    assert mid[1] - mid[0] > 0.5
    g = d.queries["grid"][:, 0]
    assert ((g > mid[0]) & (g < mid[1])).any() and g.max() > x.max() + 1


def test_make_dataset_unknown():
    with pytest.raises(ValueError, match="unknown problem"):
        make_dataset("spirals")


@pytest.mark.parametrize("name", TABLE1)
def test_the_papers_eight_problems_are_standardised_seeded_and_balanced(name):
    spec = PROBLEMS[name]
    d = make_dataset(name, seed=2, n_query_in=30, grid_size=7)
    assert d.task == spec.task and spec.paper and d.config["problem"] == name
    np.testing.assert_allclose(d.x_train.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(d.x_train.std(0), 1, atol=1e-12)
    assert d.queries["in"].shape[0] == 30 and d.queries["grid"].shape[0] == int(np.prod(d.grid_shape))
    np.testing.assert_array_equal(d.x_train, make_dataset(name, seed=2).x_train)
    assert not np.array_equal(d.x_train, make_dataset(name, seed=3).x_train)
    if d.task == "regression":
        assert d.x_train.shape[1] == 1 and d.n_classes == 0
    else:
        counts = np.bincount(d.y_train.astype(int))
        assert d.x_train.shape[1] == 2 and counts.max() - counts.min() <= 1  # classes in equal shares
        assert d.n_classes == (2 if d.task == "classification" else len(counts)) >= 2
        assert np.abs(d.queries["grid"]).max() > 1.2 * np.abs(d.x_train).max()  # the maps reach past the data


def test_the_constructions_have_their_shapes():
    rings = make_dataset("multiclass_rings", noise=0.01)
    radius = np.hypot(*rings.x_train.T)
    inner, outer = radius[rings.y_train == 0], radius[rings.y_train == 2]
    assert inner.max() < outer.min()  # concentric: ring 0 inside ring 2 (in standardised units too)
    xor = make_dataset("binary_xor", noise=0.05)
    quadrant = np.sign(xor.x_train[:, 0] * xor.x_train[:, 1])
    assert set(zip(quadrant, xor.y_train)) == {(1.0, 0.0), (-1.0, 1.0)}  # opposite corners share a class
    lin, curve = (make_dataset(n, noise=0.0, n_train=50) for n in ("regression_linear", "regression_nonlinear"))
    fit = np.polyfit(lin.x_train[:, 0], lin.y_train, 1)
    np.testing.assert_allclose(np.polyval(fit, lin.x_train[:, 0]), lin.y_train, atol=1e-12)  # a line, exactly
    bent = np.polyfit(curve.x_train[:, 0], curve.y_train, 1)
    assert np.abs(np.polyval(bent, curve.x_train[:, 0]) - curve.y_train).max() > 0.1  # not a line
    spirals = make_dataset("multiclass_spirals", n_train=300, noise=0.0)
    assert len(np.unique(spirals.y_train)) == 3
