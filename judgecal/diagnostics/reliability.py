"""Probe reliability (PRISM §B.2-B.4, B.7): do probes move the judge more than a neutral
sentence, and more than asking the same question again?

Units: a probe response is Δ = score under the probe - the item's baseline score in the same
run. Per unit (a property over its directions and strengths, a one-sided unit) its RMS, the
ratio to the neutral clauses' RMS and to the repeat RMS (how much the same Δ moves between
runs: the RMS of (Δ_r - Δ_r')/√2 over distinct run pairs, pooled over probes). Reproducible
RMS and across-run correlation come from products Δ_r·Δ_r' over all distinct run pairs,
averaged (pairs are not independent draws; only documents are resampled). Shared and
directional components per wording strength: (Δ_more ± Δ_less)/2. Joint instructions (two
properties in one probe) against the sum of their single responses: the interaction RMS.
Every interval is a 95% bootstrap-t over documents (:mod:`judgecal.diagnostics.bootstrap`), n = documents.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from judgecal.diagnostics.base import DiagnosticContext, PlanNeeds, register
from judgecal.diagnostics.bootstrap import CORRELATION, NONNEGATIVE, SHARE, GroupBootstrap, divide
from judgecal.probes.bank import BASELINE, JOINT, NEUTRAL, NOT_FEATURE_FAMILIES, PROPERTY
from judgecal.report.sections import Section


def _unit(df: pd.DataFrame) -> pd.Series:
    return df["attribute"].where(df["family"] == PROPERTY, df["probe_id"])


def _run_pairs(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per (item, probe) and distinct run pair: the half squared difference and the product of ``column``."""
    wide = df.pivot_table(index=["group_id", "item_id", "probe_id"], columns="run", values=column, aggfunc="mean")
    parts = []
    for r, s in combinations(wide.columns, 2):
        a, b = wide[r].to_numpy(), wide[s].to_numpy()
        parts.append(pd.DataFrame({"group_id": wide.index.get_level_values(0), "probe_id": wide.index.get_level_values(2),
                                   "half_sq": (a - b) ** 2 / 2, "prod": a * b, "sq": (a**2 + b**2) / 2}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["group_id", "probe_id", "half_sq", "prod", "sq"])


class Reliability:
    name = "reliability"
    title = "Probe reliability"

    def needs(self, cfg) -> PlanNeeds:
        return PlanNeeds(runs=2, neutral=True, joint_pairs=cfg.diagnostics.joint_pairs)

    def run(self, ctx: DiagnosticContext) -> list[Section]:
        df = ctx.long
        gb = GroupBootstrap(df["group_id"], ctx.cfg.diagnostics.bootstrap, ctx.cfg.seed)
        gix = lambda groups: np.searchsorted(gb.ids, np.asarray(groups).astype(str))  # noqa: E731
        probes = df[(df["probe_id"] != BASELINE) & df["delta"].notna()].copy()
        probes["unit"] = _unit(probes)

        def ms(rows, column="delta", square=True):
            v = rows[column].to_numpy(float)
            return divide(gb.sums(gix(rows["group_id"]), v**2 if square else v),
                          gb.sums(gix(rows["group_id"]), np.isfinite(v).astype(float)))

        neutral = ms(probes[probes["family"] == NEUTRAL])
        pairs = _run_pairs(probes, "delta")
        pairs["unit"] = pairs["probe_id"].map(dict(zip(probes["probe_id"], probes["unit"])))
        pairs["family"] = pairs["probe_id"].map(dict(zip(probes["probe_id"], probes["family"])))
        fitted = pairs[~pairs["family"].isin(NOT_FEATURE_FAMILIES)]  # the units a study fits: properties, one-sided
        repeat = ms(fitted, "half_sq", square=False) if len(pairs) else None
        score_repeat = _run_pairs(df[df["value"].notna()], "value")

        metric = gb.metric

        def row(label, family, rows, prs):
            m = ms(rows)
            if repeat is None:
                to_repeat = None  # one run: no repeats
            elif repeat[0] == 0:
                to_repeat = "no repeat variation (the reading is the same in every run)"
            else:
                to_repeat = metric(np.sqrt(divide(m, repeat)), "no repeat variation in the documents drawn", NONNEGATIVE)
            if not np.isfinite(neutral[0]):
                to_neutral = None  # no neutral clauses answered
            elif neutral[0] == 0:
                to_neutral = "no neutral variation (neutral clauses never move this reading)"
            else:
                to_neutral = metric(np.sqrt(divide(m, neutral)), "no neutral variation in the documents drawn", NONNEGATIVE)
            cells = [label, family, float(np.sqrt(m[0])), to_neutral, to_repeat]
            if len(prs):
                prod, sq = ms(prs, "prod", square=False), ms(prs, "sq", square=False)
                # a negative product has no root: said, not printed +0.000 (a user's finding)
                cells += [float(np.sqrt(prod[0])) if prod[0] >= 0 else
                          "none (mean Δ_r·Δ_r' < 0: nothing reproducible across runs)",
                          "undefined: the probe never moves this reading (every Δ is 0)" if sq[0] == 0 else
                          metric(divide(prod, sq), "every Δ 0 in the documents drawn", CORRELATION)]
            else:
                cells += [None, None]
            return cells

        units = probes[~probes["family"].isin(NOT_FEATURE_FAMILIES)]
        rows = [row(u, fam, units[units["unit"] == u], fitted[fitted["unit"] == u])
                for u, fam in units.drop_duplicates("unit")[["unit", "family"]].itertuples(index=False)]
        rows.append(row("all probes (pooled)", "", units, fitted))
        ref = [["neutral clauses (reference)", NEUTRAL, float(np.sqrt(neutral[0])), None, None, None, None]]
        if len(score_repeat):
            ref.append(["repeat: the same prompt's score", "", float(np.sqrt(ms(score_repeat, "half_sq", False)[0])),
                        None, None, None, None])
            ref.append(["repeat: the same probe response", "", float(np.sqrt(repeat[0])), None, None, None, None])
        runs = int(df["run"].nunique())
        out = [Section(
            "reliability", f"{self.title}: probe responses against neutral clauses and repeats",
            ["unit", "family", "probe RMS", "probe / neutral RMS [95% CI]", "probe / repeat RMS [95% CI]",
             "reproducible RMS", "across-run correlation [95% CI]"], rows + ref,
            f"reading: {ctx.reading} score; runs: {runs}, {ctx.repeat_mode}; probe response = probe score - "
            f"baseline in the same run; repeat RMS over distinct run pairs /√2, pooled over probes; across-run "
            f"correlation = mean Δ_r·Δ_r' / mean Δ² over all distinct run pairs; document bootstrap, n = documents"
            + (f"; each run's own responses, where the fit and screening read a cell's mean over the {runs} runs "
               "(which lowers what differs from run to run, so their neutral RMS may be smaller)" if runs > 1 else ""),
            {"runs": runs, "reading": ctx.reading, "repeat_mode": ctx.repeat_mode})]
        out.append(self._components(probes, ms, metric, ctx.cfg.scale.span))
        joint = self._joint(probes, ms, metric, neutral)
        if joint is not None:
            out.append(joint)
        return out

    @staticmethod
    def _components(probes, ms, metric, span: float) -> Section:
        """``span``: the judge scale's (no score change is larger: the RMS intervals end there)."""
        prop = probes[probes["family"] == PROPERTY]
        wide = prop.pivot_table(index=["group_id", "item_id", "run", "attribute", "strength"], columns="direction",
                                values="delta", aggfunc="mean").dropna(subset=[c for c in ("more", "less")
                                                                               if c in prop["direction"].unique()])
        rows = []
        if {"more", "less"} <= set(wide.columns):
            wide = wide.reset_index()
            wide["shared"] = (wide["more"] + wide["less"]) / 2
            wide["directional"] = (wide["more"] - wide["less"]) / 2
            for strength in dict.fromkeys(wide["strength"]):
                w = wide[wide["strength"] == strength]
                shared, directional = ms(w, "shared"), ms(w, "directional")
                total = shared + directional
                rows.append([strength, metric(np.sqrt(shared), bounds=NONNEGATIVE, cap=span),
                             metric(np.sqrt(directional), bounds=NONNEGATIVE, cap=span),
                             "undefined: more and less never move this reading (every Δ is 0)" if total[0] == 0 else
                             metric(divide(directional, total), "every Δ 0 in the documents drawn", SHARE)])
        return Section("probe_components", "Shared and directional components of property probes, by wording strength",
                       ["strength", "shared RMS (same sign for more and less)", "directional RMS",
                        "directional share of the mean square"], rows,
                       "shared = (Δ_more + Δ_less)/2 moves the score whatever the instruction asks; directional = "
                       "(Δ_more - Δ_less)/2 follows it; document bootstrap, n = documents")

    @staticmethod
    def _joint(probes, ms, metric, neutral) -> Section | None:
        joint = probes[probes["family"] == JOINT]
        if joint.empty:
            return None
        single = probes[(probes["family"] == PROPERTY) & (probes["direction"] == "more")].set_index(
            ["item_id", "run", "attribute", "strength"])["delta"]
        single = single[~single.index.duplicated()]
        parts = joint["probe_id"].str.extract(r"^joint:(?P<a>[^+]+)\+(?P<b>[^:]+):(?P<s>.+)$")
        joint = joint.assign(pair=parts["a"] + " + " + parts["b"],
                             sum_single=single.reindex(pd.MultiIndex.from_arrays(
                                 [joint["item_id"], joint["run"], parts["a"], parts["s"]])).to_numpy()
                             + single.reindex(pd.MultiIndex.from_arrays(
                                 [joint["item_id"], joint["run"], parts["b"], parts["s"]])).to_numpy())
        joint = joint[joint["sum_single"].notna()]
        joint["interaction"] = joint["delta"] - joint["sum_single"]
        rows = []
        for label, rows_ in [*joint.groupby("pair", sort=False), ("all pairs (pooled)", joint)]:
            j, i = ms(rows_), ms(rows_, "interaction")
            rows.append([label, float(np.sqrt(j[0])), float(np.sqrt(ms(rows_, "sum_single")[0])), metric(np.sqrt(i), bounds=NONNEGATIVE),
                         "undefined: the joint probes never move this reading (joint RMS 0)" if j[0] == 0 else
                         metric(np.sqrt(divide(i, j)), "joint RMS 0 in the documents drawn", NONNEGATIVE)])
        data = {}
        if np.isfinite(neutral[0]):
            # interaction = s_joint - s_a - s_b + s_0: four prompts' own rewording noise, twice the
            # variance of a neutral response (s_n - s_0, two prompts). So with responses that add up
            # it is about sqrt(2) x the neutral RMS, not 0
            data["additive_reference"] = float(np.sqrt(2 * neutral[0]))
            rows.append(["additive reference: √2 × neutral RMS", None, None, data["additive_reference"], None])
        return Section("joint_probes", "Joint instructions against the sum of their single responses",
                       ["pair", "joint RMS", "sum of singles RMS", "interaction RMS [95% CI]",
                        "interaction / joint RMS [95% CI]"], rows,
                       "interaction = Δ(more a and more b in one probe) - Δ(more a) - Δ(more b), same item and run; "
                       "= s_joint - s_a - s_b + s_0, so with additive responses it is the rewording noise of four "
                       "prompts, about √2 × the neutral RMS (last row; √3 × if the baseline prompt's own score carried no "
                       "rewording noise, a bound of the same model): above it, the instructions interact; document "
                       "bootstrap, n = documents", data)


register(Reliability())
