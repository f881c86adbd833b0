"""Chapter 03's stored items: one probe or query recomputed alone equals the whole run,
the store round-trips, and a stored number that no longer matches is caught."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnuq_core.isotropy import damping
from gnuq_core.isotropy import stored
from gnuq_core.store import ResultsDisagree, Store
from tests.store.conftest import another_platform

MLP = dict(seed=0, n_train=30, steps=20, weight_decay=1e-3, n_probes=2, m=5, n_query=3, n_grid=3)


@pytest.fixture
def store(monkeypatch, tmp_path):
    """An empty local cache and results store (``store.root``: its folder)."""
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    return Store(tmp_path / "results", label="the test store")


def _elsewhere(store: Store) -> Store:
    """The same store read on another platform (a simulated CPU without AVX-512)."""
    other = Store(store.root, label=store.label)
    other._fingerprint = another_platform(store.fingerprint)
    return other


def _tamper(path, item: str, key: str, factor: float = 1.01) -> None:
    """Scale one stored number (or list) of ``item`` by ``factor``."""
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        r = json.loads(line)
        if r.get("id") == item:
            r[key] = [v * factor for v in r[key]] if isinstance(r[key], list) else r[key] * factor
            lines[n] = json.dumps(r)
    path.write_text("\n".join(lines) + "\n")


def test_large_mlp_items_equal_the_whole_run_and_tampering_is_caught(store):
    whole = damping.slq_case(4, m_query=MLP["m"], **{k: v for k, v in MLP.items() if k != "n_probes"},
                             n_probes=MLP["n_probes"])
    first = stored.large_mlp(4, store=store, verify=0, **MLP)
    for kind in ("hessian", "ggn"):
        for a, b in zip(first[kind].nodes, whole[kind].nodes):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
    for key in ("exact", "lanczos", "isotropic"):
        np.testing.assert_allclose(first[key], whole[key], rtol=1e-6)
    assert first["rho"] == pytest.approx(whole["rho"])
    assert first["rank_share"] == pytest.approx(whole["rank_share"], rel=1e-5)
    # every stored item, recomputed from scratch one at a time, agrees
    again = stored.large_mlp(4, store=store, verify=100, **MLP)
    np.testing.assert_array_equal(again["exact"], first["exact"])
    (path,) = store.root.glob("hessian_slq_mlp/*.jsonl")
    _tamper(path, "ggn/probe1", "nodes")
    with pytest.raises(ResultsDisagree, match="ggn/probe1"):
        stored.large_mlp(4, store=store, verify=100, **MLP)


def test_large_mlp_is_checked_from_its_stored_parameters_on_another_platform(store):
    stored.large_mlp(4, store=store, verify=0, **MLP)
    other = _elsewhere(store)
    again = stored.large_mlp(4, store=other, verify=100, **MLP)  # every item but θ*, from the stored θ*
    assert {c.item for c in other.checks()} == {r.item for r in other.checks()} and len(other.checks()) >= 7
    assert all(not c.same_platform and c.largest <= 1 for c in other.checks())
    assert "theta" not in {c.item for c in other.checks()}  # θ* itself is checked only where it was trained
    assert again["n_params"] == again["hessian"].dim
    (path,) = store.root.glob("hessian_slq_mlp/*.jsonl")
    _tamper(path, "query4", "exact", 1.1)  # beyond the 1e-2 another platform is allowed
    with pytest.raises(ResultsDisagree, match="query4"):
        stored.large_mlp(4, store=_elsewhere(store), verify=100, **MLP)


def test_lm_block_probes_recompute_alone(store):
    kw = dict(n_tokens=12, n_probes=2, m=3, seed=0)
    first = stored.lm_block("tiny-random", store=store, verify=0, **kw)
    again = stored.lm_block("tiny-random", store=store, verify=2, **kw)  # both probes from scratch
    assert again["dim"] == first["dim"] and again["loss"] == pytest.approx(first["loss"])
    (path,) = store.root.glob("hessian_slq_lm/*.jsonl")
    _tamper(path, "probe0", "nodes")
    with pytest.raises(ResultsDisagree, match="probe0"):
        stored.lm_block("tiny-random", store=store, verify=2, **kw)
    with pytest.raises(ValueError, match="source"):
        stored.lm_block("gpt-nothing", store=store, **kw)


def test_exact_cases_round_trip_and_check_from_the_stored_parameters(store):
    kw = dict(seed=0, n_train=30, steps=20, weight_decay=1e-3, dampings=[1e-3, 1e-1], n_grid=3)
    first = stored.exact_cases([2, 3], store=store, verify=0, **kw)
    again = stored.exact_cases([2, 3], store=store, verify=4, **kw)
    assert {c.item for c in store.checks()} == {"width2", "width3", "theta/width2", "theta/width3"}
    for a, b in zip(first, again):
        assert a["width"] == b["width"] and isinstance(b["ggn_eigs"], np.ndarray)
        np.testing.assert_array_equal(a["ggn_eigs"], b["ggn_eigs"])
    direct = damping.exact_case(3, **kw)
    np.testing.assert_allclose(first[1]["exact"], direct["exact"], rtol=1e-6)
    other = _elsewhere(store)
    stored.exact_cases([2, 3], store=other, verify=4, **kw)
    assert {c.item for c in other.checks()} == {"width2", "width3"} and all(c.largest <= 1 for c in other.checks())
    # the widest net, whose spectra the chapter quotes, is checked in every build, also with verify=0
    quoted = _elsewhere(store)
    cases = stored.exact_cases([2, 3], store=quoted, verify=0, **kw)
    assert [c.item for c in quoted.checks()] == ["width3"]
    assert cases[1]["summary"] == damping.summaries(cases[1], kw["weight_decay"])  # computed on reading
    (path,) = store.root.glob("hessian_exact/*.jsonl")
    _tamper(path, "width3", "exact")
    with pytest.raises(ResultsDisagree, match="width3"):
        stored.exact_cases([2, 3], store=_elsewhere(store), verify=0, **kw)


def test_query_indices_are_evenly_spaced_grid_points():
    np.testing.assert_array_equal(stored.query_indices(3, 3), [0, 4, 8])


def test_lm_block_check_catches_a_changed_probe(store):
    kw = dict(n_tokens=12, n_probes=2, m=12, seed=0)
    first = stored.lm_block("tiny-random", store=store, verify=0, **kw)
    again = stored.lm_block("tiny-random", store=store, verify=2, **kw)  # the first Lanczos steps, recomputed
    np.testing.assert_array_equal(again["slq"].nodes[1], first["slq"].nodes[1])
    assert len(store.checks()) == 2 and all(c.largest <= 1 for c in store.checks())
    (path,) = store.root.glob("hessian_slq_lm/*.jsonl")
    _tamper(path, "probe1", "nodes")
    with pytest.raises(ResultsDisagree, match=r"probe1.*\.(alpha|beta)\["):
        stored.lm_block("tiny-random", store=store, verify=2, **kw)
