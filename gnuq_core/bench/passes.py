"""The timed passes: each one is a call of an engine function of `gnuq_core.lm` or `gnuq_core.qa`.

The benchmark never re-implements a pass; a `Pass` names the engine function and the
arguments it is called with, so that what is timed is what the QA study runs.

==========================  =========================================================================
pass                        engine function
==========================  =========================================================================
``generate``                `gnuq_core.lm.decoding.generate`: the greedy answer (KV cache)
``forward``                 `gnuq_core.lm.gradient.answer_log_probs`: one no-grad forward over
                            prompt + answer, LM head at the answer positions only (the floor unit)
``gradient``                `gnuq_core.lm.gradient.forward_backward`: log p and ‖∇θ log p‖² over
                            all parameters
``gradient_<group>``        the same over fewer parameters (``no_embeddings``, ``last_block``,
                            ``lm_head``)
``backward_floor``          `gnuq_core.lm.floor.activation_backward`: the forward with autograd and
                            the backward into the activations only, no parameter gradient and no
                            norm: the least any exact gradient-norm pass costs
``backward_floor_grams``    the same with the ghost norms' Gram matrices of the decoder's linear
                            layers formed as the gradient pass forms them, and nothing else:
                            splits what the gradient pass costs above the floor into the Gram
                            products and the rest
``reference``               `gnuq_core.lm.gradient.reference_pass`: the deliberately plain path
                            (full-vocabulary logits at every position, an ordinary backward
                            into every parameter's gradient) that the engine avoids
``sample``                  `gnuq_core.lm.decoding.sample_answers`: N temperature samples
``decode``                  `gnuq_core.lm.decoding.decode` where the engine has it: the greedy
                            answer and N samples from one prefill
``cluster``                 `gnuq_core.lm.clustering`: meaning clusters of the N samples
``p_true``                  `gnuq_core.lm.baselines.p_true`: zero-shot P(True), one forward (as the
                            QA engine runs it)
``p_true_reference``        `gnuq_core.lm.baselines.p_true` on the question with the N samples as
                            brainstormed candidates (the reference implementation's prompt)
``sample_sequential``       `gnuq_core.lm.decoding.sample_answers` called N times for one answer
                            each (a prefill per answer, no shared batch), as reference code
                            samples for semantic entropy
``nli_check``               `gnuq_core.lm.entailment.EntailmentClusterer.check`: one comparison of
                            the reference entailment loop (two forwards of a DeBERTa-large-MNLI-
                            sized cross-encoder, random weights: same cost)
``p_true_fewshot``          `gnuq_core.lm.baselines.p_true` on the reference implementation's
                            few-shot prompt (worked examples, then the question with the samples
                            and the greedy answer as brainstormed candidates)
==========================  =========================================================================

The last three (``BenchConfig.reference``, text models; synthetic ones time only the
sequential sampling) are the baselines as their reference implementations run them; each
takes seconds to tens of seconds on a CPU, so they are timed once per question (``BenchConfig.timed_once``),
and the entailment comparison and few-shot P(True) only on the first
``BenchConfig.reference_questions`` questions of each dataset (0: all). Of the N sequential
samples, the first ``BenchConfig.sequential_timed`` are timed (0: all N), and their time
× N / ``sequential_timed`` stands for all N (``scaled`` says so in each record): the calls
are alike (one prefill, one answer each), so the sum is estimated without bias. The
reference semantic entropy clusters with as many entailment comparisons as its loop makes
for the samples' clusters (`gnuq_core.lm.entailment.reference_comparisons`), so each round
also records the derived ``nli_cluster`` = ``nli_check`` × that count (:data:`DERIVED`).

Synthetic-question models (no text tokenizer) time the two P(True) passes as
`gnuq_core.lm.gradient.answer_log_probs` over random ids as long as the P(True) prompt,
with a one-token answer: the same single forward with the head at one position.

`time_questions` runs every pass ``repeats`` times per question, in a fresh random order
each repeat, so that drift in machine load hits every pass alike.
"""

from __future__ import annotations

