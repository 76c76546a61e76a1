"""JSON round-trips for records, with the record type and schema version stored alongside.

    >>> data = to_json(candidate)          # {"_record": "Candidate", "_v": 1, ...}
    >>> from_json(data) == candidate       # True
    >>> from_json(data, Candidate)         # checks the type too
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

import attrs
import cattrs

from . import records
from .errors import StoreError

T = TypeVar("T")

_converter = cattrs.Converter()
# float | tuple[float, ...] (per-input tolerances) is a union cattrs cannot guess.
_converter.register_structure_hook(
    float | tuple[float, ...],
    lambda v, _t: tuple(float(x) for x in v) if isinstance(v, (list, tuple)) else float(v),
)


def to_json(obj: Any) -> dict[str, Any]:
    """Unstructure a record into a JSON-ready dict tagged with ``_record`` and ``_v``."""
    cls = type(obj)
    if not attrs.has(cls) or records.RECORD_TYPES.get(cls.__name__) is not cls:
        raise TypeError(f"{cls.__name__} is not a maxkernel record")
    data = _converter.unstructure(obj)
    return {"_record": cls.__name__, "_v": records.schema_version(cls), **data}


def from_json(data: dict[str, Any] | str, expected: type[T] | None = None) -> T:
    """Structure a dict (or JSON text) made by :func:`to_json` back into its record."""
    if isinstance(data, str):
        data = json.loads(data)
    data = dict(data)
    name = data.pop("_record", None)
    version = data.pop("_v", None)
    cls = records.RECORD_TYPES.get(name)
    if cls is None:
        raise StoreError(f"stored JSON names an unknown record type {name!r}")
    if not isinstance(version, int) or version > records.schema_version(cls):
        raise StoreError(
            f"stored {name} has schema version {version}, this maxkernel reads up to "
            f"{records.schema_version(cls)}: upgrade maxkernel to read it"
        )
    if expected is not None and cls is not expected:
        raise StoreError(f"expected a stored {expected.__name__}, found a {name}")
    return _converter.structure(data, cls)


def dumps(obj: Any) -> str:
    """A record as compact JSON text (what the run store keeps)."""
    return json.dumps(to_json(obj), sort_keys=True, default=str)
