"""What llama.cpp's prompt rate is for the shape of the CPU judge's work (benchmark (i)'s gap).

The judge computes short query blocks deep in long prompts: a probe's ~20-token suffix after
~630 cached cells of article, summary and instructions, one block per prompt (one at a time)
or one per KV stream (the parallel path keeps a stream per prompt, so each stream's attention
is still ~20 queries over its own cells). Benchmark (i)'s roofline is 512-token batches from
position 0. This measures llama.cpp's rate (same model and threads as the engine, no flash
attention, as the engine) on a grid: query blocks of ``SIZES`` tokens after ``DEPTHS`` cached
cells, each block computed and dropped again (the cache back to the prefix), in interleaved
rounds (a shared machine drifts: each round measures every cell once, in a shuffled order), the median of
``ROUNDS`` per cell, and each cell as a ratio to the 512-token batch from position 0 of its
round. ``python benchmarks/check_attention_shape.py`` -> ``results/attention_shape.json``."""

import statistics
import time

import numpy as np

from _common import save
from judgecal.engines import LlamaCppEngineConfig

SIZES = (20, 320, 512)
DEPTHS = (0, 140, 256, 630)
ROUNDS = 3
TOKENS_PER_CELL = 1024  # a cell computes about this many tokens a round (blocks of its size)


def rate(llm, tokens: list[int], depth: int, size: int) -> float:
    """Tokens per second computing ``size``-token blocks after ``depth`` cached tokens."""
    llm.n_tokens = 0  # eval() drops the KV cache past n_tokens
    if depth:
        llm.eval(tokens[:depth])
    blocks, seconds = max(1, TOKENS_PER_CELL // size), 0.0
    for _ in range(blocks):
        llm.n_tokens = depth  # the block dropped again: the next one sits at the same cells
        t0 = time.perf_counter()
        llm.eval(tokens[depth:depth + size])
        seconds += time.perf_counter() - t0
    return blocks * size / seconds


def main():
    eng = LlamaCppEngineConfig().build()
    llm = eng.llm
    tokens = [int(t) for t in np.random.default_rng(0).integers(100, 40_000, max(DEPTHS) + max(SIZES))]
    llm.eval(tokens[:64])  # warm-up
    cells = [(s, d) for d in DEPTHS for s in SIZES]
    rng, rounds = np.random.default_rng(0), []
    for _ in range(ROUNDS):  # each round in its own shuffled order: a drift weighs on no cell more
        order = [cells[i] for i in rng.permutation(len(cells))]
        rounds.append({(s, d): rate(llm, tokens, d, s) for s, d in order})
    threads = llm.context_params.n_threads
    eng.close()
    out = {}
    for s, d in cells:
        rates = [r[(s, d)] for r in rounds]
        ratios = [r[(s, d)] / r[(512, 0)] for r in rounds]
        out[f"{s}@{d}"] = {"block_tokens": s, "cached_cells": d, "tok_s_median": statistics.median(rates),
                           "ratio_to_512_from_0_median": statistics.median(ratios),
                           "ratio_range": [min(ratios), max(ratios)], "tok_s": rates}
    save("attention_shape", {"rounds": ROUNDS, "sizes": SIZES, "depths": DEPTHS, "cells": out,
                             "threads": threads})


if __name__ == "__main__":
    main()
