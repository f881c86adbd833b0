"""Efficiency benchmark: the gradient-norm estimator against its baselines and the physical floor.

``python -m gnuq_core.bench --out bench/results.json`` (``make bench``) times, per model
and per question, with the methods interleaved in a fresh random order each repeat (so
that drift in machine load hits all of them alike):

========================  ===============================================================
pass                      what it runs
========================  ===============================================================
``generate``              greedy answer (KV cache), shared by every method
``forward``               one no-grad forward over prompt + answer, LM head at the answer
                          positions only (`gnuq_core.lm.gradient.answer_log_probs`): the floor
``forward_full``          the same forward with the full-sequence LM head (plain HF call)
``gradnorm``              `gnuq_core.lm.gradient.forward_backward` over all parameters, split
                          into forward / backward / post-backward (`timing.BackwardSplit`)
``gradnorm_<group>``      the cheaper variants: ``no_embeddings``, ``last_block``,
                          ``lm_head``
``naive``                 textbook full gradient: full logits, ``loss.backward()`` into
                          ``.grad``, then the sum of squares (what the engine avoids)
``sample``                N temperature samples, batched with a KV cache
                          (`gnuq_core.lm.decoding.sample_answers`)
``cluster``               semantic clustering of the N samples (MiniLM embeddings)
``p_true``                P(True) forward on the reference prompt (question, brainstormed
                          candidate answers = the samples, proposed answer)
``p_true_1pass``          the engine's zero-shot P(True) prompt without candidates
========================  ===============================================================

Method costs are sums of passes: predictive entropy = sample; semantic entropy = sample +
cluster; P(True) as in its reference implementation = sample + p_true (the candidates
are samples); the estimator = gradnorm. Speed-ups are paired per question (baseline time
/ estimator time), summarised by their median with a bootstrap CI over questions.

Peak memory is measured in a separate process on CPU (`gnuq_core.bench.clock.exact_cpu_memory`
makes RSS follow the tensors; it slows allocation, so it never runs while timing) and with
CUDA allocator statistics on a GPU. Further: cost against answer and prompt length
(random token ids of controlled length), against model size (a ladder of random Llama
configs), and a torch.profiler table of one gradient-norm pass.

Model specs: an alias or path for `gnuq_core.lm.models.load_model`; ``tiny-llama`` (a
2-layer random Llama with a byte tokenizer: real questions, fast); ``random:<arch>`` with
arch in `RANDOM_ARCHS` (random weights at the real architectures' sizes, with synthetic
token-id questions of realistic length: for machines without the weights, e.g. the GPU
script ``scripts/gpu_bench.sh``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gnuq_core.bench import clock as timing

__all__ = ["BenchConfig", "Subject", "Question", "RANDOM_ARCHS", "load_subject", "build_questions", "make_passes",
           "time_questions", "method_costs", "summarize_model", "length_sweep", "size_ladder", "memory_profile", "memory_profiles",
           "profile_ops", "run", "targets", "c8_measurement", "format_table", "main"]

SCHEMA = 1
GRAD_GROUPS = ("no_embeddings", "last_block", "lm_head")
TARGET_GRAD_OVER_FORWARD = 3.5
TARGET_MEMORY_FRACTION = 0.5
PAPER_SPEEDUP = (46.0, 107.0)
# Methods (sums of passes). The estimator first, then the baselines; "sampling" marks those
# that need N samples (C8 is judged against the fastest of them).
METHODS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "gradnorm": (("gradnorm",), False, "gradient norm (all parameters)"),
    "gradnorm_no_embeddings": (("gradnorm_no_embeddings",), False, "gradient norm, embeddings excluded"),
    "gradnorm_last_block": (("gradnorm_last_block",), False, "gradient norm, last block only"),
    "gradnorm_lm_head": (("gradnorm_lm_head",), False, "gradient norm, LM head only"),
    "naive": (("naive",), False, "gradient norm, textbook full .grad"),
    "predictive_entropy": (("sample",), True, "predictive entropy (N samples)"),
    "semantic_entropy": (("sample", "cluster"), True, "semantic entropy (N samples + clustering)"),
    "p_true": (("sample", "p_true"), True, "P(True), reference (N candidates + 1 forward)"),
    "p_true_1pass": (("p_true_1pass",), False, "P(True), one zero-shot forward"),
    "forward": (("forward",), False, "one no-grad forward (floor unit)"),
    "generate": (("generate",), False, "greedy generation (shared by all)"),
}


# --------------------------------------------------------------------------- configuration


@dataclass
class BenchConfig:
    """Everything that changes what the benchmark measures (stored in the JSON).

    Attributes
    ----------
    models : list[str]
        Model specs (see module docstring).
    datasets : list[str]
        QA datasets for text models (synthetic models get synthetic questions).
    n_questions : int
        Questions per dataset (a fixed, seeded choice).
    repeats : int
        Timed repeats of every pass per question (interleaved).
    n_samples : int
        N for the sampling baselines (semantic entropy uses N = 10 in the paper).
    max_new_tokens : int
        Cap on generated and sampled tokens.
    temperature : float
    clusterer : str
        ``"embedding"`` (MiniLM) or ``"exact"``.
    synthetic_prompt : tuple[int, int]
        Prompt-length range of synthetic questions (random models).
    synthetic_answer : int
        Answer / sample length cap for random models (they rarely stop by themselves).
    answer_lengths, prompt_lengths : list[int]
        Sweeps of cost against length (empty: skip).
    sweep_repeats : int
    ladder : list[list[int]]
        ``[hidden, layers]`` of random Llama models for the size ladder (empty: skip).
    ladder_repeats : int
    memory : bool
        Measure peak memory.
    memory_repeats : int
    profile : bool
        Record a torch.profiler table of one gradient-norm pass per model.
    skip : list[str]
        Timed passes to leave out (e.g. ``["naive", "forward_full"]`` to save time; the
        estimator, the floor and the baselines cannot be skipped).
    device : str
    dtype : str
    threads : int or None
        ``torch.set_num_threads`` during the benchmark (None: torch's default).
    seed : int
    """

    models: list[str] = field(default_factory=lambda: ["smollm2-135m-instruct", "gemma3-270m"])
    datasets: list[str] = field(default_factory=lambda: ["truthfulqa", "triviaqa"])
    n_questions: int = 5
    repeats: int = 3
    n_samples: int = 10
    max_new_tokens: int = 32
    temperature: float = 1.0
    clusterer: str = "embedding"
    synthetic_prompt: tuple[int, int] = (40, 130)
    synthetic_answer: int = 12
    answer_lengths: list[int] = field(default_factory=lambda: [4, 8, 16, 32, 64])
    prompt_lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256, 512])
    sweep_repeats: int = 3
    ladder: list[list[int]] = field(default_factory=lambda: [[64, 2], [128, 4], [256, 8], [384, 12]])
    ladder_repeats: int = 3
    memory: bool = True
    memory_repeats: int = 2
    profile: bool = True
    skip: list[str] = field(default_factory=list)
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None
    seed: int = 0


# --------------------------------------------------------------------------- subjects


class IdTokenizer:
    """Tokenizer stand-in for random models: token ids are their own text (``"w17 w4"``)."""

    chat_template = None
    unk_token_id = None

    def __init__(self, eos_token_id: int) -> None:
        self.eos_token_id = eos_token_id

    def get_vocab(self) -> dict[str, int]:
        return {}

    def convert_tokens_to_ids(self, token: str) -> None:
        return None

    def convert_ids_to_tokens(self, i: int) -> str:
        return f"w{int(i)}"

    def decode(self, ids: Any, skip_special_tokens: bool = True) -> str:
        return " ".join(f"w{int(i)}" for i in ids)


def _byte_tokenizer() -> Any:
    """Byte-level tokenizer with a chat template, built in memory (ids 0-4 special)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<bos>", "<eos>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   additional_special_tokens=specials[3:])
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


