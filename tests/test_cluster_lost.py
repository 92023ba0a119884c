"""A collect whose Ray cluster goes away: one line and a rerun that resumes, not a minute of
frozen progress and an exit with no word (a user's finding: Ray's core worker ends the driver
from C++ once the GCS has been gone for ``RAY_gcs_rpc_server_reconnect_timeout_s``)."""

import os
import re
import socket
import subprocess
import time

import pyarrow.parquet as pq
import pytest
from conftest import judgecal_cmd, small_study
from ray_cluster import Cluster

from judgecal.pipeline.cluster_watch import GcsWatch


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("given, named", [("", ""), ("auto ", ""), (" LOCAL", ""), ("10.9.8.7:6379 ",
                                                                                  ", RAY_ADDRESS=10.9.8.7:6379")])
def test_the_watch_says_lost_only_after_its_limit_without_an_answer(monkeypatch, given, named):
    """The line names the RAY_ADDRESS the user gave where Ray's GCS address differs (it printed
    'auto ' and 'local' too: a second reader's finding)."""
    monkeypatch.setenv("RAY_ADDRESS", given)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    clock = Clock()
    watch = GcsWatch(f"127.0.0.1:{server.getsockname()[1]}", every_s=5, lost_after_s=20, clock=clock)
    clock.now = 5
    assert watch.lost() is None and watch._last_ok == 5  # answered
    server.close()
    for t in (6, 10, 15, 20, 24):  # probed at 10, 15, 20 (refused), 6 and 24 too soon after a probe
        clock.now = t
        assert watch.lost() is None
    clock.now = 25
    why = watch.lost()
    assert why and f"its GCS at 127.0.0.1:{watch.port}{named} refused connections for 20 s" in why
    assert why.endswith("rerun once the cluster is back to resume")


def test_the_watch_follows_rays_own_limit(monkeypatch):
    monkeypatch.delenv("RAY_gcs_rpc_server_reconnect_timeout_s", raising=False)
    assert GcsWatch("10.0.0.1:6379").lost_after_s == 40  # Ray's 60 s less the margin
    monkeypatch.setenv("RAY_gcs_rpc_server_reconnect_timeout_s", "300")  # a cluster with GCS fault tolerance
    assert GcsWatch("10.0.0.1:6379").lost_after_s == 280


COMMITTED = re.compile(r"stopped early after \d+ requests \(([\d,]+) responses committed and kept for the ([\d,]+) "
                       r"planned\): the Ray cluster "
                       r"stopped answering \(its GCS at [\d.]+:\d+(?:, RAY_ADDRESS=[\d.]+:\d+)? refused connections "
                       r"for \d+ s\)")
PLANNED = re.compile(r"\[collect\] (\d+) requests planned, (\d+) already committed, (\d+) to compute")


def test_a_collect_whose_cluster_dies_says_so_in_one_line_and_resumes(tmp_path):
    out = tmp_path / "out"
    cfg = small_study(tmp_path, out, engine='kind = "simulated"\nlatency_s = 0.5', groups=4, items=4,
                      extra="[collect]\nblock_rows = 3")  # 16 parts of one item, 1.5 s each
    first = Cluster(cpus=2)
    try:
        first.start(workers=0)
        env = {**first.env, "RAY_ADDRESS": first.gcs, "RAY_gcs_rpc_server_reconnect_timeout_s": "40"}
        log = tmp_path / "first.err"
        with open(log, "w") as f:
            proc = subprocess.Popen(judgecal_cmd("collect", str(cfg)), env=env, stdout=subprocess.DEVNULL, stderr=f)
        parts = out / "responses"
        while not (parts.is_dir() and len(list(parts.glob("part-*.parquet"))) >= 2):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        at_kill = sum(pq.ParquetFile(f).metadata.num_rows for f in parts.glob("part-*.parquet"))
        first.kill("head")
        proc.wait(timeout=120)
        err = log.read_text()
    finally:
        first.close()
    lines = [ln for ln in err.splitlines() if ln.startswith("judgecal:")]
    assert proc.returncode == 3, err[-3000:]
    assert len(lines) == 1 and COMMITTED.search(lines[0]), err[-3000:]
    assert "Failed to push error to driver" not in err, err[-3000:]  # a line a second per task, before that one
    kept, planned = (int(x.replace(",", "")) for x in COMMITTED.search(lines[0]).groups())
    assert at_kill <= kept < planned  # what the store holds, not what the driver had read (once "0" here)

    second = Cluster(cpus=2)  # the cluster back (a new head): the rerun takes up where it stopped
    try:
        second.start(workers=0)
        r = subprocess.run(judgecal_cmd("collect", str(cfg)), env={**second.env, "RAY_ADDRESS": second.gcs},
                           capture_output=True, text=True, timeout=300)
    finally:
        second.close()
    assert r.returncode == 0, r.stderr[-3000:]
    p, already, todo = map(int, PLANNED.search(r.stderr).groups())
    assert p == planned and already >= kept and already + todo == planned
    ids = [i for f in sorted(parts.glob("part-*.parquet")) for i in pq.read_table(f, columns=["request_id"])
           ["request_id"].to_pylist()]
    assert len(set(ids)) == planned
    assert os.path.getsize(out / "requests.parquet") > 0