import functools
import inspect
import tempfile
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.bench import clock
from gnuq_core.bench.config import FLOOR_SPLIT, GRAD_GROUPS, BenchConfig
from gnuq_core.bench.questions import Question, limits, prepare_question
from gnuq_core.bench.subjects import Subject
from gnuq_core.lm import decoding, gradient
from gnuq_core.lm.baselines import p_true
from gnuq_core.lm.clustering import EmbeddingClusterer, get_clusterer, minilm_dir
from gnuq_core.lm.decoding import generate, sample_answers
from gnuq_core.lm.entailment import EntailmentClusterer, random_nli_model
from gnuq_core.lm.floor import activation_backward, linear_input_groups, norm_multiply_adds

__all__ = ["Pass", "make_passes", "time_questions", "floor_rounds", "clusterer_for", "nli_clusterer", "beyond_reference_questions",
           "REQUIRED", "ENGINE_PASSES", "DERIVED"]

# Passes that cannot be skipped: the estimator, the floor and the baselines.
REQUIRED = ("generate", "forward", "gradient", "sample", "cluster", "p_true")
# The QA engine's timing keys (`gnuq_core.qa.engine.evaluate_question`, the registry's
# ``Score.passes``) -> the pass here that runs the same engine function.
ENGINE_PASSES = {"generate": "generate", "gradient": "gradient", "p_true": "p_true", "sample": "sample",
                 "cluster": "cluster", "group_gradient": "gradient"}
# Reference passes that ``BenchConfig.reference_questions`` limits to the first questions of
# each dataset (their cost is tens of seconds), and passes not worth a warm-up run (tens of
# seconds; the code they run is warmed by ``sample`` and ``p_true``).
NOT_EVERY_QUESTION = ("nli_check", "p_true_fewshot")
COLD = ("sample_sequential", "p_true_fewshot")
# Per-round costs derived from a timed pass: name -> (timed pass, Question attribute it is multiplied by).
DERIVED = {"nli_cluster": ("nli_check", "nli_comparisons")}


@dataclass(frozen=True)
class Pass:
    """One timed call of an engine function: ``func(*args, **kwargs)``.

    Attributes
    ----------
    name : str
    func : callable
        The engine function (its ``__module__`` is in `gnuq_core.lm` or `gnuq_core.qa`).
    args : tuple
    kwargs : dict
    seed_kw : str or None
        Keyword that takes a seed: repeat ``r`` adds ``1000 * r`` to it (fresh samples).
    calls : int
        Calls the timed cost stands for (one answer at a time: call ``i`` adds ``i`` to the
        seed); the results come back as one list.
    timed_calls : int
        Calls a run makes, the first ``timed_calls`` of ``calls`` (0: all); its time × `scale`
        stands for all ``calls`` (`time_questions` scales it).
    """

    name: str
    func: Callable[..., Any]
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    seed_kw: str | None = None
    calls: int = 1
    timed_calls: int = 0

    @property
    def runs(self) -> int:
        """Calls one run makes."""
        return min(self.timed_calls, self.calls) if self.timed_calls else self.calls

    @property
    def scale(self) -> float:
        """``calls / runs``: what a run's time is multiplied by to stand for all ``calls``."""
        return self.calls / self.runs

    def __call__(self, rep: int = 0) -> Any:
        kw = dict(self.kwargs)
        if self.seed_kw is not None:
            kw[self.seed_kw] = kw.get(self.seed_kw, 0) + 1000 * rep
        if self.calls == 1:
            return self.func(*self.args, **kw)
        out: list[Any] = []
        for i in range(self.runs):
            call_kw = {**kw, self.seed_kw: kw[self.seed_kw] + i} if self.seed_kw is not None else kw
            out.extend(self.func(*self.args, **call_kw))
        return out

    @property
    def function(self) -> str:
        """Dotted name of the engine function (``module.qualname``)."""
        f = self.func
        name = getattr(f, "__qualname__", None) or type(f).__qualname__
        return f"{self.module}.{name}"

    @property
    def module(self) -> str:
        """Module of the engine function (of the class, for a callable object such as a clusterer)."""
        f = self.func
        return getattr(f, "__module__", None) or type(f).__module__