def _llama_config(hidden: int, layers: int, vocab: int = 49152, **kw: Any) -> Any:
    from transformers import LlamaConfig

    heads = max(1, hidden // 64)
    return LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=int(hidden * 8 / 3) // 8 * 8,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 3),
                       head_dim=hidden // heads, max_position_embeddings=kw.pop("ctx", 8192), tie_word_embeddings=True,
                       pad_token_id=kw.pop("pad", 2), bos_token_id=1, eos_token_id=2, **kw)


def _smollm2_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                       num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, pad_token_id=2,
                       bos_token_id=1, eos_token_id=2)


def _gemma3_config() -> Any:
    from transformers import Gemma3TextConfig

    return Gemma3TextConfig(vocab_size=262144, hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                            num_attention_heads=4, num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256,
                            max_position_embeddings=32768, sliding_window=512, rms_norm_eps=1e-6,
                            tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=1)


def _llama1b_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                       num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True, pad_token_id=128004,
                       bos_token_id=128000, eos_token_id=128001)


RANDOM_ARCHS: dict[str, Callable[[], Any]] = {
    "smollm2-135m": _smollm2_config,  # SmolLM2-135M-Instruct's config (Llama)
    "gemma3-270m": _gemma3_config,  # Gemma-3-270M's config
    "llama-1b": _llama1b_config,  # Llama-3.2-1B's config
    "tiny": lambda: _llama_config(32, 2, vocab=512, ctx=2048, pad=0),
}


@dataclass
class Subject:
    """A model under test.

    Attributes
    ----------
    spec : str
        What was asked for.
    model, tokenizer
    style : str
        Prompt style (``"chat"``/``"fewshot"``) for text models, ``"ids"`` for synthetic.
    synthetic : bool
        Questions are random token ids (random-weight models of real architectures).
    params : int
        Distinct parameter elements.
    device : str
    load_seconds : float
    """

    spec: str
    model: Any
    tokenizer: Any
    style: str
    synthetic: bool
    params: int
    device: str
    load_seconds: float = 0.0

    @property
    def vocab(self) -> int:
        return int(self.model.get_input_embeddings().weight.shape[0])


def _random_model(config: Any, device: str, dtype: str, seed: int) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return model.eval()


def load_subject(spec: str, device: str = "cpu", dtype: str = "float32", seed: int = 0) -> Subject:
    """Load a model spec (alias/path, ``tiny-llama``, ``random:<arch>``, ``ladder:<hidden>x<layers>``)."""
    started = time.perf_counter()
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if spec == "tiny-llama":
        tok = _byte_tokenizer()
        cfg = _llama_config(32, 2, vocab=len(tok), ctx=4096, pad=0)
        model = _random_model(cfg, device, dtype, seed)
        style, synthetic = "chat", False
    elif spec.startswith("random:"):
        arch = spec.split(":", 1)[1]
        if arch not in RANDOM_ARCHS:
            raise ValueError(f"unknown random architecture {arch!r}; use one of {', '.join(RANDOM_ARCHS)}")
        model = _random_model(RANDOM_ARCHS[arch](), device, dtype, seed)
        tok, style, synthetic = IdTokenizer(int(model.config.eos_token_id)), "ids", True
    elif spec.startswith("ladder:"):
        hidden, layers = (int(x) for x in spec.split(":", 1)[1].split("x"))
        model = _random_model(_llama_config(hidden, layers), device, dtype, seed)
        tok, style, synthetic = IdTokenizer(2), "ids", True
    else:
        from gnuq_core.lm.models import load_model

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lm = load_model(spec, device=device, dtype=dtype)
        model, tok, style, synthetic = lm.model, lm.tokenizer, lm.prompt_style, False
    return Subject(spec, model, tok, style, synthetic, timing.num_parameters(model), device,
                   time.perf_counter() - started)


# --------------------------------------------------------------------------- questions


@dataclass
class Question:
    """One benchmark question, ready to time.

    Attributes
    ----------
    id, dataset, text : str
    prompt_ids, answer_ids : list[int]
        The formatted prompt and the greedy answer.
    answer : str
    p_true_ids : list[int]
        Reference P(True) prompt: question, brainstormed candidates (the N samples),
        proposed answer.
    p_true_1pass_ids : list[int]
        Zero-shot P(True) prompt without candidates (as `gnuq_core.lm.baselines.p_true`).
    true_false : tuple[int, int]
        Token ids of "True" / "False" as the model would write them.
    sample_texts : list[str]
        The N samples (clustering input).
    sample_tokens : list[int]
        Their lengths.
    """

    id: str
    dataset: str
    text: str
    prompt_ids: list[int]
    answer_ids: list[int] = field(default_factory=list)
    answer: str = ""
    p_true_ids: list[int] = field(default_factory=list)
    p_true_1pass_ids: list[int] = field(default_factory=list)
    true_false: tuple[int, int] = (0, 1)
    sample_texts: list[str] = field(default_factory=list)
    sample_tokens: list[int] = field(default_factory=list)


