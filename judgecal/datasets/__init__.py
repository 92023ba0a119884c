"""Dataset loaders to the canonical items table."""

from judgecal.datasets.items import TargetSpec, build_items, human_criteria, subset_items, validate_items
from judgecal.datasets.loaders import (DEFAULT_TARGETS, SCALES, TASKS, check_dataset_name, known_scale, load_dataset,
                                       load_generic)

__all__ = [
    "DEFAULT_TARGETS",
    "SCALES",
    "TASKS",
    "TargetSpec",
    "build_items",
    "check_dataset_name",
    "human_criteria",
    "known_scale",
    "load_dataset",
    "load_generic",
    "subset_items",
    "validate_items",
]
