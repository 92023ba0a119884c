"""Collection on Ray Data, the exactly-once part store, and plan ⋈ responses."""

from judgecal.pipeline.answered import Completeness, answered, completeness
from judgecal.pipeline.collect import CollectSettings, CollectStats, collect, init_ray, item_aligned_blocks
from judgecal.pipeline.store import PartStore

__all__ = ["CollectSettings", "CollectStats", "Completeness", "PartStore", "answered", "collect", "completeness",
           "init_ray", "item_aligned_blocks"]
