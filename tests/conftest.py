import os
import socket
import sys
from pathlib import Path

import pytest

from judgecal.engines.simulated import SimulatedEngineConfig

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


class FailOnMarker(SimulatedEngineConfig):
    """A simulated verifier whose calls fail (time out) for a completion containing FAIL."""

    def build(self):
        from judgecal.engines.base import JudgeOutput

        engine = super().build()
        score = engine.score

        def flaky(prompts, scale):
            outs = score(prompts, scale)
            return [JudgeOutput("TimeoutError: judge timed out", None, "error") if "FAIL" in p.user else o
                    for p, o in zip(prompts, outs)]

        engine.score = flaky
        return engine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def judgecal_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgecal", *args]


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
