"""Collection on Ray Data, the exactly-once part store, and plan ⋈ responses."""

from judgecal.pipeline.answered import Completeness, answered, completeness
from judgecal.pipeline.collect import CollectSettings, CollectStats, collect, init_ray
from judgecal.pipeline.plan_source import PendingIndex, PlanSource, scan_plan
from judgecal.pipeline.store import PartStore

__all__ = ["CollectSettings", "CollectStats", "Completeness", "PartStore", "answered", "collect", "completeness",
           "init_ray", "PendingIndex", "PlanSource", "scan_plan"]
