"""Study methods behind one protocol, and the runner that owns everything around them.

A method (PRISM, URW) says what it pins, what it needs of an engine, how it plans and
collects, how it fits and evaluates, and how its results section reads as text and HTML.
:class:`judgecal.methods.runner.StudyRunner` owns identity and refusal, stage order,
preconditions, timing, run facts and the results log. A third method is a module that
calls :func:`register`, named in ``BUILTIN_METHODS`` or installed under the ``judgecal.methods``
entry point group; the CLI and ``jobs/`` look methods up by name. Each method owns its config
sections (``sections``, checked by its ``check_config``); tests/test_methods_contract.py runs
the same contract on every registered method.
"""

from judgecal.methods.base import METHODS, Method, get_method, load_methods, register

__all__ = ["METHODS", "Method", "get_method", "load_methods", "register"]
