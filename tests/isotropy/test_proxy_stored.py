"""Chapter 02's stored items: stored runs equal direct ones to rounding, stored seeds are
reused and only missing ones computed, the check recomputes from scratch (embeddings
included) and catches a changed number."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gnuq_core.isotropy import proxy
from gnuq_core.isotropy import proxy_stored
from gnuq_core.isotropy import text_proxy
from gnuq_core.store import ResultsDisagree, Store

DELTAS = [0.0, 1.0, 3.0]
SYNTH = dict(n_train=40, hidden=[3], steps=20, weight_decay=1e-3, k_top=2, n_grid=4)
HEAD = dict(hidden=[3], steps=20, weight_decay=1e-2, k_top=2)


@pytest.fixture
def store(monkeypatch, tmp_path):
    """An empty local cache and results store (``store.root``: its folder)."""
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path / "cache"))
    return Store(tmp_path / "results", label="the test store")


def _tamper(path, item: str, *keys: str) -> None:
    """Scale one stored number list (``record[keys[0]][keys[1]]...``) of ``item`` by 1.01."""
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        r = json.loads(line)
        if r.get("id") == item:
            parent = r
            for k in keys[:-1]:
                parent = parent[k]
            parent[keys[-1]] = [v * 1.01 for v in parent[keys[-1]]]
            lines[n] = json.dumps(r)
    path.write_text("\n".join(lines) + "\n")


def _counting(monkeypatch, module, name: str) -> list[int]:
    """Count the calls of ``module.name`` (still calling it)."""
    calls, original = [], getattr(module, name)

    def wrapper(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_synthetic_stored_equals_direct_reuses_and_computes_only_missing(store, monkeypatch):
    first = proxy_stored.synthetic_runs([0], DELTAS, **SYNTH, store=store, verify=0)
    direct = proxy.run_seed(0, DELTAS, **SYNTH)
    for key in ("rho_proxy", "rho_proxy_diag", "overlap", "structure"):
        np.testing.assert_allclose(first[0][key], direct[key], rtol=1e-6)
    assert first[0]["rho_iso"] == pytest.approx(direct["rho_iso"], rel=1e-6)
    assert first[0]["n_params"] == direct["n_params"]
    assert sorted(first[0]["log_ratio"]) == [0, len(DELTAS) - 1]  # only the first and last shift's grid
    for j in (0, len(DELTAS) - 1):
        np.testing.assert_allclose(first[0]["log_ratio"][j], direct["log_ratio"][j], rtol=1e-6, atol=1e-12)
    calls = _counting(monkeypatch, proxy, "run_seed")
    both = proxy_stored.synthetic_runs([0, 1], DELTAS, **SYNTH, store=store, verify=0)
    assert len(calls) == 1  # seed 0 read back, seed 1 computed
    np.testing.assert_array_equal(both[0]["log_ratio"][0], first[0]["log_ratio"][0])
    proxy_stored.synthetic_runs([1, 0], DELTAS, **SYNTH, store=store, verify=0)
    assert len(calls) == 1
    summary = proxy.summarise(both, DELTAS)  # what the chapter reads is there
    assert len(summary["diff"]) == len(DELTAS)


def test_synthetic_check_recomputes_from_scratch_and_catches_a_changed_number(store):
    proxy_stored.synthetic_runs([0], DELTAS, **SYNTH, store=store, verify=0)
    proxy_stored.synthetic_runs([0], DELTAS, **SYNTH, store=store, verify=1)
    (check,) = store.checks()
    assert check.same_platform and check.largest <= 1 and check.item == "seed0"
    (path,) = store.root.glob("proxy_synthetic/*.jsonl")
    _tamper(path, "seed0", "rho_proxy")
    with pytest.raises(ResultsDisagree, match="seed0"):
        proxy_stored.synthetic_runs([0], DELTAS, **SYNTH, store=store, verify=1)


def _texts() -> tuple[dict[str, list[str]], dict[str, np.ndarray]]:
    sizes = {"train": 24, "proxy_same": 8, "query_same": 8, "proxy_other": 8, "query_other": 8}
    texts = {k: [f"{k} question {i}" for i in range(n)] for k, n in sizes.items()}
    labels = {k: np.array([text_proxy.bucket(t) < 0.5 for t in texts[k]], float) for k in ("train", "query_same")}
    return texts, labels


def _encoder(calls: list[int]):
    """A tiny deterministic sentence encoder (a vector seeded by each text's hash); counts its calls."""
    def encode(texts: dict[str, list[str]]) -> dict[str, np.ndarray]:
        calls.append(1)
        return {k: np.stack([np.random.default_rng(int(text_proxy.bucket(t) * 2 ** 32)).standard_normal(6)
                             for t in v]).astype(np.float32) for k, v in texts.items()}
    return encode


def test_text_runs_need_no_embeddings_when_stored_and_the_check_embeds_from_scratch(store):
    texts, labels = _texts()
    calls: list[int] = []
    kw = dict(**HEAD, encoder=_encoder(calls), encoder_id={"model": "hash-test"})
    first = proxy_stored.text_runs(texts, labels, [0, 1], store=store, verify=0, **kw)
    assert len(calls) == 1  # embedded once for both seeds (and cached locally)
    direct = text_proxy.run_head_experiment(_encoder([])(texts), labels, seed=1, **HEAD)
    for m, u in direct["u"].items():
        np.testing.assert_allclose(first[1]["u"][m], u, rtol=1e-6)
    assert first[1]["rho"] == pytest.approx(direct["rho"], rel=1e-6)
    again = proxy_stored.text_runs(texts, labels, [0, 1], store=store, verify=0, **kw)
    assert len(calls) == 1  # everything stored: nothing embedded
    np.testing.assert_array_equal(again[0]["u"]["isotropic"], first[0]["u"]["isotropic"])
    proxy_stored.text_runs(texts, labels, [0, 1], store=store, verify=1, **kw)
    assert len(calls) == 2  # the check embeds from scratch, not from the local cache
    (path,) = store.root.glob("proxy_text/*.jsonl")
    assert "question" not in path.read_text()  # the store holds hashes of the texts, not the texts
    _tamper(path, "seed1", "u", "proxy_other")
    with pytest.raises(ResultsDisagree, match="seed1"):
        proxy_stored.text_runs(texts, labels, [0, 1], store=store, verify=2, **kw)


def test_an_unnamed_encoder_is_refused(store):
    texts, labels = _texts()
    with pytest.raises(ValueError, match="encoder_id"):
        proxy_stored.text_runs(texts, labels, [0], **HEAD, store=store, encoder=_encoder([]))
