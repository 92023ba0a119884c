"""Within-group agreement with humans, cross-fitting and bootstrap intervals."""

from judgecal.evaluate.crossfit import crossfit_predict
from judgecal.evaluate.metrics import GroupCorrelation, Interval, bootstrap_mean, paired_difference, within_group
from judgecal.evaluate.prism_eval import MethodResult, evaluate_prism

__all__ = [
    "GroupCorrelation",
    "Interval",
    "MethodResult",
    "bootstrap_mean",
    "crossfit_predict",
    "evaluate_prism",
    "paired_difference",
    "within_group",
]
