"""PRISM and alpha-PRISM: ridge corrections of a judge's baseline score from probe deltas.

PRISM minimises, with an unpenalised intercept c,

    (1/n) sum_i (s0_i - y_i - c - D_i . beta)^2 + gamma * m * ||beta||^2,   y_hat = s0 - c - D . beta

where D is the design built from the probe deltas (see ``representation``) and m is the
mean squared entry of that representation's own design on the training rows, so gamma is
relative to the size of the deltas. m depends on the representation (half's entries are
(D+ - D-)/2, taylor's are [g, h/2] below), so one gamma is not the same penalty on two
representations. ``learn_baseline=True`` (alpha-PRISM) also fits the baseline coefficient,
unpenalised: y_hat = alpha * s0 - c - D . beta. The PRISM paper has no intercept:
``fit_intercept=False`` reproduces it (c = 0) for every representation.

paired, half and quadratic are solved in closed form: the unpenalised columns ([1], [1, s0],
[s0] or none) are projected out (Frisch-Waugh-Lovell), one SVD of the remaining design gives
beta for every gamma at once, and the unpenalised coefficients follow by least squares. With
several ``gammas`` the penalty is chosen by ``cv``-fold cross-validation grouped by ``groups``
on the training data only (lowest mean squared error; ties go to the larger penalty).

Representations of the deltas, per attribute a with columns ``a:more`` (D+) and ``a:less`` (D-):
  paired     [D+, D-]                      (default)
  half       [(D+ - D-) / 2]
  quadratic  [D+, D-, D+^2, D-^2]          a diagonal quadratic in the observed contrasts:
                                           no cross-attribute terms (judgecal's design)
  taylor     the paper's diagonal Taylor. The judge's score as a function of attribute
             emphasis u is s(u) = s0 + sum_a (g_a u_a + h_a u_a^2 / 2), with g = (D+ - D-)/2 and
             h = D+ + D-, which reproduces the recorded scores at u = 0 and u = +-e_a. One shift
             u_a per attribute, shared by all items, is learned:
                 y_hat = alpha * s0 - c + sum_a (g_a u_a + h_a u_a^2 / 2)
                       = alpha * s0 - c + sum_a [D+_a (u_a + u_a^2)/2 + D-_a (u_a^2 - u_a)/2],
             paired with its two coefficients per attribute tied by u (``coef_`` holds them,
             ``shift_`` holds u). The penalty is gamma * m * ||u||^2 with m the mean squared
             entry of [g, h/2]; the fit is penalised nonlinear least squares (``_taylor_path``).
             The objective is not convex in u (a large component shared by D+ and D- makes
             h u^2 a double well), so each gamma is solved from several deterministic starts
             (``_taylor_starts``) and the lowest objective is kept; a gamma grid is solved
             from the largest gamma down, the previous solution being one of the starts.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import GroupKFold
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.validation import check_array, check_is_fitted

from judgecal.errors import InputError

BASELINE_COL = "baseline"
DEFAULT_GAMMAS = tuple(float(g) for g in np.logspace(-3, 3, 13))
REPRESENTATIONS = ("paired", "half", "quadratic", "taylor")


def _pair_index(names: list[str]) -> tuple[list[str], list[int], list[int]]:
    """Attributes and the positions of their ``:more`` and ``:less`` columns in ``names``."""
    attrs = [n[: -len(":more")] for n in names if n.endswith(":more")]
    idx = {n: j for j, n in enumerate(names)}
    for a in attrs:
        if f"{a}:less" not in idx:
            raise InputError("X", f"attribute {a!r} has a ':more' column but no ':less' column")
    return attrs, [idx[f"{a}:more"] for a in attrs], [idx[f"{a}:less"] for a in attrs]


# In a feature frame but never a PRISM feature: ids, the human target, the other baseline
# reading, and the neutral controls and rubric criteria (screening's and the baselines' columns).
NOT_FEATURES = ("item_id", "group_id", "target", "baseline_other")
NOT_FEATURE_PREFIXES = ("neutral:", "criterion:", "joint:", "injection:")  # probe ids of bank.NOT_FEATURE_FAMILIES


def _split_columns(X, representation: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Baseline vector, design matrix and design column names from a feature table.

    ``X``: a DataFrame with a ``baseline`` column (the judge's score) and feature columns
    (``build_features``' table, ``features.parquet``; its id, target and control columns are
    skipped), or a 2-D array read as [baseline, a1:more, a1:less, a2:more, a2:less, ...].
    Every column but ``baseline`` is a feature: ``<a>:more`` / ``<a>:less`` pairs (properties)
    and single columns (one-sided units). half and quadratic transform the pairs and keep the
    singles as they are (quadratic squares them too); taylor is defined for pairs only.
    taylor's predictions are linear in the paired design, so it gets the paired design here.
    """
    index = X.index if isinstance(X, pd.DataFrame) else None
    if isinstance(X, pd.DataFrame) and not any(isinstance(c, str) for c in X.columns):
        X = X.to_numpy()  # no column named (0, 1, ...): by position, as an array
    if isinstance(X, pd.DataFrame):
        if BASELINE_COL not in X.columns:
            raise InputError("X", f"missing column {BASELINE_COL!r} (the judge's score; the features are "
                             "<attribute>:more / <attribute>:less columns)")
        names = [c for c in X.columns if c != BASELINE_COL and c not in NOT_FEATURES
                 and not str(c).startswith(NOT_FEATURE_PREFIXES)]
        if X.columns.duplicated().any():  # X[c] would be two columns: the design would not line up with its names
            raise InputError("X", f"column {X.columns[X.columns.duplicated()][0]!r} appears twice")
        s0 = _numeric(X[BASELINE_COL], BASELINE_COL)
        paired = np.column_stack([_numeric(X[c], c) for c in names]) if names else np.empty((len(X), 0))
        names = [str(c) for c in names]
    else:
        arr = _as_array(X)
        s0, paired = arr[:, 0], arr[:, 1:]
        names = [f"x{j // 2}:{'more' if j % 2 == 0 else 'less'}" for j in range(paired.shape[1])]
    for col, values in zip([BASELINE_COL, *names], [s0, *paired.T]):
        if not np.all(np.isfinite(values)):
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise InputError("X", f"column {col!r} {_at(row, index)}: {values[row]} (NaN or infinite)")
    if representation == "paired":
        return s0, paired, names
    attrs, more, less = _pair_index(names)
    singles = [j for j, n in enumerate(names) if not n.endswith((":more", ":less"))]
    if representation == "taylor":
        if singles:
            raise InputError("representation", f"taylor is defined for <attribute>:more / <attribute>:less "
                             f"column pairs; {names[singles[0]]!r} is not one (a one-sided unit: drop its family "
                             "from [design].families; or use paired)")
        if 2 * len(attrs) != len(names):
            raise InputError("X", "taylor needs every ':less' column paired with a ':more' column")
        return s0, paired, names
    if representation == "half" and names and not attrs and not any(":" in n for n in names):
        # names that are neither pairs nor units (family:unit, kept as they are): half of nothing
        raise InputError("representation", f"half takes (more - less) / 2 of <attribute>:more / "
                         f"<attribute>:less column pairs and X has none (its columns: {', '.join(names[:4])}"
                         f"{', ...' if len(names) > 4 else ''}); name them so, or use paired")
    plus, minus, one = paired[:, more], paired[:, less], paired[:, singles]
    single_names = [names[j] for j in singles]
    if representation == "half":
        return s0, np.hstack([(plus - minus) / 2, one]), [f"{a}:half" for a in attrs] + single_names
    if representation == "quadratic":
        design = np.hstack([plus, minus, one])
        cols = [f"{a}:more" for a in attrs] + [f"{a}:less" for a in attrs] + single_names
        return s0, np.hstack([design, design**2]), cols + [f"{c}^2" for c in cols]
    raise InputError("representation", f"unknown representation {representation!r} (use {', '.join(REPRESENTATIONS)})")


