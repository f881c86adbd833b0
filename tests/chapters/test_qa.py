"""gnuq_core.chapters.qa: chapter 06 on two tiny random models and questions written here, without papermill.

Nothing is downloaded and no real model is loaded: `load_model` is replaced by two tiny
randomly initialised LMs (a chat Llama and a few-shot Gemma-3), the data folder holds a
few TruthfulQA, TriviaQA and multiple-choice questions, the semantic clusterer is exact
match instead of MiniLM, and the audit's hand labels are written for these answers.
"""

from __future__ import annotations

import csv
import json
import os
import re
import string
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gnuq_core.chapters import qa  # noqa: E402
from gnuq_core.chapters.base import profile_values  # noqa: E402
from gnuq_core.chapters.base import ChapterError  # noqa: E402
from gnuq_core.lm import clustering  # noqa: E402
from gnuq_core.lm.models import LoadedModel  # noqa: E402
from gnuq_core.qa import audit as qa_audit  # noqa: E402
from gnuq_core.qa import data as qa_data  # noqa: E402
from gnuq_core.store import Store  # noqa: E402

from tests.chapters.glued import glued_names  # noqa: E402
from tests.tiny_models import byte_tokenizer, tiny_gemma, tiny_llama  # noqa: E402

pytestmark = pytest.mark.filterwarnings(  # a tiny random model's answers all hit the cap: constant columns
    "ignore::scipy.stats.ConstantInputWarning", "ignore:All-NaN:RuntimeWarning", "ignore:invalid value:RuntimeWarning")

NOTEBOOK = Path(__file__).resolve().parents[2] / "gnuq_core" / "notebooks" / "06_qa_benchmarks.py"
MODELS = ["tiny-chat", "tiny-fewshot"]
TINY = qa.Params(models=MODELS, n_truthfulqa=0, n_triviaqa=0, n_samples=2, max_new_tokens=6, n_mc=2, n_boot=20,
                 n_layer_questions=4, embedding_judge=False, compute_missing=True, store_verify=0)
"""Every question of the fixture, two samples each, six answer tokens, the first four answers split by layer."""
SINGLE = [*string.ascii_lowercase, *string.digits]  # aliases that a random answer can contain as a word


