"""The plaintext of a file header: the same bytes as the JSON it has always been."""

from __future__ import annotations

import json

import pytest

from gitmem.format import decode_header, encode_header


@pytest.mark.parametrize("size", [0, 1, 9, 10, 659, 65_536, 2**31 + 7, 10**15])
@pytest.mark.parametrize("chunks", [0, 1, 12, 1_000_000])
def test_header_bytes_are_the_canonical_json(size: int, chunks: int) -> None:
    # Headers are sealed deterministically: other bytes would give every file a new header
    # blob, and break the dedup of unchanged files against those written before.
    expected = json.dumps({"size": size, "chunks": chunks}, separators=(",", ":")).encode()
    assert encode_header(size, chunks) == expected
    assert decode_header(encode_header(size, chunks)) == (size, chunks)
