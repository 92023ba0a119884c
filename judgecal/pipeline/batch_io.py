"""Batch files by hand: ``judgecal export-batch`` / ``import-batch``, for a provider judgecal
does not call.

``export-batch STUDY PATH`` writes the pending requests of the first request set that has
any (planned, not answered, not at a provider through ``openai-batch``) as OpenAI batch
JSONL: ``custom_id`` is the request id, the body what the ``http`` engine would send. Over
the limits of ``[engine]`` (OpenAI's: 50,000 requests, 200 MB) it writes ``PATH`` cut into
``<stem>-001.jsonl``, ``<stem>-002.jsonl``, ... ``import-batch STUDY RESULTS...`` reads
results files in the same format (output and error lines alike) and commits the lines of
pending requests as response parts: answers as the ``http`` engine reads them, failed lines
as error rows with the reason (the next export holds them again). A results file is imported
once: its SHA-256 is recorded in the ``batches.json`` of each response folder it committed
lines to, and a second import of the same file commits nothing there. Refused with one line
(exit 2), nothing imported: two different answers for one ``custom_id`` (file and line
named; a file imported before is not read again, and a line differing from one of its
lines answers only a request still pending), and files none of whose lines could be used
(none readable, or none for a pending request); unreadable lines beside usable ones are
left out and named by line number.

Request sets follow each other (URW's verification plan is built from its criteria answers,
so they cannot all be exported at once): both commands stop at the first set left
incomplete, name it (``probes, request set 1 of 3``) and say which sets follow; run them
again for the next.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from judgecal.engines.batch import LineReader, batch_config, failure, is_request_line, read_lines
from judgecal.errors import InputError
from judgecal.pipeline.answered import completeness
from judgecal.pipeline.batches import MANIFEST_COLUMNS, BatchState, _now, commit_lines, pending_chunks, pending_tables
from judgecal.pipeline.collect import CollectStats, _pending
from judgecal.pipeline.plan_source import PlanSource


class BatchStop(Exception):
    """Export or import ended at a request set that is not complete (export: exit 0, its file
    written; import: exit 3, as a collect that left requests unanswered)."""


def _config(engine):
    cfg = batch_config(engine)
    if not cfg.model:
        raise InputError("[engine].model", "a batch file names its model: set the provider's model name")
    return cfg


def export_pending(source, renderer, engine, store, path: str, settings, log) -> tuple[int, list[str]]:
    """Write the pending requests of ``source`` as batch JSONL at ``path`` (cut at the
    limits); returns (requests, files written)."""
    cfg = _config(engine)
    index = _pending(store, settings.max_attempts, log)
    tables = pending_tables(source, index, renderer, cfg.wants_meta, BatchState(store.ws).in_flight(),
                            block_rows=settings.part_rows)
    made: list[tuple[str, int]] = []
    try:
        for tmp, lines, _ in pending_chunks(cfg, tables):
            made.append((tmp, lines))
        out = Path(path)
        names = [out] if len(made) == 1 else \
            [out.with_name(f"{out.stem}-{i + 1:03d}{out.suffix or '.jsonl'}") for i in range(len(made))]
        for name in names:  # all checked before any is written
            _check_replaceable(name)
        mode = 0o666 & ~_umask()  # as any new file (mkstemp's are the owner's alone)
        for (tmp, _), name in zip(made, names):
            name.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(tmp, mode)
            shutil.move(tmp, name)
    finally:
        for tmp, _ in made:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return sum(n for _, n in made), [str(n) for n in names] if made else []


def _check_replaceable(path: Path) -> None:
    """export-batch writes a new file or replaces a batch request file (an earlier export):
    anything else is refused, nothing written (``export-batch runs/s data.jsonl`` replaced the
    study's data with its requests, and study.json or the config alike: a user's finding)."""
    if not path.exists():
        return
    if path.is_dir():
        raise InputError(str(path), "is a folder; give export-batch a file path")
    try:
        with open(path, "rb") as f:
            starts = _starts_with_request(f)
    except OSError:
        starts = False
    if starts is False:  # None: an empty file, which holds nothing to lose
        raise InputError(str(path), "exists and is not a batch request file (export-batch replaces only a file of "
                         "requests it wrote); give another path, nothing was written")


def _umask() -> int:
    """The process's umask, read without setting it (os.umask sets it, racing other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return int(next(x for x in f if x.startswith("Umask:")).split()[1], 8)
    except (OSError, StopIteration, ValueError):
        return 0o022


