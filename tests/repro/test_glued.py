"""Reading glued values back from an executed notebook."""

from __future__ import annotations

import json
from pathlib import Path

from gnuq_core.repro.glued import glued_text


def test_glued_text(tmp_path: Path) -> None:
    out = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "rho"}},
           "data": {"application/papermill.record/text/plain": "0.5"}}
    nb = {"cells": [{"cell_type": "code", "outputs": [out]}, {"cell_type": "markdown"}]}
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    assert glued_text(tmp_path / "a.ipynb") == {"rho": "0.5"}
