"""The public repository a published copy of the book comes from: its links and launch button.

The development build is offline and names no repository, so it shows no repository link
and no launch button. A published copy names its repository in ``GNUQ_REPOSITORY_URL``
(and its branch in ``GNUQ_REPOSITORY_BRANCH``, default ``main``); the publishing workflow
(``.github/workflows/book.yml``) sets both from GitHub's own context, so no address is
ever typed into this repository. With a repository named:

- the page header gets the theme's repository and issues buttons (`theme_options`);
- every chapter's banner links "open it in Binder" (`Repository.binder_link`): Binder
  builds the repository from ``binder/`` and its ``postBuild`` writes the chapters'
  runnable notebooks (`gnuq_core.book.runnable`) into `RUNNABLE_FOLDER`;
- the runnable notebook's first cell names the exact install line (`Repository.install_line`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

__all__ = ["REPOSITORY_ENV", "BRANCH_ENV", "RUNNABLE_FOLDER", "BINDER_URL", "Repository", "RepositoryError",
           "published_repository", "name_problem", "branch_problem", "theme_options"]

REPOSITORY_ENV = "GNUQ_REPOSITORY_URL"
BRANCH_ENV = "GNUQ_REPOSITORY_BRANCH"
RUNNABLE_FOLDER = "runnable"
"""Folder (from the repository root) where Binder's ``postBuild`` writes the runnable chapters."""
BINDER_URL = "https://mybinder.org/v2"
BINDER_PROVIDERS = {"github.com": "gh", "gitlab.com": "gl"}
"""Hosts Binder builds from, with its name for each (the theme's buttons know the same two)."""

_URL = re.compile(r"https://(?P<host>[a-z0-9.-]+)/(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?/?")
_BRANCH = re.compile(r"[A-Za-z0-9._/-]+")
_GITHUB_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_]|-(?=[A-Za-z0-9_])){0,38}")
"""A GitHub account: letters, digits, single hyphens inside (and ``_`` of managed users), ≤ 39."""
_GITLAB_PATH = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,253}[A-Za-z0-9_-])?")
"""A GitLab namespace: starts with a letter, digit or ``_``, does not end with ``.``."""
_REPO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


class RepositoryError(ValueError):
    """``GNUQ_REPOSITORY_URL`` or ``GNUQ_REPOSITORY_BRANCH`` is not a repository address."""


@dataclass(frozen=True)
class Repository:
    """A public repository: ``https://<host>/<owner>/<name>`` and a branch."""

    host: str
    owner: str
    name: str
    branch: str = "main"

    def __post_init__(self) -> None:
        why = (f"{self.host} is not a host Binder builds from" if self.host not in BINDER_PROVIDERS
               else name_problem(self.host, self.owner, self.name))
        why = why or (f"branch {self.branch!r}: {b}" if (b := branch_problem(self.branch)) else None)
        if why is not None:
            raise RepositoryError(f"not a repository: {why}")

    @property
    def url(self) -> str:
        """The repository's web address (no ``.git``, no trailing slash)."""
        return f"https://{self.host}/{self.owner}/{self.name}"

    def install_line(self) -> str:
        """The notebook line that installs gnuq with its book extra from this repository."""
        return f'%pip install "gnuq[book] @ git+{self.url}@{self.branch}"'

    def binder_link(self, stem: str) -> str:
        """Binder's address of chapter ``stem``'s runnable notebook, opened in JupyterLab."""
        path = quote(f"lab/tree/{RUNNABLE_FOLDER}/{stem}.ipynb", safe="")
        return (f"{BINDER_URL}/{BINDER_PROVIDERS[self.host]}/{self.owner}/{self.name}/"
                f"{quote(self.branch, safe='')}?urlpath={path}")


