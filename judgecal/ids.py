"""The one stable hash: request ids, content fingerprints, part names and template versions.

sha256 over the parts joined by a unit separator, so ("ab", "c") and ("a", "bc") differ;
hex-truncated to ``n`` characters. Stable across processes and Python versions (unlike
``hash()``), which is what resume and exactly-once commits rest on.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

import numpy as np

_SEP = b"\x1f"


def stable_hash(*parts: object, n: int = 16) -> str:
    h = hashlib.sha256()
    for i, p in enumerate(parts):
        if i:
            h.update(_SEP)
        h.update(str(p).encode())
    return h.hexdigest()[:n]


def stable_hash_many(parts: Iterable[object], n: int = 16) -> str:
    """Hash of a long sequence (e.g. the request ids of a part) without joining it in memory."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(_SEP)
    return h.hexdigest()[:n]


def stable_unit(key: str) -> float:
    """A fixed pseudo-random number in [0, 1] for ``key`` (simulated judges, seeds)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


# -- vectorised ids: 10^7 request ids without 10^7 sha256 calls ---------------------------
# A request id is 128 bits shown as 32 hex characters. The plan hashes each item and each
# probe once (sha256, as above) and combines the two keys with the run/order counter by a
# bijective 64-bit mixer per lane (splitmix64's finaliser), so distinct (item, probe,
# counter) rows collide only as two random 128-bit values would.

_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def key128(*parts: object) -> tuple[int, int]:
    """The first 128 bits of ``stable_hash(*parts)`` as two 64-bit integers."""
    h = stable_hash(*parts, n=32)
    return int(h[:16], 16), int(h[16:], 16)


def _mix64(z: np.ndarray) -> np.ndarray:
    z = z ^ (z >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    return z ^ (z >> np.uint64(31))


def _rotl(z: np.ndarray, r: int) -> np.ndarray:
    return (z << np.uint64(r)) | (z >> np.uint64(64 - r))


def combine_keys(left: np.ndarray, right: np.ndarray, counter: np.ndarray) -> np.ndarray:
    """Row keys (n, 2) uint64 from two (n, 2) key arrays and an (n,) counter."""
    with np.errstate(over="ignore"):
        c = _mix64(counter.astype(np.uint64) + _GOLD)
        hi = _mix64(left[:, 0] ^ _rotl(right[:, 0], 23) ^ c)
        lo = _mix64(left[:, 1] ^ _rotl(right[:, 1], 41) ^ _mix64(c ^ _GOLD))
    return np.column_stack([hi, lo])


def hex_ids(keys: np.ndarray):
    """(n, 2) uint64 keys -> a pyarrow string array of 32 hex characters each."""
    import pyarrow as pa

    n = len(keys)
    raw = keys.astype(">u8").view(np.uint8).reshape(n, 16)  # big-endian: hi then lo, as written
    chars = np.empty((n, 32), np.uint8)
    chars[:, 0::2], chars[:, 1::2] = _HEX[raw >> 4], _HEX[raw & 15]
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32 if 32 * n < 2**31 else np.int64)
    kind = pa.string() if offsets.dtype == np.int32 else pa.large_string()
    arr = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())])
    return arr.cast(pa.string()) if kind != pa.string() else arr


_ID_CHUNK = 1 << 20


def id_keys(ids) -> np.ndarray:
    """Request ids (a pyarrow string array) -> (n, 2) uint64 keys. 32-character hex ids map to
    their own bits (vectorised); any other id is hashed (the slow path, for hand-made plans)."""
    import pyarrow as pa

    if isinstance(ids, pa.ChunkedArray) or len(ids) > _ID_CHUNK:  # bounded temporaries: a chunk at a time
        chunks = ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]
        parts = [_id_keys(c.slice(s, _ID_CHUNK)) for c in chunks for s in range(0, len(c), _ID_CHUNK)]
        return np.concatenate(parts) if parts else np.zeros((0, 2), np.uint64)
    return _id_keys(ids)


def _id_keys(ids) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = ids.cast(pa.string())
    n = len(ids)
    if n == 0:
        return np.zeros((0, 2), np.uint64)
    if ids.null_count == 0 and pc.all(pc.equal(pc.utf8_length(ids), 32)).as_py():
        offsets = np.frombuffer(ids.buffers()[1], np.int32, n + 1, ids.offset * 4)
        data = memoryview(ids.buffers()[2])[offsets[0]:offsets[-1]]
        try:  # C-speed hex decoding of the whole buffer at once
            raw = bytes.fromhex(bytes(data).decode("ascii"))
            return np.frombuffer(raw, ">u8").reshape(n, 2).astype(np.uint64)
        except (ValueError, UnicodeDecodeError):
            pass
    return np.array([key128("id", i) for i in ids.to_pylist()], np.uint64).reshape(n, 2)
