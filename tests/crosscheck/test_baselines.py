"""QA baselines, AUROC and PRR: registry and qa.auroc vs independent code, on synthetic records."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gnuq_core.crosscheck import baselines as xbase


def _record(i: int, rng: np.random.Generator) -> dict:
    n = int(rng.integers(1, 5))
    lps = list(-rng.exponential(1.0, n))
    samples = []
    for j in range(4):
        m = int(rng.integers(0, 4))
        samples.append({"answer": "a", "answer_ids": list(range(m)), "token_log_probs": list(-rng.exponential(1.0, m)),
                        "stop_reason": "eos", "stop_log_prob": -0.5, "stop_token_id": 2, "cluster": int(j % 2 + (i % 3 == 0))})
    return {"type": "record", "id": f"q{i}", "dataset": "triviaqa", "style": "chat", "answer": "a",
            "generation": {"answer_ids": list(range(n)), "answer": "a", "token_log_probs": lps,
                           "token_entropies": list(rng.exponential(1.0, n)), "stop_reason": "eos"},
            "log_p": math.fsum(lps), "grad_sq": 1.0, "samples": samples}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    rng = np.random.default_rng(0)
    return [_record(i, rng) for i in range(25)]


def test_scores_agree(records: list[dict]) -> None:
    df = xbase.compare_scores(records, label="synthetic")
    assert len(df) == len(xbase.BASELINES) and df["agrees"].all(), df[["quantity", "max_rel_error"]]


def test_a_changed_record_is_a_disagreement(records: list[dict]) -> None:
    bad = json.loads(json.dumps(records))
    bad[3]["samples"][0]["cluster"] = 7  # the registry sees other clusters than the formula
    mine = {r["id"]: xbase.independent_scores(r) for r in records}
    theirs = [xbase.independent_scores(r)["semantic_entropy"] for r in bad]
    from gnuq_core.crosscheck.agreement import compare

    row = compare("se", [mine[r["id"]]["semantic_entropy"] for r in bad], theirs, xbase.TOL_SCORE, floor=1.0)
    assert not row["agrees"]


def test_semantic_entropy_reference_values() -> None:
    """Two equally likely clusters: ln 2; one cluster: 0 (Farquhar et al. 2024)."""
    assert xbase._semantic_entropy(np.array([-1.0, -1.0]), [0, 1]) == pytest.approx(math.log(2))
    assert xbase._semantic_entropy(np.array([-1.0, -3.0]), [0, 0]) == pytest.approx(0.0)


def test_auroc_and_prr_agree_with_ties_and_detect_a_flip() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 60)
    s = np.round(rng.standard_normal(60) + y, 1)  # many ties
    table = pd.DataFrame({"incorrect": y, "x": s})
    df = xbase.compare_metrics(table, ["x"])
    assert len(df) == 2 and df["agrees"].all(), df
    from gnuq_core.qa import auroc as au

    assert xbase.mann_whitney_auroc(y, -s) != pytest.approx(au.auroc(y, s))
    assert xbase.expected_prr(1 - y, s) == pytest.approx(au.prr(1 - y, s), abs=1e-12)
    assert math.isnan(xbase.expected_prr(np.ones(3), np.arange(3.0)))


def test_stored_runs_reads_main_files_and_shards_of_the_current_version(tmp_path) -> None:
    from gnuq_core.store import kinds

    header = {"type": "header", "config": {"_kind": "qa", "_version": kinds.get("qa").version, "model": "m",
                                           "dataset": "triviaqa"}, "config_key": "k"}
    rng = np.random.default_rng(2)
    (tmp_path / "k.jsonl").write_text("\n".join(json.dumps(x) for x in [header, _record(0, rng)]) + "\n")
    (tmp_path / "k.rank0of2.jsonl").write_text("\n".join(json.dumps(x) for x in [header, _record(1, rng)]) + "\n")
    orphan = {**header, "config": {**header["config"], "_version": 0}}  # a stale file of an older version
    (tmp_path / "old.jsonl").write_text("\n".join(json.dumps(x) for x in [orphan, _record(2, rng)]) + "\n")
    runs = xbase.stored_runs(tmp_path)
    assert list(runs) == [("m", "triviaqa")] and len(runs["m", "triviaqa"]) == 2
    assert xbase.stored_runs(tmp_path / "empty") == {}
