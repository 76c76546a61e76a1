"""Messages between the orchestrator and a worker: a JSON header plus raw arrays.

Deliberately not pickle: the parent reads what an untrusted process wrote, and
unpickling would let that process run code in the parent. A message is

    u32 header length | header JSON | for each array: u64 length | raw bytes

with each array's dtype name and shape in ``header["arrays"]``. Sizes are
checked against a limit before anything is allocated.
"""

from __future__ import annotations

import json
import struct
import threading
import weakref
from typing import Any, BinaryIO

import ml_dtypes  # noqa: F401  (registers bfloat16 & co. with numpy by name)
import numpy as np

MAX_HEADER = 64 << 20
MAX_MESSAGE = 4 << 30


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


def _dtype(name: str) -> np.dtype:
    try:
        dtype = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
    except TypeError as exc:
        raise ProtocolError(f"unknown dtype {name!r}") from exc
    if dtype.hasobject:  # raw bytes never make Python objects
        raise ProtocolError(f"dtype {name!r} holds Python objects")
    return dtype


def _array_spec(spec: Any) -> tuple[np.dtype, tuple[int, ...]]:
    """An array's (dtype, shape) as the header describes it; ProtocolError when it is not one."""
    if (not isinstance(spec, dict) or not isinstance(spec.get("dtype"), str) or not isinstance(spec.get("shape"), list)
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in spec["shape"])):
        raise ProtocolError(f"an array described as {str(spec)[:100]}")
    return _dtype(spec["dtype"]), tuple(spec["shape"])


#: one lock per stream: a message is several writes (its arrays are written from their own memory), and two
#: threads sending on one stream must not interleave them
_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_locks_lock = threading.Lock()


def _lock_of(stream: BinaryIO) -> threading.Lock:
    with _locks_lock:
        lock = _locks.get(stream)
        if lock is None:
            lock = _locks[stream] = threading.Lock()
        return lock


def send(stream: BinaryIO, header: dict[str, Any], arrays: list[np.ndarray] = ()) -> None:
    # not np.ascontiguousarray: it turns a 0-d array (a scalar output, e.g. a loss) into shape (1,)
    arrays = [np.asarray(a) for a in arrays]
    arrays = [a if a.flags.c_contiguous else a.copy(order="C") for a in arrays]
    header = {**header, "arrays": [{"dtype": a.dtype.name, "shape": list(a.shape)} for a in arrays]}
    blob = json.dumps(header, default=str).encode()
    # every part made before the first byte goes out: a failure half-way would leave half a message on the stream
    raw = [memoryview(a.reshape(-1).view(np.uint8)) if a.nbytes else b"" for a in arrays]
    with _lock_of(stream):
        stream.write(struct.pack("<I", len(blob)) + blob)
        for data in raw:  # the array's own memory, not a copy: outputs of a full-size program run to gigabytes
            stream.write(struct.pack("<Q", len(data)))
            if len(data):
                stream.write(data)
        stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    return _read_array(stream, n).tobytes()


def recv(stream: BinaryIO, max_bytes: int = MAX_MESSAGE) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Read one message; EOFError at a clean end of stream, ProtocolError on garbage."""
    header, arrays, _ = recv_counted(stream, max_bytes)
    return header, arrays


def recv_counted(stream: BinaryIO, max_bytes: int = MAX_MESSAGE) -> tuple[dict[str, Any], list[np.ndarray], int]:
    """``recv``, with the message's size in bytes (its header's included), which may not pass ``max_bytes``."""
    head = stream.read(4)
    if not head:
        raise EOFError
    if len(head) < 4:
        head += _read_exact(stream, 4 - len(head))
    (size,) = struct.unpack("<I", head)
    if size > min(MAX_HEADER, max_bytes):
        raise ProtocolError(f"header of {size} bytes is over the limit")
    try:
        header = json.loads(_read_exact(stream, size))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}"[:300]) from exc
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    specs = header.get("arrays", [])
    if not isinstance(specs, list):
        raise ProtocolError("the header's arrays are not a list")
    arrays, total = [], size
    for spec in specs:
        dtype, shape = _array_spec(spec)
        (length,) = struct.unpack("<Q", _read_exact(stream, 8))
        total += length
        if total > max_bytes:
            raise ProtocolError(f"message of over {max_bytes} bytes")
        if length != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise ProtocolError(f"array of {length} bytes does not match {spec}")
        arrays.append(_read_array(stream, length).view(dtype).reshape(shape))
    return header, arrays, total


def _read_array(stream: BinaryIO, n: int) -> np.ndarray:
    """``n`` bytes read straight into a new array (no chunks joined: a full-size output is gigabytes)."""
    buf = np.empty(n, dtype=np.uint8)
    view, done = memoryview(buf), 0
    while done < n:
        got = stream.readinto(view[done:])
        if not got:
            raise EOFError
        done += got
    return buf