def _as_array(X) -> np.ndarray:
    """An array X as scikit-learn's ``check_array`` reads it (its refusals of sparse, complex,
    empty and 1-D input are the ones scikit-learn's estimator checks expect), in one line;
    NaN and infinity are refused by :func:`_split_columns`, naming the column and row."""
    try:
        return check_array(X, dtype=float, ensure_all_finite=False, input_name="X")
    except ValueError as e:
        text = str(e)
        line = text.split("\n")[0].rstrip(":")
        if "Reshape your data" in text:
            line += "; Reshape your data: rows x [baseline, a1:more, a1:less, ...] (X.reshape(1, -1) for one row)"
        raise InputError("X", line) from None


def _numeric(column: pd.Series, name) -> np.ndarray:
    try:
        return column.to_numpy(float)
    except (TypeError, ValueError):
        bad = pd.to_numeric(column, errors="coerce").isna() & column.notna()
        row = int(np.flatnonzero(bad.to_numpy())[0]) if bad.any() else 0
        raise InputError("X", f"column {name!r} {_at(row, column.index)}: {column.iloc[row]!r} is not a number") from None


def _at(row: int, index=None) -> str:
    """A row named by its position, and by its label where a pandas index holds other labels (a
    filtered frame's position sent a user to ``df.loc`` of another row)."""
    plain = index is None or (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1)
    return f"row {row}" if plain else f"row {row} (index {index[row]!r})"


