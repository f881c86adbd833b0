"""Every module that computes a stored number is in its store's code list (so a change to it
starts a new store file instead of silently reusing results made by other code)."""

from __future__ import annotations

import ast
import importlib.util

import pytest

from gnuq_core.bayes import validation
from gnuq_core.isotropy import proxy_stored, stored
from gnuq_core.qa import multiple_choice, study
from gnuq_core.repro.results_store import module_file

# Modules that move results around without computing them: the store itself, paths,
# caches and record files. A change there cannot change a stored number.
INFRASTRUCTURE = ("gnuq_core.repro.", )


def _is_module(name: str) -> bool:
    """A plain module (not a package, not a name inside a module)."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # ``pkg.module.function``
        return False
    return bool(spec and spec.origin and spec.origin.endswith(".py") and not spec.origin.endswith("__init__.py"))


def gnuq_imports(module: str) -> set[str]:
    """The gnuq_core modules ``module`` imports anywhere in its source (also inside functions)."""
    tree = ast.parse(module_file(module).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("gnuq_core.") and _is_module(name):
                found.add(name)
    return found


def closure(entries: list[str]) -> set[str]:
    """All gnuq_core modules reachable from ``entries`` by imports, infrastructure excluded."""
    seen, todo = set(), list(entries)
    while todo:
        m = todo.pop()
        if m in seen or m.startswith(INFRASTRUCTURE):
            continue
        seen.add(m)
        todo.extend(gnuq_imports(m))
    return seen


@pytest.mark.parametrize("store_code, entries", [
    (study.STORE_CODE, ["gnuq_core.qa.engine"]),
    (validation.STORE_CODE, ["gnuq_core.bayes.mcmc"]),
    (stored.STORE_CODE, ["gnuq_core.isotropy.stored"]),
    (proxy_stored.STORE_CODE, ["gnuq_core.isotropy.proxy_stored"]),
    (multiple_choice.STORE_CODE, ["gnuq_core.qa.multiple_choice"]),
    (validation.ESTIMATES_CODE, ["gnuq_core.bayes.validation"]),
], ids=["qa", "nuts_reference", "hessian_spectra", "proxy_bias", "qa_mc", "local_estimates"])
def test_store_code_lists_every_computing_module(store_code, entries) -> None:
    missing = closure(entries) - set(store_code)
    assert not missing, f"add to the store's code list: {sorted(missing)}"


def test_gnuq_imports_sees_imports_inside_functions() -> None:
    assert "gnuq_core.lm.gradient" in gnuq_imports("gnuq_core.qa.study")
