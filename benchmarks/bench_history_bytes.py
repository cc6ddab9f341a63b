"""Where a packed history's bytes go, per operation: gitmem's kinds of object beside plain git's.

    python benchmarks/bench_history_bytes.py                   # every shape of --family
    python benchmarks/bench_history_bytes.py --shape checklist

Each shape of ``bench_history_size.py --family`` is built beside its plain git twin (the same
sequence of file states, one commit per operation), both are packed with ``git gc --aggressive``,
and every object of each pack is put in one class by what reaches it from ``main``: for gitmem
the commits (each holds its sealed record), directory trees (the root, directories, buckets),
file trees, headers and chunks; for plain git the commits, trees and blobs. A class's bytes are
its objects' compressed (or delta) bytes in the pack plus 28 bytes each in the pack's index.
Printed per operation, so the shapes compare; what each class costs beside plain git's says what
a change of the format could save (design.md, "Sizes").
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pygit2

import gitmem
from gitmem.store import MemoryStore

# Bytes an object adds to a version 2 pack index: its id, CRC-32 and 4-byte offset.
_INDEX_BYTES = 28
GITMEM_CLASSES = ("commit", "directory tree", "file tree", "header", "chunk", "metadata")
PLAIN_CLASSES = ("commit", "tree", "blob")


def classify(path: Path, encrypted: bool) -> dict[str, str]:
    """Every object reachable from ``main`` of the repository at ``path``, by class."""
    repo = pygit2.Repository(str(path))
    found: dict[str, str] = {}

    def tree(oid: pygit2.Oid, kind: str) -> None:
        if str(oid) in found:
            return
        found[str(oid)] = kind
        for entry in repo[oid]:  # type: ignore[attr-defined]
            name = entry.name or ""
            if entry.type_str == "tree":
                tree(entry.id, "file tree" if encrypted and name.startswith("f") else kind)
            elif not encrypted:
                found.setdefault(str(entry.id), "blob")
            elif name == "gitmem":
                found.setdefault(str(entry.id), "metadata")
            else:
                found.setdefault(str(entry.id), "header" if name == "h" else "chunk")

    head = repo.references["refs/heads/main"].target
    for commit in repo.walk(head, pygit2.enums.SortMode.TOPOLOGICAL):
        found[str(commit.id)] = "commit"
        tree(commit.tree_id, "directory tree" if encrypted else "tree")
    return found


def packed_bytes(path: Path, classes: dict[str, str]) -> Counter[str]:
    """Bytes in ``path``'s packs (and their indexes) by class; objects of no class as
    ``other``."""
    sizes: Counter[str] = Counter()
    for index in (path / "objects" / "pack").glob("*.idx"):
        shown = subprocess.run(
            ["git", "verify-pack", "-v", str(index)], check=True, capture_output=True, text=True
        ).stdout
        for line in shown.splitlines():
            fields = line.split()
            if (
                len(fields) >= 5
                and len(fields[0]) == 40
                and fields[1] in ("blob", "tree", "commit")
            ):
                sizes[classes.get(fields[0], "other")] += int(fields[3]) + _INDEX_BYTES
    return sizes


def measure(
    shape: str, sessions: int, features: int, work: Path
) -> tuple[int, Counter[str], Counter[str]]:
    """Build ``shape`` both ways under ``work``, pack both, and measure them by class."""
    import bench_history_size as size  # run as a script, its sibling is importable

    ops = list(size.workload(sessions, features, shape=shape))
    plain_path = work / "plain.git"
    plain = pygit2.init_repository(str(plain_path), bare=True, initial_head="main")
    size.apply_plain(plain, ops)
    store = MemoryStore.open(
        work / "gitmem.git", gitmem.generate_key(), create=True, state_dir=work / "state"
    )
    size.apply_gitmem(store, ops)
    store.gc()
    store.close()
    size.git_gc_aggressive(plain_path)
    size.git_gc_aggressive(store.path)
    gitmem_sizes = packed_bytes(store.path, classify(store.path, encrypted=True))
    plain_sizes = packed_bytes(plain_path, classify(plain_path, encrypted=False))
    return len(ops), gitmem_sizes, plain_sizes


def main(argv: list[str] | None = None) -> int:
    import bench_history_size as size

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=[shape for shape, *_ in size.FAMILY])
    args = parser.parse_args(argv)
    shapes = [row for row in size.FAMILY if args.shape in (None, row[0])]
    columns = [f"gitmem {c}" for c in GITMEM_CLASSES] + [f"plain {c}" for c in PLAIN_CLASSES]
    print(
        "| shape | operations | " + " | ".join(columns) + " | gitmem | plain git | ratio, objects |"
    )
    print("|---" * (len(columns) + 5) + "|")
    with tempfile.TemporaryDirectory(prefix="gitmem-bytes-") as scratch:
        for shape, _label, sessions, features in shapes:
            work = Path(scratch) / shape
            work.mkdir()
            ops, ours, theirs = measure(shape, sessions, features, work)
            cells = [ours[c] / ops for c in GITMEM_CLASSES] + [
                theirs[c] / ops for c in PLAIN_CLASSES
            ]
            total, plain_total = sum(ours.values()), sum(theirs.values())
            print(
                f"| `{shape}` | {ops:,} | "
                + " | ".join(f"{cell:,.0f}" for cell in cells)
                + f" | {total / ops:,.0f} | {plain_total / ops:,.0f}"
                + f" | {total / plain_total:.2f}x |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