def _pick(n_total: int, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(n_total, size=min(n, n_total), replace=False).tolist())


def _p_true_text_ids(subject: Subject, question: str, answer: str, candidates: list[str] | None) -> list[int]:
    """Token ids of the P(True) prompt, built as `gnuq_core.lm.baselines.p_true` builds it; with
    ``candidates`` the question carries the brainstormed answers, as in the reference
    implementation (Kadavath et al. 2022; Farquhar et al. 2024's ``p_true.py``)."""
    from gnuq_core.lm.prompts import encode_prompt, format_prompt, p_true_question

    q = question
    if candidates:
        q = question.strip() + "\nBrainstormed answers:\n" + "\n".join(c if c else "(empty)" for c in candidates)
    text = p_true_question(q, answer)
    if subject.style == "chat":
        return encode_prompt(subject.tokenizer, format_prompt(subject.tokenizer, text, "chat", brief=False), "chat")
    return encode_prompt(subject.tokenizer, f"{text}\nAnswer:", subject.style)


def _true_false_ids(subject: Subject) -> tuple[int, int]:
    if subject.synthetic:
        return 3, 4
    words = ("True", "False") if subject.style == "chat" else (" True", " False")
    t, f = (subject.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in words)
    return int(t), int(f)


def build_questions(subject: Subject, config: BenchConfig, data_dir: str | None = None) -> list[Question]:
    """The fixed question set: seeded choice of ``n_questions`` per dataset (text models),
    or synthetic prompts of realistic length (random models). Prompts only; the answers
    and samples are filled in by `prepare_question`."""
    from gnuq_core.lm.prompts import encode_prompt, format_prompt

    out: list[Question] = []
    if subject.synthetic:
        rng = np.random.default_rng(config.seed)
        lo, hi = config.synthetic_prompt
        for i in range(config.n_questions * max(1, len(config.datasets))):
            n = int(rng.integers(lo, hi + 1))
            ids = rng.integers(5, subject.vocab, size=n).tolist()
            out.append(Question(f"syn_{i}", "synthetic", f"<{n} random tokens>", ids))
        return out
    from gnuq_core.qa.data import load_qa

    for k, ds in enumerate(config.datasets):
        items = load_qa(ds, data_dir=data_dir)
        for j in _pick(len(items), config.n_questions, config.seed + k):
            it = items[j]
            ids = encode_prompt(subject.tokenizer, format_prompt(subject.tokenizer, it.question, subject.style),
                                subject.style)
            out.append(Question(it.id, ds, it.question, ids))
    return out


def _limits(subject: Subject, config: BenchConfig) -> tuple[int, bool]:
    cap = config.synthetic_answer if subject.synthetic else config.max_new_tokens
    return cap, subject.style == "fewshot"


def prepare_question(subject: Subject, q: Question, config: BenchConfig, clusterer: Any = None) -> Question:
    """Greedy answer, N samples (seed = config.seed) and the P(True) prompts of ``q`` (untimed)."""
    from gnuq_core.lm.decoding import generate, sample_answers

    cap, nl = _limits(subject, config)
    gen = generate(subject.model, subject.tokenizer, q.prompt_ids, max_new_tokens=cap, stop_at_newline=nl)
    q.answer_ids, q.answer = list(gen.answer_ids), gen.answer
    samples = sample_answers(subject.model, subject.tokenizer, q.prompt_ids, config.n_samples,
                             temperature=config.temperature, max_new_tokens=cap, stop_at_newline=nl, seed=config.seed)
    q.sample_texts = [s.answer for s in samples]
    q.sample_tokens = [len(s.answer_ids) for s in samples]
    q.true_false = _true_false_ids(subject)
    if subject.synthetic:
        rng = np.random.default_rng(config.seed + 1)
        extra = 25  # instruction words around question and answer
        n_ref = len(q.prompt_ids) + sum(q.sample_tokens) + len(q.sample_tokens) + 2 * len(q.answer_ids) + extra
        n_one = len(q.prompt_ids) + len(q.answer_ids) + extra
        q.p_true_ids = rng.integers(5, subject.vocab, size=n_ref).tolist()
        q.p_true_1pass_ids = rng.integers(5, subject.vocab, size=n_one).tolist()
    else:
        q.p_true_ids = _p_true_text_ids(subject, q.text, q.answer or "(empty)", q.sample_texts)
        q.p_true_1pass_ids = _p_true_text_ids(subject, q.text, q.answer or "(empty)", None)
    return q


# --------------------------------------------------------------------------- passes


def _up(x: Any) -> Any:
    """Half-precision logits to float32 for the softmax; float32/float64 stay as they are."""
    import torch

    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _p_true_forward(model: Any, ids: list[int], true_false: tuple[int, int]) -> float:
    """P(True) from one no-grad forward (last position only), as `gnuq_core.lm.baselines.p_true`."""
    import torch

    dev = next(model.parameters()).device
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], device=dev), use_cache=False, logits_to_keep=1).logits[0, -1]
    lp = torch.log_softmax(logits.double(), -1)
    return float(1.0 / (1.0 + math.exp(float(lp[true_false[1]] - lp[true_false[0]]))))


def _forward_full(model: Any, prompt_ids: list[int], answer_ids: list[int]) -> float:
    import torch

    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
    n_p = len(prompt_ids)
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0, n_p - 1:-1]
        return float(torch.log_softmax(_up(logits), -1).gather(1, ids[0, n_p:, None]).sum())


