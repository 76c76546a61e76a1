"""The SQLite run store and its migrations."""

from .runstore import DB_NAME, RunRow, RunStore, default_home

__all__ = ["DB_NAME", "RunRow", "RunStore", "default_home"]
