"""The embedded judge's parallel path (``parallel_probes``): the probes of an item as parallel
sequences over their shared prefix, against the one-at-a-time path on real SmolLM2 prompts,
and its computed-token accounting."""

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("llama_cpp")

from judgecal.datasets import load_dataset, subset_items  # noqa: E402
from judgecal.engines import LlamaCppEngineConfig  # noqa: E402
from judgecal.engines.llamacpp_parallel import (GroupPlan, batch_sizes, common_prefix, plan_group,  # noqa: E402
                                                  plan_groups, recomputed_in_rounds)
from judgecal.pipeline.render import judge_prompts  # noqa: E402
from judgecal.probes import ProbeRenderer, build_plan, load_bank  # noqa: E402
from judgecal.scale import ScoreScale  # noqa: E402

SCALE = ScoreScale(1, 5)


def test_group_plan_heads_and_streams():
    """The baseline (the shortest) is the head, answered on sequence 0; the probes are streams,
    their common prefix computed once beyond what they share with the baseline."""
    base = [1, 2, 3, 9]
    probes = [[1, 2, 3, 7, 8, 4, 9], [1, 2, 3, 7, 8, 5, 5, 9], [1, 2, 3, 7, 8, 6, 9]]
    g = plan_group([base] + probes)
    assert (g.shared, g.heads, g.streams, g.stream_shared) == (3, [0], [1, 2, 3], 5)
    assert g.stream_tokens == 2 + 3 + 2
    # the longest suffix's last token would be alone in the last round: one more computed
    assert g.cost([]) == 4 + 2 + 7 + 1 and g.cost([1, 2, 3, 9]) == 2 + 2 + 7 + 1
    assert plan_group(probes[:2]) == GroupPlan(probes[:2], 5, [0], [1], 6)  # the shorter is the head; a
    # lone stream keeps its last two tokens
    assert plan_group(probes[::-1]).heads == [0]  # the first shortest
    assert plan_group([base]).heads == [0] and plan_group([base]).streams == []  # one prompt: sequence 0 alone
    dup = plan_group([base, base, probes[0]])  # the same prompt twice: both heads
    assert dup.heads == [0, 1] and dup.streams == [2]
    # a group grows while its streams fit max_seqs and their suffixes n_batch, and while that
    # computes at most JOIN_SLACK_TOKENS more than a new group would
    assert plan_groups([base] + probes, [], max_seqs=16, n_batch=512) == [[0, 1, 2, 3]]
    assert plan_groups([base] + probes, [], max_seqs=2, n_batch=512) == [[0, 1, 2], [3]]
    assert plan_groups([base] + probes, [], max_seqs=16, n_batch=6) == [[0, 1, 2], [3]]
    diverging = [base, probes[0], probes[1], [1, 2, 3, 7, 6, 5, 9]]  # shares a token less: joins (slack)
    assert plan_groups(diverging, [], 16, 512) == [[0, 1, 2, 3]]
    # ... unless its suffix is one token apart from the others: rounds of one token per stream
    # compute the token before again in each stream (3 more), more than the slack
    assert plan_groups(diverging[:3] + [[1, 2, 3, 7, 6, 9]], [], 16, 512) == [[0, 1, 2], [3]]
    assert recomputed_in_rounds([2, 3, 4], 4) == 3 and recomputed_in_rounds([3, 4, 3], 4) == 1
    assert recomputed_in_rounds([19, 21, 24, 27], 700) == 0 and recomputed_in_rounds([1, 1], 0) == 0
    # the next item's prompts share only the article: a new group, though its streams would fit
    item = [[1, 2, 3, *summary, *tail] for summary in ([10, 11, 12, 13], [20, 21, 22, 23])
            for tail in ([9], [7, 8, 4, 9], [7, 8, 5, 9])]
    assert plan_groups(item, [], max_seqs=16, n_batch=512) == [[0, 1, 2], [3, 4, 5]]
    assert plan_group(item[3:]).cost(plan_group(item[:3]).cached_after()) == 5 + 2 + 2 + 2
    # on by default where llama.cpp computes a token the same in any batch of two or more
    cfg = LlamaCppEngineConfig
    assert cfg().parallel and not cfg(model="gemma3-270m").parallel
    assert cfg(model="gemma3-270m", parallel_probes=True).parallel
    assert not cfg(model_path="x.gguf").parallel and not cfg(prefix_reuse=False).parallel
    assert not cfg(parallel_probes=False).parallel and not cfg(parallel_probes=True, prefix_reuse=False).parallel
    assert plan_group([[5], [6]]).stream_shared == 0  # one-token prompts: nothing to share, never below 0
    # position 0 is never a stream's single token: a one-token prompt joins no group, and the
    # streams never share just their first token (pass 2 would compute it alone)
    assert plan_groups([[5], [6]], [], 16, 512) == [[0], [1]]
    assert plan_groups([[5, 1], [5]], [], 16, 512) == [[0], [1]]
    assert plan_group([[9], [6, 7], [6, 8]]).stream_shared == 0
    # batches never hold a single token, unless there is only one
    assert batch_sizes(513, 512) == [511, 2] and batch_sizes(1024, 512) == [512, 512] and batch_sizes(1, 512) == [1]
    assert batch_sizes(7, 512) == [7] and sum(batch_sizes(1025, 8)) == 1025 and 1 not in batch_sizes(1025, 8)
    unrelated = plan_group([[5, 6, 7], [5, 6, 7], [8, 9]])  # nothing shared with the head
    assert (unrelated.shared, unrelated.heads, unrelated.streams, unrelated.stream_shared) == (0, [2], [0, 1], 2)


