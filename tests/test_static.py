"""Static checks of the code that no test run can promise: every name a module uses is defined.

An import lost in a refactoring (a function-level import hoisted to nowhere) fails only when
that branch runs, which may be a chapter of the paper edition long after the tests pass.
"""

from __future__ import annotations

from pyflakes import api, messages, reporter

from gnuq_core.repro.paths import REPO_ROOT

CHECKED = ("gnuq_core", "scripts", "book/_ext", "tests")  # chapter sources: gnuq_core/notebooks
UNDEFINED = (messages.UndefinedName, messages.UndefinedExport, messages.UndefinedLocal)
# A local variable annotation, never evaluated (``from __future__ import annotations``); the
# line is part of the QA results store's code version, which any edit of it would change.
KNOWN = {("gnuq_core/estimators/core.py", "undefined name 'torch'")}


class _Collect(reporter.Reporter):
    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []

    def flake(self, message: messages.Message) -> None:
        if isinstance(message, UNDEFINED):
            path = str(message.filename)
            rel = path[len(str(REPO_ROOT)) + 1:] if path.startswith(str(REPO_ROOT)) else path
            self.found.append((rel, message.message % message.message_args + f" (line {message.lineno})"))

    def unexpectedError(self, filename: str, msg: str) -> None:
        self.found.append((filename, msg))

    def syntaxError(self, filename: str, msg: str, lineno: int, offset: int, text: str) -> None:
        self.found.append((filename, f"syntax error at line {lineno}: {msg}"))


def test_every_name_is_defined() -> None:
    collect = _Collect()
    api.checkRecursive([str(REPO_ROOT / d) for d in CHECKED], collect)
    found = [(f, m) for f, m in collect.found if (f, m.rsplit(" (line", 1)[0]) not in KNOWN]
    assert not found, "names used but never defined:\n" + "\n".join(f"{f}: {m}" for f, m in found)
