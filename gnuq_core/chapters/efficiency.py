"""Chapter 07, efficiency: what one forward-backward pass costs, and what a QA record costs.

`run` turns the chapter's `Params` into a `~gnuq_core.bench.config.BenchConfig` and runs
the efficiency benchmark (`gnuq_core.bench.run.run`: the engine's own passes timed side by
side, cost against length and size, a profiler table, peak memory, records per hour of the
whole QA pipeline), writes its results JSON beside the executed chapter, and computes
everything the page reports from them: the cost table, the gradient pass against its floor,
the speed-up over each baseline with claim C8 measured (`gnuq_core.bench.summary.c8_measurement`)
and recorded, records per hour and the full-study estimate, memory, the length and size
slopes, the operators' shares, and a committed GPU run (``bench/gpu_results.json``) where
there is one of this benchmark version.

Every number the page quotes is in ``Result.values`` under the name the page glues it
under, every table it shows in ``Result.tables``; the figure functions draw from
``Result.data["bench"]`` (the benchmark's results dict).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from IPython.display import Markdown

from gnuq_core.bench import config as bench_config
from gnuq_core.bench import report
from gnuq_core.bench.__main__ import ladder_pair, layout_pair
from gnuq_core.bench.profiler import matmul_share
from gnuq_core.bench.run import run as run_bench
from gnuq_core.bench.scaling import slope_ratio
from gnuq_core.qa.config import QAConfig
from gnuq_core.bench.summary import READINGS, c8_readings, method_costs
from gnuq_core.chapters.base import COUNT, NONNEG, ChapterError, ChapterParams, Result, param
from gnuq_core.lm.clustering import CLUSTERERS
from gnuq_core.lm.entailment import NLI_ARCHITECTURES
from gnuq_core.options import MAX_THREADS, OPTIONS, Rule
from gnuq_core.repro import claims
from gnuq_core.repro import display as book
from gnuq_core.repro.paths import REPO_ROOT, generated_dir

__all__ = ["Params", "run", "bench_config_of", "rows_table", "header", "gpu_results", "figure_floor",
           "figure_speedup", "figure_scaling", "GPU_RESULTS", "RUNS", "floor_table", "committed_peer_run",
           "peer_standing"]

GPU_RESULTS = REPO_ROOT / "bench" / "gpu_results.json"
"""Where `scripts/gpu_bench.sh`'s results are committed (shown by the chapter when their schema matches)."""
RUNS = REPO_ROOT / "bench" / "runs"
"""The committed CPU runs of `make bench` (one JSON file each)."""
PEER_FLOOR_TARGET = 1.25
"""Issue 46's target: gnuq's batched exact norms at most this many times the batched floor's time at B ≥ 16."""
THREADS = Rule(minimum=0, maximum=MAX_THREADS, integer=True, why_maximum="4 per core; 0: torch's default")
N_SAMPLES = Rule(minimum=1, maximum=OPTIONS["n_samples"].maximum, integer=True,
                 why_maximum=OPTIONS["n_samples"].why_maximum)
LENGTHS = Rule(minimum=1, maximum=OPTIONS["max_new_tokens"].maximum, integer=True, nonempty=True,
               why_maximum=OPTIONS["max_new_tokens"].why_maximum)
NONNEG_SIZE = Rule(minimum=0, maximum=COUNT.maximum, integer=True, why_maximum=COUNT.why_maximum)
WHOLE = Rule(minimum=1, integer=True)
LONG_ANSWER = Rule(minimum=1, maximum=bench_config.LONG_ANSWER.maximum, integer=True,
                   why_maximum=bench_config.LONG_ANSWER.why_maximum)


