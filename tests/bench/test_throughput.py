"""Records per hour (gnuq_core.bench.throughput): summaries on hand-made worker results, and
the model a worker loads; the worker processes themselves run in tests/bench/test_run.py."""

from __future__ import annotations

import pytest

from gnuq_core.bench import throughput as tp
from gnuq_core.bench.config import BenchConfig
from gnuq_core.bench.subjects import load_subject, worker_spec


def test_worker_spec_saves_a_tiny_model_the_engine_can_load(tmp_path) -> None:
    from gnuq_core.lm.models import load_model

    assert worker_spec(load_subject("random:tiny")) is None  # synthetic questions: no text pipeline
    assert worker_spec(load_subject("tiny-llama"), str(tmp_path)) == str(tmp_path)
    assert load_model(str(tmp_path)).prompt_style == "chat"


def test_items_interleave_datasets(tmp_path) -> None:
    from tests.qa.test_data import write_fixture

    items = tp.throughput_items(BenchConfig(n_questions=2), str(write_fixture(tmp_path)))
    assert [it.dataset for it in items] == ["truthfulqa", "triviaqa"] * 2
    assert tp.study_sizes(["truthfulqa", "triviaqa"], str(tmp_path)) == {"truthfulqa": 2, "triviaqa": 2}


def test_summarize_layout_scales_the_study_by_dataset() -> None:
    def rec(ds: str, s: float) -> dict:
        return {"id": ds, "dataset": ds, "seconds": s, "timings": {"generate": s / 2, "sample": s / 4, "total": s}}

    workers = [{"start": 0.0, "end": 10.0, "threads": 1, "load_seconds": 1.0, "warmup_seconds": 0.1,
                "records": [rec("a", 2.0), rec("b", 8.0)]}]
    lay = tp.summarize_layout(workers, {"a": 10, "b": 1})
    assert lay["records_per_hour"] == pytest.approx(720.0) and lay["seconds_per_record"] == 5.0
    assert lay["shares"] == pytest.approx({"generate": 0.5, "sample": 0.25, "other": 0.25})
    assert lay["study_seconds"] == pytest.approx(10.0 * (10 * 2.0 + 1 * 8.0) / 10.0)
    assert lay["utilisation"] == pytest.approx(1.0)


def test_campaign_adds_models_per_layout() -> None:
    models = {m: {"throughput": {"layouts": {k: {"study_seconds": s * 3600, "study_records": 3750}
                                             for k, s in (("1x2", h), ("2x1", h / 2))}}} for m, h in (("a", 4), ("b", 2))}
    c = tp.campaign(models)
    assert c["layouts"]["1x2"]["hours"] == pytest.approx(6.0) and c["layouts"]["2x1"]["records"] == 7500
    assert c["best"]["layout"] == "2x1" and c["best"]["hours"] == pytest.approx(3.0)


def test_bad_layout_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="layout"):
        BenchConfig(layouts=[[0, 2]])
