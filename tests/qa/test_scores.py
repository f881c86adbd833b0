"""gnuq_core.qa.scores: the one registry of uncertainty scores, and the consumers that read it."""

from __future__ import annotations

import ast
import copy
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gnuq_core.lm import baselines as bl
from gnuq_core.estimators import from_log_p_and_grad_sq, log10_combined, log10_epistemic
from gnuq_core.qa import scores
from gnuq_core.qa.auroc import auroc

ROOT = Path(__file__).resolve().parents[2]


def _record(unsure: bool) -> dict[str, Any]:
    """A record with every field a score reads; ``unsure`` makes every raw signal less certain:
    lower p, larger gradient, lower P(True), flatter next-token distributions, samples that
    disagree (four meanings instead of one) and are less probable."""
    log_p, grad_sq = (-0.7, 1e4) if unsure else (-0.02, 10.0)
    tok_lp = -2.0 if unsure else -0.05
    scale = 1e3 if unsure else 1.0
    return {
        "id": "x", "dataset": "triviaqa", "answer": "Paris",
        "generation": {"answer_ids": [11, 12], "token_log_probs": [log_p / 2, log_p / 2],
                       "token_entropies": [2.0, 3.0] if unsure else [0.1, 0.2], "stop_reason": "eos"},
        "log_p": log_p, "p_true": 0.2 if unsure else 0.9,
        "samples": [{"answer": f"a{i}", "answer_ids": [1, 2], "token_log_probs": [tok_lp, tok_lp],
                     "stop_log_prob": -0.1, "stop_reason": "eos", "cluster": i if unsure else 0} for i in range(4)],
        "grad_sq": grad_sq,
        "group_sq": {"embeddings": 5.0 * scale, "block 00": 3.0 * scale, "block 01": 2.0 * scale},
    }


@pytest.mark.parametrize("name", list(scores.SCORES))
def test_every_score_is_higher_when_less_certain(name):
    s = scores.get(name)
    assert s(_record(unsure=True)) > s(_record(unsure=False)), f"{name}: {scores.ORIENTATION} fails"


class _Traced(Mapping):
    """A read-only view of a record that notes the path of every field a score reads."""

    CONTAINERS = ("", "generation", "samples[]")

    def __init__(self, data: Mapping, path: str, seen: set[str]) -> None:
        self._d, self._path, self._seen = data, path, seen

    def _child(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def __getitem__(self, key: str) -> Any:
        path = self._child(key)
        self._seen.add(path)
        v = self._d[key]
        if path in self.CONTAINERS and isinstance(v, Mapping):
            return _Traced(v, path, self._seen)
        if f"{path}[]" in self.CONTAINERS:
            return [_Traced(x, f"{path}[]", self._seen) for x in v]
        return v

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)


def _containers(seen: set[str]) -> set[str]:
    return {p for p in seen if p not in ("generation", "samples")}


@pytest.mark.parametrize("name", list(scores.SCORES))
def test_fields_declared_are_the_fields_read(name):
    s = scores.get(name)
    seen: set[str] = set()
    s(_Traced(_record(unsure=True), "", seen))
    assert _containers(seen) == set(s.fields)


def _without(record: dict, field: str) -> dict:
    r = copy.deepcopy(record)
    head, _, leaf = field.rpartition(".")
    if head.endswith("[]"):
        for x in r[head[:-2]]:
            del x[leaf]
    elif head:
        del r[head][leaf]
    else:
        del r[leaf]
    return r


@pytest.mark.parametrize("name", list(scores.SCORES))
def test_a_missing_declared_field_is_a_key_error(name):
    s = scores.get(name)
    for field in s.fields:
        with pytest.raises(KeyError):
            s(_without(_record(unsure=True), field))
        assert math.isnan(scores.score_record(_without(_record(unsure=True), field), [name])[name])
        assert scores.score_record(_without(_record(unsure=True), field), [name], missing="skip") == {}


