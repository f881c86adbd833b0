"""The code version of a stored kind: a hash of what its code *means*, found automatically.

A kind names its root modules (`gnuq_core.store.kinds`). Its code is the import closure
of those roots inside ``gnuq_core`` (imports inside functions included), without the
infrastructure that only moves results around (:data:`INFRASTRUCTURE`: the store, the
record files, caches, the chapter runner, the option rules). The version hashes the *meaning* of that code:

- each module is parsed; docstrings, comments and formatting are gone with the syntax
  tree; ``import`` statements are removed at every depth (they only bind names; the
  closure follows them), and so are ``__all__`` lists;
- type annotations of function arguments and return values are removed (they compute
  nothing; dataclass fields keep theirs, which define the fields);
- a ``raise`` keeps its exception type but not its message, and bare ``warnings.warn`` /
  ``print`` / ``logging`` statements are removed: what an error says changes no number;
- ``module.f`` reads as ``f`` where ``module`` is a ``gnuq_core`` module (``from gnuq_core.lm
  import decoding; decoding.f()`` and ``from gnuq_core.lm.decoding import f; f()`` mean the same);
- the top-level statements of all modules of the closure are hashed as one sorted
  multiset, so moving a function from one module of the closure to another (or to a new
  module the closure imports) keeps the version.

Anything else (a changed constant, an added function in a module of the closure, a
changed default) is a new version: the stored files of the old one are then *orphaned*,
and `gnuq_core.store.carry` carries them across after verifying them.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path
from typing import Callable, Iterable

__all__ = ["INFRASTRUCTURE", "module_file", "gnuq_imports", "import_closure", "meaning", "code_version"]

INFRASTRUCTURE = ("gnuq_core.store", "gnuq_core.repro", "gnuq_core.options")
"""Packages that store, move, display or schedule results without computing them, and the
option rules (`gnuq_core.options`), which accept or refuse an input but never change one: a
tightened bound can refuse a configuration, never alter a stored number."""

_SILENT_CALLS = {"warn", "print", "debug", "info", "warning", "write", "set_postfix", "set_description"}


PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The folder holding ``gnuq_core/`` (modules are found by path, never imported)."""


def module_file(module: str, source_root: Path | None = None) -> Path:
    """The source file of ``module`` (dotted ``gnuq_core`` name) under ``source_root`` (default: this checkout)."""
    base = Path(source_root or PACKAGE_ROOT).joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise ModuleNotFoundError(f"no source file for module {module!r} under {source_root or PACKAGE_ROOT}: fix the "
                              "roots of its kind in gnuq_core/store/kinds.py")


def _is_module(name: str, source_root: Path | None) -> bool:
    try:
        module_file(name, source_root)
    except ModuleNotFoundError:
        return False
    return True


def _parents(module: str) -> list[str]:
    """The packages above ``module`` whose ``__init__`` runs when it is imported (``gnuq_core`` excluded)."""
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(2, len(parts))]


def gnuq_imports(module: str, source_root: Path | None = None) -> set[str]:
    """The ``gnuq_core`` modules (and packages) that ``module`` imports anywhere in its source."""
    tree = ast.parse(module_file(module, source_root).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith("gnuq_core.") and _is_module(n, source_root))
    return found


def import_closure(roots: Iterable[str], source_root: Path | None = None) -> list[str]:
    """Every ``gnuq_core`` module reachable from ``roots`` by imports (and the packages whose
    ``__init__`` those imports run), :data:`INFRASTRUCTURE` excluded; sorted."""
    seen: set[str] = set()
    todo = list(roots)
    for root in todo:
        module_file(root, source_root)  # a root that does not exist is an error, not an empty closure
    while todo:
        name = todo.pop()
        if name in seen or name.startswith(INFRASTRUCTURE) or name == "gnuq_core":
            continue
        seen.add(name)
        todo.extend(gnuq_imports(name, source_root))
        todo.extend(_parents(name))
    return sorted(seen)


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _silent(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` computes nothing: an import, a bare string (a docstring), a bare
    ``warn``/``print``/logging call, an ``__all__`` list."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(stmt, ast.Expr):
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return True
        if isinstance(value, ast.Call) and _call_name(value) in _SILENT_CALLS:
            return True
    return isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)


def module_aliases(tree: ast.Module, is_module: Callable[[str], bool]) -> set[str]:
    """Names that ``tree`` binds to ``gnuq_core`` modules (``from gnuq_core.lm import decoding``,
    ``import gnuq_core.lm.decoding as dec``), anywhere in its source."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.asname for a in node.names if a.asname and a.name.startswith("gnuq_core."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("gnuq_core"):
            out.update(a.asname or a.name for a in node.names if is_module(f"{node.module}.{a.name}"))
    return out


class _Unalias(ast.NodeTransformer):
    """``alias.name`` → ``name`` for module aliases: where a function lives does not count."""

    def __init__(self, aliases: set[str]) -> None:
        self.aliases = aliases

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.aliases:
            return ast.copy_location(ast.Name(id=node.attr, ctx=node.ctx), node)
        return node


def _strip(tree: ast.Module, aliases: set[str] = frozenset()) -> ast.Module:
    """``tree`` without what changes no computed number (see the module docstring), in place."""
    if aliases:
        tree = _Unalias(set(aliases)).visit(tree)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and all(isinstance(s, ast.stmt) for s in value):
                setattr(node, field, [s for s in value if not _silent(s)] or [ast.Pass()])
        if isinstance(node, ast.arg):
            node.annotation = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.Raise):
            if isinstance(node.exc, ast.Call):
                node.exc = ast.Call(func=node.exc.func, args=[], keywords=[])
            node.cause = None
    return tree


def meaning(source: str, is_module: Callable[[str], bool] | None = None) -> list[str]:
    """The top-level statements of a module's source, stripped as the module docstring says,
    each as a canonical dump of its syntax tree. ``is_module`` tells which imported names
    are ``gnuq_core`` modules (their ``alias.f`` reads as ``f``)."""
    tree = ast.parse(source)
    tree = _strip(tree, module_aliases(tree, is_module) if is_module else set())
    return [ast.dump(node, annotate_fields=False, include_attributes=False) for node in tree.body
            if not isinstance(node, ast.Pass)]


@functools.lru_cache(maxsize=None)
def _module_meaning(path: str, mtime: float, source_root: str | None) -> tuple[str, ...]:
    root = Path(source_root) if source_root else None
    return tuple(meaning(Path(path).read_text(encoding="utf-8"), lambda name: _is_module(name, root)))


def code_version(roots: Iterable[str], source_root: Path | None = None) -> str:
    """12 hex digits naming what the import closure of ``roots`` computes (see the module docstring).

    ``source_root`` reads the modules from another checkout (e.g. a git worktree of an old
    commit), to tell whether a change between the two kept the meaning."""
    statements: list[str] = []
    for name in import_closure(roots, source_root):
        path = module_file(name, source_root)
        statements.extend(_module_meaning(str(path), path.stat().st_mtime,
                                          str(source_root) if source_root else None))
    h = hashlib.sha256()
    for stmt in sorted(statements):
        h.update(stmt.encode())
        h.update(b"\0")
    return h.hexdigest()[:12]
