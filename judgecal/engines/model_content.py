"""The judge's weights by content: a hash of its model files, recorded in ``study.json`` at collect.

Request ids hold the judge's identity, which names a model file (``llamacpp:judge.gguf``) or
folder, not its bytes: a GGUF re-exported after fine-tuning under the same name, or a model
folder whose weights were replaced, would have its new answers mixed with the old model's on
resume, each passing for the other. The runner records :func:`model_content` at the first
collect and refuses a later collect whose files hash otherwise (one line naming the field and the
files that changed; use a new output folder or restore the files).

A file's SHA-256 is read once per version of the file: a cache (``JUDGECAL_CACHE``, default
``~/.cache/judgecal``, ``model_hashes.json``) keys it by the file's real path, size, mtime, ctime
and inode. Any write to a file sets its ctime, which no unprivileged call can set back, so a
replaced file is read again. A folder's files are every file under it but hidden ones
(``.git``, a hub client's ``.cache``) and the prose beside the weights (``*.md``, licence and
notice files), in name order.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from pathlib import Path

from judgecal.engines.local_judges import cache_dir

CACHE_FILE = "model_hashes.json"
CACHE_ENTRIES = 512  # the newest kept: a few models' files, each version once
ANNOUNCE_BYTES = 1 << 30  # reading more than this (uncached) says so first: ~1 s a GB
_PROSE = ("readme", "license", "licence", "notice", "use_policy")
SPLIT_GGUF = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")  # llama.cpp's gguf-split names
NAMED_CHANGES = 3  # files named in a refusal; the rest counted


def model_files(root: Path) -> list[Path]:
    """The files whose bytes make the model: ``root`` itself (with the other shards of a split
    GGUF, ``name-00001-of-00003.gguf``, which llama.cpp loads from beside it), or the files
    under a folder (above)."""
    if not root.is_dir():
        split = SPLIT_GGUF.search(root.name)
        if split is None:
            return [root]
        shard = re.compile(re.escape(root.name[:split.start()]) + rf"-\d{{5}}-of-{split.group(2)}\.gguf")
        return sorted(p for p in root.parent.iterdir() if shard.fullmatch(p.name))
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        if p.suffix.lower() == ".md" or p.name.lower().startswith(_PROSE):
            continue
        out.append(p)
    return out


def model_content(path: str, log=None) -> dict:
    """``{"path", "files": {name: sha256[:16]}, "hash"}`` of the model at ``path`` (a file or
    a folder); ``log`` hears one line before a long first read."""
    root = Path(path).expanduser()
    files = model_files(root)
    cache = _read_cache()
    keys = {f: _stat_key(f) for f in files}
    unread = [f for f in files if keys[f] not in cache]
    size = sum(f.stat().st_size for f in unread)
    if log and size > ANNOUNCE_BYTES:
        log(f"[collect] reading the judge's model files once to record their content ({size / 1e9:.1f} GB, "
            f"{len(unread)} files; later collects read them only if they change)")
    for f in unread:
        cache[keys[f]] = _sha256(f)
    if unread:
        _write_cache(cache)
    named = {(str(f.relative_to(root)) if root.is_dir() else f.name): cache[keys[f]][:16] for f in files}
    whole = hashlib.sha256(json.dumps(sorted(named.items())).encode()).hexdigest()[:16]
    return {"path": str(root), "files": named, "hash": whole}


def content_change(old: dict, new: dict) -> str | None:
    """What differs between two :func:`model_content` records (None: the same bytes)."""
    if old.get("hash") == new.get("hash"):
        return None
    before, now = old.get("files") or {}, new.get("files") or {}
    said = [f"{n}: {before[n]} at collect, now {now[n]}" for n in now if n in before and before[n] != now[n]]
    said += [f"{n} gone" for n in before if n not in now] + [f"{n} new" for n in now if n not in before]
    more = f"; and {len(said) - NAMED_CHANGES} more files" if len(said) > NAMED_CHANGES else ""
    return "; ".join(said[:NAMED_CHANGES]) + more or f"content {old.get('hash')} at collect, now {new.get('hash')}"


def _stat_key(f: Path) -> str:
    real = f.resolve()
    st = real.stat()
    return f"{real}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}|{st.st_ino}"


def _sha256(f: Path) -> str:
    with open(f, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _read_cache() -> dict:
    try:
        cache = json.loads((cache_dir() / CACHE_FILE).read_text())
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):  # none yet, or unreadable: every file is read again
        return {}


def _write_cache(cache: dict) -> None:
    """Best effort (a read-only home only costs a re-read), whole or not at all."""
    target = cache_dir() / CACHE_FILE
    keep = dict(list(cache.items())[-CACHE_ENTRIES:])
    tmp = target.with_name(f"{CACHE_FILE}.{uuid.uuid4().hex}.tmp")  # a home shared by several machines
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(keep))
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
