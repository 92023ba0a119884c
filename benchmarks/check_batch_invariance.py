"""Does llama.cpp compute a token the same whatever batch it comes in? Per local judge, on 12
SummEval probe prompts (1-5 expected scores), the largest difference between:

* ``prefix_reuse``: each prompt computed whole in one batch, and after the previous prompt's
  cache (only its new suffix, at least two tokens), one prompt at a time;
* ``flash_attention``: the same two, with flash attention on (judgecal keeps it off);
* ``one_token_batch``: a prompt's last token computed alone, and with the token before it;
* ``parallel_vs_one_at_a_time``: the engine's two paths (``parallel_probes``), 34 prompts.

The parallel path equals the one-at-a-time path bit for bit exactly where the first three
read 0 with flash attention off (README, the llamacpp engine); ``LocalJudge.batch_invariant``
records the answer per judge -> ``results/batch_invariance.json``."""

import dataclasses

import llama_cpp
import numpy as np
from llama_cpp import Llama

from _common import SCALE, rendered, save, summeval_probe_set
from judgecal.engines import LlamaCppEngineConfig
from judgecal.engines.llamacpp_parallel import common_prefix
from judgecal.engines.local_judges import LOCAL_JUDGES

N = 12


def expected_scores(llm: Llama, cands, prompts: list[list[int]], split) -> list[float]:
    """Each prompt evaluated in the batches ``split(prompt, previous)`` gives, cache kept."""
    out, previous = [], []
    for toks in prompts:
        keep, sizes = split(toks, previous)
        llm.n_tokens = keep  # eval() drops the KV cache past n_tokens
        i = keep
        for n in sizes:
            llm.eval(toks[i:i + n])
            i += n
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)  # the last eval's last row
        logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)
        p = np.exp(logits - logits.max())
        probs = np.array([p[ids].sum() for _, ids in cands])
        out.append(float((probs * np.array([v for v, _ in cands])).sum() / probs.sum()))
        previous = toks
    return out


def whole(toks, previous):
    return 0, [len(toks)]


def reused(toks, previous):
    n = min(common_prefix(toks, previous), len(toks) - 2)  # at least two new tokens
    return n, [len(toks) - n]


def last_alone(toks, previous):
    return 0, [len(toks) - 1, 1]


def last_two(toks, previous):
    return 0, [len(toks) - 2, 2]


def largest(a, b) -> float:
    return float(np.max(np.abs(np.array(a) - np.array(b))))


def measure(name: str) -> dict:
    cfg = LlamaCppEngineConfig(model=name, parallel_probes=False)
    items, probes, plan = summeval_probe_set(1, 2, cfg.identity)
    prompts = rendered(items, probes, plan)
    eng = cfg.build()
    tokens = [eng.prompt_tokens(p) for p in prompts]
    cands = eng._candidates(SCALE)
    seq = [o.expected_score for o in eng.score(prompts, SCALE)]
    eng.close()
    par_eng = dataclasses.replace(cfg, parallel_probes=True).build()
    par = [o.expected_score for o in par_eng.score(prompts, SCALE)]
    par_eng.close()
    out = {"judge": name, "prompts": N, "parallel_prompts": len(prompts),
           "parallel_vs_one_at_a_time": largest(seq, par)}
    for key, flash in (("prefix_reuse", False), ("flash_attention", True)):
        llm = Llama(model_path=cfg.gguf_path(), n_ctx=cfg.n_ctx, n_batch=cfg.n_batch, n_threads=2,
                    n_threads_batch=2, logits_all=False, flash_attn=flash, verbose=False)
        out[key] = largest(expected_scores(llm, cands, tokens[:N], whole),
                           expected_scores(llm, cands, tokens[:N], reused))
        if not flash:
            out["one_token_batch"] = largest(expected_scores(llm, cands, tokens[:N], last_alone),
                                             expected_scores(llm, cands, tokens[:N], last_two))
        llm.close()
    out["batch_invariant"] = out["prefix_reuse"] == 0.0
    out["recorded_batch_invariant"] = LOCAL_JUDGES[name].batch_invariant
    print(out, flush=True)
    return out


def main():
    save("batch_invariance", {"judges": [measure(name) for name in LOCAL_JUDGES]})


if __name__ == "__main__":
    main()