def test_every_score_is_declared_completely():
    for s in scores.SCORES.values():
        assert s.kind in scores.KINDS and s.label and s.citation and s.fields and s.passes, s.name
        assert s.passes[0] == "generate", s.name  # every pass runs on the greedy answer
    assert scores.names(claim=True) == ["epistemic", "aleatoric", "combined", "p_true", "max_seq_prob",
                                        "mean_token_entropy", "predictive_entropy", "ln_predictive_entropy",
                                        "semantic_entropy"]
    assert scores.names(needs="sample") == ["predictive_entropy", "ln_predictive_entropy", "semantic_entropy",
                                            "discrete_semantic_entropy"]
    negated = {s.name for s in scores.SCORES.values() if s.oriented.startswith("negated")}
    assert negated == {"p_true", "max_seq_prob"}
    with pytest.raises(KeyError, match="no score 'entropy'.*registered: epistemic"):
        scores.get("entropy")
    with pytest.raises(ValueError, match="unknown score kind"):
        scores.names(kind="baselines")
    with pytest.raises(KeyError, match="no score"):
        scores.score_record(_record(True), ["entropy"])


def _farquhar_reference(token_log_likelihoods: list[list[float]], semantic_ids: list[int]) -> float:
    """Semantic entropy as in Farquhar et al. (2024)'s code: length-normalised log-likelihoods
    (mean over tokens), ``logsumexp_by_id(..., agg="sum_normalized")``, then
    ``predictive_entropy_rao``; written with plain exp/log."""
    log_liks = [float(np.mean(x)) for x in token_log_likelihoods]
    total = np.log(np.sum(np.exp(log_liks)))
    per_id = []
    for uid in sorted(set(semantic_ids)):
        ll = np.array([log_liks[i] for i, x in enumerate(semantic_ids) if x == uid]) - total
        per_id.append(np.log(np.sum(np.exp(ll))))
    per_id = np.array(per_id)
    return float(-np.sum(np.exp(per_id) * per_id))


def test_semantic_entropy_matches_the_reference_formula():
    toks = [[-0.5, -0.5], [-1.0], [-0.2, -0.4, -0.6], [-3.0, -1.0]]
    ids = [0, 1, 0, 2]
    rec = {"samples": [{"token_log_probs": t, "answer_ids": list(range(len(t))), "stop_log_prob": -0.3,
                        "cluster": c} for t, c in zip(toks, ids)]}
    # by hand: the length-normalised probabilities exp(-0.5), exp(-1), exp(-0.4), exp(-2)
    w = {0: math.exp(-0.5) + math.exp(-0.4), 1: math.exp(-1.0), 2: math.exp(-2.0)}
    z = sum(w.values())
    by_hand = -sum(v / z * math.log(v / z) for v in w.values())
    se = scores.get("semantic_entropy")(rec)
    assert se == pytest.approx(by_hand, rel=1e-12)
    assert se == pytest.approx(_farquhar_reference(toks, ids), rel=1e-12)
    # discrete: cluster frequencies 1/2, 1/4, 1/4
    assert scores.get("discrete_semantic_entropy")(rec) == pytest.approx(1.5 * math.log(2))


def test_combined_is_overflow_safe_and_one_formula():
    assert log10_combined(400.0, 0.25) == pytest.approx(400.0)
    assert log10_combined(-400.0, 0.25) == pytest.approx(math.log10(0.25))
    assert log10_combined(-1.0, 0.0) == -1.0
    assert log10_combined(-math.inf, 0.25) == pytest.approx(math.log10(0.25))
    assert log10_epistemic(-1.0, 0.0) == -math.inf  # one underflow convention: the estimator's
    u = from_log_p_and_grad_sq(-0.7, 3.0)
    rec = {"log_p": -0.7, "grad_sq": 3.0}
    assert scores.get("combined")(rec) == pytest.approx(math.log10(u.combined), rel=1e-12)


def test_a_zero_gradient_ranks_below_every_other_score():
    rec = {"log_p": -0.7, "grad_sq": 0.0}  # a zero gradient: -inf, the estimator's one convention
    assert scores.get("epistemic")(rec) == -math.inf and scores.get("grad_log_p")(rec) == -math.inf
    assert auroc([1, 0, 1], [-math.inf, -1e9, 2.0]) == auroc([1, 0, 1], [-3.0, -2.0, 2.0])
    with pytest.raises(ValueError, match="score 1 is nan"):
        auroc([1, 0], [0.0, math.nan])


# ----------------------------------------------------------------------------- consumers


