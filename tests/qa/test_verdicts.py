"""Every reading of the compound QA claims: robust or depending on the reading, on synthetic tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gnuq_core.qa import scores, verdicts
from gnuq_core.qa.readings import FALLBACK, graders_in, grid
from gnuq_core.repro import claims


def _table(n: int, seed: int, signal: dict[str, float], flip_ties: bool = False) -> pd.DataFrame:
    """A TruthfulQA-like score table: ``incorrect`` from the primary grader; each claim method's
    score is noise plus ``signal[method]`` times the label (higher = more uncertain)."""
    rng = np.random.default_rng(seed)
    wrong = rng.random(n) < 0.5
    t = pd.DataFrame({"id": [f"q{i}" for i in range(n)], "correct_rouge": ~wrong, "rouge_tie": rng.random(n) < 0.2,
                      "correct_rouge_best": ~wrong, "correct_rouge_any": ~wrong, "correct_embed": ~wrong,
                      "stop_reason": np.where(rng.random(n) < 0.1, "max_new_tokens", "eos")})
    if flip_ties:  # the other graders see the ties the other way round
        t.loc[t["rouge_tie"], ["correct_rouge_best", "correct_rouge_any", "correct_embed"]] = True
    for m in scores.names(claim=True) + ["epistemic_norm", "aleatoric_norm", "combined_norm", "grad_log_p",
                                         "grad_log_p_norm"]:
        base = m.removesuffix("_norm")
        t[m] = rng.standard_normal(n) + signal.get(base, 0.0) * wrong
    t["incorrect"] = wrong.astype(int)
    t["correct"] = ~wrong
    return t


def test_a_claim_is_robust_when_every_reading_gives_its_verdict() -> None:
    # epistemic and aleatoric carry a strong signal, so combined does under every p and every combination and
    # every grader (they agree here): C6a reproduced, C6b not (AUROC ≫ 0.63), C6c reproduced, everywhere
    tables = {m: _table(400, s, {"epistemic": 3.0, "aleatoric": 3.0, "combined": 6.0, "grad_log_p": 3.0})
              for s, m in enumerate("ab")}
    for t in tables.values():  # p(1 − p) lies in (0, 1/4]: the loss reading adds it to 10^epistemic
        for c in ("aleatoric", "aleatoric_norm"):
            t[c] = 0.25 / (1 + np.exp(-t[c]))
    primary, by_reading, key = verdicts.compound_readings("C6", tables, {}, n_boot=200, seed=0)
    assert len(by_reading) == len(grid("truthfulqa", graders=graders_in(tables.values(), "truthfulqa")))
    m = claims.Measurement("C6", 0.9, (0.85, 0.95), evidence={"models": 2, "correct": 100, "wrong": 100})
    with claims_dir() as _:
        e = claims.record(m, parts=primary, readings=by_reading, primary=key)
    assert e["robustness"]["robust"], e["robustness"]["text"]
    assert e["robustness"]["text"] == f"robust: partly reproduced under all {len(by_reading)} readings"
    row = e["readings"][0]
    assert row["primary"] and set(row["values"]) == {"C6a", "C6b", "C6c"}
    assert row["values"]["C6b"][1] <= row["values"]["C6b"][0] <= row["values"]["C6b"][2]


def test_the_grid_leaves_out_a_grader_the_build_did_not_run() -> None:
    tables = {m: _table(200, s, {"combined": 3.0}).drop(columns="correct_embed") for s, m in enumerate("ab")}
    _, by_reading, _ = verdicts.compound_readings("C6", tables, {}, n_boot=50, seed=0)
    assert by_reading and not any("embedding" in k for k in by_reading)
    judged = {(m, "truthfulqa"): t for m, t in tables.items()}
    by9, _ = verdicts.transfer_readings(judged, ["a", "b"], {}, n_boot=50, seed=0)
    assert not any("embedding" in k for k in by9)


def test_a_claim_depends_on_the_reading_when_one_combination_loses_the_signal() -> None:
    # combined carries a strong signal, everything else none: C6a and C6c reproduced, C6b not (AUROC ≫ 0.63)
    tables = {m: _table(400, s, {"combined": 3.0}) for s, m in enumerate(("a", "b"))}
    held = graders_in(tables.values(), "truthfulqa")  # no careful labels here: the ROUGE rule is primary
    primary, by_reading, key = verdicts.compound_readings("C6", tables, {}, n_boot=200, seed=0,
                                                          readings=grid("truthfulqa", graders=held)[:4])
    assert key == FALLBACK["truthfulqa"].key and set(primary) == {"C6a", "C6b", "C6c"}
    m = claims.Measurement("C6", 0.9, (0.85, 0.95), evidence={"models": 2, "correct": 100, "wrong": 100})
    with claims_dir() as _:
        e = claims.record(m, parts=primary, readings=by_reading, primary=key)
    assert [p["verdict"] for p in e["parts"]] == ["reproduced", "not reproduced", "reproduced"]
    assert e["verdict"] == "partly reproduced"
    # the rank-mean combination drops the signal (aleatoric has none): it flips C6a and C6c
    assert not e["robustness"]["robust"] and any("rank_mean" in k for k in e["robustness"]["flips"])


def test_the_cap_summary_and_agreement() -> None:
    tables = {("a", "truthfulqa"): _table(300, 0, {"epistemic": 1.0}), ("b", "truthfulqa"): _table(300, 1, {})}
    cap = verdicts.cap_summary(tables, 32, ["epistemic"], min_per_class=30, n_boot=100, seed=0, models=["a", "b"])
    assert set(cap.columns) >= {"auroc", "auroc_uncapped", "capped a", "capped b"}
    assert 0.05 < cap["capped a"].iloc[0] < 0.15
    agree = verdicts.grader_agreement(tables)
    assert set(agree["grader"]) == {"rouge_ties_true", "rouge_no_ties", "rouge_best_0.3", "rouge_any_0.3", "embedding"}
    assert (agree.loc[agree["grader"] == "embedding", "kappa"] == 1.0).all()


class claims_dir:
    """Record claims into a temporary folder (the ledger's files are per chapter)."""

    def __enter__(self):
        import os
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.old = os.environ.get("GNUQ_OUTPUT_DIR")
        os.environ["GNUQ_OUTPUT_DIR"] = self.tmp.name
        return self.tmp.name

    def __exit__(self, *exc):
        import os

        if self.old is None:
            os.environ.pop("GNUQ_OUTPUT_DIR", None)
        else:
            os.environ["GNUQ_OUTPUT_DIR"] = self.old
        self.tmp.cleanup()