@dataclass
class ResultsFile:
    """One results file as given to import-batch, read once."""

    path: str
    sha256: str
    text: str
    lines: int = 0
    ids: set = field(default_factory=set)  # its readable lines' custom ids
    unreadable: int = 0
    unreadable_at: list = field(default_factory=list)  # the first few line numbers
    repeats: int = 0  # lines whose custom id an earlier line had (one answer is kept)


def read_results(paths: list[str], before: frozenset = frozenset()) -> tuple[list[ResultsFile], dict]:
    """The files (a file given twice is read once) and their lines by custom id, parsed once
    (:func:`read_lines`); refuses, naming the file and line, two different answers for one
    request: which is right is not known, so nothing is imported. A file imported into the
    study before (its SHA-256 in ``before``) is not read again, so a line differing from one
    of its lines is not refused: it answers its request only where that is still pending."""
    files: list[ResultsFile] = []
    for p in paths:
        try:
            data = Path(p).read_bytes()
        except OSError as e:
            raise InputError(p, f"cannot read the results file ({e.strerror or e})") from None
        sha = hashlib.sha256(data).hexdigest()
        if all(f.sha256 != sha for f in files):
            files.append(ResultsFile(p, sha, data.decode("utf-8-sig", "replace")))  # a BOM lost line 1 (a user's)
    notes: list[dict] = []
    lines, _ = read_lines([f.text for f in files], notes=notes, results_shape=True)
    for f, note in zip(files, notes):
        f.lines, f.ids, f.unreadable, f.unreadable_at, f.repeats = note["lines"], note["ids"], note["unreadable"], \
            note["unreadable_at"], note["repeats"]
    fresh = [f for f in files if f.sha256 not in before]
    if len(fresh) < len(files):  # the new files among themselves (each line was compared with the first kept)
        notes = []
        read_lines([f.text for f in fresh], notes=notes, results_shape=True)
    for f, note in zip(fresh, notes):
        for cid, (c, first), n in note["differ"]:
            other = f"line {first}" + ("" if fresh[c] is f else f" of {fresh[c].path}")
            raise InputError(f"{f.path} line {n}", f"custom_id {cid} has another answer on {other}: a request takes "
                             "one answer; remove the wrong line and import again (nothing was imported)")
    return files, lines