def clusterer_for(name: str, threshold: float = 0.85) -> tuple[Any, str]:
    """The engine's clusterer ``name`` (`gnuq_core.lm.clustering.get_clusterer`) and what it is.

    Where the MiniLM package is missing, the embedding clusterer runs on a randomly
    initialised encoder of MiniLM's architecture and size (same cost, meaningless
    clusters), so that timings can still be taken.
    """
    if name != "embedding":
        return get_clusterer(name, threshold), name
    try:
        minilm_dir()
        return get_clusterer(name, threshold), "minilm"
    except (ModuleNotFoundError, FileNotFoundError):
        return EmbeddingClusterer(threshold, model_dir=_random_minilm_dir()), "minilm-architecture, random weights"


@functools.cache
def _random_minilm_dir() -> str:
    """A folder with a randomly initialised BERT of all-MiniLM-L6-v2's size and a word-level
    tokenizer (built once per process)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = Path(tempfile.mkdtemp(prefix="gnuq-minilm-"))
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(30517)]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(words), hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                         intermediate_size=1536)).save_pretrained(folder)
    return str(folder)


def nli_clusterer(tokenizer: Any, architecture: str = "deberta-large-mnli") -> Any:
    """The reference entailment clusterer (`gnuq_core.lm.entailment.EntailmentClusterer`) on a
    randomly initialised cross-encoder of ``architecture``: the pair is encoded with the
    subject's tokenizer (ids folded into the cross-encoder's vocabulary, CLS/SEP framed), so
    its length is a BPE tokenizer's, as DeBERTa's would be."""
    model = random_nli_model(architecture)  # built once per process
    vocab = model.config.vocab_size

    def encode(premise: str, hypothesis: str) -> list[int]:
        a, b = (tokenizer(t, add_special_tokens=False)["input_ids"] for t in (premise, hypothesis))
        return [1] + [5 + i % (vocab - 5) for i in a] + [2] + [5 + i % (vocab - 5) for i in b] + [2]

    return EntailmentClusterer(model, encode)


def _decode_pass(subject: Subject, q: Question, config: BenchConfig, cap: int, nl: bool) -> Pass | None:
    """The one-prefill greedy + samples pass, if `gnuq_core.lm.decoding` has ``decode``."""
    fn = getattr(decoding, "decode", None)
    if fn is None:
        return None
    params = inspect.signature(fn).parameters
    kw: dict[str, Any] = {"max_new_tokens": cap, "stop_at_newline": nl, "temperature": config.temperature,
                          "seed": config.seed}
    n_key = next((k for k in ("n_samples", "n") if k in params), None)
    if n_key is None or not all(k in params for k in kw):
        return None
    kw[n_key] = config.n_samples
    return Pass("decode", fn, (subject.model, subject.tokenizer, q.prompt_ids), kw, seed_kw="seed")


def make_passes(subject: Subject, q: Question, config: BenchConfig, clusterer: Any = None,
                include: tuple[str, ...] | None = None) -> dict[str, Pass]:
    """The timed passes of one prepared question, ``{name: Pass}`` (see the module docstring).

    Every pass is self-contained (its inputs were prepared beforehand), so the passes can
    run in any order.
    """
    m, tok = subject.model, subject.tokenizer
    cap, nl = limits(subject, config)
    pa = (m, q.prompt_ids, q.answer_ids)
    passes = [
        Pass("generate", generate, (m, tok, q.prompt_ids), {"max_new_tokens": cap, "stop_at_newline": nl}),
        Pass("forward", gradient.answer_log_probs, pa),
        Pass("backward_floor", activation_backward, pa),
        Pass("backward_floor_grams", activation_backward, pa, {"with_grams": True}),
        Pass("gradient", gradient.forward_backward, pa),
        *(Pass(f"gradient_{g}", gradient.forward_backward, pa, {"groups": g}) for g in GRAD_GROUPS),
        Pass("reference", gradient.reference_pass, pa, {"groups": None, "per_group": False}),
        Pass("sample", sample_answers, (m, tok, q.prompt_ids, config.n_samples),
             {"temperature": config.temperature, "max_new_tokens": cap, "stop_at_newline": nl, "seed": config.seed},
             seed_kw="seed"),
    ]
    dec = _decode_pass(subject, q, config, cap, nl)
    if dec is not None:
        passes.append(dec)
    if subject.synthetic:
        passes += [Pass("p_true", gradient.answer_log_probs, (m, q.p_true_1pass_ids[:-1], q.p_true_1pass_ids[-1:])),
                   Pass("p_true_reference", gradient.answer_log_probs, (m, q.p_true_ids[:-1], q.p_true_ids[-1:]))]
    else:
        answer = q.answer or "(empty)"
        passes += [Pass("p_true", p_true, (m, tok, q.text, answer), {"style": subject.style}),
                   Pass("p_true_reference", p_true, (m, tok, q.p_true_question, answer), {"style": subject.style})]
    if clusterer is not None:
        passes.append(Pass("cluster", clusterer, (list(q.sample_texts),)))
    if config.reference:
        passes.append(Pass("sample_sequential", sample_answers, (m, tok, q.prompt_ids, 1),
                           {"temperature": config.temperature, "max_new_tokens": cap, "stop_at_newline": nl,
                            "seed": config.seed}, seed_kw="seed", calls=config.n_samples,
                           timed_calls=config.sequential_timed))
        if not subject.synthetic:
            if len(q.nli_pair) == 2:
                passes.append(Pass("nli_check", nli_clusterer(tok, config.nli_architecture).check, tuple(q.nli_pair)))
            passes.append(Pass("p_true_fewshot", p_true, (m, tok, q.p_true_fewshot_question, answer),
                               {"style": subject.style}))
    out = {p.name: p for p in passes}
    if include is not None:
        out = {k: v for k, v in out.items() if k in include}
    return out


def _prompt_tokens(subject: Subject, text: str) -> int:
    """Tokens of ``text`` under the subject's tokenizer (0 without one or without text)."""
    if not text or subject.tokenizer is None:
        return 0
    return len(subject.tokenizer(text, add_special_tokens=False)["input_ids"])


