"""Named plug-ins: built-in modules listed in one place, others through an entry point group.

Study methods (:mod:`judgecal.methods.base`) and judge diagnostics
(:mod:`judgecal.diagnostics.base`) are registries: a module calls ``register(obj)`` when it
is imported (``obj.name`` is its key), and ``load()`` imports the built-ins and every
installed entry point once. A second object under a taken name is refused, as Ray's
``ProcessorBuilder.register`` refuses a second processor.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from judgecal.errors import InputError


class Registry(dict):
    def __init__(self, kind: str, builtin: tuple[str, ...], group: str, where: str):
        super().__init__()
        self.kind, self.builtin, self.group, self.where = kind, builtin, group, where
        self._loaded = False

    def register(self, obj):
        if obj.name in self and self[obj.name] is not obj:
            raise ValueError(f"a {self.kind} named {obj.name!r} is already registered ({type(self[obj.name]).__module__})")
        self[obj.name] = obj
        return obj

    def load(self) -> "Registry":
        if not self._loaded:
            for module in self.builtin:
                importlib.import_module(module)
            for ep in entry_points(group=self.group):
                ep.load()
            self._loaded = True
        return self

    def lookup(self, name: str, where: str | None = None):
        """The plug-in called ``name``; one line listing the known ones when there is none."""
        known = self.load()
        if name not in known:
            raise InputError(where or self.where, f"unknown {self.kind} {name!r} (known: {', '.join(sorted(known))})")
        return known[name]