def import_results(source, renderer, engine, store, files: list[ResultsFile], all_lines: dict, settings, log):
    """Commit the lines of ``files`` (``all_lines``: theirs, as :func:`read_results` parsed
    them) that answer pending requests of ``source``; returns (stats, the request ids
    committed, the files skipped as imported into ``store`` before, the files' ids that are
    requests of ``source``). A file is recorded as imported in ``store``'s batches.json where
    it committed a line."""
    cfg = _config(engine)
    state = BatchState(store.ws)
    seen = {f.get("sha256") for f in state.imported}
    skipped = {f.sha256 for f in files if f.sha256 in seen}
    for f in files:
        if f.sha256 in skipped:
            log(f"[import] {f.path}: already imported into {store.uri} (same content); nothing committed from it")
    fresh = [f for f in files if f.sha256 not in skipped]
    # parsed again only without the files imported here before (a line of theirs may be the kept one)
    lines = all_lines if not skipped else read_lines([f.text for f in fresh], results_shape=True)[0]
    index = _pending(store, settings.max_attempts, log)
    planned = source.num_rows
    stats = CollectStats(planned, planned, 0)
    totals: dict = {}
    used: set = set()
    planned_ids = source.column("request_id")
    known = set(pc.filter(planned_ids, pc.is_in(planned_ids, value_set=pa.array(sorted(all_lines), pa.string())))
                .to_pylist()) if all_lines else set()  # answered already, where not used: say so
    if lines:
        reader = LineReader(cfg)
        try:
            only = pa.array(sorted(lines), pa.string())
            for rendered in pending_tables(source, index, renderer, cfg.wants_meta, only=only,
                                           block_rows=settings.part_rows):
                manifest = rendered.select(list(MANIFEST_COLUMNS))
                used.update(manifest["request_id"].to_pylist())
                commit_lines(manifest, lines, reader, cfg.identity, store, settings.part_rows, totals)
        finally:
            reader.close()
    new = [{"file": os.path.basename(f.path), "sha256": f.sha256, "imported_at": _now(), "lines": f.lines,
            "committed": len(f.ids & used)} for f in fresh if f.ids & used]
    if new:
        state.imported.extend(new)
        state.save()
    stats.computed, stats.errors, stats.parts = totals.get("rows", 0), totals.get("errors", 0), totals.get("parts", 0)
    stats.prompt_tokens, stats.completion_tokens = totals.get("prompt_tokens", 0), totals.get("completion_tokens", 0)
    stats.computed_tokens, stats.out_of_scale = totals.get("computed_tokens", 0), totals.get("out_of_scale", 0)
    stats.already_done = planned - stats.computed
    if stats.computed:
        log(f"[import] {store.uri}: {stats.computed - stats.errors:,} answers and {stats.errors:,} failed lines "
            "committed")
        other = other_models((lines[i] for i in used), cfg.model)
        if other:  # the report would name the configured judge for another's answers (a user's finding)
            n, (name, _) = sum(other.values()), other.most_common(1)[0]
            log(f"[import] warning: {n:,} of the answers committed name another model than [engine].model "
                f"{cfg.model!r} ({name!r} the commonest): they are kept as {cfg.model!r}'s answers, and the tables "
                "will say so; if they are another judge's, import that judge's results into a study of its own "
                "(a provider that names models otherwise, as an Azure deployment does, gives this line too)")
    return stats, used, skipped, known, _exhausted(index, known - used)


def other_models(lines, configured: str) -> Counter:
    """The ``model`` named by answer lines other than the configured one: OpenAI answers
    "gpt-4o-mini" with its dated snapshot "gpt-4o-mini-2024-07-18", which is the same; a longer
    name is another model ("gpt-4o" and "gpt-4o-mini")."""
    seen: Counter = Counter()
    for line in lines:
        if failure(line) is None:
            seen[line["response"]["body"].get("model")] += 1
    snapshot = re.compile(re.escape(configured) + r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-\d{4})?")
    return Counter({m: n for m, n in seen.items() if m and not snapshot.fullmatch(str(m))})


def _exhausted(index, ids: set) -> set:
    """Those of ``ids`` that failed every allowed attempt (``index``: the store's PendingIndex,
    read before this import committed; these ids took no line of it): not pending, not answered
    either (their lines were called "for requests answered already": a user's finding)."""
    if not ids:
        return set()
    from judgecal.ids import id_keys

    ordered = sorted(ids)
    return {i for i, gone in zip(ordered, index.exhausted.contains(id_keys(pa.array(ordered, pa.string())))) if gone}


class Exporter:
    """``StudyRun.batch_io`` for export-batch: the first request set with pending requests is
    written to ``path``, and the study stops there (the next set may be built from its
    answers, as URW's verification plan is: one set at a time, each after the last's import)."""

    tag = "export"  # StudyRun.tag

    def __init__(self, path: str):
        _check_replaceable(Path(path))  # before the study is read or planned
        self.path = path

    def __call__(self, run, name: str, plan, renderer, engine, settings, log) -> CollectStats:
        store = run.store(name)
        n, files = export_pending(PlanSource.of(plan), renderer, engine, store, self.path, settings, log)
        if n:
            where = files[0] if len(files) == 1 else f"{len(files)} files ({files[0]} ... {files[-1]})"
            _, label, later = _place(run, name)
            after = f"; after that, `judgecal export-batch {run.ws.uri} PATH` again for the next request " \
                    f"set{'s' * (len(later) > 1)} " \
                    f"({', '.join(later)})" if later else ""
            raise BatchStop(f"{run.ws.join(name)}{label}: wrote {n:,} pending requests to {where}; send them to the "
                            f"provider, then `judgecal import-batch {run.ws.uri} RESULTS.jsonl`{after}")
        _stop_unless_complete(run, name, plan, settings, "nothing to export")
        return CollectStats(PlanSource.of(plan).num_rows, PlanSource.of(plan).num_rows, 0)

    def done(self) -> str:
        return "nothing to export: every planned request is answered"