@dataclass(frozen=True)
class Params(ChapterParams):
    """Chapter 07's parameters (defaults: the paper edition, sized to the book's 30-minute
    budget: C8's gate needs ≥ 5 questions and ≥ 10 rounds per model, 6 and 12 here; the
    reference baselines, tens of seconds each, are timed once per question, the one-at-a-time
    sampling on 4 of its N calls; the one-prefill ``decode`` pass is skipped; `make bench` is
    the long benchmark)."""

    CHAPTER = "07_efficiency"
    PREVIEWS = {  # the preview profiles (gnuq_core.repro.profiles) where the paper edition is too slow
        # throughput: records/hour and peak memory, the paper edition's (about 130 s of a quick run)
        "quick": {"n_questions": 1, "repeats": 1, "max_new_tokens": 24, "skip_passes": ["reference"],
                  "answer_lengths": [4, 16, 64], "prompt_lengths": [32, 128, 256], "sweep_repeats": 1,
                  "ladder": [[64, 2], [128, 4]], "throughput": False, "memory": False, "p_true_shots": 5,
                  "batch_sizes": [1, 4], "batch_pairs": 4, "peer_sizes": [1], "peer_repeats": 2, "floor_rounds": 1},
        # throughput, memory: records/hour (real QA pipeline in worker processes) and peak memory
        # (a process per pass) took 64 of the smoke page's 95 s; tests/bench and
        # tests/chapters/test_efficiency run them
        "smoke": {"models": ["tiny-llama", "random:tiny"], "n_questions": 1, "repeats": 1, "n_samples": 3,
                  "max_new_tokens": 6, "answer_lengths": [2, 4], "prompt_lengths": [16, 32], "sweep_repeats": 1,
                  "ladder": [[32, 1]], "ladder_repeats": 1, "skip_passes": [], "throughput_questions": 0,
                  "synthetic_prompt": [20, 40], "synthetic_answer": 6, "nli_architecture": "tiny", "p_true_shots": 2,
                  "long_answer_tokens": 12, "batch_sizes": [1, 2], "batch_pairs": 4, "peer_sizes": [1, 2],
                  "peer_repeats": 2, "floor_rounds": 1, "threads": 1, "throughput": False, "memory": False},
    }
    seed: int = param(0, OPTIONS["seed"], "seeds the question choice, the samplers and the bootstrap")
    models: list[str] = param(["smollm2-135m-instruct", "gemma3-270m"], Rule(nonempty=True),
                              "model specs (see gnuq_core.bench.subjects)")
    n_questions: int = param(3, COUNT, "questions per dataset (TruthfulQA and TriviaQA), for the pass timings "
                                       "and records/hour")
    repeats: int = param(2, COUNT, "timed repeats of every pass per question")
    n_samples: int = param(QAConfig.n_samples, N_SAMPLES,
                           "N of the timed sampling pass; semantic entropy uses ten in the paper")
    max_new_tokens: int = param(QAConfig.max_new_tokens, OPTIONS["max_new_tokens"],
                                "cap on generated and sampled answer tokens in the pass timings")
    clusterer: str = param(QAConfig.clusterer, Rule(choices=CLUSTERERS), 'semantic clustering: "embedding" (MiniLM) '
                                                                  'or "exact"')
    answer_lengths: list[int] = param([4, 16, 64], LENGTHS, "answer-length sweep (tokens)")
    prompt_lengths: list[int] = param([32, 128, 512], LENGTHS, "prompt-length sweep (tokens)")
    sweep_repeats: int = param(1, COUNT, "repeats per sweep point")
    ladder: list[list[int]] = param([[64, 2], [128, 4], [256, 8]], WHOLE,
                                    "random Llama models [hidden, layers] for the size ladder (empty: none)")
    ladder_repeats: int = param(3, COUNT, "repeats per model of the size ladder")
    memory: bool = param(True, None, "measure peak memory (in a separate process on CPU)")
    skip_passes: list[str] = param(["reference", "decode"], Rule(choices=bench_config.PASS_NAMES),
                                   'timed passes to leave out to save time, e.g. ["reference"]')
    memory_repeats: int = param(1, COUNT, "measured runs per pass for peak memory (after one warm-up run)")
    threads: int = param(2, THREADS, "torch threads of the pass timings (0: torch's default); the book builds one "
                                     "chapter at a time, so both cores of the 2-core machine; 1 keeps CPU time "
                                     "meaningful on a shared machine")
    throughput: bool = param(True, None, "records per hour of the whole QA pipeline (text models)")
    throughput_questions: int = param(1, NONNEG_SIZE, "questions per dataset for records/hour (0: n_questions)")
    layouts: list[list[int]] = param([[1, 2], [2, 1]], WHOLE, "records/hour layouts [processes, threads per "
                                                              "process]")
    synthetic_prompt: list[int] = param([40, 130], WHOLE, "[shortest, longest] prompt of the synthetic questions "
                                                          "of random models (tokens)")
    synthetic_answer: int = param(12, OPTIONS["max_new_tokens"], "answer and sample length cap of random models "
                                                                 "(tokens)")
    batch_sizes: list[int] = param([1, 4, 8], bench_config.BATCH_SIZE, "batch sizes of the batched-scoring throughput "
                                                    "(empty: none; `make bench`: 1, 4, 16, 64)")
    batch_pairs: int = param(8, bench_config.BATCH_SIZE, "(prompt, answer) pairs each batch size scores (`make bench`: 64)")
    # the paper edition's build keeps the comparison small (CI's budget; on Gemma-3-270M one Opacus call
    # at B = 1 took 28 s, torch.func 14 s, gnuq 2 s): B = 4, 16 and 64 are `make bench`'s
    peer_sizes: list[int] = param([1], bench_config.BATCH_SIZE, "batch sizes of gnuq against Opacus, torch.func "
                                                               "and the floor (empty: none; `make bench`: 1, 4, 16, 64)")
    peer_repeats: int = param(2, bench_config.BATCH_SIZE, "timed rounds of that comparison")
    floor_rounds: int = param(2, NONNEG_SIZE, "extra rounds per question of the forward, the floor, the floor with "
                                              "its Gram products and the gradient pass, whose differences split "
                                              "the pass's cost (`make bench`: 10)")
    peer_max_seconds: float = param(10.0, NONNEG, "a method whose first (warm-up) call takes longer is timed by "
                                                  "one more call alone")
    reference: bool = param(True, None, "also time the baselines as their reference implementations run them "
                                        "(sequential sampling, DeBERTa-large entailment, few-shot P(True))")
    reference_questions: int = param(1, NONNEG_SIZE, "questions per dataset on which the entailment "
                                                     "clustering, few-shot P(True) and the answer-length factor "
                                                     "are timed (0: all)")
    sequential_timed: int = param(4, NONNEG_SIZE, "of the N answers sampled one at a time, how many are timed per "
                                                  "question; their time × N / this stands for all N (0, or N or more: all N)")
    timed_once: list[str] = param([*bench_config.REFERENCE_PASSES, "sample"], Rule(choices=bench_config.PASS_NAMES),
                                  "passes timed in a question's first repeat only (their time stands for its other "
                                  "rounds): the reference passes and the batched sampling, seconds to tens of seconds "
                                  "each; the estimator is timed in every round")
    nli_architecture: str = param("deberta-large-mnli", Rule(choices=tuple(NLI_ARCHITECTURES)),
                                  "cross-encoder of the reference entailment clustering (random weights)")
    p_true_shots: int = param(20, bench_config.P_TRUE_SHOTS, "worked examples of the reference few-shot P(True) prompt (Farquhar et al.: 20)")
    long_answer_tokens: int = param(bench_config.REFERENCE_ANSWER_CAP, LONG_ANSWER,
                                    "answer length of the gap's answer-length factor (the semantic-entropy reference "
                                    f"code's cap: {bench_config.REFERENCE_ANSWER_CAP}); more than max_new_tokens")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, check in (("ladder", ladder_pair), ("layouts", layout_pair)):
            for pair in getattr(self, name):
                why = None if isinstance(pair, list) and len(pair) == 2 else "must be a pair [a, b]"
                if why is None:
                    try:
                        check(f"{pair[0]}x{pair[1]}")  # the bounds of `gnuq bench --ladder/--layouts`
                    except argparse.ArgumentTypeError as err:
                        why = str(err).split(": ", 1)[-1]
                if why is not None:
                    raise ChapterError(f"{self.CHAPTER}: parameter {name}={getattr(self, name)!r} element {pair!r} "
                                       f"{why}")
        every_round = sorted(set(self.timed_once) & set(bench_config.EVERY_ROUND))
        if every_round:
            raise ChapterError(f"{self.CHAPTER}: parameter timed_once={self.timed_once!r}: {', '.join(every_round)} "
                               "must be timed in every round (the speed-ups are ratios per round)")
        if self.long_answer_tokens <= self.max_new_tokens:
            raise ChapterError(f"{self.CHAPTER}: parameter long_answer_tokens={self.long_answer_tokens} must exceed "
                               f"max_new_tokens={self.max_new_tokens} (the answer-length factor compares longer "
                               "answers with the sampled ones)")
        lo, hi = (self.synthetic_prompt + [0, 0])[:2]
        if len(self.synthetic_prompt) != 2 or lo > hi:
            raise ChapterError(f"{self.CHAPTER}: parameter synthetic_prompt={self.synthetic_prompt!r} must be "
                               "[shortest, longest] with shortest ≤ longest")


