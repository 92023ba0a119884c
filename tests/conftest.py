import os
import socket
import sys
from pathlib import Path

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray instance per test module (~5 s to start); shut down after the module so a
    test that starts its own cluster (test_job_submit) never shares the machine with it."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, configure_logging=False)
    yield ray
    ray.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def judgecal_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgecal", *args]


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
