"""The study's side of diagnostics: checked when the config loads, run at evaluate."""

from __future__ import annotations

from judgecal.config import DiagnosticsConfig
from judgecal.diagnostics.base import DIAGNOSTICS, DiagnosticContext, plan_needs
from judgecal.errors import InputError
from judgecal.scale import ScoreScale

READINGS = ("auto", "parsed", "expected")


def check_diagnostics(cfg, where: str) -> None:
    d = cfg.diagnostics
    at = f"{where} [diagnostics]"
    if not d.run and d != DiagnosticsConfig():
        raise InputError(f"{at}.run", "names no diagnostic, so no other [diagnostics] field is read; "
                         f"name some (known: {', '.join(sorted(DIAGNOSTICS.load()))}) or remove the section")
    seen = set()
    for name in d.run:
        DIAGNOSTICS.lookup(name, f"{at}.run")
        if name in seen:
            raise InputError(f"{at}.run", f"{name!r} is named twice")
        seen.add(name)
    # its numbers' lower bounds (and [pool].temperature, [pool].seed): judgecal.config.RULES
    if d.orders > 8:
        raise InputError(f"{at}.orders", f"must lie in 2-8 (as listed, reversed, then random orders), not {d.orders}")
    if d.reading not in READINGS:
        raise InputError(f"{at}.reading", f"unknown reading {d.reading!r} (known: {', '.join(READINGS)})")
    for i, name in enumerate(d.scales):
        try:
            ScoreScale.parse(name)
        except InputError as e:
            raise InputError(f"{at}.scales[{i}]", e.problem) from None
    if plan_needs(cfg).neutral:
        from judgecal.probes import load_bank

        bank = load_bank(cfg.pool.bank)
        if not bank.neutral:
            raise InputError(f"{at}.run", f"{', '.join(d.run)} compares probes with neutral clauses; bank "
                             f"{bank.name} has none (use a bank with [neutral] clauses, e.g. expanded)")


def run_diagnostics(cfg, answered, read_plan=None, items=None) -> list:
    """Every section of the study's diagnostics, in the order ``run`` names them
    (``read_plan``: name -> the answered table of a diagnostic's own plan)."""
    if not cfg.diagnostics.run:
        return []
    ctx = DiagnosticContext(cfg, answered, read_plan=read_plan, items=items)
    return [s for name in cfg.diagnostics.run for s in DIAGNOSTICS.lookup(name).run(ctx)]
