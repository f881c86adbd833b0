"""Re-keying stored results after a pure move: carried when only imports/docstrings changed."""

from __future__ import annotations

import json
import subprocess

import pytest

from gnuq_core.repro.rekey import RekeyRefused, _old_hash, defined_code, rekey
from gnuq_core.repro.results_store import code_version

OLD = '"""Old docstring."""\nimport math\n\ndef f(x):\n    """Square root."""\n    return math.sqrt(x)\n'


def _setup(tmp_path, monkeypatch, new_source: str):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "oldmod.py").write_text(OLD)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x", "--allow-empty"],
                   cwd=repo, check=True)
    subprocess.run(["git", "add", "oldmod.py"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "y"], cwd=repo, check=True)
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "rekey_newmod.py").write_text(new_source)
    monkeypatch.syspath_prepend(str(lib))
    store = tmp_path / "store"
    store.mkdir()
    config = {"_code": _old_hash({"oldmod.py": OLD.encode()}), "n": 1}
    lines = [{"type": "header", "config": config, "config_key": "k"}, {"type": "record", "id": "a", "v": 1.5}]
    (store / "k.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    other = {**config, "_code": "something else"}
    (store / "other.jsonl").write_text(json.dumps({"type": "header", "config": other, "config_key": "other"}) + "\n")
    return repo, store


def test_defined_code_ignores_imports_and_docstrings_only() -> None:
    moved = OLD.replace("import math", "import math as math").replace("Square root.", "√x.")
    assert defined_code(OLD) == defined_code(moved.replace("import math as math", "import math"))
    assert defined_code(OLD) == defined_code(OLD.replace('"""Square root."""', '"""Another text."""'))
    assert defined_code(OLD) != defined_code(OLD.replace("sqrt(x)", "sqrt(x + 1)"))


def test_pure_move_is_carried_and_records_untouched(tmp_path, monkeypatch) -> None:
    new = '"""Moved here."""\nfrom math import sqrt\nimport math\n\ndef f(x):\n    """Square root, moved."""\n    return math.sqrt(x)\n'
    repo, store = _setup(tmp_path, monkeypatch, new)
    (target,) = rekey(store, "HEAD", ["oldmod.py"], ["rekey_newmod"], repo=repo)
    header, record = [json.loads(x) for x in target.read_text().splitlines()]
    assert header["config"]["_code"] == code_version(["rekey_newmod"])
    assert header["config"]["n"] == 1 and target.name == f"{header['config_key']}.jsonl"
    assert record == {"type": "record", "id": "a", "v": 1.5}
    assert not (store / "k.jsonl").exists() and (store / "other.jsonl").exists()


def test_changed_code_is_refused(tmp_path, monkeypatch) -> None:
    repo, store = _setup(tmp_path, monkeypatch, OLD.replace("sqrt(x)", "sqrt(2 * x)"))
    with pytest.raises(RekeyRefused, match="different code"):
        rekey(store, "HEAD", ["oldmod.py"], ["rekey_newmod"], repo=repo)
    assert (store / "k.jsonl").exists()
