"""Keep Ray's known false alarms off a collect's console.

Ray Data hands every actor-pool stage its transform through the object store and lets the
actors restart, and Ray's C++ core worker then logs, at error level, once per process, that
"constructor arguments in the object store and max_restarts > 0" may fail a restart
(ray-project/ray#53727). Here it cannot: the driver holds those objects for the whole
collect. It is written by C++ straight to file descriptor 2, so no Python logging setting
reaches it: :func:`drop_known_ray_noise` routes fd 2 through a pipe for the duration of a
collect and forwards every line but the ones matching :data:`KNOWN_NOISE` (that one, and
the lines a lost cluster prints per failed task before judgecal says it in one line).

The same filter keeps the first error lines the workers print (:func:`worker_errors`): an
engine that dies while it starts says why only there (vLLM's engine core, a process of its
own, logs its reason; the exception the driver gets says "see root cause above"). And it
shows a worker's traceback as its "Type: message" lines alone (:class:`TracebackFolder`):
a vLLM replica that failed to start printed ~200 lines of frames, three processes' worth;
the frames stay in the workers' log files (Ray's session folder, ``logs/worker-*.err``).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading

from judgecal.pipeline.failures import CHAINED

KNOWN_NOISE = re.compile(r"core_worker\.cc:\d+: Actor with class name: .* has constructor arguments in the object "
                         r"store and max_restarts > 0"
                         # the cluster's head gone: a line a second per failed task, ~60 before judgecal's own
                         # one line says so (pipeline.cluster_watch; a user's finding)
                         r"|task_manager\.cc:\d+: Failed to push error to driver for task")
# A worker's line as Ray forwards it: "(ClassName(...) pid=123, ip=...) text", maybe in colour.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_WORKER_LINE = re.compile(r"^(\(.*? pid=\d+[^)]*\) )"  # Ray's prefix: which worker
                          r"(\([\w.-]+ pid=\d+\) )?"  # a process of the worker's own (vLLM's)
                          r"(?:[A-Z]+ \d\d-\d\d [\d:]+ \[[^\]]+\] )?(.*)$")  # vLLM's log header
# what was raised, at the start of a worker line's body: "ValueError: ...", "pyarrow.lib.ArrowInvalid: ...",
# "ray.exceptions.RayTaskError(ValueError): ..." (not "... after ConnectionError: ..." inside a sentence)
_RAISED = re.compile(r"^((?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Invalid)\w*(?:\([\w.]*\))?): (\S.*)$")
MAX_WORKER_ERRORS = 20
_worker_errors: list[str] = []


def worker_errors() -> list[str]:
    """The distinct "Type: message" lines the workers printed during the last filtered stretch,
    first ones first (at most :data:`MAX_WORKER_ERRORS`)."""
    return list(_worker_errors)


def worker_line(line: str) -> re.Match | None:
    """A worker's line as Ray forwards it: groups (Ray's prefix, the worker's own process, body)."""
    return _WORKER_LINE.match(_ANSI.sub("", line))


def _note_worker_error(w: re.Match | None) -> None:
    if len(_worker_errors) >= MAX_WORKER_ERRORS:
        return
    m = _RAISED.match(w.group(3)) if w else None
    if m and (said := f"{m.group(1)}: {m.group(2).strip()}") not in _worker_errors:
        _worker_errors.append(said)


