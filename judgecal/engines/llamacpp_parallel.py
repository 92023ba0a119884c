"""The probes of one item as parallel sequences over their shared prefix (``[engine]
parallel_probes = true``, the default; single-token scales such as 1-5).

The one-at-a-time path (:meth:`LlamaCppEngine._eval`) keeps the KV cache of the longest
common prefix with the previous prompt and computes each probe's ~20-token suffix as its
own ``llama_decode``. Here the prompts of a ``score`` call are cut into groups (consecutive
prompts: in a PRISM plan, one item's probes). A group's shared prefix is computed once, on
sequence 0 (the cache), then copied to one KV stream per prompt, and the suffixes of all the
group's prompts go in shared ``llama_decode`` batches, each prompt's next-token distribution
read at its own last position (``llama_get_logits_ith``).

Why one stream per sequence (``kv_unified = false``), not one cache shared by all:
llama.cpp's CPU attention sums over KV cells in SIMD lanes and blocks by cell index. In a
shared cache a probe's suffix cells sit after the other probes' cells, so its sums run in
another order, and SmolLM2 Q4_1 (activations quantized to 8 bits between layers) turns that
rounding into expected scores up to 0.1 apart. In its own stream a prompt's tokens sit in
the cells the one-at-a-time path puts them in, and llama.cpp without flash attention
computes a token the same whatever batch it comes in, as long as its stream has two or more
tokens in that batch (SmolLM2's Q4_1: the one-at-a-time path gives identical answers with
and without prefix reuse), so the scores equal that path's bit for bit
(``tests/test_llamacpp_parallel.py``). Flash attention is off for the same reason: its CPU
kernel gives other answers for other batches; and a stream never computes a single token in
a batch (llama.cpp computes a lone query token with other kernels). llama.cpp puts only
consecutive streams in one forward pass (others go in passes of their own), so the longest
suffix goes to stream 1, the next to 2, ... Weights whose matrix products depend on the
batch (Gemma 3's Q4_K_M) give answers that depend on batching on either path.

A group, as :func:`plan_group` cuts it: its *head* is its first shortest prompt (PRISM's
baseline prompt: the probes are it with a clause added); ``shared`` the longest prefix common
to all its prompts. Pass 1 computes sequence 0 through the head (from where its cache stops
agreeing), the head's logits read at its end. The other prompts (the *stream* prompts) may
share more among themselves (``\\n\\nWhen you judge, put``): pass 2 cuts sequence 0 back to
where the head and their common prefix part and computes the rest of that prefix,
``stream_shared``. Then sequence 0 is copied into each stream prompt's stream (the copy
is the whole stream buffer, which is why a stream holds only ``ctx_per_seq`` cells, the
call's longest prompt rounded up) and pass 3 computes every stream prompt's own suffix, in
rounds of as many tokens per stream (llama.cpp's shape for separate streams): suffixes of
unequal length end in a few short rounds.

A group grows, in the prompts' order, while that computes at most ``JOIN_SLACK_TOKENS``
more tokens than starting another would, its stream prompts stay within ``max_seqs`` and
their suffixes within ``n_batch`` tokens; it has at least one prompt. Computed tokens: pass 1
counts for the group's first prompt, pass 2 for its first stream prompt, a suffix for its
prompt; the sum over a call is the tokens computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Tokens = list[int] | np.ndarray  # a prompt's token ids (score_logits makes them arrays once)
JOIN_SLACK_TOKENS = 2  # a token or two recomputed costs less than another group's passes
CELL_PAD = 256  # llama.cpp pads the attended cell range to this: streams are sized in its steps


def common_prefix(a, b) -> int:
    """How many leading tokens ``a`` and ``b`` (lists or arrays: arrays spare the conversion,
    which is most of the time the plan takes) share."""
    n = min(len(a), len(b))
    neq = np.nonzero(np.asarray(a[:n]) != np.asarray(b[:n]))[0]
    return int(neq[0]) if len(neq) else n


@dataclass
class GroupPlan:
    """How one group is computed (see the module docstring)."""

    prompts: list[Tokens]
    shared: int  # tokens common to every prompt, each prompt keeping at least its last one
    heads: list[int]  # prompts (indexes) answered on sequence 0: the first shortest one and its copies
    streams: list[int]  # the others, one stream each
    stream_shared: int  # tokens common to the stream prompts (>= shared), each keeping its last one

    @property
    def stream_tokens(self) -> int:
        return sum(len(self.prompts[i]) - self.stream_shared for i in self.streams)

    def cost(self, cached: Tokens) -> int:
        """Tokens computing the group takes after a cache holding ``cached`` (with the token
        recomputed where one would be left alone in a batch)."""
        head = self.prompts[self.heads[0]]
        n = len(head) - kept_for(cached, head)
        if not self.streams:
            return n
        ref = self.prompts[self.streams[0]][:self.stream_shared]
        if self.stream_shared > (keep := common_prefix(head, ref)):
            n += not_alone(self.stream_shared - keep, self.stream_shared)
        ends = [len(self.prompts[i]) - self.stream_shared for i in self.streams]
        return n + self.stream_tokens + recomputed_in_rounds(ends, self.stream_shared)

    def cached_after(self) -> Tokens:
        """What sequence 0 holds once the group is computed."""
        return self.prompts[self.streams[0]][:self.stream_shared] if self.streams else self.prompts[self.heads[0]]


def recomputed_in_rounds(ends: list[int], start: int) -> int:
    """Tokens the rounds compute twice for suffixes of lengths ``ends`` from position ``start``:
    a round of one token per stream steps each of its streams back a token (see
    :meth:`ParallelScorer._rounds`)."""
    extra, done = 0, 0
    for end in sorted(set(ends)):
        if end - done == 1 and start + done > 0:
            extra += sum(1 for e in ends if e > done)
        done = end
    return extra


def not_alone(n: int, end: int) -> int:
    """Tokens computed for ``n`` new ones ending at ``end``: one more where one would be alone."""
    return 2 if n == 1 and end > 1 else n


def kept_for(cached, tokens) -> int:
    """Cached tokens a prompt ``tokens`` keeps after a cache holding ``cached``: their common
    prefix, less the prompt's last token (computed again for its logits) and, where that one
    would be computed alone, the token before it."""
    return len(tokens) - not_alone(len(tokens) - min(common_prefix(cached, tokens), len(tokens) - 1), len(tokens))


def plan_group(prompts: list[Tokens]) -> GroupPlan:
    shared = min(min(len(t) for t in prompts) - 1, min(common_prefix(prompts[0], t) for t in prompts))
    head = min(prompts, key=len)  # the first of the shortest: PRISM's baseline prompt
    same = [len(t) == len(head) and common_prefix(t, head) == len(head) for t in prompts]
    heads = [i for i, t in enumerate(same) if t]
    streams = [i for i, t in enumerate(same) if not t]
    stream_shared = shared
    if streams:
        ref = prompts[streams[0]]
        # each stream keeps at least its last token; a lone stream its last two (never a
        # batch of one token)
        stream_shared = max(0, min(min(len(prompts[i]) for i in streams) - (1 if len(streams) > 1 else 2),
                                   min(common_prefix(ref, prompts[i]) for i in streams)))
        if stream_shared == 1:  # pass 2 could compute position 0 alone (nothing before it to recompute)
            stream_shared = 0
    return GroupPlan(prompts, shared, heads, streams, stream_shared)


def plan_groups(prompts: list[Tokens], cached: Tokens, max_seqs: int, n_batch: int) -> list[list[int]]:
    """The prompts (their indexes) cut into groups, in order, after a cache holding ``cached``:
    a prompt joins the group before it when that computes at most ``JOIN_SLACK_TOKENS`` more
    tokens than starting a new group would (the next item's prompts share only the article
    with this one's), while the group's streams stay within ``max_seqs`` and their suffixes
    within ``n_batch`` tokens. A one-token prompt joins no group: as a stream it would be a
    single token at position 0, which no round can step back from."""
    out: list[list[int]] = []
    cur: list[int] = []
    now: GroupPlan | None = None  # the plan of `cur`
    for i, toks in enumerate(prompts):
        if cur:
            joined = plan_group(now.prompts + [toks]) if len(toks) > 1 else None
            split = now.cost(cached) + plan_group([toks]).cost(now.cached_after())
            if (joined and len(joined.streams) <= max_seqs and joined.stream_tokens <= n_batch
                    and joined.cost(cached) <= split + JOIN_SLACK_TOKENS):
                cur.append(i)
                now = joined
                continue
            out.append(cur)
            cached = now.cached_after()
        cur, now = [i], plan_group([toks])
    if cur:
        out.append(cur)
    return out


def batch_sizes(n: int, n_batch: int) -> list[int]:
    """``n`` tokens in batches of at most ``n_batch`` (>= 3), none of a single token unless
    ``n`` is 1 (see :meth:`ParallelScorer._rounds`)."""
    sizes = [n_batch] * (n // n_batch) + ([n % n_batch] if n % n_batch else [])
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes[-2:] = [n_batch - 1, 2]
    return sizes


class ParallelScorer:
    """The parallel path's own llama.cpp context (on the engine's loaded model): one KV stream
    per sequence, ``ctx_per_seq`` cells each, and what sequence 0 holds."""

    def __init__(self, llm, ctx_per_seq: int, n_batch: int, max_seqs: int):
        import llama_cpp
        from llama_cpp import _internals

        self._lib = llama_cpp
        # two tokens per stream fit in a batch (see _rounds)
        self.max_seqs = max(1, min(max_seqs, n_batch // 2, llama_cpp.llama_max_parallel_sequences() - 1))
        self.ctx_per_seq = -(-ctx_per_seq // CELL_PAD) * CELL_PAD
        params = llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)  # threads, types, ...
        params.n_seq_max = self.max_seqs + 1  # + sequence 0, the cache
        params.n_ctx = self.ctx_per_seq * params.n_seq_max  # split evenly among the streams
        params.n_batch = params.n_ubatch = n_batch
        params.kv_unified = False  # a stream per sequence: its cells where the one-at-a-time path has them
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as the engine's own context
        self.ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        self.n_batch = n_batch
        self.n_vocab = llm.n_vocab()
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.cached: Tokens = []  # the tokens sequence 0 holds, at positions 0..

    def close(self) -> None:
        if self.batch is not None:
            self._lib.llama_batch_free(self.batch)
            self.batch = None
        self.ctx.close()

    def score_logits(self, prompts: list[Tokens]):
        """Yields, per group in order: the prompts' indexes, each one's logits at its last
        position, each one's computed tokens."""
        prompts = [np.asarray(t) for t in prompts]  # once, not at each of the plan's comparisons
        for idx in plan_groups(prompts, self.cached, self.max_seqs, self.n_batch):
            yield (idx, *self._run(plan_group([prompts[i] for i in idx])))

    def _run(self, g: GroupPlan) -> tuple[list[np.ndarray], list[int]]:
        lib, mem = self._lib, self.ctx.memory
        computed = [0] * len(g.prompts)
        logits: list[np.ndarray | None] = [None] * len(g.prompts)
        try:
            # pass 1: sequence 0 holds the head, its last token's logits read
            head = g.prompts[g.heads[0]]
            self._extend(head, kept_for(self.cached, head), g.heads, 0, computed, logits)
            if not g.streams:
                return logits, computed
            # pass 2: sequence 0 cut back to `shared` and extended by what the streams share
            ref = g.prompts[g.streams[0]][:g.stream_shared]
            self._extend(ref, common_prefix(self.cached, ref), [], g.streams[0], computed, logits)
            # pass 3: sequence 0 copied into each stream, the suffixes in rounds
            suffixes = {}
            # the longest suffix in stream 1, the next in 2, ...: the streams still computing are
            # always 1..m, and llama.cpp puts only consecutive streams in one forward pass
            for s, i in enumerate(sorted(g.streams, key=lambda i: -len(g.prompts[i])), 1):
                lib.llama_memory_seq_cp(mem, 0, s, -1, -1)  # across streams: the buffer, at the next decode
                suffixes[s] = (i, g.stream_shared)
                computed[i] += len(g.prompts[i]) - g.stream_shared
            self._rounds(g, suffixes, computed, logits)
            return logits, computed
        except BaseException:  # an interrupt too: what sequence 0 holds is unknown
            self.cached = []
            lib.llama_memory_seq_rm(mem, -1, -1, -1)
            raise

    def _rounds(self, g: GroupPlan, suffixes: dict[int, tuple[int, int]], computed: list, logits: list) -> None:
        """The stream prompts' suffixes, ``suffixes`` = {stream: (prompt, next position)}, in
        rounds of as many tokens per stream (llama.cpp's shape for separate streams), the
        streams 1..m (one forward pass). A round never holds a single token per stream:
        llama.cpp computes a stream's lone query token with other kernels (other logits than
        the one-at-a-time path's: ``tests/test_llamacpp_parallel.py``), so a round of one token
        per stream computes the token before it again in each (all streams stand at the same
        position)."""
        lib = self._lib
        while suffixes:
            k = min(len(g.prompts[i]) - p for i, p in suffixes.values())
            k = max(1, min(k, self.n_batch // len(suffixes)))  # the plan keeps k * streams <= n_batch
            if k == 1 and all(p > 0 for _, p in suffixes.values()):
                for s, (i, p) in list(suffixes.items()):
                    lib.llama_memory_seq_rm(self.ctx.memory, s, p - 1, -1)
                    suffixes[s] = (i, p - 1)
                    computed[i] += 1
                k = 2
            entries, want = [], {}
            for s, (i, p) in list(suffixes.items()):
                toks = g.prompts[i]
                entries += [(toks[q], q, s) for q in range(p, p + k)]
                if p + k == len(toks):
                    want[len(entries) - 1] = [i]
                    del suffixes[s]
                else:
                    suffixes[s] = (i, p + k)
            self._decode(entries, want, logits)

    def _extend(self, tokens: Tokens, keep: int, heads: list[int], owner: int, computed: list, logits: list):
        """Sequence 0 made to hold ``tokens``: its cells from ``keep`` on dropped, the rest
        computed (for ``owner``'s count), the last one's logits for ``heads``."""
        keep = len(tokens) - not_alone(len(tokens) - keep, len(tokens))  # never a 1-token batch (see _rounds)
        self._lib.llama_memory_seq_rm(self.ctx.memory, 0, keep, -1)
        self.cached = tokens[:keep]  # always a prefix of what sequence 0 holds
        entries = [(tokens[p], p, 0) for p in range(keep, len(tokens))]
        self._decode(entries, {len(entries) - 1: heads} if heads else {}, logits)
        computed[owner] += len(entries)
        self.cached = tokens

    def _decode(self, entries: list[tuple[int, int, int]], want: dict[int, list[int]], logits: list) -> None:
        """``entries`` (token, position, sequence) in batches of ``n_batch``; the logits at the
        entries in ``want`` go to the prompts it names."""
        lib, b = self._lib, self.batch
        start = 0
        for size in batch_sizes(len(entries), self.n_batch):
            chunk = entries[start:start + size]
            for j, (tok, pos, seq) in enumerate(chunk):
                b.token[j], b.pos[j], b.n_seq_id[j] = tok, pos, 1
                b.seq_id[j][0] = seq
                b.logits[j] = start + j in want
            b.n_tokens = len(chunk)
            rc = lib.llama_decode(self.ctx.ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} on a batch of {len(chunk)} parallel tokens")
            for j in range(len(chunk)):
                for k in want.get(start + j, ()):
                    ptr = lib.llama_get_logits_ith(self.ctx.ctx, j)
                    logits[k] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
            start += size
