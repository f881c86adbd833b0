"""The configuration of a QA run: THE source of its defaults (the paper's settings).

`QAConfig` holds everything that changes the numbers of a run; ``gnuq qa``, chapter 06
(`gnuq_core.chapters.qa`), its campaign and the benchmark (`gnuq_core.bench.config`) all take
their defaults from it. Nothing here needs torch, so the command line reads it at start.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from gnuq_core.lm.clustering import CLUSTERERS
from gnuq_core.lm.models import check_dtype
from gnuq_core.lm.prompts import STYLES
from gnuq_core.options import OPTIONS, PRESET_GROUPS, OptionError, Rule

__all__ = ["QAConfig"]

_CHOICES = {"style": Rule(choices=("auto", *STYLES)),
            "groups": Rule(choices=PRESET_GROUPS), "clusterer": Rule(choices=CLUSTERERS)}
_NUMBERS = {name: OPTIONS[name] for name in ("max_new_tokens", "n_samples", "temperature", "threshold")}


@dataclass(frozen=True)
class QAConfig:
    """Everything that changes the numbers of a run (stored in the output file's header).

    Attributes
    ----------
    model, dataset, dtype, style : str
        Model alias/path, dataset name, weights dtype, prompt style (``"auto"`` = the
        model's default).
    max_new_tokens : int
    groups : str
        Parameter-group preset for the epistemic term.
    n_samples : int
        Samples for the sampling baselines (0 = skip them); 10, as for semantic entropy in the paper.
    temperature : float
    clusterer : str
        ``"embedding"`` (MiniLM) or ``"exact"``.
    threshold : float
        Cosine threshold of the embedding clusterer.
    p_true : bool
        Run the P(True) pass.
    seed : int
    """

    model: str
    dataset: str = ""
    dtype: str = "float32"
    style: str = "auto"
    max_new_tokens: int = 32
    groups: str = "all"
    n_samples: int = 10
    temperature: float = 1.0
    clusterer: str = "embedding"
    threshold: float = 0.85
    p_true: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        """Refuse a configuration no run can use, in one line naming the field (the rules of
        `gnuq_core.options`), before any model is loaded."""
        for name in ("model", "dataset", "dtype", *_CHOICES):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise OptionError(f"QAConfig.{name} must be a string (got {value!r})")
        if not self.model.strip():
            raise OptionError("QAConfig.model is empty: give a model alias or a path")
        try:
            check_dtype(self.dtype)
        except ValueError as err:
            raise OptionError(f"QAConfig.dtype: {err}") from None
        for name, rule in (*_CHOICES.items(), *_NUMBERS.items()):
            rule.check(f"QAConfig.{name}", getattr(self, name))
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or not 0 <= self.seed < 2**63:
            raise OptionError(f"QAConfig.seed must be a whole number in [0, 2⁶³) (a run's seed, or a question's "
                              f"from question_seed) (got {self.seed!r})")
        if not isinstance(self.p_true, bool):
            raise OptionError(f"QAConfig.p_true must be True or False (got {self.p_true!r})")