def bench_config_of(p: Params) -> bench_config.BenchConfig:
    """The `~gnuq_core.bench.config.BenchConfig` that ``p`` asks for (its other fields keep the
    benchmark's defaults: both datasets, T = 1, the profiler table, the QA study's N and cap
    for records/hour)."""
    return bench_config.BenchConfig(
        models=list(p.models), n_questions=p.n_questions, repeats=p.repeats, n_samples=p.n_samples,
        max_new_tokens=p.max_new_tokens, clusterer=p.clusterer, answer_lengths=list(p.answer_lengths),
        prompt_lengths=list(p.prompt_lengths), sweep_repeats=p.sweep_repeats, ladder=[list(x) for x in p.ladder],
        ladder_repeats=p.ladder_repeats, memory=p.memory, memory_repeats=p.memory_repeats, skip=list(p.skip_passes),
        throughput=p.throughput, throughput_questions=p.throughput_questions, layouts=[list(x) for x in p.layouts],
        threads=p.threads or None, seed=p.seed, synthetic_prompt=(p.synthetic_prompt[0], p.synthetic_prompt[1]),
        synthetic_answer=p.synthetic_answer, batch_sizes=list(p.batch_sizes), batch_pairs=p.batch_pairs,
        batch_repeats=1, peer_sizes=list(p.peer_sizes), peer_repeats=p.peer_repeats, floor_rounds=p.floor_rounds,
        peer_max_seconds=p.peer_max_seconds,
        reference=p.reference, reference_questions=p.reference_questions, timed_once=list(p.timed_once),
        sequential_timed=p.sequential_timed, nli_architecture=p.nli_architecture,
        p_true_shots=p.p_true_shots, long_answer_tokens=p.long_answer_tokens)


# ----------------------------------------------------------------------------- tables


def header(column: str) -> str:
    """A report column's header in words (pass names such as ``gradient_lm_head`` spelled out)."""
    for code, words in (("_no_embeddings", ", no embeddings"), ("_last_block", ", last block"),
                        ("_lm_head", ", LM head"), ("p_true", "P(True)")):
        column = column.replace(code, words)
    return column


def rows_table(rows: list[dict[str, Any]], fmt: dict[str, str] | None = None, *,
               caption: str | None = None) -> book.Table:
    """A benchmark report's rows as a book table: shares as percentages, counts as integers,
    other numbers to three significant digits, intervals on one line.

    Parameters
    ----------
    rows : list of dict
        Rows of a `gnuq_core.bench.report` builder.
    fmt : dict, optional
        Format per column, over the defaults (records per hour with thousands separators).
    caption : str, optional

    Returns
    -------
    Table
    """
    df = pd.DataFrame(rows)
    fmt = {"records / hour": ",.0f", **(fmt or {})}
    spec = {}
    for c in df.columns:
        if c in fmt:
            f = fmt[c]
        elif c.endswith(" share"):
            f = ".0%"
        elif pd.api.types.is_integer_dtype(df[c]):
            f = "d"
        elif pd.api.types.is_float_dtype(df[c]):
            f = ".3g"
        else:
            f = ""
        spec[c] = (header(c), f, "CI" in c)
    return book.table(df, spec, caption=caption)


def gpu_results(path: Path | None = None) -> dict[str, Any] | None:
    """The committed GPU run at ``path`` (default `GPU_RESULTS`) if it exists and has this
    benchmark's schema, else None."""
    path = GPU_RESULTS if path is None else path
    gres = json.loads(path.read_text()) if path.exists() else None
    return gres if gres and gres.get("schema") == bench_config.SCHEMA else None


# ----------------------------------------------------------------------------- the sections


def _overview(res: dict[str, Any], out: Result) -> None:
    """What ran, where, how long; the largest parts of the run; the cost table."""
    mach = res["machine"]
    parts = report.section_rows(res)[:3]
    out.values.update(
        n_models=len(res["models"]), n_q_total=sum(len(e["questions"]) for e in res["models"].values()),
        bench_wall=res["wall_seconds"],
        machine_cpu=Markdown(f"{mach['cpu']} ({mach['cores']} cores, {mach['torch_threads']} torch thread(s))"),
        load_avg=float(mach.get("load_average", [float("nan")])[0]), clusterer_name=Markdown(res["clusterer"]),
        largest_parts=Markdown("; ".join(f"{r['part']} {r['seconds']:.0f} s ({r['share']})" for r in parts)))
    out.tables["costs"] = rows_table(report.cost_rows(res))


def floor_table(rows: list[dict[str, Any]]) -> book.Table:
    """The page's floor table from `gnuq_core.bench.report.floor_rows`: each ratio with its
    interval in one column, the excess over the floor with its split, the three targets' verdicts
    in one column with issue 46's on the rest (the rounds are in the text; the forward, backward
    and post parts of the timing stay in the benchmark report)."""
    def f2(v: float) -> str:
        return f"{v:.2f}" if np.isfinite(v) else "not measured"

    return rows_table([{  # in no-grad forwards; short headers: fits 1280 px
        "model": r["model"], "gradient [95% CI]": f"{r['gradient ÷ forward']:.2f} {r['95% CI']}",
        "floor": f2(r["floor ÷ forward"]),
        "above floor [95% CI]": (f"{r['above floor']:.2f} {r['above floor 95% CI']}"
                                 if np.isfinite(r["above floor"]) else "not measured"),
        "of it: Gram products + rest": (f"{r['of it Gram products']:.2f} + {r['of it the rest']:.2f}"
                                        if np.isfinite(r["of it Gram products"]) else "not measured"),
        f"≤ {r['target ≤']} / floor + {r['above-floor target ≤']} / rest ≤ {r['rest target ≤']}":
            f"{r['verdict'] or '—'} / {r['above-floor verdict'] or '—'} / {r['rest verdict'] or '—'}"} for r in rows])


def arithmetic_verdict(counted: list[dict[str, Any]], target: float) -> str:
    """What the counted multiply-adds of the norm (rows of `gnuq_core.bench.report.floor_rows`)
    say about the above-floor target, as a sentence for the page; a model timed within the
    target although its count exceeds it is named with its interval."""
    if not counted:
        return "No count was recorded in this build."
    over = [r for r in counted if r["norm multiply-adds ÷ forward"] > target]
    sym_over = [r["model"] for r in counted if r["symmetric"] > target]
    names = lambda ms: ", ".join(f"`{m}`" for m in ms)  # noqa: E731
    if not over:
        return (f"On every model the count is within the target of {target:.2f} forwards: what the pass spends "
                "above the floor beyond it is the small products' lower speed per multiply-add and overhead.")
    text = (f"On {names(r['model'] for r in over)} the count alone exceeds the target of {target:.2f} forwards: "
            "an exact norm built from Gram matrices meets it there only if its small products run faster per "
            "multiply-add than the forward's large ones. ")
    timed_within = [r for r in over if r.get("above-floor verdict") == "met"]
    if timed_within:
        text += "Timed within the target all the same, below its own count: " + "; ".join(
            f"`{r['model']}` ({r['above floor']:.2f}, 95% CI {_dash(r['above floor 95% CI'])}"
            f"{', which reaches the count' if _upper(r['above floor 95% CI']) >= r['norm multiply-adds ÷ forward'] else ''}"
            f"{'; below the floor itself, where no pass can run: timing noise' if r['above floor'] < 0 else ''})"
            for r in timed_within) + ". "
    if sym_over:
        return text + (f"Symmetric products (the upper triangle of each Gram matrix only) would still exceed it on "
                       f"{names(sym_over)}.")
    return text + ("Symmetric products (the upper triangle of each Gram matrix only) would bring the count within "
                   "it, if they ran as fast per multiply-add as the full ones (timed below).")


