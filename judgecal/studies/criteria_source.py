"""URW with human against generated criteria, on the prompts that have both (``[urw]
compare_criteria``): the same pairs scored once with the prompt's human criteria and once with
criteria the verifier generated for it, by the same calibrated weighters. Accuracy of each and
the paired difference (human - generated), each with the cluster bootstrap over prompts of the
main URW table, so the row says whether writing criteria by hand paid on this set.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from judgecal.evaluate.pairwise import accuracy, difference, pair_outcomes, prompt_clusters
from judgecal.report.sections import Metric, Section

COMPARED = ("Uniform", "URW")


def criteria_source_section(ev: pd.DataFrame, beside: pd.DataFrame, pairs: pd.DataFrame, scores_of,
                            n_resamples: int, seed: int) -> Section:
    """``ev``: the evaluation votes (human criteria where a prompt has them); ``beside``: the
    generated criteria of those prompts; ``scores_of(votes) -> {method: score per response}``."""
    both = set(beside["item_id"])
    human = ev[ev["item_id"].isin(both) & (ev["criterion_source"] == "human")]
    keep = (pairs["item_a"].isin(both) & pairs["item_b"].isin(both)).to_numpy()
    sub = pairs[keep]
    title = "URW with human against generated criteria (prompts that have both)"
    columns = ["method", "human criteria [95% CI]", "generated criteria [95% CI]", "human - generated [95% CI]"]
    if not len(sub):
        return Section("criteria_source", title, columns, [], "no evaluation pair has human criteria", {})
    clusters = prompt_clusters(sub["group_id"])
    by_source = {src: scores_of(v) for src, v in (("human", human), ("generated", beside))}

    def outcomes(src, method):
        s = by_source[src][method]
        return pair_outcomes(s.reindex(sub["item_a"]).to_numpy(), s.reindex(sub["item_b"]).to_numpy(),
                             sub["preferred"].to_numpy())

    rows = []
    for method in COMPARED:
        h, g = outcomes("human", method), outcomes("generated", method)
        rows.append([method, Metric.of(accuracy(h, clusters, n_resamples, seed)),
                     Metric.of(accuracy(g, clusters, n_resamples, seed)),
                     Metric.of(difference(h, g, clusters, n_resamples, seed))])
    n_gen = beside.groupby("item_id").size()
    return Section(
        "criteria_source", title, columns, rows,
        f"{len(sub)} pairs in {len(set(clusters))} prompts; the same calibrated weighters score both; "
        f"{len(human)} human and {len(beside)} generated criterion checks "
        f"(median {float(np.median(n_gen)):g} generated per response); cluster bootstrap over prompts",
        {"pairs": int(len(sub)), "prompts": int(len(set(clusters)))})
