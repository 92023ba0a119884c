"""Arrow schemas of the tables that stages exchange. This module is their only owner.

items      one row per evaluated target (a summary, a story, a dialogue turn)
requests   one row per judge call: item x probe x run (keys only, no prompt text)
responses  one row per answered request: keys, raw output, parsed and expected score
features   wide PRISM matrix: ``baseline`` plus ``<attribute>:more`` / ``<attribute>:less``
rubric     URW: one row per response x criterion (the response's text, the criterion, a label if known)
pairs      URW: one row per compared pair of responses (ids into ``rubric``) and which one people prefer
verify     URW request plan: response x criterion x template (x sample); answered into ``responses``
orders     the order diagnostic's plan: several candidates of one document in one prompt, in a
           stated order (batched pointwise, pairwise); answered into ``responses``
rendered   a planned request with its prompt text and sampling parameters, between the render
           and the engine stage (in flight only; prompts are never stored, only their hash)

Human scores sit in the items table as extra float64 columns named ``human.<criterion>``;
``target`` is the study's target (see :class:`judgecal.datasets.TargetSpec`).
"""

from __future__ import annotations

import pyarrow as pa

HUMAN_PREFIX = "human."

ITEMS = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),  # document or prompt
        pa.field("task", pa.string(), nullable=False),  # summary | story | dialogue
        pa.field("source", pa.string(), nullable=False),  # article / prompt / context shown to the judge
        pa.field("content", pa.string(), nullable=False),  # the evaluated text
        pa.field("target", pa.float64(), nullable=False),
    ]
)

REQUESTS = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("probe_id", pa.string(), nullable=False),  # "baseline", "length:more:standard", ...
        pa.field("attribute", pa.string(), nullable=True),  # null for the baseline
        pa.field("direction", pa.string(), nullable=True),  # more | less | neutral | oneside
        pa.field("strength", pa.string(), nullable=True),  # slight | standard | strong
        pa.field("run", pa.int32(), nullable=False),
        pa.field("order", pa.int32(), nullable=False),  # position in batched scoring; 0 = single item
        # property | context | role | focus | stakes | neutral; null for the baseline (plans
        # written before families lack the column: features derive it from direction)
        pa.field("family", pa.string(), nullable=True),
        # Sampling ([pool] temperature; seed = [pool] seed + run, so each run draws its own
        # sample). Plans written before these columns lack them: temperature 0, seed 0.
        pa.field("temperature", pa.float64(), nullable=True),
        pa.field("seed", pa.int64(), nullable=True),
    ]
)

RESPONSES = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("probe_id", pa.string(), nullable=False),
        pa.field("run", pa.int32(), nullable=False),
        pa.field("judge", pa.string(), nullable=False),  # engine identity, e.g. "llamacpp:SmolLM2-..."
        pa.field("prompt_sha", pa.string(), nullable=False),  # sha256 of the rendered prompt
        pa.field("raw_text", pa.string(), nullable=True),
        pa.field("score", pa.float64(), nullable=True),  # parsed score, null when unparsed
        pa.field("parse_status", pa.string(), nullable=False),  # ok | unparsed | error
        pa.field("expected_score", pa.float64(), nullable=True),  # sum_k p(k) k over score tokens
        pa.field("prompt_tokens", pa.int32(), nullable=False),
        pa.field("computed_tokens", pa.int32(), nullable=False),  # prompt tokens not served by a cache
        pa.field("completion_tokens", pa.int32(), nullable=False),
        pa.field("latency_s", pa.float64(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),  # 1 for the first try; a failed request is retried
    ]
)

RUBRIC = pa.schema(
    [
        pa.field("item_id", pa.string(), nullable=False),  # one response to one prompt
        pa.field("group_id", pa.string(), nullable=False),  # the prompt
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("response", pa.string(), nullable=False),
        pa.field("criterion_id", pa.string(), nullable=False),  # unique within the item
        pa.field("criterion", pa.string(), nullable=False),
        pa.field("criterion_source", pa.string(), nullable=False),  # human | generated | fallback
        pa.field("label", pa.int8(), nullable=True),  # 1 met, 0 not met, null unknown
    ]
)