def gram_kernel_verdict(rows: list[dict[str, Any]], target: float) -> str:
    """What the timed Gram kernels (rows of `gnuq_core.bench.report.gram_rows`) say, as a
    sentence for the page: the full products alone against the above-floor target, and
    whether a symmetric kernel is faster here than the full product."""
    if not rows:
        return "The Gram products were not timed on their own in this build."
    names = lambda rs: ", ".join(f"`{r['model']}`" for r in rs)  # noqa: E731
    over = _against(rows, target)["over"]
    text = ("Timed on their own beside a forward of the same question (its median-length one), the full Gram "
            "products of one pass cost " + "; ".join(
                f"`{r['model']}` {r['Gram products ÷ forward']:.2f} forwards (95% CI {_dash(r['95% CI'])}, "
                f"T = {r['rows T']})" for r in rows) + ". ")
    if over:
        text += (f"On {', '.join(over)} that alone is above the target of {target:.2f}: no pass that forms these Gram "
                 "matrices in full can meet it there, whatever its hooks cost. ")
    faster = [r for r in rows if _upper(r["its 95% CI"]) < 1]
    kernels = "; ".join(f"`{r['model']}` {r['fastest symmetric kernel']} {r['its time ÷ full']:.2f} of the full "
                        f"products' time (95% CI {_dash(r['its 95% CI'])}; its multiply-adds {r['ideal']:.2f})"
                        for r in rows)
    if faster:
        return text + (f"The fastest symmetric kernel here is faster than the full product on {names(faster)}: "
                       f"{kernels}. Forming only the triangle would save time there.")
    timed = {k for r in rows for k in r["symmetric kernels"].split(", ") if k}
    blocks = sorted(int(k[len("blocks"):]) for k in timed if k.startswith("blocks"))
    legend = [f"the lower triangle in {_or(blocks)} row blocks"] if blocks else []
    legend += ["BLAS `syrk`, timed on one thread only"] if "syrk" in timed else []
    legend = "; ".join(legend)
    return text + (f"No symmetric kernel timed here ({legend}) is faster than the full product at these lengths, "
                   f"where small products run far from the machine's peak: {kernels}. The halving the count "
                   "promises is not to be had on this machine.")


def gram_takeaway(rows: list[dict[str, Any]], target: float) -> str:
    """The summary's line on the above-floor target from the timed Gram products (rows of
    `gnuq_core.bench.report.gram_rows`): where they alone exceed it, and where they leave room."""
    if not rows:
        return "The exact norm's Gram products were not timed on their own in this build."
    listed = ", ".join(f"{r['Gram products ÷ forward']:.2f}{' forwards' if i == 0 else ''} on `{r['model']}`"
                       for i, r in enumerate(rows))
    over, room, close = _against(rows, target).values()
    text = (f"The exact norm's Gram products, timed on their own, cost {listed}, against a target of at most "
            f"{target:.2f} forwards above the floor for the whole pass: ")
    parts = ([f"out of reach on {', '.join(over)} by the arithmetic itself"] if over else []) + (
        [f"within reach on {', '.join(room)} if the hooks around them cost less"] if room else []) + (
        [f"on {', '.join(close)} they alone come close to it (their interval reaches the target)"] if close else [])
    return text + "; ".join(parts) + "."


def _against(rows: list[dict[str, Any]], target: float) -> dict[str, list[str]]:
    """The models (as code) whose timed Gram products' interval (rows of
    `gnuq_core.bench.report.gram_rows`) lies above ``target`` (``"over"``), below it
    (``"room"``), or reaches it (``"close"``)."""
    out: dict[str, list[str]] = {"over": [], "room": [], "close": []}
    for r in rows:
        lo, hi = _bounds(r["95% CI"])
        out["over" if lo > target else "room" if hi < target else "close"].append(f"`{r['model']}`")
    return out


def _or(numbers: list[int]) -> str:
    """``[2, 3, 4]`` as ``"2, 3 or 4"``."""
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _dash(interval: str) -> str:
    """``"[lo, hi]"`` as ``"lo–hi"``."""
    return interval[1:-1].replace(", ", "–")


def _bounds(interval: str) -> tuple[float, float]:
    """``(lo, hi)`` of an interval written ``"[lo, hi]"`` by `gnuq_core.bench.report` (nans if it is not one)."""
    try:
        lo, hi = (float(x) for x in interval.strip("[]").split(","))
    except ValueError:
        return float("nan"), float("nan")
    return lo, hi


def _upper(interval: str) -> float:
    return _bounds(interval)[1]


def _floor(res: dict[str, Any], out: Result) -> None:
    """The gradient pass ÷ one forward per model, against the target and the floor."""
    floor = report.floor_rows(res)
    out.tables["floor"] = floor_table(floor)
    above = [r for r in floor if np.isfinite(r["above floor"])]
    counted = [r for r in floor if np.isfinite(r["norm multiply-adds ÷ forward"])]
    grams = report.gram_rows(res)
    out.values.update(
        target_ratio=bench_config.TARGET_GRAD_OVER_FORWARD, target_above_floor=bench_config.TARGET_ABOVE_FLOOR,
        above_floor_list=Markdown("; ".join(
            f"`{r['model']}` {r['above floor']:.2f} forwards above it (95% CI "
            f"{_dash(r['above floor 95% CI'])}, {r['above floor rounds']} paired rounds; target {r['above-floor verdict']}"
            + (f"; the Gram products {r['of it Gram products']:.2f}, the rest {r['of it the rest']:.2f}, "
               f"whose target of {r['rest target ≤']} is {r['rest verdict']}"
               if np.isfinite(r["of it Gram products"]) else "") + ")"
            for r in above) or "not measured in this build"),
        above_floor_n_met=sum(r["above-floor verdict"] == "met" for r in above), above_floor_n=len(above),
        arithmetic_list=Markdown("; ".join(
            f"`{r['model']}` {r['norm multiply-adds ÷ forward']:.3f} forwards "
            f"({r['symmetric']:.3f} with symmetric products)"
            for r in counted) or "not counted in this build"),
        arithmetic_verdict=Markdown(arithmetic_verdict(counted, bench_config.TARGET_ABOVE_FLOOR)),
        gram_kernel_verdict=Markdown(gram_kernel_verdict(grams, bench_config.TARGET_ABOVE_FLOOR)),
        gram_takeaway=Markdown(gram_takeaway(grams, bench_config.TARGET_ABOVE_FLOOR)),
        floor_bound_list=Markdown("; ".join(
            f"`{r['model']}` {r['floor ÷ forward']:.2f} forwards"
            for r in floor if np.isfinite(r["floor ÷ forward"])) or "not measured in this build"),
        floor_list=Markdown("; ".join(
            f"`{r['model']}` {r['gradient ÷ forward']:.2f}× (95% CI {_dash(r['95% CI'])}, "
            f"{r['rounds']} rounds; {r['verdict']})" for r in floor)),
        floor_n_met=sum(r["verdict"] == "met" for r in floor), floor_n=len(floor),
        floor_ratio_0=floor[0]["gradient ÷ forward"], floor_model_0=Markdown(f"`{floor[0]['model']}`"))


