"""Prompt templates per task. Content, task, output format and scale stay fixed; the probe
clause goes after the content so every probe of an item shares the long prefix
(source, then content), which the engines reuse instead of recomputing."""

from __future__ import annotations

from dataclasses import dataclass

from judgecal.errors import InputError
from judgecal.ids import stable_hash
from judgecal.scale import ScoreScale


@dataclass(frozen=True)
class PromptTemplate:
    task: str
    system: str
    user: str  # slots: {source} {content} {clause} {lo} {hi}; a template file's: {{ source }} ...
    answer_prefix: str  # written at the start of the judge's turn where the engine allows it
    version: str = "1"
    jinja: bool = False  # a user's template file (judgecal.probes.template_file), rendered sandboxed
    source_optional: bool = False  # its {source} may be empty (a conversation without context)

    def render(self, source: str, content: str, clause: str, scale: ScoreScale) -> tuple[str, str]:
        return self.system, self.render_head(source, content, scale) + self.clause_text(clause)

    # The clause is the last slot of every template, so a prompt is the item's head plus the
    # probe's tail; the render stage joins the two columns in Arrow instead of per row.
    def render_head(self, source: str, content: str, scale: ScoreScale) -> str:
        if self.jinja:
            from judgecal.probes.template_file import render_jinja

            return render_jinja(self.user, source=source, content=content, clause="", lo=scale.lo, hi=scale.hi)
        assert self.user.endswith("{clause}"), "the clause must be the last slot"
        return self.user.format(source=source, content=content, clause="", lo=scale.lo, hi=scale.hi)

    def shows_source(self) -> bool:
        """Whether the prompt has a ``source`` slot (the article, question, ...)."""
        if self.jinja:
            from judgecal.probes.template_file import slots_used

            return "source" in slots_used(self.user)
        return "{source}" in self.user

    @staticmethod
    def clause_text(clause: str) -> str:
        return f"\n\n{clause}" if clause else ""

    def fingerprint(self, clause: str, scale: ScoreScale, inject: str = "") -> str:
        """Hash of everything but the item: changes whenever the template, clause, scale or
        the text a probe injects into the content does."""
        extra = ("inject", inject) if inject else ()  # plain probes keep the hash they always had
        return stable_hash(self.task, self.version, self.system, self.user, self.answer_prefix, clause, scale, *extra)

    @staticmethod
    def injected(content: str, inject: str) -> str:
        """The evaluated content with an injected instruction at its end, as a text would carry it."""
        return f"{content}\n\n{inject}" if inject else content


# The output format and scale come first, with the task, so that the per-probe suffix
# (clause + end of turn) is all that differs between the probes of one item.
_FORMAT = (
    "Rate the overall quality of the {what} on a scale from {{lo}} to {{hi}}, where {{lo}} is the worst "
    "and {{hi}} is the best. Answer with a single number."
)

TEMPLATES = {
    "summary": PromptTemplate(
        "summary",
        "You are a careful evaluator of news summaries.",
        _FORMAT.format(what="summary of the news article")
        + "\n\nArticle:\n{source}\n\nSummary:\n{content}{clause}",
        "Rating: ",
    ),
    "story": PromptTemplate(
        "story",
        "You are a careful evaluator of short stories.",
        _FORMAT.format(what="story written for the prompt") + "\n\nPrompt:\n{source}\n\nStory:\n{content}{clause}",
        "Rating: ",
    ),
    "dialogue": PromptTemplate(
        "dialogue",
        "You are a careful evaluator of dialogue responses.",
        _FORMAT.format(what="next response in the conversation") + "\n\n{source}\n\nResponse:\n{content}{clause}",
        "Rating: ",
    ),
    "conversation": PromptTemplate(
        "conversation",
        "You are a careful evaluator of conversations.",
        _FORMAT.format(what="whole conversation") + "\n\nContext:\n{source}\n\nConversation:\n{content}{clause}",
        "Rating: ",
        source_optional=True,
    ),
    "reasoning": PromptTemplate(
        "reasoning",
        "You are a careful evaluator of step-by-step reasoning.",
        _FORMAT.format(what="reasoning written for the problem") + "\n\nProblem:\n{source}\n\nReasoning:\n"
        "{content}{clause}",
        "Rating: ",
    ),
    "qa": PromptTemplate(
        "qa",
        "You are a careful evaluator of answers to questions.",
        _FORMAT.format(what="answer to the question") + "\n\nQuestion:\n{source}\n\nAnswer:\n{content}{clause}",
        "Rating: ",
    ),
    "instruction": PromptTemplate(
        "instruction",
        "You are a careful evaluator of responses to instructions.",
        _FORMAT.format(what="response to the instruction") + "\n\nInstruction:\n{source}\n\nResponse:\n"
        "{content}{clause}",
        "Rating: ",
    ),
}


_FILES: dict[str, PromptTemplate] = {}  # templates read from a user's file, by task name (custom:...)


def register_templates(templates: dict[str, PromptTemplate]) -> None:
    """Make templates read from files known to this process: the driver reads them when the
    config loads; a renderer carries them to the Ray workers that render its prompts."""
    _FILES.update(templates)


def file_templates() -> dict[str, PromptTemplate]:
    return dict(_FILES)


def template_for(task: str) -> PromptTemplate:
    if task in TEMPLATES:
        return TEMPLATES[task]
    if task in _FILES:
        return _FILES[task]
    raise InputError("task", f"no prompt template for task {task!r} (known: {', '.join(TEMPLATES)})")
