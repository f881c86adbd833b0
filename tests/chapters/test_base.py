"""gnuq_core.chapters.base: the values an exercise quotes come from the profiles themselves."""

from __future__ import annotations

from gnuq_core.chapters import MODULES, derivation, module_for
from gnuq_core.chapters.base import profile_values


def test_profile_values_are_the_profiles_own() -> None:
    values = profile_values(derivation.Params())
    assert values["smoke_n_mc"] == derivation.Params.for_profile("smoke").n_mc
    assert values["quick_n_mc"] == derivation.Params.for_profile("quick").n_mc
    assert set(values) == {f"{p}_{n}" for p in ("smoke", "quick") for n in derivation.Params.names()}


def test_every_chapter_can_quote_its_profiles() -> None:
    for stem in MODULES:
        params = module_for(stem).Params()
        values = profile_values(params)
        assert all(isinstance(v, (int, float, str, bool)) for v in values.values()), stem