def _variants(res: dict[str, Any], out: Result) -> None:
    """Cost and peak memory of each variant of the epistemic score (full, no embeddings,
    last block, LM head), the table chapter 06 and the practitioner's page show."""
    rows = report.variant_rows(res)
    shown = [{"model": r["model"], "gradient over": r["gradient over"], "÷ forward [95% CI]": r["÷ forward [95% CI]"],
              "median (s)": r["median (s)"],
              "extra peak memory, MB (÷ one fp32 gradient)": (
                  f"{r['extra peak memory (MB)']:.0f} ({r['÷ one fp32 gradient']:.3f})"
                  if np.isfinite(r["extra peak memory (MB)"]) else "not measured")} for r in rows]  # fits 1280 px
    out.tables["variants"] = rows_table(shown, caption="What each variant of the epistemic score costs")
    by = {(r["model"], r["gradient over"]): r for r in rows}
    full = [r for r in rows if r["gradient over"] == report.VARIANTS["gradient"]]
    last = [by.get((r["model"], report.VARIANTS["gradient_last_block"])) for r in full]
    out.values["variant_cost_list"] = "; ".join(  # plain text: the practitioner's page glues it from another page
        f"{f['model']} {f['÷ forward']:.2f} forwards for all parameters, "
        + (f"{lb['÷ forward']:.2f} for the last block" if lb else "last block not timed")
        for f, lb in zip(full, last)) or "not measured in this build"


def _speedup(p: Params, res: dict[str, Any], profile: str, out: Result) -> None:
    """The speed-up table per baseline and variant, the measured gap decomposition, and claim
    C8 measured under both readings, recorded (the reference reading is the primary one:
    the paper's wording) and quoted."""
    out.tables["speedup"] = rows_table(report.speedup_rows(res))
    gap = report.gap_rows(res)
    out.tables["gap"] = rows_table(gap, caption="How much each difference multiplies the speed-up") if gap else (
        Markdown("*The reference implementations were not timed in this build (`reference: false`).*"))
    costs = method_costs()
    ms = c8_readings(res, settings={"profile": profile, "threads": p.threads})
    primary = next(iter(ms))
    entry = claims.record(ms[primary], readings={READINGS[r]: {"C8": m} for r, m in ms.items()},
                          primary=READINGS[primary])
    verdicts = {row["reading"]: row["verdict"] for row in entry.get("readings", [])}

    def per_model(m: Any) -> str:
        return "; ".join(f"`{s}` {d['median']:.1f}× over {costs[d['baseline']]['label'].split(':')[0]} (95% CI "
                         f"{d['ci'][0]:.1f}–{d['ci'][1]:.1f}; {d['rounds']} rounds over {d['questions']} questions)"
                         for s, d in m.details.items())

    for r, m in ms.items():
        out.values.update({
            f"c8_{r}_value": m.value, f"c8_{r}_lo": m.ci[0], f"c8_{r}_hi": m.ci[1],
            f"c8_{r}_verdict": Markdown(verdicts.get(READINGS[r], entry["verdict"])),
            f"c8_{r}_model": Markdown(f"`{m.settings['model_judged']}`"), f"c8_{r}_per_model": Markdown(per_model(m))})
    se = [d["semantic_entropy"] for d in ms["optimised"].details.values() if d["semantic_entropy"] is not None]
    se_ref = ([d["semantic_entropy"] for d in ms["reference"].details.values() if d["semantic_entropy"] is not None]
              if "reference" in ms else [])
    p1 = [d["p_true"] for d in ms["optimised"].details.values() if d["p_true"] is not None]
    out.values.update(
        n_samples_used=res["config"]["n_samples"],
        se_speedup_max=float(max(se)) if se else float("nan"), se_speedup_min=float(min(se)) if se else float("nan"),
        p1_speedup=float(np.median(p1)) if p1 else float("nan"),
        p_true_shots_used=res["config"].get("p_true_shots", 0),
        reference_questions_used=Markdown(_reference_questions(res["config"])),
        timed_once_list=Markdown(_timed_once(res["config"])),
        sequential_timed_words=Markdown(_sequential_timed(res["config"])),
        se_reference_range=Markdown(f"{min(se_ref):.0f}–{max(se_ref):.0f}×" if se_ref else "not measured in this build"),
        fewshot_tokens=Markdown(_token_range(res)),
        nli_comparison_range=Markdown(_comparison_range(res)),
        long_answer_tokens_used=res["config"].get("long_answer_tokens", 0),
        reference_answer_cap=bench_config.REFERENCE_ANSWER_CAP,
        gap_list=Markdown("; ".join(f"{r['cause']} ×{r['factor']:.1f} on `{r['model']}`" for r in gap)
                          or "not measured in this build"))


def _timed_once(cfg: dict[str, Any]) -> str:
    """Which passes were timed once per question (their time standing for its other rounds), in words."""
    once = list(cfg.get("timed_once", bench_config.REFERENCE_PASSES))  # the pass names of the tables
    if cfg.get("repeats", 1) < 2 or not once:
        return "every pass in every round"
    return f"every pass in every round except {', '.join(f'`{k}`' for k in once)}, timed in a question's first round"


def _sequential_timed(cfg: dict[str, Any]) -> str:
    """How many of the N sequential samples were timed, in words."""
    n, k = cfg["n_samples"], cfg.get("sequential_timed", 0)
    if not k or k >= n:
        return f"all {n} of them are timed"
    return (f"the first {k} of the {n} are timed, and their time × {n / k:g} stands for all {n}: the calls are alike, "
            "one prefill and one answer each")


def _reference_questions(cfg: dict[str, Any]) -> str:
    """On which questions the entailment comparison and few-shot P(True) were timed, in words."""
    k = cfg.get("reference_questions", 0)
    if not k or k >= cfg["n_questions"]:
        return "every question"
    return "the first question of each dataset" if k == 1 else f"the first {k} questions of each dataset"


