"""Every engine passes one contract (judgecal.engines.conformance.check_engine). The HTTP
engine is checked against a real llama_cpp.server in tests/test_engines_real.py."""

import pytest

from judgecal.engines import LlamaCppEngineConfig, NullEngineConfig, SimulatedEngineConfig
from judgecal.engines.conformance import check_engine
from judgecal.engines.null import NullEngine


@pytest.mark.parametrize("cfg", [SimulatedEngineConfig(), NullEngineConfig()], ids=["simulated", "null"])
def test_light_engines_conform(cfg):
    check_engine(cfg)


@pytest.mark.slow
def test_the_embedded_cpu_engine_conforms():
    check_engine(LlamaCppEngineConfig())


class ShortEngine(NullEngine):
    """Drops the last output of every batch: breaks 'one output per prompt'."""

    def score(self, prompts, scale):
        return super().score(prompts, scale)[:-1]


class ShortConfig(NullEngineConfig):
    def build(self):
        return ShortEngine()


def test_a_broken_engine_is_caught():
    with pytest.raises(AssertionError, match="one output per prompt"):
        check_engine(ShortConfig())
