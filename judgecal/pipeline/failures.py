"""What stopped a collect, in one line.

Ray hands the driver a worker's error as text (its chain flattened into one traceback), and
Ray Data marks an error it takes for its own with an empty ``SystemException`` as the cause:
:func:`root_cause` reads past both to the exception that started it all.

An engine replica that dies while it starts (a Ray actor's creation task: vLLM refusing its
``gpu_memory_utilization``, a model it cannot load) is no stop to resume: every rerun fails the
same way. vLLM starts its engine core in a process of its own, and the driver's exception
says only "Engine core initialization failed. See root cause above": the reason is in that
process's log lines, which Ray forwards to the driver's stderr, where
:mod:`judgecal.pipeline.quiet` keeps the workers' error lines (:func:`quiet.worker_errors`).
:func:`start_failure` puts the first of them in the line, and names the ``[engine]`` field a
``--flag`` it mentions stands for.
"""

from __future__ import annotations

import re

from judgecal.redact import redact

CHAINED = ("The above exception was the direct cause of the following exception:",  # Python's separators
           "During handling of the above exception, another exception occurred:")
_TYPE_LINE = re.compile(r"^([A-Za-z_][\w.]*): (.*)$")
_RAY_DATA_MARKS = ("SystemException", "UserCodeException")  # Ray Data's empty causes: no reason in them
_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)+)")


def root_cause(e: BaseException) -> str:
    """The exception that started it all, in one line: the first exception of the first section
    of a worker's traceback text; judgecal's own errors show their message alone."""
    while e.__cause__ is not None and not _ray_data_mark(e.__cause__):  # the driver's own chain
        e = e.__cause__
    first = redact(str(e))  # before it is cut short: a secret cut in half would no longer match
    if 'File "' not in first:  # raised here, not a worker's traceback as text
        lines = first.strip().splitlines()
        kind = type(e).__name__
        return (lines[0] if kind in ("InputError", "BadPart") and lines else
                f"{kind}: {lines[0] if lines else ''}".rstrip(": "))[:300]
    for sep in CHAINED:
        first = first.split(sep)[0]
    found = [m for m in map(_TYPE_LINE.match, (ln.rstrip() for ln in first.splitlines())) if m]
    if not found:
        return last_error_line(e)
    kind, message = found[-1].group(1).rsplit(".", 1)[-1], found[-1].group(2)
    return (message if kind in ("InputError", "BadPart") else f"{kind}: {message}")[:300]


def _ray_data_mark(e: BaseException) -> bool:
    return type(e).__name__ in _RAY_DATA_MARKS and not str(e)


def last_error_line(e: BaseException) -> str:
    """Ray wraps a worker's exception in its traceback; its last 'Type: message' line says what failed."""
    lines = [ln.strip() for ln in redact(str(e)).splitlines() if ": " in ln and not ln.startswith(" ")]
    return (lines[-1] if lines else redact(f"{type(e).__name__}: {e}"))[:300]


OWN_ACTORS = ("_Render", "_Commit", "ProgressBoard")  # judgecal's stages beside the engine's


def died_starting(e: BaseException) -> bool:
    """Whether ``e`` (or the error it wraps) is an engine replica (a Ray actor, not one of
    judgecal's own stages) that died in its creation task."""
    while e is not None:
        text = str(e)
        if type(e).__name__ == "ActorDiedError" and "creation task" in text:
            head = text.split("\n", 1)[0]
            return not any(f"({name})" in head or f"ray::{name}" in head for name in OWN_ACTORS)
        e = e.__cause__
    return False


def start_failure(e: BaseException, worker_errors: list[str], engine_cfg) -> str:
    """The line for an engine replica that died while starting: the workers' first error line
    that is not the driver's own cause (vLLM's reason, logged by its engine core), then the
    cause, and the ``[engine]`` field a ``--flag`` in them stands for."""
    cause = root_cause(e)
    reason = first_reason(worker_errors, cause)
    said = f"{reason[:500]} (then {cause[:160]})" if reason else cause
    fields = [f.replace("-", "_") for f in _FLAG.findall(said)]
    named = [f for f in dict.fromkeys(fields) if hasattr(engine_cfg, f)]
    return ("the judge engine failed to start on its replica, so nothing was asked (a rerun fails the same way "
            "until this is mended): " + said
            + "".join(f"; --{f.replace('_', '-')} is [engine].{f} in the config" for f in named))


def first_reason(worker_errors: list[str], cause: str) -> str | None:
    """The first worker error line that is not the driver's own cause, redacted (before any cut)."""
    return next((redact(w) for w in worker_errors if w.split(": ", 1)[-1] not in cause), None)
