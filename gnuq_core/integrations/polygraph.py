"""gnuq's gradient-norm uncertainty inside LM-Polygraph (extra ``polygraph``).

LM-Polygraph (https://github.com/IINemo/lm-polygraph, 0.7.0) splits uncertainty estimation
into *stat calculators*, the expensive passes over a batch, and *estimators*, cheap
functions of their statistics that return one number per answer, higher = more uncertain.
This module plugs gnuq in on both sides:

- `GradientNormCalculator`: for each greedy answer of LM-Polygraph's own
  ``GreedyProbsCalculator`` (stat ``greedy_tokens``) it runs gnuq's forward–backward pass
  (`gnuq_core.lm.gradient.forward_backward`) on the `WhiteboxModel`'s Hugging Face model
  and returns the stats ``gnuq_token_log_probs``, ``gnuq_log_p`` (log p of the answer),
  ``gnuq_grad_log_p_sq`` (‖∇θ log p‖² over the chosen parameters) and ``gnuq_group_sq``
  (‖∇θ log p‖² per parameter group, ``{}`` unless ``per_group=True``);
- `GnuqEpistemic` (‖∇θ p‖² = p² ‖∇θ log p‖²), `GnuqAleatoric` (p (1 − p)),
  `GnuqCombined` (their sum) and `GnuqGradLogPSq` (‖∇θ log p‖²): sequence-level
  estimators built with `gnuq_core.estimators.from_log_p_and_grad_sq`. All four are
  variances, so they are already "higher = more uncertain", the orientation of
  `gnuq_core.qa.scores` too. (p (1 − p) peaks at p = ½: among answers with p < ½, the
  typical case for a whole sequence, a less probable answer gets a *smaller* aleatoric value.)

Options of the estimators: ``group`` takes the norm of one parameter group of the
calculator (it needs ``per_group=True`` and that group in ``groups``); ``normalized`` uses the
length-normalised p̄ = exp(log p / T) as `gnuq_core.estimators.sequence_and_normalized` does;
``log10`` (default on, ignored by the aleatoric part) returns log10 of the value: p² underflows
to 0.0 for long answers, which would tie them all, and every LM-Polygraph metric of ranking
quality (PRR, ROC-AUC, ...) sees only the order, which log10 keeps.

The answer scored is ``greedy_tokens`` as LM-Polygraph generated it, including the EOS token
when generation stopped on it (as ``MaximumSequenceProbability`` does); ``drop_eos=True``
scores it without, as gnuq's own `gnuq_core.lm.decoding.generate` does. The prompt is
``model.tokenize([text])``, one text at a time, because the stat ``input_tokens`` is the
padded batch and its padding cannot be told apart from a pad token that doubles as EOS.

``polygraph_eval`` YAML (its loaders call this module's `load_stat_calculator` and
`load_estimator`)::

    stat_calculators:
      - auto
      - name: GradientNormCalculator
        builder: gnuq_core.integrations.polygraph
        cfg: {groups: [all, last_block], per_group: true}
        stats: [gnuq_token_log_probs, gnuq_log_p, gnuq_grad_log_p_sq, gnuq_group_sq]
        dependencies: [greedy_tokens]
    estimators:
      - name: gnuq_core.integrations.polygraph
        cfg: {kind: epistemic}
      - name: gnuq_core.integrations.polygraph
        cfg: {kind: epistemic, group: last_block}
      - name: gnuq_core.integrations.polygraph
        cfg: {kind: aleatoric}

In Python, `stat_calculator_container` gives the calculator's entry for ``UEManager``'s
``available_stat_calculators``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from lm_polygraph.estimators.estimator import Estimator
from lm_polygraph.stat_calculators.stat_calculator import StatCalculator
from lm_polygraph.utils.factory_stat_calculator import StatCalculatorContainer
from omegaconf import OmegaConf

from gnuq_core.estimators import Uncertainty, log10_combined, sequence_and_normalized
from gnuq_core.lm.gradient import forward_backward

__all__ = ["STATS", "DEPENDENCIES", "GradientNormCalculator", "GnuqEpistemic", "GnuqAleatoric", "GnuqCombined",
           "GnuqGradLogPSq", "ESTIMATORS", "load_stat_calculator", "load_estimator", "stat_calculator_container"]

STATS = ["gnuq_token_log_probs", "gnuq_log_p", "gnuq_grad_log_p_sq", "gnuq_group_sq"]
DEPENDENCIES = ["greedy_tokens"]


class GradientNormCalculator(StatCalculator):
    """log p and ‖∇θ log p‖² of each greedy answer, from gnuq's forward–backward pass.

    Parameters
    ----------
    groups : str, sequence of str or mapping, optional
        Which parameters count (presets or ``{name: [parameter-name prefixes]}``, see
        `gnuq_core.lm.anatomy.resolve_groups`); None: all of them.
    per_group : bool
        Also report ‖∇θ log p‖² per group (stat ``gnuq_group_sq``).
    ghost : {"auto", "always", "never"}
        How the decoder's linear weights get their norms (same numbers either way).
    drop_eos : bool
        Score the answer without a final EOS token (gnuq's convention) instead of with it
        (LM-Polygraph's).
    """

    @staticmethod
    def meta_info() -> tuple[list[str], list[str]]:
        """The stats this calculator returns and the stats it needs."""
        return list(STATS), list(DEPENDENCIES)

    def __init__(self, groups: str | Sequence[str] | Mapping[str, Any] | None = None, per_group: bool = False,
                 ghost: str = "auto", drop_eos: bool = False) -> None:
        super().__init__()
        self.groups, self.per_group, self.ghost, self.drop_eos = groups, per_group, ghost, drop_eos

    def __call__(self, dependencies: dict[str, Any], texts: list[str], model: Any, max_new_tokens: int = 100,
                 **kwargs: Any) -> dict[str, list]:
        """One forward–backward pass per answer of the batch.

        Parameters
        ----------
        dependencies : dict
            Must hold ``greedy_tokens`` (one list of token ids per text).
        texts : list of str
            The batch's input texts, as given to the greedy calculator.
        model : lm_polygraph.WhiteboxModel
            Its ``.model`` (a Hugging Face causal LM) is differentiated; its ``.tokenize``
            gives the prompt ids.
        max_new_tokens : int
            Unused (the answers are already generated).

        Returns
        -------
        dict
            One list entry per text under each name in `STATS`.
        """
        out: dict[str, list] = {k: [] for k in STATS}
        eos = model.tokenizer.eos_token_id
        for text, answer in zip(texts, dependencies["greedy_tokens"]):
            prompt_ids = model.tokenize([text])["input_ids"][0].tolist()
            answer_ids = [int(t) for t in answer]
            if self.drop_eos and len(answer_ids) > 1 and answer_ids[-1] == eos:
                answer_ids = answer_ids[:-1]
            gp = forward_backward(model.model, prompt_ids, answer_ids, groups=self.groups,
                                  per_group=self.per_group, ghost=self.ghost)
            out["gnuq_token_log_probs"].append(list(gp.token_log_probs))
            out["gnuq_log_p"].append(math.fsum(gp.token_log_probs))
            out["gnuq_grad_log_p_sq"].append(gp.grad_sq)
            out["gnuq_group_sq"].append(dict(gp.group_sq))
        return out


class _GnuqEstimator(Estimator):
    """Shared part: one `Uncertainty` per answer from the calculator's stats; subclasses pick a field."""

    name = "Gnuq"

    def __init__(self, group: str | None = None, normalized: bool = False, log10: bool = True) -> None:
        deps = ["gnuq_token_log_probs", "gnuq_grad_log_p_sq"] + (["gnuq_group_sq"] if group else [])
        super().__init__(deps, "sequence")
        self.group, self.normalized, self.log10 = group, normalized, log10

    def __str__(self) -> str:
        opts = ([f"group={self.group}"] if self.group else []) + (["normalized"] if self.normalized else [])
        opts += [] if self.log10 else ["linear"]
        return self.name + (f"({', '.join(opts)})" if opts else "")

    def _value(self, u: Uncertainty) -> float:
        raise NotImplementedError

    def __call__(self, stats: dict[str, Any]) -> np.ndarray:
        """One value per answer, higher = more uncertain.

        Parameters
        ----------
        stats : dict
            The batch's stats, with `GradientNormCalculator`'s among them.

        Returns
        -------
        numpy.ndarray
            float64, one entry per answer.
        """
        values = []
        for i, token_log_probs in enumerate(stats["gnuq_token_log_probs"]):
            if self.group is None:
                g = stats["gnuq_grad_log_p_sq"][i]
            else:
                groups = stats["gnuq_group_sq"][i]
                if self.group not in groups:
                    raise KeyError(f"no gradient norm for group {self.group!r} (have {sorted(groups)}): configure "
                                   "GradientNormCalculator with per_group=True and that group in groups")
                g = groups[self.group]
            seq, norm = sequence_and_normalized(token_log_probs, g)
            values.append(self._value(norm if self.normalized else seq))
        return np.array(values, dtype=np.float64)


class GnuqEpistemic(_GnuqEstimator):
    """Epistemic uncertainty ‖∇θ p‖² = p² ‖∇θ log p‖² of the greedy answer (log10 by default)."""

    name = "GnuqEpistemic"

    def _value(self, u: Uncertainty) -> float:
        return u.log10_epistemic if self.log10 else u.epistemic


class GnuqAleatoric(_GnuqEstimator):
    """Aleatoric uncertainty p (1 − p) of the greedy answer (never in log10: it does not underflow).

    Parameters
    ----------
    normalized : bool
        Use the length-normalised p̄ = exp(log p / T).
    """

    name = "GnuqAleatoric"

    def __init__(self, normalized: bool = False) -> None:
        super().__init__(normalized=normalized, log10=True)  # log10 unused here; True keeps the name plain

    def _value(self, u: Uncertainty) -> float:
        return u.aleatoric


class GnuqCombined(_GnuqEstimator):
    """Combined uncertainty ‖∇θ p‖² + p (1 − p) of the greedy answer (log10 by default)."""

    name = "GnuqCombined"

    def _value(self, u: Uncertainty) -> float:
        return log10_combined(u.log10_epistemic, u.aleatoric) if self.log10 else u.combined


class GnuqGradLogPSq(_GnuqEstimator):
    """‖∇θ log p‖² of the greedy answer, the gradient term without p² (log10 by default)."""

    name = "GnuqGradLogPSq"

    def _value(self, u: Uncertainty) -> float:
        return u.log10_grad_log_p_sq if self.log10 else 10.0 ** u.log10_grad_log_p_sq


ESTIMATORS: dict[str, type[_GnuqEstimator]] = {
    "epistemic": GnuqEpistemic,
    "aleatoric": GnuqAleatoric,
    "combined": GnuqCombined,
    "grad_log_p_sq": GnuqGradLogPSq,
}


def _plain(config: Any) -> dict[str, Any]:
    """A YAML config (OmegaConf) or mapping as a plain dict."""
    if config is None:
        return {}
    if OmegaConf.is_config(config):
        return OmegaConf.to_container(config, resolve=True)
    return dict(config)


def load_stat_calculator(config: Any, environment: Any = None) -> GradientNormCalculator:
    """Build the calculator from its YAML ``cfg`` (called by LM-Polygraph's ``FactoryStatCalculator``).

    Parameters
    ----------
    config : mapping or omegaconf.DictConfig
        Keyword arguments of `GradientNormCalculator`.
    environment : lm_polygraph BuilderEnvironmentStatCalculator, optional
        Unused.
    """
    return GradientNormCalculator(**_plain(config))


def load_estimator(config: Any) -> _GnuqEstimator:
    """Build an estimator from its YAML ``cfg`` (called by LM-Polygraph's ``FactoryEstimator``).

    Parameters
    ----------
    config : mapping or omegaconf.DictConfig
        ``kind`` (one of `ESTIMATORS`: ``"epistemic"``, ``"aleatoric"``, ``"combined"``,
        ``"grad_log_p_sq"``) and the estimator's keyword arguments.

    Raises
    ------
    ValueError
        For a missing or unknown ``kind``.
    """
    cfg = _plain(config)
    kind = cfg.pop("kind", None)
    if kind not in ESTIMATORS:
        raise ValueError(f"estimator kind={kind!r}: use one of {', '.join(map(repr, ESTIMATORS))}")
    return ESTIMATORS[kind](**cfg)


def stat_calculator_container(**cfg: Any) -> StatCalculatorContainer:
    """`GradientNormCalculator`'s entry for ``UEManager(available_stat_calculators=...)``.

    Parameters
    ----------
    **cfg
        Keyword arguments of `GradientNormCalculator`.
    """
    return StatCalculatorContainer(name="GradientNormCalculator", stats=list(STATS),
                                   dependencies=list(DEPENDENCIES), builder=__name__, cfg=cfg)
