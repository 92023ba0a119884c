"""Ctrl-C and SIGTERM stop a command cleanly: what is committed stays, one line says so.

SIGINT already raises KeyboardInterrupt; :func:`handle_stop_signals` makes SIGTERM (what
``kill``, Kubernetes and ``ray job stop`` send) raise :class:`Stopped`, a KeyboardInterrupt
that remembers its signal, so one ``except KeyboardInterrupt`` handles both and the exit
code is 128 + the signal (130, 143) as shells expect. ``ray.init`` installs a SIGTERM
handler of its own in the driver; :func:`reclaim` puts ours back after it.
"""

from __future__ import annotations

import _thread
import os
import signal
import threading
from contextlib import contextmanager

_installed = False


class Stopped(KeyboardInterrupt):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_last_taken: int | None = None  # the last signal _raise took in this command


def _raise(signum, frame):
    global _last_taken
    _last_taken = signum
    raise Stopped(signum)


def handle_stop_signals() -> None:
    global _installed, _last_taken
    _last_taken = None  # a command's own stops (a process may run several: tests, notebooks)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)
        _installed = True


def reclaim() -> None:
    if _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)


def stop_signal(e: KeyboardInterrupt) -> int:
    """The signal that stopped the command: a :class:`Stopped`'s own; else the last one
    :func:`_raise` took, as Ray's waits (``ray.wait`` in a Tune run) turn whatever their signal
    check raises into a plain KeyboardInterrupt (a SIGTERM read as "stopped (SIGINT)", exit
    130: a user's finding); else SIGINT."""
    if isinstance(e, Stopped):
        return e.signum
    return _last_taken if _last_taken is not None else signal.SIGINT


def exit_code(e: KeyboardInterrupt) -> int:
    return 128 + stop_signal(e)


WAKE = signal.SIGUSR2  # Ray Tune takes SIGUSR1


def _wake(signum, frame):
    raise KeyboardInterrupt


@contextmanager
def main_thread_waker():
    """Yields a function another thread calls to raise KeyboardInterrupt in the main thread
    (the collect's fail-fast and stall rules). ``_thread.interrupt_main`` only simulates SIGINT:
    it never woke a main thread blocked in a lock (Ray Data's row queue, while the judge hangs:
    the stall rule fired and nothing stopped) and does nothing where SIGINT is ignored (a job
    started in the background). A real signal to the main thread, with a handler of its own,
    does both. Outside the main thread (a library caller's thread): ``interrupt_main``."""
    # a handler set outside Python (None) could not be put back: keep it, and interrupt_main
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(WAKE) is None:
        yield _thread.interrupt_main
        return
    ident = threading.get_ident()
    previous = signal.signal(WAKE, _wake)
    try:
        yield lambda: signal.pthread_kill(ident, WAKE)
    finally:  # the caller's waking thread has ended: no signal comes after this
        signal.signal(WAKE, previous)


RAY_OWNER = "JUDGECAL_RAY_OWNER"  # in the environment of the Ray processes a command starts (and theirs)
_ray_tag: list[str] = []  # the tag of the local Ray this process started, until it is stopped


def tag_ray_start() -> str:
    """A tag for the Ray this process is about to start, in ``os.environ`` while it starts:
    Ray's processes inherit it, and their workers and agents from them."""
    import time

    tag = f"{os.getpid()}-{time.time_ns()}"
    _ray_tag[:] = [tag]
    os.environ[RAY_OWNER] = tag
    return tag


def kill_tagged_ray(grace_s: float) -> None:
    """After Ray is stopped: its processes still running after ``grace_s`` (whatever their
    parent: a dashboard agent orphaned by its raylet outlived a stop sent to the whole process
    group, 1 stop in 3 on a busy machine) are killed. Only those of the Ray this process
    started, found by :func:`tag_ray_start`'s tag."""
    import time

    if not _ray_tag:
        return
    marker, me = f"{RAY_OWNER}={_ray_tag.pop()}".encode(), os.getpid()

    def tagged() -> list[int]:
        found = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if int(name) != me and marker in f.read().split(b"\0"):
                        found.append(int(name))
            except OSError:  # ended meanwhile, or not ours to read
                pass
        return found

    deadline = time.monotonic() + grace_s
    while (left := tagged()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def live_children(marked: bytes = b"") -> set[int]:
    """The pids of this process's children that have not ended and whose command line holds
    ``marked`` (Linux's /proc; elsewhere none)."""
    me, found = os.getpid(), set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in filter(str.isdigit, names):
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                state, ppid = f.read().rsplit(")", 1)[1].split()[:2]  # after "(comm)", which may hold spaces
        except (OSError, ValueError):  # ended meanwhile, or unreadable
            continue
        if int(ppid) == me and state not in ("Z", "X") and _holds(name, marked):
            found.add(int(name))
    return found


def _holds(pid: str, marked: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marked in f.read()
    except OSError:  # ended meanwhile
        return False
