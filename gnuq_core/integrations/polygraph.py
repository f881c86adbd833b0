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

Rows stay aligned: the calculator refuses texts and ``greedy_tokens`` of different lengths,
the estimators refuse stats of different lengths (and against ``greedy_tokens`` when the batch
has it), and a missing stat is named with the calculator that gives it, before any pass
(`gnuq_core.lm.validate`); so does an unknown option in a YAML ``cfg``.

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

In Python, `estimate_uncertainty` is LM-Polygraph's one call of the same name for gnuq's
estimators (LM-Polygraph's own builds its manager from the default calculators only, which
lack gnuq's), and `stat_calculator_container` gives the calculator's entry for
``UEManager``'s ``available_stat_calculators``. Both register LM-Polygraph's default
calculators with ``output_attentions=False``: on transformers 5 its greedy calculator asks
for attentions otherwise, which the default ``sdpa`` attention cannot return.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from lm_polygraph.estimators.estimator import Estimator
from lm_polygraph.stat_calculators.stat_calculator import StatCalculator
from lm_polygraph.utils.factory_stat_calculator import StatCalculatorContainer
from omegaconf import OmegaConf

from gnuq_core.estimators import Uncertainty, log10_combined, sequence_and_normalized
from gnuq_core.lm import validate
from gnuq_core.lm.gradient import GHOST_MODES, forward_backward

__all__ = ["STATS", "DEPENDENCIES", "GradientNormCalculator", "GnuqEpistemic", "GnuqAleatoric", "GnuqCombined",
           "GnuqGradLogPSq", "ESTIMATORS", "load_stat_calculator", "load_estimator", "stat_calculator_container",
           "calculators", "estimate_uncertainty"]

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
        validate.group_spec(groups)
        validate.flag(per_group, "per_group")
        validate.choice(ghost, "ghost", GHOST_MODES)
        validate.flag(drop_eos, "drop_eos")
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

        Raises
        ------
        ValueError, InputTypeError
            Before any pass: ``greedy_tokens`` missing (it comes from LM-Polygraph's
            ``GreedyProbsCalculator``), texts and answers of different lengths, a text that
            is not one, an answer that is not a list of token ids, a model whose ``.model`` is
            not a causal LM (`gnuq_core.lm.validate`).
        """
        answers = _needed(dependencies, DEPENDENCIES, "GradientNormCalculator")["greedy_tokens"]
        texts = validate.text_list(texts, "texts", what="text")
        answers = _token_lists(answers)
        validate.same_length(texts=texts, greedy_tokens=answers)
        for attr in ("model", "tokenize", "tokenizer"):
            if getattr(model, attr, None) is None:
                raise validate.InputTypeError(f"model is {type(model).__name__} without .{attr}: pass LM-Polygraph's "
                                              "WhiteboxModel (lm_polygraph.WhiteboxModel)")
        validate.causal_lm(model.model, "model.model")
        out: dict[str, list] = {k: [] for k in STATS}
        eos = model.tokenizer.eos_token_id
        for text, answer_ids in zip(texts, answers):
            prompt_ids = model.tokenize([text])["input_ids"][0].tolist()
            if self.drop_eos and len(answer_ids) > 1 and answer_ids[-1] == eos:
                answer_ids = answer_ids[:-1]
            gp = forward_backward(model.model, prompt_ids, answer_ids, groups=self.groups,
                                  per_group=self.per_group, ghost=self.ghost)
            out["gnuq_token_log_probs"].append(list(gp.token_log_probs))
            out["gnuq_log_p"].append(math.fsum(gp.token_log_probs))
            out["gnuq_grad_log_p_sq"].append(gp.grad_sq)
            out["gnuq_group_sq"].append(dict(gp.group_sq))
        return out


def _needed(stats: Any, names: Sequence[str], who: str) -> Mapping[str, Any]:
    """``stats`` if it is a mapping holding every name in ``names``; else one error naming the
    missing stats and the calculator that gives them."""
    if not isinstance(stats, Mapping):
        raise validate.InputTypeError(f"{who} was given {type(stats).__name__} stats: pass LM-Polygraph's dict of "
                                      "stats")
    missing = [n for n in names if n not in stats]
    if missing:
        said = ", ".join(f"`{n}` from {_SOURCE.get(n, 'its stat calculator')}" for n in missing)
        raise ValueError(f"{who} needs {said}: add that calculator to the stat calculators ('auto' includes "
                         "LM-Polygraph's own)")
    return stats


_SOURCE = {"greedy_tokens": "LM-Polygraph's `GreedyProbsCalculator`",
           **{n: "gnuq's `GradientNormCalculator` (gnuq_core.integrations.polygraph.stat_calculator_container())"
              for n in STATS}}
"""Which calculator gives each stat this module needs (named in the error when one is missing)."""


def _token_lists(answers: Any) -> list[list[int]]:
    """``greedy_tokens`` as lists of ints: one sequence of token ids per text."""
    if isinstance(answers, (str, bytes, Mapping)) or not isinstance(answers, Sequence):
        raise validate.InputTypeError(f"greedy_tokens is a {type(answers).__name__}: it must be a list with one list "
                                      "of token ids per text (GreedyProbsCalculator's stat)")
    out = []
    for i, answer in enumerate(answers):
        if isinstance(answer, (str, bytes)) or not hasattr(answer, "__iter__"):
            raise validate.InputTypeError(f"greedy_tokens[{i}] is a {type(answer).__name__}, not a list of token ids")
        ids = list(answer)
        if any(isinstance(t, (bool, float, str)) or not hasattr(t, "__index__") for t in ids):
            raise validate.InputTypeError(f"greedy_tokens[{i}] holds something other than integer token ids: "
                                          f"{ids[:5]!r}")
        out.append([int(t) for t in ids])
    return out


class _GnuqEstimator(Estimator):
    """Shared part: one `Uncertainty` per answer from the calculator's stats; subclasses pick a field."""

    name = "Gnuq"

    def __init__(self, group: str | None = None, normalized: bool = False, log10: bool = True) -> None:
        if group is not None and not (isinstance(group, str) and group):
            raise validate.InputTypeError(f"group={group!r}: pass the name of one of GradientNormCalculator's groups "
                                          "(a str), or None for all of them")
        validate.flag(normalized, "normalized")
        validate.flag(log10, "log10")
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

        Raises
        ------
        ValueError, InputTypeError
            For a missing stat (named, with the calculator that gives it), stats of different
            lengths (also against ``greedy_tokens`` when present: the rows must stay the
            answers'), a group the calculator did not report, a value that is not a number.
        """
        stats = _needed(stats, self.stats_dependencies, str(self))
        rows = {k: stats[k] for k in self.stats_dependencies}
        if "greedy_tokens" in stats:
            rows["greedy_tokens"] = stats["greedy_tokens"]
        for k, v in rows.items():
            if isinstance(v, (str, bytes, Mapping)) or not hasattr(v, "__len__"):
                raise validate.InputTypeError(f"stat {k} is a {type(v).__name__}: it must hold one entry per answer")
        validate.same_length(**rows)
        values = []
        for i, token_log_probs in enumerate(stats["gnuq_token_log_probs"]):
            token_log_probs = validate.real_list(token_log_probs, f"gnuq_token_log_probs[{i}]")
            if self.group is None:
                g = validate.real(stats["gnuq_grad_log_p_sq"][i], f"gnuq_grad_log_p_sq[{i}]")
            else:
                groups = stats["gnuq_group_sq"][i]
                if not isinstance(groups, Mapping) or self.group not in groups:
                    have = sorted(groups) if isinstance(groups, Mapping) else type(groups).__name__
                    raise ValueError(f"no gradient norm for group {self.group!r} (have {have}): configure "
                                     "GradientNormCalculator with per_group=True and that group in groups")
                g = validate.real(groups[self.group], f"gnuq_group_sq[{i}][{self.group!r}]")
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
        config = OmegaConf.to_container(config, resolve=True)
    if not isinstance(config, Mapping):
        raise validate.InputTypeError(f"cfg is a {type(config).__name__}: give the options as a mapping "
                                      "(YAML: cfg: {groups: [all, last_block]})")
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
    return GradientNormCalculator(**_options(_plain(config), GradientNormCalculator, "GradientNormCalculator"))


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
    if not isinstance(kind, str) or kind not in ESTIMATORS:
        raise ValueError(f"estimator kind={kind!r}: use one of {', '.join(map(repr, ESTIMATORS))}")
    return ESTIMATORS[kind](**_options(cfg, ESTIMATORS[kind], f"estimator kind={kind!r}"))


def _options(cfg: dict[str, Any], cls: type, who: str) -> dict[str, Any]:
    """``cfg`` if every key is a keyword of ``cls``; else one error listing the accepted ones."""
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = [k for k in cfg if k not in accepted]
    if unknown:
        raise ValueError(f"{who}: unknown option {unknown[0]!r} in cfg; it accepts {', '.join(accepted)}")
    return cfg


def stat_calculator_container(**cfg: Any) -> StatCalculatorContainer:
    """`GradientNormCalculator`'s entry for ``UEManager(available_stat_calculators=...)``.

    Parameters
    ----------
    **cfg
        Keyword arguments of `GradientNormCalculator`.
    """
    return StatCalculatorContainer(name="GradientNormCalculator", stats=list(STATS),
                                   dependencies=list(DEPENDENCIES), builder=__name__, cfg=cfg)


def calculators(**cfg: Any) -> list[StatCalculatorContainer]:
    """LM-Polygraph's default white-box calculators (without attentions and hidden states) and
    `GradientNormCalculator` built with ``cfg``: ``UEManager``'s ``available_stat_calculators``."""
    from lm_polygraph.defaults.register_default_stat_calculators import register_default_stat_calculators

    defaults = register_default_stat_calculators("Whitebox", output_attentions=False, output_hidden_states=False)
    return [*defaults, stat_calculator_container(**cfg)]


def estimate_uncertainty(model: Any, estimator: Estimator, input_text: str, **cfg: Any) -> Any:
    """LM-Polygraph's ``estimate_uncertainty`` for gnuq's estimators (any estimator works).

    Generates the greedy answer to ``input_text`` with LM-Polygraph's ``WhiteboxModel`` and
    scores it with ``estimator`` in one ``UEManager`` run.

    Parameters
    ----------
    model : lm_polygraph.WhiteboxModel
        The model (``WhiteboxModel(hf_model, tokenizer, model_path=...)``).
    estimator : Estimator
        ``GnuqEpistemic()``, ``GnuqAleatoric()``, ... or one of LM-Polygraph's.
    input_text : str
        The prompt, as LM-Polygraph gives it to the model (no chat template is applied).
    **cfg
        Options of `GradientNormCalculator` (``groups``, ``per_group``, ``drop_eos``, ...).

    Returns
    -------
    lm_polygraph.utils.estimate_uncertainty.UncertaintyOutput
        ``uncertainty`` (higher = more uncertain), ``generation_text``, ``generation_tokens``
        (without the final token, as LM-Polygraph returns them), ``model_path``, ``estimator``.
    """
    from lm_polygraph.utils.builder_enviroment_stat_calculator import BuilderEnvironmentStatCalculator
    from lm_polygraph.utils.dataset import Dataset
    from lm_polygraph.utils.estimate_uncertainty import UncertaintyOutput
    from lm_polygraph.utils.manager import UEManager

    if not isinstance(input_text, str):
        raise TypeError(f"input_text must be one prompt (a str), not {type(input_text).__name__}")
    manager = UEManager(Dataset([input_text], [""], batch_size=1), model, [estimator],
                        available_stat_calculators=calculators(**cfg),
                        builder_env_stat_calc=BuilderEnvironmentStatCalculator(model), generation_metrics=[],
                        ue_metrics=[], processors=[], ignore_exceptions=False, verbose=False,
                        max_new_tokens=model.generation_parameters.max_new_tokens)
    manager()
    value = manager.estimations[estimator.level, str(estimator)][0]
    tokens = list(manager.stats.get("greedy_tokens", [[]])[0][:-1])
    return UncertaintyOutput(value, input_text, manager.stats["greedy_texts"][0], tokens, model.model_path,
                             str(estimator))
