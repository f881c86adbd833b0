"""Chapter 03's stored items: one probe or query recomputed alone equals the whole run,
the store round-trips, and a stored number that no longer matches is caught."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnuq_core.isotropy import damping
from gnuq_core.isotropy import spectra
from gnuq_core.isotropy import stored
from gnuq_core.repro import results_store
from gnuq_core.repro.results_store import ResultsDisagree

MLP = dict(seed=0, n_train=30, steps=20, weight_decay=1e-3, n_probes=2, m=5, n_query=3, n_grid=3)


@pytest.fixture
def store(monkeypatch, tmp_path):
    """An empty local cache and results store."""
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(results_store, "STORE", tmp_path / "results")
    return tmp_path / "results"


def _tamper(path, item: str, key: str) -> None:
    """Scale one stored number of ``item`` by 1.01."""
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        r = json.loads(line)
        if r.get("id") == item:
            r[key] = [v * 1.01 for v in r[key]] if isinstance(r[key], list) else r[key] * 1.01
            lines[n] = json.dumps(r)
    path.write_text("\n".join(lines) + "\n")


def test_large_mlp_items_equal_the_whole_run_and_tampering_is_caught(store):
    whole = damping.slq_case(4, m_query=MLP["m"], **{k: v for k, v in MLP.items() if k != "n_probes"},
                             n_probes=MLP["n_probes"])
    first = stored.large_mlp(4, use_store=True, verify=0, **MLP)
    for kind in ("hessian", "ggn"):
        for a, b in zip(first[kind].nodes, whole[kind].nodes):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
    for key in ("exact", "lanczos", "isotropic"):
        np.testing.assert_allclose(first[key], whole[key], rtol=1e-6)
    assert first["rho"] == pytest.approx(whole["rho"])
    assert first["rank_share"] == pytest.approx(whole["rank_share"], rel=1e-5)
    # every stored item, recomputed from scratch one at a time, agrees
    again = stored.large_mlp(4, use_store=True, verify=100, **MLP)
    np.testing.assert_array_equal(again["exact"], first["exact"])
    (path,) = store.glob("hessian_slq_mlp/*.jsonl")
    _tamper(path, "ggn/probe1", "nodes")
    with pytest.raises(ResultsDisagree, match="ggn/probe1"):
        stored.large_mlp(4, use_store=True, verify=100, **MLP)


def test_large_mlp_without_the_store_writes_nothing(store):
    out = stored.large_mlp(4, use_store=False, **MLP)
    assert out["n_params"] == out["hessian"].dim and len(out["hessian"].nodes) == MLP["n_probes"]
    assert len(out["exact"]) == MLP["n_query"] and not store.exists()


def test_lm_block_probes_recompute_alone(store):
    kw = dict(n_tokens=12, n_probes=2, m=3, seed=0)
    first = stored.lm_block("tiny-random", use_store=True, verify=0, **kw)
    again = stored.lm_block("tiny-random", use_store=True, verify=2, **kw)  # both probes from scratch
    assert again["dim"] == first["dim"] and again["loss"] == pytest.approx(first["loss"])
    (path,) = store.glob("hessian_slq_lm/*.jsonl")
    _tamper(path, "probe0", "weights")
    with pytest.raises(ResultsDisagree, match="probe0"):
        stored.lm_block("tiny-random", use_store=True, verify=2, **kw)
    with pytest.raises(ValueError, match="source"):
        stored.lm_block("gpt-nothing", **kw)


def test_exact_cases_round_trip(store):
    kw = dict(seed=0, n_train=30, steps=20, weight_decay=1e-3, dampings=[1e-3, 1e-1], n_grid=3)
    first = stored.exact_cases([2, 3], use_store=True, verify=0, **kw)
    again = stored.exact_cases([2, 3], use_store=True, verify=2, **kw)
    for a, b in zip(first, again):
        assert a["width"] == b["width"] and isinstance(b["ggn_eigs"], np.ndarray)
        np.testing.assert_array_equal(a["ggn_eigs"], b["ggn_eigs"])
    direct = damping.exact_case(3, **kw)
    np.testing.assert_allclose(first[1]["exact"], direct["exact"], rtol=1e-6)


def test_query_indices_are_evenly_spaced_grid_points():
    np.testing.assert_array_equal(stored.query_indices(3, 3), [0, 4, 8])


def test_lanczos_prefix_rebuilds_the_runs_first_coefficients():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((20, 20))
    mv = lambda v, h=a + a.T: h @ v  # noqa: E731
    alpha, beta = spectra.lanczos(mv, spectra.rademacher_probe(20, 0, 0), 8)
    nodes, weights = spectra.slq_probe(mv, 20, 0, m=8, seed=0)
    pa, pb = stored.lanczos_prefix(nodes, weights, 4)
    np.testing.assert_allclose(pa, alpha[:4], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(pb, beta[:3], rtol=1e-9, atol=1e-12)


def test_lm_block_partial_check_catches_a_changed_probe(store):
    kw = dict(n_tokens=12, n_probes=2, m=4, seed=0)
    first = stored.lm_block("tiny-random", use_store=True, verify=0, **kw)
    again = stored.lm_block("tiny-random", use_store=True, verify=2, verify_steps=2, **kw)
    np.testing.assert_array_equal(again["slq"].nodes[1], first["slq"].nodes[1])
    (path,) = store.glob("hessian_slq_lm/*.jsonl")
    _tamper(path, "probe1", "nodes")
    with pytest.raises(ResultsDisagree, match="first 2 Lanczos steps of probe1"):
        stored.lm_block("tiny-random", use_store=True, verify=2, verify_steps=2, **kw)
