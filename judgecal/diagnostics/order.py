"""Order and format effects (PRISM §B.6): does the judge care where a candidate stands?

Requests of its own (:mod:`judgecal.diagnostics.formats`): every document's candidates in
one prompt, in ``[diagnostics] orders`` orders (as listed, reversed, then random ones, the
same for every document of a size), each given a score; and ``pairs_per_group`` pairs per
document judged pairwise in both orders. Runs, temperature and seeds are the pool's.

Reported, every statistic a mean over documents with a document-bootstrap 95% interval:

* Kendall's τ between a document's scores in reversed orders, against τ between repeats
  (the same order in two runs; all distinct run pairs averaged): order moves the ranking
  beyond noise when the first is lower.
* the first-position shift: a candidate's score when shown first minus its mean over orders.
* the additive share of order-induced variance: of the deviations of each candidate's score
  from its mean over orders, the share an order's common shift of all candidates explains
  (it moves every candidate alike, so it cannot change a ranking); by chance about 1 / the
  candidates per document.
* pairwise: the share of answers picking the first shown, the share of pairs whose winner
  survives swapping, accuracy against people's preference with one order and both averaged.
* uncalibrated agreement (within-document Spearman with the target) of batched scores
  averaged over 1..K orders, beside the study's own one-item-per-prompt baseline.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow.compute as pc
from scipy.stats import kendalltau

from judgecal.diagnostics.base import (
    DiagnosticContext,
    DiagnosticPlan,
    PlanNeeds,
    plan_needs,
    register,
    within_document_spearman,
)
from judgecal.diagnostics.bootstrap import CORRELATION, SHARE, GroupBootstrap
from judgecal.diagnostics.formats import BATCH, PAIR, OrderRenderer, order_plan, parse_batch
from judgecal.probes.bank import BASELINE
from judgecal.report.sections import Section
from judgecal.schemas import PARSE_USABLE

PLAN_NAME = "orders"
# each statistic's range, beyond which a bootstrap-t bound gives way to the percentile interval
RANGES = {"tau_reversed": CORRELATION, "tau_repeat": CORRELATION, "additive": SHARE, "first_chosen": SHARE,
          "consistent": SHARE, "acc_one": SHARE, "acc_both": SHARE}


class Order:
    name = "order"
    title = "Order and format effects"

    def needs(self, cfg) -> PlanNeeds:
        d = cfg.diagnostics
        return PlanNeeds(own_plans=((PLAN_NAME, d.orders, d.pairs_per_group),))

    def plans(self, cfg, items) -> list[DiagnosticPlan]:
        d, p = cfg.diagnostics, cfg.pool
        runs = max(p.runs, plan_needs(cfg).runs)
        table = order_plan(items, cfg.engine.identity, cfg.scale, d.orders, d.pairs_per_group, runs, p.temperature,
                           p.seed, cfg.seed)
        renderer = OrderRenderer(items, cfg.scale)
        rendered = renderer.render(table.to_pylist())
        chars = sum(len(x.system) + len(x.user) + len(x.answer_prefix) for x in rendered)
        is_batch = pc.equal(table["probe_id"], BATCH).to_pylist()
        groups, pairs = len(set(table["group_id"].to_pylist())), (len(is_batch) - sum(is_batch)) // (2 * runs)
        note = f"{groups} documents x {d.orders} orders batched + {pairs} pairs x 2 orders pairwise, x {runs} runs"
        return [DiagnosticPlan(PLAN_NAME, table, renderer, chars, sum(x.max_tokens for x in rendered), note)]

    def run(self, ctx: DiagnosticContext) -> list[Section]:
        cfg = ctx.cfg
        ans = ctx.answered_plan(PLAN_NAME).to_pandas()
        gb = GroupBootstrap(sorted(set(ans["group_id"])), cfg.diagnostics.bootstrap, cfg.seed)
        batch = batch_scores(ans[ans["probe_id"] == BATCH], cfg.scale)
        pair = pair_choices(ans[ans["probe_id"] == PAIR], ctx.reading)
        target = dict(zip(ctx.items["item_id"].to_pylist(), ctx.items["target"].to_pylist()))
        (order, order_why), (pairs, pair_why) = order_stats(batch), pair_stats(pair, target)
        per_doc, why = {**order, **pairs}, {**order_why, **pair_why}
        n_docs = len(gb.ids)

        def row(label: str, key: str, unit: str):
            num, den = (np.array([per_doc[key].get(g, (np.nan, np.nan))[i] for g in gb.ids], float) for i in (0, 1))
            m = gb.ratio_metric(num, den, RANGES.get(key))
            out = [g for g, v in zip(gb.ids, num) if not np.isfinite(v)]  # the documents where it is undefined
            reasons = _reasons({g: why.get(key, {}).get(g, "no answer read") for g in out})
            if not np.isfinite(m.value):  # undefined in every document: say why, not a bare n/a
                return [label, f"n/a, undefined in every document: {reasons}", unit]
            return [label, gb.left_out(m, len(out), f"undefined: {reasons}"), unit]  # n: the documents it averages

        rows = [["parsed share of batched scores", float(batch["value"].notna().mean()) if len(batch) else None,
                 "share of candidate x order x run"],
                row("Kendall τ, reversed order", "tau_reversed", "τ, same run"),
                row("Kendall τ, repeat (same order, another run)", "tau_repeat", "τ, all distinct run pairs"),
                row("first-position shift", "first_shift", "score units"),
                row("additive share of order-induced variance", "additive", f"share (chance ≈ 1/{_mean_size(batch)})"),
                row("pairwise: first shown chosen", "first_chosen", "share (0.5: no position bias)"),
                row("pairwise: same winner in both orders", "consistent", "share of pairs"),
                row("pairwise accuracy, one order", "acc_one", "share of pairs people rank"),
                row("pairwise accuracy, both orders averaged", "acc_both", "share of pairs people rank")]
        repeats = "" if ans["run"].nunique() > 1 else "; τ between repeats needs [pool] runs >= 2"
        note = (f"{n_docs} documents; batched scores parsed from the answer's \"<candidate> k: score\" lines; "
                f"pairwise choice read: {pair_reading(pair, ctx.reading)}; every row a mean over documents, document "
                f"bootstrap, n = documents{repeats}; repeats: {ctx.repeat_mode}")
        group_of = dict(zip(ctx.items["item_id"].to_pylist(), ctx.items["group_id"].to_pylist()))
        agreement = self._agreement(ctx, batch, gb, target, group_of)
        return [Section("order", f"{self.title}: batched and pairwise scoring", ["statistic", "estimate [95% CI]",
                                                                                 "unit"], rows, note,
                        {"orders": cfg.diagnostics.orders, "pairs_per_group": cfg.diagnostics.pairs_per_group}),
                agreement]

    def _agreement(self, ctx, batch: pd.DataFrame, gb: GroupBootstrap, target: dict, group_of: dict) -> Section:
        """Within-document Spearman of batched scores averaged over the first k orders, and the
        study's one-item-per-prompt baseline on the same documents."""
        rows = []
        base = ctx.long[ctx.long["probe_id"] == BASELINE].groupby("item_id")["value"].mean()
        # the table's Vanilla (parsed score), not the expected-score Vanilla its differences are taken
        # against; "the study's baseline" read as that one, and its bounds as another number (a user's finding)
        rows.append(["one item per prompt (the table's Vanilla, parsed score)", 1,
                     within_document_spearman(base, target, group_of, gb)])
        per_order = batch.groupby(["item_id", "order"])["value"].mean().unstack("order")
        for k in range(1, per_order.shape[1] + 1):
            mean_k = per_order.iloc[:, :k].mean(axis=1)  # orders 0..k-1; NaN where none parsed
            label = "batched (all candidates in one prompt), " + ("one order" if k == 1 else f"mean of {k} orders")
            rows.append([label, k, within_document_spearman(mean_k, target, group_of, gb)])
        return Section("order_agreement", "Agreement with people against the number of averaged orders",
                       ["scoring", "orders averaged", "within-document Spearman [95% CI]"], rows,
                       "uncalibrated (the judge's scores as they are); a candidate with no parsed score in the first "
                       "k orders is left out of its document; documents whose target is constant are left out; "
                       "document bootstrap, n = documents, the same resamples for every row (so rows compare), not "
                       "the main table's: its interval of the same mean differs by the resampling's error")



