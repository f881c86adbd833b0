"""The campaign of chapter 06 (``gnuq study``): its QA records filled, merged, located and
verified outside the notebook, exactly as the chapter's build of a profile reads them.

* `fill` (``gnuq study fill``): compute the missing records of a dataset, sharded under
  ``torchrun --nproc-per-node N`` (`gnuq_core.repro.shards`), resumable after a kill;
  ``verify`` checks every stored record's exact part (``gnuq store verify qa --all``);
* `campaign_progress`, `progress_table` (``gnuq study where``): how far a store file is, and
  what is left, from the records' own timings.

The chapter's parameters are `gnuq_core.chapters.qa.Params`; its questions and records go
through `gnuq_core.qa.study`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.chapters.qa import Params, qa_config
from gnuq_core.options import OneLineParser, flag, output_path, run_command
from gnuq_core.qa.data import load_qa
from gnuq_core.qa.study import run_dataset, select_items, store_config
from gnuq_core.repro.profiles import parse_overrides
from gnuq_core.repro.shards import distributed, merge_shards, rank_device, read_merged, shard_paths
from gnuq_core.store import ResultsDisagree, Store, open_store

__all__ = ["SIZE_PARAMETER", "chapter_parameters", "chapter_items", "store_file", "fill", "campaign_progress",
           "progress_table", "main"]


SIZE_PARAMETER = {"truthfulqa": "n_truthfulqa", "triviaqa": "n_triviaqa"}


def chapter_parameters(profile: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Chapter 06's parameters in the build of ``profile``, with ``overrides``, as a plain dict:
    `gnuq_core.chapters.qa.Params` (the paper edition's defaults, the profile's entry over them;
    a bad value or unknown name is a `~gnuq_core.chapters.base.ChapterError`)."""
    return Params.for_profile(profile, overrides).to_dict()


def _config(model: str, params: Mapping[str, Any]) -> Any:
    return qa_config(model, Params(**params))  # params: a plain dict of chapter_parameters


def chapter_items(dataset: str, params: Mapping[str, Any], data_dir: str | Path | None = None) -> list[Any]:
    """The questions chapter 06 asks of ``dataset``: the first ``n_<dataset>`` (all for 0) of
    the seeded order (`select_items`)."""
    return select_items(load_qa(dataset, data_dir=data_dir), params[SIZE_PARAMETER[dataset]] or None, params["seed"])


def store_file(config: Any, dataset: str, store: Store | None = None) -> Path:
    """The store file of ``config`` on ``dataset`` under the current code (default: the results
    store's ``results/qa/<key>.jsonl``; shards ``<key>.rank{r}of{N}.jsonl`` next to it)."""
    return (store or open_store("full")).path("qa", store_config(config, dataset))


def fill(profile: str, dataset: str, models: Sequence[str] | None = None, *, overrides: Mapping[str, Any] | None = None,
         device: str = "cpu", threads: int | None = None, verify: int = 0, data_dir: str | Path | None = None,
         store_root: Path | None = None, progress: bool = True, read_only: bool = False,
         verify_all: bool = False) -> dict[str, int]:
    """Compute chapter 06's records of ``dataset`` for ``models`` (default: the chapter's) as
    the chapter would, outside the notebook; returns the number of records per model.

    They go where the chapter's build of ``profile`` reads them (`gnuq_core.store.open_store`:
    the results store for the paper edition, the local cache otherwise; ``store_root``
    another folder). With ``read_only`` nothing is computed: the stored records are read and
    checked (with ``verify_all`` or ``GNUQ_STORE_VERIFY=all``, every one of them: ``verify``). Under ``torchrun
    --nproc-per-node N`` the work is sharded (`gnuq_core.repro.shards`): rank r computes
    the questions at positions ≡ r (mod N) of the chapter's seeded order into its own shard,
    and rank 0 merges the shards at the end. Resumable after a kill at any moment.
    """
    # Looked up when called: the option battery stands in for `load_model` on its module.
    from gnuq_core.lm.models import load_model

    params = chapter_parameters(profile, overrides)
    items = chapter_items(dataset, params, data_dir)
    done: dict[str, int] = {}
    with distributed(device, threads or params.get("torch_threads") or None) as world:
        dev = rank_device(world, device)
        for model in models or params["models"]:
            loaded = load_model(model, device=dev)
            store = open_store(profile, root=store_root)
            store.verify_all = True if verify_all else store.verify_all
            recs = run_dataset(loaded, items, _config(model, params), progress=progress,
                               store=store, verify=verify, world=world,
                               read_only=read_only)
            done[model] = len(recs)
            del loaded
    return done


def campaign_progress(records: Sequence[Mapping[str, Any]], ids: Sequence[str]) -> dict[str, float]:
    """How far a store file is, and what is left, from the records' own timings.

    Returns ``{"done", "total", "process_hours", "median_seconds", "hours_left"}``:
    ``process_hours`` sums each record's ``timings.total`` (the seconds its process spent on
    it); ``hours_left`` is the missing questions times the median record time, also in
    process-hours (wall time ≈ process-hours ÷ the number of ranks running side by side).
    """
    want = set(ids)
    secs = [float(r["timings"]["total"]) for r in records
            if r.get("id") in want and "total" in r.get("timings", {})]
    done = len({r["id"] for r in records if r.get("id") in want})
    median = float(np.median(secs)) if secs else float("nan")
    return {"done": done, "total": len(want), "process_hours": sum(secs) / 3600, "median_seconds": median,
            "hours_left": (len(want) - done) * median / 3600}