def beyond_reference_questions(q: Question, questions: list[Question], config: BenchConfig) -> bool:
    """Whether ``q`` is past the first ``config.reference_questions`` of its dataset (0: none is)."""
    if not config.reference_questions:
        return False
    same = [x.id for x in questions if x.dataset == q.dataset]
    return same.index(q.id) >= config.reference_questions


def floor_rounds(passes: dict[str, Pass], config: BenchConfig, rng: np.random.Generator,
                 device: str) -> dict[str, dict[str, list[float]]]:
    """``config.floor_rounds`` more rounds of the passes of :data:`FLOOR_SPLIT` (each round in a
    fresh random order), wall and CPU seconds: ``{"floor_times": {pass: [...]},
    "floor_cpu_times": {...}}``, empty where the rounds are off or ``passes`` lacks one of them."""
    if not config.floor_rounds or not set(FLOOR_SPLIT) <= set(passes):
        return {}
    wall: dict[str, list[float]] = {k: [] for k in FLOOR_SPLIT}
    cpu: dict[str, list[float]] = {k: [] for k in FLOOR_SPLIT}
    for r in range(config.floor_rounds):
        for name in rng.permutation(list(FLOOR_SPLIT)):
            _, sec, c = clock.timed_cpu(functools.partial(passes[name], config.repeats + r), device)
            wall[name].append(sec)
            cpu[name].append(c)
    return {"floor_times": wall, "floor_cpu_times": cpu}


