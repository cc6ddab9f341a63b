"""A commit forged by the holder of a retired key: what a removed slot's holder can still write."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gitmem import format as fmt
from gitmem.crypto import StoreKeys, decode_key
from gitmem.git.refs import BRANCH
from gitmem.git.repo import GitRepo
from gitmem.operation import Operation


def append_with_epoch_zero(repo_path: Path, key: str, store_id: bytes, head: Operation) -> str:
    """Seal a commit on top of ``head`` with the keys of ``key``'s first epoch (as a holder of a
    removed slot still can) and move ``repo_path``'s branch to it; return its id."""
    old = StoreKeys.derive(decode_key(key), store_id)
    record = replace(head.record, seq=head.seq + 1, command="create", detail={})
    repo = GitRepo(repo_path)
    ad = fmt.record_ad(old.store_id, head.tree, (head.commit,))
    forged = repo.write_commit(
        head.tree,
        [head.commit],
        fmt.encode_message(old.seal_record(record.to_bytes(), ad)),
        time=record.seq,
    )
    repo.update_ref(BRANCH, forged, head.commit)
    repo.checkpoint(clear=True)  # a remote is read by git: nothing may stay in a redo log
    return forged
