"""The embedded judge on scales whose values are several tokens (SmolLM2 spells numbers digit
by digit): the trie walk against a brute force over each value, and 1-5 unchanged."""

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from judgecal.datasets import load_dataset, subset_items  # noqa: E402
from judgecal.engines import JudgePrompt, LlamaCppEngineConfig  # noqa: E402
from judgecal.probes.templates import TEMPLATES  # noqa: E402
from judgecal.scale import ScoreScale  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine():
    eng = LlamaCppEngineConfig().build()
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def rows():
    return subset_items(load_dataset("summeval"), 1, 3).to_pylist()


def summary_prompts(rows, scale, temperature=0.0, clause=""):
    """The summary template on SummEval summaries; the article cut to its first 1,000
    characters (~250 tokens instead of ~650) to keep the cold evaluations below short."""
    tpl = TEMPLATES["summary"]
    out = []
    for i, r in enumerate(rows):
        system, user = tpl.render(r["source"][:1000], r["content"], clause, scale)
        out.append(JudgePrompt(f"req-{scale}-{i}", system, user, tpl.answer_prefix, temperature=temperature, seed=3))
    return out


def prompt_tokens(engine, p):
    return engine.llm.tokenize(engine.render(p).encode(), add_bos=True, special=True)


def log_softmax(logits):
    x = logits.astype(np.float64)
    return x - (x.max() + np.log(np.exp(x - x.max()).sum()))


def brute_force(engine, tokens, scale, temperature=0.0):
    """p(v) value by value: the prompt plus each prefix of each spelling of v evaluated on its
    own, the product of the conditionals, times 1 - P(a token starting with a digit).

    The prompt is evaluated once, as the walk does, and each spelling's tokens one step at a time
    on top of it (``_step``: computed alone, as the walk computes its nodes; llama.cpp's logits
    for a token computed alone differ from those of the same token in a batch)."""
    digits = [i for i in range(engine.llm.n_vocab()) if engine.llm.detokenize([i])[:1].isdigit()]
    engine._eval(tokens)
    root = engine._last_logits()
    probs = []
    for v in scale.values:
        plain = engine.llm.tokenize(f"{v}".encode(), add_bos=False)
        spaced = engine.llm.tokenize(f" {v}".encode(), add_bos=False)
        total = 0.0
        for seq in [plain] + ([spaced] if spaced[0] != plain[0] else []):
            lp = 0.0
            for k in range(len(seq) + 1):
                if k:  # the cache holds the prompt: one token (or the spelling's rest) on top
                    engine._step(tokens + seq[:k])
                logits = (engine._last_logits() if k else root).astype(np.float64)
                logp = log_softmax(logits / temperature if temperature > 0 else logits)
                if k < len(seq):
                    lp += logp[seq[k]]
                else:
                    lp += np.log1p(-np.exp(logp[digits]).sum())
            total += np.exp(lp)
        probs.append(total)
    return np.array(probs)


def expected(values, probs):
    return float((values * probs).sum() / probs.sum())


def test_smollm2_spells_numbers_digit_by_digit(engine):
    assert len(engine.llm.tokenize(b"10", add_bos=False)) == 2
    assert len(engine.llm.tokenize(b"100", add_bos=False)) == 3


# (scale, SummEval summary, temperature): the walk scales logits by 1/T as the score does.
CASES = [(ScoreScale(0, 100), 0, 0.0), (ScoreScale(1, 10), 2, 0.0), (ScoreScale(1, 10), 1, 0.7)]