def time_questions(subject: Subject, questions: list[Question], config: BenchConfig, clusterer: Any = None,
                   progress: bool = True) -> list[dict[str, Any]]:
    """Time every pass ``config.repeats`` times per question, in a fresh random order each
    repeat; the first question's passes run once untimed first (warm-up). A pass that makes
    fewer calls than it stands for (`Pass.scale`) has its time scaled up (``scaled``).

    Returns one record per question: ``times`` and ``cpu_times`` (``{pass: [seconds per
    repeat]}``, wall and process CPU), the gradient pass split into forward / backward /
    post (`clock.BackwardSplit`), and the lengths involved. A pass of ``config.timed_once`` runs in
    the first repeat only and its time is repeated for the others (``timed_once``); the
    costs of :data:`DERIVED` are added per repeat (``derived``: how). ``multiply_adds``: the
    matrix products of one forward and of the gradient pass's norm beyond its floor, counted
    from the shapes (`gnuq_core.lm.floor.norm_multiply_adds`; nothing timed). ``floor_times``
    and ``floor_cpu_times``: the extra rounds of `floor_rounds`.
    """
    from tqdm.auto import tqdm

    rng = np.random.default_rng(config.seed)
    drop = set(config.skip) - set(REQUIRED)
    out = []
    warmed = False
    layer_groups = linear_input_groups(subject.model)
    for q in tqdm(questions, desc=f"{subject.spec} timing", disable=not progress):
        prepare_question(subject, q, config, clusterer)
        passes = {k: v for k, v in make_passes(subject, q, config, clusterer).items() if k not in drop}
        if beyond_reference_questions(q, questions, config):
            passes = {k: v for k, v in passes.items() if k not in NOT_EVERY_QUESTION}
        if not warmed:
            for name, p in passes.items():
                if name not in COLD:
                    p(0)
            warmed = True
        times: dict[str, list[float]] = {k: [] for k in passes}
        cpu_times: dict[str, list[float]] = {k: [] for k in passes}
        split: dict[str, list[float]] = {"forward": [], "backward": [], "post": []}
        sample_tokens: list[list[int]] = []
        for rep in range(config.repeats):
            for name in rng.permutation(list(passes)):
                run = passes[name]
                if name in config.timed_once and rep > 0:
                    times[name].append(times[name][0])
                    cpu_times[name].append(cpu_times[name][0])
                    continue
                if name == "gradient":
                    with clock.BackwardSplit(subject.device) as s:
                        _, sec, cpu = clock.timed_cpu(functools.partial(run, rep), subject.device)
                    for k, v in s.parts.items():
                        split[k].append(v)
                else:
                    res, sec, cpu = clock.timed_cpu(functools.partial(run, rep), subject.device)
                    if name == "sample":
                        sample_tokens.append([len(s_.answer_ids) for s_ in res])
                times[name].append(sec * run.scale)
                cpu_times[name].append(cpu * run.scale)
        floor = floor_rounds(passes, config, rng, subject.device)
        derived = {}
        for name, (timed, attr) in DERIVED.items():
            if timed in times:
                k = getattr(q, attr)
                times[name] = [t * k for t in times[timed]]
                cpu_times[name] = [t * k for t in cpu_times[timed]]
                derived[name] = f"{timed} × {k} ({attr})"
        out.append({"id": q.id, "dataset": q.dataset, "prompt_tokens": len(q.prompt_ids),
                    "answer_tokens": len(q.answer_ids), "answer": q.answer, "sample_tokens": q.sample_tokens,
                    "sample_tokens_timed": sample_tokens, "times": times, "cpu_times": cpu_times,
                    "gradient_split": split, **floor,
                    "functions": {**{k: p.function for k, p in passes.items()},
                                  **{k: passes[DERIVED[k][0]].function for k in derived}},
                    "timed_once": [k for k in config.timed_once if k in passes], "derived": derived,
                    "scaled": {k: f"{p.runs} of {p.calls} calls timed, × {p.scale:g}" for k, p in passes.items()
                               if p.scale != 1},
                    "nli_comparisons": q.nli_comparisons,
                    "multiply_adds": norm_multiply_adds(subject.model, q.prompt_ids, q.answer_ids, groups=layer_groups),
                    "p_true_fewshot_tokens": _prompt_tokens(subject, q.p_true_fewshot_question)})
    return out
