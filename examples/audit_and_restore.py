"""Audit what an agent remembered and bring back an earlier state, from Python.

Run it with ``python examples/audit_and_restore.py``: it builds a small store in a temporary
directory, shows its history, restores the state before a deletion, and verifies the store.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import gitmem
from gitmem import parse_path


def main(argv: list[str] | None = None) -> int:
    key = gitmem.generate_key()
    with tempfile.TemporaryDirectory() as tmp:
        store = gitmem.MemoryStore.open(
            Path(tmp) / "memory.git", key, create=True, session="agent-run-1"
        )
        notes = parse_path("/memories/notes.md")
        store.create(notes, "- the build uses ./init.sh\n")
        store.insert(notes, 1, "- tests: pytest -q")
        store.delete(notes)  # the agent forgets... by mistake

        print("History, newest first:")
        for op in store.log():
            print(f"  #{op.seq} {op.record.time:%H:%M:%S} {op.session} {op.command} {op.paths}")

        before_delete = store.resolve("HEAD~1")
        restored = store.restore(before_delete)
        if restored is None:  # the memory already matched it: no commit was made
            print(f"Nothing to restore: the memory already matches {before_delete[:10]}")
        else:
            print(
                f"Restored {restored.paths} from {before_delete[:10]} as operation #{restored.seq}"
            )
        print(store.read_text(notes), end="")

        report = store.verify()
        print(f"verify: {report.commits} commits, {report.objects} objects, ok={report.ok}")
        return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
