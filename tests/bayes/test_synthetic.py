"""Tests for gnuq_core.bayes.synthetic."""

import numpy as np
import pytest

from gnuq_core.bayes.synthetic import gap_regression, make_dataset, two_moons


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
