"""What the efficiency benchmark measures: `BenchConfig` and the targets it judges.

Everything that changes a measured number is a field of `BenchConfig` and is stored in
the results JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnuq_core.lm.entailment import NLI_ARCHITECTURES
from gnuq_core.options import Rule
from gnuq_core.qa.config import QAConfig

__all__ = ["BenchConfig", "GRAD_GROUPS", "TARGET_GRAD_OVER_FORWARD", "TARGET_ABOVE_FLOOR", "TARGET_REST_ABOVE_GRAMS",
           "TARGET_MEMORY_FRACTION", "PAPER_SPEEDUP",
           "SCHEMA", "PASS_NAMES", "REFERENCE_PASSES", "FLOOR_SPLIT", "EVERY_ROUND", "BATCH_SIZE", "P_TRUE_SHOTS",
           "LONG_ANSWER", "REFERENCE_ANSWER_CAP"]

SCHEMA = 2
GRAD_GROUPS = ("no_embeddings", "last_block", "lm_head")
TARGET_GRAD_OVER_FORWARD = 2.3  # issue 14: exact ghost norms; the ordinary backward floor is about 3
TARGET_ABOVE_FLOOR = 0.15
"""Issue 29's target: the gradient pass at most this many no-grad forwards above its floor
(forward with autograd + backward into the activations), both timed in the same rounds."""
TARGET_REST_ABOVE_GRAMS = 0.05
"""Issue 46's restatement of it: above the floor, besides the exact norm's own timed Gram products
(the floor with the Gram matrices), at most this many no-grad forwards (hooks, bookkeeping, the
embedding and head pieces)."""
TARGET_MEMORY_FRACTION = 0.5
PAPER_SPEEDUP = (46.0, 107.0)
# Every timed pass (see gnuq_core.bench.passes); ``decode`` only where the engine has it.
PASS_NAMES = ("generate", "forward", "gradient", *(f"gradient_{g}" for g in GRAD_GROUPS), "reference", "sample",
              "decode", "cluster", "p_true", "p_true_reference", "sample_sequential", "nli_check", "p_true_fewshot")
# The baselines as their reference implementations run them (``BenchConfig.reference``).
REFERENCE_PASSES = ("sample_sequential", "nli_check", "p_true_fewshot")
FLOOR_SPLIT = ("forward", "backward_floor", "backward_floor_grams", "gradient")
"""The passes whose differences split the gradient pass's cost above a no-grad forward into the
floor, the Gram products and the rest; ``BenchConfig.floor_rounds`` times them further."""
EVERY_ROUND = ("gradient", "forward")
"""Passes ``timed_once`` may not hold: the estimator and the forward it is compared with (the
speed-ups and ratios are per round)."""
BATCH_SIZE = Rule(minimum=1, maximum=4096, integer=True, why_maximum="larger batches exhaust memory")
"""Bounds of a batch size or a number of batched pairs (command line, chapter 07, `BenchConfig`)."""
P_TRUE_SHOTS = Rule(minimum=0, maximum=100, integer=True, why_maximum="longer prompts than any reference uses")
"""Bounds of the few-shot P(True) prompt's worked examples (the reference uses 20)."""
REFERENCE_ANSWER_CAP = 50
"""The generation cap of the semantic-entropy reference code (Farquhar et al. 2024,
``--model_max_new_tokens``, default 50): `BenchConfig.long_answer_tokens`' default."""
LONG_ANSWER = Rule(minimum=0, maximum=1024, integer=True, why_maximum="longer than any answer the reference generates")
"""Bounds of the answer length of the answer-length factor (0: skip it; the reference caps at 50)."""