class Importer:
    """``StudyRun.batch_io`` for import-batch: each request set takes the lines of its pending
    requests; the study stops at the first set left incomplete. Two different answers for one
    request, or files none of whose lines could be used, are refused (exit 2)."""

    never_starts_anew = True  # answers the exported requests (see StudyRunner.check_identity)
    tag = "import"  # StudyRun.tag

    def __init__(self, paths: list[str], ws=None):
        """``ws``: the study's workspace, whose files imported before are known (see
        :func:`read_results`)."""
        self.files, self.lines = read_results(list(paths), imported_files(ws) if ws is not None else frozenset())
        self.imported = 0
        self.used: set = set()  # request ids committed by this import, in any request set
        self.skipped: set = set()  # files imported before (into a set this import reached)
        self.known: set = set()  # the files' ids that are requests of the sets reached
        self.exhausted: set = set()  # of those, requests whose attempts are used up
        self.max_attempts = None
        self.into: list[str] = []  # the response folders that took lines
        self.run, self.log = None, _stderr

    def __call__(self, run, name: str, plan, renderer, engine, settings, log) -> CollectStats:
        self.run, self.log = run, log
        stats, used, skipped, known, exhausted = import_results(PlanSource.of(plan), renderer, engine,
                                                                run.store(name), self.files, self.lines, settings, log)
        self.imported += stats.computed
        self.used |= used
        self.skipped |= skipped
        self.known |= known
        self.exhausted |= exhausted
        self.max_attempts = settings.max_attempts
        if stats.computed:
            short = _place(run, name)[0]
            self.into.append(f"{name} ({short})" if short else name)
        done = completeness(plan, run.store(name), settings.max_attempts)
        if done.complete:
            return stats
        self._finish()
        _, label, _ = _place(run, name)
        if stats.computed:  # this set took lines and is still incomplete: its failed and missing requests
            raise BatchStop(f"{run.ws.join(name)}{label}: {stats.computed:,} lines committed; {done.summary()}; "
                            f"{replace(done, by_hand=run.ws.uri).advice}")
        before = f"imported {self.imported:,} lines into {', '.join(self.into)}" if self.imported else \
            "nothing new imported"
        what = done.summary() if done.failed or done.answered else f"{done.missing:,} requests to send"
        raise BatchStop(f"{before}; next to export: {run.ws.join(name)}{label}, {what}: "
                        f"`judgecal export-batch {run.ws.uri} PATH`")

    def done(self) -> str:
        self._finish()
        return f"imported {self.imported:,} lines; every planned request is answered"

    def _finish(self) -> None:
        """Once, where the import ends: an error (exit 2) when nothing in the files could be
        used; else what in them was left out, on stderr."""
        study = self.run.ws.uri if self.run is not None else "this study"
        notes, useless = [], []
        for f in self.files:
            if f.unreadable:
                notes.append(f"[import] {f.path}: {f.unreadable:,} unreadable line{'s' * (f.unreadable > 1)} "
                             f"({_numbers(f)}) left out: {RESULTS_LINE}")
            if f.repeats:  # an identical repeat is harmless, but every line is accounted for (a user's finding)
                verb = "repeats" if f.repeats == 1 else "lines repeat"
                notes.append(f"[import] {f.path}: {f.repeats:,} {'line ' if f.repeats == 1 else ''}{verb} a custom_id "
                             "given before (one answer per request is kept)")
            unused = set() if f.sha256 in self.skipped else f.ids - self.used
            if f.sha256 in self.skipped or len(unused) < len(f.ids):
                if unused:
                    notes.append(f"[import] {f.path}: {len(unused):,} line{'s' * (len(unused) > 1)} left out: "
                                 f"{self._why_unused(unused, study)}")
            elif f.ids:
                unread = f"; and {_numbers(f)} unreadable" if f.unreadable else ""
                useless.append((f.path, f"none of its {len(f.ids):,} custom ids is a request pending in {study}: "
                                        f"{self._why_unused(unused, study)}{unread}"))
            elif f.unreadable and _starts_with_request(f.text.splitlines()):
                useless.append((f.path, "a batch request file (what export-batch writes), not the provider's "
                                        f"results: {RESULTS_LINE}"))
            elif f.unreadable:
                useless.append((f.path, f"no line could be read ({_numbers(f)}: not a results line); {RESULTS_LINE}"))
            else:
                useless.append((f.path, "no results line in it"))
        if len(useless) == len(self.files):  # nothing in any file was used: one line, exit 2
            where = ", ".join(p for p, _ in useless)
            problem = useless[0][1] if len(useless) == 1 else "; ".join(f"{p}: {r}" for p, r in useless)
            raise InputError(where, f"{problem}; nothing imported")
        for line in notes + [f"[import] {p}: {r}; nothing imported from it" for p, r in useless]:
            self.log(line)


    def _why_unused(self, ids: set, study: str) -> str:
        """Lines that answered nothing: requests answered already (the committed answer stays,
        whatever these say) and ids that are no request of the study."""
        used_up = len(ids & self.exhausted)
        answered, foreign = len(ids & self.known) - used_up, len(ids - self.known)
        return "; ".join(filter(None, [
            f"{used_up:,} for requests that failed every allowed attempt ([collect] max_attempts = "
            f"{self.max_attempts}: import again with `--set collect.max_attempts=N`, N larger, to take these "
            "answers)" if used_up else "",
            f"{answered:,} for requests answered already (the committed answer is kept)" if answered else "",
            f"{foreign:,} for no request of {study} (another study's, or another request set's)" if foreign else ""]))


