"""The configuration-keyed cache."""

from __future__ import annotations

from pathlib import Path

from gnuq_core.repro.cache import cached, config_key


def test_key_is_order_independent_and_sensitive() -> None:
    assert config_key({"a": 1, "b": 2}) == config_key({"b": 2, "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})


def test_unchanged_config_is_read_back_changed_recomputes(tmp_path: Path) -> None:
    calls = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert cached("k", {"n": 1}, compute, root=tmp_path) == 1
    assert cached("k", {"n": 1}, compute, root=tmp_path) == 1
    assert cached("k", {"n": 2}, compute, root=tmp_path) == 2
    assert len(calls) == 2
    assert not list(tmp_path.glob("k/*.tmp*")), "no temporary files left behind"
