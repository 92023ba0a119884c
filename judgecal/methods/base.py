"""The method protocol and its registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from judgecal.registry import Registry

if TYPE_CHECKING:
    from judgecal.config import StudyConfig
    from judgecal.methods.runner import StudyRun


@dataclass(frozen=True)
class PlanEstimate:
    """One request set of a study as ``judgecal show`` reports it before anything runs."""

    name: str  # what the requests are (``probes``, ``criteria``, ``verify``)
    plan_file: str  # the plan's file in the workspace, once written
    store: str  # its responses' folder
    requests: int
    prompt_tokens: int  # estimated: about four characters a token
    completion_tokens: int  # at most
    note: str = ""


class Method(Protocol):
    name: str
    results_name: str  # the results log's file name in the workspace
    report_name: str
    outputs: tuple[str, ...]  # what fit, evaluate and report write from the collected data
    sections: tuple[str, ...]  # the config sections it reads beyond [study], [engine] and [collect]
    data_section: str  # the section naming its data: a config file must give it, not empty
    data_hint: str  # what that section holds, for the refusal
    demo: str  # its demo config's name (``judgecal demo``), the example a refusal points to
    fit_ignores: tuple[str, ...]  # settings (``section.field``, or ``section.`` for all) ``fit`` never reads
    simulated_truth: str  # what a SIMULATED judge's answers are built from, for the lines on what it re-asks

    def check_config(self, cfg: "StudyConfig", where: str) -> None:
        """Refuse, in one line naming the field, what its own sections cannot run."""

    def identity(self, cfg: "StudyConfig") -> dict:
        """What study.json pins: a different value in a later run is refused with one line."""

    def plan_spec(self, cfg: "StudyConfig") -> dict:
        """The config fields that size the plan: a change re-plans at collect, and fit /
        evaluate refuse a config whose plan is not the collected one."""

    def request_sets(self, cfg: "StudyConfig") -> list[tuple[str, str, str]]:
        """(name, plan file, responses folder) of each request set a collect plans, in collect
        order, from the config alone (no data read): what ``estimate`` sizes."""

    def estimate(self, cfg: "StudyConfig") -> list[PlanEstimate]:
        """The request sets a collect would plan, sized without running anything."""

    def needs(self, cfg: "StudyConfig") -> set[str]:
        """Engine capabilities the study uses (checked before any request is sent)."""

    def collect(self, run: "StudyRun") -> None:
        """Write the plan(s) and collect them through ``run.collect``."""

    def fit(self, run: "StudyRun") -> dict:
        """Fit on everything collected; returns the fit section (also saved by the method)."""

    def evaluate(self, run: "StudyRun") -> tuple[dict, dict]:
        """Held-out evaluation: (results section, run facts about the answered requests)."""

    def fitted_settings(self, ws) -> tuple[str, dict | None]:
        """(the file ``fit`` writes, the settings it recorded there as a config dict's sections,
        or None: none recorded, the file missing or unreadable)."""

    def format_text(self, log: dict) -> str: ...

    def render_html(self, log: dict) -> str: ...


def simulated_truth(method: Method) -> str:
    """What a SIMULATED judge's answers are built from (:attr:`Method.simulated_truth`; "the
    labels" for a method of a user's own that does not say)."""
    return getattr(method, "simulated_truth", "the labels")


def completion_limit(engine) -> int:
    """The most tokens one score answer may take: the engine's ``max_tokens`` where it has
    one (http), else 1 (the CPU judge reads one next-token distribution)."""
    return int(getattr(engine, "max_tokens", 1) or 1)


DATA = "data"  # plan_spec's key for the content of the study's own data files (data_spec)


def data_spec(files: list[str], fingerprint=None) -> dict | None:
    """``plan_spec``'s ``data`` entry: the study's data files (a user's, not judgecal's bundled
    ones, which are fixed) and a hash of their content, ``fingerprint()`` (None: of the files'
    bytes), so a label edited in a file after collect makes fit and evaluate refuse (the
    workspace holds the collected copy). None where there are no such files, or one is gone
    (the collected copy is then all there is): the runner compares the entry only when both
    study.json and the config have it, so studies collected before it existed still load."""
    from pathlib import Path

    if not files or not all(Path(f).exists() for f in files):
        return None
    whole, each = _hash_files(files)  # one read of the bytes: the per-file hashes name what changed
    return {"files": list(files), "hash": whole if fingerprint is None else fingerprint(), "file_hashes": each}


