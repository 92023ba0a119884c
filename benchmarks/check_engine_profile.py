"""Where the CPU judge's engine time goes, without Ray (benchmark (i)'s gap, second part).

The prompts of benchmark (i) (2 SummEval articles x 16 summaries x 17 probes) scored by the
engine in this process, an item per ``score`` call as the engine actor hands them, the first
item a warm-up. Every ``llama_decode`` is timed and binned by its batch's size, and on the
parallel path also by the pass it belongs to (``passes``: pass 1 extends sequence 0 through a
group's head, pass 2 by what its stream prompts share, then a group's first round and the
rounds after it, which finish the longer suffixes); ``other_s`` is
the rest of the engine's time (tokenizing, planning, reading the distributions). The 512-token
rate from position 0 is measured before and after, in the same process (``roofline_tok_s``,
their mean). ``python benchmarks/check_engine_profile.py [parallel|sequential]`` ->
``results/engine_profile_<path>.json``."""

import statistics
import sys
import time
from collections import defaultdict

import llama_cpp
import llama_cpp._internals

from _common import SCALE, rendered, save, summeval_probe_set
from judgecal.engines import LlamaCppEngineConfig
from judgecal.engines.llamacpp_parallel import ParallelScorer

BINS = ((1, 1), (2, 31), (32, 127), (128, 511), (512, 10 ** 9))


def main(path: str = "parallel"):
    cfg = LlamaCppEngineConfig(parallel_probes=path == "parallel")
    items, probes, plan = summeval_probe_set(2, 16, cfg.identity)
    prompts = rendered(items, probes, plan)
    eng = cfg.build()
    stat: dict = defaultdict(float)
    decode = llama_cpp.llama_decode
    where = ["one at a time"]  # the pass the next decode belongs to

    def timed(ctx, batch):  # every decode of the engine, both paths
        t0 = time.perf_counter()
        rc = decode(ctx, batch)
        dt, n = time.perf_counter() - t0, batch.n_tokens
        lo, hi = next(b for b in BINS if b[0] <= n <= b[1])
        for key, v in (("decode_s", dt), ("decode_tokens", n), (f"{lo}-{hi}_s", dt), (f"{lo}-{hi}_tokens", n),
                       (f"{lo}-{hi}_calls", 1), (f"pass:{where[0]}_s", dt), (f"pass:{where[0]}_tokens", n),
                       (f"pass:{where[0]}_calls", 1)):
            stat[key] += v
        if where[0] == "first round":
            where[0] = "later rounds"
        return rc

    extend, rounds = ParallelScorer._extend, ParallelScorer._rounds

    def extend_in_pass(self, tokens, keep, heads, *rest):
        where[0] = "pass 1" if heads else "pass 2"
        return extend(self, tokens, keep, heads, *rest)

    def rounds_in_pass(self, *args):
        where[0] = "first round"
        return rounds(self, *args)

    ParallelScorer._extend, ParallelScorer._rounds = extend_in_pass, rounds_in_pass

    for module in (llama_cpp, llama_cpp.llama.llama_cpp, llama_cpp._internals.llama_cpp):
        module.llama_decode = timed

    def roofline() -> float:
        toks = eng.prompt_tokens(prompts[0])[:512]
        rates = []
        for _ in range(3):
            eng.llm.n_tokens = 0  # eval() drops the KV cache past n_tokens
            t0 = time.perf_counter()
            eng.llm.eval(toks)
            rates.append(len(toks) / (time.perf_counter() - t0))
        return statistics.median(rates)

    per = len(probes)
    eng.score(prompts[:per], SCALE)  # warm-up: the first item
    before = roofline()
    stat.clear()
    t0, computed = time.perf_counter(), 0
    for i in range(per, len(prompts), per):
        computed += sum(o.computed_tokens for o in eng.score(prompts[i:i + per], SCALE))
    total = time.perf_counter() - t0
    seen = defaultdict(float, stat)  # the collect's decodes only: the closing roofline's go through `timed` too
    bins = {f"{lo}-{hi}": {"calls": int(seen[f"{lo}-{hi}_calls"]), "tokens": int(seen[f"{lo}-{hi}_tokens"]),
                           "seconds": seen[f"{lo}-{hi}_s"],
                           "tok_s": seen[f"{lo}-{hi}_tokens"] / seen[f"{lo}-{hi}_s"] if seen[f"{lo}-{hi}_s"] else None}
            for lo, hi in BINS if seen[f"{lo}-{hi}_calls"]}
    passes = {k[5:-6]: {"calls": int(seen[k]), "tokens": int(seen[k[:-6] + "_tokens"]), "seconds": seen[k[:-6] + "_s"]}
              for k in list(seen) if k.startswith("pass:") and k.endswith("_calls")}
    roof = (before + roofline()) / 2
    eng.close()
    save(f"engine_profile_{path}", {
        "path": path, "prompts": len(prompts) - per, "engine_s": total, "computed_tokens": computed,
        "engine_tok_s": computed / total, "decode_s": seen["decode_s"], "decoded_tokens": int(seen["decode_tokens"]),
        "decode_tok_s": seen["decode_tokens"] / seen["decode_s"], "other_s": total - seen["decode_s"],
        "roofline_tok_s": roof, "ratio": computed / total / roof, "bins": bins,
        "bin_ratios": {k: (v["tok_s"] / roof if v["tok_s"] else None) for k, v in bins.items()},
        "passes": {k: v | {"ratio": v["tokens"] / v["seconds"] / roof} for k, v in passes.items()}})


if __name__ == "__main__":
    main(*sys.argv[1:])
