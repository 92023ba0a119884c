"""Your own prompt: a template file, validated when the config loads.

A TOML file with ``system``, ``user`` and (optional) ``answer_prefix``; ``user`` is a Jinja
template over five slots: ``{{ content }}`` (the evaluated text), ``{{ source }}`` (its
article, prompt, question or context), ``{{ lo }}`` and ``{{ hi }}`` (the judge's scale) and
``{{ clause }}`` (the probe's instruction). ``content``, ``lo``, ``hi`` and ``clause`` are
required, ``clause`` must be the last thing in ``user`` (so every probe of an item shares the
prompt up to it, and the engines reuse that prefix instead of recomputing it), and a slot
not in the five is refused: each in one line naming the file and the slot. Rendering is
sandboxed (``jinja2.sandbox``) with undefined slots an error, so a template can format but
never reach Python. The file's text is part of the study's identity (a changed template
needs a new output folder).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from judgecal.errors import InputError
from judgecal.ids import stable_hash
from judgecal.probes.templates import PromptTemplate

SLOTS = ("content", "source", "lo", "hi", "clause")
REQUIRED = ("content", "lo", "hi", "clause")
_CLAUSE_LAST = re.compile(r"\{\{-?\s*clause\s*-?\}\}\s*$")
_FIELDS = ("system", "user", "answer_prefix")


@lru_cache(maxsize=64)
def _compiled(source: str):
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env, env.from_string(source)


def slots_used(user: str) -> set[str]:
    """The slots a template's text names."""
    from jinja2 import meta

    env, _ = _compiled("")
    return meta.find_undeclared_variables(env.parse(user))


def render_jinja(template: str, **slots) -> str:
    return _compiled(template)[1].render(**slots)


def load_template_file(path: str) -> PromptTemplate:
    """The template of ``path`` as a :class:`PromptTemplate` whose task is ``custom:<hash>``."""
    from jinja2 import TemplateSyntaxError

    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "no such file" if not p.exists() else "is a folder, not a template file")
    from judgecal.config import read_toml

    data = read_toml(p)
    for key in data:
        if key not in _FIELDS:
            raise InputError(f"{p}: {key}", f"unknown field (known: {', '.join(_FIELDS)})")
    for key in ("system", "user"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise InputError(f"{p}: {key}", "missing or empty (text)")
    prefix = data.get("answer_prefix", "Rating: ")
    if not isinstance(prefix, str):
        raise InputError(f"{p}: answer_prefix", "must be text")
    user = data["user"]
    try:
        used = slots_used(user)
    except TemplateSyntaxError as e:
        raise InputError(f"{p}: user line {e.lineno}", f"not a valid template ({e.message})") from None
    unknown = sorted(used - set(SLOTS))
    if unknown:
        raise InputError(f"{p}: user", f"unknown slot {{{{ {unknown[0]} }}}} (the slots: "
                         f"{', '.join('{{ ' + s + ' }}' for s in SLOTS)})")
    missing = [s for s in REQUIRED if s not in used]
    if missing:
        raise InputError(f"{p}: user", f"has no {{{{ {missing[0]} }}}} slot (needed: "
                         f"{', '.join('{{ ' + s + ' }}' for s in REQUIRED)})")
    if not _CLAUSE_LAST.search(user):
        raise InputError(f"{p}: user", "{{ clause }} must be the last thing in it: the probe's instruction comes "
                         "after the shared part, so every probe of an item reuses that prefix")
    if "{%" in user:
        raise InputError(f"{p}: user", "holds a {% statement %}: only the slots are filled in (a template is text "
                         "with slots, so every prompt of an item shares its head)")
    try:  # a trial render: what the sandbox refuses (attribute tricks, filters on the wrong type) says so here
        render_jinja(user, content="text", source="source", lo=1, hi=5, clause="")
    except Exception as e:  # noqa: BLE001 - jinja raises many kinds; each is the template's fault
        raise InputError(f"{p}: user", f"cannot be rendered ({type(e).__name__}: {e})") from None
    task = f"custom:{stable_hash(data['system'], user, prefix, n=8)}"
    return PromptTemplate(task, data["system"], user, prefix, version="file", jinja=True)
