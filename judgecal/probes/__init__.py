"""Probe banks, prompt templates and the request plan."""

from judgecal.probes.bank import BASELINE, DIRECTIONS, STRENGTHS, Probe, ProbeBank, load_bank
from judgecal.probes.plan import build_plan, plan_batches, request_id, write_plan
from judgecal.probes.render import ProbeRenderer
from judgecal.probes.templates import TEMPLATES, PromptTemplate, template_for

__all__ = [
    "BASELINE",
    "DIRECTIONS",
    "STRENGTHS",
    "TEMPLATES",
    "Probe",
    "ProbeBank",
    "ProbeRenderer",
    "PromptTemplate",
    "build_plan",
    "load_bank",
    "plan_batches",
    "request_id",
    "template_for",
    "write_plan",
]