def _token_range(res: dict[str, Any]) -> str:
    toks = [q["p_true_fewshot_tokens"] for e in res["models"].values() for q in e["questions"]
            if q.get("p_true_fewshot_tokens")]
    return f"{min(toks):,}–{max(toks):,} tokens" if toks else "not built in this run"


def _comparison_range(res: dict[str, Any]) -> str:
    n = [q["nli_comparisons"] for e in res["models"].values() for q in e["questions"] if q.get("derived")]
    return f"{min(n)}–{max(n)} comparisons (median {float(np.median(n)):.0f})" if n else "not timed in this run"


def _peers(res: dict[str, Any], out: Result) -> None:
    """gnuq against Opacus, torch.func and the floor, and where gnuq stands (`peer_words`)."""
    rows = report.peer_rows(res)
    out.tables["peers"] = rows_table(rows, {"÷ floor": ".2f", "peak MB": ",.0f"},
                                     caption="Per-answer gradient norms: gnuq and its peers, side by side (peak MB: "
                                             "in-process resident memory, a lower bound; "
                                             f"'{report.NO_GROWTH}': the call reused memory freed before it)") \
        if rows else Markdown("*The peers were not timed in this build (`peer_sizes: []`).*")
    out.values["peer_words"] = Markdown(peer_words(res))
    out.values["peer_parameters"] = Markdown("; ".join(f"`{spec}`: {e['peers']['parameters']}"
                                                       for spec, e in res["models"].items() if e.get("peers"))
                                             or "not timed in this build")


