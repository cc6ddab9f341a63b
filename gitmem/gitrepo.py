"""Compatibility: the names docs/python-api.md gives under ``gitmem.gitrepo``. The git storage
is the package ``gitmem.git`` (``gitmem/git/repo.py`` composes it)."""

from .git.repo import EXIT_LOCK_SECONDS, GitRepo, publish_logged

__all__ = ["EXIT_LOCK_SECONDS", "GitRepo", "publish_logged"]