@contextlib.contextmanager
def drop_known_ray_noise():
    """Yields a text stream on the real stderr (for a progress bar, whose carriage returns the
    line-by-line filter would hold back), or None when there is no fd 2 to filter."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:  # no usable fd 2 (embedded interpreters): nothing to filter
        yield None
        return
    _worker_errors.clear()
    _folder.inside.clear()
    os.dup2(write_end, 2)
    os.close(write_end)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1)

    def forward():
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            pending = b""
            while chunk := pipe.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                _write(saved, lines)
            if pending:
                _write(saved, [pending], newline=False)

    thread = threading.Thread(target=forward, name="judgecal-stderr", daemon=True)
    thread.start()
    try:
        yield terminal
    finally:
        sys.stderr.flush()
        terminal.close()
        os.dup2(saved, 2)  # the pipe's last writer closes: the thread drains it and stops
        thread.join(timeout=5)
        if not thread.is_alive():  # else a child still holds the pipe: the thread keeps its fd
            os.close(saved)


# a crash's dump, line by line: C++ frames ("lib.so(+0x1a) [0x7f..] fn", "PC: @ ...", "@ ..."), Ray's
# crash handler repeating them ("[date E pid tid] logging.cc:474: ***"), Python's module list
_DUMP_LINE = re.compile(r"^(?:PC: @|@ |Extension modules:|\S*\(\S*\+0x[0-9a-f]+\) \[0x"
                        r"|\[[\d-]+ [\d:,.]+ [A-Z] \d+ \d+\] logging\.cc:\d+: +(?:\*\*\*|PC: @|@))")
_FRAMES_FROM = ("Traceback (most recent call last):", "Stack (most recent call first):", "*** SIG")  # dropped
_FRAMES_AFTER = ("Exception raised in creation task:", "Fatal Python error:")  # kept, frames after it dropped


class TracebackFolder:
    """Per worker process: a traceback's frames (and a crash's stack dump) are dropped, the
    lines saying what was raised are kept. Frames are indented (a C++ stack's lines start with
    its library's path); the first line that is neither ends the traceback and is kept, so a
    bare ``AssertionError`` ends it too."""

    def __init__(self):
        self.inside: set[str] = set()

    def keep(self, line: str) -> bool:
        return self.keep_parsed(worker_line(line))

    def keep_parsed(self, m: re.Match | None) -> bool:
        if not m:
            return True
        who, body = m.group(1) + (m.group(2) or ""), m.group(3)
        if body.startswith(_FRAMES_FROM) or body.strip() in CHAINED:
            self.inside.add(who)
            return False
        if body.startswith(_FRAMES_AFTER) or body.rstrip().endswith("Stack trace:"):  # Ray's C++ one
            self.inside.add(who)
            return True
        if who not in self.inside:
            return True
        if not body.strip() or body[0] in " \t^~/" or _DUMP_LINE.match(body):  # a frame, its carets, a dump line
            return False
        self.inside.discard(who)  # what was raised (or whatever the worker says next)
        return True


_folder = TracebackFolder()


def _write(fd: int, lines: list[bytes], newline: bool = True) -> None:
    kept = []
    for ln in lines:
        text = ln.decode("utf-8", "replace")
        if not KNOWN_NOISE.search(text):
            w = worker_line(text)  # parsed once: every stderr line of a collect passes here
            _note_worker_error(w)
            if _folder.keep_parsed(w):
                kept.append(ln + (b"\n" if newline else b""))
    out = b"".join(kept)
    if out:
        try:
            os.write(fd, out)
        except OSError:  # stderr closed under us: nothing left to show the lines to
            pass


@contextlib.contextmanager
def silenced():
    """fds 1 and 2 (and ``sys.stdout``, ``sys.stderr``) to /dev/null: for stopping the Ray a
    command started (at its end, or after Ctrl-C), whose workers and log monitor report, one
    line each, that they were stopped (the raylet's "(raylet) Task ... killed by ray.kill" came
    on stdout, in colour, after the stop line: a user's finding)."""
    _flush()
    try:
        saved, null = [os.dup(1), os.dup(2)], os.open(os.devnull, os.O_WRONLY)
    except OSError:
        yield
        return
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)
    try:
        yield
    finally:
        _flush()
        for fd in (1, 2):
            os.dup2(saved[fd - 1], fd)
            os.close(saved[fd - 1])


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed under us
            pass


class _NoThreadSigtermNote:
    """judgecal starts Ray on a helper thread (to bound the start) and handles SIGTERM itself
    (judgecal.signals), so Ray's note that it set no SIGTERM handler there is moot."""

    @staticmethod
    def filter(record) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def drop_ray_thread_note() -> None:
    import logging

    log = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _NoThreadSigtermNote) for f in log.filters):
        log.addFilter(_NoThreadSigtermNote())
