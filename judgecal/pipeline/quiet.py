"""Keep Ray's known false alarms off a collect's console.

Ray Data hands every actor-pool stage its transform through the object store and lets the
actors restart, and Ray's C++ core worker then logs, at error level, once per process, that
"constructor arguments in the object store and max_restarts > 0" may fail a restart
(ray-project/ray#53727). Here it cannot: the driver holds those objects for the whole
collect. It is written by C++ straight to file descriptor 2, so no Python logging setting
reaches it: :func:`drop_known_ray_noise` routes fd 2 through a pipe for the duration of a
collect and forwards every line but the ones matching :data:`KNOWN_NOISE` (that one, and
the lines a lost cluster prints per failed task before judgecal says it in one line).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading

KNOWN_NOISE = re.compile(r"core_worker\.cc:\d+: Actor with class name: .* has constructor arguments in the object "
                         r"store and max_restarts > 0"
                         # the cluster's head gone: a line a second per failed task, ~60 before judgecal's own
                         # one line says so (pipeline.cluster_watch; a user's finding)
                         r"|task_manager\.cc:\d+: Failed to push error to driver for task")


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


def _write(fd: int, lines: list[bytes], newline: bool = True) -> None:
    out = b"".join(ln + (b"\n" if newline else b"") for ln in lines
                   if not KNOWN_NOISE.search(ln.decode("utf-8", "replace")))
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
