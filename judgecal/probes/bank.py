"""Declarative probe banks (TOML) and the probes they expand to.

A bank has ``[wordings]`` (``more_slight`` ... ``less_strong`` with a ``{phrase}`` slot),
``[[attributes]]`` (``name``, ``phrase``, optional per-wording overrides), optional
``[neutral] clauses`` (controls) and ``[oneside]`` (name = instruction: roles, focus,
stakes, reading contexts). Banks shipped with judgecal: ``style`` and ``quality``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from judgecal.errors import InputError

DIRECTIONS = ("more", "less")
STRENGTHS = ("slight", "standard", "strong")
BASELINE = "baseline"


@dataclass(frozen=True)
class Probe:
    """One instruction variant. ``clause`` is inserted after the content; empty for the baseline."""

    probe_id: str
    clause: str
    attribute: str | None = None
    direction: str | None = None  # more | less | neutral | oneside
    strength: str | None = None


@dataclass(frozen=True)
class ProbeBank:
    name: str
    version: str
    attributes: dict[str, dict[str, str]]  # attribute -> {"more_standard": text, ...}
    neutral: tuple[str, ...]
    oneside: dict[str, str]

    def probes(
        self,
        attributes: list[str] | None = None,
        strengths: tuple[str, ...] = ("standard",),
        neutral: bool = False,
        oneside: bool = False,
    ) -> list[Probe]:
        """The baseline first, then more/less per attribute and strength, then controls."""
        chosen = list(self.attributes) if attributes is None else list(attributes)
        if not chosen:
            raise InputError(f"bank {self.name}", "no attributes selected")
        for a in chosen:
            if a not in self.attributes:
                raise InputError(
                    f"bank {self.name} attributes", f"unknown attribute {a!r} (known: {', '.join(self.attributes)})"
                )
        for s in strengths:
            if s not in STRENGTHS:
                raise InputError("probes.strengths", f"unknown strength {s!r} (known: {', '.join(STRENGTHS)})")
        out = [Probe(BASELINE, "")]
        for a in chosen:
            for s in strengths:
                for d in DIRECTIONS:
                    out.append(Probe(f"{a}:{d}:{s}", self.attributes[a][f"{d}_{s}"], a, d, s))
        if neutral:
            out += [Probe(f"neutral:{i}", c, None, "neutral") for i, c in enumerate(self.neutral)]
        if oneside:
            out += [Probe(f"oneside:{k}", c, None, "oneside") for k, c in self.oneside.items()]
        return out


def _parse_bank(data: dict, where: str) -> ProbeBank:
    for key in ("name", "wordings", "attributes"):
        if key not in data:
            raise InputError(where, f"missing field {key!r}")
    wordings = data["wordings"]
    needed = [f"{d}_{s}" for d in DIRECTIONS for s in STRENGTHS]
    attributes: dict[str, dict[str, str]] = {}
    if not data["attributes"]:
        raise InputError(where, "empty bank: no attributes")
    for i, attr in enumerate(data["attributes"]):
        name = attr.get("name")
        if not name:
            raise InputError(f"{where} attributes[{i}]", "missing field 'name'")
        if name in attributes:
            raise InputError(f"{where} attributes[{i}]", f"duplicate attribute {name!r}")
        texts = {}
        for w in needed:
            if w in attr:
                texts[w] = attr[w]
            elif w in wordings and "phrase" in attr:
                texts[w] = wordings[w].format(phrase=attr["phrase"])
            else:
                raise InputError(f"{where} attributes[{i}] ({name})", f"no wording for {w!r} (give 'phrase' or {w!r})")
        attributes[name] = texts
    neutral = tuple(data.get("neutral", {}).get("clauses", ()))
    return ProbeBank(str(data["name"]), str(data.get("version", "1")), attributes, neutral, dict(data.get("oneside", {})))


def load_bank(name_or_path: str) -> ProbeBank:
    """A shipped bank by name (``style``, ``quality``) or a TOML file by path."""
    shipped = resources.files("judgecal.probes").joinpath("banks", f"{name_or_path}.toml")
    path = Path(str(shipped)) if shipped.is_file() else Path(name_or_path)
    if not path.is_file():
        raise InputError(f"bank {name_or_path}", "no shipped bank of that name and no such file")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(path), f"does not parse ({e})") from None
    return _parse_bank(data, str(path))
