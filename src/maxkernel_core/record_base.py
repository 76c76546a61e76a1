"""What makes a class a record: its registration for JSON round-trips, its schema version, and record ids."""

from __future__ import annotations

import time
import uuid


def new_id(prefix: str) -> str:
    """A short, sortable-enough unique id such as ``cand-1f3a9c2b7d10``."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _now() -> float:
    return time.time()


#: Record classes by name, for JSON round-trips. A class's ``__schema_version__``
#: (default 1) is bumped when its fields change incompatibly; ``from_json``
#: refuses a newer version than it knows instead of misreading it.
RECORD_TYPES: dict[str, type] = {}


def record(cls):
    """Register a record class for JSON round-trips under its class name."""
    if RECORD_TYPES.setdefault(cls.__name__, cls) is not cls:
        raise TypeError(f"two record classes are named {cls.__name__}")
    return cls


def schema_version(cls: type) -> int:
    return getattr(cls, "__schema_version__", 1)