def _mean_size(batch: pd.DataFrame) -> str:
    return f"{batch.groupby('group_id')['item_id'].nunique().mean():.0f}" if len(batch) else "n"


def batch_scores(rows: pd.DataFrame, scale) -> pd.DataFrame:
    """One row per candidate x order x run of the batched requests: its position and parsed value."""
    out = []
    for r in rows.itertuples(index=False):
        shown = list(r.shown)
        usable = r.parse_status in PARSE_USABLE
        values = parse_batch(r.raw_text if usable else None, len(shown), scale)
        for pos, (item, v) in enumerate(zip(shown, values)):
            out.append((r.group_id, item, int(r.order), int(r.run), pos, np.nan if v is None else v))
    return pd.DataFrame(out, columns=["group_id", "item_id", "order", "run", "position", "value"])


def pair_choices(rows: pd.DataFrame, reading: str) -> pd.DataFrame:
    """One row per pairwise answer: the pair, its order, run, and P(the second shown wins)."""
    usable = rows["parse_status"].isin(PARSE_USABLE)
    parsed = (rows["score"] == 2).astype(float).where(usable & rows["score"].notna())
    second = rows["expected_score"].astype(float) - 1 if reading == "expected" else parsed
    read = pd.Series(np.where(second.notna(), reading, None), index=rows.index, dtype=object)
    if reading == "expected":  # an answer without logprobs (a batch API's): its parsed choice
        read = read.where(second.notna(), np.where(parsed.notna(), "parsed", None))
        second = second.where(second.notna(), parsed)
    second = second.where(rows["parse_status"] != "error")
    read = read.where(rows["parse_status"] != "error", None)
    shown = rows["shown"].map(list)
    return pd.DataFrame({"group_id": rows["group_id"].to_numpy(), "pair": rows["item_id"].to_numpy(),
                         "order": rows["order"].to_numpy(), "run": rows["run"].to_numpy(),
                         "first": shown.map(lambda s: s[0]).to_numpy(), "second": shown.map(lambda s: s[1]).to_numpy(),
                         "p_second": second.to_numpy(float), "read": read.to_numpy(object)})


