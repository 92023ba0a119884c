"""GPU benchmark (issue 8, item 2): a SummEval probe collection on one GPU with an 8B-class
instruct model, through judgecal's vLLM path, against bare ``vllm.LLM.generate``.

Needs a GPU machine with ``ray[llm]==2.60.0`` (it brings vLLM) and judgecal installed, and the
model on local disk or reachable on the hub. Not run on this project's machines (no GPU);
the README gives the figures to expect, on paper. One command, under 5 minutes on an
H100/H200-class GPU:

    python benchmarks/bench_vllm_gpu.py --model Qwen/Qwen2.5-7B-Instruct --articles 20

Three measured runs, each in its own process (each owns the GPU in turn), on the same
prompts: ``judgecal`` (collect through ``ray.data.llm``, plan order, commit to Parquet),
``bare`` (the same chat prompts to ``vllm.LLM.generate``, plan order) and ``shuffled`` (bare,
rows shuffled: what prefix-aware order is worth). For each: requests/s, prompt tokens/s and,
for the bare runs, the prefix-cache hit rate from vLLM's ``prefix_cache_hits`` /
``prefix_cache_queries`` counters. Target: judgecal ≥ 0.9× bare. Writes
benchmarks/results/vllm_gpu.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from _common import SCALE, save, summeval_probe_set

ENGINE = dict(max_model_len=4096, enable_prefix_caching=True, gpu_memory_utilization=0.9, dtype="bfloat16")


def plan_and_rows(articles: int):
    """The plan (plan order: an article's 16 summaries x 17 probes back to back) and its
    rendered rows, exactly as collect renders them."""
    from judgecal.pipeline.render import render_table
    from judgecal.probes import ProbeRenderer

    items, probes, plan = summeval_probe_set(articles, 16, "bench")
    plan = plan.append_column("attempt", [[1] * plan.num_rows])
    rows = render_table(ProbeRenderer(items, probes, SCALE), plan, False).to_pylist()
    return items, probes, plan, rows


def run_bare(model: str, articles: int, shuffle: bool) -> dict:
    from vllm import LLM, SamplingParams

    from judgecal.engines.vllm import chat_prompt, messages_of

    _, _, _, rows = plan_and_rows(articles)
    t_start = time.perf_counter()
    llm = LLM(model=model, disable_log_stats=False, **ENGINE)
    start_s = time.perf_counter() - t_start
    tok = llm.get_tokenizer()
    prompts = [chat_prompt(tok, messages_of(r)) for r in rows]
    if shuffle:
        random.Random(0).shuffle(prompts)
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=20)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    counters = {m.name: m.value for m in llm.get_metrics() if hasattr(m, "value")}
    hits, queries = counters.get("vllm:prefix_cache_hits", 0), counters.get("vllm:prefix_cache_queries", 0)
    tokens = sum(len(o.prompt_token_ids) for o in outs)
    total = start_s + wall  # like the judgecal run, whose wall includes starting its engine
    return {"requests": len(outs), "engine_start_s": round(start_s, 1), "wall_s": round(wall, 2),
            "requests_per_s": round(len(outs) / wall, 1), "end_to_end_requests_per_s": round(len(outs) / total, 1),
            "prompt_tokens_per_s": round(tokens / wall), "prompt_tokens": tokens,
            "prefix_cache_hit_rate": round(hits / queries, 3) if queries else None}


def run_judgecal(model: str, articles: int) -> dict:
    import ray

    from judgecal.engines.vllm import VllmEngineConfig
    from judgecal.pipeline import CollectSettings, PartStore, collect
    from judgecal.probes import ProbeRenderer
    from judgecal.workspace import Workspace

    items, probes, plan, _ = plan_and_rows(articles)
    plan = plan.drop_columns(["attempt"])
    ray.init(include_dashboard=False, configure_logging=False, log_to_driver=False)
    cfg = VllmEngineConfig(model_source=model, dtype=ENGINE["dtype"], max_model_len=ENGINE["max_model_len"],
                           gpu_memory_utilization=ENGINE["gpu_memory_utilization"], replicas=1, batch_size=272)
    with tempfile.TemporaryDirectory() as tmp:
        store = PartStore(Workspace(os.path.join(tmp, "responses")))
        t0 = time.perf_counter()
        stats = collect(plan, ProbeRenderer(items, probes, SCALE), cfg, store, CollectSettings(block_rows=272),
                        lambda msg: None)
        wall = time.perf_counter() - t0
        answered = store.read(["parse_status"]).column("parse_status").to_pylist()
    return {"requests": stats.computed, "wall_s": round(wall, 2), "requests_per_s": round(stats.computed / wall, 1),
            "end_to_end_requests_per_s": round(stats.computed / wall, 1),
            "prompt_tokens_per_s": round(stats.prompt_tokens / wall), "prompt_tokens": stats.prompt_tokens,
            "errors": stats.errors, "ok": answered.count("ok"), "engine_start_included": True}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct")
    ap.add_argument("--articles", type=int, default=20)  # 20 x 16 x 17 = 5,440 requests
    ap.add_argument("--mode", choices=("bare", "shuffled", "judgecal"))
    a = ap.parse_args()
    if a.mode:  # one measured run, in its own process
        out = run_judgecal(a.model, a.articles) if a.mode == "judgecal" else \
            run_bare(a.model, a.articles, a.mode == "shuffled")
        print("RESULT " + json.dumps(out))
        return
    result = {"model": a.model, "articles": a.articles, "engine": ENGINE}
    for mode in ("bare", "shuffled", "judgecal"):
        r = subprocess.run([sys.executable, __file__, "--model", a.model, "--articles", str(a.articles),
                            "--mode", mode], capture_output=True, text=True, timeout=900)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        result[mode] = json.loads(line[-1][7:]) if line else {"failed": r.stderr[-2000:]}
    ok = all("requests_per_s" in result[m] for m in ("bare", "judgecal", "shuffled"))
    if ok:
        # both end to end, engine start included (judgecal's stage starts its engine inside the run)
        result["judgecal_vs_bare"] = round(result["judgecal"]["requests_per_s"]
                                           / result["bare"]["end_to_end_requests_per_s"], 3)
        result["plan_order_vs_shuffled"] = round(result["bare"]["requests_per_s"]
                                                 / result["shuffled"]["requests_per_s"], 3)
    result["targets"] = {"judgecal_vs_bare": ">= 0.9", "wall": "< 5 min in all"}
    save("vllm_gpu", result)


if __name__ == "__main__":
    main()
