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


def test_an_entry_pickled_by_moved_code_is_recomputed(tmp_path) -> None:
    """A refactor that moves a pickled class must not make a warm cache unusable."""
    import warnings

    from gnuq_core.repro.cache import cached, config_key

    folder = tmp_path / "demo"
    folder.mkdir()
    # a pickle that references a module that does not exist (as after a package move)
    bad = b"\x80\x04c" + b"gnuq_core.gone_module\nThing\n."
    (folder / f"{config_key({'n': 1})}.pkl").write_bytes(bad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cached("demo", {"n": 1}, lambda: 42, root=tmp_path) == 42
    assert any("does not load" in str(w.message) for w in caught)
    assert cached("demo", {"n": 1}, lambda: 0, root=tmp_path) == 42  # rewritten, loads now
