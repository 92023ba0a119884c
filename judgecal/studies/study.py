"""The study sections of a PRISM evaluation: screening, confirmation, subset curve, penalty
sensitivity and correction profiles, from one feature table and one design.

Protocol (the PRISM paper's, made explicit):

* The groups are split once, seeded by ``[study] seed``, into **exploration** and
  **confirmation** (``[design].confirmation`` of them; the split is recorded in the log).
* Screening, the cross-fitted table, the subset curve, the penalty sensitivity and the
  profiles use the exploration groups only; a unit is kept when it passes screening.
* The **confirmation** table fits each method once on all exploration groups (penalty chosen
  by inner grouped CV there) and scores it on the confirmation groups. Its intervals are
  paired bootstraps over confirmation groups that condition on the fitted predictor (PRISM
  §A.5): they say how the fixed correction would fare on other documents like these, not
  how a refit would vary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from judgecal.calibrate.features import FeatureTable
from judgecal.calibrate.prism import PRISM, _split_columns
from judgecal.errors import InputError
from judgecal.evaluate.crossfit import crossfit_predict
from judgecal.evaluate.metrics import bootstrap_mean, paired_difference, within_group
from judgecal.report.sections import Metric, Section, penalty_text
from judgecal.studies.design import Design, split_groups, unit_of
from judgecal.studies.screening import FALSE_PASS_RATE, MIN_GROUPS, check_screen_groups, screen_units
from judgecal.studies.subsets import chunks, enumerate_subsets, prepare, solve_chunk

SUBSET_SEED_OFFSET = 1  # subset samples draw from seed + 1, so they never share the split's stream


@dataclass
class Selection:
    """The design's columns after screening, with the split they were chosen on."""

    columns: list[str]  # the columns fitted (passing units only, when screening)
    design_columns: list[str]  # every column of the design
    explore: np.ndarray  # group ids
    confirm: np.ndarray
    screening: Section | None = None

    @property
    def groups_word(self) -> str:
        """What the notes call the groups they average: "exploration groups" only when some are held out."""
        return "exploration groups" if len(self.confirm) else "groups"