PAIRS = pa.schema(
    [
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),  # e.g. llmbar/Natural
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("item_a", pa.string(), nullable=False),
        pa.field("item_b", pa.string(), nullable=False),
        pa.field("preferred", pa.string(), nullable=False),  # "a" | "b"
    ]
)

VERIFY = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("probe_id", pa.string(), nullable=False),  # "<criterion_id>@t<template>" or "...@s<sample>"
        pa.field("criterion_id", pa.string(), nullable=False),
        pa.field("template", pa.int32(), nullable=False),
        pa.field("run", pa.int32(), nullable=False),  # sample index; 0 for temperature-0 requests
        pa.field("temperature", pa.float64(), nullable=False),
    ]
)

ORDERS = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),  # batch: the group id; pair: "<item a>|<item b>"
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("probe_id", pa.string(), nullable=False),  # "batch" | "pair"
        pa.field("run", pa.int32(), nullable=False),
        pa.field("order", pa.int32(), nullable=False),  # batch: which permutation; pair: 0 = a first, 1 = b first
        pa.field("shown", pa.list_(pa.string()), nullable=False),  # item ids as the prompt shows them
        pa.field("temperature", pa.float64(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
    ]
)

# Rendered requests: what the render stage hands the engine stage (never stored).
RENDERED = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("probe_id", pa.string(), nullable=False),
        pa.field("run", pa.int32(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("mode", pa.string(), nullable=False),  # score | generate
        pa.field("scale_lo", pa.int32(), nullable=False),
        pa.field("scale_hi", pa.int32(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        # Dictionary-encoded: every run of a probe on an item shares one prompt text, held once.
        pa.field("user", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("answer_prefix", pa.string(), nullable=False),
        pa.field("temperature", pa.float64(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("max_tokens", pa.int32(), nullable=False),
        pa.field("prompt_sha", pa.string(), nullable=False),
        pa.field("meta", pa.string(), nullable=True),  # JSON of request keys, for simulated judges only
    ]
)

# The one vocabulary of parse statuses. ok: the judge's own answer parsed; constrained: the
# value was read from the distribution over the allowed answers (the greedy token was not one);
# unparsed: the judge answered but no allowed value could be read; error: no answer (retried);
# out_of_scale: a score outside the request's scale, refused at commit (its score is left
# empty, the judge's text kept; counted, not retried; the parsed reading never fits it, the
# expected reading fits the expected score of its distribution where it has one).
PARSE_OK, PARSE_CONSTRAINED, PARSE_UNPARSED, PARSE_ERROR = "ok", "constrained", "unparsed", "error"
PARSE_OUT_OF_SCALE = "out_of_scale"
# answers with no usable score, each its own count in the results log (judgecal.scale.ScoreScale.read)
PARSE_REFUSAL, PARSE_SEVERAL, PARSE_EMPTY, PARSE_NON_UTF8 = "refusal", "several_numbers", "empty", "non_utf8"
PARSE_STATUSES = (PARSE_OK, PARSE_CONSTRAINED, PARSE_UNPARSED, PARSE_ERROR, PARSE_OUT_OF_SCALE, PARSE_REFUSAL,
                  PARSE_SEVERAL, PARSE_EMPTY, PARSE_NON_UTF8)
PARSE_USABLE = (PARSE_OK, PARSE_CONSTRAINED)


def empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


def conform(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """Select and cast ``table`` to ``schema``'s columns (extra columns kept at the end)."""
    from judgecal.errors import InputError

    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise InputError(where, f"missing column(s) {', '.join(missing)}")
    cols, fields = [], []
    for f in schema:
        cols.append(table[f.name].cast(f.type))
        fields.append(f)
    for name in table.column_names:
        if name not in schema.names:
            cols.append(table[name])
            fields.append(table.schema.field(name))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))
