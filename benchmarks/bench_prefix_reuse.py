"""Benchmark (b): the CPU engine with and without prefix reuse on the 17-prompts-per-item
style bank (SummEval: one article, its first 2 summaries = 34 prompts).
Target: at least 5x less wall time with reuse."""

import time

from _common import SCALE, rendered, save, summeval_probe_set
from judgecal.engines import LlamaCppEngineConfig


def run(prompts, reuse: bool):
    eng = LlamaCppEngineConfig(prefix_reuse=reuse).build()
    t0 = time.perf_counter()
    outs = eng.score(prompts, SCALE)
    wall = time.perf_counter() - t0
    eng.close()
    return wall, sum(o.prompt_tokens for o in outs), sum(o.computed_tokens for o in outs), outs


def main():
    cfg = LlamaCppEngineConfig()
    prompts = rendered(*summeval_probe_set(1, 2, cfg.identity))
    with_reuse, ptok, ctok_r, a = run(prompts, True)
    without, _, ctok_n, b = run(prompts, False)
    drift = max(abs(x.expected_score - y.expected_score) for x, y in zip(a, b))
    save("prefix_reuse", {
        "prompts": len(prompts), "prompt_tokens": ptok,
        "with_reuse_s": with_reuse, "without_reuse_s": without, "speedup": without / with_reuse,
        "computed_tokens_with_reuse": ctok_r, "computed_tokens_without": ctok_n,
        "max_expected_score_difference": drift, "target_speedup": 5.0,
    })


if __name__ == "__main__":
    main()
