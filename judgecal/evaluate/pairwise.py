"""Pairwise preference accuracy (a tie counts one half) with cluster-bootstrap intervals over
prompts (pairs that share a prompt are resampled together), the difference from Uniform and
the relative improvement over it, and the empirical check of URW's coverage guarantee on
held-out calibration folds grouped by prompt (criteria are written per prompt and shared word
for word by its responses, so a fold that held out responses only would see its criteria in
calibration)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from judgecal.calibrate.urw import URW, hard_vote
from judgecal.evaluate.metrics import MIN_CLUSTERS, Interval, bootstrap_mean, ratio_interval, ratio_se, value_order

TIE_TOLERANCE = 1e-9  # scores in [0, 1] closer than this are a tie (float noise, never a preference)


def pair_outcomes(score_a, score_b, preferred) -> np.ndarray:
    """1 when the preferred response scores higher, 0.5 on a tie (within TIE_TOLERANCE), 0 otherwise.
    A response without a score (NaN: none of its criteria had a usable vote) cannot be
    ranked, so its pair is a tie."""
    a, b = np.asarray(score_a, float), np.asarray(score_b, float)
    pref_a = np.asarray(preferred) == "a"
    diff = np.where(pref_a, a - b, b - a)
    out = np.where(diff > TIE_TOLERANCE, 1.0, np.where(diff >= -TIE_TOLERANCE, 0.5, 0.0))
    return np.where(np.isnan(diff), 0.5, out)


def prompt_clusters(group_id) -> np.ndarray:
    """The cluster key of each pair: the hash of its prompt text. ``group_id`` is
    ``dataset/sha(prompt)``; dropping the dataset keeps one prompt in two datasets one cluster."""
    return np.array([str(g).rsplit("/", 1)[-1] for g in group_id], dtype=object)


def accuracy(outcomes, clusters=None, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Mean outcome with a studentized bootstrap interval, over prompt clusters when given."""
    return bootstrap_mean(outcomes, n_resamples, seed, clusters=clusters, unit="pairs", bounds=(0.0, 1.0))


