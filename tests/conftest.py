import json
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


def chat_completion(content: str, model: str = "m", prompt_tokens: int = 10, completion_tokens: int = 1) -> bytes:
    """The body of an OpenAI chat completion that answers ``content`` (the fake judges' reply)."""
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": model,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}}).encode()


def send_json(handler, body: bytes, code: int = 200) -> None:
    """Reply from a ``BaseHTTPRequestHandler`` with a JSON body."""
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def judgecal_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgecal", *args]


def write_config(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def small_study(tmp_path: Path, out: Path, engine: str = 'kind = "simulated"', groups: int = 4, items: int = 2,
                extra: str = "") -> Path:
    """A PRISM study small enough for a test: ``groups`` SummEval articles x ``items``
    summaries, the length probes, 2-fold fits; ``engine`` is the [engine] section's body."""
    return write_config(tmp_path / "study.toml", f"""
[study]
output = "{out}"
[dataset]
max_groups = {groups}
max_items_per_group = {items}
[probes]
attributes = ["length"]
[engine]
{engine}
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
fold_seeds = 2
{extra}""")


def generic_study(path: Path, out: Path, data: Path, columns: str, task: str = "summary", target: str = "quality",
                  engine: str = 'kind = "simulated"') -> Path:
    """A PRISM study of a generic file ``data`` (``columns``: the TOML inline table's body), the
    SIMULATED judge, the length probes, 2-fold fits."""
    return write_config(path, f"""[study]
output = "{out}"
[engine]
{engine}
[dataset]
name = "generic"
path = "{data}"
target = ["{target}"]
target_scale = "1-5"
task = "{task}"
columns = {{ {columns} }}
[probes]
attributes = ["length"]
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
""")
