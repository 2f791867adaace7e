"""The evidence chain: append-only, hash-chained, signed records of what the node did.

``<data>/evidence/chain.jsonl`` (``DataPaths.evidence_chain``) holds one record per line
(canonical JSON)::

    {"seq": 0, 1, 2, …, "ts": unix ms, "kind": "task.accepted", "data": {...},
     "prev": hash of the previous record (null for seq 0),
     "hash": base64url SHA-256 of canonical {"seq", "ts", "kind", "data", "prev"},
     and on the last record of each append:
     "signer": AID, "keySeq": n, "signature": Ed25519 (evidence context) over the canonical record
     without "signature"}

A signed record vouches for itself and, through ``prev``, for the unsigned records of its append
before it: one signature per append, whatever the number of records it writes. Records after the
last signed one are what a crash left of an append, proven by nothing; the next append cuts them.

``head.json`` beside it holds the last appended seq and hash, signed (head context) and replaced
atomically after each append. A chain that ends before its head was truncated; without the head,
dropping the newest records would leave a perfectly valid shorter chain.

The daemon's chain has a journal (the node's store): a record is kept there in the commit of the
change it records (:meth:`EvidenceChain.keep`; or, made outside a transaction, in one of its own),
which the store's next flush makes durable before anyone is told of it, and appended to the
chain up to ``APPEND_AFTER_S`` later (the records of that time share one append and one
signature), once its row is on disk, without an fsync of its own.
The chain is synced when its head moves (every :data:`HEAD_EVERY_RECORDS` records, when idle, when
the node stops), and the journal then forgets what the chain holds on disk;
:meth:`EvidenceChain.recover` appends, at start, what a crash of the machine took from the chain's
tail. An append without a journal (the CLI, other processes) is synced before it returns, and moves
the head.

Records signed by a key that a later emergency rotation revoked still verify here: the chain is
the node's own, and revocation cannot make what it recorded earlier untrue. Do not put secrets or
message content in ``data``: hashes and ids are enough to prove what happened.

Modules: ``format`` (what a record holds, its hash and line, the lines of one append), ``file``
(:class:`ChainFile`: appends under a lock, fsyncs, the head, the chain's end read back and cut
after a crash), ``chain`` (:class:`EvidenceChain`: the event loop's writer, the journal,
recovery), ``verify`` (reading and checking the chain).
"""

from anet_core.evidence.chain import EvidenceChain, EvidenceJournal, KeptRecords
from anet_core.evidence.file import (
    HEAD_EVERY_RECORDS,
    HEAD_FILE,
    MAX_APPEND_RECORDS,
    MAX_HEAD_LAG,
    EvidenceError,
)
from anet_core.evidence.format import EvidenceHead, check_kind, record_hash
from anet_core.evidence.verify import (
    ChainSegment,
    EvidenceIssue,
    EvidenceReport,
    ReadRecord,
    read_records,
    read_segment,
    verify,
)

__all__ = [
    "HEAD_EVERY_RECORDS",
    "HEAD_FILE",
    "MAX_APPEND_RECORDS",
    "MAX_HEAD_LAG",
    "ChainSegment",
    "EvidenceChain",
    "EvidenceError",
    "EvidenceHead",
    "EvidenceIssue",
    "EvidenceJournal",
    "EvidenceReport",
    "KeptRecords",
    "ReadRecord",
    "check_kind",
    "read_records",
    "read_segment",
    "record_hash",
    "verify",
]