def progress_table(rows: Sequence[tuple[str, str, Mapping[str, float]]], ranks: int = 2) -> str:
    """The campaign's progress as a Markdown table, one row per ``(model, dataset, progress)``
    (`campaign_progress`), with a total row; wall time is process time ÷ ``ranks`` (ranks
    side by side, one thread each)."""
    def h(x: float) -> str:
        return "—" if not x or not np.isfinite(x) else f"{x:.1f}"

    lines = ["| model × dataset | records | process-hours so far | median s per record | process-hours left |",
             "| --- | --- | --- | --- | --- |"]
    for model, dataset, pr in rows:
        med = f"{pr['median_seconds']:.1f}" if np.isfinite(pr["median_seconds"]) else "—"
        lines.append(f"| {model} × {dataset} | {pr['done']:,} of {pr['total']:,} | {h(pr['process_hours'])} | {med} "
                     f"| {h(pr['hours_left'])} |")
    spent = sum(pr["process_hours"] for _, _, pr in rows)
    left = sum(pr["hours_left"] if np.isfinite(pr["hours_left"]) else 0.0 for _, _, pr in rows)
    done = sum(pr["done"] for _, _, pr in rows)
    total = sum(pr["total"] for _, _, pr in rows)
    left_text = f"{left:.1f} (≈ {left / ranks:.1f} h)" if done < total else "—"
    lines.append(f"| **all** | {done:,} of {total:,} | {spent:.1f} (≈ {spent / ranks:.1f} h of wall time on {ranks} "
                 f"ranks) | | {left_text} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, prog: str = "gnuq study") -> int:
    """``gnuq study fill|merge|where|verify ...`` (see `fill`; also ``python -m gnuq_core.chapters.campaign``)."""

    parser = OneLineParser(prog=prog, description="Fill chapter 06's QA records outside the notebook (shardable with "
                                                  "torchrun --nproc-per-node N).")
    sub = parser.add_subparsers(dest="command", required=True)
    cmds = {"fill": "compute the missing records (resumable; sharded under torchrun)",
            "merge": "merge the shards a killed sharded run left into the main file",
            "where": "print the store file, the number of questions and how many are done",
            "verify": "check every stored record: its exact part recomputed from its stored answers, a sample whole "
                      "(resumable; sharded under torchrun; writes <file>.verified.json)"}
    for name, text in cmds.items():
        c = sub.add_parser(name, help=text)
        c.add_argument("--profile", default="full", help="chapter profile (default: full)")
        if name in ("where", "verify"):
            c.add_argument("--dataset", required=True, nargs="+", choices=list(SIZE_PARAMETER))
            c.add_argument("--markdown", action="store_true",
                           help="print the progress of every model and dataset as one Markdown table")
        else:
            c.add_argument("--dataset", required=True, choices=list(SIZE_PARAMETER))
        c.add_argument("--model", action="append", default=None,
                       help="model alias or path (repeatable; default: the chapter's models)")
        c.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                       help="override one chapter parameter, as the chapter runner's --set")
        c.add_argument("--data-dir", default=None, type=output_path, help="dataset folder (else GNUQ_DATA_DIR)")
        c.add_argument("--store-root", type=output_path, default=None, help="results store folder (default results/)")
        if name in ("fill", "verify"):
            c.add_argument("--device", default="cpu", help="cpu, or cuda (each rank uses GPU LOCAL_RANK)")
            c.add_argument("--threads", type=flag("threads"), default=None,
                           help="torch threads per process (default 1 under torchrun with several ranks)")
            c.add_argument("--verify", type=flag("nonnegative_count"), default=0, help="stored records recomputed and compared (rank 0)")
            c.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    def body() -> int:
        overrides = parse_overrides(args.overrides)
        if args.command in ("fill", "verify"):
            # One process group for the whole command: under torchrun, destroying it after one
            # dataset and making it again for the next left both ranks waiting forever in a
            # barrier (seen on a two-dataset run, 2026-12-03).
            with distributed(args.device, args.threads):
                for dataset in [args.dataset] if isinstance(args.dataset, str) else args.dataset:
                    done = fill(args.profile, dataset, args.model, overrides=overrides, device=args.device,
                                threads=args.threads, verify=args.verify, data_dir=args.data_dir,
                                store_root=args.store_root, progress=not args.no_progress,
                                read_only=args.command == "verify", verify_all=args.command == "verify")
                    print(f"{dataset}: " + "; ".join(f"{m}: {n} records" for m, n in done.items()))
            return 0

        params = chapter_parameters(args.profile, overrides)
        store = open_store(args.profile, root=args.store_root)
        if args.command == "merge":
            ids = [it.id for it in chapter_items(args.dataset, params, args.data_dir)]
            for model in args.model or params["models"]:
                path = store_file(_config(model, params), args.dataset, store)
                print(f"{model}: {merge_shards(path, ids)} records merged into {path}")
            return 0
        rows = []
        for dataset in args.dataset:
            ids = [it.id for it in chapter_items(dataset, params, args.data_dir)]
            for model in args.model or params["models"]:
                path = store_file(_config(model, params), dataset, store)
                pr = campaign_progress(read_merged(path)[1], ids)
                rows.append((model, dataset, pr))
                if args.markdown:
                    continue
                shards = ", ".join(p.name for p in shard_paths(path)) or "none"
                cost = (f"; {pr['process_hours']:.1f} process-hours so far, median {pr['median_seconds']:.1f} s per "
                        f"record, about {pr['hours_left']:.1f} process-hours left (wall time: divide by the ranks)"
                        if pr["done"] else "")
                print(f"{model} × {dataset}: {path} ({pr['done']} of {pr['total']} questions done; "
                      f"shards: {shards}{cost})")
        if args.markdown:
            print(progress_table(rows))
        return 0

    return run_command(body, bad_input=(ResultsDisagree,),
                       interrupted="interrupted: every record written so far is kept; rerun the same command to resume")


if __name__ == "__main__":
    raise SystemExit(main())
