"""Reproducibility contracts: when does a recomputed item agree with its stored result?

- :class:`Exact`: deterministic arithmetic on fixed inputs; on *any* machine every number
  agrees within ``atol + rtol·|stored|``.
- :class:`Chaotic`: computations that amplify last-bit differences (training, MCMC, sampled
  tokens, float32 Lanczos): bit-identical to the stored digits on the platform that made
  the item (`gnuq_core.repro.fingerprint`); elsewhere a rule decides: :class:`SeedSpread`
  (the stored seeds' spread), :class:`MonteCarloError`, :class:`Within` (a tolerance where
  the chaos is small) or :class:`GivenInputs` (the fields exact given the stored chaotic
  outputs, such as the gradient of a stored answer, recomputed from them).

A comparison gives :class:`Deviation` values in the contract's units (``≤ 1`` passes).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

__all__ = ["Deviation", "Context", "Contract", "Exact", "Chaotic", "ForeignRule", "SeedSpread", "MonteCarloError",
           "Within", "GivenInputs", "leaves", "worst", "field_pattern"]

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Deviation:
    """One compared value: where, both values, and the deviation in the contract's units
    (``≤ 1`` passes; ``inf`` for a value that cannot agree, such as a different string)."""

    path: str
    stored: Any
    fresh: Any
    units: float

    def text(self) -> str:
        """``".rho[3]: stored 0.91, recomputed 0.87 (2.4× the allowed)"``."""
        how = "differs" if math.isinf(self.units) else f"{self.units:.3g}× the allowed"
        return f"{self.path or '(record)'}: stored {self.stored!r}, recomputed {self.fresh!r} ({how})"


def leaves(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, value)`` for every leaf of nested dicts and lists (``".a.b[2]"``)."""
    if isinstance(obj, Mapping):
        for k in sorted(obj, key=str):
            yield from leaves(obj[k], f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, obj


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))  # stored files hold NaN and inf as null


def _structure(stored: Any, fresh: Any, path: str = "") -> list[Deviation]:
    """Keys present on one side only and lists of different lengths."""
    out: list[Deviation] = []
    if isinstance(stored, Mapping) and isinstance(fresh, Mapping):
        for k in sorted(set(stored) ^ set(fresh), key=str):
            out.append(Deviation(f"{path}.{k}", stored.get(k, "(missing)"), fresh.get(k, "(missing)"), math.inf))
        for k in sorted(set(stored) & set(fresh), key=str):
            out += _structure(stored[k], fresh[k], f"{path}.{k}")
    elif isinstance(stored, (list, tuple)) and isinstance(fresh, (list, tuple)):
        if len(stored) != len(fresh):
            out.append(Deviation(path, f"{len(stored)} values", f"{len(fresh)} values", math.inf))
        else:
            for i, (a, b) in enumerate(zip(stored, fresh)):
                out += _structure(a, b, f"{path}[{i}]")
    return out


def _paired(stored: Record, fresh: Record) -> tuple[list[Deviation], list[tuple[str, Any, Any]]]:
    """Structural mismatches, and the pairs of leaves present on both sides."""
    f = dict(leaves(fresh))
    return _structure(stored, fresh), [(p, s, f[p]) for p, s in leaves(stored) if p in f]


def _tolerance_units(s: Any, f: Any, rtol: float, atol: float) -> float:
    """``|s − f|`` over ``atol + rtol·|s|``; two missing values agree, a missing and a number do not."""
    if _missing(s) and _missing(f):
        return 0.0
    if _number(s) and _number(f) and not (_missing(s) or _missing(f)):
        diff, allowed = abs(float(s) - float(f)), atol + rtol * abs(float(s))
        return 0.0 if diff == 0 else (diff / allowed if allowed > 0 else math.inf)
    return 0.0 if s == f else math.inf


@functools.lru_cache(maxsize=256)
def field_pattern(pattern: str) -> re.Pattern[str]:
    """A field pattern as a regular expression: ``[*]`` any list index, ``*`` any text."""
    text = re.escape(pattern).replace(r"\[\*\]", r"\[\d+\]").replace(r"\*", ".*")
    return re.compile(text)


def worst(deviations: Sequence[Deviation]) -> Deviation | None:
    """The largest deviation (``None`` when nothing was compared)."""
    return max(deviations, key=lambda d: d.units, default=None)


@dataclass(frozen=True)
class Context:
    """What a rule may use besides the two records: every stored record of the file."""

    stored_records: Sequence[Record] = ()