def _hash_files(paths: list[str]) -> tuple[str, dict[str, str]]:
    """The hash of the files' bytes together (a folder: every file under it, by relative name)
    and each path's own, in one read."""
    import hashlib

    whole, each = hashlib.sha256(), {}
    for path in paths:
        one = hashlib.sha256()
        for chunk in _file_chunks(path):
            whole.update(chunk)
            one.update(chunk)
        each[str(path)] = one.hexdigest()[:16]
    return whole.hexdigest()[:16], each


def _file_chunks(path):
    """The bytes a path's hash reads: each file (a folder: every file under it, in name order)
    as its relative name (its own name for a file), its bytes, and separators."""
    from pathlib import Path

    p = Path(path)
    for q in sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]:
        yield str(q.relative_to(p) if p.is_dir() else q.name).encode() + b"\x1f"
        with open(q, "rb") as f:
            yield from iter(lambda: f.read(1 << 20), b"")
        yield b"\x1e"


def _file_hashes(old: dict, new: dict) -> tuple[dict, dict]:
    """Each entry's per-file hashes, the older one's named as the newer one names the same files
    (the entries' ``files`` in the same order: one path spelt otherwise, relative then absolute,
    read as "content not read at collect")."""
    before, now = old.get("file_hashes") or {}, new.get("file_hashes") or {}
    was, files = old.get("files") or [], new.get("files") or []
    if before and set(before) != set(now) and len(was) == len(files):
        before = {f: before[w] for w, f in zip(was, files) if w in before}
    return before, now


def changed_files(old: dict, new: dict) -> list[str]:
    """The data files whose bytes differ between two ``data_spec`` entries (all of them where
    the older one recorded no per-file hashes, or none differs: what was read changed)."""
    before, now = _file_hashes(old, new)
    changed = [f for f in now if before and before.get(f) != now[f]]
    if changed or not before:
        return changed or list(map(str, new.get("files", [])))
    # same bytes, other rows read (a loader's rules changed): say so rather than blame the file
    return [f"{f} (its bytes are unchanged; what judgecal reads from it changed)" for f in now]


def describe_change(old: dict, new: dict) -> str:
    """What changed between two ``data_spec`` entries, each file with its own content hash at
    collect and now (the study's combined hash only where per-file ones were not recorded)."""
    before, now = _file_hashes(old, new)
    if read_otherwise(old, new):
        return (f"{', '.join(now)}: the same bytes, read into other items: a sample drawn before 2026-12-07 followed "
                "the file's row order, and a seeded limit now draws by id (README: max_groups); or judgecal reads "
                "the file otherwise now")
    named = [f for f in changed_files(old, new) if f in now]
    if before and named:
        return "; ".join(f"{f}: content {before.get(f, 'not read')} at collect, now {now[f]}" for f in named)
    files = ", ".join(changed_files(old, new)) or "the study's data"
    return f"{files}: the data's content {old.get('hash')} at collect, now {new.get('hash')}"


def read_otherwise(old: dict, new: dict) -> bool:
    """Two ``data_spec`` entries of the same file bytes whose items differ: what reads the files
    changed (a sampling rule, a loader), not the files."""
    before, now = _file_hashes(old, new)
    return bool(now) and before == now and old.get("hash") != new.get("hash")


def table_fingerprint(table) -> str:
    """A hash of every cell of a pyarrow table, column by column (names included)."""
    from judgecal.ids import stable_hash_many

    return stable_hash_many(f"{name}\x1e{v!r}" for name in table.column_names for v in table[name].to_pylist())


def files_fingerprint(paths: list[str]) -> str:
    """A hash of the bytes of files (a folder: every file under it, by relative name)."""
    return _hash_files(paths)[0]


COMMON_SECTIONS = ("study", "engine", "collect")  # every method reads these
# The methods judgecal ships, in one place; others register through the ``judgecal.methods``
# entry point group (a module that calls :func:`register` when imported).
BUILTIN_METHODS = ("judgecal.methods.prism", "judgecal.methods.urw")
ENTRY_POINT_GROUP = "judgecal.methods"

METHODS: Registry = Registry("study method", BUILTIN_METHODS, ENTRY_POINT_GROUP, "[study].method")


def register(method: Method) -> Method:
    """Add a method under its name; a second method of the same name is refused."""
    return METHODS.register(method)


def load_methods() -> Registry:
    """Import the built-in methods and every installed ``judgecal.methods`` entry point, once."""
    return METHODS.load()


def get_method(name: str) -> Method:
    return METHODS.lookup(name)
