"""Once: bring the files made before the reproducibility contracts into the store's format.

Until 2026-12-01 (commit ``d3f743a``) a stored file was keyed by a hash of the raw bytes of
a hand-kept module list, its configuration hashed with raw float ``repr``s, and its records
did not say which platform made them. :func:`migrate` checks that each such file was made
by exactly the code of that commit (its ``_code`` must equal the hash of the listed files
at the commit, read with ``git show``), then rewrites it

- with a canonical key (`gnuq_core.store.keys`) over its configuration and its *legacy*
  code version, so that it is an orphan of today's code, which a verified carry
  (`gnuq_core.store.carry`) moves across; nothing is reused without that verification;
- with every record stamped ``_made`` = the legacy code and this machine's fingerprint:
  the campaign that made them ran on this machine type, and the carry checks that
  inference, since on the same platform every recomputed item must agree to the stored
  digits (a record made elsewhere would fail).

Files that are not legacy files are left alone.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from gnuq_core.repro.paths import REPO_ROOT
from gnuq_core.repro.records import read_records
from gnuq_core.store import kinds as registry
from gnuq_core.store.keys import canonical, config_key
from gnuq_core.store.store import Store

__all__ = ["LEGACY_COMMIT", "LEGACY_CODE", "legacy_hash", "migrate"]

LEGACY_COMMIT = "d3f743a"
"""The last commit whose store used byte hashes of hand-kept module lists."""

_PROXY = ["gnuq_core.isotropy.proxy_stored", "gnuq_core.isotropy.proxy", "gnuq_core.isotropy.text_proxy",
          "gnuq_core.isotropy.classifier", "gnuq_core.isotropy.ggn_laplace", "gnuq_core.isotropy.damped",
          "gnuq_core.isotropy.mlp", "gnuq_core.isotropy.train", "gnuq_core.stats"]
_HESSIAN = ["gnuq_core.isotropy.stored", "gnuq_core.isotropy.damping", "gnuq_core.isotropy.spectra",
            "gnuq_core.isotropy.lm_hessian", "gnuq_core.isotropy.classifier", "gnuq_core.isotropy.ggn_laplace",
            "gnuq_core.isotropy.proxy", "gnuq_core.isotropy.damped", "gnuq_core.isotropy.mlp",
            "gnuq_core.isotropy.train", "gnuq_core.stats", "gnuq_core.lm.models", "gnuq_core.qa.data"]
LEGACY_CODE: dict[str, list[str]] = {
    "proxy_synthetic": _PROXY, "proxy_text": _PROXY,
    "hessian_exact": _HESSIAN, "hessian_slq_mlp": _HESSIAN, "hessian_slq_lm": _HESSIAN,
    "nuts_reference": ["gnuq_core.bayes.mcmc", "gnuq_core.bayes.bnn", "gnuq_core.bayes.synthetic"],
    "local_estimates": ["gnuq_core.bayes.validation", "gnuq_core.bayes.laplace", "gnuq_core.bayes.bnn",
                        "gnuq_core.bayes.synthetic", "gnuq_core.bayes.mcmc", "gnuq_core.isotropy.mlp",
                        "gnuq_core.isotropy.damped"],
    "qa": ["gnuq_core.qa.engine", "gnuq_core.lm.scoring", "gnuq_core.lm.decoding", "gnuq_core.lm.gradient",
           "gnuq_core.lm.anatomy", "gnuq_core.estimators.core", "gnuq_core.estimators.hooks", "gnuq_core.lm.prompts",
           "gnuq_core.lm.baselines", "gnuq_core.lm.clustering", "gnuq_core.lm.models", "gnuq_core.qa.scores"],
    "qa_mc": ["gnuq_core.qa.multiple_choice", "gnuq_core.lm.gradient", "gnuq_core.lm.decoding", "gnuq_core.lm.prompts",
              "gnuq_core.lm.anatomy", "gnuq_core.lm.models", "gnuq_core.estimators.core",
              "gnuq_core.estimators.hooks", "gnuq_core.qa.data"],
}
"""Each kind's hand-kept module list at :data:`LEGACY_COMMIT` (what its ``_code`` hashed)."""


def legacy_hash(modules: list[str], commit: str = LEGACY_COMMIT, repo: Path = REPO_ROOT) -> str:
    """The legacy code version: the raw bytes of ``modules`` at ``commit``, in sorted order of their names."""
    h = hashlib.sha256()
    for module in sorted(modules):
        path = module.replace(".", "/") + ".py"
        out = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True)
        if out.returncode != 0:
            raise ValueError(f"cannot read {path} at commit {commit}: {out.stderr.decode().strip()}")
        h.update(out.stdout)
    return h.hexdigest()[:12]


def migrate(root: Path, *, dry_run: bool = False) -> list[Path]:
    """Rewrite the legacy files under ``root`` as orphans of today's code (see the module docstring); the new paths."""
    store = Store(root, label="the results store")
    fid = store.fingerprint_id
    moved: list[Path] = []
    for kind, modules in LEGACY_CODE.items():
        registry.get(kind)
        expected = legacy_hash(modules)
        for path in sorted((root / kind).glob("*.jsonl")):
            if ".rank" in path.name or ".carry" in path.name:
                continue
            config, records = read_records(path)
            if config.get("_code") != expected:
                print(f"migrate: {path.relative_to(root)}: not made by the code of {LEGACY_COMMIT} "
                      f"(_code {config.get('_code')}), left alone", file=sys.stderr)
                continue
            new_config = canonical(config)
            target = path.with_name(f"{config_key(new_config)}.jsonl")
            moved.append(target)
            print(f"migrate: {path.relative_to(root)} -> {target.name} ({len(records)} records made by the code of "
                  f"{LEGACY_COMMIT}, stamped with platform {fid})")
            if dry_run:
                continue
            lines = [json.dumps({"type": "header", "config": new_config, "config_key": config_key(new_config)})]
            for r in records:
                body = {k: v for k, v in r.items() if k not in ("type", "id")}
                body["_made"] = {"code": expected, "fp": fid}
                lines.append(json.dumps({"type": "record", "id": r["id"], **body}))
            tmp = target.with_suffix(".migrating")
            tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
            tmp.replace(target)
            if target != path:
                path.unlink()
    if moved and not dry_run:
        store.register_fingerprint(note=f"records made before the reproducibility contracts (commit {LEGACY_COMMIT}) "
                                        "carry this platform by inference, which the verified carry checks: on the "
                                        "same platform every recomputed item must agree to the stored digits")
    return moved