def difference(method, uniform, clusters=None, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """acc - acc_uniform on the same pairs (paired), same bootstrap as ``accuracy``."""
    d = np.asarray(method, float) - np.asarray(uniform, float)
    return bootstrap_mean(d, n_resamples, seed, clusters=clusters, unit="pairs", bounds=(-1.0, 1.0))


def relative_improvement(method, uniform) -> float:
    """(acc - acc_uniform) / acc_uniform."""
    u = float(np.mean(uniform))
    return (float(np.mean(method)) - u) / u if u else float("nan")


def relative_improvement_interval(method, uniform, clusters=None, n_resamples: int = 2000,
                                  seed: int = 0) -> Interval:
    """RI = (acc - acc_uniform) / acc_uniform with a 95% cluster-bootstrap interval: whole
    prompts are resampled (the same scheme as ``accuracy``), and the interval is studentized
    (bootstrap-t) with the delta-method SE of the ratio of the two cluster sums, or the
    percentile interval with a note where that cannot be formed (:func:`ratio_interval`). Pairs
    where either outcome is NaN are left out. A degenerate outcome gets a note and NaN bounds."""
    m, un = np.asarray(method, float), np.asarray(uniform, float)
    keep = np.isfinite(m) & np.isfinite(un)
    labels = np.asarray(clusters)[keep] if clusters is not None else np.arange(keep.sum())
    m, un = m[keep], un[keep]
    _, idx = np.unique(labels, return_inverse=True)
    a, u = np.bincount(idx, weights=m), np.bincount(idx, weights=un)
    order = value_order(a, u)  # any row order, any prompt ids: the same resamples
    a, u = a[order], u[order]
    n, n_cl = len(m), (len(a) if clusters is not None else None)

    def degenerate(est, note):
        return Interval(est, float("nan"), float("nan"), n, "pairs", n_cl, note)

    if len(a) < MIN_CLUSTERS:  # prompts (or pairs): no interval holds at fewer (metrics.MIN_CLUSTERS)
        return degenerate(float("nan") if not n else relative_improvement(m, un),
                          f"too few pairs for an interval that holds, n = {n}"
                          + (f" in {len(a)} clusters (needs {MIN_CLUSTERS} clusters)" if clusters is not None
                             else f" (needs {MIN_CLUSTERS})"))
    if u.sum() == 0:
        return degenerate(float("nan"), f"Uniform scores 0 on every pair, n = {n}")
    # RI + 1 = sum(a) / sum(u) over prompts: the cluster ratio that accuracy's interval uses,
    # with Uniform's sums as the denominators
    ratio = float(a.sum() / u.sum())
    ri, se = ratio - 1, float(ratio_se(a, u, ratio))
    if se == 0:
        return degenerate(ri, f"no spread over prompts (method = {ratio:g} x Uniform in each), n = {n}")
    # RI + 1, a ratio of non-negative sums, lies in [0, inf): a bootstrap-t bound below 0 falls back
    low, high, note = ratio_interval(a, u, ratio, se, n_resamples, seed, bounds=(0.0, np.inf))
    return Interval(ri, low - 1, high - 1, n, "pairs", n_cl, note)


def response_folds(groups, folds: int = 5, seed: int = 0) -> tuple[np.ndarray, int]:
    """(fold of each row, folds used). The groups (``groups``: URW's coverage check passes the
    prompt) are shuffled with ``seed`` and dealt round-robin into min(folds, groups) folds, so
    every row of a group lands in one fold."""
    keys, inv = np.unique(np.asarray(groups), return_inverse=True)
    k = min(folds, len(keys))
    fold_of = np.empty(len(keys), dtype=int)
    fold_of[np.random.default_rng(seed).permutation(len(keys))] = np.arange(len(keys)) % max(k, 1)
    return fold_of[inv], k


def held_out_p_values(v_hat, v_true, fold) -> tuple[np.ndarray, np.ndarray]:
    """(p-value of the voted label = the raw URW weight, p-value of the true label) for each
    criterion, from URW fitted on the other folds."""
    v, y, fold = np.asarray(v_hat, float), np.asarray(v_true, float), np.asarray(fold)
    p_vote, p_true = np.empty(len(v)), np.empty(len(v))
    for f in np.unique(fold):
        te = fold == f
        urw = URW().fit(v[~te], y[~te])
        p_vote[te], p_true[te] = urw.raw_weight(v[te]), urw.p_value(y[te], v[te])
    return p_vote, p_true


MIN_VOTES_OF_A_KIND = 4  # fewer correct (or wrong) votes: the AUROC and the mean rest on too few to read


def weight_separation(weight, correct) -> dict:
    """Remark B.3: mean raw weight of correct and of wrong votes (with counts) and the AUROC
    of the weight for correctness (NaN with a note when only one class is present)."""
    w, c = np.asarray(weight, float), np.asarray(correct, bool)

    def side(mask):
        return {"mean_weight": float(w[mask].mean()) if mask.any() else float("nan"), "n": int(mask.sum())}

    one_class = c.all() or not c.any()
    note = f"only {'correct' if c.any() else 'wrong'} votes, n = {len(c)}: no AUROC" if one_class else ""
    auroc = float("nan") if one_class else float(roc_auc_score(c, w))
    fewer = min(int(c.sum()), int((~c).sum()))
    # one wrong vote against 83 correct was read as a separation (a user's finding)
    caveat = f"from {fewer} {'correct' if c.sum() == fewer else 'wrong'} vote{'s' * (fewer != 1)}: too few to read " \
        "as a separation" if not one_class and fewer < MIN_VOTES_OF_A_KIND else ""
    return {"correct": side(c), "wrong": side(~c), "auroc": auroc, "note": note, "caveat": caveat}


def coverage_table(v_hat, v_true, groups=None, alphas=(0.05, 0.1, 0.2, 0.3, 0.5), folds: int = 5,
                   seed: int = 0, responses=None) -> dict:
    """URW's guarantee checked on held-out calibration folds grouped by prompt (``groups``: the
    prompt of each criterion; None: every criterion its own prompt). Every criterion of a prompt,
    over all of its responses, lands in one fold: criteria are written per prompt and repeated
    word for word for each response to it, so folds by response would hold out a criterion
    whose text the calibration folds hold too. ``responses`` (the response of each criterion,
    optional) is only counted. For each alpha:

    * ``theorem``: Theorem 3.1's event, P(vote correct and its raw weight <= alpha);
    * ``validity``: p-value validity, P(p-value of the true label <= alpha).

    Both should be <= alpha; ``theorem`` <= ``validity`` always (a correct vote's weight is
    the true label's p-value). ``weights``: ``weight_separation`` on the same folds."""
    v, y = np.asarray(v_hat, float), np.asarray(v_true, float)
    groups = np.arange(len(v)) if groups is None else np.asarray(groups)
    fold, k = response_folds(groups, folds, seed)
    base = {"folds": k, "fold_groups": "prompt", "prompts": len(np.unique(groups)), "criteria": len(v)}
    if responses is not None:
        base["responses"] = len(np.unique(np.asarray(responses)))
    if k < 2:
        return base | {"rows": [], "weights": None, "note": f"{base['prompts']} prompt(s): nothing to hold out"}
    p_vote, p_true = held_out_p_values(v, y, fold)
    correct = hard_vote(v) == y
    rows = [{"alpha": float(a), "theorem": float(np.mean(correct & (p_vote <= a))),
             "validity": float(np.mean(p_true <= a))} for a in alphas]
    return base | {"rows": rows, "weights": weight_separation(p_vote, correct), "note": ""}