def _unpenalised(s0, y, learn_baseline, fit_intercept):
    """Unpenalised columns U (for -c, then alpha; none for PRISM without intercept) and the target t."""
    n = len(y)
    cols = ([np.ones(n)] if fit_intercept else []) + ([s0] if learn_baseline else [])
    U = np.column_stack(cols) if cols else np.empty((n, 0))
    return U, (y if learn_baseline else y - s0)


def _scale(design) -> float:
    """m: the mean squared entry of the training design (1 when there is none)."""
    m = float(np.mean(design**2)) if design.size else 1.0
    return m if m > 0 else 1.0


def _project_out(U, *arrays):
    """Each array minus its least-squares fit on the columns of U (Frisch-Waugh-Lovell)."""
    if U.shape[1] == 0:
        return arrays
    Q, _ = np.linalg.qr(U)
    return tuple(a - Q @ (Q.T @ a) for a in arrays)


def _unpenalised_coef(U, rest):
    """theta (n_gammas, k): each row of ``rest`` fitted on U by least squares."""
    if U.shape[1] == 0:
        return np.zeros((len(rest), 0))
    return np.linalg.lstsq(U, rest.T, rcond=None)[0].T


def negligible(S2: np.ndarray, shape) -> np.ndarray:
    """Squared singular values (or Gram eigenvalues) a rounding error away from 0, per last
    axis: with no penalty they are dropped, the minimum-norm solution on collinear columns (a
    column twice, a unit the judge never moved on), not 1/S of a rounding error (coefficients
    of 1e13). The cutoff is on S^2 so a Gram matrix's eigenvalues (the subsets engine) and an
    SVD's squares (PRISM, the rubric ridge) drop the same directions."""
    top = S2.max(axis=-1, keepdims=True) if S2.size else np.zeros(S2.shape[:-1] + (1,))
    return S2 <= max(shape) * np.finfo(float).eps * top


def ridge_shrink(S: np.ndarray, penalty: np.ndarray, shape) -> np.ndarray:
    """S / (S^2 + penalty) for each penalty (rows), 0 along the :func:`negligible` directions."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = S / (S**2 + penalty)
    return np.where(negligible(S**2, shape), 0.0, out)


def _ridge_path(s0, D, y, gammas, learn_baseline, fit_intercept=True):
    """(theta, beta, m) for every gamma: theta = [-c, alpha] (those fitted), beta the delta coefficients."""
    n = len(y)
    U, t = _unpenalised(s0, y, learn_baseline, fit_intercept)
    P = -D
    m = _scale(D)
    Pt, tt = _project_out(U, P, t)
    V, S, Wt = np.linalg.svd(Pt, full_matrices=False)
    proj = V.T @ tt
    g = np.asarray(gammas, dtype=float)[:, None]
    betas = (Wt.T @ (ridge_shrink(S, n * g * m, Pt.shape) * proj).T).T  # (n_gammas, p)
    rest = t[None, :] - betas @ P.T  # what the unpenalised columns must explain
    return _unpenalised_coef(U, rest), betas, m


def taylor_score(s0, plus, minus, u):
    """The paper's diagonal Taylor s(u) = s0 + sum_a (g_a u_a + h_a u_a^2 / 2), g = (D+ - D-)/2, h = D+ + D-."""
    u = np.asarray(u, dtype=float)
    return s0 + ((plus - minus) / 2) @ u + ((plus + minus) / 2) @ u**2


def _taylor_residuals(u, Tt, tt, w):
    k = len(u)
    return np.r_[Tt[:, :k] @ u + Tt[:, k:] @ u**2 - tt, w * u]


def _taylor_jacobian(u, Tt, tt, w):
    k = len(u)
    return np.vstack([Tt[:, :k] + 2 * u * Tt[:, k:], w * np.eye(k)])


