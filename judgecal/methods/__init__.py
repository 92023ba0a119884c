"""Study methods behind one protocol, and the runner that owns everything around them.

A method (PRISM, URW) says what it pins, what it needs of an engine, how it plans and
collects, how it fits and evaluates, and how its results section reads as text and HTML.
:class:`judgecal.methods.runner.StudyRunner` owns identity and refusal, stage order,
preconditions, timing, run facts and the results log. A third method adds a module that
calls :func:`register`; the CLI and ``jobs/`` look methods up by name.
"""

from judgecal.methods.base import METHODS, Method, get_method, register

__all__ = ["METHODS", "Method", "get_method", "register"]
