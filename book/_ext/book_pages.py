"""Sphinx extension: executed chapters read as book pages (narrative first, with a banner).

For every ``.ipynb`` page, the notebook text Sphinx reads goes through
:func:`gnuq_core.book.pages.prepare_notebook`: parameter cells removed, code inputs
hidden unless tagged, and the profile banner (from ``<chapter>.provenance.json`` beside
the notebook) under the title, with links to the chapter's Jupytext source and to a
notebook that runs outside a checkout (`gnuq_core.book.runnable`, written beside the
executed one). The executed notebook on disk is not changed.

A published copy names its repository in ``GNUQ_REPOSITORY_URL``
(`gnuq_core.repro.repository`): the header then gets the repository and issues buttons,
and each banner a Binder link to the chapter's runnable notebook.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gnuq_core.book.pages import prepare_notebook
from gnuq_core.repro.provenance import load_record
from gnuq_core.repro.repository import RepositoryError, published_repository, theme_options
from gnuq_core.book.runnable import write_runnable


def _prepare(app: Any, docname: str, source: list[str]) -> None:
    path = Path(app.env.doc2path(docname))
    if path.suffix != ".ipynb":
        return
    record = load_record(path.with_name(f"{path.stem}.provenance.json"))
    chapter_source = Path(app.srcdir) / "gnuq_core" / "notebooks" / f"{path.stem}.py"
    link = os.path.relpath(chapter_source, path.parent) if chapter_source.exists() else None
    repository = published_repository()
    runnable = launch = None
    if chapter_source.exists():  # a notebook that runs outside a checkout, in the quick profile
        runnable = write_runnable(chapter_source, path.with_name(f"{path.stem}.runnable.ipynb"),
                                  repository=repository).name
        launch = repository.binder_link(path.stem) if repository else None
    source[0] = prepare_notebook(source[0], record, source_link=link, runnable_link=runnable, launch_link=launch)


def _repository_buttons(app: Any, config: Any) -> None:
    """The theme's repository and issues buttons, where the build names its repository."""
    from sphinx.errors import ConfigError

    try:
        options = theme_options(published_repository())
    except RepositoryError as err:  # one line from Sphinx, not a traceback
        raise ConfigError(str(err)) from None
    if options:
        config.html_theme_options = {**(config.html_theme_options or {}), **options}


def setup(app: Any) -> dict[str, bool]:
    app.connect("config-inited", _repository_buttons)
    app.connect("source-read", _prepare)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
