"""The QA claims judged under every reading, and what the verdicts rest on.

Chapter 06 measures C6, C7 and C9 once per reading of `gnuq_core.qa.readings` and records
each claim with its parts and its robustness (`gnuq_core.repro.claims.record`):

- `compound_readings`: C6's or C7's part measurements (`gnuq_core.qa.headline.part_measurements`)
  under every reading of its dataset's grid;
- `transfer_readings`: C9 under the readings that change its number (each dataset's
  graders one at a time, and p), with `transfer_results`;
- `grader_agreement`: Cohen's kappa between the graders of each model and dataset;
- `cap_summary`: the share of answers that stopped at the token cap, and the headline
  AUROCs with those answers left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gnuq_core.qa import grading, headline
from gnuq_core.qa import transfer as _transfer
from gnuq_core.qa.auroc import AurocReplicates
from gnuq_core.qa.readings import P_READINGS, Reading, graders_in, grid, label_column, primary, reading_table
from gnuq_core.repro import claims

__all__ = ["CLAIM_DATASET", "compound_readings", "transfer_results", "transfer_readings", "grader_agreement",
           "cap_summary"]

CLAIM_DATASET = {"C6": "truthfulqa", "C7": "triviaqa"}
"""The dataset each compound QA claim is about."""


def compound_readings(claim: str, tables: Mapping[str, Any], settings: Mapping[str, Any], *, n_boot: int,
                      seed: int, readings: Sequence[Reading] | None = None
                      ) -> tuple[dict[str, claims.Measurement], dict[str, dict[str, claims.Measurement]], str]:
    """``(primary parts, {reading: parts}, primary key)`` of C6 or C7.

    ``tables`` maps each model to its score table (`gnuq_core.qa.study.score_table`) of the
    claim's dataset; every reading of its grid (default `gnuq_core.qa.readings.grid` of the
    graders the tables hold) is applied to each and the parts measured with the same
    bootstrap settings.
    """
    dataset = CLAIM_DATASET[claim]
    readings = list(readings) if readings is not None else grid(dataset, graders=graders_in(tables.values(), dataset))
    out: dict[str, dict[str, claims.Measurement]] = {}
    shared = AurocReplicates(n_boot, seed)  # the readings share most columns: each distinct one is bootstrapped once
    for r in readings:
        per_model = {m: reading_table(t, dataset, r) for m, t in tables.items()}
        out[r.key] = headline.part_measurements(claim, per_model, {**settings, "reading": r.key}, n_boot=n_boot,
                                                seed=seed, replicates=shared)
    key = primary(dataset, graders_in(tables.values(), dataset)).key
    key = key if key in out else readings[0].key  # a caller's own list of readings: its first
    return out[key], out, key


def transfer_results(tables: Mapping[tuple[str, str], Any], models: Sequence[str], *, n_boot: int,
                     seed: int) -> list[Any]:
    """C9's transfers: a threshold on ``epistemic`` fitted on one model, applied to the other,
    each direction on each dataset (``tables``: ``(model, dataset)`` -> score table)."""
    out = []
    if len(models) < 2:
        return out
    for d in sorted({d for _, d in tables}):
        for src, tgt in ((models[0], models[1]), (models[1], models[0])):
            a, b = tables[src, d], tables[tgt, d]
            if a["incorrect"].nunique() < 2 or b["incorrect"].nunique() < 2:
                continue
            out.append(_transfer.transfer(a["epistemic"], a["incorrect"], b["epistemic"], b["incorrect"],
                                          n_boot=n_boot, seed=seed))
    return out


def transfer_readings(tables: Mapping[tuple[str, str], Any], models: Sequence[str], settings: Mapping[str, Any], *,
                      n_boot: int, seed: int) -> tuple[dict[str, dict[str, claims.Measurement]], str]:
    """C9 under the primary reading, each other grader of each dataset (the other dataset at
    its primary), and each other p (`readings.P_READINGS`): ``({reading: {"C9": Measurement}},
    primary key)``.

    C9 is about the raw score ``log10 ‖∇p‖²``, so the combination does not enter it."""
    def key(graders: Mapping[str, str], p: str) -> str:
        return f"p={p}, " + ", ".join(f"{d} grader={g}" for d, g in sorted(graders.items()))

    primary_graders = {d: primary(d, graders_in([t for (_, dd), t in tables.items() if dd == d], d)).grader
                       for d in {d for _, d in tables}}
    variants = [(primary_graders, p) for p in P_READINGS]
    for d in sorted(primary_graders):
        held = graders_in([t for (_, dd), t in tables.items() if dd == d], d)
        variants += [({**primary_graders, d: g}, "sequence") for g in held if g != primary_graders[d]]
    out = {}
    for graders, p in variants:
        judged = {(m, d): reading_table(t, d, Reading(graders[d], p)) for (m, d), t in tables.items()}
        results = transfer_results(judged, models, n_boot=n_boot, seed=seed)
        k = key(graders, p)
        out[k] = {"C9": headline.transfer_measurement(results, {**settings, "reading": k})}
    return out, key(primary_graders, "sequence")


def grader_agreement(tables: Mapping[tuple[str, str], Any]) -> Any:
    """Cohen's kappa and raw agreement of every grader with the primary one, per model and dataset
    (answers a grader leaves out, such as ROUGE ties, are left out of its comparison)."""
    import pandas as pd

    rows = []
    for (model, dataset), t in tables.items():
        first = primary(dataset, graders_in([t], dataset)).grader
        base = label_column(t, dataset, first)
        for name in graders_in([t], dataset):
            if name == first:
                continue
            other = label_column(t, dataset, name)
            keep = base.notna() & other.notna()
            a = grading.agreement((base[keep] == 0).tolist(), (other[keep] == 0).tolist())
            rows.append({"model": model, "dataset": dataset, "grader": name, "kappa": a["kappa"],
                         "agreement": a["agreement"], "accuracy": a["rate_b"], "primary_accuracy": a["rate_a"],
                         "n": a["n"]})
    return pd.DataFrame(rows)


def cap_summary(tables: Mapping[tuple[str, str], Any], cap: int, score_names: Sequence[str], *,
                min_per_class: int, n_boot: int, seed: int, models: Sequence[str]) -> Any:
    """Per dataset: the share of answers that stopped at the ``cap`` (``stop_reason`` ==
    ``"max_new_tokens"``) per model, and each score's mean AUROC over the models with all
    answers and with the capped ones left out."""
    import pandas as pd

    rows = []
    for d in sorted({d for _, d in tables}):
        full = [tables[m, d] for m in models if (m, d) in tables]
        short = [t[t["stop_reason"] != "max_new_tokens"].reset_index(drop=True) for t in full]
        share = {m: float((tables[m, d]["stop_reason"] == "max_new_tokens").mean()) for m in models
                 if (m, d) in tables}
        kw = dict(min_per_class=min_per_class, n_boot=n_boot, seed=seed)
        rep_full, rep_short = AurocReplicates(n_boot, seed), AurocReplicates(n_boot, seed)
        for s in score_names:
            a = headline.mean_auroc_over_models(full, s, replicates=rep_full, **kw)
            b = headline.mean_auroc_over_models(short, s, replicates=rep_short, **kw)
            rows.append({"dataset": d, "score": s, "auroc": a[0], "lo": a[1], "hi": a[2],
                         "auroc_uncapped": b[0], "lo_uncapped": b[1], "hi_uncapped": b[2],
                         **{f"capped {m}": v for m, v in share.items()}, "cap": cap})
    return pd.DataFrame(rows)
