"""The git storage: a bare git repository as layers, lowest first (tests/test_layers.py).

- ``wal`` (the redo log's file format), ``files`` (what the layers share about files);
- ``pack`` (packs gitmem writes), ``handle`` (opening with libgit2, once per thread),
  ``flush`` (the write mode, group commit);
- ``objects`` (loose and packed, knowing nothing of the log), ``refs``, ``config``, ``lock``;
- ``redo`` (the redo log, over objects and refs), ``maintenance`` (packing, gc),
  ``remotes`` (fetch, push, credentials);
- ``repo``: :class:`GitRepo`, which composes them and decides the order.

Only the modules of this package import pygit2.
"""
