"""``gnuq bench`` (``make bench``; also ``python -m gnuq_core.bench``): run the efficiency benchmark,
write the JSON, print the tables (see `gnuq_core.bench`).

    gnuq bench --out bench/results.json     # both real models, full settings
    gnuq bench --quick                      # a few minutes: 1 question per dataset
    gnuq bench --tiny                       # dry run on tiny random models

The benchmark's machinery is imported inside `main`, so that ``--help`` and a refused option
answer without loading torch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from gnuq_core.bench.config import BATCH_SIZE, LONG_ANSWER, P_TRUE_SHOTS, REFERENCE_ANSWER_CAP, BenchConfig
from gnuq_core.bench.subjects import RANDOM_ARCHS
from gnuq_core.lm.entailment import NLI_ARCHITECTURES
from gnuq_core.options import OPTIONS, OneLineParser, Rule, flag, output_path, run_command
from gnuq_core.repro.files import write_atomic
from gnuq_core.repro.records import check_output_path

__all__ = ["main", "config_from_args", "ladder_pair", "layout_pair"]


def _parser(prog: str = "gnuq bench") -> argparse.ArgumentParser:
    p = OneLineParser(prog=prog,
                                description="Efficiency benchmark: times the QA engine's own passes, records per "
                                            "hour of the whole pipeline, peak memory.")
    d = BenchConfig()
    p.add_argument("--out", default="bench/results.json", type=output_path, help="results JSON (default bench/results.json)")
    p.add_argument("--models", nargs="+", default=d.models,
                   help="model specs: aliases/paths, tiny-llama, random:<arch> (" + ", ".join(RANDOM_ARCHS) + ")")
    p.add_argument("--datasets", nargs="+", default=d.datasets)
    p.add_argument("--data-dir", default=None, type=output_path)
    p.add_argument("--questions", type=flag("size"), default=d.n_questions, help="questions per dataset")
    p.add_argument("--repeats", type=flag("size"), default=d.repeats)
    p.add_argument("--samples", type=flag("n_samples"), default=d.n_samples, help="N of the timed sampling pass")
    p.add_argument("--max-new-tokens", type=flag("max_new_tokens"), default=d.max_new_tokens)
    p.add_argument("--clusterer", default=d.clusterer, choices=["embedding", "exact"])
    p.add_argument("--answer-lengths", type=flag("max_new_tokens"), nargs="*", default=d.answer_lengths)
    p.add_argument("--prompt-lengths", type=flag("max_new_tokens"), nargs="*", default=d.prompt_lengths)
    p.add_argument("--sweep-repeats", type=flag("size"), default=d.sweep_repeats)
    p.add_argument("--ladder", nargs="*", type=ladder_pair, default=[[h, n] for h, n in d.ladder], help="HIDDENxLAYERS ...")
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--floor-rounds", type=flag("nonnegative_size"),
                   default=d.floor_rounds, help="extra rounds per question of the four passes that split the "
                   "gradient pass's cost above the floor (0: the ordinary repeats only)")
    p.add_argument("--gram-repeats", type=flag("nonnegative_size"), default=d.gram_repeats,
                   help="rounds of the full against symmetric Gram-product timing (default 10; 0: skip)")
    p.add_argument("--no-throughput", action="store_true", help="skip the records/hour runs")
    p.add_argument("--throughput-questions", type=flag("nonnegative_size"), default=0,
                   help="questions per dataset for records/hour (default 0: as --questions)")
    p.add_argument("--layouts", nargs="+", type=layout_pair, default=[[a, b] for a, b in d.layouts],
                   help="records/hour layouts PROCESSESxTHREADS (default 1x2 2x1)")
    p.add_argument("--qa-samples", type=flag("n_samples"), default=d.qa_n_samples, help="N of the records/hour runs (default 10)")
    p.add_argument("--qa-max-new-tokens", type=flag("max_new_tokens"), default=d.qa_max_new_tokens)
    p.add_argument("--skip", nargs="*", default=[], help="timed passes to leave out, e.g. reference")
    p.add_argument("--batch-sizes", type=flag(BATCH_SIZE), nargs="*", default=d.batch_sizes,
                   help="batch sizes of the batched-scoring throughput (default 1 4 16 64; none: skip)")
    p.add_argument("--batch-pairs", type=flag(BATCH_SIZE), default=d.batch_pairs,
                   help="(prompt, answer) pairs each batch size scores (default 64)")
    p.add_argument("--peer-sizes", type=flag(BATCH_SIZE), nargs="*", default=d.peer_sizes,
                   help="batch sizes of gnuq against Opacus, torch.func and the floor (default 1 4 16 64; none: skip)")
    p.add_argument("--peer-memory-gb", type=flag(Rule(above=0, maximum=10**6, why_maximum="a petabyte")),
                   default=d.peer_memory_gb,
                   help="most memory a method that instantiates per-sample gradients may need (default 8)")
    p.add_argument("--peer-repeats", type=flag("size"), default=d.peer_repeats,
                   help="timed rounds of the side-by-side comparison (default 3)")
    p.add_argument("--peer-max-seconds", type=flag(Rule(above=0, maximum=86_400, why_maximum="a day")),
                   default=d.peer_max_seconds, help="a method whose warm-up call takes longer is timed by one more "
                   "call alone, without rounds, interval or memory (default 30)")
    p.add_argument("--no-reference", action="store_true",
                   help="do not time the baselines as their reference implementations run them")
    p.add_argument("--reference-questions", type=flag("nonnegative_size"), default=0,
                   help="questions per dataset for the entailment clustering and few-shot P(True) (default 0: all)")
    p.add_argument("--sequential-timed", type=flag("nonnegative_size"), default=0,
                   help="of the N answers sampled one at a time, how many to time; × N / this stands for all N "
                        "(default 0: all)")
    p.add_argument("--nli-architecture", default=d.nli_architecture, choices=sorted(NLI_ARCHITECTURES),
                   help="cross-encoder of the reference entailment clustering (random weights)")
    p.add_argument("--p-true-shots", type=flag(P_TRUE_SHOTS), default=d.p_true_shots,
                   help="worked examples of the reference few-shot P(True) prompt (default 20)")
    p.add_argument("--long-answer-tokens", type=flag(LONG_ANSWER), default=d.long_answer_tokens,
                   help=f"answer length of the answer-length factor of the gap (default {REFERENCE_ANSWER_CAP}, "
                        "the semantic-entropy reference code's cap; 0: skip)")
    p.add_argument("--device", default=d.device)
    p.add_argument("--dtype", default=d.dtype)
    p.add_argument("--threads", type=flag("threads"), default=None, help="torch threads of the pass timings")
    p.add_argument("--seed", type=flag("seed"), default=d.seed)
    p.add_argument("--quick", action="store_true",
                   help="small run: 1 question per dataset, 1 repeat, short sweeps, no ladder, no memory")
    p.add_argument("--tiny", action="store_true",
                   help="dry run: random tiny models, 1 question, 1 repeat, short sweeps (checks the pipeline)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--memory-worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--throughput-worker", default=None, help=argparse.SUPPRESS)
    return p


def _pair(text: str, first: Rule, second: Rule) -> list[int]:
    """``AxB``: two whole numbers, each checked by its rule."""
    parts = text.lower().split("x")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r}: write it as AxB, e.g. 2x1")
    try:
        return [flag(first)(parts[0]), flag(second)(parts[1])]
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{text!r}: {err}") from None


LADDER_BYTES_PER_WEIGHT = 16
"""What one weight of a ladder model costs during its gradient pass, in bytes (float32 weight,
gradient, the optimiser-free backward's activations and a margin)."""


def _memory_bytes() -> int:
    """This machine's physical memory (bytes; 0 where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 0


def ladder_pair(text: str) -> list[int]:
    """``--ladder HIDDENxLAYERS``: a random Llama of that size must fit in half this machine's memory
    (about 12·hidden²·layers weights at `LADDER_BYTES_PER_WEIGHT` bytes each)."""
    hidden, layers = _pair(text, Rule(minimum=8, maximum=65_536, integer=True), Rule(minimum=1, maximum=1024,
                                                                                      integer=True))
    need, have = LADDER_BYTES_PER_WEIGHT * 12 * hidden**2 * layers, _memory_bytes()
    if have and need > have / 2:
        raise argparse.ArgumentTypeError(f"{text!r}: a model of that size needs about {need / 2**30:,.0f} GiB for its "
                                         f"gradient pass, more than half of this machine's {have / 2**30:,.0f} GiB")
    return [hidden, layers]


def layout_pair(text: str) -> list[int]:
    """``--layouts PROCESSESxTHREADS``: each at most `gnuq_core.options.MAX_THREADS`."""
    return _pair(text, OPTIONS["threads"], OPTIONS["threads"])


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """`BenchConfig` from parsed command-line arguments (``--quick`` and ``--tiny`` shrink it)."""
    cfg = BenchConfig(models=list(args.models), datasets=list(args.datasets), n_questions=args.questions,
                      repeats=args.repeats, n_samples=args.samples, max_new_tokens=args.max_new_tokens,
                      clusterer=args.clusterer, answer_lengths=list(args.answer_lengths),
                      prompt_lengths=list(args.prompt_lengths), sweep_repeats=args.sweep_repeats,
                      ladder=[list(x) for x in args.ladder], memory=not args.no_memory,
                      profile=not args.no_profile, gram_repeats=args.gram_repeats, floor_rounds=args.floor_rounds,
                      skip=list(args.skip), throughput=not args.no_throughput,
                      throughput_questions=args.throughput_questions,
                      layouts=[list(x) for x in args.layouts], qa_n_samples=args.qa_samples,
                      qa_max_new_tokens=args.qa_max_new_tokens, device=args.device, dtype=args.dtype,
                      threads=args.threads, seed=args.seed, reference=not args.no_reference,
                      batch_sizes=list(args.batch_sizes), batch_pairs=args.batch_pairs,
                      peer_sizes=list(args.peer_sizes), peer_memory_gb=args.peer_memory_gb,
                      peer_repeats=args.peer_repeats, peer_max_seconds=args.peer_max_seconds,
                      reference_questions=args.reference_questions, sequential_timed=args.sequential_timed,
                      nli_architecture=args.nli_architecture, p_true_shots=args.p_true_shots,
                      long_answer_tokens=args.long_answer_tokens)
    if args.quick:
        cfg.n_questions, cfg.repeats, cfg.sweep_repeats = 1, 1, 1
        cfg.answer_lengths, cfg.prompt_lengths, cfg.ladder, cfg.memory = [4, 16, 64], [32, 128, 256], [], False
        cfg.skip = sorted(set(cfg.skip) | {"reference"})
        cfg.gram_repeats, cfg.floor_rounds = min(cfg.gram_repeats, 3), min(cfg.floor_rounds, 2)
        cfg.batch_sizes, cfg.batch_pairs, cfg.batch_repeats = [1, 4, 16], 16, 1
    if args.tiny:
        cfg.models = ["random:tiny", "tiny-llama"] if cfg.models == BenchConfig().models else cfg.models
        cfg.n_questions, cfg.repeats, cfg.n_samples, cfg.max_new_tokens = 1, 1, 3, 6
        cfg.synthetic_answer, cfg.synthetic_prompt = 6, (20, 40)
        cfg.answer_lengths, cfg.prompt_lengths, cfg.sweep_repeats = [2, 4], [16, 32], 1
        cfg.ladder, cfg.ladder_repeats, cfg.memory_repeats = [[32, 1], [64, 2]], 1, 1
        cfg.qa_n_samples, cfg.qa_max_new_tokens = 3, 6
        cfg.nli_architecture, cfg.p_true_shots = "tiny", 2
        cfg.long_answer_tokens = min(cfg.long_answer_tokens, 8)
        cfg.batch_sizes, cfg.batch_pairs, cfg.batch_repeats = [1, 2], 4, 1
        cfg.peer_sizes, cfg.peer_repeats, cfg.floor_rounds = [1, 2], 2, 1
    return cfg


def _write(out: Path, res: dict[str, Any]) -> None:
    write_atomic(out, json.dumps(res, indent=1, default=float))


def main(argv: list[str] | None = None, prog: str = "gnuq bench") -> int:
    """Command-line entry point (``gnuq bench``): run, write the JSON, print the tables."""
    args = _parser(prog).parse_args(argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.memory_worker or args.throughput_worker:
        return _worker(args)
    out = Path(args.out)

    def body() -> int:
        from gnuq_core.bench.report import format_table
        from gnuq_core.bench.run import run
        from gnuq_core.lm.models import check_device, check_dtype

        cfg = config_from_args(args)
        check_output_path(args.out)  # every option is checked before a model loads
        check_device(cfg.device)
        check_dtype(cfg.dtype)
        res = run(cfg, data_dir=args.data_dir, progress=not args.quiet,
                  log=None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
                  checkpoint=lambda r: _write(out, r))
        _write(out, res)
        print(format_table(res))
        print(f"wrote {out}")
        return 0

    def interrupted() -> str:
        kept = f"{out} holds the sections finished so far" if out.exists() else "nothing was written"
        return f"interrupted: {kept}; rerun to measure again"

    return run_command(body, interrupted=interrupted)


def _worker(args: argparse.Namespace) -> int:
    """A memory or records/hour worker process the benchmark started (not for users)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.memory_worker:
            from gnuq_core.bench.memory import memory_worker

            print(json.dumps(memory_worker(json.loads(Path(args.memory_worker).read_text()))))
        else:
            from gnuq_core.bench.throughput import throughput_worker

            _write(Path(args.out), throughput_worker(json.loads(Path(args.throughput_worker).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