def _taylor_starts(Tt, tt, w, warm):
    """Deterministic starts for the fit of u: ``warm`` (the previous gamma's solution, or 0),
    u = 0, and the unconstrained solution projected onto the Taylor model, both ways. Unconstrained,
    the fit Tt @ [u, v] with v free in place of u^2 is a ridge solve (penalty w on u); its u, and
    sign(u) sqrt(max(v, 0)) (the shift whose square is v), are starts, as are the sign-flipped
    latter and sign-flipped ``warm`` (the double well's other side). Duplicates are dropped."""
    k = len(warm)
    A = np.vstack([Tt, np.hstack([w * np.eye(k), np.zeros((k, k))])])
    uv = np.linalg.lstsq(A, np.r_[tt, np.zeros(k)], rcond=None)[0]
    u_lin, v = uv[:k], uv[k:]
    u_sq = np.where(u_lin >= 0, 1.0, -1.0) * np.sqrt(np.maximum(v, 0.0))
    starts = []
    for u in (warm, np.zeros(k), u_lin, u_sq, -u_sq, -warm):
        if not any(np.array_equal(u, s) for s in starts):
            starts.append(u)
    return starts


def _taylor_fit(Tt, tt, w, warm):
    """u minimising the penalised Taylor residuals from every start of ``_taylor_starts``: the
    lowest cost wins, an earlier start on a tie (within 1e-12 relative), so the path stays put
    when no other start does better."""
    best = None
    for u0 in _taylor_starts(Tt, tt, w, warm):
        r = least_squares(_taylor_residuals, u0, _taylor_jacobian, method="lm", xtol=1e-15, ftol=1e-15,
                          gtol=1e-15, args=(Tt, tt, w))
        if best is None or r.cost < best.cost * (1 - 1e-12):
            best = r
    return best.x


def _taylor_path(s0, plus, minus, y, gammas, learn_baseline, fit_intercept=True):
    """(theta, u, m) for every gamma: the taylor shifts u by penalised nonlinear least squares.

    The residuals [fit - t, sqrt(n gamma m) u] square-sum to n times the objective. c and alpha
    enter linearly, so they are profiled out (variable projection): for any u they are the
    least-squares fit on U, so projecting U out of the Taylor design and the target once leaves
    a problem in u alone whose Jacobian is exact (the projection does not depend on u); c and
    alpha then follow by least squares. The objective is not convex in u: each gamma is fitted
    from several starts (``_taylor_fit``), running from the largest gamma down with the previous
    solution (u = 0 at the largest) among them.
    """
    U, t = _unpenalised(s0, y, learn_baseline, fit_intercept)
    n, k = plus.shape
    T = np.hstack([(plus - minus) / 2, (plus + minus) / 2])  # [g, h/2]: the fit is T @ [u, u^2]
    m = _scale(T)
    Tt, tt = _project_out(U, T, t)
    gammas = np.asarray(gammas, dtype=float)
    shifts, u = np.zeros((gammas.size, k)), np.zeros(k)
    for j in np.argsort(-gammas, kind="stable"):
        if k:
            u = _taylor_fit(Tt, tt, np.sqrt(n * gammas[j] * m), u)
        shifts[j] = u
    rest = t[None, :] - (shifts @ T[:, :k].T + shifts**2 @ T[:, k:].T)
    return _unpenalised_coef(U, rest), shifts, m


def _taylor_coef(u, more, less, p):
    """The paired coefficients (y_hat = ... - D . beta) implied by shifts u, one row per gamma."""
    beta = np.zeros((len(u), p))
    beta[:, more] = -(u + u**2) / 2
    beta[:, less] = (u - u**2) / 2
    return beta


def _predict(s0, D, theta, beta, learn_baseline, fit_intercept):
    base = theta[..., -1:] * s0 if learn_baseline else s0
    if fit_intercept:
        base = base + theta[..., 0:1]
    return base - beta @ D.T


