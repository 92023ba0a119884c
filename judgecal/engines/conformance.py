"""The engine contract, checked the way scikit-learn's ``check_estimator`` checks estimators.

``check_engine(cfg)`` builds the engine from its config and holds it to what every stage
relies on; an engine that plugs into judgecal passes it. It raises ``AssertionError`` naming
the broken rule. The prompts are small and real (two SummEval summaries, a baseline and one
probe each; two rubric verdicts), so a real model answers them in seconds.
"""

from __future__ import annotations

import pickle

import pyarrow as pa

from judgecal.engines.actor import answer
from judgecal.engines.base import CAPABILITIES, GENERATE, SAMPLING, SCORE, EngineConfig, JudgePrompt
from judgecal.scale import ScoreScale
from judgecal.schemas import PARSE_ERROR, PARSE_STATUSES, RENDERED, RESPONSES

SCALE = ScoreScale(1, 5)


def sample_prompts(cfg: EngineConfig) -> tuple[list[JudgePrompt], EngineConfig]:
    """Four scoring prompts rendered by the real PRISM renderer, and the config with the
    truth a simulated judge needs (real engines ignore it)."""
    from judgecal.datasets import load_dataset, subset_items
    from judgecal.pipeline.render import judge_prompts
    from judgecal.probes import ProbeRenderer, build_plan, load_bank

    items = subset_items(load_dataset("summeval"), 1, 2)
    probes = load_bank("style").probes(["length"])[:2]
    plan = build_plan(items, probes, 1, SCALE, cfg.identity)
    truth = dict(zip(items["item_id"].to_pylist(), items["target"].to_pylist()))
    return judge_prompts(ProbeRenderer(items, probes, SCALE), plan, cfg.wants_meta), cfg.with_truth(truth)


def check_engine(cfg: EngineConfig) -> None:
    # The config: named, picklable (it travels to Ray actors), declares known capabilities.
    assert cfg.identity and isinstance(cfg.identity, str), "identity must be a non-empty string"
    assert pickle.loads(pickle.dumps(cfg)).identity == cfg.identity, "config must pickle with its identity"
    assert SCORE in cfg.capabilities and set(cfg.capabilities) <= set(CAPABILITIES), "unknown capabilities"
    res = cfg.resources
    assert res.num_cpus >= 0 and res.num_gpus >= 0, "resources must be non-negative"
    prompts, cfg = sample_prompts(cfg)
    engine = cfg.build()
    try:
        assert engine.identity == cfg.identity, "the engine's identity must be its config's"
        assert engine.score([], SCALE) == [], "an empty batch gives an empty list"
        outs = engine.score(prompts, SCALE)
        assert len(outs) == len(prompts), "one output per prompt"
        for o in outs:
            assert o.parse_status in PARSE_STATUSES, f"unknown parse status {o.parse_status!r}"
            if o.parse_status != PARSE_ERROR and o.score is not None:
                assert SCALE.lo <= o.score <= SCALE.hi, f"score {o.score} off the scale"
            if o.expected_score is not None:
                assert SCALE.lo - 1e-9 <= o.expected_score <= SCALE.hi + 1e-9, "expected score off the scale"
            assert min(o.prompt_tokens, o.computed_tokens, o.completion_tokens) >= 0 and o.latency_s >= 0
            assert o.computed_tokens <= max(o.prompt_tokens, o.computed_tokens), "computed tokens are prompt tokens"
        again = engine.score(prompts, SCALE)
        assert [o.score for o in again] == [o.score for o in outs], "temperature 0 must be deterministic"
        if SAMPLING in cfg.capabilities:
            hot = [JudgePrompt(p.request_id, p.system, p.user, p.answer_prefix, p.meta, 0.9, 7) for p in prompts]
            a, b = engine.score(hot, SCALE), engine.score(hot, SCALE)
            assert [o.raw_text for o in a] == [o.raw_text for o in b], "a seeded sample must repeat"
        if GENERATE in cfg.capabilities:
            gen = engine.generate(prompts[:1], 8)
            assert len(gen) == 1 and gen[0].score is None and gen[0].parse_status in PARSE_STATUSES
            assert gen[0].parse_status == PARSE_ERROR or isinstance(gen[0].raw_text, str)
        # Through the actor stage's row conversion: the responses schema, attempts carried.
        rows = pa.Table.from_pylist([{
            "request_id": p.request_id, "item_id": p.meta.get("item_id", f"i{i}"), "group_id": "g",
            "probe_id": "p", "run": 0, "attempt": 2, "mode": "score", "scale_lo": SCALE.lo, "scale_hi": SCALE.hi,
            "system": p.system, "user": p.user, "answer_prefix": p.answer_prefix, "temperature": 0.0, "seed": 0,
            "max_tokens": 8, "prompt_sha": "x", "meta": None if not cfg.wants_meta else _meta(p)}
            for i, p in enumerate(prompts)], schema=RENDERED)
        table = answer(engine, rows)
        assert table.schema.equals(RESPONSES), "the stage returns schemas.RESPONSES"
        assert table["request_id"].to_pylist() == [p.request_id for p in prompts], "rows keep their order"
        assert set(table["attempt"].to_pylist()) == {2}, "the attempt number is carried through"
    finally:
        engine.close()


def _meta(p: JudgePrompt) -> str:
    import json

    return json.dumps(p.meta)