@pytest.fixture(scope="module")
def prompts():
    """The 17 style probes of 1 SummEval article x 2 summaries (34 prompts), the article cut
    to its first 1,200 characters to keep the runs short."""
    items = subset_items(load_dataset("summeval"), 1, 2)
    src = items["source"].to_pylist()
    items = items.set_column(items.schema.get_field_index("source"), "source", pa.array([s[:1200] for s in src]))
    probes = load_bank("style").probes()
    cfg = LlamaCppEngineConfig()
    plan = build_plan(items, probes, 1, SCALE, cfg.identity)
    return judge_prompts(ProbeRenderer(items, probes, SCALE), plan)


def _run(prompts, **kw):
    eng = dataclasses.replace(LlamaCppEngineConfig(), **kw).build()
    try:
        return eng.score(prompts, SCALE), eng.score(prompts[:3], SCALE)
    finally:
        eng.close()


@pytest.fixture(scope="module")
def sequential(prompts):
    return _run(prompts, parallel_probes=False)


def _lcp(seqs):
    n = 0
    while all(len(t) > n + 1 and t[n] == seqs[0][n] for t in seqs):
        n += 1
    return n


@pytest.mark.slow
@pytest.mark.parametrize("seqs", [16, 1])
def test_parallel_equals_sequential(prompts, sequential, seqs):
    """Several sequences per batch, each in its own KV stream: every token sits in the cell the
    one-at-a-time path gives it, so the answers are the same (the issue asks 1e-6 in expected
    score; they are bit-identical), and each probe computes only its suffix."""
    par = _run(prompts, parallel_probes=True, parallel_seqs=seqs)
    for a, b in zip(sequential[0] + sequential[1], par[0] + par[1]):
        assert a.expected_score == b.expected_score  # the issue asks 1e-6; SmolLM2's are bit for bit
        assert (a.score, a.raw_text, a.parse_status, a.prompt_tokens) == (b.score, b.raw_text, b.parse_status,
                                                                          b.prompt_tokens)
    c = [o.computed_tokens for o in par[0]]
    assert c[0] == par[0][0].prompt_tokens  # the first prompt computes everything
    if seqs == 16:
        # the second summary's 17 prompts: its baseline from where the cache (the first
        # summary's probes) stops agreeing; the first probe from the baseline's end on (its
        # share of the probes' common prefix); each other probe its suffix beyond that prefix
        toks = _tokens(prompts[17:34])
        shared = _lcp(toks[1:])
        assert 1 <= c[17] < len(toks[0])
        assert c[18] == len(toks[1]) - common_prefix(toks[0], toks[1])
        assert c[19:34] == [len(t) - shared for t in toks[2:]]
    # a second call reuses the cache: each prompt computes at least one token, never all
    assert all(1 <= o.computed_tokens < o.prompt_tokens for o in par[1])


def _tokens(ps):
    eng = LlamaCppEngineConfig().build()
    try:
        return [eng.prompt_tokens(p) for p in ps]
    finally:
        eng.close()


@pytest.mark.slow
def test_answers_depend_on_the_prompt_alone(prompts, sequential):
    """Whatever the cache held and however the prompts are grouped (in reverse, one per call),
    an answer is the same: what makes a resumed collect equal an uninterrupted one."""
    first = [o.expected_score for o in sequential[0][:17]]
    eng = LlamaCppEngineConfig().build()
    try:
        assert eng.cfg.parallel  # the default
        backwards = [o.expected_score for o in eng.score(prompts[:17][::-1], SCALE)][::-1]
        alone = [eng.score([p], SCALE)[0].expected_score for p in prompts[:17:4]]
    finally:
        eng.close()
    assert backwards == first and alone == first[::4]


