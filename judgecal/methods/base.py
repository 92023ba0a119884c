"""The method protocol and its registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from judgecal.errors import InputError

if TYPE_CHECKING:
    from judgecal.config import StudyConfig
    from judgecal.methods.runner import StudyRun


class Method(Protocol):
    name: str
    results_name: str  # the results log's file name in the workspace
    report_name: str

    def identity(self, cfg: "StudyConfig") -> dict:
        """What study.json pins: a different value in a later run is refused with one line."""

    def plan_spec(self, cfg: "StudyConfig") -> dict:
        """The config fields that size the plan: a change re-plans at collect, and fit /
        evaluate refuse a config whose plan is not the collected one."""

    def needs(self, cfg: "StudyConfig") -> set[str]:
        """Engine capabilities the study uses (checked before any request is sent)."""

    def collect(self, run: "StudyRun") -> None:
        """Write the plan(s) and collect them through ``run.collect``."""

    def fit(self, run: "StudyRun") -> dict:
        """Fit on everything collected; returns the fit section (also saved by the method)."""

    def evaluate(self, run: "StudyRun") -> tuple[dict, dict]:
        """Held-out evaluation: (results section, run facts about the answered requests)."""

    def format_text(self, log: dict) -> str: ...

    def render_html(self, log: dict) -> str: ...


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    METHODS[method.name] = method
    return method


def get_method(name: str) -> Method:
    import judgecal.methods.prism  # noqa: F401 - registers
    import judgecal.methods.urw  # noqa: F401 - registers

    if name not in METHODS:
        raise InputError("[study].method", f"unknown method {name!r} (known: {', '.join(sorted(METHODS))})")
    return METHODS[name]
