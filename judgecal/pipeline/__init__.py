"""Collection on Ray Data and the atomic Parquet part store."""

from judgecal.pipeline.collect import CollectStats, JudgeStage, collect, init_ray, item_aligned_blocks
from judgecal.pipeline.store import PartStore

__all__ = ["CollectStats", "JudgeStage", "PartStore", "collect", "init_ray", "item_aligned_blocks"]
