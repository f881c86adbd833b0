"""The code version hashes what the code means: docs, comments, imports, messages and moves keep it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnuq_core.store import kinds
from gnuq_core.store.codeversion import INFRASTRUCTURE, code_version, import_closure, meaning


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "gnuq_core" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in {p.parent for p in (root / "gnuq_core").rglob("*.py")}:
        (d / "__init__.py").touch()
    return root


BASE = {
    "pkg/a.py": '"""Module a."""\nfrom gnuq_core.pkg import b\n\n\ndef f(x: float) -> float:\n    """Doc."""\n'
                '    return b.g(x) + 1  # a comment\n',
    "pkg/b.py": "def g(x):\n    if x < 0:\n        raise ValueError(f'x={x} must be >= 0')\n    return 2 * x\n",
}


def version(tmp_path: Path, files: dict[str, str], roots=("gnuq_core.pkg.a",)) -> str:
    root = tmp_path / f"t{len(list(tmp_path.iterdir()))}"
    return code_version(roots, _tree(root, files))


def test_docs_comments_formatting_hints_and_messages_keep_the_version(tmp_path: Path) -> None:
    base = version(tmp_path, BASE)
    edited = dict(BASE)
    edited["pkg/a.py"] = ('"""Module a, documented better."""\n\nfrom gnuq_core.pkg import b  # why\n\n\ndef f(x):\n'
                          '    """Another doc."""\n    # a new comment\n    return (b.g(x)\n            + 1)\n')
    edited["pkg/b.py"] = BASE["pkg/b.py"].replace("must be >= 0", "is negative: pass x >= 0")
    assert version(tmp_path, edited) == base


def test_moving_a_function_within_the_closure_keeps_the_version(tmp_path: Path) -> None:
    base = version(tmp_path, BASE)
    moved = {"pkg/a.py": "from gnuq_core.pkg.c import g\n\n\ndef f(x):\n    return g(x) + 1\n",
             "pkg/b.py": "", "pkg/c.py": BASE["pkg/b.py"]}
    assert version(tmp_path, moved) == base


def test_a_changed_number_or_statement_is_a_new_version(tmp_path: Path) -> None:
    base = version(tmp_path, BASE)
    assert version(tmp_path, {**BASE, "pkg/b.py": BASE["pkg/b.py"].replace("2 * x", "3 * x")}) != base
    assert version(tmp_path, {**BASE, "pkg/b.py": BASE["pkg/b.py"].replace("ValueError", "TypeError")}) != base
    assert version(tmp_path, {**BASE, "pkg/b.py": BASE["pkg/b.py"] + "\nK = 1\n"}) != base


def test_imports_inside_functions_are_followed_and_infrastructure_is_not(tmp_path: Path) -> None:
    files = {"pkg/a.py": "def f():\n    from gnuq_core.pkg.b import g\n    from gnuq_core.repro import paths\n"
                         "    return g()\n", "pkg/b.py": "def g():\n    return 1\n", "repro/paths.py": "X = 1\n"}
    root = _tree(tmp_path / "r", files)
    closure = import_closure(["gnuq_core.pkg.a"], root)
    assert closure == ["gnuq_core.pkg", "gnuq_core.pkg.a", "gnuq_core.pkg.b"]
    assert not any(m.startswith(INFRASTRUCTURE) for m in closure)


def test_an_unknown_root_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="gnuq_core.nope"):
        code_version(["gnuq_core.nope"], tmp_path)


def test_meaning_strips_what_computes_nothing() -> None:
    src = ('"""doc"""\nimport os\n__all__ = ["f"]\n\n\ndef f(a: int) -> int:\n    "doc"\n    print("hi")\n'
           '    import warnings\n    warnings.warn("x")\n    return a\n')
    assert meaning(src) == meaning("def f(a):\n    return a\n")


def test_every_registered_kind_has_a_version() -> None:
    for spec in kinds.KINDS.values():
        assert len(spec.code) == 12, spec.name
        assert all(not m.startswith(INFRASTRUCTURE) for m in import_closure(spec.roots)), spec.name


def test_the_score_graders_are_not_part_of_the_qa_records_code() -> None:
    # grading changes how stored answers are labelled, not what a record holds: it must not orphan the store
    closure = import_closure(kinds.get("qa").roots)
    assert "gnuq_core.qa.grading" not in closure and "gnuq_core.qa.study" not in closure
    assert "gnuq_core.lm.gradient" in closure and "gnuq_core.lm.models" in closure