def units_of(columns: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in columns:
        out.setdefault(unit_of(c), []).append(c)
    return out


def select(feats: FeatureTable, design: Design, seed: int, screen_bootstrap: int = 2000,
           rule: str = "lower_bound", threshold: float = 1.0, scale_note: str = "") -> Selection:
    """The design's columns, screened on the exploration groups when the design screens.
    ``scale_note``: what the features' score changes are measured in, when not the judge's own
    scale (features read onto the target's), for the section's note."""
    cols = design.columns(feats)
    if not cols:
        raise InputError("[design]", "selects no column of the collected features")
    explore, confirm = split_groups(feats.frame["group_id"], design.confirmation, seed)
    if not design.screen:
        return Selection(cols, cols, explore, confirm)
    if not feats.controls:
        raise InputError("[design].screen", "the collected features hold no neutral controls")
    check_screen_groups(len(explore))
    frame = feats.frame[feats.frame["group_id"].astype(str).isin(explore)]
    units = units_of(cols)
    res = screen_units(frame, units, feats.controls, rule, threshold, screen_bootstrap, seed)
    keep = {u for u, ok in zip(res.units, res.passed) if ok}
    order = np.argsort(-res.ratio)
    rows = [[u, len(units[u]), Metric(float(res.ratio[j]), float(res.low[j]), float(res.high[j]), res.groups),
             # text: a share has no sign to print (the numbers are in the section's data)
             "-" if np.isnan(res.within_share[j]) else f"{res.within_share[j]:.2f}", bool(res.passed[j])]
            for j in order for u in [res.units[j]]]
    chance = FALSE_PASS_RATE * len(res.units)
    section = Section(
        "screening", "Screening against neutral controls (exploration groups)",
        ["unit", "columns", "RMS ratio to neutral [95% CI]", "share within groups", "passes"], rows,
        ("the neutral clauses never moved the score (ratios are infinite for every unit that does); "
         if res.control_rms == 0 else "") +
        f"{int(res.passed.sum())} of {len(res.units)} unit{'s' if len(res.units) != 1 else ''} pass ({rule.replace('_', ' ')} > {threshold:g}); "
        f"RMS of the neutral clauses' score changes: {res.control_rms:.4f}{f' ({scale_note})' if scale_note else ''} over "
        f"{len(feats.controls)} clauses; score changes as fitted (a cell: its mean over the study's runs); "
        f"intervals: document bootstrap ({screen_bootstrap} resamples) over n = {res.groups} exploration groups, "
        f"{res.items} items; "
        + (f"a unit no different from the controls passed this rule in about {FALSE_PASS_RATE:.0%} of simulated "
           f"draws at {MIN_GROUPS}-14 groups (3.3-5.2%; nominal 2.5%): of {len(res.units)} such units about "
           f"{chance:.1f} would pass; " if rule == "lower_bound" and threshold == 1 else "")
        + "share within groups: the part of a unit's mean square that "
        "varies within its groups, what a correction ranked within groups can use (near 0: the unit shifts all "
        "of a group's scores alike, and may pass on that shift alone)",
        {"ratio": dict(zip(res.units, res.ratio.tolist())), "passed": sorted(keep), "groups": res.groups,
         "control_rms": res.control_rms, "rule": rule, "threshold": threshold,
         "within_share": dict(zip(res.units, res.within_share.tolist()))})
    kept = [c for c in cols if unit_of(c) in keep]
    return Selection(kept, cols, explore, confirm, section)


def _rows(frame, groups) -> np.ndarray:
    return frame["group_id"].astype(str).isin(groups).to_numpy()


def confirmation_section(feats: FeatureTable, sel: Selection, fc, seed: int, estimators: dict,
                         baselines: dict) -> Section:
    """Each estimator fitted once on the exploration groups and scored on the confirmation
    groups; ``baselines`` ({name: f(frame) -> prediction}) are scored there unfitted."""
    f = feats.frame
    tr, te = _rows(f, sel.explore), _rows(f, sel.confirm)
    y, g = f["target"].to_numpy(float), f["group_id"].to_numpy()
    vanilla = within_group(f["baseline"].to_numpy(float)[te], y[te], g[te])

    def interval(sp):
        return Metric.of(bootstrap_mean(sp.values, fc.bootstrap, seed, bounds=(-1, 1)))

    rows = [["Vanilla", interval(vanilla), None, "-"]]
    for name, fn in baselines.items():
        sp = within_group(fn(f[te]), y[te], g[te])
        rows.append([name, interval(sp), Metric.of(paired_difference(sp, vanilla, fc.bootstrap, seed)), "no fit"])
    for name, est in estimators.items():
        fitted = clone(est).fit(f[tr], y[tr], g[tr])
        sp = within_group(fitted.predict(f[te]), y[te], g[te])
        cols = len(getattr(est, "columns", ())) - 1
        rows.append([name, interval(sp), Metric.of(paired_difference(sp, vanilla, fc.bootstrap, seed)),
                     f"{cols} columns, gamma {penalty_text(fitted.gamma_)}"])
    if not sel.columns:
        rows.append(["PRISM", None, None, "no unit passed screening: nothing to fit"])
    return Section(
        "confirmation", "Confirmation: fitted on the exploration groups, scored on held-out groups",
        ["method", "Spearman [95% CI]", "diff vs Vanilla [95% CI]", "fit"], rows,
        f"{len(sel.confirm)} confirmation groups ({int(te.sum())} items{_tied(vanilla)}) never seen by screening, "
        f"fitting or penalty selection ({len(sel.explore)} exploration groups, {int(tr.sum())} items); intervals: "
        "studentized bootstrap over confirmation groups, conditional on the fitted predictor; n: groups",
        {"confirmation_groups": sel.confirm.tolist(), "exploration_groups": sel.explore.tolist()})


def _tied(vanilla) -> str:
    """Why a confirmation interval may have fewer groups than the table holds: a group whose
    labels are all equal, or that holds one item (its others dropped), has no within-group
    correlation (a user's finding: "n = 0" beside "4 confirmation groups", without a word)."""
    return f"; {vanilla.left_out} of them with all labels equal or one item, so no within-group correlation" \
        if vanilla.left_out else ""


def subset_sections(feats: FeatureTable, sel: Selection, fc, seed: int, per_size: int,
                    runner=None) -> list[Section]:
    """The subset curve (median and interquartile band of the held-out gain per size), the
    gain after each single-unit omission, and the gain on the fixed penalty grid."""
    f = feats.frame[_rows(feats.frame, sel.explore)]
    if fc.representation == "taylor":
        return [Section("subsets", "Subset curve", [], [], "not computed: taylor is not a linear ridge "
                        "(use paired, half or quadratic)")]
    units = units_of(sel.columns)
    names = list(units)
    if not names:  # the sections vanished without a word (a user's finding)
        return [Section("subsets", "Subset curve", [], [], "not computed: no unit passed screening (the subset "
                        "curve, single-unit omissions and penalty sensitivity need at least one)")]
    s0, D, design_names = _split_columns(f[["baseline", *sel.columns]], fc.representation)
    unit_cols = [[j for j, n in enumerate(design_names) if unit_of(n.removesuffix("^2").replace(":half", ":more"))
                  == u] for u in names]
    m = prepare(s0, D, f["target"].to_numpy(float), f["group_id"].to_numpy(), unit_cols, fc.gammas, fc.folds,
                fc.inner_folds, seeds=(seed,), fit_intercept=fc.fit_intercept)
    by_size = enumerate_subsets(len(names), per_size, seed + SUBSET_SEED_OFFSET)
    work = chunks(by_size)
    results = runner(m, work) if runner is not None else [solve_chunk(m, subs) for _, subs in work]
    gains: dict[int, list[float]] = {}
    for (k, _), r in zip(work, results):
        gains.setdefault(k, []).extend(r["gain"].tolist())
    sampled = len(names) > 16
    curve = [[k, len(v), float(np.median(v)), float(np.percentile(v, 25)), float(np.percentile(v, 75)),
              float(np.min(v)), float(np.max(v))] for k, v in sorted(gains.items())]
    full = solve_chunk(m, [tuple(range(len(names)))], fixed_gammas=True)
    n_groups = int(np.isfinite(full["per_group_gain"][0]).sum())
    omit = solve_chunk(m, [tuple(j for j in range(len(names)) if j != i) for i in range(len(names))]) \
        if len(names) > 1 else None
    how = (f"a seeded random sample of up to {per_size} subsets per size (seed {seed + SUBSET_SEED_OFFSET})"
           if sampled else "every subset")
    sections = [Section(
        "subsets", f"Subset curve: held-out gain over Vanilla by number of units ({len(names)} unit{'s' if len(names) != 1 else ''})",
        ["units", "subsets", "median gain", "25%", "75%", "min", "max"], curve,
        f"{how}; units: {'those screening kept on these same groups (gains lean optimistic)' if sel.screening else 'the design'}; "
        f"gain: mean over n = {n_groups} {sel.groups_word} of the within-group Spearman difference, "
        f"{fc.folds}-fold cross-fitting by group (one fold assignment, seed {seed}), gamma chosen by inner grouped "
        "CV in every outer fold for every subset",
        {"gains_by_size": {str(k): v for k, v in gains.items()}, "units": names})]
    if omit is not None:
        rows = sorted(([u, float(omit["gain"][i]), float(omit["gain"][i] - full["gain"][0])]
                       for i, u in enumerate(names)), key=lambda r: r[2])
        sections.append(Section(
            "omission", "Single-unit omission: gain without each unit",
            ["omitted unit", "gain", "change vs all units"], rows,
            f"all {len(names)} units: gain {full['gain'][0]:+.3f}; same folds and protocol as the subset curve",
            {"all_units_gain": float(full["gain"][0])}))
    # at the grid's top the correction is next to none, yet it orders items Vanilla ties within a
    # group, so a gain can stay there (a user read it against the README's "0 from 316 up")
    tied = tied_baselines(f)
    sections.append(Section(
        "penalty", "Penalty sensitivity: gain at each fixed gamma (no selection), all units",
        ["gamma", "gain"], [[penalty_text(g), float(v)] for g, v in zip(m.gammas, full["fixed_gain"][0])],
        f"with gamma chosen by inner CV: {full['gain'][0]:+.3f}; n = {n_groups} {sel.groups_word}"
        + (f"; {tied} items tie another's Vanilla score in their group: even a correction next to none (the "
           "strongest penalty) orders them, so a gain there need not be 0" if tied else ""),
        {"gammas": m.gammas.tolist(), "gain": full["fixed_gain"][0].tolist(), "selected_gain": float(full["gain"][0])}))
    return sections


def tied_baselines(frame) -> int:
    """Items whose Vanilla score equals another's where they are ranked (their group; all items
    when every group holds one): orders Vanilla cannot give and any correction can (a simulated
    judge flooring short answers at the scale's end made a gain of mostly that ordering: a user's
    finding)."""
    from judgecal.evaluate.prism_eval import one_item_per_group

    frame = averaged_items(frame)
    pooled = one_item_per_group(frame["group_id"].to_numpy())
    ranked = [frame["baseline"]] if pooled else [b for _, b in frame.groupby("group_id")["baseline"]]
    return int(sum(c for b in ranked for c in b.value_counts() if c > 1))


def one_baseline(frame) -> float | None:
    """The one Vanilla score every averaged item has, if so: a judge pinned at its scale's end
    (a simulated one flooring short summaries at 1) ranks nothing, and the table's gains are
    any ordering at all (said only as "60 of 60 ties" before: a user's finding)."""
    values = averaged_items(frame)["baseline"].dropna().unique()
    return float(values[0]) if len(values) == 1 else None


def averaged_items(frame):
    """The items of the groups a within-group table averages: those whose target varies (all
    items when every group holds one). Ties counted in left-out groups were said "of" all items
    beside a table of fewer groups (a user's finding)."""
    from judgecal.evaluate.prism_eval import one_item_per_group

    if "target" not in frame or one_item_per_group(frame["group_id"].to_numpy()):
        return frame
    return frame[frame.groupby("group_id")["target"].transform("nunique") > 1]


def profile_section(feats: FeatureTable, sel: Selection, fc, seed: int) -> Section | None:
    """Normalised PRISM coefficients per column over the outer folds (exploration groups):
    each column's correction per standard deviation of its score change, -beta_j sd_j, divided
    by the fold's sum of |beta_k sd_k|, so profiles of judges on other scales compare."""
    if not sel.columns or fc.representation not in ("paired", "half"):
        return None
    f = feats.frame[_rows(feats.frame, sel.explore)]
    X, y, g = f[["baseline", *sel.columns]], f["target"].to_numpy(float), f["group_id"].to_numpy()
    _, fitted = crossfit_predict(lambda: PRISM(gammas=fc.gammas, representation=fc.representation,
                                               cv=fc.inner_folds, fit_intercept=fc.fit_intercept),
                                 X, y, g, fc.folds, seed=seed)
    _, D, names = _split_columns(X, fc.representation)
    sd = D.std(0)
    prof = np.array([-e.coef_ * sd for e in fitted])
    total = np.abs(prof).sum(1, keepdims=True)
    prof = np.divide(prof, total, out=np.zeros_like(prof), where=total > 0)
    mean = prof.mean(0)
    held = signs_held(prof)
    order = np.argsort(-np.abs(mean))
    rows = [[names[j], float(mean[j]), float(prof[:, j].min()), float(prof[:, j].max()),
             sign_held_text(held[j], len(fitted))] for j in order]
    return Section(
        "profile", "Correction profile: normalised coefficients over the outer folds",
        ["column", "mean", "min", "max", "sign held"], rows,
        f"-beta_j x sd_j / sum_k |beta_k x sd_k| per outer fold ({fc.folds} folds, seed {seed}, {sel.groups_word}); "
        "positive: the correction raises the score of texts whose score rises under this probe",
        {"columns": names, "mean": mean.tolist(), "min": prof.min(0).tolist(), "max": prof.max(0).tolist(),
         "sign_held": held, "folds": len(fitted)})


def signs_held(prof: np.ndarray) -> list[int | None]:
    """Per column of ``prof`` (folds x columns), in how many folds its share has the sign of its
    mean; None for a column the correction never uses (0 in every fold: constant over the items,
    sd 0), whose sign(0) == sign(0) read "+0.000 (5/5)", held in every fold (a second reader's finding)."""
    mean = prof.mean(0)
    return [None if np.all(np.abs(prof[:, j]) < 1e-12) else int((np.sign(prof[:, j]) == np.sign(mean[j])).sum())
            for j in range(prof.shape[1])]


def sign_held_text(held: int | None, folds: int) -> str:
    """In how many folds a column's share kept the mean's sign; None: 0 in every fold."""
    return "none: 0 in every fold" if held is None else f"{held}/{folds}"