class Contract:
    """Base of the contracts: ``compare(stored, fresh, same_platform, context)`` gives deviations."""

    name: str = ""

    def compare(self, stored: Record, fresh: Record, same_platform: bool, context: Context) -> list[Deviation]:
        raise NotImplementedError

    def rule(self, same_platform: bool) -> str:
        """The comparison in words, for the page and the error message."""
        raise NotImplementedError

    def needs_inputs(self, same_platform: bool) -> bool:
        """Whether the check recomputes from the stored item's own inputs (`GivenInputs`)."""
        return False


@dataclass(frozen=True)
class Exact(Contract):
    """Every number agrees within ``atol + rtol·|stored|`` on any machine; other values are equal."""

    rtol: float
    atol: float
    name: str = field(default="exact", init=False)

    def compare(self, stored: Record, fresh: Record, same_platform: bool, context: Context) -> list[Deviation]:
        bad, pairs = _paired(stored, fresh)
        return bad + [Deviation(p, s, f, _tolerance_units(s, f, self.rtol, self.atol)) for p, s, f in pairs]

    def rule(self, same_platform: bool) -> str:
        return f"every number within {self.atol:.0e} + {self.rtol:.0e}·|stored| (exact arithmetic, any machine)"


class ForeignRule:
    """How a chaotic kind is compared on a platform other than the one that made it."""

    def compare(self, stored: Record, fresh: Record, context: Context) -> list[Deviation]:
        raise NotImplementedError

    def rule(self) -> str:
        raise NotImplementedError

    needs_inputs: bool = False


@dataclass(frozen=True)
class Chaotic(Contract):
    """Bit-identical to the stored digits on the platform that made the item; ``foreign`` elsewhere.

    On the same platform every number agrees to the ``digits`` the store keeps (a relative
    ``10^(1−digits)``: a flip of the last digit) or within ``atol``, a floor for rounding noise
    (a rank-deficient matrix's zero eigenvalues come out near 1e-16 or 1e-22 by BLAS threads).
    """

    foreign: ForeignRule
    digits: int = 7
    atol: float = 0.0
    name: str = field(default="chaotic", init=False)

    def compare(self, stored: Record, fresh: Record, same_platform: bool, context: Context) -> list[Deviation]:
        if not same_platform:
            return self.foreign.compare(stored, fresh, context)
        bad, pairs = _paired(stored, fresh)
        rtol = 10.0 ** (1 - self.digits)
        return bad + [Deviation(p, s, f, _tolerance_units(s, f, rtol, self.atol)) for p, s, f in pairs]

    def rule(self, same_platform: bool) -> str:
        if same_platform:
            floor = f" (or within {self.atol:.0e}: rounding noise)" if self.atol else ""
            return f"every value equal to the stored one to its {self.digits} significant digits{floor}"
        return self.foreign.rule()

    def needs_inputs(self, same_platform: bool) -> bool:
        return not same_platform and self.foreign.needs_inputs


@dataclass(frozen=True)
class SeedSpread(ForeignRule):
    """Each number is what a retrained replicate can give, judged by the file's other stored seeds.

    For items that are independent replicates (one per seed) of a chaotic computation. On
    another platform a seed's training takes another path, and it may

    1. end close to where it ended before (the synthetic MLPs: the recomputed numbers lie
       within a fraction of the seeds' spread of the stored ones), or
    2. end in another basin: the sentence-encoder heads land in one of a few minima, and a
       seed recomputed elsewhere reproduces *another* seed's stored result to seven digits.

    A number passes if either holds: ``|fresh − stored| ≤ k·sd`` (1), or the recomputed
    *and* the stored value lie within the range of the other stored seeds widened by
    ``k·sd`` (2), where ``sd`` is the other seeds' standard deviation and both bounds are
    widened by ``atol + rtol·|value|`` (a quantity every seed gives identically must then
    agree to that; ``rtol`` covers the stored digits) and by a field's ``floors`` entry (the
    resolution of an accuracy over a few hundred examples). An altered stored number breaks
    both (1) and (2) once it moves more than ``k·sd`` from what the seeds allow. Its units:
    the smaller of the two distances over what each allows.
    """

    k: float = 3.0
    atol: float = 1e-9
    rtol: float = 1e-6
    min_items: int = 5
    floors: tuple[tuple[str, float], ...] = ()  # (field path, e.g. ".train_acc", absolute allowance)

    def compare(self, stored: Record, fresh: Record, context: Context) -> list[Deviation]:
        others = [r for r in context.stored_records if r is not stored and r != stored]
        if len(others) + 1 < self.min_items:
            raise ValueError(f"the seed-spread rule needs at least {self.min_items} stored items, the file has "
                             f"{len(others) + 1}")
        values: dict[str, list[float]] = {}
        for rec in others:
            for p, v in leaves(rec):
                if _number(v) and not _missing(v):
                    values.setdefault(p, []).append(float(v))
        bad, pairs = _paired(stored, fresh)
        out = list(bad)
        for p, s, f in pairs:
            seen = values.get(p, [])
            if not (_number(s) and _number(f)) or _missing(s) or _missing(f) or not seen:
                out.append(Deviation(p, s, f, _tolerance_units(s, f, self.rtol, self.atol)))
                continue
            s, f = float(s), float(f)
            spread = float(np.std(seen, ddof=1)) if len(seen) > 1 else 0.0
            slack = self.atol + self.rtol * max(abs(s), abs(f)) + dict(self.floors).get(p, 0.0)
            paired = abs(f - s) / (self.k * spread + slack)
            lo, hi = min(seen), max(seen)
            band = max(max(0.0, lo - x, x - hi) for x in (s, f)) / (self.k * spread + slack)
            out.append(Deviation(p, s, f, min(paired, band)))
        return out

    def rule(self) -> str:
        return (f"every number within {self.k:g} standard deviations of its stored value, or, with its stored value, "
                f"within the other stored seeds' range widened by {self.k:g} standard deviations (a retrained "
                "replicate)" + "".join(f"; {p.lstrip('.')} also within {v:g}" for p, v in self.floors))


