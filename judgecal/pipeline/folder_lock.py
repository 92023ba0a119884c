"""One collect at a time per study folder on this machine.

Two collects into one folder commit each block once only when they cut the same blocks (a
part's name hashes its request ids): with other block sizes (``--set collect.block_rows``, or
the default size measured from the judge's speed) both computed and committed every request
(a user's finding; readers deduplicate, so results stayed right, but the work was done twice
and a sampling judge's two answers would both be on disk). So ``collect``, ``run`` and the
batch commands hold an exclusive ``flock`` on a file named after the folder's URI, kept in
the system's temporary folder (not in the study folder: a refused command writes nothing
there). A second one waits, saying so, and then finds the work committed. The kernel drops
the lock when its process ends, however it ends. Not across machines: two drivers on two
nodes writing one ``s3://`` folder still rely on the exclusive part names alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import tempfile
import time


def lock_path(uri: str) -> str:
    folder = os.path.join(tempfile.gettempdir(), f"judgecal-locks-{os.getuid()}")
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, hashlib.sha256(uri.encode()).hexdigest()[:24] + ".lock")


@contextlib.contextmanager
def one_collect_at_a_time(uri: str, log):
    """Held while the block runs; waits (with one line) while another process holds it."""
    with open(lock_path(uri), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "another process"
            log(f"[collect] another judgecal ({holder}) is collecting into {uri}: waiting for it to end "
                "(Ctrl-C stops this one; nothing is lost)")
            fcntl.flock(f, fcntl.LOCK_EX)  # a signal still interrupts the wait (PEP 475 re-raises)
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}")
        f.flush()
        yield
