"""The ``gnuq`` command line.

::

    gnuq models
    gnuq score --model smollm2-135m-instruct "Who wrote Hamlet?" [--answer TEXT] [--json]
    gnuq score --model smollm2-135m-instruct --prompt-file question.txt   # or - for standard input
    gnuq qa --model gemma3-270m --dataset triviaqa --limit 50 --out runs/gemma_tqa.jsonl
    gnuq chapter run 01 --profile quick       # the book's chapters (gnuq_core.book.runner)
    gnuq study where --dataset triviaqa       # the QA study's store (gnuq_core.chapters.campaign)
    gnuq bench --quick                        # the efficiency benchmark (gnuq_core.bench)
    gnuq store status                         # the results store (gnuq_core.store)

(``python -m gnuq_core.cli ...`` until the console script is installed.) Errors in the
input print one line starting with ``error:`` and exit with status 2, before the model
is loaded wherever the input can be checked without it; messages name CLI flags.
Ctrl-C prints one line (for ``qa``: how many records the output file keeps, and that
rerunning the same command resumes) and exits with status 130, the shell's convention
for SIGINT. ``qa`` refuses a second process writing the same ``--out`` (exit 2, naming
the pid that writes it). Each command imports its machinery (the models, the QA engine,
torch) inside its function, so that ``gnuq --help`` and a refused option answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from gnuq_core import __version__
from gnuq_core.lm.clustering import CLUSTERERS
from gnuq_core.qa.config import QAConfig
from gnuq_core.options import (OneLineParser, UsageError, flag, group_list, groups_value, one_group, output_path,
                               run_command)

__all__ = ["main", "OneLineParser", "UsageError"]

# Library advice rewritten in the command line's words (the library speaks in arguments).
_CLI_WORDS = (
    ("pass answer=None to let the model generate one", "leave out --answer to let the model generate one"),
    ("(style='fewshot', CLI --style fewshot)", "(--style fewshot)"),
    (", or a mapping {name: [parameter-name prefixes]}", ""),
    ("lower max_new_tokens", "lower --max-new-tokens"),
    ("point data_dir / GNUQ_DATA_DIR", "point --data-dir / GNUQ_DATA_DIR"),
    ("pass trust_remote_code=True", "rerun with --trust-remote-code"),
)


def _cli_message(err: BaseException) -> str:
    """One line: the error's message in CLI words, newlines folded."""
    text = str(err) or type(err).__name__
    for library, cli in _CLI_WORDS:
        text = text.replace(library, cli)
    return " ".join(text.split())


def _prompt_file(text: str) -> str:
    """``--prompt-file``: ``-`` for standard input, else a path with ``~`` expanded."""
    return text if text == "-" else str(output_path(text))