def pair_reading(pair: pd.DataFrame, reading: str) -> str:
    """Which reading the pairwise choices actually got: the expected score (P(second shown)
    from the judge's distribution) where an answer carries one, else the parsed choice."""
    n = len(pair)
    read = pair["read"].value_counts().to_dict() if "read" in pair else {}
    expected, parsed = read.get("expected", 0), read.get("parsed", 0)
    unread = f"; {n - expected - parsed} with no choice read" if n - expected - parsed else ""
    same = "so the two accuracy rows are equal by construction: a split decision scores 1/2 either way"
    if not expected:
        why = ("the expected score was asked for, but no pairwise answer carries one: no logprobs, e.g. a batch "
               "API's answers; " if reading == "expected" and parsed else "")
        return f"the parsed choice, all {parsed} answers read ({why}{same}){unread}"
    if not parsed:
        return f"expected score (P(second shown) from the judge's distribution) for all {expected} answers read{unread}"
    return (f"expected score (P(second shown)) for {expected} answers, the parsed choice for {parsed} that carry no "
            f"expected score (no logprobs){unread}")


def _per_doc(values: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    return {g: (float(np.nansum(v)), float(np.isfinite(v).sum())) for g, v in values.items()}


def order_stats(batch: pd.DataFrame) -> tuple[dict[str, dict], dict[str, dict]]:
    """Per document (numerator, denominator) of each batched statistic, and per document where
    one is undefined, why (the cell says it, not a bare n/a), decided where it is computed."""
    keys = ("tau_reversed", "tau_repeat", "first_shift", "additive")
    stats, why = {k: {} for k in keys}, {k: {} for k in keys}
    for g, doc in batch.groupby("group_id"):
        rev, rep, first, add_num, add_den = [], [], [], 0.0, 0.0
        rev_why, rep_why, add_why = [], [], "fewer than 2 candidates with a parsed score in every order"
        for run, one in doc.groupby("run"):
            m = _grid(one, "order")
            if {0, 1} <= set(m.columns):
                rev.append(_tau(m[0], m[1], "orders", rev_why))
            else:
                rev_why.append("order 0 or 1 unanswered")
            resid = m.sub(m.mean(axis=1), axis=0)
            firsts = one[one["position"] == 0]
            first += [resid.at[i, o] for i, o in zip(firsts["item_id"], firsts["order"])]
            full = resid.dropna()
            if len(full) >= 2 and full.shape[1] >= 2:
                add_num += len(full) * float((full.mean(axis=0) ** 2).sum())
                add_den += float((full**2).to_numpy().sum())
                add_why = "no order-induced variance, every candidate got one score in every order"
        for order, one in doc.groupby("order"):
            m = _grid(one, "run")
            rep += [_tau(m[a], m[b], "runs", rep_why) for a, b in combinations(m.columns, 2)]
        stats["tau_reversed"][g], why["tau_reversed"][g] = _mean(rev), _first(rev_why)
        stats["tau_repeat"][g] = _mean(rep)
        why["tau_repeat"][g] = _first(rep_why) if rep else "one run, τ between repeats needs [pool] runs >= 2"
        stats["first_shift"][g], why["first_shift"][g] = _mean(first), "no first-shown candidate has a parsed score"
        stats["additive"][g], why["additive"][g] = (add_num, add_den) if add_den > 0 else (np.nan, np.nan), add_why
    return stats, why


def _reasons(by_doc: dict[str, str]) -> str:
    """The documents' reasons, commonest first, each with its count: "why (2 documents); why (1 document)"."""
    counts = pd.Series(by_doc, dtype=object).value_counts()
    return "; ".join(f"{why} ({n} document{'s' * (n != 1)})" for why, n in counts.items())


def _first(reasons: list) -> str | None:
    """The first reason a statistic was undefined (None: it was defined in some run)."""
    return next((r for r in reasons if r), None)


def _grid(one: pd.DataFrame, columns: str) -> pd.DataFrame:
    """Values by item x ``columns``, every item and column kept: an order whose batched answer
    did not parse at all is a column of NaN (pivot_table would drop it)."""
    m = one.pivot_table(index="item_id", columns=columns, values="value", aggfunc="first", dropna=False)
    return m.reindex(index=pd.unique(one["item_id"]), columns=sorted(pd.unique(one[columns])))


def _tau(a: pd.Series, b: pd.Series, where: str, why: list) -> float:
    """Kendall's τ of two columns (``where``: what they are, "orders"); where it is undefined,
    NaN and the reason appended to ``why``."""
    ok = a.notna() & b.notna()
    if ok.sum() < 3:
        why.append(f"fewer than 3 candidates with a parsed score in both {where}")
    elif a[ok].nunique() < 2 or b[ok].nunique() < 2:
        why.append(f"no ranking, every candidate got one score in one of the two {where}")
    else:
        return float(kendalltau(a[ok], b[ok]).statistic)
    return np.nan


def _mean(values: list[float]) -> tuple[float, float]:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return (float(v.sum()), float(len(v))) if len(v) else (np.nan, np.nan)


def pair_stats(pair: pd.DataFrame, target: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    """Per document (numerator, denominator) of the pairwise statistics, and where one is
    undefined, why."""
    keys = ("first_chosen", "consistent", "acc_one", "acc_both")
    stats, why = {k: {} for k in keys}, {k: {} for k in keys}
    both_read = "no pair with a choice read in both orders"
    for g, doc in pair.groupby("group_id"):
        first = 1 - doc["p_second"].to_numpy(float)
        stats["first_chosen"][g], why["first_chosen"][g] = _mean(list(first)), "no pairwise choice read"
        same, one, both, ranked = [], [], [], False
        for (_, _), p in doc.groupby(["pair", "run"]):
            ta, tb = target.get(p["first"].iloc[0]), target.get(p["second"].iloc[0])
            people_rank = ta is not None and tb is not None and ta != tb
            ranked |= people_rank
            if set(p["order"]) != {0, 1}:
                continue
            o0, o1 = p[p["order"] == 0].iloc[0], p[p["order"] == 1].iloc[0]
            a = o0["first"]  # a is shown first in order 0, second in order 1
            a0, a1 = 1 - o0["p_second"], o1["p_second"]  # P(a wins) in each order
            same.append(a0 * a1 + (1 - a0) * (1 - a1))
            if not people_rank:
                continue
            want = (lambda pa: pa) if target[a] == max(ta, tb) else (lambda pa: 1 - pa)  # P(the preferred wins)
            one += [_decide(want(a0)), _decide(want(a1))]
            both.append(_decide(want((a0 + a1) / 2)))
        stats["consistent"][g], why["consistent"][g] = _mean(same), both_read
        stats["acc_one"][g], stats["acc_both"][g] = _mean(one), _mean(both)
        why["acc_one"][g] = why["acc_both"][g] = (f"{both_read} that people rank" if ranked else
                                                  "people rank none of its pairs (tied targets)")
    return stats, why


def _decide(p: float) -> float:
    """1 when the preferred candidate is picked, 0.5 on a tie, NaN when unanswered."""
    return np.nan if not np.isfinite(p) else 1.0 if p > 0.5 else 0.5 if p == 0.5 else 0.0


register(Order())
