"""The probes of one item as parallel sequences over their shared prefix (``[engine]
parallel_probes = true``; single-token scales such as 1-5).

The one-at-a-time path (:meth:`LlamaCppEngine._eval`) keeps the KV cache of the longest
common prefix with the previous prompt and computes each probe's ~25-token suffix as its
own ``llama_decode``: 25-token batches run well under llama.cpp's prompt rate on 512-token
batches. Here the prompts of a ``score`` call are cut into groups; each group is one token
trie (a prompt's token at a position is a trie node; prompts that agree up to it share
it), computed in batches of up to ``n_batch`` tokens, where a node shared by several prompts
is one batch entry carrying all their sequence ids. The KV cache is llama.cpp's unified
one (``kv_unified``): a shared node is one cell visible to each of its sequences, so the
prefix is computed once and the suffixes of all of a group's probes go in one batch, each
prompt's next-token distribution read at its own last position (``llama_get_logits_ith``).

Between groups, sequence 0 keeps the tokens of the last prompt, as the one-at-a-time path's
cache does: a group reuses the part of it that its prompts start with (``llama_memory_seq_cp``
adds a prompt's sequence to those cells; no copy), always recomputing at least each prompt's
last token for its logits. So every prompt computes exactly the tokens it does not share with
the cache or with an earlier prompt of its group; never more than the one-at-a-time path.

A group grows, in the prompts' order, while its new nodes stay within ``n_batch`` (one
batch, llama.cpp's roofline shape), its prompts within ``max_seqs``, and its cells (cache
plus new nodes) within ``n_ctx``; a group has at least one prompt. Attention in a unified
cache spans every used cell, so keeping groups to one batch also keeps that span short.

Numerics: a token's logits depend, at float-rounding level, on the batch it is computed in
and on the cells the cache holds (the attention sums run over the padded cell range in
another order), so scores equal the one-at-a-time path's to float noise, not bit for bit
(``tests/test_llamacpp_parallel.py`` measures the difference on real prompts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Group:
    tokens: list[list[int]]  # the prompts' tokens
    reuse: list[int]  # per prompt, the positions taken from the cache (sequence 0)
    nodes: list[tuple[int, int]] = field(default_factory=list)  # (token, position), batch order
    seqs: list[list[int]] = field(default_factory=list)  # per node, its sequence ids
    last: list[int] = field(default_factory=list)  # per prompt, the node of its last token
    index: dict = field(default_factory=dict)  # (parent key, token) -> node

    def add(self, tokens: list[int], reuse: int) -> None:
        seq = len(self.tokens) + 1  # sequence 0 is the cache
        self.tokens.append(tokens)
        self.reuse.append(reuse)
        parent = ("cache", reuse)  # prompts enter the trie where their reuse of the cache ends
        node = -1
        for pos in range(reuse, len(tokens)):
            key = (parent, tokens[pos])
            node = self.index.get(key)
            if node is None:
                node = self.index[key] = len(self.nodes)
                self.nodes.append((tokens[pos], pos))
                self.seqs.append([])
            self.seqs[node].append(seq)
            parent = node
        self.last.append(node)

    def new_nodes(self, tokens: list[int], reuse: int) -> int:
        """How many nodes ``tokens`` would add."""
        parent = ("cache", reuse)
        for pos in range(reuse, len(tokens)):
            node = self.index.get((parent, tokens[pos]))
            if node is None:
                return len(tokens) - pos
            parent = node
        return 0


class ParallelScorer:
    """The parallel path's own llama.cpp context (on the engine's loaded model), its batch,
    and the cache state of sequence 0."""

    def __init__(self, llm, n_ctx: int, n_batch: int, max_seqs: int):
        import llama_cpp
        from llama_cpp import _internals

        self._lib = llama_cpp
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)  # threads, types, ...
        self.max_seqs = max(1, min(max_seqs, llama_cpp.llama_max_parallel_sequences() - 1))
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = self.max_seqs + 1  # + sequence 0, the cache
        params.kv_unified = True  # one cell per shared token, visible to all its sequences
        self.ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        self.n_ctx, self.n_batch = n_ctx, n_batch
        self.n_vocab = llm.n_vocab()
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, self.max_seqs + 1)
        self.cached: list[int] = []  # the tokens sequence 0 holds, at positions 0..

    def close(self) -> None:
        if self.batch is not None:
            self._lib.llama_batch_free(self.batch)
            self.batch = None
        self.ctx.close()

    def groups(self, prompts: list[list[int]]) -> list[list[int]]:
        """The prompts (their indexes) cut into groups, in order (see the module docstring)."""
        out: list[list[int]] = []
        cache, group, cur = self.cached, None, []
        for i, toks in enumerate(prompts):
            reuse = _reuse(cache, toks)
            if group is not None:
                extra = group.new_nodes(toks, reuse)
                if (len(cur) < self.max_seqs and len(group.nodes) + extra <= self.n_batch
                        and len(cache) + len(group.nodes) + extra <= self.n_ctx):
                    group.add(toks, reuse)
                    cur.append(i)
                    continue
                out.append(cur)
                cache = group.tokens[-1]
                reuse = _reuse(cache, toks)
            group, cur = _Group([], []), [i]
            group.add(toks, reuse)
        if cur:
            out.append(cur)
        return out

    def score_logits(self, prompts: list[list[int]]):
        """Yields, per group in order: the prompts' indexes, each one's logits at its last
        position, each one's computed tokens (a shared node counts for the first prompt)."""
        for idx in self.groups(prompts):
            yield (idx, *self._run([prompts[i] for i in idx]))

    def _run(self, prompts: list[list[int]]) -> tuple[list[np.ndarray], list[int]]:
        lib, mem = self._lib, self.ctx.memory
        group = _Group([], [])
        for toks in prompts:
            group.add(toks, _reuse(self.cached, toks))
        keep = max(group.reuse)
        lib.llama_memory_seq_rm(mem, 0, keep, -1)  # the cache past what any prompt reuses
        for s, r in enumerate(group.reuse, 1):
            lib.llama_memory_seq_rm(mem, s, -1, -1)
            if r:
                lib.llama_memory_seq_cp(mem, 0, s, 0, r)
        wanted = {n: [] for n in group.last}
        for k, n in enumerate(group.last):
            wanted[n].append(k)
        logits: list[np.ndarray | None] = [None] * len(prompts)
        b = self.batch
        for start in range(0, len(group.nodes), self.n_batch):
            chunk = range(start, min(start + self.n_batch, len(group.nodes)))
            for j, n in enumerate(chunk):
                tok, pos = group.nodes[n]
                b.token[j], b.pos[j] = tok, pos
                seqs = group.seqs[n]
                b.n_seq_id[j] = len(seqs)
                for m, s in enumerate(seqs):
                    b.seq_id[j][m] = s
                b.logits[j] = n in wanted
            b.n_tokens = len(chunk)
            rc = lib.llama_decode(self.ctx.ctx, b)
            if rc != 0:
                self.cached = []
                lib.llama_memory_seq_rm(mem, -1, -1, -1)
                raise RuntimeError(f"llama_decode returned {rc} on a batch of {len(chunk)} parallel tokens")
            for j, n in enumerate(chunk):
                if n in wanted:
                    ptr = lib.llama_get_logits_ith(self.ctx.ctx, j)
                    row = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
                    for k in wanted[n]:
                        logits[k] = row
        # sequence 0 keeps the last prompt's tokens (as the one-at-a-time path's cache does)
        last = len(prompts)
        lib.llama_memory_seq_rm(mem, 0, -1, -1)
        lib.llama_memory_seq_cp(mem, last, 0, -1, -1)
        for s in range(1, last + 1):
            lib.llama_memory_seq_rm(mem, s, -1, -1)
        self.cached = list(prompts[-1])
        computed = _computed_per_prompt(group)
        return logits, computed


def _reuse(cached: list[int], tokens: list[int]) -> int:
    """Positions of ``tokens`` the cache holds, short of the last one (always recomputed for
    its logits)."""
    n = min(len(cached), len(tokens) - 1)
    i = 0
    while i < n and cached[i] == tokens[i]:
        i += 1
    return i


def _computed_per_prompt(group: _Group) -> list[int]:
    """Each node is counted once, for the first prompt of the group that goes through it:
    the sum over the group is the tokens computed."""
    seen: set[int] = set()
    out = []
    for k, toks in enumerate(group.tokens):
        n = 0
        parent = ("cache", group.reuse[k])
        for pos in range(group.reuse[k], len(toks)):
            node = group.index[(parent, toks[pos])]
            if node not in seen:
                seen.add(node)
                n += 1
            parent = node
        out.append(n)
    return out