@dataclass
class BenchConfig:
    """Everything that changes what the benchmark measures (stored in the JSON).

    Attributes
    ----------
    models : list[str]
        Model specs (see `gnuq_core.bench.subjects.load_subject`).
    datasets : list[str]
        QA datasets for text models (synthetic models get synthetic questions).
    n_questions : int
        Questions per dataset (a fixed, seeded choice).
    repeats : int
        Timed repeats of every pass per question (interleaved).
    n_samples : int
        N for the sampling baselines in the pass timings.
    max_new_tokens : int
        Cap on generated and sampled tokens in the pass timings.
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
    gram_repeats : int
        Rounds of the Gram-kernel timing (`gnuq_core.bench.grams`: full against symmetric
        products, on the median-length question; 0: skip).
    floor_rounds : int
        Extra rounds per question, after the ordinary repeats, of the four passes the floor
        split compares (:data:`FLOOR_SPLIT`, in a fresh random order each round). What the
        gradient pass costs above its floor is a difference of two passes of about two
        forwards each, so a few rounds leave it to noise (at 2 threads one round's value ranged
        from -0.27 to +0.52 forwards); 0: the ordinary repeats only.
    skip : list[str]
        Timed passes to leave out (e.g. ``["reference"]`` to save time; the estimator, the
        floor and the baselines cannot be skipped).
    throughput : bool
        Measure records per hour of the whole QA pipeline (text models only).
    throughput_questions : int
        Questions per dataset for records/hour (0: ``n_questions``); the same questions for
        every layout.
    layouts : list[list[int]]
        ``[processes, threads]`` per records/hour layout; the processes score disjoint
        questions at the same time.
    qa_n_samples, qa_max_new_tokens : int
        N and the token cap of the records/hour runs (the QA study's full profile: 10, 32;
        temperature, P(True) and clustering as in the study).
    batch_sizes : list[int]
        Batch sizes of the batched-scoring throughput (`gnuq_core.bench.batching`; empty: skip).
    batch_pairs : int
        (prompt, answer) pairs every batch size scores.
    batch_repeats : int
        Timed rounds of the batched scoring and of the side-by-side comparison.
    peer_sizes : list[int]
        Batch sizes of gnuq against Opacus, torch.func and the floor
        (`gnuq_core.bench.side_by_side`; empty: skip).
    peer_memory_gb : float
        The most memory a method that instantiates per-sample gradients may need
        (``B × P × 4`` bytes); beyond it the method is not run and the table says why.
    peer_repeats : int
        Timed rounds of the side-by-side comparison (its interval is a bootstrap over them).
    peer_max_seconds : float
        A method whose first (warm-up) call takes longer is timed by one more call alone (no
        rounds, no memory): Opacus on Gemma took minutes per call on this CPU.
    reference : bool
        Also time the baselines as their reference implementations run them: N answers
        sampled one at a time (``sample_sequential``), one bidirectional-entailment
        comparison of a DeBERTa-large-MNLI-sized cross-encoder (``nli_check``; the
        clustering costs as many as the reference loop makes), and few-shot P(True)
        (``p_true_fewshot``, timed once per question). Text models only, except the
        sequential sampling.
    reference_questions : int
        Questions per dataset on which the entailment comparison and few-shot P(True) are
        timed, and on whose prompts the answer-length factor is (0: all); sequential
        sampling is timed on every question.
    sequential_timed : int
        Of the N answers sampled one at a time (``sample_sequential``), how many are timed
        per round (0, or N or more: all N); their time × N / ``sequential_timed`` stands for all N.
    timed_once : list of str
        Passes timed in a question's first repeat only, their time standing for its other
        rounds (default: the reference passes, tens of seconds each; the paper edition adds
        the batched ``sample`` pass, seconds each). The estimator is timed in every round.
    nli_architecture : str
        The cross-encoder's architecture (`gnuq_core.lm.entailment.NLI_ARCHITECTURES`).
    p_true_shots : int
        Worked examples in the few-shot P(True) prompt (Farquhar et al. 2024 use 20).
    long_answer_tokens : int
        The answer-length factor of the gap (`gnuq_core.bench.scaling.answer_length_factor`,
        on the prompts of ``reference_questions``): the speed-up over the batched sampling
        with answers this long, against answers as long as the timed samples' median
        (default `REFERENCE_ANSWER_CAP`; 0: skip).
    device : str
    dtype : str
    threads : int or None
        ``torch.set_num_threads`` during the pass timings (None: torch's default).
    seed : int
    """

    models: list[str] = field(default_factory=lambda: ["smollm2-135m-instruct", "gemma3-270m"])
    datasets: list[str] = field(default_factory=lambda: ["truthfulqa", "triviaqa"])
    n_questions: int = 5
    repeats: int = 3
    n_samples: int = QAConfig.n_samples
    max_new_tokens: int = QAConfig.max_new_tokens
    temperature: float = QAConfig.temperature
    clusterer: str = QAConfig.clusterer
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
    gram_repeats: int = 10
    floor_rounds: int = 10
    skip: list[str] = field(default_factory=list)
    throughput: bool = True
    throughput_questions: int = 0
    layouts: list[list[int]] = field(default_factory=lambda: [[1, 2], [2, 1]])
    qa_n_samples: int = QAConfig.n_samples
    qa_max_new_tokens: int = QAConfig.max_new_tokens
    batch_sizes: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    batch_pairs: int = 64
    batch_repeats: int = 2
    peer_sizes: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    peer_memory_gb: float = 8.0
    peer_repeats: int = 3
    peer_max_seconds: float = 30.0
    reference: bool = True
    reference_questions: int = 0
    sequential_timed: int = 0
    timed_once: list[str] = field(default_factory=lambda: list(REFERENCE_PASSES))
    nli_architecture: str = "deberta-large-mnli"
    p_true_shots: int = 20
    long_answer_tokens: int = REFERENCE_ANSWER_CAP
    device: str = "cpu"
    dtype: str = "float32"
    threads: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for p, t in self.layouts:
            if int(p) < 1 or int(t) < 1:
                raise ValueError(f"layout {[p, t]}: processes and threads must be >= 1 (e.g. [[1, 2], [2, 1]])")
        for name in ("skip", "timed_once"):
            unknown = sorted(set(getattr(self, name)) - set(PASS_NAMES))
            if unknown:
                raise ValueError(f"{name}={unknown}: no such timed pass; the passes are {', '.join(PASS_NAMES)}")
        if set(self.timed_once) & set(EVERY_ROUND):
            raise ValueError(f"timed_once={self.timed_once}: the estimator and the forward it is compared with are "
                             "timed in every round")
        if self.nli_architecture not in NLI_ARCHITECTURES:
            raise ValueError(f"nli_architecture={self.nli_architecture!r}: known are {', '.join(NLI_ARCHITECTURES)}")
        if not P_TRUE_SHOTS.minimum <= self.p_true_shots <= P_TRUE_SHOTS.maximum:
            raise ValueError(f"p_true_shots={self.p_true_shots}: use {P_TRUE_SHOTS.minimum:g}-{P_TRUE_SHOTS.maximum:g} "
                             "worked examples (the reference uses 20)")
        if not LONG_ANSWER.minimum <= self.long_answer_tokens <= LONG_ANSWER.maximum:
            raise ValueError(f"long_answer_tokens={self.long_answer_tokens}: use 0 (skip the answer-length factor) to "
                             f"{LONG_ANSWER.maximum:g} tokens")
        if self.sequential_timed < 0:
            raise ValueError(f"sequential_timed={self.sequential_timed}: use 0 (time all N sequential samples) or more")
        if self.reference_questions < 0:
            raise ValueError(f"reference_questions={self.reference_questions}: use 0 (all) or more")
        if any(int(b) < 1 for b in [*self.batch_sizes, *self.peer_sizes]) or self.batch_pairs < 1 \
                or self.batch_repeats < 1 or self.peer_repeats < 1 or not self.peer_memory_gb > 0 \
                or not self.peer_max_seconds > 0:
            raise ValueError(f"batch_sizes={self.batch_sizes}, peer_sizes={self.peer_sizes}, batch_pairs="
                             f"{self.batch_pairs}, batch_repeats={self.batch_repeats}, peer_repeats={self.peer_repeats}: each "
                             f"must be ≥ 1, and peer_memory_gb={self.peer_memory_gb}, "
                             f"peer_max_seconds={self.peer_max_seconds} > 0")
        if self.floor_rounds < 0:
            raise ValueError(f"floor_rounds={self.floor_rounds}: use 0 (the ordinary repeats only) or more rounds")
        if self.gram_repeats < 0:
            raise ValueError(f"gram_repeats={self.gram_repeats}: use 0 (skip the Gram-kernel timing) or more rounds")
        if self.n_questions < 1:
            raise ValueError(f"n_questions={self.n_questions}: time at least one question per dataset")
