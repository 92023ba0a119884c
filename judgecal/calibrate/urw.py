"""URW and its baselines: weights for each criterion's verdict, then a response score.

Every weighter follows the same MAPIE-like interface:

    fit(v_hat, v_true, strata=None)  -> self     calibration soft scores and 0/1 labels
    raw_weight(v_hat, strata=None)   -> weights  element-wise, before normalisation
    vote(v_hat)                      -> 0/1      the verdict that is weighted
    response_scores(v_hat, response, strata=None)
                                     -> (responses, scores): per response, sum_k w_k * vote_k
                                                 with the weights normalised over its criteria

``v_hat`` is what each method reads: the mean template vote (URW, URW-dagger, SCP,
Mondrian-SCP, Beta-Binomial), the base template's vote (Uniform), the mean of the samples
(Sampling Ensemble), or the mean over two templates (URW-double-dagger's p-values).
When every weight of a response is 0 (possible only with SCP abstention), its score falls
back to the uniform mean of its votes, so the response is still ranked.

Exact ties: a response score is a ratio of weighted sums, so weights that are fractions
(p-values k/(N_cal + 1), Beta posteriors (k + 1)/(N + 2)) would make two responses with the
same multiset of verdicts score differently in the last bit when their criteria come in
another order. Scoring therefore sums the integer numerators of those weights (exact in
float64) and divides once: equal multisets give equal scores, bit for bit.
There is no ``score``: scikit-learn's ``score(X, y)`` returns one number and its tools
(``cross_val_score``, ``GridSearchCV``) would read labels as response ids; a weighter is not
tuned by those tools (its one parameter, ``alpha``, is a coverage level, not a fit).
A fitted URW study's ``calibration.json`` holds its weighters under ``urw`` (URW) and
``weighters`` (the baselines, by name): ``URW.from_dict(calibration["urw"])``.

    to_dict()                        -> dict     JSON-serialisable: class, params, fitted state
    Cls.from_dict(d)                 -> Cls      the equivalent fitted weighter
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from judgecal.errors import InputError

_DECIMALS = 12  # k/N soft scores compared as |v - u|; rounding makes equal fractions tie exactly


def _soft(v_hat, where="v_hat") -> np.ndarray:
    v = np.asarray(v_hat, dtype=float)
    if v.ndim > 1:  # a criteria x templates vote matrix: its mean over templates is the soft score
        raise InputError(where, f"must be one soft score per criterion (1-D, the mean template vote), not shape "
                         f"{v.shape}")
    if v.size and (not np.all(np.isfinite(v)) or v.min() < 0 or v.max() > 1):
        bad = int(np.flatnonzero(~np.isfinite(v) | (v < 0) | (v > 1))[0])
        raise InputError(f"{where}[{bad}]", f"soft score {v.flat[bad]!r} is outside [0, 1]")
    return v


def _labels(v_true) -> np.ndarray:
    y = np.asarray(v_true)
    bad = ~np.isin(y, (0, 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"v_true[{i}]", f"calibration label {y[i]!r} is not 0 or 1")
    return y.astype(float)


def hard_vote(v_hat) -> np.ndarray:
    """The rounded vote: 1 when at least half the templates say 1."""
    return (np.asarray(v_hat, dtype=float) >= 0.5).astype(float)


def normalised_score(raw: np.ndarray, votes: np.ndarray, response) -> tuple[np.ndarray, np.ndarray]:
    """Per response (labels in ``response``): sum_k w_k v_k with w normalised within the response.
    Returns (unique responses, scores)."""
    response = np.asarray(response)
    if response.ndim != 1 or len(response) != len(votes):
        raise InputError("response", f"must be one response id per criterion: {len(votes)} criteria, "
                         f"{response.shape} response ids")
    keys, idx = np.unique(response, return_inverse=True)
    total = np.bincount(idx, weights=raw, minlength=len(keys))
    weighted = np.bincount(idx, weights=raw * votes, minlength=len(keys))
    count = np.bincount(idx, minlength=len(keys))
    if (count == 0).any():
        raise InputError("response", "a response has no criteria")
    uniform = np.bincount(idx, weights=votes, minlength=len(keys)) / count
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(total > 0, weighted / total, uniform)
    return keys, scores


def _plain(x):
    """A numpy scalar as the Python number json can write."""
    return x.item() if isinstance(x, np.generic) else x


def _mapping(d, where: str) -> dict:
    if not isinstance(d, dict):
        raise InputError(where, f"expected a mapping, got {type(d).__name__}")
    return d


def _field(d, key: str, where: str):
    if key not in _mapping(d, where):
        raise InputError(f"{where}.{key}", "missing field")
    return d[key]


class _Weighter(BaseEstimator):
    _params_added_later: tuple[str, ...] = ()  # absent from dicts written before them: the default
    def fit(self, v_hat, v_true, strata=None):
        return self

    def to_dict(self) -> dict:
        """The class name, the init params and the fitted state (attributes ending in ``_``),
        as plain JSON types."""
        params = {k: _plain(v) for k, v in self.get_params().items()}
        return {"class": type(self).__name__, "params": params, "fitted": self._get_state()}

    @classmethod
    def from_dict(cls, d: dict, where: str | None = None):
        """Rebuild the weighter ``to_dict`` wrote; ``where`` names ``d`` in error messages."""
        where = where or cls.__name__
        if isinstance(d, dict) and "class" not in d and "urw" in d:  # a whole calibration.json
            raise InputError(where, "is a URW study's calibration.json, not one weighter's dict: its URW is "
                             "under 'urw' (URW.from_dict(d['urw'])), the baselines under 'weighters' (by name)")
        name = _field(d, "class", where)
        if name != cls.__name__:
            raise InputError(f"{where}.class", f"a {name!r} dict, not {cls.__name__!r}")
        params = _mapping(_field(d, "params", where), f"{where}.params")
        names = set(cls._get_param_names())
        for key in sorted(names - set(cls._params_added_later)):  # older dicts lack those: defaults
            _field(params, key, f"{where}.params")
        unknown = sorted(set(params) - names)
        if unknown:
            raise InputError(f"{where}.params.{unknown[0]}", f"unknown parameter for {cls.__name__}")
        est = cls(**params)
        state = _mapping(_field(d, "fitted", where), f"{where}.fitted")
        try:
            est._set_state(state, f"{where}.fitted")
        except InputError:
            raise
        except (TypeError, ValueError) as e:  # a wrong type deep in the state: still one line
            raise InputError(f"{where}.fitted", f"malformed fitted state ({e})") from None
        return est

    # Subclasses with learned state override both; a stateless weighter has none.
    def _get_state(self) -> dict:
        return {}

    def _set_state(self, state: dict, where: str) -> None:
        pass

    def vote(self, v_hat) -> np.ndarray:
        return hard_vote(v_hat)

    def raw_weight(self, v_hat, strata=None) -> np.ndarray:
        raise NotImplementedError

    def _score_weight(self, v, strata=None) -> np.ndarray:
        """Weights proportional to ``raw_weight``, as integers where the weights are fractions
        with one denominator (see Exact ties above)."""
        return self.raw_weight(v, strata)

    def response_scores(self, v_hat, response, strata=None):
        """(responses, scores): per response, sum_k w_k vote_k with w normalised over its criteria."""
        v = _soft(v_hat)
        return normalised_score(self._score_weight(v, strata), self.vote(v), response)


# Nonconformity scores s(v_hat, u) by name (MAPIE's "conformity score" object, kept as a name
# so a fitted weighter stays plain JSON). Any function of |v_hat - u| that grows with it gives
# the same p-values; a new score is one entry here and ``URW(conformity=name)``.
CONFORMITY_SCORES = {
    "absolute": lambda v, u: np.abs(v - u),  # the URW paper's |v_hat - v*|
    "squared": lambda v, u: (v - u) ** 2,
}


def conformity_score(name: str):
    if name not in CONFORMITY_SCORES:
        raise InputError("conformity", f"unknown conformity score {name!r} (known: {', '.join(CONFORMITY_SCORES)})")
    return CONFORMITY_SCORES[name]


class URW(_Weighter):
    """Split-conformal weights. fit: s_i = s(v_hat_i, v*_i) on the calibration set, with the
    conformity score ``conformity`` (default |v_hat - v*|).
    p(u | v) = (1 + #{i : s_i >= s(v, u)}) / (N_cal + 1); raw weight = p(vote(v) | v), the vote
    1 where v >= 0.5 (a tie of the templates counts as met; numpy's round(0.5) would say 0)."""

    _params_added_later = ("conformity",)

    def __init__(self, conformity: str = "absolute"):
        self.conformity = conformity

    def fit(self, v_hat, v_true, strata=None):
        v, y = _soft(v_hat), _labels(v_true)
        if len(v) != len(y) or len(v) == 0:
            raise InputError("calibration", f"{len(v)} soft scores for {len(y)} labels")
        self.scores_ = np.sort(np.round(conformity_score(self.conformity)(v, y), _DECIMALS))
        self.n_cal_ = len(self.scores_)
        return self

    def p_count(self, u, v_hat) -> np.ndarray:
        """The p-value's numerator, 1 + #{i : s_i >= s(v, u)} (an integer)."""
        check_is_fitted(self, "scores_")
        x = np.round(conformity_score(self.conformity)(_soft(v_hat), np.asarray(u, dtype=float)), _DECIMALS)
        return 1.0 + (self.n_cal_ - np.searchsorted(self.scores_, x, side="left"))

    def p_value(self, u, v_hat) -> np.ndarray:
        return self.p_count(u, v_hat) / (self.n_cal_ + 1.0)

    def _get_state(self) -> dict:
        check_is_fitted(self, "scores_")
        return {"scores_": self.scores_.tolist(), "n_cal_": int(self.n_cal_)}

    def _set_state(self, state: dict, where: str) -> None:
        scores = _soft(_field(state, "scores_", where), f"{where}.scores_").ravel()
        n_cal = _field(state, "n_cal_", where)
        if n_cal != len(scores):
            raise InputError(f"{where}.n_cal_", f"{n_cal!r} for {len(scores)} calibration scores")
        self.scores_ = np.sort(scores)  # p_value's searchsorted needs them sorted
        self.n_cal_ = len(scores)

    def raw_weight(self, v_hat, strata=None) -> np.ndarray:
        v = _soft(v_hat)
        return self.p_value(hard_vote(v), v)

    def _score_weight(self, v, strata=None) -> np.ndarray:
        return self.p_count(hard_vote(v), v)


class Uniform(_Weighter):
    """Every criterion weighs 1/K; reads the base template's single vote."""

    def raw_weight(self, v_hat, strata=None):
        return np.ones_like(_soft(v_hat))


class TemplateVoteUniform(Uniform):
    """URW-dagger (ablation): the rounded mean template vote, uniform weights."""


class BetaBinomial(_Weighter):
    """Beta(1, 1) prior on the chance that a template agrees with the majority vote; weight =
    posterior mean (k + 1) / (N + 2), k = templates agreeing with the vote out of the N whose
    answers parsed. Pass N per criterion as ``n_parsed`` (``soft_scores``' ``n_tmpl``);
    without it every criterion is taken to have all ``n_templates`` answers."""

    def __init__(self, n_templates: int = 6):
        self.n_templates = n_templates

    def _parsed(self, v, n_parsed) -> np.ndarray:
        if n_parsed is None:
            check_count(self.n_templates, "n_templates")
            return np.full(v.shape, float(self.n_templates))
        n = np.asarray(n_parsed, dtype=float)
        if n.shape != v.shape or (n.size and (n.min() < 1 or not np.all(n == np.round(n)))):
            raise InputError("n_parsed", "one whole number >= 1 of parsed answers per criterion")
        return n

    def _agreeing(self, v, n) -> np.ndarray:
        return np.round(np.maximum(v, 1 - v) * n)

    def raw_weight(self, v_hat, strata=None, n_parsed=None):
        v = _soft(v_hat)
        n = self._parsed(v, n_parsed)
        return (self._agreeing(v, n) + 1) / (n + 2)

    def _score_weight(self, v, strata=None, n_parsed=None) -> np.ndarray:
        """(k + 1) / (N + 2) over the common denominator lcm(N + 2): integer numerators."""
        n = self._parsed(v, n_parsed)
        if n.size == 0:
            return n
        common = math.lcm(*np.unique(n + 2).astype(int).tolist())
        return (self._agreeing(v, n) + 1) * (common // (n + 2))

    def response_scores(self, v_hat, response, strata=None, n_parsed=None):
        v = _soft(v_hat)
        return normalised_score(self._score_weight(v, strata, n_parsed), self.vote(v), response)


class SamplingEnsemble(_Weighter):
    """Reads the mean vote of samples of the base template at T = 0.7 (6 by default);
    weight = the share of samples that agree with the majority vote."""

    def raw_weight(self, v_hat, strata=None):
        v = _soft(v_hat)
        return np.maximum(v, 1 - v)


class SCP(_Weighter):
    """Split conformal prediction at level ``alpha``: the set {u : p(u | v) > alpha}; a criterion
    whose set is one label keeps weight 1, any other (both labels or none) abstains (weight 0)."""

    def __init__(self, alpha: float = 0.1):
        self.alpha = alpha

    def fit(self, v_hat, v_true, strata=None):
        check_level(self.alpha)
        self.urw_ = URW().fit(v_hat, v_true)
        return self

    def _get_state(self) -> dict:
        check_is_fitted(self, "urw_")
        return {"urw_": self.urw_.to_dict()}

    def _set_state(self, state: dict, where: str) -> None:
        check_level(self.alpha)
        self.urw_ = URW.from_dict(_field(state, "urw_", where), f"{where}.urw_")

    def _weights(self, urw: URW, v):
        p1, p0 = urw.p_value(1.0, v), urw.p_value(0.0, v)
        single = (p1 > self.alpha) != (p0 > self.alpha)
        return single.astype(float)

    def raw_weight(self, v_hat, strata=None):
        check_is_fitted(self, "urw_")
        return self._weights(self.urw_, _soft(v_hat))


def check_level(alpha) -> None:
    """SCP's level: a number in (0, 1) (NaN, 0 or 1.5 made every criterion abstain, unsaid)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)) or not 0 < alpha < 1:
        raise InputError("alpha", f"must be a number in (0, 1), not {alpha!r}")


def check_count(n, name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(name, f"must be a whole number >= 1, not {n!r}")


def min_calibration(alpha: float) -> int:
    """The fewest calibration points for which SCP at ``alpha`` can ever give one label:
    the smallest p-value is 1/(n + 1), which must be <= alpha, so n >= ceil(1/alpha) - 1
    (computed on that inequality, so 1/alpha's rounding cannot move it)."""
    n = max(math.ceil(1 / alpha) - 2, 0)
    while 1 / (n + 1) > alpha:
        n += 1
    return n


def merge_small_bins(counts, minimum: int) -> list[int]:
    """Indices of the edges kept when adjacent bins are merged until each holds ``minimum``
    points: from the shortest bin up, a bin that is too small joins the next (longer) one;
    a last bin that is still too small joins the one before it. Edge i separates bins i, i+1."""
    keep, run = [], 0
    for i, c in enumerate(counts):
        run += c
        if run >= minimum and i < len(counts) - 1:
            keep.append(i)
            run = 0
    if keep and run < minimum:
        keep.pop()
    return keep


class MondrianSCP(SCP):
    """SCP calibrated separately in each of ``n_bins`` strata. judgecal bins criteria by their
    length in words (quantile edges on the calibration set): a taxonomy that does not depend
    on the verdicts, so the per-bin guarantee holds.

    Small bins are merged: a bin with fewer than ceil(1/alpha) - 1 calibration points
    (``min_calibration``) could never give a single label (its smallest p-value 1/(n + 1) is
    above alpha) and would always abstain, so it is merged with its neighbour, the next
    longer bin (the longest bin with the one before it), repeating until every bin is large
    enough or one bin is left (``merge_small_bins``). Empty bins (tied quantile edges) merge
    the same way. ``edges_`` holds the edges that remain, so there may be fewer than
    ``n_bins`` bins; the rule reads only the calibration lengths, never the verdicts."""

    def __init__(self, alpha: float = 0.1, n_bins: int = 6):
        self.alpha = alpha
        self.n_bins = n_bins

    def _bin(self, strata):
        if strata is None:
            raise InputError("strata", "Mondrian-SCP needs a stratum value per criterion (criterion length)")
        return np.searchsorted(self.edges_, np.asarray(strata, float), side="right")

    def fit(self, v_hat, v_true, strata=None):
        if strata is None:
            raise InputError("strata", "Mondrian-SCP needs a stratum value per criterion (criterion length)")
        check_level(self.alpha)
        check_count(self.n_bins, "n_bins")
        v, y, s = _soft(v_hat), _labels(v_true), np.asarray(strata, float)
        edges = np.quantile(s, np.linspace(0, 1, self.n_bins + 1)[1:-1])
        counts = np.bincount(np.searchsorted(edges, s, side="right"), minlength=self.n_bins)
        self.edges_ = edges[merge_small_bins(counts, min_calibration(self.alpha))]
        b = self._bin(s)
        self.urw_ = URW().fit(v, y)  # for a bin with no calibration points (none once small bins merge)
        self.bins_ = {int(k): URW().fit(v[b == k], y[b == k]) for k in np.unique(b)}
        return self

    def _get_state(self) -> dict:
        check_is_fitted(self, "bins_")
        return {"edges_": self.edges_.tolist(), "urw_": self.urw_.to_dict(),
                "bins_": {str(k): u.to_dict() for k, u in self.bins_.items()}}  # json keys are strings

    def _set_state(self, state: dict, where: str) -> None:
        check_level(self.alpha)
        edges = np.asarray(_field(state, "edges_", where), dtype=float)
        if edges.ndim != 1 or edges.size > self.n_bins - 1 or np.any(np.diff(edges) < 0):
            raise InputError(f"{where}.edges_", f"{edges.size} bin edges for n_bins={self.n_bins} (at most "
                             f"{self.n_bins - 1}, ascending)")
        bins = _mapping(_field(state, "bins_", where), f"{where}.bins_")
        self.edges_ = edges
        self.urw_ = URW.from_dict(_field(state, "urw_", where), f"{where}.urw_")
        self.bins_ = {int(k): URW.from_dict(u, f"{where}.bins_.{k}") for k, u in bins.items()}

    def raw_weight(self, v_hat, strata=None):
        check_is_fitted(self, "bins_")
        v, b = _soft(v_hat), self._bin(strata)
        w = np.empty_like(v)
        for k in np.unique(b):
            m = b == k
            w[m] = self._weights(self.bins_.get(int(k), self.urw_), v[m])
        return w


class URWSingleVote(URW):
    """URW-double-dagger (ablation): weights the base template's single vote by its p-value
    under a two-template soft score. Fit and score on the two-template ``v_hat``; pass the
    base template's votes as ``votes``."""

    def response_scores(self, v_hat, response, strata=None, votes=None):
        v = _soft(v_hat)
        base = hard_vote(v) if votes is None else np.asarray(votes, float)
        return normalised_score(self.p_count(base, v), base, response)


METHODS = ("Uniform", "Beta-Binomial", "Sampling Ensemble", "SCP", "Mondrian-SCP", "URW", "URW†", "URW‡")
