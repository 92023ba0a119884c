"""Ctrl-C and SIGTERM stop a command cleanly: what is committed stays, one line says so.

SIGINT already raises KeyboardInterrupt; :func:`handle_stop_signals` makes SIGTERM (what
``kill``, Kubernetes and ``ray job stop`` send) raise :class:`Stopped`, a KeyboardInterrupt
that remembers its signal, so one ``except KeyboardInterrupt`` handles both and the exit
code is 128 + the signal (130, 143) as shells expect. ``ray.init`` installs a SIGTERM
handler of its own in the driver; :func:`reclaim` puts ours back after it.
"""

from __future__ import annotations

import signal
import threading

_installed = False


class Stopped(KeyboardInterrupt):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum, frame):
    raise Stopped(signum)


def handle_stop_signals() -> None:
    global _installed
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)
        _installed = True


def reclaim() -> None:
    if _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise)


def exit_code(e: KeyboardInterrupt) -> int:
    return 128 + (e.signum if isinstance(e, Stopped) else signal.SIGINT)
