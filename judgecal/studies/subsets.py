"""Held-out PRISM gains for many unit subsets at once: shared moments, batched solves.

A subset study fits PRISM (baseline coefficient 1) on every subset of a design's units, in
every outer fold, choosing the penalty by inner grouped CV over a grid, exactly as
:class:`judgecal.calibrate.prism.PRISM` inside :func:`judgecal.evaluate.crossfit.crossfit_predict`
does for one design. It never touches rows per fit: for every split (outer fold x inner
fold, and each outer fold's whole training part) the training Gram matrix ``G = Dc'Dc``,
``b = Dc'tc`` (t = y - s0, centred on the training part when there is an intercept) and the
validation moments shifted by the training means are computed once for all columns; a
subset is an index into them. Per subset and split one symmetric eigendecomposition of
``G_SS`` gives the ridge solution for every penalty, w(lam) = V (V'b / (L + lam)), and the
validation error follows from the moments:

    SSE(lam) = sum (tv - tbar)^2 - 2 w'a + w'A w,   a = sum (Dv - Dbar)(tv - tbar), A = sum (Dv - Dbar)(Dv - Dbar)'

with lam = n gamma m and m the mean squared training entry of the subset's columns (PRISM's
relative penalty). Subsets of one size are solved as one batch (numpy's stacked ``eigh``).
Held-out predictions y_hat = s0 + tbar + (D - Dbar) w are ranked within groups (average
ranks, as scipy's Spearman) and compared with Vanilla (s0) group by group.

Work is cut into fixed chunks of subsets (:data:`CHUNK`); the local path and the Ray Tune
path (:mod:`judgecal.studies.tune`) solve the same chunks with the same function, so their
numbers are identical, not merely close.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np
from scipy.stats import rankdata
from sklearn.model_selection import GroupKFold

from judgecal.calibrate.prism import negligible
from judgecal.errors import InputError
from judgecal.evaluate.metrics import rankable

CHUNK = 2048  # subsets solved per batch (and per unit of work a Tune trial takes)
ALL_SUBSETS_UP_TO = 16  # every subset up to 2^16; above, a seeded sample per size


@dataclass
class Split:
    """Moments of one training/validation split over all design columns."""

    n: int  # training rows
    G: np.ndarray  # (p, p) centred training Gram
    b: np.ndarray  # (p,) centred training D't
    q: np.ndarray  # (p,) uncentred training sum of squares per column (for m)
    A: np.ndarray  # (p, p) validation moments, shifted by the training means
    a: np.ndarray  # (p,)
    c0: float  # sum of squared shifted validation t


@dataclass
class Moments:
    """Everything a subset study needs, computed once from the feature table (small: it is
    what a Tune run puts in the object store)."""

    unit_columns: list[list[int]]  # per unit, its design columns
    gammas: np.ndarray
    inner: list[list[Split]]  # [seed x outer fold][inner folds]
    outer: list[Split]  # [seed x outer fold]: the whole training part (A, a, c0 unused)
    test_rows: list[np.ndarray]  # [seed x outer fold]: held-out row indices
    test_D: list[np.ndarray]  # [seed x outer fold]: (D_test - Dbar_train)
    test_base: list[np.ndarray]  # [seed x outer fold]: s0_test + tbar_train
    seeds: list[int]
    n_splits: int
    n_rows: int
    group_index: np.ndarray  # (G, k) row index per group, padded with -1
    target_ranks: np.ndarray  # (G, k) centred average ranks of the target (0 at padding)
    target_norm: np.ndarray  # (G,) norm of the centred target ranks (0: constant target, left out)
    vanilla: np.ndarray  # (G,) Vanilla's within-group Spearman


def _split_moments(D, t, tr, va, fit_intercept: bool) -> Split:
    Dt, tt = D[tr], t[tr]
    mu, tbar = (Dt.mean(0), tt.mean()) if fit_intercept else (np.zeros(D.shape[1]), 0.0)
    Dc, tc = Dt - mu, tt - tbar
    Dv, tv = D[va] - mu, t[va] - tbar
    return Split(len(tr), Dc.T @ Dc, Dc.T @ tc, (Dt**2).sum(0), Dv.T @ Dv, Dv.T @ tv, float(tv @ tv))


def prepare(s0, D, y, groups, unit_columns, gammas, n_splits: int = 5, inner_cv: int = 5, seeds=(0,),
            fit_intercept: bool = True) -> Moments:
    """The moments of every split; folds exactly as ``crossfit_predict`` (outer, shuffled by
    ``seed``) and ``PRISM.fit`` (inner, ``GroupKFold(min(inner_cv, groups))``) draw them."""
    s0, D, y, groups = np.asarray(s0, float), np.asarray(D, float), np.asarray(y, float), np.asarray(groups)
    t = y - s0
    n_groups = len(np.unique(groups))
    if n_groups < n_splits:
        raise InputError("[fit].folds", f"{n_groups} groups is fewer than the {n_splits} cross-fitting folds")
    inner, outer, test_rows, test_D, test_base = [], [], [], [], []
    for seed in seeds:
        folds = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed).split(np.zeros(len(y)), y, groups)
        for tr, te in folds:
            g_tr = groups[tr]
            k = min(inner_cv, len(np.unique(g_tr)))
            inner.append([_split_moments(D, t, tr[a], tr[b], fit_intercept)
                          for a, b in GroupKFold(n_splits=k).split(s0[tr], y[tr], g_tr)])
            whole = _split_moments(D, t, tr, te, fit_intercept)
            outer.append(whole)
            mu, tbar = (D[tr].mean(0), t[tr].mean()) if fit_intercept else (np.zeros(D.shape[1]), 0.0)
            test_rows.append(te)
            test_D.append(D[te] - mu)
            test_base.append(s0[te] + tbar)
    gi, tr_ranks, tr_norm = _group_layout(y, groups)
    m = Moments([list(c) for c in unit_columns], np.asarray(gammas, float), inner, outer, test_rows, test_D,
                test_base, list(seeds), n_splits, len(y), gi, tr_ranks, tr_norm, np.zeros(len(gi)))
    m.vanilla = _spearman(s0[None, :], m)[0]
    return m


def _group_layout(y, groups):
    """Rows of each group (first-seen order, as ``within_group``), padded with -1, and the
    target's centred average ranks per group."""
    order = list(dict.fromkeys(groups.tolist()))
    rows = [np.flatnonzero(groups == g) for g in order]
    k = max(len(r) for r in rows)
    gi = np.full((len(rows), k), -1)
    ranks = np.zeros((len(rows), k))
    for j, r in enumerate(rows):
        gi[j, : len(r)] = r
        if len(r) >= 2 and np.ptp(y[r]) > 0:
            rk = rankdata(y[r])
            ranks[j, : len(r)] = rk - rk.mean()
    return gi, ranks, np.sqrt((ranks**2).sum(1))