def naive_grad_sq(model: Any, prompt_ids: list[int], answer_ids: list[int]) -> float:
    """Textbook ``||grad log p||^2``: full logits, ``backward()`` into ``.grad``, sum of squares.

    What a first implementation does; it holds one full gradient (plus the full-vocabulary
    logits of every position). ``requires_grad`` flags and ``.grad`` are restored.
    """
    import torch

    params = list(dict.fromkeys(model.parameters()))
    flags = [p.requires_grad for p in params]
    saved = [p.grad for p in params]
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
    n_p = len(prompt_ids)
    try:
        for p in params:
            p.requires_grad_(True)
            p.grad = None
        with torch.enable_grad():
            logits = model(input_ids=ids, use_cache=False).logits[0, n_p - 1:-1]
            log_p = torch.log_softmax(_up(logits), -1).gather(1, ids[0, n_p:, None]).sum()
            log_p.backward()
        total = sum(float(torch.linalg.vector_norm(p.grad, dtype=torch.float64) ** 2) for p in params
                    if p.grad is not None)
    finally:
        for p, f, g in zip(params, flags, saved):
            p.grad = g
            p.requires_grad_(f)
    return total


def make_passes(subject: Subject, q: Question, config: BenchConfig, clusterer: Any = None,
                include: tuple[str, ...] | None = None) -> dict[str, Callable[[int], Any]]:
    """Timed passes of one question: ``{name: fn(rep)}``; ``rep`` seeds the sampler.

    Every pass is self-contained (its inputs were prepared beforehand), so the passes can
    run in any order.
    """
    from gnuq_core.lm.gradient import answer_log_probs, forward_backward
    from gnuq_core.lm.decoding import generate, sample_answers

    m, tok = subject.model, subject.tokenizer
    cap, nl = _limits(subject, config)
    passes: dict[str, Callable[[int], Any]] = {
        "generate": lambda r: generate(m, tok, q.prompt_ids, max_new_tokens=cap, stop_at_newline=nl),
        "forward": lambda r: answer_log_probs(m, q.prompt_ids, q.answer_ids),
        "forward_full": lambda r: _forward_full(m, q.prompt_ids, q.answer_ids),
        "gradnorm": lambda r: forward_backward(m, q.prompt_ids, q.answer_ids),
        "naive": lambda r: naive_grad_sq(m, q.prompt_ids, q.answer_ids),
        "sample": lambda r: sample_answers(m, tok, q.prompt_ids, config.n_samples, temperature=config.temperature,
                                           max_new_tokens=cap, stop_at_newline=nl, seed=config.seed + 1000 * r),
        "p_true": lambda r: _p_true_forward(m, q.p_true_ids, q.true_false),
        "p_true_1pass": lambda r: _p_true_forward(m, q.p_true_1pass_ids, q.true_false),
    }
    for g in GRAD_GROUPS:
        passes[f"gradnorm_{g}"] = (lambda grp: lambda r: forward_backward(m, q.prompt_ids, q.answer_ids,
                                                                          groups=grp))(g)
    if clusterer is not None:
        passes["cluster"] = lambda r: clusterer(q.sample_texts)
    if include is not None:
        passes = {k: v for k, v in passes.items() if k in include}
    return passes


def _pass_names(config: BenchConfig) -> tuple[str, ...]:
    return ("generate", "forward", "forward_full", "gradnorm", *(f"gradnorm_{g}" for g in GRAD_GROUPS), "naive",
            "sample", "cluster", "p_true", "p_true_1pass")


def time_questions(subject: Subject, questions: list[Question], config: BenchConfig, clusterer: Any = None,
                   progress: bool = True) -> list[dict[str, Any]]:
    """Time every pass ``config.repeats`` times per question, in a fresh random order each
    repeat; the first question's passes run once untimed first (warm-up)."""
    from tqdm.auto import tqdm

    rng = np.random.default_rng(config.seed)
    out = []
    warmed = False
    for q in tqdm(questions, desc=f"{subject.spec} timing", disable=not progress):
        prepare_question(subject, q, config, clusterer)
        keep = set(config.skip) - {"gradnorm", "forward", "generate", "sample", "cluster", "p_true", "p_true_1pass"}
        passes = {k: v for k, v in make_passes(subject, q, config, clusterer).items() if k not in keep}
        if not warmed:
            for fn in passes.values():
                fn(0)
            warmed = True
        times: dict[str, list[float]] = {k: [] for k in passes}
        cpu_times: dict[str, list[float]] = {k: [] for k in passes}
        split: dict[str, list[float]] = {"forward": [], "backward": [], "post": []}
        sample_tokens: list[list[int]] = []
        for rep in range(config.repeats):
            for name in rng.permutation(list(passes)):
                if name == "gradnorm":
                    with timing.BackwardSplit(subject.device) as s:
                        _, sec, cpu = timing.timed_cpu(lambda: passes[name](rep), subject.device)
                    for k, v in s.parts.items():
                        split[k].append(v)
                else:
                    res, sec, cpu = timing.timed_cpu(lambda: passes[name](rep), subject.device)
                    if name == "sample":
                        sample_tokens.append([len(s_.answer_ids) for s_ in res])
                times[name].append(sec)
                cpu_times[name].append(cpu)
        out.append({"id": q.id, "dataset": q.dataset, "prompt_tokens": len(q.prompt_ids),
                    "answer_tokens": len(q.answer_ids), "answer": q.answer,
                    "p_true_tokens": len(q.p_true_ids), "sample_tokens": q.sample_tokens,
                    "sample_tokens_timed": sample_tokens, "times": times, "cpu_times": cpu_times,
                    "gradnorm_split": split})
    return out


# --------------------------------------------------------------------------- summaries


def method_costs(record: dict[str, Any], clock: str = "wall") -> dict[str, float]:
    """Per-question cost of each method (median over repeats of each pass, summed);
    ``clock`` is ``"wall"`` (seconds) or ``"cpu"`` (process CPU seconds)."""
    med = {k: float(np.median(v)) for k, v in record["times" if clock == "wall" else "cpu_times"].items() if v}
    return {m: sum(med[p] for p in parts) for m, (parts, _, _) in METHODS.items() if all(p in med for p in parts)}


