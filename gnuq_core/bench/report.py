"""The benchmark's tables: rows (lists of dicts, for the chapter's DataFrames) and plain text.

Every row builder reads a results dict of `gnuq_core.bench.run.run`; `format_table` prints
them all (``make bench``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gnuq_core.bench.config import TARGET_REST_ABOVE_GRAMS
from gnuq_core.bench.summary import TARGET_CAMPAIGN_HOURS, method_costs

__all__ = ["baseline_name", "batching_rows", "gap_rows", "pass_rows", "cost_rows", "variant_rows", "floor_rows", "gram_rows", "speedup_rows", "throughput_rows", "campaign_rows",
           "memory_rows", "section_rows", "format_table", "floor_ratios", "peer_rows", "SHARE_PASSES"]

SHARE_PASSES = ("generate", "sample", "gradient", "p_true", "cluster")


def _f(x: Any, fmt: str = ".3g", unit: str = "") -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:{fmt}}{unit}"


def pass_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model and timed pass: the engine function and its median seconds (IQR) over rounds."""
    rows = []
    for spec, e in res["models"].items():
        funcs = e["questions"][0].get("functions", {}) if e["questions"] else {}
        for p, c in e["summary"]["passes"].items():
            rows.append({"model": spec, "pass": p, "engine function": funcs.get(p, ""), "median (s)": c["median"],
                         "q25 (s)": c["q25"], "q75 (s)": c["q75"]})
    return rows


def cost_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model: the estimator's and each baseline's cost (generation left out)."""
    labels = {k: m["label"] for k, m in method_costs().items()}
    labels["estimator"] = "forward-backward: the estimator (epistemic, aleatoric, combined)"
    rows = []
    for spec, e in res["models"].items():
        for k, c in e["summary"]["costs"].items():
            rows.append({"model": spec, "method": labels.get(k, k), "median (s)": c["median"], "q25 (s)": c["q25"],
                         "q75 (s)": c["q75"]})
    return rows


VARIANTS = {"gradient": "all parameters", "gradient_no_embeddings": "all but the embedding matrix",
            "gradient_last_block": "last decoder block", "gradient_lm_head": "LM head (output matrix)"}


def variant_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model and variant of the epistemic score (the parameters its gradient covers):
    cost in no-grad forwards (with its interval, as text, and alone), median seconds, and
    peak extra memory.

    Variants that were not timed are left out; memory is NaN where it was not measured.
    """
    rows = []
    for spec, e in res["models"].items():
        passes, ratios = e["summary"]["passes"], e["summary"]["ratios"]
        mem = e.get("memory") or {}
        peak, one = mem.get("peak_bytes", {}), mem.get("gradient_bytes")
        for key, words in VARIANTS.items():
            r = ratios.get(f"{key}_over_forward")
            if key not in passes or not r:
                continue
            extra = peak.get(key)
            rows.append({"model": spec, "gradient over": words,
                         "÷ forward [95% CI]": f"{r['median']:.2f} [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]",
                         "÷ forward": r["median"], "median (s)": passes[key]["median"],
                         "extra peak memory (MB)": extra / 1e6 if extra is not None else float("nan"),
                         "÷ one fp32 gradient": extra / one if extra is not None and one else float("nan")})
    return rows


def _rest_verdict(ratios: dict[str, Any]) -> str:
    """Issue 46's target (`TARGET_REST_ABOVE_GRAMS`) on the pass's time above the floor with its
    Gram matrices: "met", "missed", or "" where that split was not timed."""
    rest = ratios.get("gradient_above_grams_over_forward")
    if not rest or not rest.get("n"):
        return ""
    return "met" if rest["median"] <= TARGET_REST_ABOVE_GRAMS else "missed"


