"""gnuq_core.chapters.cross_checks: chapter 80 at a tiny size on synthetic QA records, without papermill."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gnuq_core.chapters import cross_checks
from gnuq_core.chapters.base import ChapterError
from gnuq_core.qa.data import QAItem
from gnuq_core.store import kinds
from tests.crosscheck.test_baselines import _record

TINY = cross_checks.Params(laplace_cases=[["two_moons", 2, 1, "plain"]], laplace_grid=3, laplace_in=5,
                           glm_samples=200, spectra_width=3, spectra_train=20, spectra_steps=10, top_k=2,
                           slq_probes=4, slq_steps=10, lm_block_tokens=6, gradnorm_models=["tiny-llama"], n_answers=1,
                           max_records=8)


def _store_run(folder, name: str, model: str, dataset: str, n: int, seed: int) -> None:
    """A stored QA run of the current code: a header and ``n`` synthetic records."""
    header = {"type": "header", "config": {"_kind": "qa", "_version": kinds.get("qa").version, "model": model,
                                           "dataset": dataset},
              "config_key": name}
    rng = np.random.default_rng(seed)
    records = [{**_record(i, rng), "dataset": dataset, "answer": "paris"} for i in range(n)]
    for r in records:
        r["generation"]["answer"] = "paris"
    lines = [header, *records]
    (folder / f"{name}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def _questions(dataset: str, **_: object) -> list[QAItem]:
    """TriviaQA-like questions for the synthetic records (answer "paris": every other one correct);
    the other dataset has no question file."""
    if dataset != "triviaqa":
        raise FileNotFoundError(f"no {dataset} here")
    return [QAItem(f"q{i}", f"question {i}?", ("Paris",) if i % 2 else ("Rome",), (), "triviaqa", {}) for i in range(25)]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch80")
    qa = root / "qa"
    qa.mkdir()
    _store_run(qa, "k1", "m", "triviaqa", 12, 0)
    _store_run(qa, "k2", "m", "truthfulqa", 5, 1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setattr("gnuq_core.qa.data.load_qa", _questions)
        return cross_checks.run(TINY, qa_root=qa)


def test_every_comparison_agrees_and_is_glued(ran) -> None:
    v = ran.values
    assert v["xc_laplace_cases"] == 1 and v["xc_laplace_glm_samples"] == 200
    assert v["xc_laplace_err"] <= v["xc_laplace_tol"] and v["xc_laplace_glm_z"] <= v["xc_laplace_mc_tol"]
    assert v["xc_spectra_deff_exact"] > 0 and v["xc_spectra_eig_err"] < 1e-6
    assert v["xc_grad_models"] == "tiny-llama" and v["xc_grad_answers"] == 1
    assert math.isnan(v["xc_grad_stored_err"])  # no stored record of tiny-llama: fixed answers
    assert v["xc_base_runs"] == 2 and v["xc_base_records"] == 8 + 5
    assert v["xc_metric_err"] <= 1e-9
    for key in ("xc_laplace_agree", "xc_spectra_agree", "xc_grad_agree", "xc_base_agree"):
        assert v[key] == "all agree", key
    assert v["xc_disagree"] == 0 and v["xc_rows"] == sum(len(f) for f in ran.data["frames"].values())
    assert v["xc_seconds"] > 0


def test_tables_and_the_run_without_labels(ran) -> None:
    assert list(ran.tables) == ["laplace", "spectra", "slq", "gradnorm", "baseline_notes", "baselines", "metrics",
                                "polygraph"]
    from gnuq_core.crosscheck import polygraph

    if polygraph.available():  # the polygraph extra: LM-Polygraph ranks the labelled run's scores
        assert ran.values["xc_pg_runs"] == 1 and ran.values["xc_pg_agree"] == "all agree"
        assert "m · triviaqa" in repr(ran.tables["polygraph"]) and ran.values["xc_pg_auroc_err"] <= 1e-9
    else:
        assert "LM-Polygraph is not installed" in ran.tables["polygraph"].data
    assert len(ran.data["frames"]["laplace"]) == 5  # f, GGN, Hessian, ‖∇θ p‖², GLM predictive
    notes = ran.tables["baseline_notes"].data.split("\n\n")
    assert len(notes) == 1 and notes[0].startswith("*m · truthfulqa: no labels")
    assert set(ran.data["frames"]["metrics"]["case"]) == {"m · triviaqa"}


def test_no_stored_records(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(cross_checks, "_laplace", lambda p, out: None)
    monkeypatch.setattr(cross_checks, "_spectra", lambda p, out: None)
    monkeypatch.setattr(cross_checks, "_gradnorm", lambda p, runs, out: None)
    result = cross_checks.run(TINY, qa_root=tmp_path)
    assert result.values["xc_base_records"] == 0 and math.isnan(result.values["xc_base_err"])
    assert "No stored QA records" in result.tables["baselines"].data and "metrics" not in result.tables
    assert result.values["xc_base_agree"] == "all agree" and result.values["xc_rows"] == 0


def test_params() -> None:
    assert cross_checks.Params.for_profile("full") == cross_checks.Params()
    quick = cross_checks.Params.for_profile("quick")
    assert (quick.n_answers, quick.max_records) == (2, 200)
    with pytest.raises(ChapterError, match="lm_block_model='gpt2' must be one of"):
        cross_checks.Params(lm_block_model="gpt2")
    with pytest.raises(ChapterError, match="slq_probes=1 must be ≥ 2"):
        cross_checks.Params(slq_probes=1)
    with pytest.raises(ChapterError, match=r"laplace_cases: case \['spiral', 4, 1, 'plain'\] has problem 'spiral'"):
        cross_checks.Params(laplace_cases=[["spiral", 4, 1, "plain"]])
    with pytest.raises(ChapterError, match="has width 0: must be ≥ 1"):
        cross_checks.Params(laplace_cases=[["two_moons", 0, 1, "plain"]])
    with pytest.raises(ChapterError, match=r"must be \[problem, width, depth, prior\]"):
        cross_checks.Params(laplace_cases=[["two_moons", 4]])
    with pytest.raises(ChapterError, match="gradnorm_models=\\[\\] must not be empty"):
        cross_checks.Params(gradnorm_models=[])
    with pytest.raises(ChapterError, match="unknown parameter"):
        cross_checks.Params.resolve({}, {"n_answer": 2})
