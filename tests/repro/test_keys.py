"""Configuration keys are the same on every machine: a last-bit float difference is the same key."""

from __future__ import annotations

import math

import numpy as np

from gnuq_core.repro.keys import KEY_DIGITS, canonical, config_key


def test_a_one_ulp_difference_is_the_same_key() -> None:
    # what np.logspace(-5, 0, 11)[0] gave on the machine that filled the store, and on another
    assert config_key({"dampings": [9.999999999999999e-06]}) == config_key({"dampings": [1e-05]})
    assert config_key({"x": 0.1 + 0.2}) == config_key({"x": 0.3})
    assert config_key({"x": list(np.logspace(-5, 0, 11))}) == config_key({"x": [10.0 ** (k / 2 - 5) for k in range(11)]})


def test_a_real_change_is_another_key() -> None:
    assert config_key({"x": 0.3}) != config_key({"x": 0.3000001})
    assert config_key({"x": 1}) != config_key({"x": 2}) != config_key({"y": 2})
    assert config_key({"x": [1, 2]}) != config_key({"x": [2, 1]})


def test_canonical_values() -> None:
    assert canonical({"a": (1, 2.0), "b": np.float32(0.5), "c": np.arange(2), "d": -0.0}) == {
        "a": [1, 2.0], "b": 0.5, "c": [0, 1], "d": 0.0}
    assert canonical([math.nan, math.inf, -math.inf]) == ["nan", "inf", "-inf"]
    assert canonical({1: True, "s": None}) == {"1": True, "s": None}
    assert float(f"{1 / 3:.{KEY_DIGITS}g}") == canonical(1 / 3)


def test_key_order_does_not_matter() -> None:
    assert config_key({"a": 1, "b": 2}) == config_key({"b": 2, "a": 1})