def _one_per_row(values, n: int, name: str, numeric: bool = False) -> np.ndarray:
    """``y`` or ``groups`` as one value per row of X, or a one-line refusal naming it."""
    if values is None:  # scikit-learn's words, which its estimator checks look for
        raise InputError(name, f"missing: one value per row of X ({n}); PRISM requires {name} to be passed, but "
                         f"the target {name} is None" if name == "y" else f"missing: one value per row of X ({n})")
    index = values.index if isinstance(values, pd.Series) else None
    arr = np.asarray(values)
    if name == "y" and arr.ndim == 2 and arr.shape[1] == 1:  # a column vector: scikit-learn's convention
        warnings.warn("A column-vector y was passed when a 1d array was expected; read as y.ravel()",
                      DataConversionWarning, stacklevel=3)
        arr = arr.ravel()
    if arr.ndim != 1:
        raise InputError(name, f"must be one value per row (1-D), not shape {arr.shape}")
    if len(arr) != n:
        raise InputError(name, f"has {len(arr)} values for {n} rows of X")
    if numeric:
        try:
            arr = arr.astype(float)
        except (TypeError, ValueError):
            row = next(i for i, v in enumerate(arr) if not _is_number(v))
            value = arr[row].item() if isinstance(arr[row], np.generic) else arr[row]
            raise InputError(name, f"{_at(row, index)}: {value!r} is not a number") from None
        if not np.all(np.isfinite(arr)):
            raise InputError(name, f"{_at(int(np.flatnonzero(~np.isfinite(arr))[0]), index)}: NaN or infinite")
        return arr
    missing = pd.isna(arr)
    if missing.any():
        raise InputError(name, f"{_at(int(np.flatnonzero(missing)[0]), index)}: missing")
    return arr


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


