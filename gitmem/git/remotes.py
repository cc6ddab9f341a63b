"""Remotes: configuring them, listing, fetching and pushing through libgit2, with credentials
from the environment only."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
from pygit2.enums import CredentialType

from ..errors import ConflictError, NotFound, PushRejected, RemoteError, UsageError
from ..fsutil import fsync_dir, fsync_file
from .handle import Handle
from .refs import BRANCH, Refs

# Scratch repository a fetch goes through (see Remotes.fetch); removed when the fetch ends.
_FETCH_SCRATCH = "gitmem-fetch"
_STALE_SCRATCH_SECONDS = 3600


class Remotes:
    """The remotes of the repository ``handle`` opens; fetches negotiate from ``refs``."""

    def __init__(self, handle: Handle, refs: Refs) -> None:
        self._handle = handle
        self._refs = refs
        self.path = handle.path

    def fsync_dir(self, relative: str = "") -> None:
        """fsync a directory of the repository."""
        fsync_dir(self.path / relative)

    def remote_names(self) -> list[tuple[str, str]]:
        """``(name, url)`` of every remote configured in this repository, sorted by name."""
        return sorted((str(r.name), str(r.url)) for r in self._handle.git.remotes)

    def remote_url(self, name: str) -> str | None:
        """The URL of remote ``name``, or None when there is no such remote."""
        for remote_name, url in self.remote_names():
            if remote_name == name:
                return url
        return None

    def add_remote(self, name: str, url: str) -> None:
        """Configure remote ``name`` at ``url``; :class:`ConflictError` if the name is taken."""
        try:
            self._handle.git.remotes.create(name, url)
        except (ValueError, pygit2.GitError) as exc:
            if self.remote_url(name) is not None:
                raise ConflictError(f"a remote named {name!r} already exists") from None
            raise UsageError(f"cannot add remote {name!r}: {exc}") from None

    def remove_remote(self, name: str) -> None:
        """Remove remote ``name``; :class:`NotFound` if there is none."""
        if self.remote_url(name) is None:
            raise NotFound(f"no remote named {name!r}")
        self._handle.git.remotes.delete(name)

    def _anonymous(self, url: str) -> pygit2.Remote:
        try:
            return self._handle.git.remotes.create_anonymous(url)
        except (ValueError, pygit2.GitError) as exc:
            raise RemoteError(f"{url}: not a usable git URL ({exc})") from None

    def list_remote(self, url: str) -> dict[str, str]:
        """The refs the remote at ``url`` advertises, ``{name: oid}``.

        Raises :class:`RemoteError` when it cannot be reached or refuses the credentials.
        """
        remote = self._anonymous(url)
        callbacks = _Callbacks()
        with _remote_errors(url, callbacks):
            heads = remote.list_heads(callbacks=callbacks)
        return {str(h.name): str(h.oid) for h in heads if not str(h.name).endswith("^{}")}

    def fetch(self, url: str, refs: list[str]) -> dict[str, str]:
        """Fetch ``refs`` from ``url``; their objects join this repository, no ref moves here.

        Returns ``{ref: oid}`` for the refs fetched. libgit2 cannot fetch into a repository
        that has a ref pointing at a blob (its negotiation fails: "object is not a
        committish"), and ``refs/gitmem/meta`` is one; so the fetch goes into a scratch
        repository inside this one that borrows its objects (``objects/info/alternates``) and
        holds only the branch, for negotiation. Its new packs and loose objects are then moved
        here (durably, the index last) and it is removed. Each fetch has its own scratch
        repository (fetches take no lock, so two may run at once); one left by a crash is
        removed by a later fetch once it is an hour old.
        """
        for stale in self.path.glob(f"{_FETCH_SCRATCH}-*"):
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > _STALE_SCRATCH_SECONDS:
                    shutil.rmtree(stale, ignore_errors=True)
        scratch = self.path / f"{_FETCH_SCRATCH}-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            staging = pygit2.init_repository(str(scratch), bare=True)
            os.chmod(scratch, 0o700)
            (scratch / "objects" / "info" / "alternates").write_text(
                str(self.path.resolve() / "objects") + "\n", encoding="utf-8"
            )
            staging = pygit2.Repository(str(scratch))
            # The published head (the ref file): what the redo log holds is not in the
            # repository the scratch one borrows from; an older head negotiates as well.
            head = self._refs.ref_file(BRANCH)
            if head is not None:
                staging.references.create(BRANCH, pygit2.Oid(hex=head))
            remote = staging.remotes.create_anonymous(url)
            callbacks = _Callbacks()
            specs = [f"+{ref}:refs/gitmem/fetched/{i}" for i, ref in enumerate(refs)]
            with _remote_errors(url, callbacks):
                remote.fetch(specs, callbacks=callbacks, message="gitmem")
            fetched = {}
            for i, ref in enumerate(refs):
                with contextlib.suppress(KeyError):
                    fetched[ref] = str(staging.references[f"refs/gitmem/fetched/{i}"].target)
            del staging, remote
            self._adopt_objects(scratch / "objects")
            return fetched
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _adopt_objects(self, source: Path) -> None:
        """Move every pack and loose object under ``source`` into this repository, durably."""
        objects = self.path / "objects"
        packs = source / "pack"
        if packs.is_dir():
            names = sorted(packs.iterdir(), key=lambda f: (f.suffix == ".idx", f.name))
            for item in names:
                if item.suffix in (".pack", ".idx", ".rev"):
                    fsync_file(item)
                    os.replace(item, objects / "pack" / item.name)
            self.fsync_dir("objects/pack")
        for sub in source.iterdir():
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            target = objects / sub.name
            target.mkdir(mode=0o755, exist_ok=True)
            for item in sub.iterdir():
                fsync_file(item)
                os.replace(item, target / item.name)
            self.fsync_dir(f"objects/{sub.name}")
        # libgit2 rescans objects/pack when it misses an object, so the new packs are seen.

    def push(
        self, url: str, refspecs: list[str], lock_timeout: float, publish: Callable[[float], None]
    ) -> None:
        """Push ``refspecs`` (never forced) to ``url``, after a checkpoint (taking the writer
        lock for it, up to ``lock_timeout`` seconds, unless this thread holds it): libgit2
        sends what the repository holds.

        Raises :class:`PushRejected` when the remote refuses an update (it has commits this
        repository lacks), :class:`RemoteError` when it cannot be reached.
        """
        if any(spec.startswith("+") for spec in refspecs):
            raise ValueError("gitmem never force-pushes")
        publish(lock_timeout)
        remote = self._anonymous(url)
        callbacks = _Callbacks()
        with _remote_errors(url, callbacks):
            remote.push(refspecs, callbacks=callbacks)
        if callbacks.rejected:
            ref, why = callbacks.rejected[0]
            raise PushRejected(
                f"{url} refused the update of {ref} ({why}): it has commits this replica lacks; "
                "pull or sync first"
            )

    # -- garbage collection ---------------------------------------------------------------


class _Callbacks(pygit2.RemoteCallbacks):
    """Credentials from the environment only, and a record of refused ref updates.

    ssh: the key file named by ``GITMEM_SSH_KEY`` (passphrase ``GITMEM_SSH_PASSPHRASE``), else
    the ssh agent. https: the token in ``GITMEM_HTTPS_TOKEN`` as the password of
    ``GITMEM_HTTPS_USER`` (default ``x-access-token``). Each kind is offered once: libgit2 asks
    again after a refusal, and a second offer of the same would loop.
    """

    def __init__(self) -> None:
        super().__init__()
        self.rejected: list[tuple[str, str]] = []
        self._offered: set[str] = set()
        self.interrupted = False

    # libgit2 calls these many times a second during a transfer: where an interrupt that
    # _interruptible noted stops it (raised here, inside pygit2's wrapper, it aborts libgit2's
    # operation and pygit2 raises it again when the operation returns).

    def transfer_progress(self, stats: pygit2.remotes.TransferProgress) -> None:
        self._stop_if_interrupted()

    def sideband_progress(self, string: str) -> None:
        self._stop_if_interrupted()

    def push_transfer_progress(
        self, objects_pushed: int, total_objects: int, bytes_pushed: int
    ) -> None:
        self._stop_if_interrupted()

    def _stop_if_interrupted(self) -> None:
        if self.interrupted:
            raise KeyboardInterrupt

    def credentials(
        self, url: str, username_from_url: str | None, allowed_types: CredentialType
    ) -> pygit2.Keypair | pygit2.KeypairFromAgent | pygit2.UserPass:
        user = username_from_url or "git"
        if allowed_types & CredentialType.SSH_KEY and "ssh" not in self._offered:
            self._offered.add("ssh")
            key_file = os.environ.get("GITMEM_SSH_KEY")
            if key_file:
                public = key_file + ".pub"
                return pygit2.Keypair(
                    user,
                    public if os.path.exists(public) else None,
                    key_file,
                    os.environ.get("GITMEM_SSH_PASSPHRASE", ""),
                )
            return pygit2.KeypairFromAgent(user)
        token = os.environ.get("GITMEM_HTTPS_TOKEN")
        if (
            allowed_types & CredentialType.USERPASS_PLAINTEXT
            and token
            and "token" not in self._offered
        ):
            self._offered.add("token")
            return pygit2.UserPass(os.environ.get("GITMEM_HTTPS_USER", "x-access-token"), token)
        raise pygit2.GitError(
            "no (more) credentials: set GITMEM_SSH_KEY, an ssh agent, or GITMEM_HTTPS_TOKEN"
        )

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message is not None:
            self.rejected.append((refname, message))


@contextlib.contextmanager
def _remote_errors(url: str, callbacks: _Callbacks) -> Iterator[None]:
    """libgit2's transport failures as one :class:`RemoteError` line naming the URL; Ctrl-C
    stops the transfer (:func:`_interruptible`)."""
    try:
        with _interruptible(callbacks):
            yield
    except (pygit2.GitError, OSError, KeyError, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise RemoteError(f"cannot reach the remote {url}: {detail}") from None


@contextlib.contextmanager
def _interruptible(callbacks: _Callbacks) -> Iterator[None]:
    """Make SIGINT (Ctrl-C) stop a libgit2 transfer with :class:`KeyboardInterrupt`.

    A signal that arrives while libgit2 runs is handled when libgit2 next calls back into
    Python, at the first line of pygit2's callback wrapper, outside its ``try``: Python's own
    KeyboardInterrupt raised there is printed and dropped by cffi, and the transfer goes on.
    So, on the main thread and when SIGINT has Python's default handler, the signal only marks
    ``callbacks``, whose progress callbacks raise it where pygit2 passes it on.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def note(_signum: int, _frame: object) -> None:
        callbacks.interrupted = True

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if callbacks.interrupted:  # after the last callback: as if it came just after the transfer
        raise KeyboardInterrupt