@pytest.mark.slow
def test_a_prompt_asked_again_is_computed_once(prompts, sequential):
    """Repeats in a call (URW's samples of one prompt, repeated runs) are computed once and
    answered from the same logits, each with its own temperature and seed; as streams they
    would each compute their whole suffix. The answers are the one-at-a-time path's."""
    one_at_a_time = {p.request_id: o for p, o in zip(prompts, sequential[0])}
    asked = [prompts[3], prompts[0], prompts[3], prompts[5], prompts[3], prompts[0]]
    warm = [dataclasses.replace(p, request_id=f"{p.request_id}-t", temperature=0.7, seed=s)
            for s, p in enumerate(asked[:3])]
    runs = []
    for call in (asked + warm, asked[:2] + asked[3:4]):  # then only the distinct ones, on a fresh engine
        eng = LlamaCppEngineConfig().build()
        try:
            runs.append(eng.score(call, SCALE))
        finally:
            eng.close()
    outs, once = runs
    assert [o.expected_score for o in outs[:6]] == [one_at_a_time[p.request_id].expected_score for p in asked]
    c = [o.computed_tokens for o in once]
    assert [o.computed_tokens for o in outs[:6]] == [c[0], c[1], 0, c[2], 0, 0] and sum(c) > 0
    assert all(o.computed_tokens == 0 for o in outs[6:])  # the same tokens: a temperature changes no prompt
    assert all(1 <= o.expected_score <= 5 and o.score in {1, 2, 3, 4, 5} for o in outs[6:])


@pytest.mark.slow
def test_longer_prompts_later_rebuild_the_streams(prompts):
    """A later call with longer prompts than the streams hold gets larger streams; answers
    still equal the one-at-a-time path's."""
    short = [dataclasses.replace(p, user=p.user.replace(p.user[200:700], "")) for p in prompts[:3]]
    outs = []
    for par in (False, True):
        eng = dataclasses.replace(LlamaCppEngineConfig(), parallel_probes=par).build()
        try:
            outs.append([o.expected_score for o in eng.score(short, SCALE) + eng.score(prompts[:3], SCALE)])
            if par:
                assert eng._parallel.ctx_per_seq >= max(len(eng.prompt_tokens(p)) for p in prompts[:3])
        finally:
            eng.close()
    assert np.max(np.abs(np.array(outs[0]) - np.array(outs[1]))) <= 1e-6


@pytest.mark.slow
def test_multi_token_scales_stay_on_the_walk(prompts):
    """parallel_probes leaves 1-10 (two-token "10") on the sequential trie walk: same answers."""
    scale = ScoreScale(1, 10)
    outs = []
    for par in (False, True):
        eng = dataclasses.replace(LlamaCppEngineConfig(), parallel_probes=par).build()
        outs.append(eng.score(prompts[:2], scale))
        eng.close()
    assert [(o.expected_score, o.score) for o in outs[0]] == [(o.expected_score, o.score) for o in outs[1]]


@pytest.mark.slow
def test_rounds_hold_the_streams_1_to_m(prompts):
    """Suffixes of every length one token apart, given in no order: rounds of one token per
    stream, streams finishing at every round. llama.cpp puts only consecutive streams in one
    forward pass (others go in passes of their own, where a lone stream's single token takes
    other kernels), so the longest suffix goes to stream 1, the next to 2, ...: every pass holds
    sequence 0 or the streams 1..m, and every answer equals the one-at-a-time path's, bit for bit."""
    import llama_cpp

    from judgecal.engines.llamacpp_parallel import ParallelScorer

    eng = LlamaCppEngineConfig().build()
    try:
        real = eng.prompt_tokens(prompts[1])
        trunk, tail = real[:-12], real[-12:]
        toks = [trunk + tail[:n] for n in (2, 5, 3, 7, 4, 6, 5, 8, 3, 9)]  # the first shortest is the head
        want = []
        for t in toks:  # the one-at-a-time path, the whole prompt each time in cells 0..
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(eng.llm._ctx.ctx), True)
            eng._eval(t, reuse=False)
            want.append(eng._last_logits())
        scorer = ParallelScorer(eng.llm, len(toks[-1]), 512, 16)
        passes, decode = [], scorer._decode

        def recording(entries, *args):
            if entries:
                passes.append(sorted({s for _, _, s in entries}))
            return decode(entries, *args)

        scorer._decode = recording
        got = {}
        try:
            for idx, logits, _ in scorer.score_logits(toks):
                got.update(zip(idx, logits))
        finally:
            scorer.close()
    finally:
        eng.close()
    assert all(s == [0] or s == list(range(1, len(s) + 1)) for s in passes), passes
    assert len([s for s in passes if s != [0]]) == 7  # a round per distinct suffix length (1-7 tokens)
    assert all(np.array_equal(got[i], want[i]) for i in range(len(toks))), \
        [float(np.abs(got[i] - want[i]).max()) for i in range(len(toks))]
