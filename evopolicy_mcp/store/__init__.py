"""The store: run records in SQLite (WAL) and files beside it, written atomically.

Owns the schema and record types (``records``), the database with its
one-transaction budget reservation (``database``) and the lock files of the host
instances sharing a data directory (``instances``).

May import: nothing of the package (a leaf).
"""

from evopolicy_mcp.store.database import PENDING, Store, default_data_dir
from evopolicy_mcp.store.records import Rejected, RunRecord, StoreError, SubmissionRecord

__all__ = [
    "PENDING",
    "Rejected",
    "RunRecord",
    "Store",
    "StoreError",
    "SubmissionRecord",
    "default_data_dir",
]
