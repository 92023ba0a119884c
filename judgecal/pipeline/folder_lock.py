"""One collect (or ``run``: its fit and evaluate too) at a time per study folder on this machine.

Two collects into one folder commit each block once only when they cut the same blocks (a
part's name hashes its request ids): with other block sizes (``--set collect.block_rows``, or
the default size measured from the judge's speed) both computed and committed every request
(a user's finding; readers deduplicate, so results stayed right, but the work was done twice
and a sampling judge's two answers would both be on disk). So ``collect``, ``run`` and the
batch commands hold an exclusive ``flock`` on a file named after the folder (its real path,
or its ``s3://`` URI), kept in a folder of the user's own under the system's temporary folder
(not in the study folder: a refused command writes nothing there). A second one waits,
saying so, then computes only what is still pending. The kernel drops the lock when its
process ends, however it ends. Not across machines, nor across processes that see another
temporary folder (``TMPDIR``): two drivers on two nodes writing one ``s3://`` folder rely on
the exclusive part names alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import stat
import tempfile
import time

from judgecal.errors import InputError

_HELD: set[str] = set()  # keys this process holds: taking one again would wait for itself


def lock_path(uri: str) -> str:
    """The lock file of ``uri``, in ``judgecal-locks-<uid>`` (mode 0700, refused unless it is
    this user's own folder: another user could plant a link there)."""
    folder = os.path.join(tempfile.gettempdir(), f"judgecal-locks-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError as e:
        raise InputError(folder, f"cannot make the collect lock's folder ({e.strerror or e})") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise InputError(folder, "not a folder of this user's that only they can write; remove it (collect keeps "
                         "its lock there)")
    key = uri if "://" in uri else os.path.realpath(uri)
    return os.path.join(folder, hashlib.sha256(key.encode()).hexdigest()[:24] + ".lock")


@contextlib.contextmanager
def one_collect_at_a_time(uri: str, log):
    """Held while the block runs; waits (with one line) while another process holds it."""
    path = lock_path(uri)
    if path in _HELD:  # held already by this process (a run holds it over its collect): pass through
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise InputError(path, f"cannot open the collect lock ({e.strerror or e})") from None
    try:  # the bare descriptor: no file object whose writes a full disk could fail half-way
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            log(f"[collect] another judgecal ({holder}) is collecting or running a study in {uri}: waiting for it "
                "to end (Ctrl-C stops this one; nothing is lost)")
            fcntl.flock(fd, fcntl.LOCK_EX)  # a signal still ends the wait: its handler's exception propagates
        with contextlib.suppress(OSError):  # who holds it: a courtesy for the line above, not needed
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}".encode(), 0)
        _HELD.add(path)
        try:
            yield
        finally:
            _HELD.discard(path)
            with contextlib.suppress(OSError):  # still held: a later reader finds no stale pid
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def holder(uri: str) -> str | None:
    """Who holds ``uri``'s lock in another process ("pid N on host since T"), or None: a fit
    or evaluate started during a collect said "rerun `judgecal collect`" (a user's finding)."""
    try:
        path = lock_path(uri)
        if path in _HELD:  # this process's own hold (a run's): no other collect
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, InputError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 200).decode(errors="replace").strip() or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
