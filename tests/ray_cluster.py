"""A Ray cluster on 127.0.0.1 whose nodes a test starts and kills one by one (each node a
blocking `ray start` in its own session, so killing that session's process group stops exactly
that node; never `ray stop`, which stops every Ray instance on the machine)."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from conftest import free_port

BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")


class Cluster:
    """A Ray cluster on 127.0.0.1 whose nodes this test starts and kills one by one."""

    def __init__(self, cpus: int = 1):
        self.cpus = cpus
        path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # `python` in a job is this venv's
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PATH": path}
        self.env.pop("RAY_ADDRESS", None)
        self.temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # Ray's socket paths must stay short
        self.given: set[int] = set()
        self.port, self.dash = self._port(), self._port()
        self.gcs, self.dashboard = f"127.0.0.1:{self.port}", f"http://127.0.0.1:{self.dash}"
        self.nodes: dict[str, subprocess.Popen] = {}

    def _port(self) -> int:
        """A free port this cluster has not handed out before: free_port() closes its socket, so
        two calls can return one port, and the head then had it for two roles (CI: the dashboard
        "address already in use", no node after 180 s)."""
        while (port := free_port()) in self.given:
            pass
        self.given.add(port)
        return port

    def _start(self, name: str, args: list[str]) -> None:
        # Every port explicit and free: other Ray clusters on this machine keep the defaults.
        ports = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
                 "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port"]
        temp = os.path.join(self.temp, name)
        os.makedirs(temp)
        cmd = [RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(self.cpus),
               "--object-store-memory", str(256 * 2**20), "--temp-dir", temp, "--disable-usage-stats",
               *[x for p in ports for x in (p, str(self._port()))], *args]
        with open(os.path.join(self.temp, f"{name}.log"), "wb") as out:
            self.nodes[name] = subprocess.Popen(cmd, env=self.env, start_new_session=True, stdout=out,
                                                stderr=subprocess.STDOUT)

    def start(self, workers: int = 1) -> None:
        self._start("head", ["--head", "--port", str(self.port), "--ray-client-server-port", str(self._port()),
                             "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                             "--dashboard-port", str(self.dash)])
        self._wait_new_node(set(), 180)
        if workers:
            self.add_worker("worker")

    def add_worker(self, name: str) -> None:
        """Start a worker node and wait until it is registered and alive (a node killed just before
        may still be listed alive until the GCS notices: count node ids, not alive nodes)."""
        before = self.node_ids(alive_only=False)
        self._start(name, ["--address", self.gcs])
        self._wait_new_node(before, 300, name)
        self.worker = name  # the worker node alive now: the next fault trial kills it

    def node_ids(self, alive_only: bool = True) -> set[str]:
        from ray.util.state import list_nodes

        try:
            nodes = list_nodes(address=self.dashboard, timeout=20, raise_on_missing_output=False)
        except Exception:  # noqa: BLE001 - the dashboard is not up yet
            return set()
        return {n.node_id for n in nodes if n.state == "ALIVE" or not alive_only}

    def _wait_new_node(self, before: set[str], timeout: float, name: str = "head") -> None:
        deadline = time.time() + timeout
        while not self.node_ids() - before:
            if time.time() > deadline:  # say why: the node's own log (once seen: a join slower than 180 s)
                log = Path(self.temp, f"{name}.log")
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"
                raise AssertionError(f"no new node alive after {timeout:.0f}s; {name}'s log ends:\n{tail}")
            time.sleep(1)

    def kill(self, name: str) -> None:
        """SIGKILL the node's whole process group (raylet, agents, its workers): a node lost."""
        proc = self.nodes[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def close(self) -> None:
        for proc in reversed(self.nodes.values()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + 10  # a graceful stop takes ~30 s a node on busy cores: not worth it
        for proc in self.nodes.values():
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError):  # whatever is left of that node's session
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        shutil.rmtree(self.temp, ignore_errors=True)

    def client(self):
        from ray.job_submission import JobSubmissionClient

        return JobSubmissionClient(self.dashboard)
