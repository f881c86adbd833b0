"""gnuq_core.integrations.polygraph run by LM-Polygraph's own UEManager on a tiny Llama.

The estimates must be what `forward_backward` gives directly for the same prompt and greedy
answer, the calculator and estimators must load the way ``polygraph_eval`` loads them from
YAML (module path + ``load_stat_calculator`` / ``load_estimator``), and every value must be
"higher = more uncertain". Skipped where the ``polygraph`` extra is not installed.
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest

pytest.importorskip("lm_polygraph")

import numpy as np
import torch
from lm_polygraph import WhiteboxModel
from lm_polygraph.defaults.register_default_stat_calculators import register_default_stat_calculators
from lm_polygraph.estimators import MaximumSequenceProbability
from lm_polygraph.utils.builder_enviroment_stat_calculator import BuilderEnvironmentStatCalculator
from lm_polygraph.utils.dataset import Dataset
from lm_polygraph.utils.factory_estimator import FactoryEstimator
from lm_polygraph.utils.factory_stat_calculator import StatCalculatorContainer
from lm_polygraph.utils.manager import UEManager
from omegaconf import OmegaConf

from gnuq_core.estimators import from_log_p_and_grad_sq
from gnuq_core.integrations import polygraph as pg
from gnuq_core.lm.gradient import forward_backward
from tests.tiny_models import byte_tokenizer, tiny_llama

MODULE = "gnuq_core.integrations.polygraph"
PROMPTS = ["Hi", "What is 2+2?", "The capital of France is"]  # batch of 2: left padding in the first batch
GROUPS = ["all", "last_block"]
RTOL = 1e-5


@pytest.fixture(scope="module")
def wm() -> WhiteboxModel:
    tok = byte_tokenizer(chat=False)
    tok.padding_side = "left"
    return WhiteboxModel(tiny_llama(dtype=torch.float32), tok, model_path="tiny-llama")


@pytest.fixture(scope="module")
def run(wm):
    """UEManager over PROMPTS, with the calculator and estimators built as polygraph_eval builds them."""
    ours = StatCalculatorContainer(name="GradientNormCalculator", builder=MODULE,
                                   cfg=OmegaConf.create({"groups": GROUPS, "per_group": True}),
                                   stats=pg.STATS, dependencies=pg.DEPENDENCIES)
    calculators = register_default_stat_calculators("Whitebox", output_attentions=False,
                                                    output_hidden_states=False) + [ours]
    factory = FactoryEstimator()
    configs = [{"kind": k} for k in pg.ESTIMATORS] + [{"kind": k, "log10": False} for k in pg.ESTIMATORS
                                                        if k != "aleatoric"]
    configs += [{"kind": "epistemic", "group": "last_block", "log10": False},
                {"kind": "epistemic", "normalized": True, "log10": False}]
    estimators = [MaximumSequenceProbability()] + [factory(MODULE, OmegaConf.create(c)) for c in configs]
    man = UEManager(Dataset(PROMPTS, [""] * len(PROMPTS), batch_size=2), wm, estimators,
                    BuilderEnvironmentStatCalculator(wm), calculators, [], [], [], ignore_exceptions=False,
                    verbose=False, max_new_tokens=5, save_stats=pg.STATS)
    man()
    return man


def direct(wm, i: int, answer: list[int]):
    """forward_backward on the same prompt and answer, outside LM-Polygraph."""
    prompt = wm.tokenizer(PROMPTS[i], add_special_tokens=True)["input_ids"]
    gp = forward_backward(wm.model, prompt, answer, groups=GROUPS, per_group=True)
    return gp, from_log_p_and_grad_sq(math.fsum(gp.token_log_probs), gp.grad_sq)


def test_estimates_equal_the_direct_forward_backward_pass(wm, run) -> None:
    est = {name: np.array(v) for (_, name), v in run.estimations.items()}
    assert len(run.stats["greedy_tokens"]) == len(PROMPTS)
    for i, answer in enumerate(run.stats["greedy_tokens"]):
        gp, u = direct(wm, i, answer)
        assert run.stats["gnuq_token_log_probs"][i] == pytest.approx(gp.token_log_probs, rel=RTOL)
        assert run.stats["gnuq_grad_log_p_sq"][i] == pytest.approx(gp.grad_sq, rel=RTOL)
        assert run.stats["gnuq_group_sq"][i] == pytest.approx(gp.group_sq, rel=RTOL)
        expected = {
            "GnuqEpistemic(linear)": u.epistemic, "GnuqEpistemic": u.log10_epistemic,
            "GnuqAleatoric": u.aleatoric,
            "GnuqCombined(linear)": u.combined, "GnuqCombined": math.log10(u.combined),
            "GnuqGradLogPSq(linear)": gp.grad_sq, "GnuqGradLogPSq": math.log10(gp.grad_sq),
            "GnuqEpistemic(group=last_block, linear)": u.p ** 2 * gp.group_sq["last_block"],
            "GnuqEpistemic(normalized, linear)": math.exp(u.log_p / len(answer)) ** 2 * gp.grad_sq / len(answer) ** 2,
        }
        for name, value in expected.items():
            assert est[name][i] == pytest.approx(value, rel=RTOL), name
        # the same answer as LM-Polygraph's own MaximumSequenceProbability (-log p), up to padding numerics
        assert est["MaximumSequenceProbability"][i] == pytest.approx(-u.log_p, rel=1e-4)


def test_the_one_call_path_equals_the_direct_pass_and_needs_no_attention_setting(wm, run) -> None:
    from lm_polygraph.utils.generation_parameters import GenerationParameters

    model = WhiteboxModel(wm.model, wm.tokenizer, model_path="tiny-llama",
                          generation_parameters=GenerationParameters(max_new_tokens=5))
    assert model.model.config._attn_implementation == "sdpa"  # transformers' default: no attentions returned
    i = 2  # alone in its batch in `run`: no padding
    out = pg.estimate_uncertainty(model, pg.GnuqEpistemic(log10=False), PROMPTS[i])
    answer = run.stats["greedy_tokens"][i]
    _, u = direct(wm, i, answer)
    assert out.uncertainty == pytest.approx(u.epistemic, rel=RTOL)
    assert out.generation_tokens == list(answer[:-1]) and out.estimator == "GnuqEpistemic(linear)"
    with pytest.raises(TypeError, match="one prompt"):
        pg.estimate_uncertainty(model, pg.GnuqEpistemic(), PROMPTS)


def test_higher_is_more_uncertain(run) -> None:
    est = {name: np.array(v) for (_, name), v in run.estimations.items()}
    epi, ale, comb = est["GnuqEpistemic(linear)"], est["GnuqAleatoric"], est["GnuqCombined(linear)"]
    assert (epi > 0).all() and (ale > 0).all()
    np.testing.assert_allclose(comb, epi + ale, rtol=RTOL)
    for kind in ("GnuqEpistemic", "GnuqCombined", "GnuqGradLogPSq"):  # log10 keeps the order and the values
        np.testing.assert_allclose(est[kind], np.log10(est[f"{kind}(linear)"]), rtol=RTOL)
    bigger = pg.GnuqEpistemic(log10=False)
    stats = {"gnuq_token_log_probs": [[-1.0], [-1.0]], "gnuq_grad_log_p_sq": [1.0, 4.0]}
    lo, hi = bigger(stats)
    assert hi > lo  # same p, larger gradient: more epistemic uncertainty


def test_drop_eos_scores_the_answer_without_its_final_eos(wm) -> None:
    eos = wm.tokenizer.eos_token_id
    answer = [77, 78, eos]
    deps = {"greedy_tokens": [answer]}
    kept = pg.load_stat_calculator({})(deps, PROMPTS[:1], wm)
    dropped = pg.load_stat_calculator(OmegaConf.create({"drop_eos": True}))(deps, PROMPTS[:1], wm)
    prompt = wm.tokenizer(PROMPTS[0])["input_ids"]
    full, short = forward_backward(wm.model, prompt, answer), forward_backward(wm.model, prompt, answer[:2])
    assert kept["gnuq_log_p"][0] == pytest.approx(math.fsum(full.token_log_probs), rel=RTOL)
    assert dropped["gnuq_token_log_probs"][0] == pytest.approx(short.token_log_probs, rel=RTOL)
    assert dropped["gnuq_grad_log_p_sq"][0] == pytest.approx(short.grad_sq, rel=RTOL)


def test_loader_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="epistemic"):
        pg.load_estimator({"kind": "entropy"})
    with pytest.raises(ValueError, match="per_group=True"):
        pg.GnuqEpistemic(group="last_block")({"gnuq_token_log_probs": [[-1.0]], "gnuq_grad_log_p_sq": [1.0],
                                              "gnuq_group_sq": [{}]})
    assert str(pg.load_estimator({"kind": "combined", "group": "all", "normalized": True})) == \
        "GnuqCombined(group=all, normalized)"
    sc = pg.stat_calculator_container(per_group=True)
    assert (sc.builder, sc.stats, sc.dependencies) == (MODULE, pg.STATS, pg.DEPENDENCIES)


def test_the_docstring_yaml_loads_as_polygraph_eval_loads_it(wm) -> None:
    """The module docstring's YAML, turned into calculators and estimators the way polygraph_eval's
    get_stat_calculator_names / get_ue_methods do."""
    from lm_polygraph.utils.factory_stat_calculator import FactoryStatCalculator

    yaml_text = pg.__doc__.split("YAML (its loaders call this module's `load_stat_calculator` and\n"
                                 "`load_estimator`)::\n")[1].split("\n\nIn Python")[0]
    config = OmegaConf.create(yaml_text.replace("\n    ", "\n"))
    (entry,) = [c for c in config.stat_calculators if c != "auto"]
    sc = StatCalculatorContainer(name=entry.name, cfg=entry.cfg, stats=entry.stats,
                                 dependencies=entry.dependencies, builder=entry.builder)
    (calc,) = FactoryStatCalculator(BuilderEnvironmentStatCalculator(wm))([sc])
    assert isinstance(calc, pg.GradientNormCalculator) and calc.per_group and calc.groups == ["all", "last_block"]
    assert list(entry.stats) == pg.STATS and list(entry.dependencies) == pg.DEPENDENCIES
    factory = FactoryEstimator()
    names = [str(factory(e.name, e.cfg if "cfg" in e else {})) for e in config.estimators]
    assert names == ["GnuqEpistemic", "GnuqEpistemic(group=last_block)", "GnuqAleatoric"]


def test_the_calculator_keeps_rows_aligned(wm) -> None:
    """3 texts and 2 answers (or 1 and 2) used to give 2 (or 1) rows: now refused before any pass."""
    calc = pg.GradientNormCalculator()
    for texts, answers in ((PROMPTS, [[77], [78]]), (PROMPTS[:1], [[77], [78]])):
        with pytest.raises(ValueError, match=rf"{len(texts)} texts but {len(answers)} greedy_tokens"):
            calc({"greedy_tokens": answers}, texts, wm)
    with pytest.raises(ValueError, match="needs `greedy_tokens` from LM-Polygraph's `GreedyProbsCalculator`"):
        calc({}, PROMPTS[:1], wm)
    with pytest.raises(TypeError, match="texts is a single str"):
        calc({"greedy_tokens": [[77]]}, "Hi", wm)
    with pytest.raises(TypeError, match=r"greedy_tokens\[0\] is a str, not a list of token ids"):
        calc({"greedy_tokens": ["abc"]}, PROMPTS[:1], wm)
    with pytest.raises(TypeError, match="model is .* without .model: pass LM-Polygraph's WhiteboxModel"):
        calc({"greedy_tokens": [[77]]}, PROMPTS[:1], object())


def test_the_estimators_keep_rows_aligned() -> None:
    est = pg.GnuqEpistemic(log10=False)
    good = {"gnuq_token_log_probs": [[-1.0], [-2.0]], "gnuq_grad_log_p_sq": [1.0, 4.0]}
    assert len(est(good)) == 2
    with pytest.raises(ValueError, match="2 gnuq_token_log_probs but 3 gnuq_grad_log_p_sq"):
        est({**good, "gnuq_grad_log_p_sq": [1.0, 4.0, 9.0]})  # the extra entry used to be ignored
    with pytest.raises(ValueError, match="2 gnuq_token_log_probs but 2 gnuq_grad_log_p_sq but 3 greedy_tokens"):
        est({**good, "greedy_tokens": [[1], [2], [3]]})
    with pytest.raises(ValueError, match="needs `gnuq_grad_log_p_sq` from gnuq's `GradientNormCalculator`"):
        est({"gnuq_token_log_probs": [[-1.0]]})
    with pytest.raises(TypeError, match=r"gnuq_grad_log_p_sq\[0\]='1' is a str: pass a number"):
        est({"gnuq_token_log_probs": [[-1.0]], "gnuq_grad_log_p_sq": ["1"]})
    with pytest.raises(TypeError, match="stat gnuq_token_log_probs is a str"):
        est({"gnuq_token_log_probs": "ab", "gnuq_grad_log_p_sq": [1.0, 1.0]})


def test_unknown_options_are_named() -> None:
    with pytest.raises(ValueError, match="unknown option 'per_groups' in cfg; it accepts groups, per_group, ghost"):
        pg.load_stat_calculator({"per_groups": True})
    with pytest.raises(ValueError, match="kind='aleatoric'.*unknown option 'group'.*accepts normalized"):
        pg.load_estimator({"kind": "aleatoric", "group": "all"})
    with pytest.raises(ValueError, match="unknown ghost 'sometimes'"):
        pg.load_stat_calculator({"ghost": "sometimes"})
    with pytest.raises(TypeError, match="per_group='yes' is a str"):
        pg.GradientNormCalculator(per_group="yes")
