"""URW inputs: rubric and pairs tables, verifier templates, generated criteria, the verify plan."""

from judgecal.rubrics.criteria import (
    CriteriaRenderer,
    build_criteria_plan,
    criteria_from_answers,
    parse_criteria,
    rubric_for_pairs,
)
from judgecal.rubrics.data import (
    PairSet,
    check_disjoint,
    load_generic_rubric,
    load_infobench,
    load_judgebench,
    load_llmbar,
    load_rmbench,
)
from judgecal.rubrics.plan import VerifierRenderer, build_verify_plan
from judgecal.rubrics.templates import TemplateSet, apply_audit, audit_sheet, load_template_set

__all__ = [
    "PairSet",
    "TemplateSet",
    "VerifierRenderer",
    "apply_audit",
    "audit_sheet",
    "build_verify_plan",
    "check_disjoint",
    "CriteriaRenderer",
    "build_criteria_plan",
    "criteria_from_answers",
    "load_generic_rubric",
    "load_infobench",
    "load_judgebench",
    "load_llmbar",
    "load_rmbench",
    "load_template_set",
    "parse_criteria",
    "rubric_for_pairs",
]
