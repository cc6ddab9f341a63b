"""Remotes: configuring them, listing, fetching and pushing through libgit2, with credentials
from the environment only."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pygit2
from pygit2.enums import CredentialType

from .. import knownhosts
from ..errors import ConflictError, NotFound, PushRejected, RemoteError, UsageError, shown_repr
from ..fsutil import fsync_dir, fsync_file, refuse_key_text
from .handle import Handle
from .objects import Objects, read_loose
from .refs import BRANCH, Refs

# The quarantine a fetch goes into (see Remotes.fetching); removed when the fetch ends.
_FETCH_SCRATCH = "gitmem-fetch"
_STALE_SCRATCH_SECONDS = 3600
# The seconds a remote has to let a transfer connect and to answer each read or write, unless
# the caller gives its own (see _network_timeout).
NETWORK_TIMEOUT = 30.0


class Remotes:
    """The remotes of the repository ``handle`` opens; fetches negotiate from ``refs``."""

    def __init__(self, handle: Handle, refs: Refs) -> None:
        self._handle = handle
        self._refs = refs
        self.path = handle.path
        self._local = threading.local()  # this thread's quarantine (see fetching)

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

    def list_remote(self, url: str, timeout: float = NETWORK_TIMEOUT) -> dict[str, str]:
        """The refs the remote at ``url`` advertises, ``{name: oid}``.

        Raises :class:`RemoteError` when it cannot be reached, refuses the credentials, or does
        not answer within ``timeout`` seconds (to connect, and at each read or write).
        """
        remote = self._anonymous(url)
        callbacks = _Callbacks(url)
        with _remote_errors(url, callbacks, timeout):
            heads = remote.list_heads(callbacks=callbacks)
        return {str(h.name): str(h.oid) for h in heads if not str(h.name).endswith("^{}")}

    def fetch(self, url: str, refs: list[str], timeout: float = NETWORK_TIMEOUT) -> dict[str, str]:
        """Fetch ``refs`` from ``url``; their objects join this repository, no ref moves here.
        Returns ``{ref: oid}`` for the refs fetched (see :meth:`fetching`)."""
        with self.fetching(url, refs, timeout) as incoming:
            incoming.accept()
            return incoming.refs

    @contextlib.contextmanager
    def fetching(
        self, url: str, refs: list[str], timeout: float = NETWORK_TIMEOUT
    ) -> Iterator[Incoming]:
        """Fetch ``refs`` from ``url`` into a quarantine, no ref moving here.

        While the block runs, this thread reads the fetched objects as if they were in this
        repository (no other thread sees them, so no writer can count on one); they join it
        only if the block calls :meth:`Incoming.accept`, and are deleted otherwise: what a
        refused pull fetched is not the user's, and never takes room in the store.

        libgit2 cannot fetch into a repository that has a ref pointing at a blob (its
        negotiation fails: "object is not a committish"), and ``refs/gitmem/meta`` is one; so
        the fetch goes into a scratch repository inside this one that borrows its objects
        (``objects/info/alternates``) and holds only the branch, for negotiation: that is the
        quarantine. Accepting moves its packs and loose objects here (durably, the index last);
        the scratch repository is removed when the block ends. Each fetch has its own
        (fetches take no lock, so two may run at once); one left by a crash is removed by a
        later fetch once it is an hour old.
        """
        for stale in self.path.glob(f"{_FETCH_SCRATCH}-*"):
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > _STALE_SCRATCH_SECONDS:
                    shutil.rmtree(stale, ignore_errors=True)
        scratch = self.path / f"{_FETCH_SCRATCH}-{os.getpid()}-{os.urandom(4).hex()}"
        outer: Incoming | None = getattr(self._local, "incoming", None)
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
            callbacks = _Callbacks(url)
            specs = [f"+{ref}:refs/gitmem/fetched/{i}" for i, ref in enumerate(refs)]
            with _remote_errors(url, callbacks, timeout):
                remote.fetch(specs, callbacks=callbacks, message="gitmem")
            fetched = {}
            for i, ref in enumerate(refs):
                with contextlib.suppress(KeyError):
                    fetched[ref] = str(staging.references[f"refs/gitmem/fetched/{i}"].target)
            del staging, remote
            incoming = Incoming(scratch / "objects", fetched, self._adopt_objects)
            self._local.incoming = incoming
            yield incoming
        finally:
            self._local.incoming = outer
            shutil.rmtree(scratch, ignore_errors=True)

    def read_incoming(self, oid: str, limits: Mapping[bytes, int]) -> tuple[bytes, bytes] | None:
        """:meth:`Objects.read_stored` from this thread's quarantine (:meth:`fetching`), if
        any."""
        incoming: Incoming | None = getattr(self._local, "incoming", None)
        if incoming is None or incoming.accepted:
            return None
        found = Objects.read_packed(incoming.packs, oid, limits)
        return found if found is not None else read_loose(str(incoming.objects), oid, limits)

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
        self,
        url: str,
        refspecs: list[str],
        lock_timeout: float,
        publish: Callable[[float], None],
        timeout: float = NETWORK_TIMEOUT,
        *,
        lease: str | None = None,
    ) -> None:
        """Push ``refspecs`` to ``url``, after a checkpoint (taking the writer lock for it, up
        to ``lock_timeout`` seconds, unless this thread holds it): libgit2 sends what the
        repository holds. Never forced, but with a ``lease``, a redaction's: the remote's
        branch is replaced only while it is at commit ``lease``, the head that was checked
        (git's receive-pack moves a ref only from the value the push names).

        Raises :class:`PushRejected` when the remote refuses an update (it has commits this
        repository lacks), :class:`RemoteError` when it cannot be reached or does not answer
        within ``timeout`` seconds.
        """
        if lease is None and any(spec.startswith("+") for spec in refspecs):
            raise ValueError("gitmem force-pushes only a redaction")
        publish(lock_timeout)
        remote = self._anonymous(url)
        callbacks = _Callbacks(url)
        callbacks.lease = lease
        with _remote_errors(url, callbacks, timeout):
            try:
                remote.push(refspecs, callbacks=callbacks)
            except _LeaseBroken:
                callbacks.rejected.append((BRANCH, "it moved since it was checked"))
            except pygit2.GitError as exc:
                # The remote's branch moved since it was listed (another replica pushed):
                # libgit2 refuses before sending, as the remote would have.
                if _NOT_FAST_FORWARD not in str(exc):
                    raise
                callbacks.rejected.append((BRANCH, "not a fast-forward"))
        if callbacks.rejected:
            ref, why = callbacks.rejected[0]
            raise PushRejected(
                f"{url} refused the update of {ref} ({why}): it has commits this replica lacks; "
                "pull or sync first"
            )


class Incoming:
    """What :meth:`Remotes.fetching` fetched: ``refs`` (``{ref: oid}``), in quarantine until
    :meth:`accept`."""

    def __init__(self, objects: Path, refs: dict[str, str], adopt: Callable[[Path], None]) -> None:
        self.refs = refs
        self.objects = objects
        self.accepted = False
        self._adopt = adopt
        self._packs: pygit2.Odb | None = None

    @property
    def packs(self) -> pygit2.Odb:
        """A libgit2 reader of the quarantine's packs (its loose objects are read as gitmem
        reads any, see :func:`objects.read_loose`)."""
        if self._packs is None:
            self._packs = pygit2.Odb()
            self._packs.add_backend(pygit2.OdbBackendPack(str(self.objects)), 1)
        return self._packs

    def accept(self) -> None:
        """Move the fetched objects into the repository, durably (before any ref may name
        them)."""
        if not self.accepted:
            self._packs = None
            self._adopt(self.objects)
            self.accepted = True


class _LeaseBroken(Exception):
    """A forced update's lease did not hold (see :meth:`_Callbacks.push_negotiation`)."""


