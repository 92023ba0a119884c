"""The one stable hash: request ids, content fingerprints, part names and template versions.

sha256 over the parts joined by a unit separator, so ("ab", "c") and ("a", "bc") differ;
hex-truncated to ``n`` characters. Stable across processes and Python versions (unlike
``hash()``), which is what resume and exactly-once commits rest on.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

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
