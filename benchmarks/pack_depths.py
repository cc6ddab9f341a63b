"""Delta chain depths of a store's trees, as ``git verify-pack -v`` reads its packs.

    python benchmarks/pack_depths.py /dev/shm/deltas-cache/flat-10000.git
    python benchmarks/pack_depths.py STORE --json

For each kind of tree (a memory file's tree: entries ``h`` and ``c…``; any other: directories
and buckets), all of them in the packs and those of the branch's current commit (the trees a
fresh ``view /memories`` reads): how many, how many stored whole, the mean, median and largest
chain depth, and how many lie more than 10 deltas deep. Reads only (nothing is decrypted:
the kinds are told apart by the entries' plain names).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pygit2


def depths(store: Path) -> dict[str, int]:
    """The chain depth of every tree in the store's packs (0: stored whole), by id."""
    found: dict[str, int] = {}
    for idx in sorted((store / "objects" / "pack").glob("*.idx")):
        run = subprocess.run(
            ["git", "verify-pack", "-v", str(idx)], capture_output=True, text=True, check=True
        )
        for fields in map(str.split, run.stdout.splitlines()):
            if len(fields) in (5, 7) and fields[1] == "tree":
                found[fields[0]] = int(fields[5]) if len(fields) == 7 else 0
    return found


def is_file_tree(tree: pygit2.Tree) -> bool:
    """A memory file's tree: a header ``h`` and chunks ``c%08x`` (design.md, "File trees")."""
    names = [entry.name or "" for entry in tree]
    return "h" in names and all(n == "h" or n.startswith("c") for n in names)


def current_trees(repo: pygit2.Repository) -> set[str]:
    """Ids of every tree of the branch's current commit."""
    out: set[str] = set()
    stack = [repo.head.peel(pygit2.Commit).tree]
    while stack:
        tree = stack.pop()
        out.add(str(tree.id))
        stack += [repo[entry.id].peel(pygit2.Tree) for entry in tree if entry.type_str == "tree"]
    return out


def summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"trees": 0}
    return {
        "trees": len(values),
        "whole": sum(1 for v in values if v == 0),
        "mean": round(statistics.fmean(values), 2),
        "median": statistics.median(values),
        "max": max(values),
        "over 10": sum(1 for v in values if v > 10),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    found = depths(args.store)
    repo = pygit2.Repository(str(args.store))
    current = current_trees(repo)
    kinds = {
        oid: "file" if is_file_tree(repo[oid].peel(pygit2.Tree)) else "directory" for oid in found
    }
    rows = {
        f"{kind} trees, {which}": summary(
            [d for oid, d in found.items() if kinds[oid] == kind and (all_ or oid in current)]
        )
        for kind in ("file", "directory")
        for which, all_ in (("all", True), ("current", False))
    }
    if args.json:
        print(json.dumps(rows))
        return 0
    for label, row in rows.items():
        print(f"{label:<26} " + ", ".join(f"{k} {v}" for k, v in row.items()))
    if current - found.keys():
        print(f"current trees not in a pack: {len(current - found.keys())}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
