"""Studies over one collected pool: designs (column selections), screening against neutral
controls, the exploration / confirmation split, subset curves, penalty sensitivity and
correction profiles, run locally (vectorised) or as Ray Tune trials."""