@dataclass(frozen=True)
class MonteCarloError(ForeignRule):
    """The Monte Carlo estimates agree within ``k`` combined standard errors; other fields are not compared.

    ``errors(record) -> {path: standard error}`` names the compared estimates and their
    Monte Carlo standard errors in one run; a deviation counts in units of
    ``k·√(se_stored² + se_fresh²)``.
    """

    errors: Callable[[Record], Mapping[str, float]]
    k: float = 5.0
    what: str = "the Monte Carlo estimates"

    def compare(self, stored: Record, fresh: Record, context: Context) -> list[Deviation]:
        se_s, se_f = self.errors(stored), self.errors(fresh)
        s_leaves, f_leaves = dict(leaves(stored)), dict(leaves(fresh))
        out = []
        for p in sorted(se_s):
            if p not in f_leaves or p not in s_leaves:
                out.append(Deviation(p, s_leaves.get(p, "(missing)"), f_leaves.get(p, "(missing)"), math.inf))
                continue
            s, f, allowed = s_leaves[p], f_leaves[p], self.k * math.sqrt(se_s[p] ** 2 + se_f.get(p, se_s[p]) ** 2)
            out.append(Deviation(p, s, f, _tolerance_units(s, f, 0.0, allowed)))
        return out

    def rule(self) -> str:
        return f"{self.what} within {self.k:g} combined Monte Carlo standard errors (another run of the sampler)"


@dataclass(frozen=True)
class Within(ForeignRule):
    """The selected numbers of a recomputation agree with the stored ones within a tolerance.

    For a chaotic kind whose chaos is small where it is compared (Lanczos coefficients of a
    fixed operator, a converged optimum's estimates): the same recomputation as on the
    platform that made the item, compared at ``atol + rtol·|stored|`` instead of the stored
    digits. Paths not selected by ``fields`` (patterns such as ``".q.*.est.*"``;
    ``"*"``: all; ``[*]``: any list index) are not compared.
    """

    fields: Sequence[str] = ("*",)
    rtol: float = 1e-3
    atol: float = 1e-6
    what: str = "every number"

    def selected(self, path: str) -> bool:
        """Whether ``path`` matches one of ``fields`` (``*``: any text, ``[*]``: any list index)."""
        return any(field_pattern(p).fullmatch(path) for p in self.fields)

    def compare(self, stored: Record, fresh: Record, context: Context) -> list[Deviation]:
        s_leaves, f_leaves = dict(leaves(stored)), dict(leaves(fresh))
        return [Deviation(p, s_leaves[p], f_leaves.get(p, "(missing)"), math.inf if p not in f_leaves else
                          _tolerance_units(s_leaves[p], f_leaves[p], self.rtol, self.atol))
                for p in sorted(p for p in s_leaves if self.selected(p))]

    def rule(self) -> str:
        return f"{self.what} within {self.atol:.0e} + {self.rtol:.0e}·|stored| (recomputed as on the platform that made it)"


@dataclass(frozen=True)
class GivenInputs(Within):
    """The fields that are exact given the item's stored chaotic outputs agree within a tolerance.

    The check recomputes them from the stored records themselves (the gradient pass and the
    log-probabilities of the stored answers, teacher-forced; the spectra of a stored trained
    network), never the chaotic outputs (sampled tokens, the training run), which are
    compared only on the platform that made them.
    """

    what: str = "the fields computed from the stored outputs"
    needs_inputs: bool = True

    def rule(self) -> str:
        return (f"{self.what} within {self.atol:.0e} + {self.rtol:.0e}·|stored|, recomputed from the stored outputs "
                "(those themselves are compared only on the platform that made them)")
