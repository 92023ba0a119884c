"""Judge diagnostics: what kind of judge this is, measured on the study's own requests.

Each diagnostic is a registered object (:mod:`judgecal.diagnostics.base`) that declares the
plan rows it needs and writes one typed section of the results log; ``[diagnostics] run``
picks them. A new diagnostic is a module that calls :func:`register`.
"""

from judgecal.diagnostics.base import (
    DIAGNOSTICS,
    Diagnostic,
    DiagnosticContext,
    DiagnosticPlan,
    PlanNeeds,
    diagnostic_plans,
    plan_needs,
    register,
)

__all__ = ["DIAGNOSTICS", "Diagnostic", "DiagnosticContext", "DiagnosticPlan", "PlanNeeds", "diagnostic_plans",
           "plan_needs", "register"]