def test_the_trie_walk_matches_a_brute_force_and_is_what_score_reads(engine, rows):
    # Each read starts from an empty cache (a warm one gives the same logits: the prompt's last
    # token is never computed alone, tests/test_engines_real.py), and the reads agree to rounding.
    for scale, row, temperature in CASES:
        trie = engine._trie(scale)
        p = summary_prompts(rows[row:row + 1], scale, temperature)[0]
        tokens = prompt_tokens(engine, p)
        engine.llm.reset()
        values, probs, computed = engine.value_distribution(tokens, scale, temperature)
        assert list(values) == scale.values
        assert np.isfinite(probs).all() and (probs > 0).all() and probs.sum() <= 1 + 1e-9
        assert computed == len(tokens) + len(trie.paths) - 1  # the prompt, then one token per trie node
        engine.llm.reset()
        bf = brute_force(engine, tokens, scale, temperature)
        np.testing.assert_allclose(probs, bf, rtol=1e-5, atol=1e-12)
        assert expected(values, probs) == pytest.approx(expected(values, bf), abs=1e-6)

        engine.llm.reset()
        (o,) = engine.score([p], scale)
        assert scale.lo <= o.expected_score <= scale.hi
        assert o.expected_score == pytest.approx(expected(values, probs), abs=1e-9)
        # Sampling adds one token per sampled token after the first (read from the prompt's logits).
        extra = o.completion_tokens - 1 if temperature > 0 else 0
        assert (o.prompt_tokens, o.computed_tokens) == (len(tokens), computed + extra)
        assert 1 <= o.completion_tokens <= trie.depth
        if temperature == 0:
            assert o.score == values[np.argmax(probs)]
            assert o.parse_status in ("ok", "constrained"), o.raw_text
            if o.parse_status == "ok":
                assert scale.parse_score(o.raw_text) == o.score
        else:
            assert o.parse_status in ("ok", "unparsed")
            assert o.score is None or o.score == scale.parse_score(o.raw_text)


def test_sampled_scores_are_seeded_per_request(engine, rows):
    """At T > 0: tokens sampled down the trie (at most the longest spelling), read by the
    scale's parser; the same request draws the same sample."""
    scale = ScoreScale(1, 10)
    hot = summary_prompts(rows[:2], scale, temperature=1.0)
    engine.llm.reset()
    a = engine.score(hot, scale)
    engine.llm.reset()
    b = engine.score(hot, scale)
    for x, y in zip(a, b):
        assert (x.raw_text, x.score, x.parse_status, x.expected_score) == \
            (y.raw_text, y.score, y.parse_status, y.expected_score)
        assert x.parse_status in ("ok", "unparsed")
        assert 1 <= x.completion_tokens <= 3  # " 10" is 3 tokens
    (c,) = engine.score(summary_prompts(rows[:1], ScoreScale(0, 100), temperature=1.0), ScoreScale(0, 100))
    assert c.parse_status in ("ok", "unparsed") and 1 <= c.completion_tokens <= 4
    assert c.score is None or 0 <= c.score <= 100


def test_single_token_scales_keep_the_one_token_reading(engine, rows):
    """1-5: the same numbers, bit for bit, as reading p(k) from the first token alone (the
    reading before multi-token scales), for the same sequence of evaluations."""
    scale = ScoreScale(1, 5)
    ps = summary_prompts(rows[:2], scale) + summary_prompts(rows[:1], scale, clause="Be strict.")
    engine.llm.reset()
    direct = []
    for p in ps:
        tokens = prompt_tokens(engine, p)
        engine._eval(tokens)
        logits = engine._last_logits()
        logp = logits - logits.max()
        logp -= np.log(np.exp(logp).sum())
        ids = [sorted({t[0] for s in (f" {v}", f"{v}")
                       if len(t := engine.llm.tokenize(s.encode(), add_bos=False)) == 1}) for v in scale.values]
        probs = np.array([np.exp(logp[i]).sum() for i in ids])
        values = np.array(scale.values, dtype=float)
        greedy = engine.llm.detokenize([int(np.argmax(logits))]).decode()
        value = float(values[int(np.argmax(probs))])
        direct.append((float((probs * values).sum() / probs.sum()), value,
                       "ok" if scale.parse_score(greedy) == value else "constrained", greedy))
    engine.llm.reset()
    outs = engine.score(ps, scale)
    assert [(o.expected_score, o.score, o.parse_status, o.raw_text) for o in outs] == direct
    assert all(o.completion_tokens == 1 for o in outs)
    assert scale not in engine._tries  # 1-5 never builds a trie