def floor_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model: gradient pass ÷ one no-grad forward (wall and CPU clock), target, split, the
    floor (forward + backward into the activations, `gnuq_core.lm.floor.activation_backward`)
    ÷ forward, and how many forwards the gradient pass costs above the floor (paired per
    round, against issue 29's target), split into the ghost norms' Gram products (the floor
    with the Gram matrices, ``backward_floor_grams``, minus the floor) and the rest, and what
    the norm multiplies beyond the floor counted in forwards' multiply-adds (median over the
    questions; with symmetric Gram products: the least an exact Gram-matrix norm computes)."""
    rows = []
    for spec, e in res["models"].items():
        r = e["summary"]["ratios"].get("gradient_over_forward")
        if not r:
            continue
        rc = e["summary_cpu"]["ratios"]["gradient_over_forward"]
        sp = e["summary"]["gradient_split"]
        t = res.get("targets", {}).get(spec, {}).get("gradient_over_forward", {})
        fl = e["summary"]["ratios"].get("backward_floor_over_forward")
        above = e["summary"]["ratios"].get("gradient_above_floor_over_forward")
        ta = res.get("targets", {}).get(spec, {}).get("gradient_above_floor", {})
        rows.append({"model": spec, "gradient ÷ forward": r["median"], "95% CI": f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]",
                     "rounds": r["n"], "CPU-time ratio": rc["median"],
                     "floor ÷ forward": fl["median"] if fl else float("nan"), "target ≤": t.get("threshold"),
                     "verdict": ("met" if t.get("met") else "missed") if t else "",
                     "above floor": above["median"] if above and above["n"] else float("nan"),
                     "above floor 95% CI": (f"[{above['ci'][0]:.2f}, {above['ci'][1]:.2f}]"
                                            if above and above["n"] else "not measured"),
                     "above floor rounds": above["n"] if above else 0,
                     "above-floor target ≤": ta.get("threshold"),
                     **{col: e["summary"]["ratios"][key]["median"] if key in e["summary"]["ratios"] else float("nan")
                        for col, key in (("of it Gram products", "grams_above_floor_over_forward"),
                                         ("of it the rest", "gradient_above_grams_over_forward"))},
                     **{col: e["summary"].get("arithmetic", {}).get(key, {}).get("median", float("nan"))
                        for col, key in (("norm multiply-adds ÷ forward", "norm_over_forward"),
                                         ("symmetric", "norm_symmetric_over_forward"))},
                     "above-floor verdict": ("met" if ta.get("met") else "missed") if ta else "",
                     "rest target ≤": TARGET_REST_ABOVE_GRAMS, "rest verdict": _rest_verdict(e["summary"]["ratios"]),
                     "forward part (s)": sp["forward"]["median"], "backward part (s)": sp["backward"]["median"],
                     "post part (s)": sp["post"]["median"]})
    return rows


def gram_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model timed with `gnuq_core.bench.grams`: the full Gram products of one gradient
    pass ÷ one no-grad forward of the same question (its median-length one, T rows), and the
    fastest symmetric kernel's time ÷ the full products' (each median and 95% interval over
    rounds), beside the fraction of the multiply-adds it would ideally take."""
    rows = []
    for spec, e in res["models"].items():
        g = e.get("grams")
        if not g or not g["kernels"]:
            continue
        full, best = g["kernels"]["full"], g["kernels"].get(g.get("best") or "", None)
        ci = lambda r: f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]"  # noqa: E731
        rows.append({"model": spec, "rows T": g["rows"], "Gram products ÷ forward": full["over_forward"]["median"],
                     "95% CI": ci(full["over_forward"]), "rounds": g["repeats"],
                     "symmetric kernels": ", ".join(k for k in g["kernels"] if k != "full"),
                     "fastest symmetric kernel": g.get("best") or "none",
                     "its time ÷ full": best["ratio"]["median"] if best else float("nan"),
                     "its 95% CI": ci(best["ratio"]) if best else "",
                     "ideal": best["ideal"] if best else float("nan")})
    return rows


def baseline_name(key: str) -> str:
    """A baseline's short name and variant from its cost key (`method_costs`), e.g.
    ``"semantic entropy (reference)"``."""
    passes = key.split("+")
    if {"cluster", "nli_cluster"} & set(passes):
        name = "semantic entropy"
    elif any(p.startswith("p_true") for p in passes):
        name = "P(True)" if "sample" in key else "P(True), zero-shot"
    else:
        name = "predictive entropies"
    variant = method_costs().get(key, {}).get("variant", "optimised")
    return f"{name} ({variant})"


def batching_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model and batch size: answers per second of batched scoring and the speed-up over
    one answer per pass, and what the public boundary's checks cost beside the passes
    (`gnuq_core.bench.batching`; absent in runs made before they were timed)."""
    return [{"model": spec, "batch size": r["batch_size"], "answers / s": r["answers_per_second"],
             "speed-up over B = 1": r["speedup_over_1"], "checks ÷ passes": r.get("checks_share", np.nan),
             "seconds for all": r["seconds"], "answers": r["pairs"]}
            for spec, e in res["models"].items() for r in e.get("batching", [])]


PEER_NAMES = {"gnuq": "gnuq (batched exact norms)", "opacus": "Opacus per-sample gradients",
              "opacus_ghost": "Opacus ghost norms", "torch_func": "torch.func per-example gradients",
              "floor": "floor: forward + backward, no norm"}


NO_GROWTH = "no memory growth seen"
"""A row's note where the call reused memory freed by the calls before it: its in-process peak
(resident memory, a lower bound) is not seen; the table's caption says so once."""


