"""The top floor: the book made from the chapters.

- `runner`: a chapter's notebook run with a profile's parameters (``gnuq chapter``);
- `pages`: how an executed notebook becomes a page (which cells show, the banner);
- `runnable`: a chapter as a notebook that runs and teaches outside a checkout (Jupyter, Colab).

Below it: the chapters (`gnuq_core.chapters`), which compute; their profiles and sources
(`gnuq_core.repro.profiles`).
"""
