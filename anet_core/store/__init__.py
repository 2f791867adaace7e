"""The node's SQLite store (``<data>/anet.db``): tasks, idempotency keys, outbox, replay ids,
trust list, inbound policy, inbox, and the evidence journal.

One connection, used from the event loop. Every statement is short (indexed lookups, one-row
writes), so running them inline costs less than handing them to a thread (measured with
``bench/tasks.py``: a task round trip does about a dozen statements, each well under 0.1 ms).

WAL with ``synchronous=NORMAL``: a commit is written to the WAL file but not synced. The disk
is reached in one of two ways (docs/performance.md, "Durability"):

- ``transaction()`` (durable): the WAL is fsynced before the block returns, as
  ``synchronous=FULL`` would;
- ``transaction(durable=False)``: nothing waits for the disk; :meth:`Store.flush` makes every
  commit made so far durable with one fsync of the WAL (group commit). Whoever acknowledges
  such a write to anyone (an A2A client, the hub, a peer, a backend) awaits ``flush()`` first;
  the task layer does it in one place, before it carries out a transaction's effects.

Either way a crash of the daemon loses no commit, and a crash of the machine loses at most
commits nobody was told of, whole transactions, never a part of one.

The schema carries its version in ``PRAGMA user_version``; :data:`MIGRATIONS` holds one script
per version and :func:`open_store` applies the missing ones in one transaction each.

Modules: ``schema`` (the tables, their migrations, the connection's pragmas, opening the file),
``rows`` (the typed rows), ``paging`` (ListTasks pages of a ``tasks`` table), ``database``
(:class:`Store`: transactions, syncs of the WAL, each table's reads and writes).
"""

from anet_core.store.database import Store, immediate_transaction
from anet_core.store.paging import page_newest_first
from anet_core.store.rows import JournaledRecord, OutboxEntry, StoredTask, StoreError, TaskRole
from anet_core.store.schema import MIGRATIONS, SCHEMA_VERSION, open_store

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "JournaledRecord",
    "OutboxEntry",
    "Store",
    "StoreError",
    "StoredTask",
    "TaskRole",
    "immediate_transaction",
    "open_store",
    "page_newest_first",
]