def _read_prompt(args: argparse.Namespace) -> str:
    """The prompt: the positional argument, or the UTF-8 text of ``--prompt-file`` (``-``: standard input)."""
    if (args.prompt is None) == (args.prompt_file is None):
        raise UsageError("give the prompt either as an argument or with --prompt-file PATH (- for standard input)")
    if args.prompt is not None:
        return args.prompt
    if args.prompt_file == "-":
        raw, where = sys.stdin.buffer.read(), "--prompt-file - (standard input)"
    else:
        path, where = Path(args.prompt_file), f"--prompt-file {args.prompt_file}"
        if not path.is_file():
            raise UsageError(f"{where}: file not found" if not path.exists() else f"{where} is not a file")
        raw = path.read_bytes()
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise UsageError(f"{where}, line {line}: contains a NUL byte (a binary file, or UTF-16?): save the prompt as "
                         "UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise UsageError(f"{where}, line {line}: not UTF-8 text (byte 0x{raw[err.start]:02x}): save it as UTF-8") from None


def _check_common(args: argparse.Namespace) -> None:
    """Checks of the model options that need no model: --model, --device, --dtype (the numbers
    and --groups are checked as they are parsed: `gnuq_core.options`)."""
    from gnuq_core.lm.models import check_device, check_dtype, resolve_source

    resolve_source(args.model)  # classifies the name (file not found, unknown alias) without loading anything
    check_dtype(args.dtype)
    if args.device_map is None:
        check_device(args.device)


def _check_qa(args: argparse.Namespace) -> None:
    """Checks of ``gnuq qa``'s options, before any data or model is loaded."""
    from gnuq_core.repro.records import check_output_path

    _check_common(args)
    check_output_path(args.out)


def _records_kept(args: argparse.Namespace) -> str:
    """``"N records kept in OUT"`` for a qa run (its shards included), or ``""``."""
    out = getattr(args, "out", None)
    if args.command != "qa" or out is None:
        return ""
    try:
        try:
            from gnuq_core.repro.shards import read_merged as read
        except ImportError:
            from gnuq_core.repro.records import read_records as read
        n = len(read(out)[1]) if Path(out).exists() else 0
    except (OSError, ValueError):
        return ""
    return f"{n} record{'s' if n != 1 else ''} kept in {out}"


def _common(p: argparse.ArgumentParser, several_groups: bool) -> None:
    p.add_argument("--model", required=True, help="alias (see `gnuq models`), .gguf file, model folder or hub id")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", help="float32 (default), float64, bfloat16, float16")
    p.add_argument("--device-map", default=None, help="e.g. 'auto' (passed to from_pretrained)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow custom model code from the hub")
    p.add_argument("--style", default="auto", choices=["auto", "chat", "fewshot"],
                   help="prompt format (auto: chat if the tokenizer has a chat template)")
    p.add_argument("--max-new-tokens", type=flag("max_new_tokens"), default=QAConfig.max_new_tokens)
    if several_groups:
        p.add_argument("--groups", default="all", type=group_list,
                       help="parameters for the epistemic term: all, no_embeddings, last_block, lm_head, embeddings; "
                            "comma-separated for several (implies per-group norms)")
    else:
        p.add_argument("--groups", default="all", type=one_group,
                       help="parameters for the epistemic term: all, no_embeddings, last_block, lm_head, embeddings "
                            "(one; with all, each record keeps every block's norm)")


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

    from gnuq_core.lm.prompts import check_text

    prompt = _read_prompt(args)
    if not prompt.strip():
        raise UsageError("the prompt is empty or whitespace only: give the question text")
    check_text(prompt, "prompt")
    if args.answer is not None:
        if not args.answer.strip():
            raise UsageError("--answer is empty: leave out --answer to let the model generate one, or give a "
                             "non-empty answer")
        check_text(args.answer, "answer (--answer)")
    _check_common(args)
    lm = _load(args)
    style = lm.prompt_style if args.style == "auto" else args.style
    groups = groups_value(args.groups)
    res = score(lm.model, lm.tokenizer, prompt, args.answer, style=style, max_new_tokens=args.max_new_tokens,
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
        extra["p_true"] = bl.p_true(lm.model, lm.tokenizer, prompt, res.answer, style=style)["p_true"]
    if args.json:
        from gnuq_core.qa.engine import clean

        print(json.dumps(clean({"model": args.model, "style": style, "prompt": prompt, **res.to_dict(),
                                "baselines": extra}), indent=2))
        return 0
    print(f"model:  {args.model} ({style} prompt)")
    print(f"prompt: {prompt.strip()}")
    print(f"answer: {res.answer}  [{len(res.answer_ids)} tokens, prediction = {res.prediction}]")
    width = max(len(k) for k in list(rows) + list(extra))
    for k, v in {**rows, **extra}.items():
        print(f"  {k:<{width}}  {_fmt(v)}")
    print("  " + ", ".join(f"{k} {v:.2f} s" for k, v in res.timings.items()))
    return 0


def _cmd_qa(args: argparse.Namespace) -> int:
    from gnuq_core.qa.data import load_qa
    from gnuq_core.qa.study import run_dataset, store_config
    from gnuq_core.repro.records import RecordFile, check_output, new_output
    from gnuq_core.repro.shards import distributed, rank_device, shard_path
    from gnuq_core.store.kinds import get
    from gnuq_core.store.store import OneFile, header_config

    _check_qa(args)  # every option that can be checked without data or model, so errors come first
    items = load_qa(args.dataset, data_dir=args.data_dir, limit=args.limit)
    config = QAConfig(model=args.model, dataset=args.dataset, dtype=args.dtype, style=args.style, max_new_tokens=args.max_new_tokens,
                      groups=args.groups, n_samples=args.samples, temperature=args.temperature,
                      clusterer=args.clusterer, threshold=args.threshold, p_true=not args.no_p_true, seed=args.seed)
    header = header_config(get("qa"), store_config(config, args.dataset))  # what the results store's files hold
    if args.limit == 0:  # the data are there and --out takes this configuration: all but the model is checked
        check_output(args.out, header)
        print("nothing to run: --limit 0 selects no questions (the options, the data and --out are valid; the model "
              "was not loaded)")
        return 0
    # Under torchrun each rank writes its own shard of --out (merged into --out at the end).
    with distributed(args.device, threads=args.threads) as world:
        if world.sharded:
            args.device = rank_device(world, args.device)
        # Fail on a foreign output file (or another job on this shard) before loading the model.
        out = shard_path(args.out, world.rank, world.size) if world.sharded else args.out
        with new_output(out):  # a model that cannot be loaded leaves no header-only file behind
            RecordFile(out, header).close()
            lm = _load(args)
            store = OneFile(args.out, label=f"--out {args.out}")
            run_dataset(lm, items, config, store=store, progress=not args.no_progress, verify=0, world=world,
                        texts=True)
    where = f" (rank {world.rank} of {world.size}; shards merged into {args.out})" if world.sharded else ""
    n = store.reads[-1].computed if items else 0
    print(f"wrote {n} new records to {args.out}{where} ({len(items)} questions in the slice)")
    return 0


SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "chapter": ("gnuq_core.book.runner", "run or list the book's chapters with a profile (papermill)"),
    "study": ("gnuq_core.chapters.campaign", "the QA study's records: fill, merge, where, verify (shardable with torchrun)"),
    "bench": ("gnuq_core.bench.__main__", "the efficiency benchmark (make bench)"),
    "store": ("gnuq_core.store.__main__", "the results store: status, verify, simulate a CPU"),
}
"""Subcommands whose module has its own parser: ``gnuq NAME ...`` is ``python -m MODULE ...``."""


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="gnuq", description="Gradient-norm uncertainty for LLM answers.")
    parser.add_argument("--version", action="version", version=f"gnuq {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, text) in SUBCOMMANDS.items():  # listed in --help; main() hands them on before parsing
        sub.add_parser(name, help=f"{text} (gnuq {name} --help)", add_help=False)
    sub.add_parser("models", help="list model aliases").set_defaults(func=_cmd_models)
    s = sub.add_parser("score", help="answer a prompt and print its uncertainty")
    _common(s, several_groups=True)
    s.add_argument("prompt", nargs="?", default=None, help="the question (or use --prompt-file)")
    s.add_argument("--prompt-file", default=None, metavar="PATH", type=_prompt_file,
                   help="read the prompt from a UTF-8 file (- for standard input), e.g. for very long prompts")
    s.add_argument("--answer", default=None, help="score this answer instead of generating one")
    s.add_argument("--prediction", default="sequence", choices=["sequence", "normalized"],
                   help="p = prod p_t (sequence) or exp(mean log p_t) (normalized)")
    s.add_argument("--p-true", action="store_true", help="also run the P(True) baseline")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=_cmd_score)
    q = sub.add_parser("qa", help="run a benchmark slice into a resumable JSONL file (shardable: "
                                  "torchrun --nproc-per-node N -m gnuq_core.cli qa ...)")
    _common(q, several_groups=False)
    q.add_argument("--dataset", required=True, choices=["truthfulqa", "triviaqa"])
    q.add_argument("--limit", type=flag("limit"), default=None, help="first N questions (≥ 0; 0 checks the options only)")
    q.add_argument("--out", required=True, type=output_path)
    q.add_argument("--data-dir", default=None, type=output_path,
                   help="folder with the dataset files (else GNUQ_DATA_DIR, ../shared/data)")
    q.add_argument("--samples", type=flag("n_samples"), default=QAConfig.n_samples,
                   help=f"samples for the entropy baselines (default {QAConfig.n_samples}; 0: skip)")
    q.add_argument("--temperature", type=flag("temperature"), default=QAConfig.temperature)
    q.add_argument("--clusterer", default=QAConfig.clusterer, choices=CLUSTERERS)
    q.add_argument("--threshold", type=flag("threshold"), default=QAConfig.threshold)
    q.add_argument("--no-p-true", action="store_true")
    q.add_argument("--seed", type=flag("seed"), default=QAConfig.seed)
    q.add_argument("--no-progress", action="store_true")
    q.add_argument("--threads", type=flag("threads"), default=None,
                   help="torch threads per process (default: 1 under torchrun with several ranks, else torch's)")
    q.set_defaults(func=_cmd_qa)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gnuq`` console script (`SUBCOMMANDS` hand their arguments to their module)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:  # its module's import, too, under the one error policy (a missing extra)
        name = argv[0]
        return run_command(lambda: importlib.import_module(SUBCOMMANDS[name][0]).main(argv[1:], prog=f"gnuq {name}"))
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:  # a usage error (one line printed, status 2) or --help (0)
        return int(stop.code or 0)

    def message(err: BaseException) -> str:
        from gnuq_core.lm.prompts import PromptError

        kept = _records_kept(args) if isinstance(err, PromptError) else ""
        # A question that cannot be asked as it is stops every rerun at the same place: say how to get past it.
        return _cli_message(err) + (f"; {kept}, and a rerun stops at this question again: remove it from the data "
                                    "file, or stop before it with --limit" if kept else "")

    def interrupted() -> str:
        kept = _records_kept(args)
        return f"interrupted: {kept}; rerun the same command to resume" if kept else "interrupted"

    return run_command(lambda: args.func(args), bad_input=(OSError,), message=message, interrupted=interrupted)


if __name__ == "__main__":
    sys.exit(main())
