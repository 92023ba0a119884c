"""Secrets taken out of every text judgecal keeps or prints: one function, one list.

A judge's server may echo the API key it was sent (in an error body, or even in an answer),
and a storage error may quote a credential; whatever reaches ``raw_text``, a results log, a
report or an error line goes through :func:`redact` first. The secrets are the values of the
environment variables that hold them, read when redacting (a key set later is still
covered): the AWS credentials, the variable each HTTP judge reads its key from
(``[engine] api_key_env``, registered by :func:`add_secret_env`), and any variable whose name
ends in ``_API_KEY``, ``_TOKEN``, ``_SECRET`` or ``_PASSWORD``. Values shorter than
:data:`MIN_SECRET_CHARS` are left alone: replacing them would garble ordinary text, and a
secret that short protects nothing.
"""

from __future__ import annotations

import os

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
SECRET_ENV = {"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECURITY_TOKEN",
              "OPENAI_API_KEY"}
SECRET_SUFFIXES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")


def add_secret_env(name: str) -> None:
    """Also redact the value of variable ``name`` (an HTTP judge's ``api_key_env``)."""
    if name:
        SECRET_ENV.add(name)


def secrets() -> list[str]:
    """The secret values set now, longest first (a key that holds another is replaced whole)."""
    found = {v for k, v in os.environ.items()
             if (k in SECRET_ENV or k.upper().endswith(SECRET_SUFFIXES)) and len(v) >= MIN_SECRET_CHARS}
    return sorted(found, key=len, reverse=True)


def redact(text, extra: tuple[str, ...] = ()):
    """``text`` with every secret (and each of ``extra`` of at least MIN_SECRET_CHARS) replaced
    by ``[redacted]``; None and non-text pass through unchanged."""
    if not isinstance(text, str) or not text:
        return text
    for s in (*sorted((e for e in extra if e and len(e) >= MIN_SECRET_CHARS), key=len, reverse=True), *secrets()):
        if s in text:
            text = text.replace(s, REDACTED)
    return text