def _spearman(pred: np.ndarray, m: Moments) -> np.ndarray:
    """(B, G) within-group Spearman of each row of ``pred`` (B, n) with the target: NaN where
    the target is constant (left out), 0 where the prediction is (no ranking information)."""
    mask = m.group_index >= 0
    vals = np.where(mask, rankable(pred)[:, np.maximum(m.group_index, 0)], np.inf)  # padding ranks last
    rk = rankdata(vals, axis=-1)
    counts = mask.sum(1)
    rk = np.where(mask, rk - (counts[:, None] + 1) / 2, 0.0)
    num = (rk * m.target_ranks).sum(-1)
    norm = np.sqrt((rk**2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(norm > 0, num / (norm * m.target_norm), 0.0)
    return np.where(m.target_norm > 0, rho, np.nan)


def _solve(split: Split, cols: np.ndarray, gammas: np.ndarray):
    """Eigen-solutions of a batch of subsets on one split: (V, L, z) with w(lam) = V (z / (L + lam)),
    and lam per gamma (B, g)."""
    G = split.G[cols[:, :, None], cols[:, None, :]]
    L, V = np.linalg.eigh(G)
    z = (split.b[cols][:, None, :] @ V)[:, 0, :]
    m = split.q[cols].sum(1) / (split.n * cols.shape[1])
    m = np.where(m > 0, m, 1.0)
    lam = split.n * gammas[None, :] * m[:, None]
    return V, np.maximum(L, 0.0), z, lam


def _weights(V, L, z, lam, n: int):
    """(B, g, k) ridge weights for every penalty; 0 along directions PRISM's fit drops
    (:func:`judgecal.calibrate.prism.negligible`: gamma = 0 on a zero or repeated column)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        u = z[:, None, :] / (L[:, None, :] + lam[:, :, None])
    u = np.where(negligible(L, (n, L.shape[-1]))[:, None, :], 0.0, u)
    return u @ V.transpose(0, 2, 1)


def _choose(m: Moments, fold: int, cols: np.ndarray) -> np.ndarray:
    """Per subset, the index of the penalty inner CV chooses (lowest error; ties: the larger)."""
    sse = np.zeros((len(cols), len(m.gammas)))
    for split in m.inner[fold]:
        V, L, z, lam = _solve(split, cols, m.gammas)
        w = _weights(V, L, z, lam, split.n)
        A = split.A[cols[:, :, None], cols[:, None, :]]
        a = split.a[cols]
        sse += split.c0 - 2 * (w @ a[:, :, None])[..., 0] + ((w @ A) * w).sum(-1)
    mse = sse / m.n_rows  # a common scale; only the argmin matters
    best = mse <= mse.min(1, keepdims=True) * (1 + 1e-12)
    g = np.where(best, m.gammas[None, :], -np.inf)
    return np.argmax(g, axis=1)


def subset_columns(m: Moments, subset) -> np.ndarray:
    return np.array([c for u in subset for c in m.unit_columns[u]], int)


def solve_chunk(m: Moments, subsets: list[tuple[int, ...]], fixed_gammas: bool = False) -> dict:
    """Held-out results for ``subsets``: per subset the mean within-group Spearman and the gain
    over Vanilla (both averaged over fold seeds and then groups), each group's gain, and which
    penalty each outer fold chose. ``fixed_gammas``: also the gain at every grid value without
    selection (B, g). Subsets are solved in batches of equal column count (a property has two
    columns, a one-sided unit one)."""
    widths = np.array([len(subset_columns(m, s)) for s in subsets])
    parts = {w: np.flatnonzero(widths == w) for w in np.unique(widths)}
    solved = {w: _solve_width(m, np.array([subset_columns(m, subsets[i]) for i in ix], int), fixed_gammas)
              for w, ix in parts.items()}
    out = {}
    for key in solved[widths[0]]:
        first = solved[widths[0]][key]
        arr = np.zeros((len(subsets), *first.shape[1:]), first.dtype)
        for w, ix in parts.items():
            arr[ix] = solved[w][key]
        out[key] = arr
    return out


def _solve_width(m: Moments, cols: np.ndarray, fixed_gammas: bool) -> dict:
    B, n_seeds = len(cols), len(m.seeds)
    rho = np.zeros((B, len(m.vanilla)))
    fixed = np.zeros((B, len(m.gammas), len(m.vanilla))) if fixed_gammas else None
    chosen = np.zeros((B, len(m.outer)), int)
    for s in range(n_seeds):
        pred = np.zeros((B, m.n_rows))
        pred_fixed = np.zeros((B, len(m.gammas), m.n_rows)) if fixed_gammas else None
        for f in range(m.n_splits):
            fold = s * m.n_splits + f
            pick = _choose(m, fold, cols)
            chosen[:, fold] = pick
            V, L, z, lam = _solve(m.outer[fold], cols, m.gammas)
            w = _weights(V, L, z, lam, m.outer[fold].n)  # (B, g, k)
            full = np.zeros((B, len(m.gammas), m.test_D[fold].shape[1]))  # weights on all columns
            np.put_along_axis(full, np.broadcast_to(cols[:, None, :], w.shape), w, axis=2)
            rows, base = m.test_rows[fold], m.test_base[fold]
            pred[:, rows] = base[None, :] + full[np.arange(B), pick] @ m.test_D[fold].T
            if fixed_gammas:
                pred_fixed[:, :, rows] = base[None, None, :] + full @ m.test_D[fold].T
        rho += _spearman(pred, m) / n_seeds
        if fixed_gammas:
            fixed += _spearman(pred_fixed.reshape(B * len(m.gammas), -1), m).reshape(B, len(m.gammas), -1) / n_seeds
    out = {"spearman": np.nanmean(rho, 1), "gain": np.nanmean(rho - m.vanilla, 1), "chosen": chosen,
           "per_group_gain": rho - m.vanilla}
    if fixed_gammas:
        out["fixed_gain"] = np.nanmean(fixed - m.vanilla, 2)
    return out


def enumerate_subsets(n_units: int, per_size: int = 200, seed: int = 0) -> dict[int, list[tuple[int, ...]]]:
    """Subsets by size: all of them up to 2^16 subsets, else ``per_size`` drawn at random
    (seeded, without repeats) for each size that has more."""
    out = {}
    rng = np.random.default_rng(seed)
    for k in range(1, n_units + 1):
        if n_units <= ALL_SUBSETS_UP_TO or comb(n_units, k) <= per_size:
            out[k] = list(combinations(range(n_units), k))
            continue
        seen = set()
        while len(seen) < per_size:
            seen.add(tuple(sorted(rng.choice(n_units, size=k, replace=False).tolist())))
        out[k] = sorted(seen)
    return out


def chunks(by_size: dict[int, list[tuple[int, ...]]], size: int = CHUNK) -> list[tuple[int, list[tuple[int, ...]]]]:
    """The fixed units of work: (subset size, subsets), every subset in one chunk of its size."""
    return [(k, subs[i: i + size]) for k, subs in by_size.items() for i in range(0, len(subs), size)]


def run_local(m, work: list[tuple[int, list]], progress=None, solve=None) -> list[dict]:
    """Solve every chunk in this process (the default for small grids); ``solve`` defaults to
    :func:`solve_chunk` (any grid of :mod:`judgecal.studies.tune`'s shape runs here too)."""
    solve = solve or solve_chunk
    out = []
    for i, (_, subs) in enumerate(work):
        out.append(solve(m, subs))
        if progress is not None:
            progress(i + 1, len(work))
    return out
