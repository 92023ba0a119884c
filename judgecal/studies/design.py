"""Pool and design: what is collected against what is fitted.

The pool (``[pool]``) decides the plan; the design (``[design]``) is a selection of the
feature table's columns, made in memory, so a design change never re-collects. A design
names properties, strengths and one-sided families; ``None`` means everything pooled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judgecal.calibrate.features import FeatureTable
from judgecal.errors import InputError, unread_setting
from judgecal.probes.bank import PROPERTY

CONFIRMATION_WHEN_SCREENING = 0.3
SCREEN_RULES = ("lower_bound", "estimate")


@dataclass(frozen=True)
class Design:
    attributes: tuple[str, ...]
    strengths: tuple[str, ...]
    families: tuple[str, ...]
    screen: bool
    confirmation: float  # share of groups held out for the confirmation table (0: none)

    def columns(self, feats: FeatureTable) -> list[str]:
        """The feature columns this design fits, in the table's order."""
        out = []
        for c in feats.feature_columns:
            fam = feats.families.get(c, PROPERTY if c.endswith((":more", ":less")) else None)
            if fam == PROPERTY:
                attr, strength = unit_of(c), _strength_of(c)
                if attr in self.attributes and (strength is None or strength in self.strengths):
                    out.append(c)
            elif fam in self.families:
                out.append(c)
        return out


def unit_of(column: str) -> str:
    """The unit a feature column belongs to: a property (``length`` for ``length@strong:more``)
    or the one-sided unit itself (``role:editor``)."""
    if column.endswith((":more", ":less")):
        return column.rsplit(":", 1)[0].split("@", 1)[0]
    return column


def _strength_of(column: str) -> str | None:
    head = column.rsplit(":", 1)[0]
    return head.split("@", 1)[1] if "@" in head else None


def resolve_design(cfg, where: str = "[design]") -> Design:
    """The study's design against its pool: one line naming the field when it asks for
    something the pool does not collect."""
    from judgecal.methods.prism import pool_probes  # the pool's probes, as collect plans them

    pool, d = cfg.pool, cfg.design
    bank, probes = pool_probes(cfg)
    pooled_attrs = list(dict.fromkeys(p.attribute for p in probes if p.family == PROPERTY))
    pooled_families = tuple(dict.fromkeys(p.family for p in probes if p.direction == "oneside"))
    attrs = _subset(d.attributes, pooled_attrs, f"{where}.attributes", "properties")
    strengths = _subset(d.strengths, list(pool.strengths), f"{where}.strengths", "strengths")
    families = _subset(d.families, list(pooled_families), f"{where}.families", "one-sided families")
    screen = pool.neutral if d.screen is None else d.screen
    if screen and not pool.neutral:
        raise InputError(f"{where}.screen", "screening compares units with the neutral controls; set "
                         "[pool].neutral = true (a pool change re-plans) or screen = false")
    if d.screen_rule not in SCREEN_RULES:
        raise InputError(f"{where}.screen_rule", f"unknown rule {d.screen_rule!r} (known: {', '.join(SCREEN_RULES)})")
    confirmation = (CONFIRMATION_WHEN_SCREENING if screen else 0.0) if d.confirmation is None else d.confirmation
    if not 0 <= confirmation < 1:
        raise InputError(f"{where}.confirmation", f"must lie in [0, 1), not {confirmation:g}")
    if screen and confirmation == 0:
        raise InputError(f"{where}.confirmation", "screening selects units on the groups it sees; a table on the "
                         "same groups would overstate them: hold some out (e.g. 0.3)")
    if d.screen_bootstrap < 100:
        raise InputError(f"{where}.screen_bootstrap", f"must be at least 100, not {d.screen_bootstrap}")
    if not (attrs or families):
        raise InputError(where, "selects no feature columns")
    if families and cfg.fit.representation == "taylor":
        raise InputError(f"{where}.families", "taylor is defined for more/less pairs; one-sided units cannot be "
                         "taylor features (set families = [] or use paired)")
    if pool.neutral and not bank.neutral:
        raise InputError(f"{where.replace('[design]', '[pool]')}.neutral", f"bank {bank.name} has no neutral clauses")
    _check_read(d, screen, where)
    return Design(tuple(attrs), tuple(strengths), tuple(families), bool(screen), float(confirmation))


def _check_read(d, screen: bool, where: str) -> None:
    """A screening or subset setting given where nothing reads it is refused: the study would
    run without it, and say nothing (a user's finding: screen_rule with screen = false)."""
    from judgecal.config import DesignConfig

    unread = [(f, "screening is off ([design].screen = false, or no neutral controls in [pool])")
              for f in ("screen_rule", "screen_threshold", "screen_bootstrap") if not screen] + \
             [("subsets_per_size", "[design].subsets = false")] * (not d.subsets)
    for field_, why in unread:
        if getattr(d, field_) != getattr(DesignConfig, field_):
            unread_setting(f"{where}.{field_}", f"set to {getattr(d, field_)!r}, but {why}: nothing reads it; "
                             "remove it, or turn that part on")


def _subset(wanted, pooled: list, where: str, what: str) -> list:
    if wanted is None:
        return list(pooled)
    missing = [w for w in wanted if w not in pooled]
    if missing:
        raise InputError(where, f"{missing[0]!r} is not in the pool (pooled {what}: {', '.join(map(str, pooled)) or 'none'}); "
                         "a design selects from what [pool] collects")
    return list(wanted)


def held_out_count(confirmation: float, n_groups: int) -> int:
    """The groups a ``confirmation`` share of ``n_groups`` holds out: at least one when positive."""
    return max(1, int(round(confirmation * n_groups))) if confirmation > 0 else 0


def split_groups(groups, confirmation: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Exploration and confirmation groups: a seeded random ``confirmation`` share held out
    (at least one group when the share is positive). Sorted group ids in, so the split does
    not depend on row order."""
    ids = np.array(sorted(set(map(str, groups))))
    if confirmation <= 0:
        return ids, ids[:0]
    k = held_out_count(confirmation, len(ids))
    if len(ids) - k < 2:
        raise InputError("[design].confirmation", f"holding out {k} of {len(ids)} groups leaves fewer than 2 to "
                         "explore; lower it or add groups")
    held = np.random.default_rng(seed).choice(len(ids), size=k, replace=False)
    mask = np.zeros(len(ids), bool)
    mask[held] = True
    return ids[~mask], ids[mask]