class PRISM(RegressorMixin, BaseEstimator):
    """Probe-based residual calibration (see module docstring for the objective).

    Parameters: ``gammas`` (one value or a grid), ``learn_baseline`` (alpha-PRISM),
    ``representation`` (paired | half | quadratic | taylor), ``cv`` (folds for choosing gamma),
    ``fit_intercept`` (False: c = 0, as in the paper).
    Learned: ``gamma_``, ``coef_`` (beta; for taylor the implied paired coefficients),
    ``shift_`` (taylor's u, else None), ``intercept_`` (c), ``alpha_``, ``penalty_scale_`` (m),
    ``cv_mse_`` (per gamma, or None), ``cv_folds_`` (the folds that chose gamma, or None),
    ``design_names_`` (the design's columns, after the representation), ``n_features_in_`` and
    ``feature_names_in_`` (a DataFrame's columns).

    ``X``: a DataFrame with ``baseline`` and ``<attribute>:more`` / ``<attribute>:less``
    columns (``build_features(...).X``, ``features.parquet``), or a 2-D array read as
    [baseline, a1:more, a1:less, a2:more, ...]. With a grid of gammas ``fit`` needs
    ``groups``; in scikit-learn's tools pass them by metadata routing
    (``sklearn.set_config(enable_metadata_routing=True)``, ``PRISM().set_fit_request(groups=True)``).
    """

    def __init__(self, gammas=DEFAULT_GAMMAS, learn_baseline: bool = False, representation: str = "paired", cv: int = 5,
                 fit_intercept: bool = True):
        self.gammas = gammas
        self.learn_baseline = learn_baseline
        self.representation = representation
        self.cv = cv
        self.fit_intercept = fit_intercept

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the baseline's coefficient is 1 unless learn_baseline: on data whose first column is no
        # judge score (scikit-learn's generic checks) the fit is poor by design
        tags.regressor_tags.poor_score = not self.learn_baseline
        return tags

    def _path(self, s0, D, y, gammas, pairs):
        """(theta, beta, m, u) for every gamma; u (taylor's shifts) is None for the closed form."""
        if pairs is None:
            return (*_ridge_path(s0, D, y, gammas, self.learn_baseline, self.fit_intercept), None)
        more, less = pairs
        th, u, m = _taylor_path(s0, D[:, more], D[:, less], y, gammas, self.learn_baseline, self.fit_intercept)
        return th, _taylor_coef(u, more, less, D.shape[1]), m, u

    def _checked_params(self) -> np.ndarray:
        """The parameters as given (scikit-learn stores them unchecked), checked at fit: the grid."""
        try:
            gammas = np.atleast_1d(np.asarray(self.gammas, dtype=float))
        except (TypeError, ValueError):
            gammas = np.array([np.nan])
        if gammas.ndim != 1 or gammas.size == 0 or not np.all(np.isfinite(gammas)) or np.any(gammas < 0):
            raise InputError("gammas", f"must be one or more non-negative finite numbers, not {self.gammas!r}")
        for name in ("learn_baseline", "fit_intercept"):  # "no" and "false" are true in Python
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise InputError(name, f"must be True or False, not {getattr(self, name)!r}")
        if isinstance(self.cv, bool) or not isinstance(self.cv, (int, np.integer)) or self.cv < 2:
            raise InputError("cv", f"must be a whole number of folds >= 2, not {self.cv!r}")
        if self.representation not in REPRESENTATIONS:
            raise InputError("representation", f"unknown representation {self.representation!r} (use "
                             f"{', '.join(REPRESENTATIONS)})")
        return gammas

    def fit(self, X, y, groups=None):
        """``X`` as :func:`_split_columns` reads it; ``y`` the human target, one per row;
        ``groups`` one label per row (needed with a grid of gammas: the penalty is chosen by
        ``cv``-fold cross-validation grouped by them, with one fold per group where there are
        fewer groups than ``cv``; ``cv_folds_`` says how many)."""
        gammas = self._checked_params()
        if not isinstance(X, pd.DataFrame):  # read once: its shape is n_features_in_
            X = _as_array(X)
        s0, D, names = _split_columns(X, self.representation)
        y = _one_per_row(y, len(s0), "y", numeric=True)
        pairs = _pair_index(names)[1:] if self.representation == "taylor" else None
        self.cv_mse_ = None
        self.cv_folds_ = None
        if gammas.size > 1:
            if groups is None:
                raise InputError("groups", "needed to choose gamma by grouped cross-validation (or give one gamma; in "
                                 "scikit-learn's tools pass them by metadata routing: set_fit_request(groups=True))")
            groups = _one_per_row(groups, len(s0), "groups")
            n_groups = len(np.unique(groups))
            if n_groups < 2:
                raise InputError("groups", "need at least 2 groups to cross-validate gamma")
            mse = np.zeros(gammas.size)
            self.cv_folds_ = min(self.cv, n_groups)
            for tr, va in GroupKFold(n_splits=self.cv_folds_).split(s0, y, groups):
                th, be, _, _ = self._path(s0[tr], D[tr], y[tr], gammas, pairs)
                pred = _predict(s0[va], D[va], th, be, self.learn_baseline, self.fit_intercept)
                mse += ((pred - y[va]) ** 2).mean(axis=1) * len(va)
            self.cv_mse_ = mse / len(y)
            best = np.flatnonzero(self.cv_mse_ <= self.cv_mse_.min() * (1 + 1e-12))
            self.gamma_ = float(gammas[best].max())
        else:
            self.gamma_ = float(gammas[0])
        # taylor retraces the grid down to gamma_, warm-started as in CV; the closed form needs gamma_ alone
        path = gammas[gammas >= self.gamma_] if pairs is not None else np.array([self.gamma_])
        th, be, m, u = self._path(s0, D, y, path, pairs)
        j = int(np.argmin(path))
        self.coef_ = be[j]
        self.shift_ = None if u is None else u[j]
        self.intercept_ = float(-th[j, 0]) if self.fit_intercept else 0.0
        self.alpha_ = float(th[j, -1]) if self.learn_baseline else 1.0
        self.penalty_scale_ = m
        self.design_names_ = names
        self.n_features_in_ = X.shape[1]
        if isinstance(X, pd.DataFrame) and all(isinstance(c, str) for c in X.columns):
            self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    def predict(self, X):
        check_is_fitted(self, "coef_")
        if not isinstance(X, pd.DataFrame):  # columns by position: as many as at fit (a frame's go by name)
            X = _as_array(X)
            if X.shape[1] != self.n_features_in_:
                raise InputError("X", f"X has {X.shape[1]} features, but PRISM is expecting {self.n_features_in_} "
                                 "features as input")
        s0, D, names = _split_columns(X, self.representation)
        if names != self.design_names_:
            missing = [n for n in self.design_names_ if n not in names]
            extra = [n for n in names if n not in self.design_names_]
            what = (f"missing {missing[:4]}" if missing else "") + ("; " if missing and extra else "") + \
                   (f"not fitted on {extra[:4]}" if extra else "") or "the same columns in another order"
            raise InputError("X", f"feature columns differ from the ones PRISM was fitted on ({what}; fitted on "
                             f"{len(self.design_names_)}, in the order of design_names_)")
        return self.alpha_ * s0 - self.intercept_ - D @ self.coef_

    def objective(self, X, y) -> float:
        """The training objective at the fitted coefficients (for checks and diagnostics)."""
        s0, D, _ = _split_columns(X, self.representation)
        r = self.alpha_ * s0 - np.asarray(y, float) - self.intercept_ - D @ self.coef_
        w = self.coef_ if self.shift_ is None else self.shift_  # taylor penalises u, not its coefficients
        return float(np.mean(r**2) + self.gamma_ * self.penalty_scale_ * w @ w)
