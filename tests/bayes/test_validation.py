"""Tests for gnuq_core.bayes.validation (NUTS replaced by a fake sampler to stay fast)."""

import os

import numpy as np
import pytest

from gnuq_core.bayes import mcmc
from gnuq_core.bayes.bnn import n_params
from gnuq_core.bayes.validation import PAPER_ESTIMATE, Setting, evaluate


@pytest.fixture
def fake_nuts(monkeypatch, tmp_path):
    monkeypatch.setenv("GNUQ_CACHE_DIR", str(tmp_path))
    calls = []

    def run(cfg, data, settings, seed=0):
        calls.append(cfg)
        rng = np.random.default_rng(seed)
        C, S, P = settings.num_chains, settings.num_samples, n_params(cfg)
        return mcmc.NutsResult(theta=0.5 * rng.standard_normal((C, S, P)), diverging=np.zeros((C, S), bool),
                               num_steps=np.full((C, S), 7), accept_prob=np.full((C, S), 0.9),
                               step_size=np.full(C, 0.1), max_tree_depth=settings.max_tree_depth, wall_s=0.0)

    monkeypatch.setattr(mcmc, "run_nuts", run)
    return calls


@pytest.mark.parametrize("problem", ["two_moons", "gap_regression"])
def test_evaluate_structure(fake_nuts, problem):
    st = Setting(problem, dict(n_train=20, n_query_in=10, grid_size=5), dict(width=3),
                 mcmc.NutsSettings(num_warmup=5, num_samples=20, num_chains=2), seed=1, n_restarts=1)
    r = evaluate(st, ntk=True)
    task = r["cfg"].task
    est_key, ref_key = PAPER_ESTIMATE[task]
    for qname, n in (("in", 10), ("grid", 25 if task == "classification" else 5)):
        q = r["q"][qname]
        assert q["est"][est_key].shape == q["ref"][ref_key].shape == (n,)
        assert {"laplace_f", "ggn_f", "diag_f", "iso_f"} <= set(q["est"])
        np.testing.assert_allclose(q["ntk"]["iso_f"], q["est"]["iso_f"], rtol=1e-10)
        assert -1 <= q["split"]["rho_half"] <= 1 and q["diag"]["divergences"] == 0
    assert len(fake_nuts) == 1  # one NUTS run: the store, not a second cache, keeps it across builds


def _setting(seed=1, width=3):
    return Setting("two_moons", dict(n_train=20, n_query_in=10, grid_size=5), dict(width=width),
                   mcmc.NutsSettings(num_warmup=5, num_samples=20, num_chains=2), seed=seed, n_restarts=1)


def test_stored_references_reuse_verify_and_catch_tampering(fake_nuts, tmp_path):
    import json

    from gnuq_core.bayes.validation import setting_id, stored_references
    from gnuq_core.store import ResultsDisagree, Store

    store = Store(tmp_path / "store", label="the test store")
    settings = [_setting(1), _setting(2)]
    refs = stored_references(settings, store=store, verify=2, progress=False)
    assert len(fake_nuts) == 2 and set(refs) == {setting_id(s) for s in settings}
    # Evaluating from the stored summary gives what evaluating directly gives.
    direct, from_store = evaluate(settings[0]), evaluate(settings[0], reference_summary=refs[setting_id(settings[0])])
    np.testing.assert_allclose(direct["q"]["grid"]["ref"]["var_p"], from_store["q"]["grid"]["ref"]["var_p"])
    assert len(fake_nuts) == 3  # the direct evaluation sampled once more
    # A second build reuses both and samples two of them again from scratch.
    stored_references(settings, store=store, verify=2, progress=False)
    assert len(fake_nuts) == 5
    # A stored number that the code no longer reproduces fails the build and names the item.
    (path,) = store.root.glob("nuts_reference/*.jsonl")
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["q"]["in"]["ref"]["var_p"][0] *= 1.5
    path.write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    with pytest.raises(ResultsDisagree, match=rec["id"]):
        stored_references(settings, store=store, verify=2, progress=False)


