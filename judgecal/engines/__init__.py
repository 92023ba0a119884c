"""Judge engines behind one interface, chosen by a typed config.

``llamacpp`` (embedded CPU default), ``http`` (OpenAI-compatible), ``simulated`` (tests only),
``null`` (costs nothing: the pipeline benchmark), ``openai-batch`` (a provider's batch API,
driven from the collect's driver).
Engine libraries are imported when an engine is built, not when this package is.
"""

from judgecal.engines.base import (
    Engine,
    EngineConfig,
    JudgeOutput,
    JudgePrompt,
    engine_config_from_dict,
    expected_from_logprobs,
)
from judgecal.engines.batch import OpenAIBatchEngineConfig
from judgecal.engines.http import HttpEngineConfig
from judgecal.engines.llamacpp import LlamaCppEngineConfig, bundled_model_path
from judgecal.engines.null import NullEngineConfig
from judgecal.engines.simulated import SimulatedEngineConfig
from judgecal.engines.vllm import VllmEngineConfig

__all__ = [
    "Engine",
    "EngineConfig",
    "HttpEngineConfig",
    "JudgeOutput",
    "JudgePrompt",
    "LlamaCppEngineConfig",
    "NullEngineConfig",
    "OpenAIBatchEngineConfig",
    "SimulatedEngineConfig",
    "VllmEngineConfig",
    "bundled_model_path",
    "engine_config_from_dict",
    "expected_from_logprobs",
]
