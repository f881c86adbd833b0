"""The ``gnuq`` command line.

::

    gnuq models
    gnuq score --model smollm2-135m-instruct "Who wrote Hamlet?" [--answer TEXT] [--json]
    gnuq qa --model gemma3-270m --dataset triviaqa --limit 50 --out runs/gemma_tqa.jsonl

(``python -m gnuq_core.cli ...`` until the console script is installed.) Errors in the
input print one line starting with ``error:`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict
from typing import Any

__all__ = ["main"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="alias (see `gnuq models`), .gguf file, model folder or hub id")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", help="float32 (default), float64, bfloat16, float16")
    p.add_argument("--device-map", default=None, help="e.g. 'auto' (passed to from_pretrained)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow custom model code from the hub")
    p.add_argument("--style", default="auto", choices=["auto", "chat", "fewshot"],
                   help="prompt format (auto: chat if the tokenizer has a chat template)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--groups", default="all",
                   help="parameters for the epistemic term: all, no_embeddings, last_block, lm_head, embeddings; "
                        "comma-separated for several (implies per-group norms)")


def _load(args: argparse.Namespace) -> Any:
    from transformers.utils import logging as hf_logging

    from gnuq_core.lm.models import load_model

    hf_logging.disable_progress_bar()  # "Loading weights" bars would drown the table
    return load_model(args.model, device=args.device, dtype=args.dtype, device_map=args.device_map,
                      trust_remote_code=args.trust_remote_code)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.4g}" if (v == 0 or 1e-3 <= abs(v) < 1e5) else f"{v:.3e}"
    return str(v)


def _cmd_models(_: argparse.Namespace) -> int:
    from gnuq_core.lm.models import ALIASES

    for a in ALIASES.values():
        print(f"{a.name:24s} {a.description}")
    print("also accepted: a .gguf file, a local model folder (config.json), or a Hugging Face hub id 'org/name'")
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from gnuq_core.lm import baselines as bl
    from gnuq_core.lm.scoring import score

    lm = _load(args)
    style = lm.prompt_style if args.style == "auto" else args.style
    groups = args.groups.split(",") if "," in args.groups else (None if args.groups == "all" else args.groups)
    res = score(lm.model, lm.tokenizer, args.prompt, args.answer, style=style, max_new_tokens=args.max_new_tokens,
                groups=groups, per_group=isinstance(groups, list), prediction=args.prediction)
    u = res.uncertainty
    rows: dict[str, Any] = {
        "p": u.p, "log p": u.log_p, "log10 ||grad log p||^2": u.log10_grad_log_p_sq,
        "log10 epistemic": u.log10_epistemic, "epistemic": u.epistemic, "aleatoric": u.aleatoric,
        "combined": u.combined,
    }
    for g, v in u.group_sq_norms.items():
        rows[f"log10 ||grad log p||^2 [{g}]"] = math.log10(v) if v > 0 else -math.inf
    extra: dict[str, Any] = {}
    if res.generation is not None:
        extra = {"max_sequence_probability": bl.max_sequence_probability(res.generation.token_log_probs),
                 "mean_token_entropy": bl.mean_token_entropy(res.generation.token_entropies),
                 "perplexity": bl.perplexity(res.generation.token_log_probs)}
    if args.p_true:
        extra["p_true"] = bl.p_true(lm.model, lm.tokenizer, args.prompt, res.answer, style=style)["p_true"]
    if args.json:
        from gnuq_core.qa.engine import clean

        print(json.dumps(clean({"model": args.model, "style": style, "prompt": args.prompt, **res.to_dict(),
                                "baselines": extra}), indent=2))
        return 0
    print(f"model:  {args.model} ({style} prompt)")
    print(f"prompt: {args.prompt.strip()}")
    print(f"answer: {res.answer}  [{len(res.answer_ids)} tokens, prediction = {res.prediction}]")
    width = max(len(k) for k in list(rows) + list(extra))
    for k, v in {**rows, **extra}.items():
        print(f"  {k:<{width}}  {_fmt(v)}")
    print("  " + ", ".join(f"{k} {v:.2f} s" for k, v in res.timings.items()))
    return 0


def _cmd_qa(args: argparse.Namespace) -> int:
    from gnuq_core.qa.data import load_qa
    from gnuq_core.qa.engine import QAConfig, run_benchmark
    from gnuq_core.repro.records import RecordFile
    from gnuq_core.repro.shards import distributed, shard_path

    items = load_qa(args.dataset, data_dir=args.data_dir, limit=args.limit)
    config = QAConfig(model=args.model, dataset=args.dataset, dtype=args.dtype, style=args.style, max_new_tokens=args.max_new_tokens,
                      groups=args.groups, n_samples=args.samples, temperature=args.temperature,
                      clusterer=args.clusterer, threshold=args.threshold, p_true=not args.no_p_true, seed=args.seed)
    # Under torchrun each rank writes its own shard of --out (merged into --out at the end).
    with distributed(args.device, threads=args.threads) as world:
        if world.sharded and args.device == "cuda":
            args.device = f"cuda:{world.local_rank}"
        # Fail on a foreign output file (or another job on this shard) before loading the model.
        out = shard_path(args.out, world.rank, world.size) if world.sharded else args.out
        check = RecordFile(out, {**asdict(config)})
        getattr(check, "close", lambda: None)()
        lm = _load(args)
        n = run_benchmark(lm, items, config, args.out, progress=not args.no_progress, world=world)
    where = f" (rank {world.rank} of {world.size}; shards merged into {args.out})" if world.sharded else ""
    print(f"wrote {n} new records to {args.out}{where} ({len(items)} questions in the slice)")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gnuq", description="Gradient-norm uncertainty for LLM answers.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("models", help="list model aliases").set_defaults(func=_cmd_models)
    s = sub.add_parser("score", help="answer a prompt and print its uncertainty")
    _common(s)
    s.add_argument("prompt")
    s.add_argument("--answer", default=None, help="score this answer instead of generating one")
    s.add_argument("--prediction", default="sequence", choices=["sequence", "normalized"],
                   help="p = prod p_t (sequence) or exp(mean log p_t) (normalized)")
    s.add_argument("--p-true", action="store_true", help="also run the P(True) baseline")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=_cmd_score)
    q = sub.add_parser("qa", help="run a benchmark slice into a resumable JSONL file (shardable: "
                                  "torchrun --nproc-per-node N -m gnuq_core.cli qa ...)")
    _common(q)
    q.add_argument("--dataset", required=True, choices=["truthfulqa", "triviaqa"])
    q.add_argument("--limit", type=int, default=None)
    q.add_argument("--out", required=True)
    q.add_argument("--data-dir", default=None, help="folder with the dataset files (else GNUQ_DATA_DIR, ../shared/data)")
    q.add_argument("--samples", type=int, default=5, help="samples for the entropy baselines (0: skip)")
    q.add_argument("--temperature", type=float, default=1.0)
    q.add_argument("--clusterer", default="embedding", choices=["embedding", "exact"])
    q.add_argument("--threshold", type=float, default=0.85)
    q.add_argument("--no-p-true", action="store_true")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--no-progress", action="store_true")
    q.add_argument("--threads", type=int, default=None,
                   help="torch threads per process (default: 1 under torchrun with several ranks, else torch's)")
    q.set_defaults(func=_cmd_qa)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gnuq`` console script."""
    from gnuq_core.qa.data import DataNotFound
    from gnuq_core.lm.models import ModelNotFound
    from gnuq_core.lm.prompts import PromptError
    from gnuq_core.repro.records import ConfigMismatch

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except (ModelNotFound, PromptError, ConfigMismatch, DataNotFound, FloatingPointError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
