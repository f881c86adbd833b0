"""gnuq_core.chapters.campaign: the campaign's progress, its commands, one process group per command."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnuq_core.chapters import campaign
from gnuq_core.chapters import qa


def test_campaign_progress_counts_the_requested_questions_and_their_record_times():
    recs = [{"id": "a", "timings": {"total": 10.0}}, {"id": "b", "timings": {"total": 30.0}},
            {"id": "x", "timings": {"total": 999.0}},  # not one of the requested questions
            {"id": "c", "timings": {}}]  # a record without its total time still counts as done
    pr = campaign.campaign_progress(recs, ["a", "b", "c", "d", "e"])
    assert pr["done"] == 3 and pr["total"] == 5
    assert pr["process_hours"] == pytest.approx(40.0 / 3600) and pr["median_seconds"] == 20.0
    assert pr["hours_left"] == pytest.approx(2 * 20.0 / 3600)
    empty = campaign.campaign_progress([], ["a"])
    assert empty["done"] == 0 and np.isnan(empty["median_seconds"])


def test_progress_table_rows_and_total():
    done = campaign.campaign_progress([{"id": "a", "timings": {"total": 3600.0}}], ["a", "b"])
    empty = campaign.campaign_progress([], ["a", "b", "c"])
    table = campaign.progress_table([("m1", "truthfulqa", done), ("m2", "triviaqa", empty)], ranks=2)
    lines = table.splitlines()
    assert lines[2] == "| m1 × truthfulqa | 1 of 2 | 1.0 | 3600.0 | 1.0 |"
    assert lines[3] == "| m2 × triviaqa | 0 of 3 | — | — | — |"  # nothing done: no rate to project
    assert lines[4] == "| **all** | 1 of 5 | 1.0 (≈ 0.5 h of wall time on 2 ranks) | | 1.0 (≈ 0.5 h) |"
    complete = campaign.progress_table([("m1", "truthfulqa", campaign.campaign_progress(
        [{"id": "a", "timings": {"total": 7200.0}}], ["a"]))], ranks=2).splitlines()
    assert complete[-1] == "| **all** | 1 of 1 | 2.0 (≈ 1.0 h of wall time on 2 ranks) | | — |"  # nothing left


def test_where_markdown_prints_one_table_for_every_dataset(tmp_path, capsys):
    from tests.qa.test_data import write_fixture

    data = str(write_fixture(tmp_path / "data"))
    rc = campaign.main(["where", "--dataset", "truthfulqa", "triviaqa", "--markdown", "--data-dir", data,
                        "--store-root", str(tmp_path / "store"), "--model", "m"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert [line.split(" | ")[0] for line in out[2:]] == ["| m × truthfulqa", "| m × triviaqa", "| **all**"]
    with pytest.raises(SystemExit) as bad:  # argparse: one usage line, exit code 2
        campaign.main(["where", "--dataset", "nosuch", "--data-dir", data])
    assert bad.value.code == 2


def test_a_command_over_several_datasets_makes_one_process_group(monkeypatch):
    """Under torchrun, a command over two datasets used to destroy the process group after the
    first and make it again for the second; both ranks then waited forever in a barrier. The
    command now holds one group for all its datasets (``fill`` nests inside it)."""
    import torch.distributed as dist

    from gnuq_core.repro.shards import distributed

    state = {"live": False, "made": 0, "destroyed": 0}

    def init(*args, **kwargs):
        state.update(live=True, made=state["made"] + 1)

    def destroy(*args, **kwargs):
        state.update(live=False, destroyed=state["destroyed"] + 1)

    monkeypatch.setattr(dist, "init_process_group", init)
    monkeypatch.setattr(dist, "destroy_process_group", destroy)
    monkeypatch.setattr(dist, "is_initialized", lambda: state["live"])
    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    seen = []

    def fill(profile, dataset, *args, device="cpu", threads=None, **kwargs):
        with distributed(device, threads):  # as the real fill does
            seen.append((dataset, state["live"]))
        return {}

    monkeypatch.setattr(campaign, "fill", fill)
    assert campaign.main(["verify", "--dataset", "truthfulqa", "triviaqa", "--no-progress"]) == 0
    assert seen == [("truthfulqa", True), ("triviaqa", True)]
    assert (state["made"], state["destroyed"]) == (1, 1)


def test_the_campaign_reads_the_chapters_parameters() -> None:
    from gnuq_core.chapters.base import ChapterError

    assert campaign.chapter_parameters("full") == qa.Params().to_dict()
    assert campaign.chapter_parameters("quick", {"n_triviaqa": 2})["n_triviaqa"] == 2
    with pytest.raises(ChapterError, match="n_triviaqa=-2 must be ≥ 0"):
        campaign.chapter_parameters("quick", {"n_triviaqa": -2})