def committed_peer_run(folder: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The newest committed run (by its start) of this benchmark's schema that timed the peers at
    more than one batch size, with its path; None if there is none."""
    found = None
    for path in sorted((RUNS if folder is None else folder).glob("*.json")):
        try:
            res = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        sizes = {r["batch_size"] for e in res.get("models", {}).values() for r in e.get("peers", {}).get("rows", [])}
        if res.get("schema") == bench_config.SCHEMA and len(sizes) > 1 and \
                (found is None or res.get("started", "") > found[1].get("started", "")):
            found = (path, res)
    return found


def peer_standing(res: dict[str, Any]) -> str:
    """Per model, over every batch size timed: gnuq's throughput against the fastest peer that ran
    (the least ratio and where), its time against the floor's at B ≥ 16 against
    `PEER_FLOOR_TARGET`, and issue 46's single-answer target (`report.floor_rows`), as sentences."""
    parts = []
    floor_rows = {r["model"]: r for r in report.floor_rows(res)}
    for spec, e in res["models"].items():
        timed = [r for r in e.get("peers", {}).get("rows", []) if "why" not in r]
        ratio = report.floor_ratios(timed)
        by_b: dict[int, dict[str, Any]] = {}
        for r in timed:
            by_b.setdefault(r["batch_size"], {})[r["method"]] = r
        vs = [(at["gnuq"]["answers_per_second"] / max(r["answers_per_second"] for m, r in at.items()
                                                    if m not in ("gnuq", "floor")), b)
              for b, at in sorted(by_b.items()) if "gnuq" in at and set(at) - {"gnuq", "floor"}]
        if not vs:
            continue
        least, at_b = min(vs)
        text = (f"`{spec}`: gnuq {'at or above' if least >= 1 else 'below'} the fastest peer at "
                f"{'every B' if least >= 1 else f'B = {at_b}'} (the least ratio of throughputs {least:.2f}, at B = {at_b})")
        big = [(ratio[b, "gnuq"], b) for b, at in sorted(by_b.items()) if b >= 16 and "gnuq" in at]
        compared = [(v, b) for v, b in big if np.isfinite(v)]
        if compared:
            worst, wb = max(compared)
            text += (f", {worst:.2f}× the floor's time at most at B ≥ 16 (B = {wb}; target ≤ {PEER_FLOOR_TARGET}: "
                     f"{'met' if worst <= PEER_FLOOR_TARGET else 'missed'})")
        if len(compared) < len(big):
            text += (", not compared with the floor at B = "
                     f"{', '.join(str(b) for v, b in big if not np.isfinite(v))} (the floor did not run there)")
        fr = floor_rows.get(spec)
        if fr and fr["rest verdict"]:
            text += (f"; one answer: {fr['of it the rest']:.2f} forwards above the floor besides the Gram products "
                     f"(target ≤ {fr['rest target ≤']}: {fr['rest verdict']})")
        parts.append(text)
    return "; ".join(parts) + "." if parts else "No model timed gnuq beside a peer in that run."


def _committed_peers(out: Result) -> None:
    """The newest committed run's side-by-side table at every batch size (`committed_peer_run`),
    its machine and where gnuq stands in it (`peer_standing`)."""
    found = committed_peer_run()
    if found is None:
        out.tables["peers_committed"] = Markdown("*No committed run timed the peers at several batch sizes "
                                                 "(`make bench` writes one to `bench/runs/`).*")
        out.values["peers_committed_words"] = Markdown("no committed run timed the peers")
        out.values["peers_committed_where"] = Markdown("no committed run")
        return
    path, res = found
    m = res["machine"]
    machine = (f"{m['cpu']}, {m['cores']} cores, {m['torch_threads']} torch thread(s), "
               f"started {res['started'][:10]}")
    where = f"`bench/runs/{path.name}`: {machine}"
    out.tables["peers_committed"] = rows_table(report.peer_rows(res), {"÷ floor": ".2f", "peak MB": ",.0f"},
                                               caption=f"The newest committed run (bench/runs/{path.name}, "
                                                       f"{machine}): gnuq and its peers at every batch size")
    out.values["peers_committed_words"] = Markdown(peer_standing(res))
    out.values["peers_committed_where"] = Markdown(where)


def peer_words(res: dict[str, Any]) -> str:
    """Per model, at its largest B: gnuq's answers per second against the fastest peer that ran
    and against the floor (ratios of medians), from the benchmark's rows."""
    parts = []
    for spec, e in res["models"].items():
        timed = [r for r in e.get("peers", {}).get("rows", []) if "why" not in r]
        if not timed:
            continue
        b = max(r["batch_size"] for r in timed)
        at = {r["method"]: r for r in timed if r["batch_size"] == b}
        if "gnuq" not in at:
            continue
        rivals = [r for m, r in at.items() if m not in ("gnuq", "floor")]
        fastest = max(rivals, key=lambda r: r["answers_per_second"], default=None)
        vs = (f"{at['gnuq']['answers_per_second'] / fastest['answers_per_second']:.2f}× the throughput of the fastest "
              f"peer that ran ({report.PEER_NAMES[fastest['method']]})" if fastest else "no peer ran")
        floor = f", {report.floor_ratios(timed)[b, 'gnuq']:.2f}× the floor's time" if "floor" in at else ""
        parts.append(f"`{spec}` at B = {b}: gnuq {at['gnuq']['answers_per_second']:.3g} answers/s, {vs}{floor}")
    return "; ".join(parts) or "not timed in this build"


def _batching(res: dict[str, Any], out: Result) -> None:
    """Answers per second against batch size, per model (batched scoring, exact per-answer norms)."""
    rows = report.batching_rows(res)
    out.tables["batching"] = rows_table(rows, {"answers / s": ".2f", "speed-up over B = 1": ".2f",
                                               "seconds for all": ".1f", "checks ÷ passes": ".1e"},
                                        caption="Batched scoring: answers per second") if rows else Markdown(
        "*Batched scoring was not timed in this build (`batch_sizes: []`).*")
    best = {}
    for r in rows:
        if r["model"] not in best or r["answers / s"] > best[r["model"]]["answers / s"]:
            best[r["model"]] = r
    out.values["batching_list"] = Markdown("; ".join(
        f"`{m}` {r['answers / s']:.2f} answers/s at B = {r['batch size']} ({r['speed-up over B = 1']:.2f}× B = 1)"
        for m, r in best.items()) or "not measured in this build")
    shares = [r["checks ÷ passes"] for r in rows if np.isfinite(r["checks ÷ passes"])]
    out.values["checks_share"] = Markdown(f"at most {max(shares):.1e} of the passes' time" if shares
                                          else "not timed in this run")


def _throughput(res: dict[str, Any], out: Result) -> None:
    """Records per hour per model and layout, the shares of the passes, the full-study estimate."""
    tp_rows = report.throughput_rows(res)
    v = out.values
    if not tp_rows:
        out.tables["throughput"] = Markdown("No records/hour run (no text model, or `throughput = False`).")
        for k in ("rph_list", "study_desc", "campaign_best_layout", "campaign_list", "sample_share_range",
                  "gradient_share_range"):
            v[k] = Markdown("not measured")
        v.update(study_records=float("nan"), campaign_best_hours=float("nan"))
        return
    out.tables["throughput"] = rows_table(tp_rows, {"records": "d", "study (h)": ".3g"})
    camp = res["campaign"]
    best = camp["best"]
    sh = [r for r in tp_rows if "sample share" in r]
    v.update(
        rph_list=Markdown("; ".join(
            f"`{r['model']}`, {r['layout']}: {r['records / hour']:,.0f} records/hour ({r['s / record']:.1f} s per "
            f"record, {r['records']} records)" for r in tp_rows)),
        study_desc=Markdown(" + ".join(f"{n:,} {d}" for d, n in camp["study_sizes"].items())),
        study_records=best["records"], campaign_best_hours=best["hours"],
        campaign_best_layout=Markdown(best["layout"].replace("x", " process(es) × ") + " thread(s)"),
        campaign_list=Markdown("; ".join(f"{k.replace('x', ' × ')}: {lay['hours']:.1f} h"
                                         for k, lay in camp["layouts"].items())),
        sample_share_range=Markdown(f"{min(r['sample share'] for r in sh):.0%}–{max(r['sample share'] for r in sh):.0%}"),
        gradient_share_range=Markdown(
            f"{min(r['gradient share'] for r in sh):.0%}–{max(r['gradient share'] for r in sh):.0%}"))


def _memory(res: dict[str, Any], out: Result) -> None:
    """Peak extra memory per model and pass; the worst gradient pass against its target."""
    v = out.values
    v["mem_target"] = bench_config.TARGET_MEMORY_FRACTION
    mem_rows = report.memory_rows(res)
    if not mem_rows:
        for k in ("mem_worst_model", "mem_verdict", "mem_method"):
            v[k] = Markdown("not measured")
        v.update(mem_worst_frac=float("nan"), mem_vs_forward=float("nan"), mem_ref_frac=float("nan"))
        return
    out.tables["memory"] = rows_table(mem_rows)
    worst = max(mem_rows, key=lambda r: r["gradient ÷ one gradient"])
    mem_ok = all(res["targets"][r["model"]]["extra_memory_over_gradient"]["met"] for r in mem_rows)
    measured = [e["memory"] for e in res["models"].values() if "memory" in e]
    v.update(mem_worst_model=Markdown(f"`{worst['model']}`"), mem_worst_frac=worst["gradient ÷ one gradient"],
             mem_vs_forward=worst["gradient ÷ no-grad forward"],
             mem_ref_frac=max(m["reference_over_gradient"] for m in measured),
             mem_verdict=Markdown("met" if mem_ok else "missed"), mem_method=Markdown(measured[0]["method"]))


def _scaling(res: dict[str, Any], out: Result) -> None:
    """Gradient ÷ forward slopes against prompt and answer length (first model) and along the size ladder."""
    first = next(iter(res["models"].values()))
    lad = res.get("ladder", [])
    out.values.update(
        slope_ratio_prompt=slope_ratio(first.get("sweeps", {}).get("prompt", [])),
        slope_ratio_answer=slope_ratio(first.get("sweeps", {}).get("answer", [])),
        ladder_ratio_small=float(lad[0]["ratio"]) if lad else float("nan"),
        ladder_ratio_large=float(lad[-1]["ratio"]) if lad else float("nan"))
    small, large = out.values["ladder_ratio_small"], out.values["ladder_ratio_large"]
    out.values["ladder_words"] = (f"goes from {small:.2f} (smallest) to {large:.2f} (largest)"
                                  if len(lad) > 1 and f"{small:.2f}" != f"{large:.2f}" else
                                  f"is {small:.2f} (one size in this build's ladder)" if len(lad) == 1 else
                                  f"is {small:.2f} at every size")


def _operators(res: dict[str, Any], out: Result) -> None:
    """The profiler's top operators by self time (first model) and the matrix products' share."""
    prof = next(iter(res["models"].values())).get("profile") or {}
    if prof:
        top = pd.DataFrame([{"pass": k, "operator": o["op"], "self ms": o["self_us"] / 1e3, "calls": o["calls"]}
                            for k, v in prof.items() for o in v["ops"][:8]])
        out.tables["operators"] = book.table(top, {"pass": "pass", "operator": "operator",
                                                   "self ms": ("self time (ms)", ".3g"), "calls": ("calls", "d")})
    out.values.update(mm_share_forward=matmul_share(prof["forward"]) if prof else float("nan"),
                      mm_share_gradient=matmul_share(prof["gradient"]) if prof else float("nan"))


def _gpu(out: Result) -> None:
    """A committed GPU run of this benchmark version (`gpu_results`): its machine in words and its two tables."""
    gres = gpu_results()
    if gres is None:
        out.tables["gpu_note"] = Markdown("No GPU results of this benchmark version are committed "
                                          "(`bench/gpu_results.json`).")
        return
    gm = gres["machine"]
    out.tables["gpu_note"] = Markdown(f"GPU results from **{gm.get('gpu') or gm.get('device')}** "
                                      f"(torch {gres['versions'].get('torch')}, commit "
                                      f"`{gres['git'].get('commit', '?')[:12]}`):")
    out.tables["gpu_floor"] = floor_table(report.floor_rows(gres))
    out.tables["gpu_speedup"] = rows_table(report.speedup_rows(gres))


def run(p: Params, store: Any, profile: str, *, data_dir: str | None = None) -> Result:
    """Run the efficiency benchmark and compute everything chapter 07 reports; record claim C8.

    Parameters
    ----------
    p : Params
        The build's parameters.
    store : Store or None
        The results store (unused: the benchmark's timings belong to the machine that
        builds the book, so nothing is read back; accepted so that every chapter's ``run``
        is called alike).
    profile : str
        The profile's name (recorded with the claim).
    data_dir : str, optional
        The QA data folder (default: ``GNUQ_DATA_DIR``).

    Returns
    -------
    Result
        ``values`` under the page's glue names; ``tables`` ``costs``, ``floor``,
        ``variants``, ``speedup``, ``gap``, ``batching``, ``peers``, ``throughput`` (a table, or a sentence where no records/hour ran),
        ``memory`` and ``operators`` (where measured), ``gpu_floor`` and ``gpu_speedup``
        (where a GPU run is committed); ``data`` ``bench`` (the benchmark's results dict,
        also written to ``07_efficiency.bench.json`` beside the executed chapter) and
        ``gpu_note`` (a sentence on the GPU results, among the tables).
    """
    del store  # nothing of this chapter goes through the results store
    res = run_bench(bench_config_of(p), data_dir=data_dir, progress=False)
    out_json = generated_dir() / "07_efficiency.bench.json"
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(res, indent=1, default=float))
    out = Result(data={"bench": res})
    _overview(res, out)
    _floor(res, out)
    _variants(res, out)
    _speedup(p, res, profile, out)
    _batching(res, out)
    _peers(res, out)
    _committed_peers(out)
    _throughput(res, out)
    _memory(res, out)
    _scaling(res, out)
    _operators(res, out)
    _gpu(out)
    return out


