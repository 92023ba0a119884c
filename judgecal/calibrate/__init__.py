"""Calibrators (scikit-learn conventions), URW and its baselines, and the feature builder."""

from judgecal.calibrate.features import FeatureTable, build_features
from judgecal.calibrate.prism import DEFAULT_GAMMAS, PRISM, REPRESENTATIONS
from judgecal.calibrate.urw import (
    METHODS,
    SCP,
    URW,
    BetaBinomial,
    MondrianSCP,
    SamplingEnsemble,
    TemplateVoteUniform,
    Uniform,
    URWSingleVote,
)

__all__ = [
    "DEFAULT_GAMMAS",
    "METHODS",
    "PRISM",
    "REPRESENTATIONS",
    "SCP",
    "URW",
    "BetaBinomial",
    "FeatureTable",
    "MondrianSCP",
    "SamplingEnsemble",
    "TemplateVoteUniform",
    "URWSingleVote",
    "Uniform",
    "build_features",
]