def floor_ratios(rows: list[dict[str, Any]]) -> dict[tuple[int, str], float]:
    """Each timed row of `gnuq_core.bench.side_by_side`, by ``(batch_size, method)``: its
    seconds ÷ the floor's at the same B, from the stored seconds (NaN where the floor did not
    run). A floor timed once, over ``peer_max_seconds``, counts like any other; runs made before
    2026-12-07 stored ``over_floor`` as NaN there, so tables and sentences read the ratio here."""
    floor = {r["batch_size"]: r["seconds"] for r in rows if r["method"] == "floor" and "why" not in r}
    return {(r["batch_size"], r["method"]): r["seconds"] / floor.get(r["batch_size"], float("nan"))
            for r in rows if "why" not in r}


def peer_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model, batch size and method: answers per second with the bootstrap interval of the
    time, the ratio to the floor and the peak extra memory, or why the method did not run
    (`gnuq_core.bench.side_by_side`; absent in runs made before it was timed)."""
    rows = []
    for spec, e in res["models"].items():
        ratios = floor_ratios(e.get("peers", {}).get("rows", []))
        for r in e.get("peers", {}).get("rows", []):
            row = {"model": spec, "B": r["batch_size"], "method": PEER_NAMES.get(r["method"], r["method"])}
            if "why" in r:
                rows.append({**row, "answers / s [95% CI]": "not run", "÷ floor": np.nan, "peak MB": np.nan,
                             "note": f"not run: {r['why']}"})
                continue
            lo, hi = r["ci"]
            peak, note = r["peak_mb"], r.get("note", "")
            if peak == 0:  # the in-process resident set did not grow: the call reused memory freed before it
                peak, note = np.nan, "; ".join(filter(None, [note, NO_GROWTH]))
            speed = (f"{r['answers_per_second']:.3g} (one call)" if len(r.get("runs", [])) == 1 else
                     f"{r['answers_per_second']:.3g} [{r['batch_size'] / hi:.3g}, {r['batch_size'] / lo:.3g}]")
            rows.append({**row, "answers / s [95% CI]": speed,
                         "÷ floor": ratios[r["batch_size"], r["method"]], "peak MB": peak, "note": note})
    return rows


def gap_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model and measured cause of the gap: the factor by which it multiplies the speed-up
    (paired ratio of the costs with and without it; `gnuq_core.bench.summary.gap_factors`)."""
    rows = []
    for spec, e in res["models"].items():
        for cause, r in e["summary"].get("gap", {}).items():
            rows.append({"model": spec, "cause": cause, "factor": r["median"],
                         "95% CI": f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]", "rounds": r["n"]})
    return rows


def speedup_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model, baseline and variant (optimised / reference): baseline cost ÷ estimator
    cost, paired per round."""
    rows = []
    for spec, e in res["models"].items():
        for k, r in e["summary"]["speedup"].items():
            rows.append({"model": spec, "baseline": baseline_name(k), "speed-up": r["median"],
                         "95% CI": f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]", "rounds": r["n"],
                         "with generation": r["with_generation"]["median"],
                         "CPU-time speed-up": e["summary_cpu"]["speedup"].get(k, {}).get("median", np.nan)})
    return rows


def throughput_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model and layout: records per hour of the whole QA pipeline, the share of each
    pass, and the estimated hours of that model's full study."""
    rows = []
    for spec, e in res["models"].items():
        for lay in e.get("throughput", {}).get("layouts", {}).values():
            row = {"model": spec, "layout": f"{lay['processes']} process(es) × {lay['threads']} thread(s)",
                   "records": lay["records"], "wall (s)": lay["wall_seconds"],
                   "records / hour": lay["records_per_hour"], "s / record": lay["seconds_per_record"],
                   "median record (s)": lay["record_seconds"]["median"]}
            sh = lay["shares"]
            for p in (*SHARE_PASSES, *sorted(set(sh) - set(SHARE_PASSES) - {"other"}), "other"):
                if p in sh:
                    row[f"{p} share"] = sh[p]
            row["study (h)"] = lay.get("study_seconds", float("nan")) / 3600.0
            rows.append(row)
    return rows


def campaign_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per layout: the estimated wall time of the full study (every model) on this machine."""
    camp = res.get("campaign", {})
    return [{"layout": k, "records": v["records"], "hours": v["hours"],
             **{f"{s} (h)": h for s, h in v["per_model_hours"].items()}} for k, v in camp.get("layouts", {}).items()]


def memory_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Per model: peak extra memory of each pass (MB) and the gradient pass's ratios."""
    rows = []
    for spec, e in res["models"].items():
        mem = e.get("memory")
        if not mem:
            continue
        row = {"model": spec, "fp32 gradient (MB)": mem["gradient_bytes"] / 1e6}
        row.update({f"{k} (MB)": v / 1e6 for k, v in mem["peak_bytes"].items()})
        row["gradient ÷ one gradient"] = mem["gradient_over_gradient"]
        row["gradient ÷ no-grad forward"] = mem["gradient_over_forward"]
        rows.append(row)
    return rows


def _text_table(rows: list[dict[str, Any]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    cols = list(dict.fromkeys(k for r in rows for k in r))

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return _f(v, ".3g")
        return "" if v is None else str(v)

    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    w = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    out = [indent + "  ".join(c.ljust(w[i]) for i, c in enumerate(cols))]
    out += [indent + "  ".join(x[i].ljust(w[i]) for i in range(len(cols))) for x in cells]
    return out


def format_table(res: dict[str, Any]) -> str:
    """Everything as plain text: passes, costs, ratios, speed-ups, records per hour, the
    full-study estimate, memory and the targets."""
    cfg = res["config"]
    mach = res.get("machine", {})
    load = (mach.get("load_average") or [float("nan")])[0]
    head = (f"gnuq efficiency benchmark: {', '.join(res['models'])} on {cfg['device']} "
            f"({mach.get('cores', '?')} cores, load average {_f(load, '.1f')} at the start)")
    lines = [head]
    for title, rows in (("Timed passes (engine functions), seconds per round", pass_rows(res)),
                        ("Method costs without the shared generation, seconds", cost_rows(res)),
                        ("Gradient pass ÷ one no-grad forward (answer-position head)", floor_rows(res)),
                        ("The Gram products alone, full and symmetric (median-length question)", gram_rows(res)),
                        ("Speed-up of the estimator over each baseline", speedup_rows(res)),
                        (("Records per hour of the whole QA pipeline (N = "
                          f"{cfg.get('qa_n_samples')}, cap {cfg.get('qa_max_new_tokens')} tokens, T = "
                          f"{cfg.get('temperature')}, P(True), clustering)"), throughput_rows(res)),
                        ("Peak extra memory", memory_rows(res))):
        if rows:
            lines += ["", f"== {title}", *_text_table(rows)]
    camp = res.get("campaign", {})
    if camp.get("layouts"):
        sizes = camp.get("study_sizes", {})
        title = (f"== Estimated wall time of the full study ({' + '.join(f'{n} {d}' for d, n in sizes.items())}"
                 " questions per model) on this machine")
        lines += ["", title, *_text_table(campaign_rows(res))]
        best = camp["best"]
        lines.append(f"  fastest layout {best['layout']}: {best['hours']:.1f} h for {best['records']} records "
                     f"(target <= {TARGET_CAMPAIGN_HOURS:g} h)")
    for row in res.get("ladder", []):
        lines.append(f"  ladder {row['hidden']}x{row['layers']} ({row['params'] / 1e6:.1f}M): forward "
                     f"{row['forward']:.4f} s, gradient {row['gradient']:.4f} s, ratio {row['ratio']:.2f}")
    tg = res.get("targets", {})
    if tg:
        lines += ["", "== Targets"]
        for spec, ts in tg.items():
            items = ts.items() if spec != "campaign" else [("campaign_hours", ts)]
            for k, t in items:
                verdict = ("met" if t["met"] else "MISSED") if "met" in t else (
                    "within paper range" if t["within_paper_range"] else "below paper range")
                lines.append(f"  {spec} {k}: {_f(t['value'])} -> {verdict}")
    rows = section_rows(res)
    if rows:
        lines += ["", "== Where the run's wall time went, seconds", *_text_table(rows)]
    lines.append(f"wall time {_f(res.get('wall_seconds', float('nan')), '.0f')} s")
    return "\n".join(lines)


def section_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's parts with their wall seconds and share of the run (``section_seconds``),
    largest first; empty for runs made before it was recorded."""
    wall = res.get("wall_seconds") or float("nan")
    out = [{"part": name, "seconds": round(sec, 1), "share": f"{sec / wall:.0%}" if np.isfinite(wall) else "—"}
           for name, sec in res.get("section_seconds", {}).items()]
    return sorted(out, key=lambda r: -r["seconds"])