# ----------------------------------------------------------------------------- figures


def _bars(ax: Any, res: dict[str, Any], keys: list[str], kind: str, *, horizontal: bool = False) -> float:
    """One group of bars per key, one bar per model: median with its bootstrap interval of
    ``summary[kind][key]``; returns the bar width. ``horizontal``: the keys down the y axis,
    first on top (long names stay readable on a phone)."""
    width = 0.8 / max(1, len(res["models"]))
    for i, (spec, e) in enumerate(res["models"].items()):
        vals = [e["summary"][kind].get(k) for k in keys]
        x = np.arange(len(keys)) + i * width
        med = [v["median"] if v else np.nan for v in vals]
        err = np.array([[v["median"] - v["ci"][0], v["ci"][1] - v["median"]] if v else [0, 0] for v in vals]).T
        # A percentile bound can equal the median up to rounding (np.percentile against
        # np.median) or, with few clusters, fall just past it: never a negative error bar,
        # which matplotlib refuses with a ValueError.
        err = np.clip(err, 0, None)
        if horizontal:
            ax.barh(x, med, width, xerr=err, capsize=3, label=spec)
        else:
            ax.bar(x, med, width, yerr=err, capsize=3, label=spec)
    centres = np.arange(len(keys)) + width * (len(res["models"]) - 1) / 2
    if horizontal:
        ax.set_yticks(centres)
        ax.invert_yaxis()
    else:
        ax.set_xticks(centres)
    return width


def figure_floor(result: Result) -> Any:
    """Gradient pass ÷ one no-grad forward per parameter group and model, with the ordinary
    backward (3) and the target as lines."""
    res = result.data["bench"]
    fig, ax = book.subplots(panel_height=3.2)
    _bars(ax, res, ["gradient_over_forward", *(f"gradient_{g}_over_forward" for g in bench_config.GRAD_GROUPS)],
          "ratios")
    ax.axhline(3.0, color="k", lw=1, ls=":", label="ordinary backward (3)")
    ax.axhline(bench_config.TARGET_GRAD_OVER_FORWARD, color="r", lw=1, ls="--",
               label=f"target ({bench_config.TARGET_GRAD_OVER_FORWARD:g})")
    ax.set_xticklabels(["all", "no embeddings", "last block", "LM head"])
    ax.set_ylabel("time ÷ one forward")
    ax.legend(loc="upper right")
    return fig


def figure_speedup(result: Result) -> Any:
    """Speed-up of the estimator over each baseline per model (log scale), the paper's range as a band."""
    res = result.data["bench"]
    costs = method_costs()
    base = [k for k in costs if any(k in e["summary"]["speedup"] for e in res["models"].values())]
    fig, ax = book.subplots(panel_height=max(2.4, 0.42 * len(base) + 0.8))
    _bars(ax, res, base, "speedup", horizontal=True)
    ax.axvspan(*bench_config.PAPER_SPEEDUP, color="0.85", zorder=0, label="paper: 46–107×")
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticklabels([textwrap.fill(report.baseline_name(k), 30) for k in base])
    ax.set_xlabel("speed-up of the estimator (×, log scale)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3)  # below: never over a bar
    return fig


def figure_scaling(result: Result) -> Any:
    """Gradient pass and forward against answer length, prompt length and model size (the size
    ladder, with the measured models as triangles)."""
    res = result.data["bench"]
    fig, axes = book.subplots(1, 3, panel_height=2.7)
    for spec, e in res["models"].items():
        sw = e.get("sweeps")
        if not sw:
            continue
        for ax, kind in zip(axes[:2], ("answer", "prompt")):
            pts = sw[kind]
            if not pts:
                continue
            n = [pt["tokens"] for pt in pts]
            (l1,) = ax.plot(n, [pt["gradient"] for pt in pts], "o-", label=f"{spec}: gradient")
            ax.plot(n, [pt["forward"] for pt in pts], "s--", color=l1.get_color(), alpha=0.6, label=f"{spec}: forward")
    for ax, kind in zip(axes[:2], ("answer", "prompt")):
        ax.set_xlabel(f"{kind} tokens")
        ax.set_ylabel("seconds")
    axes[0].set_title("answer length\n(prompt fixed)")
    axes[1].set_title("prompt length\n(8-token answer)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2)
    lad = res.get("ladder", [])
    if lad:
        axes[2].plot([r["params"] for r in lad], [r["gradient"] for r in lad], "o-", label="gradient")
        axes[2].plot([r["params"] for r in lad], [r["forward"] for r in lad], "s--", label="forward")
    for e in res["models"].values():
        axes[2].plot([e["params"]], [e["summary"]["costs"]["estimator"]["median"]], "k^", ms=5)
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("parameters")
    axes[2].set_title("model size\n(▲: models above)")
    axes[2].legend()
    return fig