class _Callbacks(pygit2.RemoteCallbacks):
    """Credentials from the environment only, and a record of refused ref updates.

    ssh: the key file named by ``GITMEM_SSH_KEY`` (passphrase ``GITMEM_SSH_PASSPHRASE``), else
    the ssh agent. https: the token in ``GITMEM_HTTPS_TOKEN`` as the password of
    ``GITMEM_HTTPS_USER`` (default ``x-access-token``). Each kind is offered once: libgit2 asks
    again after a refusal, and a second offer of the same would loop.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.rejected: list[tuple[str, str]] = []
        # The only value the remote's branch may have for a forced update to go ahead.
        self.lease: str | None = None
        self._offered: set[str] = set()
        self.interrupted = False
        self._url = url
        # libgit2 reads ~/.ssh/known_hosts below the home it found when it started: make it
        # the one knownhosts reads, the user's home now.
        pygit2.settings.homedir = str(knownhosts.known_hosts_file().parent.parent)

    def push_negotiation(self, updates: list[pygit2.remotes.PushUpdate]) -> None:
        """Stop a forced update (a redaction's) when the remote's branch is not at its lease:
        another replica pushed since it was checked, and would lose that work."""
        for update in updates:
            moved = update.dst_refname == BRANCH and str(update.src) != self.lease
            if self.lease is not None and moved:
                raise _LeaseBroken

    def certificate_check(self, certificate: None, valid: bool, host: bytes) -> bool:
        """ssh: the host key must be the one ``~/.ssh/known_hosts`` holds (libgit2 checks,
        ``valid``; pygit2 would accept any); https: the TLS library's verdict, as before."""
        if knownhosts.ssh_host(self._url) is None:
            raise pygit2.Passthrough
        if valid:
            return True
        why = knownhosts.refused(self._url)
        if why is not None:
            raise why
        return True

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
                _check_ssh_key_file(key_file)
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


# libgit2's message for a push whose remote ref holds commits this repository lacks.
_NOT_FAST_FORWARD = "contains commits that are not present locally"


def _check_ssh_key_file(key_file: str) -> None:
    """Refuse (:class:`UsageError`) a ``GITMEM_SSH_KEY`` that is not the path of a file: key
    text pasted in its place would otherwise be shown in libgit2's error, and a missing file
    reads as an authentication failure of the server's."""
    refuse_key_text(key_file, "GITMEM_SSH_KEY")
    if "PRIVATE KEY" in key_file or "\n" in key_file:
        raise UsageError(
            "GITMEM_SSH_KEY holds key text (refused, and not shown here) where the path of a "
            "private key file belongs: save the key in an owner-only file and name that file"
        )
    if not os.path.isfile(key_file):
        raise UsageError(
            f"GITMEM_SSH_KEY is {shown_repr(key_file)}, which is not a file: name the ssh "
            "private key file to sign in with, or unset it to use the ssh agent"
        )


@contextlib.contextmanager
def _remote_errors(url: str, callbacks: _Callbacks, timeout: float) -> Iterator[None]:
    """libgit2's transport failures as one :class:`RemoteError` line naming the URL; Ctrl-C
    stops the transfer (:func:`_interruptible`); a remote silent for ``timeout`` seconds stops
    it too (:func:`_network_timeout`)."""
    try:
        with _network_timeout(timeout), _interruptible(callbacks):
            yield
    except UsageError:
        raise  # the user's own setting, refused by a callback: not the remote's failure
    except (pygit2.GitError, OSError, KeyError, ValueError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if _TIMED_OUT.search(detail):
            raise RemoteError(
                f"the remote {url} did not answer within {timeout:g} s; try again later, or "
                "allow it longer with --timeout or GITMEM_NETWORK_TIMEOUT"
            ) from None
        raise RemoteError(f"cannot reach the remote {url}: {detail}") from None


# libgit2's words for a socket that stayed silent past its timeout: its own ("timed out"),
# libssh2's ("Timed out waiting on socket"), and OpenSSL's read of a socket whose receive
# timeout passed (EAGAIN, "Resource temporarily unavailable").
_TIMED_OUT = re.compile(r"timed out|resource temporarily unavailable", re.IGNORECASE)
_timeouts: list[float] = []  # of the transfers running now, guarded by _timeouts_lock
_timeouts_lock = threading.Lock()


@contextlib.contextmanager
def _network_timeout(seconds: float) -> Iterator[None]:
    """Have libgit2 give up on a remote that does not let it connect, or does not answer a
    read or a write, within ``seconds``: a host that accepts and never answers would otherwise
    hold the transfer forever. libgit2 honours this on every network transport (git://, ssh,
    http and https); it has one setting per process, so transfers that overlap each wait as
    long as the longest of their timeouts."""
    with _timeouts_lock:
        _timeouts.append(seconds)
        _set_libgit2_timeout(max(_timeouts))
    try:
        yield
    finally:
        with _timeouts_lock:
            _timeouts.remove(seconds)
            if _timeouts:
                _set_libgit2_timeout(max(_timeouts))


def _set_libgit2_timeout(seconds: float) -> None:
    # In milliseconds, as a C int; 0 would mean "wait forever".
    millis = min(max(1, round(seconds * 1000)), 2**31 - 1)
    pygit2.settings.server_connect_timeout = millis
    pygit2.settings.server_timeout = millis


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
    except Exception:
        # The signal also cuts short the system call libgit2 was waiting in, which libgit2
        # reports as its own failure ("Interrupted system call"): the Ctrl-C is the cause.
        if not callbacks.interrupted:
            raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if callbacks.interrupted:  # after the last callback: as if it came just after the transfer
        raise KeyboardInterrupt
