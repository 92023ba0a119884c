"""Notice a Ray cluster that stopped answering, before Ray ends the process without a word.

When the cluster's GCS (its head) goes away mid-collect, Ray's core worker keeps the driver
waiting for ``RAY_gcs_rpc_server_reconnect_timeout_s`` (60 s by default), printing "Failed to
push error to driver" lines beside a frozen progress line, and then exits the process with
status 1 from C++, past every Python handler: no line says what happened or that a rerun
resumes (a user's finding). :class:`GcsWatch` opens a TCP connection to the GCS port every few
seconds; when none has been accepted for Ray's limit less ``MARGIN_S`` (40 s of the default
60; at least half of it), the collect stops itself with one line, while it still can. The
limit is read from the driver's environment: one set only in the cluster's system config is
not seen (set the variable for the driver too).
"""

from __future__ import annotations

import os
import socket
import time

RAY_GCS_TIMEOUT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"  # Ray's own setting, from the driver's environment
MARGIN_S = 20.0  # a probe period, the main thread's grace and some slack, before Ray's limit


def connect_error(host: str, port: int, timeout: float) -> str | None:
    """Why no TCP connection opens at ``host:port`` (refused, no such host, timed out), or None."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as e:
        return f"no such host: {e.strerror or e}"
    except OSError as e:
        return e.strerror or type(e).__name__


class GcsWatch:
    """``lost()`` is called often (the progress ticker); it probes at most every ``every_s``."""

    def __init__(self, gcs_address: str, every_s: float = 5.0, lost_after_s: float | None = None,
                 clock=time.monotonic):
        host, _, port = gcs_address.rpartition(":")
        self.address, self.host, self.port = gcs_address, host.strip("[]"), int(port)
        self.every_s = every_s
        if lost_after_s is None:  # before Ray's own end, with room for the probe's period and the stop
            limit = float(os.environ.get(RAY_GCS_TIMEOUT_ENV, "60"))
            lost_after_s = max(limit / 2, limit - MARGIN_S)
        self.lost_after_s = lost_after_s
        self.clock = clock
        self._last_ok = self._last_probe = clock()

    @classmethod
    def of_this_driver(cls) -> "GcsWatch | None":
        """The watch over the GCS this driver is connected to, or None where Ray does not say."""
        import ray

        try:
            address = ray.get_runtime_context().gcs_address
            return cls(address) if address and ":" in address else None
        except Exception:  # noqa: BLE001 - a watch is a courtesy; without one Ray's own limit applies
            return None

    def answers(self) -> bool:
        return connect_error(self.host, self.port, min(2.0, self.every_s)) is None

    def lost(self) -> str | None:
        """Why the collect must stop (the cluster has not answered for ``lost_after_s``), or None."""
        now = self.clock()
        if now - self._last_probe < self.every_s:
            return None
        self._last_probe = now
        if self.answers():
            self._last_ok = now
            return None
        if now - self._last_ok < self.lost_after_s:
            return None
        given = os.environ.get("RAY_ADDRESS", "").strip()
        named = f", RAY_ADDRESS={given}" if given and given != self.address and given.lower() not in ("auto",
                                                                                                      "local") else ""
        return (f"the Ray cluster stopped answering (its GCS at {self.address}{named} refused connections for "
                f"{now - self._last_ok:.0f} s); rerun once the cluster is back to resume")
