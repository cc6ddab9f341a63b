"""CPU time of writing one directory tree after an edit: ``buckets.edit`` then ``buckets.store``.

    python benchmarks/bench_dir_write.py                  # a one-tree directory of 40 entries
    python benchmarks/bench_dir_write.py --entries 10000  # a split directory (bucket trees)

Replaces one entry of a written directory of ``--entries`` memory entries (random sealed-name
shapes) and writes the result, with the root's metadata entry spliced into the top tree, as
``TreeCodec.write_dir`` does on every write; the tree is hashed (SHA-1) but not stored. Prints
the best of five rounds' mean in microseconds. Compare two versions of gitmem by running this
script from each (``PYTHONPATH=<worktree>``): it times the bucket layer alone, a few µs of a
write's CPU, far below the noise of whole commands on a shared machine.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import timeit

from gitmem import buckets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=40, help="entries of the directory")
    parser.add_argument("--calls", type=int, default=20000, help="edits timed per round")
    args = parser.parse_args()
    names = [
        "f" + base64.urlsafe_b64encode(b"\x01" + os.urandom(40)).decode().rstrip("=")
        for _ in range(args.entries)
    ]

    def write_tree(data: bytes) -> str:
        return hashlib.sha1(data).hexdigest()

    base = buckets.build(buckets.serialized(raw, "ab" * 20) for raw in names)
    buckets.store(base, write_tree)
    victim = names[len(names) // 2]
    extra = (b"gitmem", b"100644 gitmem\0" + bytes(20))

    def step() -> None:
        shape = buckets.edit(base, [victim], [(victim, "cd" * 20)], lambda oid: [])
        buckets.store(shape, write_tree, extra)

    rounds = timeit.repeat(step, number=args.calls, repeat=5)
    print(f"{args.entries} entries: {min(rounds) / args.calls * 1e6:.2f} us per edit and write")


if __name__ == "__main__":
    main()
