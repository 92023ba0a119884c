"""The verifier's question in six meaning-preserving paraphrases, frozen and versioned.

The prompt keeps the fixed output format and then the instruction and the response first
(shared by every criterion and template of a response, so engines reuse that prefix), then
the template's question about the criterion. The judge's turn starts with ``{"verdict": ``
so the next token is the verdict (structured output by construction on the local engine).
A template set's ``version`` hashes its texts: a calibration records it, and weighting
with a set that changed since calibration is refused.
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path

from judgecal.errors import InputError
from judgecal.ids import stable_hash

# The output format sits in the system message, ahead of the shared prefix, so that the
# per-(criterion, template) suffix is only the question.
SYSTEM = ("You are a strict reviewer. You check whether a response to an instruction meets one criterion. "
          'Answer in JSON: {"verdict": 1} if the criterion is met, {"verdict": 0} if it is not.')
BODY = "Instruction:\n{prompt}\n\nResponse:\n{response}\n\n"
ANSWER_PREFIX = '{"verdict": '

QUESTIONS = (
    "Criterion: {criterion}\nDoes the response meet this criterion?",
    "Does the response above satisfy the following requirement? {criterion}",
    "Check the response against this rubric item: {criterion}\nIs the item fulfilled?",
    "Answer this question about the response: {criterion}",
    "Consider the criterion \"{criterion}\". Would a careful reviewer say the response meets it?",
    "Rubric check for the response shown above. {criterion}",
)


@dataclass(frozen=True)
class TemplateSet:
    questions: tuple[str, ...] = QUESTIONS
    active: tuple[int, ...] = tuple(range(len(QUESTIONS)))  # after an audit, the templates kept

    @property
    def version(self) -> str:
        return stable_hash(SYSTEM, BODY, ANSWER_PREFIX, *self.questions, repr(self.active))

    @property
    def base(self) -> int:
        return self.active[0]

    def render(self, template: int, prompt: str, response: str, criterion: str) -> tuple[str, str]:
        user = BODY.format(prompt=prompt, response=response) + self.questions[template].format(criterion=criterion)
        return SYSTEM, user

    def check_same(self, version: str, where: str) -> None:
        if version != self.version:
            raise InputError(where, f"template set changed since calibration (calibrated with {version}, "
                             f"now {self.version}); recalibrate")


def audit_sheet(criteria: list[str], out: Path, n: int = 50, seed: int = 0, templates: TemplateSet = TemplateSet()):
    """Sample ``n`` (criterion, template) pairs into a CSV a person marks (meaning_changed = 1)."""
    rng = random.Random(seed)
    pool = sorted(set(criteria))
    if not pool:
        raise InputError("audit", "no criteria to sample")
    rows = [(k, t, c) for k, (t, c) in enumerate(
        (rng.choice(templates.active), rng.choice(pool)) for _ in range(n))]
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["pair", "template", "criterion", "question_as_asked", "meaning_changed"])
        for k, t, c in rows:
            w.writerow([k, t, c, templates.questions[t].format(criterion=c), ""])
    return out


def apply_audit(sheet: Path, out: Path, max_changes: int = 2, templates: TemplateSet = TemplateSet()) -> TemplateSet:
    """Drop every template with more than ``max_changes`` marked meaning changes; store the result."""
    marks = {t: 0 for t in templates.active}
    with open(sheet, newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            try:
                t, m = int(row["template"]), (row["meaning_changed"] or "0").strip()
            except (KeyError, ValueError):
                raise InputError(f"{sheet} row {i + 2}", "needs integer 'template' and a 'meaning_changed' mark") from None
            if m not in ("0", "1"):
                raise InputError(f"{sheet} row {i + 2}", f"meaning_changed must be 0, 1 or empty, not {m!r}")
            marks[t] = marks.get(t, 0) + int(m)
    kept = tuple(t for t in templates.active if marks.get(t, 0) <= max_changes)
    if not kept:
        raise InputError(str(sheet), "every template was dropped by the audit")
    result = TemplateSet(templates.questions, kept)
    out.write_text(json.dumps({"marks": marks, "max_changes": max_changes, "kept": list(kept),
                               "version": result.version}, indent=2))
    return result


def load_template_set(audit_path: str | None) -> TemplateSet:
    if not audit_path:
        return TemplateSet()
    p = Path(audit_path)
    if not p.is_file():
        raise InputError(str(p), "no such template audit file")
    data = json.loads(p.read_text())
    return TemplateSet(QUESTIONS, tuple(data["kept"]))