def test_score_table_has_exactly_the_registered_scores():
    from gnuq_core.qa import study
    from gnuq_core.qa.data import QAItem

    rec = _record(unsure=True)
    group_sq = rec.pop("group_sq")
    items = {"x": QAItem("x", "Capital of France?", ("Paris",), (), "triviaqa")}
    t = study.score_table([rec], items, group_norms={"x": group_sq})
    labels = {"id", "dataset", "question", "answer", "n_tokens", "stop_reason", "p", "log_p", "correct_contains",
              "correct_em", "correct_no_echo", "correct", "incorrect"}
    assert set(t.columns) - labels == set(scores.names())
    assert [c for c in t.columns if c in scores.SCORES] == scores.names()  # table order = registry order
    for name in scores.names():
        assert t.iloc[0][name] == pytest.approx(scores.get(name)({**rec, "group_sq": group_sq})), name


def test_semantic_entropy_has_one_formula_and_one_caller(monkeypatch):
    """Only lm/baselines.py defines it and only qa/scores.py calls it; the score table goes
    through it (records store no scores)."""
    from gnuq_core.qa import study
    from gnuq_core.qa.data import QAItem

    pattern = re.compile(r"\bsemantic_entropy\s*\(")
    hits = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gnuq_core").rglob("*.py") if pattern.search(p.read_text())}
    assert hits == {"gnuq_core/lm/baselines.py", "gnuq_core/qa/scores.py"}
    assert not re.search(r"def semantic_entropy", (ROOT / "gnuq_core/qa/scores.py").read_text())

    monkeypatch.setattr(bl, "semantic_entropy", lambda *a, **k: 42.0)
    rec = _record(unsure=True)
    assert scores.score_record(rec)["semantic_entropy"] == 42.0
    t = study.score_table([rec], {"x": QAItem("x", "q?", ("Paris",), (), "triviaqa")})
    assert t.iloc[0]["semantic_entropy"] == 42.0


def _notebook_lists(path: Path) -> list[list[str]]:
    """String lists of a notebook (Jupytext percent format is plain Python) that name a score."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.List) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                              for e in node.elts):
            vals = [e.value for e in node.elts]
            if any(v in scores.SCORES for v in vals):
                out.append(vals)
    return out


def test_chapter_06_reads_the_registry():
    module = ROOT / "gnuq_core" / "chapters" / "qa.py"  # what chapter 06 computes
    src = module.read_text()
    assert "scores.names(claim=True)" in src  # the methods C6 and C7 compare
    assert re.search(r"scores\.names\(kind=\(", src)  # the scores of the AUROC tables
    lists = _notebook_lists(module)
    assert lists, "the chapter names no score at all?"
    for vals in lists:  # every score a list names is registered (no stale or misspelt names)
        assert set(vals) <= set(scores.SCORES), set(vals) - set(scores.SCORES)


def test_claims_read_registered_names():
    import numpy as np
    import pandas as pd

    from gnuq_core.qa import headline
    from gnuq_core.repro import claims

    claim_names = scores.names(claim=True)
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(40), np.ones(40)]
    table = pd.DataFrame({"incorrect": y, **{m: rng.normal(size=y.size) for m in claim_names}})
    for claim, (_, name) in headline.CLAIM_SCORES.items():
        assert name in claim_names and headline.CLAIM_BEST[claim] in claim_names
        m = headline.auroc_measurement(claim, {"model": table}, {}, n_boot=50, seed=0)
        assert set(m.details["auroc"]) == set(claim_names)
        assert set(m.details["differences"]) == set(claim_names) - {headline.CLAIM_BEST[claim]}
        assert isinstance(claims.judge(m), str)


def test_an_empty_sample_counts_its_stop_token_as_the_reference_code_does():
    """Farquhar et al.'s code takes the stop token's likelihood (length 1) for an answer that
    stopped at once; a non-empty answer's log p is its tokens only (issue: empty sample had p = 1)."""
    samples = [{"token_log_probs": [], "answer_ids": [], "stop_log_prob": -2.5, "cluster": 0},
               {"token_log_probs": [-0.5, -0.5], "answer_ids": [7, 8], "stop_log_prob": -0.1, "cluster": 1}]
    rec = {"samples": samples}
    assert scores._sample_log_probs(rec) == [-2.5, -1.0]
    assert scores.get("predictive_entropy")(rec) == pytest.approx((2.5 + 1.0) / 2)
    assert scores.get("ln_predictive_entropy")(rec) == pytest.approx((2.5 / 1 + 1.0 / 2) / 2)
    w = [math.exp(-2.5), math.exp(-0.5)]
    z = sum(w)
    assert scores.get("semantic_entropy")(rec) == pytest.approx(-sum(v / z * math.log(v / z) for v in w))
