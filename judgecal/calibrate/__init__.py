"""Calibrators (scikit-learn conventions) and the feature builder."""

from judgecal.calibrate.features import FeatureTable, build_features
from judgecal.calibrate.prism import DEFAULT_GAMMAS, PRISM, REPRESENTATIONS

__all__ = ["DEFAULT_GAMMAS", "PRISM", "REPRESENTATIONS", "FeatureTable", "build_features"]
