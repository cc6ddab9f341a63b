"""`gitmem verify` in bounded memory: the walk holds the commits of its front only, remembers a
bounded number of checked versions, reads through caches of its own, and still checks
everything."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitmem import parse_path, verify
from gitmem.store import MemoryStore, VerifyReport


def grown(repo_path: Path, key: str, writes: int = 40) -> MemoryStore:
    store = MemoryStore.open(repo_path, key, create=True)
    for i in range(writes):
        store.create(
            parse_path(f"/memories/d{i % 3}/f{i % 5}.md"),
            f"version {i}\n" * (i + 1),
            overwrite=True,
        )
    return store


def test_verify_report_is_importable_from_the_store_and_the_package() -> None:
    import gitmem

    assert gitmem.VerifyReport is VerifyReport is verify.VerifyReport


def test_the_walk_holds_only_its_front_and_a_bounded_set_of_versions(
    repo_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a linear history the walk holds one commit at a time; with the sets of versions
    checked kept to 4 each, and fresh caches every 3 commits, everything is still checked,
    and the store's own caches are not filled with old versions."""
    store = grown(repo_path, key)
    full = MemoryStore.open(repo_path, key).verify()
    assert full.ok and full.commits == 40
    monkeypatch.setattr(verify, "RECENT_OBJECTS", 4)
    monkeypatch.setattr(verify, "FRESH_CACHES_EVERY", 3)
    held: list[int] = []
    remembered: list[int] = []
    queue = verify._Walk.queue

    def counted(self: verify._Walk, op: object) -> None:
        queue(self, op)  # type: ignore[arg-type]
        held.append(len(self.front))
        remembered.append(max(len(self.dirs), len(self.files)))

    monkeypatch.setattr(verify._Walk, "queue", counted)
    fresh = MemoryStore.open(repo_path, key)
    fresh.snapshot().files()
    listed = len(fresh.codec._dirs)
    seen: list[int] = []
    report = fresh.verify(progress=seen.append)
    assert report.ok and report.commits == 40 and seen == list(range(1, 41))
    assert max(held) == 1 and max(remembered) <= 4
    assert report.objects >= full.objects  # a version met again after being forgotten counts again
    assert len(fresh.codec._dirs) == listed
    assert store.verify().ok