def write_data(root: Path) -> Path:
    """Eight TruthfulQA questions (with the multiple-choice file) and eight TriviaQA questions;
    half of TriviaQA's accept any one-character word, so a random model gets some right."""
    (root / "truthfulqa").mkdir(parents=True)
    categories = ["Misconceptions", "Proverbs", "Health", "Law", "Confusion: Other", "Fiction", "Science",
                  "Myths and Fairytales"]
    with (root / "truthfulqa" / "TruthfulQA.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(qa_data.TRUTHFULQA_HEADER)
        for i, cat in enumerate(categories):
            w.writerow(["Adversarial", cat, f"Question number {i}?", "a b c", "; ".join(SINGLE[:18]),
                        "; ".join(SINGLE[18:]) if i % 2 else "zzzz qqqq", f"https://example.org/{i}"])
    mc = [{"question": f"Choice {i}?", "mc1_targets": {"yes": 1, "no": 0}, "mc2_targets": {"yes": 1, "maybe": 1,
                                                                                             "no": 0}}
          for i in range(3)]
    (root / "truthfulqa" / "mc_task.json").write_text(json.dumps(mc))
    (root / "triviaqa").mkdir()
    rows = [{"id": f"tqa_{i}", "question": f"Trivia number {i}?", "answers": SINGLE if i % 2 else ["Mars"]}
            for i in range(8)]
    (root / "triviaqa" / "validation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def hand_labels(data: Path) -> pd.DataFrame:
    """The audit's labels for every fixture answer of both models (correct, incorrect, unclear in turn)."""
    rows = []
    for d in qa.DATASETS:
        ids = [it.id for it in qa_data.load_qa(d, data_dir=data)]
        for m in MODELS:
            for k, i in enumerate(ids):
                rows.append({"model": m, "dataset": d, "id": i, "label": qa_audit.LABELS[k % 3], "stratum": "all",
                             "stratum_size": len(ids), "config": {"max_new_tokens": TINY.max_new_tokens,
                                                                  "n_samples": TINY.n_samples, "seed": TINY.seed}})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("ch06")
    data = write_data(root / "data")
    models = {"tiny-chat": LoadedModel(tiny_llama(seed=0), byte_tokenizer(), "tiny-chat", "memory", "chat"),
              "tiny-fewshot": LoadedModel(tiny_gemma(seed=1), byte_tokenizer(False), "tiny-fewshot", "memory",
                                          "fewshot")}
    labels = hand_labels(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNUQ_DATA_DIR", str(data))
        mp.setenv("GNUQ_CACHE_DIR", str(root / "cache"))
        mp.setenv("GNUQ_OUTPUT_DIR", str(root / "out"))
        mp.setenv("GNUQ_CHAPTER", qa.Params.CHAPTER)
        mp.setattr(qa, "load_model", lambda name: models[name])
        mp.setattr(clustering, "get_clusterer", lambda name, threshold=0.85: clustering.exact_match_clusters)
        mp.setattr(qa_audit, "load_labels", lambda path=None: labels)
        return qa.run(TINY, Store(root / "results", label="the test store"), "smoke"), root


def test_every_value_the_page_glues_is_computed(ran) -> None:
    result, _ = ran
    quoted = set(profile_values(qa.Params()))  # the profiles' values the exercises quote (glue_values)
    missing = glued_names(NOTEBOOK) - set(result.values) - quoted
    assert not missing, f"the page glues values run() does not compute: {sorted(missing)}"
    v = result.values
    assert (v["n_tfqa"], v["n_tqa"], v["n_tfqa_all"], v["n_tqa_all"], v["n_mc"], v["n_models"]) == (8, 8, 8, 8, 2, 2)
    assert v["n_answers"] == 2 * 16 and 0 <= v["cap_hits"] <= v["n_answers"]
    assert TINY.n_layer_questions <= v["n_layer_min"] <= v["n_layer_max"] <= 8
    assert v["audit_findings"].data.startswith("32 audited answers (8 unclear)")  # the hand labels were applied
    for key in ("c6", "c7", "c9"):
        assert v[f"{key}_verdict"] in ("reproduced", "partly reproduced", "not reproduced", "inconclusive")
        assert v[f"{key}_n_readings"] >= 1 and v[f"{key}_robustness"]
    assert v["c6_verdict"] == "inconclusive"  # a handful of answers cannot pass the evidence gate
    assert "C6" in v["qa_gate_reasons"].data and v["scale_coverage"].data.startswith("The numbers in this section")


def test_tables_store_and_claims(ran) -> None:
    result, root = ran
    expected = {"agreement", "audit", "examples_truthfulqa", "examples_triviaqa", "accuracy", "lengths", "rho_p",
                "rho_length", "auroc", "auroc_full", "ablation", "table2", "table2_models", "rho_epi_ptrue", "significance", "classifier_transfer",
                "per_model_statements", "group_auroc", "group_epistemic_auroc", "variants",
                "categories", "scales", *qa.CLAIM_TABLES}
    assert expected <= set(result.tables) <= expected | {"transfers"}
    assert "hand-labelled audit set" in repr(result.tables["audit"])
    assert "seconds" not in repr(result.tables["variants"])  # costs are chapter 07's measurement, not this one's
    assert {p.parent.name for p in (root / "results").glob("*/*.jsonl")} == {"qa", "qa_mc"}
    assert len(list((root / "results" / "qa").glob("*.jsonl"))) == 4  # two models × two datasets
    ledger = json.loads((root / "out" / "06_qa_benchmarks.claims.json").read_text())
    assert {"C6", "C7", "C9"} <= set(re.findall(r'"(C[0-9])"', json.dumps(ledger)))
    assert set(result.data["tables"]) == {(m, d) for m in MODELS for d in qa.DATASETS}
    cells = json.loads((root / "out" / "06_qa_benchmarks.cells.json").read_text())["Table 2"]
    assert len(cells) == 12 and {c["anchor"] for c in cells} == {"table-2"}  # six methods × two benchmarks
    assert all(len(c["readings"]["ours, graded by rule"]) == 4 for c in cells)  # value, lo, hi, verdict
    v = result.values
    assert v["t2_rule_changes"].startswith("Graded by rule instead (TruthfulQA: ROUGE-L")
    assert v["pm_tfqa_verdict"] in ("reproduced", "not reproduced", "inconclusive") and v["pm_n_tfqa"] <= len(MODELS)
    # a tiny model's answers: no rule disputes them (the careful reading is their shared label, and says
    # so), or the disputed ones are not the labelled answers (the echo-aware rule stands in, and says so)
    words = v["trivia_careful_words"]
    assert ("None of this build's answers is disputed" in words if v["trivia_primary"].startswith("careful")
            else "the echo-aware rule is the primary TriviaQA label" in words), words


def test_the_figures_draw(ran) -> None:
    result, _ = ran
    figs = [qa.figure_lengths(result, TINY), qa.figure_roc(result, TINY), qa.figure_layers(result, TINY),
            qa.figure_scales(result, TINY), qa.figure_scale(result, TINY)]
    assert all(fig.axes for fig in figs)
    assert len(figs[1].axes) == len(MODELS) * len(qa.DATASETS)


def test_no_audit_labels_for_a_preview_build() -> None:
    tables = {(m, d): pd.DataFrame({"id": ["a", "b"]}) for m in MODELS for d in qa.DATASETS}
    labels = pd.DataFrame([{"model": "tiny-chat", "dataset": "triviaqa", "id": "a", "label": "correct",
                            "config": {"max_new_tokens": 32, "n_samples": 10, "seed": 0}}])
    assert qa.audit_labels_of(TINY, tables, labels).empty  # the paper edition's answers, not this build's
    same = labels.assign(config=[{"max_new_tokens": 6, "n_samples": 2, "seed": 0}])
    assert qa.audit_labels_of(TINY, tables, same)["id"].tolist() == ["a"]
    assert qa.audit_labels_of(TINY, tables, same.assign(id=["zz"])).empty  # a question this build did not ask


def test_reading_rows_and_words() -> None:
    entry = {"claim": "C7", "readings": [
        {"reading": "grader=no_echo, p=sequence, combined=sum", "values": {"C7a": [0.31, 0.2, 0.4], "C7c": [0.05, 0, 1]},
         "parts": {"C7a": "not reproduced", "C7c": "inconclusive"}, "verdict": "not reproduced", "primary": True},
        {"reading": "grader=exact, p=loss, combined=rank_mean", "values": {"C7a": [0.5, 0.45, 0.55],
                                                                         "C7c": [-0.1, -0.2, 0]},
         "parts": {"C7a": "reproduced", "C7c": "not reproduced"}, "verdict": "partly reproduced", "primary": False}]}
    rows = qa.reading_rows(entry, "triviaqa")
    assert rows["C7"].tolist() == ["no (primary)", "partly"]
    assert rows["C7a"].tolist() == ["0.310 (no)", "0.500 (yes)"]  # a level to three decimals
    assert rows["C7c"].tolist() == ["+0.050 (?)", "-0.100 (no)"]  # a difference with its sign
    assert rows["p"].tolist() == ["sequence", "loss"]
    assert qa.against(0.5, 0.4, 0.6, 0.63) == "above the interval"
    assert qa.against(0.5, np.nan, 0.6, 0.63) == "cannot be compared (no interval)"
    assert qa.chance_word(0.52, 0.7) == "better than chance" and qa.chance_word(0.3, 0.49) == "worse than chance"
    assert qa.chance_word(0.45, 0.55) == "not distinguishable from chance"
    assert qa.ci_text(0.1234, 0.5) == "[0.12, 0.50]" and qa.ci_text(np.nan, 1) == "—"
    assert qa.score_name("p_true") == "1 − P(True)" and qa.short("tiny-chat") == "tiny-chat"


def test_wide_table() -> None:
    long = pd.DataFrame({"model": ["A", "B", "A"], "dataset": ["TriviaQA"] * 3, "score": ["epistemic", "epistemic",
                                                                                           "p_true"],
                         "AUROC": [0.4, 0.6, 0.7]})
    lines = repr(qa.wide_table(long, "AUROC", ".3f", caption="AUROCs")).splitlines()
    assert lines[0] == "AUROCs" and lines[1].split("  ")[0] == "score"
    assert "TriviaQA · A" in lines[1] and "TriviaQA · B" in lines[1]
    assert lines[2].startswith("epistemic ‖∇p‖²") and "0.400" in lines[2] and "0.600" in lines[2]
    assert lines[3].startswith("1 − P(True)") and "0.700" in lines[3] and "—" in lines[3]  # B has no P(True)


def test_params() -> None:
    assert qa.Params.for_profile("full") == qa.Params()
    quick = qa.Params.for_profile("quick")
    assert (quick.n_truthfulqa, quick.n_triviaqa, quick.n_samples, quick.max_new_tokens,
            quick.compute_missing, quick.store_verify, quick.n_mc) == (12, 18, 3, 20, True, 2, 8)
    assert qa.Params().n_truthfulqa == 0 and qa.Params().compute_missing is False  # all questions, stored records
    with pytest.raises(ChapterError, match=r"models=\[\] must not be empty"):
        qa.Params(models=[])
    with pytest.raises(ChapterError, match="n_truthfulqa=-1 must be ≥ 0"):
        qa.Params(n_truthfulqa=-1)
    with pytest.raises(ChapterError, match="n_samples=0 must be ≥ 1"):
        qa.Params(n_samples=0)
    with pytest.raises(ChapterError, match="n_boot=10000000000 must be ≤ 1,000,000"):
        qa.Params(n_boot=10_000_000_000)
    with pytest.raises(ChapterError, match="torch_threads=100000 must be ≤"):
        qa.Params(torch_threads=100_000)
    with pytest.raises(ChapterError, match="embedding_judge=1 is a whole number"):
        qa.Params(embedding_judge=1)
    with pytest.raises(ChapterError, match=r"unknown parameter\(s\) n_questions"):
        qa.Params.resolve({}, {"n_questions": 3})