def summarize_model(records: list[dict[str, Any]], seed: int = 0, clock: str = "wall") -> dict[str, Any]:
    """Medians with IQR per method, ratios (paired per question) with bootstrap CIs, on
    the ``"wall"`` or ``"cpu"`` clock."""
    costs = [method_costs(r, clock) for r in records]
    key = "times" if clock == "wall" else "cpu_times"
    methods = [m for m in METHODS if all(m in c for c in costs)]
    per = {m: [c[m] for c in costs] for m in methods}
    table = {m: timing.summary(per[m]) for m in methods}
    split = {k: timing.summary([float(np.median(r["gradnorm_split"][k])) for r in records if r["gradnorm_split"][k]])
             for k in ("forward", "backward", "post")}
    grad = per["gradnorm"]
    gen = per.get("generate")
    ratios: dict[str, Any] = {"gradnorm_over_forward": timing.ratio_summary(grad, per["forward"], seed=seed)}
    if all("forward_full" in r[key] for r in records):
        ff = [float(np.median(r[key]["forward_full"])) for r in records]
        ratios["gradnorm_over_forward_full"] = timing.ratio_summary(grad, ff, seed=seed)
    for g in GRAD_GROUPS:
        if f"gradnorm_{g}" in per:
            ratios[f"gradnorm_{g}_over_forward"] = timing.ratio_summary(per[f"gradnorm_{g}"], per["forward"], seed=seed)
    ratios["naive_over_gradnorm"] = timing.ratio_summary(per["naive"], grad, seed=seed) if "naive" in per else None
    speedup: dict[str, Any] = {}
    for m, (_, sampling, _) in METHODS.items():
        if m in per and (sampling or m == "p_true_1pass"):
            speedup[m] = timing.ratio_summary(per[m], grad, seed=seed)
            if gen:
                speedup[m]["with_generation"] = timing.ratio_summary(
                    [a + b for a, b in zip(per[m], gen)], [a + b for a, b in zip(grad, gen)], seed=seed)
    sampling = [m for m in speedup if METHODS[m][1]]
    fastest = min(sampling, key=lambda m: table[m]["median"]) if sampling else None
    return {"costs": table, "per_question": per, "gradnorm_split": split, "ratios": ratios, "speedup": speedup,
            "fastest_sampling_baseline": fastest}


def _lengths(n: int, vocab: int, rng: np.random.Generator) -> list[int]:
    return rng.integers(5, vocab, size=n).tolist()