@pytest.mark.parametrize("problem", ["two_moons", "gap_regression"])
def test_stored_local_estimates_give_the_direct_evaluation(fake_nuts, tmp_path, problem):
    import json

    from gnuq_core.bayes.validation import local_estimates, setting_id, stored_local_estimates
    from gnuq_core.store import ResultsDisagree, Store

    store = Store(tmp_path / "store", label="the test store")
    settings = [Setting(problem, dict(n_train=20, n_query_in=10, grid_size=5), dict(width=3),
                        mcmc.NutsSettings(num_warmup=5, num_samples=20, num_chains=2), seed=s, n_restarts=1)
                for s in (1, 2)]
    local = stored_local_estimates(settings, ntk=True, store=store, verify=0, progress=False)
    direct, stored = evaluate(settings[0], ntk=True), evaluate(settings[0], ntk=True, local=local[setting_id(settings[0])])
    assert stored["map"].grad_norm == pytest.approx(direct["map"].grad_norm, rel=1e-6)
    for qname in ("in", "grid"):
        d, s = direct["q"][qname], stored["q"][qname]
        assert set(s["est"]) == set(d["est"]) and set(s["ntk"]) == set(d["ntk"])
        for key in d["est"]:  # stored with 7 significant digits; derived keys recomputed from them (f's rounding grows through p(1−p))
            np.testing.assert_allclose(s["est"][key], d["est"][key], rtol=1e-5, atol=1e-300, err_msg=key)
        for key in d["ntk"]:
            np.testing.assert_allclose(s["ntk"][key], d["ntk"][key], rtol=1e-6, err_msg=key)
    # The record made without the store is the one the store keeps (before rounding).
    assert set(local_estimates(settings[0], ntk=True)["q"]["in"]) == {"est", "ntk"}
    # Asking for what the record was not made with is refused.
    with pytest.raises(ValueError, match="other query sets or without the tangent-kernel view"):
        evaluate(settings[0], ntk=False, local=local[setting_id(settings[0])])
    # A build checks a stored record by fitting the MAP again, and a changed number fails it.
    (path,) = store.root.glob("local_estimates/*.jsonl")
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["q"]["grid"]["est"]["iso_f"][0] *= 1.5
    path.write_text("\n".join([lines[0], json.dumps(rec), *lines[2:]]) + "\n")
    with pytest.raises(ResultsDisagree, match=rec["id"]):
        stored_local_estimates(settings, ntk=True, store=store, verify=2, progress=False)


def _memory_maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc")
def test_a_grid_of_settings_does_not_pile_up_compiled_code(fake_nuts):
    """Each setting compiles its own JAX functions, and each compiled function holds memory
    maps; without releasing them chapter 05's full grid reached vm.max_map_count (65,530)
    and XLA stopped with 'LLVM compilation error: Cannot allocate memory'."""
    evaluate(_setting(width=3), ntk=True)
    before = _memory_maps()
    for width in (4, 5, 6, 7):
        evaluate(_setting(width=width), ntk=True)
    assert _memory_maps() - before < 40


def test_a_multiclass_setting_is_compared_at_the_class_the_map_predicts(fake_nuts):
    st = Setting("multiclass_spirals", dict(n_train=30, n_query_in=6, grid_size=3), dict(width=3),
                 mcmc.NutsSettings(num_warmup=5, num_samples=20, num_chains=2), seed=1, n_restarts=1)
    r = evaluate(st)
    for name, n in (("in", 6), ("grid", 9)):
        q = r["q"][name]
        c = q["est"]["pred_class"].astype(int)
        np.testing.assert_array_equal(q["ref"]["var_p"], q["ref"]["var_p_all"][np.arange(n), c])
        assert q["ref"]["var_p_all"].shape == (n, 3) and q["est"]["iso_p"].shape == (n,)
        np.testing.assert_allclose(q["ref"]["alea_p"], q["ref"]["mean_p"] * (1 - q["ref"]["mean_p"]) - q["ref"]["var_p"])
        assert {"laplace_p", "ggn_p", "diag_p", "aleatoric"} <= set(q["est"]) and "iso_f" not in q["est"]


def test_theta_round_trips_and_another_cpu_checks_the_estimates_at_it(tmp_path):
    """θ* is stored bit for bit; the foreign check recomputes at it and catches a changed estimate."""
    from gnuq_core.bayes.local import decode_theta, encode_theta, estimates_at_stored_theta, local_estimates
    from gnuq_core.store.contracts import Context
    from gnuq_core.store.kinds import get

    theta = np.random.default_rng(0).standard_normal(7)
    assert np.array_equal(decode_theta(encode_theta(theta), 7), theta)
    with pytest.raises(ValueError, match="holds 7 values, the setting's network has 8"):
        decode_theta(encode_theta(theta), 8)
    with pytest.raises(ValueError, match="not base64"):
        decode_theta("no base64!", 7)
    setting = Setting("two_moons", dict(n_train=20, n_query_in=10, grid_size=5), dict(width=3),
                      mcmc.NutsSettings(num_warmup=5, num_samples=20, num_chains=2), seed=1, n_restarts=1)
    record = local_estimates(setting)
    record.pop("seconds")
    rule = get("local_estimates").contract.foreign
    again = estimates_at_stored_theta(setting, record)
    assert max(d.units for d in rule.compare(record, again, Context())) <= 1e-3
    record["q"]["grid"]["est"]["iso_f"][0] *= 1.5
    worst = max(rule.compare(record, again, Context()), key=lambda d: d.units)
    assert worst.units > 1 and worst.path == ".q.grid.est.iso_f[0]"