def published_repository(environ: Mapping[str, str] | None = None) -> Repository | None:
    """The repository named in ``GNUQ_REPOSITORY_URL`` (and ``GNUQ_REPOSITORY_BRANCH``), or ``None``.

    Raises
    ------
    RepositoryError
        If the address is not ``https://github.com/<owner>/<name>`` (or gitlab.com), or the
        branch has characters a branch name cannot have.
    """
    environ = os.environ if environ is None else environ
    url = environ.get(REPOSITORY_ENV, "").strip()
    if not url:
        return None
    match = _URL.fullmatch(url)
    if match is None or match["host"] not in BINDER_PROVIDERS:
        raise RepositoryError(f"{REPOSITORY_ENV}={url!r} is not a repository address: set it to "
                              "https://github.com/<owner>/<name> (or gitlab.com), or unset it for an offline build")
    why = name_problem(match["host"], match["owner"], match["name"])
    if why is not None:
        raise RepositoryError(f"{REPOSITORY_ENV}={url!r} is not a repository address: {why}; set it to "
                              "https://github.com/<owner>/<name> (or gitlab.com), or unset it for an offline build")
    branch = environ.get(BRANCH_ENV, "").strip() or "main"
    why = branch_problem(branch)
    if why is not None:
        raise RepositoryError(f"{BRANCH_ENV}={branch!r} is not a branch name: {why} (git check-ref-format); use "
                              "letters, digits and ._/- (e.g. main), or unset it for main")
    return Repository(match["host"], match["owner"], match["name"], branch)


def name_problem(host: str, owner: str, name: str) -> str | None:
    """Why ``owner/name`` cannot be a repository on ``host``, or None: ``.`` and ``..`` are path
    segments, not names (``https://github.com/../..`` leads elsewhere), and each host has its
    own rules for an account."""
    for what, value in (("owner", owner), ("name", name)):
        if value in (".", ".."):
            return f"the {what} {value!r} is a path segment, not a name"
    if host == "github.com" and not _GITHUB_OWNER.fullmatch(owner):
        return (f"the owner {owner!r} is not a GitHub account name (letters, digits and single hyphens inside, "
                "at most 39)")
    if host == "gitlab.com" and (not _GITLAB_PATH.fullmatch(owner) or ".." in owner):
        return f"the owner {owner!r} is not a GitLab namespace (letters, digits, _.-; not starting with . or -)"
    if not _REPO_NAME.fullmatch(name) or name.startswith("-") or name.lower().endswith((".git", ".atom")):
        return f"the name {name!r} is not a repository name (letters, digits and ._-, at most 100)"
    return None


def branch_problem(branch: str) -> str | None:
    """Why ``branch`` is not a branch name git accepts (``git check-ref-format --branch``), or None.

    Beyond the letters, digits and ``._/-`` allowed here: no ``..``, no ``//``, no component
    that starts with ``.`` or ends with ``.lock``, no leading ``-`` or ``/``, no trailing ``/``
    or ``.``, no ``@{``; nor control characters, spaces or ``~^:?*[\\`` (outside the allowed set).
    """
    if not _BRANCH.fullmatch(branch):
        bad = next(c for c in branch if not _BRANCH.fullmatch(c))
        return f"it contains {bad!r}"
    if branch.startswith(("-", "/")) or branch.endswith(("/", ".")):
        return "it starts with - or /, or ends with / or ."
    if ".." in branch or "//" in branch or "@{" in branch:
        return "it contains .., // or @{"
    for part in branch.split("/"):
        if part.startswith("."):
            return f"the component {part!r} starts with ."
        if part.endswith(".lock"):
            return f"the component {part!r} ends with .lock"
    return None


def theme_options(repository: Repository | None) -> dict[str, object]:
    """sphinx-book-theme options for the repository and issues buttons (``{}`` without a repository)."""
    if repository is None:
        return {}
    return {"repository_url": repository.url, "repository_branch": repository.branch, "path_to_docs": "",
            "use_repository_button": True, "use_issues_button": True}


def main() -> int:
    """``python -m gnuq_core.repro.repository``: say which repository the build names (``make book``
    checks it before the chapters run, so a mistyped address stops at once, not after them)."""
    from gnuq_core.options import run_command

    def body() -> int:
        repository = published_repository()
        print(f"book: repository {repository.url} (branch {repository.branch})" if repository
              else f"book: no repository named ({REPOSITORY_ENV} unset): no repository button or launch link")
        return 0

    return run_command(body)


if __name__ == "__main__":
    raise SystemExit(main())