def length_sweep(subject: Subject, config: BenchConfig, prompt_ids: list[int] | None = None,
                 progress: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Forward and gradient-norm time against answer length (prompt fixed) and against
    prompt length (answer of 8 tokens), random token ids, passes interleaved."""
    from tqdm.auto import tqdm

    from gnuq_core.lm.gradient import answer_log_probs, forward_backward

    rng = np.random.default_rng(config.seed + 7)
    base_prompt = list(prompt_ids) if prompt_ids else _lengths(64, subject.vocab, rng)
    jobs = [("answer", L, base_prompt, _lengths(L, subject.vocab, rng)) for L in config.answer_lengths]
    jobs += [("prompt", P, _lengths(P, subject.vocab, rng), _lengths(8, subject.vocab, rng))
             for P in config.prompt_lengths]
    out: dict[str, list[dict[str, Any]]] = {"answer": [], "prompt": []}
    m = subject.model
    if jobs:
        answer_log_probs(m, jobs[0][2], jobs[0][3])
        forward_backward(m, jobs[0][2], jobs[0][3])
    for kind, n, p_ids, a_ids in tqdm(jobs, desc=f"{subject.spec} lengths", disable=not progress):
        t: dict[str, list[float]] = {"forward": [], "gradnorm": []}
        for _ in range(config.sweep_repeats):
            for name in rng.permutation(["forward", "gradnorm"]):
                fn = answer_log_probs if name == "forward" else forward_backward
                t[name].append(timing.timed(lambda: fn(m, p_ids, a_ids), subject.device)[1])
        out[kind].append({"tokens": n, "prompt_tokens": len(p_ids), "answer_tokens": len(a_ids),
                          "forward": float(np.median(t["forward"])), "gradnorm": float(np.median(t["gradnorm"])),
                          "forward_runs": t["forward"], "gradnorm_runs": t["gradnorm"]})
    return out


def size_ladder(config: BenchConfig, progress: bool = True) -> list[dict[str, Any]]:
    """Forward and gradient-norm time of random Llama models of growing size (64-token
    prompt, 8-token answer), interleaved; one entry per ``[hidden, layers]``."""
    from tqdm.auto import tqdm

    from gnuq_core.lm.gradient import answer_log_probs, forward_backward

    out = []
    rng = np.random.default_rng(config.seed + 11)
    for hidden, layers in tqdm(config.ladder, desc="size ladder", disable=not progress):
        sub = load_subject(f"ladder:{hidden}x{layers}", config.device, config.dtype, config.seed)
        p, a = _lengths(64, sub.vocab, rng), _lengths(8, sub.vocab, rng)
        answer_log_probs(sub.model, p, a)
        forward_backward(sub.model, p, a)
        t: dict[str, list[float]] = {"forward": [], "gradnorm": []}
        for _ in range(config.ladder_repeats):
            for name in rng.permutation(["forward", "gradnorm"]):
                fn = answer_log_probs if name == "forward" else forward_backward
                t[name].append(timing.timed(lambda: fn(sub.model, p, a), sub.device)[1])
        f, g = float(np.median(t["forward"])), float(np.median(t["gradnorm"]))
        out.append({"hidden": hidden, "layers": layers, "params": sub.params, "forward": f, "gradnorm": g,
                    "ratio": g / f, "forward_runs": t["forward"], "gradnorm_runs": t["gradnorm"]})
        del sub
    return out


# --------------------------------------------------------------------------- memory


MEMORY_PASSES = ("forward", "forward_grad", "gradnorm", *(f"gradnorm_{g}" for g in GRAD_GROUPS), "naive",
                 "generate", "sample", "p_true")


def _forward_grad(model: Any, prompt_ids: list[int], answer_ids: list[int]) -> None:
    """A grad-enabled forward (full logits, graph kept until the end): what training-style
    code holds before its backward."""
    import torch

    params = list(dict.fromkeys(model.parameters()))
    flags = [p.requires_grad for p in params]
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(answer_ids)], device=dev)
    n_p = len(prompt_ids)
    try:
        for p in params:
            p.requires_grad_(True)
        with torch.enable_grad():
            logits = model(input_ids=ids, use_cache=False).logits[0, n_p - 1:-1]
            log_p = torch.log_softmax(_up(logits), -1).gather(1, ids[0, n_p:, None]).sum()
        del log_p, logits
    finally:
        for p, f in zip(params, flags):
            p.requires_grad_(f)


def memory_in_process(subject: Subject, q: Question, config: BenchConfig) -> dict[str, Any]:
    """Peak extra memory of each pass of question ``q`` (``timing.measure_peak``), here."""
    passes = make_passes(subject, q, config, None)
    passes["forward_grad"] = lambda r: _forward_grad(subject.model, q.prompt_ids, q.answer_ids)
    out: dict[str, Any] = {}
    for i, name in enumerate(MEMORY_PASSES):  # one warm-up (the first pass) absorbs one-time allocations
        out[name] = timing.measure_peak(lambda: passes[name](0), subject.device, config.memory_repeats, warmup=i == 0)
    return out


def _memory_worker(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Child-process side of `memory_profiles` (CPU): exact RSS, then per model: load,
    measure, report (one process for all models, so torch is imported once)."""
    import torch

    exact = timing.exact_cpu_memory()
    config = BenchConfig(**payload["config"])
    if config.threads:
        torch.set_num_threads(int(config.threads))
    out = []
    for job in payload["jobs"]:
        sub = load_subject(job["spec"], config.device, config.dtype, config.seed)
        q = Question(**{**job["question"], "true_false": tuple(job["question"]["true_false"])})
        res = memory_in_process(sub, q, config)
        out.append({"passes": res, "exact_cpu_memory": exact, "params": sub.params,
                    "gradient_bytes": timing.gradient_bytes(sub.model)})
        del sub, q, res
    return out


def _memory_summary(raw: dict[str, Any], q: Question) -> dict[str, Any]:
    p = raw["passes"]
    grad_b = raw["gradient_bytes"]
    peak = {k: v["peak_bytes"] for k, v in p.items()}
    return {**raw, "peak_bytes": peak, "method": next(iter(p.values()))["method"] if p else "",
            "question": q.id, "prompt_tokens": len(q.prompt_ids), "answer_tokens": len(q.answer_ids),
            "gradnorm_over_gradient": peak["gradnorm"] / grad_b,
            "gradnorm_over_forward_grad": peak["gradnorm"] / max(peak["forward_grad"], 1.0),
            "naive_over_gradient": peak["naive"] / grad_b}


def memory_profiles(jobs: list[tuple[Subject, Question]], config: BenchConfig) -> list[dict[str, Any]]:
    """Peak extra memory per pass for each ``(subject, question)``, and the ratios the
    targets need (extra peak / fp32 gradient size, / grad-enabled forward).

    CPU: in one child process (``python -m gnuq_core.bench --memory-worker``) with
    `timing.exact_cpu_memory`; CUDA: in this process with the allocator's statistics.
    """
    if config.device.startswith("cuda"):
        raws = [{"passes": memory_in_process(s, q, config), "exact_cpu_memory": None, "params": s.params,
                 "gradient_bytes": timing.gradient_bytes(s.model)} for s, q in jobs]
    else:
        payload = {"config": asdict(config), "jobs": [{"spec": s.spec, "question": asdict(q)} for s, q in jobs]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(payload, f)
        env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error", "PYTHONWARNINGS": "ignore"}
        try:
            proc = subprocess.run([sys.executable, "-m", "gnuq_core.bench", "--memory-worker", f.name],
                                  capture_output=True, text=True, env=env, timeout=3600)
        finally:
            os.unlink(f.name)
        if proc.returncode != 0:
            raise RuntimeError(f"memory worker failed ({', '.join(s.spec for s, _ in jobs)}):\n{proc.stderr[-3000:]}")
        raws = json.loads(proc.stdout.strip().splitlines()[-1])
    return [_memory_summary(r, q) for r, (_, q) in zip(raws, jobs)]


def memory_profile(subject: Subject, q: Question, config: BenchConfig) -> dict[str, Any]:
    """`memory_profiles` for one model."""
    return memory_profiles([(subject, q)], config)[0]


# --------------------------------------------------------------------------- profiler


@contextlib.contextmanager
def _quiet_stderr_fd() -> Any:
    """Send file descriptor 2 to /dev/null for the block (the profiler's C++ layer prints
    start/stop lines there, which would land in a notebook as stderr output)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def profile_ops(subject: Subject, q: Question, top: int = 12) -> dict[str, Any]:
    """torch.profiler of one forward and one gradient-norm pass: the top operators by
    self time (CPU or CUDA), to see where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    from gnuq_core.lm.gradient import answer_log_probs, forward_backward

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if subject.device.startswith("cuda") else [])
    key = "self_cuda_time_total" if subject.device.startswith("cuda") else "self_cpu_time_total"
    out = {}
    for name, fn in (("forward", answer_log_probs), ("gradnorm", forward_backward)):
        fn(subject.model, q.prompt_ids, q.answer_ids)
        with _quiet_stderr_fd(), profile(activities=acts) as prof:
            fn(subject.model, q.prompt_ids, q.answer_ids)
            timing.sync(subject.device)
        ev = prof.key_averages()
        rows = sorted(ev, key=lambda e: getattr(e, key, 0), reverse=True)[:top]
        out[name] = {"total_us": float(sum(getattr(e, key, 0) for e in ev)),
                     "ops": [{"op": e.key, "self_us": float(getattr(e, key, 0)), "calls": int(e.count)}
                             for e in rows]}
    return out


# --------------------------------------------------------------------------- driver


def _git() -> dict[str, Any]:
    try:
        from gnuq_core.repro.provenance import git_state

        return git_state()
    except Exception:  # noqa: BLE001 - outside the repository (GPU machine without git)
        return {"commit": "unknown", "dirty": None}


def environment(device: str) -> dict[str, Any]:
    """Machine, versions and commit for the results file."""
    import torch

    info = {"platform": platform.platform(), "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "device": device,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    try:
        import psutil

        info["memory_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
        info["load_average"] = list(os.getloadavg())
    except (ImportError, OSError):
        pass
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for pkg in ("transformers", "numpy"):
        try:
            versions[pkg] = __import__(pkg).__version__
        except ImportError:
            pass
    return {"machine": info, "versions": versions, "git": _git()}


def _clusterer(config: BenchConfig) -> tuple[Any, str]:
    from gnuq_core.lm.clustering import EmbeddingClusterer, exact_match_clusters, minilm_dir

    if config.clusterer == "exact":
        return exact_match_clusters, "exact"
    try:
        minilm_dir()
        return EmbeddingClusterer(), "minilm"
    except (ModuleNotFoundError, FileNotFoundError):
        return EmbeddingClusterer(model_dir=_random_minilm_dir()), "minilm-architecture, random weights"


def _random_minilm_dir() -> str:
    """A folder with a randomly initialised BERT of all-MiniLM-L6-v2's size and a word-level
    tokenizer, for machines without the MiniLM package (same cost, meaningless clusters)."""
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


def run(config: BenchConfig, *, data_dir: str | None = None, progress: bool = True,
        log: Callable[[str], None] | None = None,
        checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the whole benchmark; returns the JSON-ready results dict.

    ``checkpoint(results)`` is called after each model (and at the end) with the results
    so far, so that a run stopped by a time limit still leaves its finished models.
    """
    import torch

    started = time.time()
    say = log or (lambda s: None)
    res: dict[str, Any] = {"schema": SCHEMA, "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                           "config": asdict(config), "models": {}}
    try:  # "Loading weights" progress bars would land in a notebook as stderr output
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass
    with timing.torch_threads(config.threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res.update(environment(config.device))
        clusterer, cname = _clusterer(config)
        res["clusterer"] = cname
        mem_jobs: list[tuple[Subject, Question]] = []
        for spec in config.models:
            say(f"[bench] {spec}: loading")
            sub = load_subject(spec, config.device, config.dtype, config.seed)
            qs = build_questions(sub, config, data_dir)
            recs = time_questions(sub, qs, config, clusterer, progress)
            entry: dict[str, Any] = {"params": sub.params, "gradient_bytes": timing.gradient_bytes(sub.model),
                                     "style": sub.style, "synthetic": sub.synthetic, "load_seconds": sub.load_seconds,
                                     "architecture": type(sub.model).__name__, "questions": recs,
                                     "summary": summarize_model(recs, config.seed),
                                     "summary_cpu": summarize_model(recs, config.seed, "cpu")}
            rep = sorted(qs, key=lambda q: len(q.prompt_ids))[len(qs) // 2]  # median-length prompt
            if config.answer_lengths or config.prompt_lengths:
                say(f"[bench] {spec}: length sweep")
                entry["sweeps"] = length_sweep(sub, config, rep.prompt_ids, progress)
            if config.profile:
                entry["profile"] = profile_ops(sub, rep)
            if config.memory:
                mem_jobs.append((Subject(spec, None, None, sub.style, sub.synthetic, sub.params, sub.device), rep))
            res["models"][spec] = entry
            del sub
            if checkpoint:
                checkpoint({**res, "targets": targets(res), "partial": True})
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        if mem_jobs:
            say("[bench] memory")
            if config.device.startswith("cuda"):  # in-process: reload each model
                mem_jobs = [(load_subject(s.spec, config.device, config.dtype, config.seed), q) for s, q in mem_jobs]
            for (s, _), m in zip(mem_jobs, memory_profiles(mem_jobs, config)):
                res["models"][s.spec]["memory"] = m
            mem_jobs.clear()
        if config.ladder:
            say("[bench] size ladder")
            res["ladder"] = size_ladder(config, progress)
    res["targets"] = targets(res)
    res["wall_seconds"] = time.time() - started
    return res


def targets(res: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, per model: measured value, threshold and met/missed."""
    out: dict[str, Any] = {}
    for spec, e in res["models"].items():
        s = e["summary"]
        r = s["ratios"]["gradnorm_over_forward"]
        t: dict[str, Any] = {"gradnorm_over_forward": {
            "value": r["median"], "ci": r["ci"], "threshold": TARGET_GRAD_OVER_FORWARD,
            "met": bool(r["median"] <= TARGET_GRAD_OVER_FORWARD)}}
        if "memory" in e:
            v = e["memory"]["gradnorm_over_gradient"]
            t["extra_memory_over_gradient"] = {"value": v, "threshold": TARGET_MEMORY_FRACTION,
                                               "met": bool(v <= TARGET_MEMORY_FRACTION)}
        fb = s["fastest_sampling_baseline"]
        if fb:
            sp = s["speedup"][fb]
            t["speedup_vs_fastest_sampling"] = {"baseline": fb, "value": sp["median"], "ci": sp["ci"],
                                                "paper": list(PAPER_SPEEDUP),
                                                "within_paper_range": bool(sp["median"] >= PAPER_SPEEDUP[0])}
        out[spec] = t
    return out


def c8_measurement(res: dict[str, Any], settings: dict[str, Any] | None = None) -> Any:
    """C8's `gnuq_core.repro.claims.Measurement`: median speed-up over the fastest sampling
    baseline, over all (model, question) pairs, bootstrap CI; details per model."""
    from gnuq_core.repro.claims import Measurement

    vals: list[float] = []
    details: dict[str, Any] = {}
    for spec, e in res["models"].items():
        s = e["summary"]
        fb = s["fastest_sampling_baseline"]
        if not fb:
            continue
        vals += s["speedup"][fb]["values"]
        details[spec] = {"baseline": fb, "median": s["speedup"][fb]["median"], "ci": s["speedup"][fb]["ci"],
                         "semantic_entropy": s["speedup"].get("semantic_entropy", {}).get("median"),
                         "p_true": s["speedup"].get("p_true", {}).get("median")}
    value = float(np.median(vals))
    lo, hi = timing.bootstrap_ci(vals, seed=res["config"].get("seed", 0))
    return Measurement("C8", value, (min(lo, value), max(hi, value)),
                       settings={"device": res["config"]["device"], "models": list(res["models"]),
                                 "n_samples": res["config"]["n_samples"], **(settings or {})},
                       details=details)


def _f(x: float, unit: str = "") -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.3g}{unit}"


def format_table(res: dict[str, Any]) -> str:
    """Plain-text table of median costs (IQR) and ratios (95% CI) per model."""
    lines = []
    for spec, e in res["models"].items():
        s = e["summary"]
        lines.append(f"== {spec}  ({e['params'] / 1e6:.1f}M parameters, {len(e['questions'])} questions, "
                     f"{res['config']['repeats']} repeats, device {res['config']['device']})")
        lines.append(f"  {'method':<48s} {'median s':>9s}  {'IQR':>17s}")
        for m, c in s["costs"].items():
            lines.append(f"  {METHODS[m][2]:<48s} {c['median']:9.4f}  [{c['q25']:.4f}, {c['q75']:.4f}]")
        sp = s["gradnorm_split"]
        lines.append(f"  gradient-norm split: forward {_f(sp['forward']['median'], ' s')}, backward "
                     f"{_f(sp['backward']['median'], ' s')}, post {_f(sp['post']['median'], ' s')}")
        for k, r in s["ratios"].items():
            if r:
                lines.append(f"  {k:<48s} {r['median']:9.2f}x  CI [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]  "
                             f"IQR [{r['q25']:.2f}, {r['q75']:.2f}]")
        for k, r in s["speedup"].items():
            extra = f"  (with generation {r['with_generation']['median']:.2f}x)" if "with_generation" in r else ""
            lines.append(f"  speed-up vs {k:<36s} {r['median']:9.2f}x  CI [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]{extra}")
        if "memory" in e:
            mem = e["memory"]
            lines.append(f"  peak extra memory (MB, {mem['method']}): " + ", ".join(
                f"{k} {v / 1e6:.0f}" for k, v in mem["peak_bytes"].items()))
            lines.append(f"  gradnorm extra peak / fp32 gradient {mem['gradnorm_over_gradient']:.3f} (target <= "
                         f"{TARGET_MEMORY_FRACTION}); / grad-enabled forward {mem['gradnorm_over_forward_grad']:.2f}")
        for k, t in res.get("targets", {}).get(spec, {}).items():
            verdict = ("met" if t["met"] else "MISSED") if "met" in t else (
                "within paper range" if t["within_paper_range"] else "below paper range")
            lines.append(f"  target {k}: {t['value']:.3g} -> {verdict}")
    for row in res.get("ladder", []):
        lines.append(f"  ladder {row['hidden']}x{row['layers']} ({row['params'] / 1e6:.1f}M): forward "
                     f"{row['forward']:.4f} s, gradnorm {row['gradnorm']:.4f} s, ratio {row['ratio']:.2f}")
    lines.append(f"wall time {res.get('wall_seconds', float('nan')):.0f} s")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gnuq_core.bench", description=__doc__.split("\n")[0])
    d = BenchConfig()
    p.add_argument("--out", default="bench/results.json", help="results JSON (default bench/results.json)")
    p.add_argument("--models", nargs="+", default=d.models,
                   help="model specs: aliases/paths, tiny-llama, random:<arch> (" + ", ".join(RANDOM_ARCHS) + ")")
    p.add_argument("--datasets", nargs="+", default=d.datasets)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--questions", type=int, default=d.n_questions, help="questions per dataset")
    p.add_argument("--repeats", type=int, default=d.repeats)
    p.add_argument("--samples", type=int, default=d.n_samples)
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--clusterer", default=d.clusterer, choices=["embedding", "exact"])
    p.add_argument("--answer-lengths", type=int, nargs="*", default=d.answer_lengths)
    p.add_argument("--prompt-lengths", type=int, nargs="*", default=d.prompt_lengths)
    p.add_argument("--sweep-repeats", type=int, default=d.sweep_repeats)
    p.add_argument("--ladder", nargs="*", default=[f"{h}x{l}" for h, l in d.ladder], help="HIDDENxLAYERS ...")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--skip", nargs="*", default=[], help="timed passes to leave out, e.g. naive forward_full")
    p.add_argument("--device", default=d.device)
    p.add_argument("--dtype", default=d.dtype)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--tiny", action="store_true",
                   help="dry run: random tiny models, 1 question, 1 repeat, short sweeps (checks the pipeline)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--memory-worker", default=None, help=argparse.SUPPRESS)
    return p


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """`BenchConfig` from parsed command-line arguments (``--tiny`` shrinks everything)."""
    cfg = BenchConfig(models=list(args.models), datasets=list(args.datasets), n_questions=args.questions,
                      repeats=args.repeats, n_samples=args.samples, max_new_tokens=args.max_new_tokens,
                      clusterer=args.clusterer, answer_lengths=list(args.answer_lengths),
                      prompt_lengths=list(args.prompt_lengths), sweep_repeats=args.sweep_repeats,
                      ladder=[[int(x) for x in s.split("x")] for s in args.ladder], memory=not args.no_memory,
                      profile=not args.no_profile, skip=list(args.skip), device=args.device, dtype=args.dtype, threads=args.threads,
                      seed=args.seed)
    if args.tiny:
        cfg.models = ["random:tiny", "tiny-llama"] if cfg.models == BenchConfig().models else cfg.models
        cfg.n_questions, cfg.repeats, cfg.n_samples, cfg.max_new_tokens = 1, 1, 3, 6
        cfg.synthetic_answer, cfg.synthetic_prompt = 6, (20, 40)
        cfg.answer_lengths, cfg.prompt_lengths, cfg.sweep_repeats = [2, 4], [16, 32], 1
        cfg.ladder, cfg.ladder_repeats, cfg.memory_repeats = [[32, 1], [64, 2]], 1, 1
    return cfg


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: run, write the JSON, print the table."""
    args = _parser().parse_args(argv)
    if args.memory_worker:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _memory_worker(json.loads(Path(args.memory_worker).read_text()))
        print(json.dumps(out))
        return 0
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    cfg = config_from_args(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(r: dict[str, Any]) -> None:
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(r, indent=1, default=float))
        os.replace(tmp, out)

    res = run(cfg, data_dir=args.data_dir, progress=not args.quiet,
              log=None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)), checkpoint=write)
    write(res)
    print(format_table(res))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