RESULTS_LINE = ("a results line is a JSON object with a custom_id and a response with a body (an object), or an "
                "error (OpenAI's batch output)")


def _starts_with_request(lines) -> bool | None:
    """Whether the first non-blank of ``lines`` (text or bytes) is a batch request line; None
    where there is none."""
    first = next((x for x in lines if x.strip()), None)
    if first is None:
        return None
    try:
        return is_request_line(json.loads(first))
    except ValueError:
        return False


def _numbers(f: ResultsFile) -> str:
    """``lines 1, 2`` (the first few, then ``...``)."""
    more = ", ..." if f.unreadable > len(f.unreadable_at) else ""
    return f"line{'s' * (f.unreadable > 1)} {', '.join(map(str, f.unreadable_at))}{more}"


def _place(run, name: str) -> tuple[str, str, list[str]]:
    """For the response folder ``name`` of a study with several request sets (``judgecal
    show`` lists them): the set's name (``scales``), `` (scales, request set 2 of 3)`` and the
    names of the sets after it; ("", "", []) for a study of one."""
    sets = [(n, store) for n, _, store in run.method.request_sets(run.cfg)]
    stores = [s for _, s in sets]
    if len(sets) < 2 or name not in stores:
        return "", "", []
    i = stores.index(name)
    return sets[i][0], f" ({sets[i][0]}, request set {i + 1} of {len(sets)})", [n for n, _ in sets[i + 1:]]


def imported_files(ws) -> frozenset:
    """The SHA-256 of every results file imported into a response folder of the study in
    ``ws`` (those study.json records)."""
    from judgecal.config import STUDY_FILE, read_study

    saved = read_study(ws) if ws.exists(STUDY_FILE) else {}
    stores = saved.get("plan_files") if isinstance(saved, dict) else None
    if not isinstance(stores, dict):
        return frozenset()
    return frozenset(f.get("sha256") for s in stores for f in BatchState(ws.child(s)).imported)


def collected_by_hand(ws) -> bool:
    """Whether results files were imported into the study in ``ws``: its answers come through
    export-batch / import-batch, not through `judgecal collect`."""
    return bool(imported_files(ws))


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _stop_unless_complete(run, name: str, plan, settings, what: str) -> None:
    done = completeness(plan, run.store(name), settings.max_attempts)
    if not done.complete:  # the advice says where attempts are used up ("export what is pending" went round)
        raise BatchStop(f"{run.ws.join(name)}{_place(run, name)[1]}: {what}; {done.summary()}; "
                        f"{replace(done, by_hand=run.ws.uri).advice}")
