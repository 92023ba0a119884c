"""Declarative probe banks (TOML) and the probes they expand to.

A bank has ``[wordings]`` (``more_slight`` ... ``less_strong`` with a ``{phrase}`` slot),
``[[attributes]]`` (family ``property``: ``name``, ``phrase``, optional per-wording
overrides, optional ``tasks``), ``[[units]]`` (one-sided units: ``family`` = context | role |
focus | stakes, ``name``, ``clause``, optional ``tasks``) and ``[neutral] clauses``
(controls, family ``neutral``). The older ``[oneside]`` table (name = clause) is read as
units whose family is the name's prefix (``role_editor`` -> role ``editor``; no known
prefix: context). ``tasks`` lists the task types a unit fits (summary, story, dialogue);
omitted, it fits all. Banks shipped with judgecal: ``style``, ``quality`` and ``expanded``.

Feature columns per family: a property gives two (``more``, ``less``), a one-sided unit one,
a neutral clause none (a control for screening).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from judgecal.errors import InputError
from judgecal.ids import stable_hash

DIRECTIONS = ("more", "less")
STRENGTHS = ("slight", "standard", "strong")
BASELINE = "baseline"
PROPERTY, NEUTRAL, CRITERION, JOINT, INJECTION = "property", "neutral", "criterion", "joint", "injection"
# Families collected for controls, baselines and diagnostics: never PRISM feature columns.
NOT_FEATURE_FAMILIES = (NEUTRAL, CRITERION, JOINT, INJECTION)
ONESIDED = ("context", "role", "focus", "stakes")
FAMILIES = (PROPERTY, *ONESIDED, NEUTRAL)
TASK_TYPES = ("summary", "story", "dialogue")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")


@dataclass(frozen=True)
class Probe:
    """One instruction variant. ``clause`` is inserted after the content; empty for the baseline."""

    probe_id: str
    clause: str
    attribute: str | None = None
    direction: str | None = None  # more | less | neutral | oneside
    strength: str | None = None
    family: str | None = None  # property | context | role | focus | stakes | neutral; None: baseline
    inject: str = ""  # text appended to the evaluated content itself (the injection diagnostic)


@dataclass(frozen=True)
class Unit:
    """A one-sided unit: one instruction, one feature column."""

    family: str
    name: str
    clause: str
    tasks: tuple[str, ...] = TASK_TYPES

    @property
    def probe_id(self) -> str:
        return f"{self.family}:{self.name}"


@dataclass(frozen=True)
class ProbeBank:
    name: str
    version: str
    attributes: dict[str, dict[str, str]]  # attribute -> {"more_standard": text, ...}
    neutral: tuple[str, ...]
    oneside: dict[str, str]  # the older [oneside] table, as written (kept for the bank's hash)
    units: tuple[Unit, ...] = ()
    attribute_tasks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # only where narrower than all

    def contents_hash(self) -> str:
        """What a study pins: any change of a clause or of which tasks a unit fits."""
        declared = self.units[len(self.oneside):]  # [[units]]; the [oneside] ones are hashed as written
        extra = (declared, sorted(self.attribute_tasks.items())) if declared or self.attribute_tasks else ()
        return stable_hash(self.attributes, self.neutral, self.oneside, *extra)

    def families(self) -> tuple[str, ...]:
        """The one-sided families this bank has, in the canonical order."""
        have = {u.family for u in self.units}
        return tuple(f for f in ONESIDED if f in have)

    def probes(
        self,
        attributes: list[str] | None = None,
        strengths: tuple[str, ...] = ("standard",),
        neutral: bool = False,
        oneside: bool = False,
        families: tuple[str, ...] = (),
        task: str | None = None,
    ) -> list[Probe]:
        """The baseline first, then more/less per attribute and strength, then the one-sided
        units of ``families`` (``oneside=True``: all of them), then the neutral controls.
        ``task`` keeps only the units that fit it (named attributes must fit it)."""
        chosen = [a for a in self.attributes if self._fits(a, task)] if attributes is None else list(attributes)
        if not chosen:
            raise InputError(f"bank {self.name}", "no attributes selected")
        for a in chosen:
            if a not in self.attributes:
                raise InputError(
                    f"bank {self.name} attributes", f"unknown attribute {a!r} (known: {', '.join(self.attributes)})"
                )
            if not self._fits(a, task):
                raise InputError(f"bank {self.name} attributes", f"attribute {a!r} does not fit task {task!r} "
                                 f"(it fits {', '.join(self.attribute_tasks[a])})")
        for s in strengths:
            if s not in STRENGTHS:
                raise InputError("[pool].strengths", f"unknown strength {s!r} (known: {', '.join(STRENGTHS)})")
        for f in families:
            if f not in self.families():
                raise InputError("[pool].families", f"bank {self.name} has no {f!r} units "
                                 f"(it has: {', '.join(self.families()) or 'none'})")
        out = [Probe(BASELINE, "")]
        for a in chosen:
            for s in strengths:
                for d in DIRECTIONS:
                    out.append(Probe(f"{a}:{d}:{s}", self.attributes[a][f"{d}_{s}"], a, d, s, PROPERTY))
        wanted = self.families() if oneside else families
        out += [Probe(u.probe_id, u.clause, None, "oneside", None, u.family) for f in wanted for u in self.units
                if u.family == f and (task is None or task in u.tasks)]
        if neutral:
            out += [Probe(f"neutral:{i}", c, None, "neutral", None, NEUTRAL) for i, c in enumerate(self.neutral)]
        return out

    def joint_probes(self, attributes: list[str], strength: str, pairs: int) -> list[Probe]:
        """Two property instructions in one probe ("more a" then "more b"), for disjoint pairs
        of ``attributes`` in order: the diagnostic that compares a joint response with the sum
        of its two single ones (interaction)."""
        out = []
        for a, b in list(zip(attributes[0::2], attributes[1::2]))[:pairs]:
            clause = f"{self.attributes[a][f'more_{strength}']} {self.attributes[b][f'more_{strength}']}"
            out.append(Probe(f"joint:{a}+{b}:{strength}", clause, None, JOINT, strength, JOINT))
        return out

    def _fits(self, attribute: str, task: str | None) -> bool:
        return task is None or task in self.attribute_tasks.get(attribute, TASK_TYPES)


def _tasks(value, where: str) -> tuple[str, ...]:
    if value is None:
        return TASK_TYPES
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise InputError(where, "tasks must be a non-empty list")
    for t in items:
        if t not in TASK_TYPES:
            raise InputError(where, f"unknown task {t!r} (known: {', '.join(TASK_TYPES)})")
    return tuple(items)


def _name(value, where: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value):
        raise InputError(where, f"name {value!r} must be lowercase letters, digits and '_'")
    return value


def _unit_name(family: str, name: str, where: str) -> str:
    """A one-sided unit's column is ``family:name``: named ``more`` or ``less`` it would read as a
    side of a property named after the family, and screening, subsets and ``half`` merged the
    two units into one (a second reader's finding)."""
    if name in DIRECTIONS:
        raise InputError(where, f"a unit named {name!r} gives the column '{family}:{name}', which reads as the "
                         f"{name} side of a property {family!r}; name the unit otherwise")
    return name


WORDINGS = tuple(f"{d}_{s}" for d in DIRECTIONS for s in STRENGTHS)
BANK_KEYS = ("name", "version", "wordings", "attributes", "units", "oneside", "neutral")
ATTRIBUTE_KEYS = ("name", "phrase", "tasks", *WORDINGS)
UNIT_KEYS = ("family", "name", "clause", "tasks")


def _text(value, where: str) -> str:
    """A clause, phrase or wording: text that is not blank."""
    if not isinstance(value, str):
        raise InputError(where, f"must be text, not {value!r}")
    if not value.strip():
        raise InputError(where, "is empty")
    return value


def _table(value, where: str, known: tuple[str, ...]) -> dict:
    """A TOML table whose keys are all ``known``."""
    if not isinstance(value, dict):
        raise InputError(where, f"must be a table, not {value!r}")
    for k in value:
        if k not in known:
            raise InputError(f"{where}.{k}", f"unknown key (known: {', '.join(known)})")
    return value


def _tables(value, where: str) -> list:
    """An array of tables (``[[attributes]]``)."""
    if not isinstance(value, list):
        raise InputError(where, f"must be an array of tables ([[...]]), not {value!r}")
    return value


def _parse_bank(data: dict, where: str) -> ProbeBank:
    """A bank file's tables, every key checked: unknown keys, wrong types, blank clauses and
    names given twice are one line naming the file and the key."""
    for k in data:
        if k not in BANK_KEYS:
            raise InputError(f"{where} {k}", f"unknown key (known: {', '.join(BANK_KEYS)})")
    for key in ("name", "wordings", "attributes"):
        if key not in data:
            raise InputError(where, f"missing field {key!r}")
    bank_name = _text(data["name"], f"{where} name")
    version = data.get("version", "1")
    if not isinstance(version, (str, int)) or isinstance(version, bool):
        raise InputError(f"{where} version", f"must be text or a whole number, not {version!r}")
    wordings = _table(data["wordings"], f"{where} wordings", WORDINGS)
    for w, text in wordings.items():
        at = f"{where} wordings.{w}"
        _text(text, at)
        try:
            filled = text.format(phrase="\x00")
        except (KeyError, IndexError, ValueError):
            filled = None
        if filled is None or "\x00" not in filled:
            raise InputError(at, "must hold one {phrase} slot and no other braces (write {{ or }} for a brace)")
    attributes: dict[str, dict[str, str]] = {}
    attribute_tasks: dict[str, tuple[str, ...]] = {}
    if not _tables(data["attributes"], f"{where} attributes"):
        raise InputError(where, "empty bank: no attributes")
    for i, attr in enumerate(data["attributes"]):
        at = f"{where} attributes[{i}]"
        _table(attr, at, ATTRIBUTE_KEYS)
        if "name" not in attr:
            raise InputError(at, "missing field 'name'")
        name = _name(attr["name"], f"{at}.name")
        if name in attributes:
            raise InputError(f"{at}.name", f"duplicate attribute {name!r}")
        at = f"{at} ({name})"
        phrase = _text(attr["phrase"], f"{at}.phrase") if "phrase" in attr else None
        texts = {}
        for w in WORDINGS:
            if w in attr:
                texts[w] = _text(attr[w], f"{at}.{w}")
            elif w in wordings and phrase is not None:
                texts[w] = wordings[w].format(phrase=phrase)
            elif phrase is not None:  # the bank's [wordings] lacks it: name that table (a user's finding)
                raise InputError(f"{where} wordings", f"no {w!r}, which attribute {name!r} fills its phrase into "
                                 f"(a bank's wordings give all {len(WORDINGS)}, {', '.join(WORDINGS)}, even for a "
                                 f"study of one strength; or give the attribute its own {w!r})")
            else:
                raise InputError(at, f"no wording for {w!r} (give 'phrase' or {w!r})")
        attributes[name] = texts
        if "tasks" in attr:
            tasks = _tasks(attr["tasks"], at)
            if tasks != TASK_TYPES:
                attribute_tasks[name] = tasks
    units, seen = [], set()
    oneside = data.get("oneside", {})  # name = clause
    if not isinstance(oneside, dict):
        raise InputError(f"{where} oneside", f"must be a table (name = clause), not {oneside!r}")
    for key, clause in oneside.items():
        _name(key, f"{where} oneside.{key}")
        _text(clause, f"{where} oneside.{key}")
        prefix, _, rest = key.partition("_")
        family, uname = (prefix, rest) if prefix in ONESIDED and rest else ("context", key)
        units.append(Unit(family, _unit_name(family, uname, f"{where} oneside.{key}"), clause))
    for i, u in enumerate(_tables(data.get("units", []), f"{where} units")):
        at = f"{where} units[{i}]"
        _table(u, at, UNIT_KEYS)
        for key in ("family", "name", "clause"):
            if key not in u:
                raise InputError(at, f"missing field {key!r}")
        if u["family"] not in ONESIDED:
            raise InputError(f"{at}.family", f"unknown family {u['family']!r} (known: {', '.join(ONESIDED)})")
        units.append(Unit(u["family"], _unit_name(u["family"], _name(u["name"], f"{at}.name"), f"{at}.name"),
                          _text(u["clause"], f"{at}.clause"),
                          _tasks(u.get("tasks"), at)))
    for u in units:
        if u.probe_id in seen:
            raise InputError(where, f"duplicate unit {u.probe_id!r}")
        seen.add(u.probe_id)
    neutral_table = _table(data.get("neutral", {}), f"{where} neutral", ("clauses",))
    clauses = neutral_table.get("clauses", [])
    if not isinstance(clauses, list):
        raise InputError(f"{where} neutral.clauses", f"must be a list of clauses, not {clauses!r}")
    for i, c in enumerate(clauses):
        _text(c, f"{where} neutral.clauses[{i}]")
        if c in clauses[:i]:
            raise InputError(f"{where} neutral.clauses[{i}]", f"repeats clause {clauses.index(c)} ({c[:40]!r})")
    return ProbeBank(bank_name, str(version), attributes, tuple(clauses), oneside, tuple(units), attribute_tasks)


CRITERION_CLAUSE = "Rate only this quality, not the overall quality: {definition}."


def criterion_probes(task: str) -> list[Probe]:
    """One probe per rubric criterion of ``task`` (the G-Eval and SAJA baselines' requests):
    the criterion's instruction goes after the content, like every probe clause."""
    path = resources.files("judgecal.probes").joinpath("banks", "criteria.toml")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    tasks = sorted(k for k, v in data.items() if isinstance(v, dict))  # the file's version key is no task
    if task not in tasks:
        raise InputError("[pool].criteria", f"no rubric criteria shipped for task {task!r} (they are for "
                         f"{', '.join(tasks)})")
    return [Probe(f"{CRITERION}:{name}", CRITERION_CLAUSE.format(definition=text), None, CRITERION, None, CRITERION)
            for name, text in data[task].items()]


def shipped_bank(name: str) -> Path | None:
    """The file of the bank shipped under ``name`` (``style``, ``quality``, ``expanded``), or None."""
    shipped = resources.files("judgecal.probes").joinpath("banks", f"{name}.toml")
    return Path(str(shipped)) if shipped.is_file() else None


def load_bank(name_or_path: str) -> ProbeBank:
    """A shipped bank by name (``style``, ``quality``, ``expanded``) or a TOML file by path."""
    path = shipped_bank(name_or_path) or Path(name_or_path)
    if not path.is_file():
        raise InputError(f"bank {name_or_path}", "no shipped bank of that name and no such file")
    from judgecal.config import read_toml

    return _parse_bank(read_toml(path), str(path))
