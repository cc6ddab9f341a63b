"""How many chunks a small edit in the middle of a file changes, over many chunker keys.

Each key (a stand-in for a store's ``chunker`` subkey) cuts a file of pseudo-English text
(``bench_chunking.make_text``); the file is then edited at several positions between 40% and
60% of it, two ways: 40 bytes replaced by 12 (``replace40``, the text 28 bytes shorter) and 37
bytes inserted (``insert37``). A changed chunk is a chunk of the edited file that the original
lacks (what a write stores). Printed per file size, edit and body normalization level ``nc``
(``3`` is gitmem's rule up to 32 KiB body chunks; others replace only the body's ``nc``, for
comparison): the histogram of changed chunks, the share of edits changing four or more, the
mean changed chunks and changed bytes per edit, and chunks per file.

    python benchmarks/bench_chunk_resync.py                            # 200 KB, nc 3 and 2
    python benchmarks/bench_chunk_resync.py --sizes 150000 1000000 --keys 60 --nc 3 2 1

Every split is fresh (nothing remembered), so the figures are the cutting rule's alone.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gitmem import chunking

sys.path.insert(0, str(Path(__file__).parent))
from bench_chunking import make_text

EDITS: dict[str, Callable[[bytes, int], bytes]] = {
    "replace40": lambda data, at: data[:at] + b"a small edit" + data[at + 40 :],
    "insert37": lambda data, at: data[:at] + b"a new sentence of about forty bytes.\n" + data[at:],
}


@contextmanager
def body_nc(nc: int) -> Iterator[None]:
    """Cut bodies with normalization level ``nc`` instead of the rule's (tails unchanged)."""
    real = chunking.params_for

    def params_for(size: int) -> chunking.Params:
        params = real(size)
        if params == chunking.SMALLEST:
            return params
        try:
            return dataclasses.replace(params, nc=nc)
        except ValueError:  # masks past the usable hash bits: the rule's own
            return params

    chunking.params_for = params_for
    try:
        yield
    finally:
        chunking.params_for = real


def pieces(data: bytes, seed: bytes) -> list[bytes]:
    return chunking.Chunker(seed).split(data)


@dataclasses.dataclass
class Figures:
    changed: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    changed_bytes: list[int] = dataclasses.field(default_factory=list)
    chunks_per_file: list[int] = dataclasses.field(default_factory=list)

    def line(self) -> str:
        count = sum(self.changed.values())
        many = sum(n for k, n in self.changed.items() if k >= 4) / count
        mean = sum(k * n for k, n in self.changed.items()) / count
        histogram = " ".join(f"{k}:{n}" for k, n in sorted(self.changed.items()))
        return (
            f">=4 changed: {many:6.2%}  mean changed {mean:.3f}  "
            f"bytes {statistics.mean(self.changed_bytes):7.0f}  "
            f"chunks/file {statistics.mean(self.chunks_per_file):5.1f}  [{histogram}]"
        )


def measure(size: int, keys: int, positions: int) -> dict[str, Figures]:
    data = make_text(size).encode()
    figures = {name: Figures() for name in EDITS}
    for key in range(keys):
        seed = hashlib.sha256(b"resync key %d" % key).digest()
        old = pieces(data, seed)
        known = set(old)
        for name, edit in EDITS.items():
            figures[name].chunks_per_file.append(len(old))
            for index in range(positions):
                at = int(size * (0.4 + 0.2 * index / positions))
                new = [p for p in pieces(edit(data, at), seed) if p not in known]
                figures[name].changed[len(new)] += 1
                figures[name].changed_bytes.append(sum(map(len, new)))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000])
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--positions", type=int, default=8)
    parser.add_argument("--nc", type=int, nargs="+", default=[3, 2])
    args = parser.parse_args()
    for size in args.sizes:
        print(f"{size:,} bytes, body {chunking.params_for(size)}, {args.keys} keys")
        for nc in args.nc:
            with body_nc(nc):
                figures = measure(size, args.keys, args.positions)
            for name, found in figures.items():
                print(f"  nc {nc} {name:9s} {found.line()}", flush=True)


if __name__ == "__main__":
    main()
