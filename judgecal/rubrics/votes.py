"""Soft scores per (response, criterion) from answered verify requests (plan ⋈ responses).

Columns of the result: ``v_tmpl`` (mean vote over the active templates at T = 0), ``v_base``
(the base template's vote), ``v_two`` (mean over the first two active templates),
``v_samp`` (mean vote of the T = 0.7 samples), ``n_unparsed``. Unparsed or failed answers are
left out of each mean and counted; a criterion with no usable template vote is dropped and
counted by the caller.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.rubrics.templates import TemplateSet
from judgecal.schemas import PARSE_USABLE


def soft_scores(answered: pa.Table, templates: TemplateSet) -> pd.DataFrame:
    df = answered.select(["item_id", "criterion_id", "template", "temperature", "score", "parse_status"]).to_pandas()
    df["vote"] = df["score"].where(df["parse_status"].isin(PARSE_USABLE))
    greedy, sampled = df[df["temperature"] == 0], df[df["temperature"] > 0]
    key = ["item_id", "criterion_id"]
    base, two = templates.active[0], templates.active[:2]
    out = pd.DataFrame({
        "v_tmpl": greedy.groupby(key)["vote"].mean(),
        "v_base": greedy[greedy["template"] == base].groupby(key)["vote"].mean(),
        "v_two": greedy[greedy["template"].isin(two)].groupby(key)["vote"].mean(),
        "n_unparsed": df.groupby(key)["vote"].apply(lambda s: int(s.isna().sum())),
    })
    samp = sampled.groupby(key)["vote"].mean() if len(sampled) else pd.Series(dtype=float)
    out["v_samp"] = samp.reindex(out.index) if len(samp) else np.nan
    # A base vote that failed falls back to the template mean's rounding; no samples: no signal (0.5).
    out["v_base"] = out["v_base"].fillna((out["v_tmpl"] >= 0.5).astype(float))
    out["v_two"] = out["v_two"].fillna(out["v_tmpl"])
    out["v_samp"] = out["v_samp"].fillna(0.5)
    return out.reset_index()
