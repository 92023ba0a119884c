"""One runner for every study: identity and refusal, stage order, preconditions, timing,
run facts, and one typed, versioned results log.

Stages: ``collect`` -> ``fit`` -> ``evaluate`` -> ``report`` (``run`` does all four). Each
checks the workspace's ``study.json`` first, so a changed judge, dataset, target, bank,
template set or scale is refused with one line at any stage, never mixed with old data.
Changes that only resize the plan (runs, groups, strengths, attributes, pairs) write a new
plan over the old one; responses are kept and reused where request ids match, and
``answered`` reads exactly the current plan.

The results log (``results.json`` for PRISM, ``urw_results.json`` for URW), version
:data:`LOG_VERSION`::

    log_version, method, study, simulated_judge,
    spec     {config, identity}              what ran
    plans    {name: {requests, answered}}    what was asked
    stats    {collect: {name: CollectStats + cost_usd}, timing: {stage: s}, responses: {..., cost_usd}}
    results  the method's typed section      what came out

The text table, the HTML report and the notebooks all read this one file.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyarrow as pa

from judgecal.config import (PATHS_FROM, RAY_JOB_COPY, STUDY_FILE, StudyConfig, check_paths_from, local_paths,
                             read_study, spelt_as_collected)
from judgecal.errors import InputError
from judgecal.methods.base import DATA, Method, describe_change, get_method, read_otherwise, simulated_truth
from judgecal.pipeline.answered import answered, completeness
from judgecal.pipeline.batch_io import collected_by_hand
from judgecal.pipeline.collect import CollectFailed, CollectSettings, CollectStats, collect
from judgecal.pipeline.folder_lock import holder, one_collect_at_a_time
from judgecal.pipeline.plan_source import plan_fingerprint
from judgecal.pipeline.store import PartStore
from judgecal.redact import redact
from judgecal.workspace import Workspace

LOG_VERSION = 1
JUDGE_CONTENT = "judge_content"  # study.json's record of the judge's model files (engines.model_content)


def log(msg: str) -> None:
    print(redact(msg), file=sys.stderr, flush=True)  # a quoted error may hold a secret


@dataclass
class StudyRun:
    """What a method's stages get: the config, the workspace and the runner's collect."""

    cfg: StudyConfig
    ws: Workspace
    method: Method
    record: object = None  # the runner's study.json writer; ``begin()`` calls it
    collect_stats: dict = field(default_factory=dict)
    memo: dict = field(default_factory=dict)  # what one stage built and a later one reuses (the feature table)
    wait: bool = False  # a batch engine: wait for the batches at the provider (``--wait``)
    batch_io: object = None  # export-batch / import-batch (pipeline.batch_io): called instead of collect
    judge_content: dict | None = None  # the judge's model files (engines.model_content), set by begin()

    def begin(self) -> None:
        """A method calls this once its inputs are validated, before its first write: bad
        input stops with nothing written."""
        if self.record is not None:
            self.record()

    @property
    def engine(self):
        return self.cfg.engine

    @property
    def tag(self) -> str:
        """The stage its lines are said under: ``collect``, or ``export`` / ``import`` by hand
        (an export printed "[collect] 18 items ..." of a collect that never ran)."""
        return getattr(self.batch_io, "tag", "collect")

    def store(self, name: str) -> PartStore:
        return PartStore(self.ws.child(name))

    def collect(self, store: str, plan, renderer, truth: dict | None = None) -> CollectStats:
        """Collect ``plan`` (a table, or a PlanSource over the plan's file) into ``store``."""
        engine = self.cfg.engine.with_truth(truth or {})
        if self.judge_content is not None:  # each replica checks its node's copy
            engine = engine.with_model_content(self.judge_content)
        c = self.cfg.collect
        settings = CollectSettings(c.part_rows, c.part_seconds, c.block_rows, c.num_actors, c.max_attempts,
                                    c.fail_fast_requests, wait=self.wait)
        self._record_plan(store, plan)
        if self.batch_io is not None:  # by hand: it stops the study at a request set left incomplete
            return self.batch_io(self, store, plan, renderer, engine, settings, log)
        stats = collect(plan, renderer, engine, self.store(store), settings, log)
        # The tokens this collect sent, priced (0 unless the engine config sets prices).
        self.collect_stats[store] = {**asdict(stats), "cost_usd": engine.cost(stats.prompt_tokens,
                                                                            stats.completion_tokens)}
        if stats.in_flight:  # a batch engine: later request sets may be built from these answers
            from judgecal.pipeline.batches import BatchesPending

            raise BatchesPending(f"{self.ws.join(store)}: {stats.in_flight:,} requests are at the provider in "
                                 f"{stats.open_batches} batch{'es' if stats.open_batches > 1 else ''}; rerun "
                                 f"`judgecal collect {self.ws.uri}` to commit their answers once done (or add "
                                 "--wait to wait for them)")
        # Later stages need every answer (an engine stage may also drop rows): stop here, exit 3.
        done = completeness(plan, self.store(store), c.max_attempts)
        if not done.complete:
            raise CollectFailed(f"{self.ws.join(store)}: {done.summary()}; {done.advice}")
        return stats

    def answered(self, store: str, plan_name: str, columns: list[str] | None = None) -> pa.Table:
        """The current plan ⋈ its responses (only the response ``columns`` given, default
        all); refuses while any planned request is unanswered."""
        self.ws.require(plan_name, "run `judgecal collect` first")
        plan = self.ws.read_parquet(plan_name)
        self._check_plan(store, plan_name, plan)
        done = completeness(plan, self.store(store), self.cfg.collect.max_attempts)
        if not done.complete and collected_by_hand(self.ws):  # the hint names the commands it came by
            done = replace(done, by_hand=self.ws.uri)
        if not done.complete and (busy := holder(self.ws.uri)) is not None:
            raise InputError(self.ws.join(store), f"{done.summary()}; a collect is running in this folder "
                             f"({busy}): wait for it to end, then rerun this command")
        done.require(self.ws.join(store))
        return answered(plan, self.store(store), columns)


    # -- the plan a store answers: recorded at collect, checked where it is read ------------
    def _record_plan(self, store: str, plan) -> None:
        """study.json keeps, per response folder, the rows and content hash of the plan that
        collect answered into it (``plan_files``)."""
        if not self.ws.exists(STUDY_FILE):
            return
        saved = read_study(self.ws)
        if isinstance(saved, dict):
            saved.setdefault("plan_files", {})[store] = plan_fingerprint(plan)
            self.ws.write_json(STUDY_FILE, saved)

    def write_checked_parquet(self, name: str, table: pa.Table) -> None:
        """Write ``name`` (items.parquet) and record its SHA-256 in study.json (``checked_files``):
        the stages that read it refuse another content (an edited or swapped items.parquet was fitted
        silently, its targets not the data's: a user's finding)."""
        import hashlib

        from judgecal.workspace import parquet_bytes

        data = parquet_bytes(table)
        self.ws.write_bytes(name, data)
        if self.ws.exists(STUDY_FILE):
            saved = read_study(self.ws)
            if isinstance(saved, dict):
                saved.setdefault("checked_files", {})[name] = hashlib.sha256(data).hexdigest()
                self.ws.write_json(STUDY_FILE, saved)

    def read_checked_parquet(self, name: str) -> pa.Table:
        """``name`` as collect wrote it, or one line (collected before files were recorded: read as it is)."""
        import hashlib

        saved = read_study(self.ws) if self.ws.exists(STUDY_FILE) else {}
        want = (saved.get("checked_files") or {}).get(name) if isinstance(saved, dict) else None
        data = self.ws.read_bytes(name)
        if want is not None and hashlib.sha256(data).hexdigest() != want:
            raise InputError(self.ws.join(name), f"not the {name} `judgecal collect` wrote (edited or swapped since: "
                             f"{STUDY_FILE} records another SHA-256); rerun `judgecal collect` to write it again")
        return self.ws.read_parquet(name, data)

    def _check_plan(self, store: str, plan_name: str, plan: pa.Table) -> None:
        """Refuse a plan file that is not the one collect recorded (swapped, truncated, edited)."""
        saved = read_study(self.ws) if self.ws.exists(STUDY_FILE) else {}
        files = saved.get("plan_files") if isinstance(saved, dict) else None
        want = files.get(store) if isinstance(files, dict) else None
        if not isinstance(want, dict):  # collected before plans were recorded
            return
        got = plan_fingerprint(plan)
        if got != want:
            raise InputError(self.ws.join(plan_name), f"not the plan `judgecal collect` answered: {got['rows']:,} "
                             f"requests, content {got['sha256'][:12]}, where {STUDY_FILE} records "
                             f"{want.get('rows', 0):,}, content {str(want.get('sha256'))[:12]} (swapped, truncated "
                             "or edited since); rerun `judgecal collect` to write it again")


def check_output_outlives_job(output: str) -> None:
    """A relative local output inside a Ray job lands in the job's unpacked upload, which Ray
    deletes; the job said 'collected 408 new responses' and printed no path (a user's finding)."""
    from pathlib import Path

    from judgecal.config import RAY_JOB_COPY

    here = Path.cwd()
    ws = Workspace(output)  # as the study will write it ('file://runs/x' is relative there too)
    if ws.is_s3 or RAY_JOB_COPY not in str(here) or not Path(ws.uri).is_relative_to(here):
        return
    raise InputError("[study].output", f"{output!r} lies inside this Ray job's unpacked upload ({here}), which Ray "
                     "deletes: give an absolute folder every node can write, or s3://")


class StudyRunner:
    def __init__(self, cfg: StudyConfig):
        self.cfg = cfg
        self.method = get_method(cfg.method)
        check_output_outlives_job(cfg.output)
        self.ws = Workspace(cfg.output)
        self.run = StudyRun(cfg, self.ws, self.method, record=lambda: self.check_identity(write=True))
        self.timing: dict[str, float] = {}
        self.taken_anew = False  # study.json held another study of which nothing was committed

    # -- identity ---------------------------------------------------------------------
    def identity(self) -> dict:
        return {"method": self.method.name, **self.method.identity(self.cfg)}

    def recorded_identity(self, saved: dict | None) -> dict:
        """The identity as ``saved`` (the folder's study.json) spells its files, where this config
        names the same files otherwise: what a results log records, and is compared with at report."""
        if not (isinstance(saved, dict) and isinstance(saved.get("identity"), dict)):
            return self.identity()
        return spelt_as_collected(self.identity(), saved["identity"], self.cfg, saved.get(PATHS_FROM))

    def check_identity(self, write: bool, same_plan: bool | None = None) -> None:
        """Refuse a workspace that holds another study, or (at fit, evaluate and report) a
        config whose plan is not the one collected; record this study when ``write``."""
        where = self.ws.join(STUDY_FILE)
        mine = self.identity()
        plan = None  # the plan (which may read the data files): after the identity, whose lines come first
        saved = None
        if self.ws.exists(STUDY_FILE):
            saved = read_study(self.ws)
            if not isinstance(saved, dict) or not isinstance(saved.get("identity"), dict):
                what = "no study identity" if not isinstance(saved, dict) or "identity" not in saved else \
                    f"a study identity that is {json.dumps(saved['identity'])[:40]}, not a table"
                raise InputError(where, f"records {what} (written by an earlier judgecal, or edited); use a new "
                                 "output folder")
            try:
                spelt = spelt_as_collected(mine, saved["identity"], self.cfg, saved.get(PATHS_FROM))
                _same(saved["identity"], spelt, where,
                      "this folder holds a study with another {key} ({old}, now "
                      "{new}); use a new output folder or the config it was collected with")
            except InputError as e:
                # a first collect stopped before any part (a wrong model name, port, key) left its
                # study.json, and the corrected config was refused the folder (a user's finding)
                collecting = write or same_plan is False  # collect (and show, which refuses what it would)
                # an import answers the exported requests: it started the study anew with the
                # --set it was given, then refused the results as another study's (a user's finding)
                importing = getattr(self.run.batch_io, "never_starts_anew", False)
                if importing:
                    raise InputError(where, e.problem.replace(
                        "; use a new output folder or the config it was collected with", "; import with the config "
                        "its requests were exported with, or export-batch again with this one")) from None
                if not collecting or self._holds_parts():
                    raise
                if write:
                    was = e.problem.split("; use a new output folder")[0].replace("this folder holds", "held")
                    log(f"[{self.run.tag}] {where}: {was}, of which nothing was committed: the study starts anew")
                saved, self.taken_anew = None, True
            if (not write) if same_plan is None else same_plan:
                plan = self.method.plan_spec(self.cfg)
                old_plan, new_plan = (plan_without_data(p) for p in (saved.get("plan", {}), plan))
                new_plan = spelt_as_collected(new_plan, old_plan, self.cfg, saved.get(PATHS_FROM))
                draws = [f"{sec} {k} = \"first\"" for k, sec in (("item_draw", "[dataset]"), ("pair_draw", "[urw]"))
                         if k in new_plan and k not in old_plan]  # collected before seeded draws
                # a study answered by hand re-plans through export-batch: collect would call the batch
                # API (a user's finding)
                recollect = "`judgecal export-batch` with this config (and its --set)" if collected_by_hand(self.ws) \
                    else "`judgecal collect`"
                _same(old_plan, new_plan, where, "the config's plan differs from the collected one "
                      "({key}: collected {old}, now {new}); run " + recollect.replace("{", "{{").replace("}", "}}")
                      + " first"
                      + (f" (or set {' and '.join(draws)}: the first rows, as they were collected)" if draws else ""))
                if changed := _data_change(saved.get("plan"), plan):
                    redo = "to draw it again (answers to the items drawn again are reused)" \
                        if read_otherwise(*(p.get(DATA) for p in (saved["plan"], plan))) else \
                        "to re-read it (answers to unchanged texts are reused), or restore the file"
                    raise InputError(where, f"the data changed since collect ({changed}); run {recollect} {redo}")
        elif not write:
            raise InputError(where, "missing; run `judgecal collect` first")
        if write:  # at a collect's begin(): its inputs checked (a bad CSV is not told after hashing a model)
            self.run.judge_content = self.check_judge_content(saved)
            plan = self.method.plan_spec(self.cfg) if plan is None else plan
            if saved is not None:  # collect again: say where the data changed (a user's finding)
                if changed := _data_change(saved.get("plan"), plan):
                    simulated = self.cfg.engine.kind == "simulated"
                    reused = (f"the SIMULATED judge's answers are built from {simulated_truth(self.method)}: a "
                              "collect after they changed asks those answers anew" if simulated else
                              "answers to unchanged texts are reused")
                    log(f"[{self.run.tag}] the data changed since the last collect ({changed}): its items are read "
                        f"again, labels included; {reused}")
                self._say_paths_moved(saved, mine)
                if plan_stamp(saved.get("plan")) != plan_stamp(plan):
                    self._mark_earlier_log(saved.get("plan"))
                    self._remove_earlier_outputs()
            # relative paths were read from this folder: a later stage run elsewhere is checked against it
            record = {"identity": mine, "plan": plan, "config": self.cfg.to_dict(),
                      "simulated_judge": self.cfg.engine.kind == "simulated", PATHS_FROM: str(Path.cwd().resolve())}
            if self.run.judge_content is not None:  # never null: a missing record takes the model found next time
                record[JUDGE_CONTENT] = self.run.judge_content
            self.ws.write_json(STUDY_FILE, record)

    def _say_paths_moved(self, saved: dict, mine: dict) -> None:
        """A collect run from another folder than the last one reads relative paths from here
        from now on: said (a collect from elsewhere, beside a same-bytes copy, moved the study
        onto that copy without a word: a user's finding). And a results log of the same files
        spelt otherwise takes this spelling, so report calls it stale, not another study's."""
        was_from, here = saved.get(PATHS_FROM), Path.cwd().resolve()
        relative = [v for _, v in local_paths(self.cfg) if not Path(v).expanduser().is_absolute()]
        # a Ray job runs in a new unpacked copy of its upload each time: no move of the user's
        if isinstance(was_from, str) and relative and Path(was_from) != here \
                and not any(RAY_JOB_COPY in str(p) for p in (was_from, here)):
            log(f"[{self.run.tag}] relative paths ({', '.join(relative)}) are read from {here} from now on; the last "
                f"collect read them from {was_from}")
        old = saved.get("identity")
        if old == mine or spelt_as_collected(mine, old, self.cfg, was_from) != old:
            return
        logs = [n for n in (self.method.results_name,) if self.ws.exists(n)] + self.ws.list("grid", ".json")
        for name in logs:  # the study's own and its grid variants'
            try:
                log_ = self.ws.read_json(name)
            except InputError:  # a damaged log: evaluate writes it anew; this collect goes on
                continue
            if isinstance(log_, dict) and isinstance(log_.get("spec"), dict) and log_["spec"].get("identity") == old:
                log_["spec"]["identity"] = mine
                self.ws.write_json(name, log_)

    def data_changed(self) -> str | None:
        """What changed in the data files since the last collect (None: nothing, or no collect)."""
        if not self.ws.exists(STUDY_FILE) or self.taken_anew:  # another study's data: nothing to compare
            return None
        return _data_change(read_study(self.ws).get("plan"), self.method.plan_spec(self.cfg))

    def committed(self) -> dict[str, int]:
        """Requests with a committed response, per response folder of every request set (the
        diagnostics' own too: the interrupt line counted only the first; a user's finding)."""
        return {store: len(PartStore(self.ws.child(store))) for _, _, store in self.method.request_sets(self.cfg)}

    # -- stages -----------------------------------------------------------------------
    def _timed(self, stage: str, fn):
        t0 = time.perf_counter()
        out = fn()
        self.timing[stage] = round(time.perf_counter() - t0, 3)
        return out

    def check_collectable(self) -> None:
        """What collect refuses before any work (``show`` refuses the same): an engine without
        what the study needs, a RAY_ADDRESS judgecal cannot join, a workspace holding another
        study or judge."""
        self.cfg.engine.require(self.method.needs(self.cfg), "[engine]")
        if not getattr(self.cfg.engine, "driver_side", False):  # Ray runs it: a bad address before any file
            from judgecal.pipeline.collect import check_ray_address

            check_ray_address()
        if self.ws.exists(STUDY_FILE):
            self.check_identity(write=False, same_plan=False)
            if not self.taken_anew:  # a TOML run from another folder than the study's collect: its relative paths too
                saved = read_study(self.ws)
                check_paths_from(self.cfg, saved.get(PATHS_FROM), self.ws.join(STUDY_FILE), reads_data=True,
                                 saved_config=saved.get("config"))

    def check_judge_content(self, saved: dict | None) -> dict | None:
        """The content of the judge's model files (``engines.model_content``; None: no local
        model), refused where ``saved`` (``study.json``, None before the first collect) recorded
        other bytes for the same judge: request ids name the file, so a model replaced under the
        same name would reuse the old one's answers."""
        from judgecal.engines.model_content import content_change, model_content

        located = self.cfg.engine.model_location()
        if located is None:
            return None
        name, path = located
        content = model_content(path, log)
        recorded = saved.get(JUDGE_CONTENT) if isinstance(saved, dict) else None
        if saved is not None and not isinstance(recorded, dict):
            log(f"[{self.run.tag}] {STUDY_FILE} records no content of the judge's model (an earlier judgecal collected "
                "here): recorded now; the answers committed before are taken as this model's")
        elif recorded is not None and (changed := content_change(recorded, content)):
            answers = self.answers_committed()
            if not answers:  # a first collect that stopped before any answer (a model that would not load)
                log(f"[{self.run.tag}] the judge's model changed since the last collect, which committed no answer: "
                    "recorded anew")
                return content
            raise InputError(f"[engine].{name}", f"{path} is not the model this study's {answers:,} committed "
                             f"answers came from ({changed}): new answers would be mixed with them; use a new "
                             "output folder, or restore the model")
        return content

    def _holds_parts(self) -> bool:
        """Whether any response part (an answer or an engine error, of any request set, moved
        aside or not), or a batch record (batches still at a provider), is in the study's folder."""
        from judgecal.pipeline.batches import STATE
        from judgecal.pipeline.store import PART_PREFIX, PART_SUFFIX

        names = [n.rpartition("/")[2] for n in self.ws.list(recursive=True)]
        return any((n.startswith(PART_PREFIX) and n.endswith(PART_SUFFIX)) or n == STATE for n in names)

    def answers_committed(self) -> int:
        """Committed answers (not the engine errors a collect asks again) over every request set."""
        import pyarrow.compute as pc

        from judgecal.schemas import PARSE_ERROR

        statuses = [PartStore(self.ws.child(store)).read(["parse_status"])["parse_status"]
                    for _, _, store in self.method.request_sets(self.cfg)]
        return sum(len(s) - pc.sum(pc.equal(s, PARSE_ERROR)).as_py() if len(s) else 0 for s in statuses)

    def collect(self, wait: bool = False) -> dict:
        """``wait``: a batch engine waits for its batches (else it stops once they are submitted)."""
        self.run.wait = wait
        with one_collect_at_a_time(self.ws.uri, log):  # the checks too: a first collect may be writing study.json
            self.check_collectable()
            self._timed("collect", lambda: self.method.collect(self.run))
        return self.run.collect_stats

    def batch_by_hand(self, io) -> tuple[str, bool]:
        """export-batch / import-batch (``io``: a :mod:`judgecal.pipeline.batch_io` Exporter or
        Importer) over the study's request sets: the line that says where it stopped, and
        whether every planned request is answered."""
        from judgecal.pipeline.batch_io import BatchStop

        self.run.batch_io = io
        try:
            self.collect()  # one at a time, as collect
        except BatchStop as e:
            return str(e), False
        finally:
            self.run.batch_io = None
        return io.done(), True

    def fit(self) -> dict:
        self.check_identity(write=False)
        return self._timed("fit", lambda: self.method.fit(self.run))

    def collected_config(self) -> dict | None:
        """The config the study's last collect recorded (study.json), None before any."""
        saved = read_study(self.ws) if self.ws.exists(STUDY_FILE) else None
        config = saved.get("config") if isinstance(saved, dict) else None
        return config if isinstance(config, dict) else None  # an edited study.json: check_identity says so

    def evaluate(self, results_name: str | None = None) -> dict:
        """``results_name``: keep this log under another name (a grid variant), leaving the
        study's own log as it is."""
        self.check_identity(write=False)
        if results_name:  # the method's other outputs go beside that log, not over the study's own
            self.run.memo["output_prefix"] = results_name.removesuffix(".json") + "."
        results, facts = self._timed("evaluate", lambda: self.method.evaluate(self.run))
        return self.write_log(results, facts, results_name)

    def write_log(self, results: dict, facts: dict, results_name: str | None = None) -> dict:
        collected = self.run.collect_stats
        if not collected and self.ws.exists(self.method.results_name):  # a standalone evaluate keeps
            collected = self.ws.read_json(self.method.results_name).get("stats", {}).get("collect", {})  # run's
        study = read_study(self.ws)
        log_ = {
            "log_version": LOG_VERSION,
            "method": self.method.name,
            "study": self.cfg.name,
            "simulated_judge": self.cfg.engine.kind == "simulated",
            # the collect it read (report refuses the log once another collect has replaced it) and
            # the settings it ran with that are not the collected config's (the report names them)
            "spec": {"config": self.cfg.to_dict(), "identity": self.recorded_identity(study),
                     "collected_plan": plan_stamp(study.get("plan")),
                     "not_as_collected": settings_changed(study.get("config"), self.cfg.to_dict())},
            "stats": {"collect": collected, "timing": dict(self.timing),  # cost_usd: the answers used
                      "responses": {**facts, "cost_usd": self.cfg.engine.cost(facts.get("prompt_tokens", 0),
                                                                  facts.get("completion_tokens", 0))}},
            "results": results,
        }
        self.ws.write_json(results_name or self.method.results_name, log_)
        return log_

    def read_log(self) -> dict:
        self.ws.require(self.method.results_name, "run `judgecal evaluate` first")
        log_ = self.ws.read_json(self.method.results_name)
        if log_.get("log_version") != LOG_VERSION:
            raise InputError(self.ws.join(self.method.results_name),
                             f"results log version {log_.get('log_version')} (this judgecal reads {LOG_VERSION}); "
                             "rerun `judgecal evaluate`")
        return log_

    def report(self) -> tuple[dict, str]:
        """Draws the HTML report from the results log; returns the log and the report's path."""
        self.check_identity(write=False)
        log_ = self.read_log()
        self.check_log_current(log_)
        html = self.method.render_html(log_)
        self.ws.write_text(self.method.report_name, f"{html}\n{REPORT_MARK.format(results_digest(log_))}\n")
        return log_, self.ws.join(self.method.report_name)

    def report_shows(self, log_: dict) -> bool:
        """Whether the folder's report was drawn from results equal to ``log_``'s (its time aside)."""
        if not self.ws.exists(self.method.report_name):
            return False
        return self.ws.read_text(self.method.report_name).rstrip().endswith(REPORT_MARK.format(results_digest(log_)))

    def _remove_earlier_outputs(self) -> None:
        """A collect of changed data (or a resized plan) removes what fit, evaluate and report made
        of the earlier one: a report.html and models.json of the old labels stayed beside the new
        collect, to be opened and read (a user's finding). The results log stays, marked as of the
        earlier collect (``report`` refuses it), and so does a stamped output (URW's
        calibration.json: rewards refuse it, and a training job may hold its path)."""
        kept = (self.method.results_name, *getattr(self.method, "stamped_outputs", ()))
        stale = [n for n in self.method.outputs if self.ws.exists(n)]
        removed = [n for n in stale if n not in kept]
        for name in removed:
            self.ws.delete(name)
        marked = [n for n in stale if n in kept]
        said = ([f"removed {', '.join(removed)}, made from the earlier collect"] if removed else []) + (
            [f"{', '.join(marked)} kept, marked as of the earlier collect (refused until made anew)"] if marked else [])
        if said:
            log(f"[{self.run.tag}] {'; '.join(said)}: `judgecal fit`, `evaluate` and `report` (or `run`) make them "
                "anew")

    def _mark_earlier_log(self, earlier_plan) -> None:
        """A results log written before logs recorded their collect (no stamp) gets the earlier
        collect's, so that ``report`` refuses it as it refuses a stamped one (a second reader's
        finding: such logs were reported with the old labels); so does a method's
        ``stamped_outputs`` file (URW's calibration.json, which rewards check)."""
        name = self.method.results_name
        if self.ws.exists(name):
            old = self.ws.read_json(name)
            if isinstance(old, dict) and isinstance(old.get("spec"), dict) and "collected_plan" not in old["spec"]:
                old["spec"]["collected_plan"] = plan_stamp(earlier_plan)
                self.ws.write_json(name, old)
        for name in getattr(self.method, "stamped_outputs", ()):  # URW's calibration.json: rewards read the stamp
            old = self.ws.read_json(name) if self.ws.exists(name) else None
            if isinstance(old, dict) and "collected_plan" not in old:
                self.ws.write_json(name, {**old, "collected_plan": plan_stamp(earlier_plan)})

    def check_log_current(self, log_: dict) -> None:
        """Refuse a results log evaluated on an earlier collect: a collect after edited labels
        left the old log in place and ``report`` drew its numbers (a user's finding)."""
        check_log_current(self.ws, log_, self.ws.join(self.method.results_name))

    def run_all(self, wait: bool = False) -> dict:
        # the folder's lock over every stage: two runs at once overlapped in fit and evaluate, and
        # the folder ended with one run's study.json beside the other's results (a user's finding)
        with one_collect_at_a_time(self.ws.uri, log):
            t0 = time.perf_counter()
            self.collect(wait)
            self.fit()
            results, facts = self._timed("evaluate", lambda: self.method.evaluate(self.run))
            self.timing["total"] = round(time.perf_counter() - t0, 3)
            if self.ws.exists(self.method.report_name):  # a kill between the log and its report left the old
                self.ws.delete(self.method.report_name)  # report.html beside the new log (a user's finding)
            log_ = self.write_log(results, facts)
            self.report()
            return log_


REPORT_MARK = "<!-- judgecal results {} -->"  # the last line of a report: what it was drawn from


def results_digest(log_: dict) -> str:
    """A results log's content without the time its stages took and the spelling of its folder
    (``runs/s`` from a run's TOML, its absolute path from ``evaluate runs/s``): an evaluate that
    gives the same results gives the same digest (its report "still shows the previous
    results" read as a change where there was none: a user's finding). A report so kept shows
    the time line of the run it was drawn from."""
    from judgecal.ids import stable_hash

    stats = {k: v for k, v in (log_.get("stats") or {}).items() if k != "timing"}
    spec = dict(log_.get("spec") or {})
    if isinstance(spec.get("config"), dict):
        spec["config"] = {k: v for k, v in spec["config"].items() if k != "output"}
    return stable_hash(json.dumps({**log_, "stats": stats, "spec": spec}, sort_keys=True, default=str))


def study_results(target: str, method: str) -> dict:
    """A study folder's results log as ``judgecal report`` reads it, for the notebooks: one
    line where the folder is no study, another method's, not evaluated, or evaluated on an
    earlier collect (a notebook on a wrong folder ended in a 70-line traceback: a user's
    finding); a simulated judge's log says so first."""
    from judgecal.config import load_study

    if not Workspace(target).exists(STUDY_FILE):
        raise InputError(target, "not a judgecal study folder (no study.json); set JUDGECAL_STUDY to a study's "
                         "[study] output")
    runner = StudyRunner(load_study(target, runtime=False))
    if runner.method.name != method:
        raise InputError(target, f"a {runner.method.name} study; open notebooks/{runner.method.name}_results.ipynb")
    log_ = runner.read_log()
    runner.check_log_current(log_)
    if log_.get("simulated_judge"):
        print("SIMULATED judge: these numbers test the method, not any real model")
    return log_


def check_context(engine_cfg, prompts, what: str = "items") -> None:
    """Refuse, before any request is sent, prompts longer than the engine's context window.

    ``prompts`` yields ``(label, system, user, answer_prefix)``. An engine config with an
    ``n_ctx`` (llamacpp) is checked with the model's own chat template and tokenizer, loaded
    vocabulary-only on the driver (~0.1 s for SmolLM2); a prompt whose UTF-8 length is well
    under ``n_ctx`` bytes is not tokenized (a token is at least one byte). Engines without a
    known context (http: the server's limit; simulated, null) are not checked here."""
    n_ctx = getattr(engine_cfg, "n_ctx", None)
    if not n_ctx or getattr(engine_cfg, "kind", None) != "llamacpp":
        return
    from judgecal.engines.chat_tokens import ForgedTurn

    counter = _LlamaTokenCounter.load(engine_cfg)
    if counter is None:
        return
    # past the context the model was trained on its answers are no judgement: a 16k context on
    # SmolLM2 (8k) answered "\ufffd" and "\n", scored as usable from their digit logprobs (a user's finding)
    trained = counter.trained_context()
    limit = min(n_ctx, trained or n_ctx)
    n, over, longest = 0, 0, (0, None)
    for label, system, user, prefix in prompts:
        n += 1
        text = counter.chat.text(system, user, prefix)
        if len(text.encode("utf-8")) + 8 < limit:
            continue
        try:
            tokens = len(counter.chat.tokens(system, user, prefix))
        except ForgedTurn:
            continue  # the engine answers that prompt with its reason (an error row)
        if tokens >= limit:
            over += 1
            longest = max(longest, (tokens, label), key=lambda t: t[0])
    if over and trained is not None and n_ctx >= trained:  # raising n_ctx is no way out (a second reader's finding)
        room = f"; n_ctx {n_ctx} only makes room" if n_ctx > trained else ""
        raise InputError("[engine].n_ctx", f"the longest prompt of {over} of {n} {what} is longer than the "
                         f"{trained} tokens the judge's model was trained on (longest: {longest[1]}, {longest[0]} "
                         f"tokens{room}): past them its answers are no judgement; shorten those texts, or use a "
                         "judge trained on longer contexts")
    if over:
        raise InputError("[engine].n_ctx", f"the longest prompt of {over} of {n} {what} does not fit the judge's "
                         f"context of {n_ctx} tokens (longest: {longest[1]}, {longest[0]} tokens, counted with "
                         "the model's tokenizer); raise [engine].n_ctx"
                         + (f" (at most {trained}, the context the model was trained on)" if trained else "")
                         + " or shorten those texts")


class _LlamaTokenCounter:
    """The llamacpp engine's prompt rendering and tokens (its chat template and tokenizer,
    :class:`judgecal.engines.chat_tokens.ChatTokens`), without loading the weights."""

    def __init__(self, model, template):
        from judgecal.engines.chat_tokens import ChatTokens, llama_specials

        self.model = model
        self.metadata = model.metadata()
        self.chat = ChatTokens(template, lambda text, special, bos: model.tokenize(text.encode("utf-8"), bos, special),
                               llama_specials(model))

    def trained_context(self) -> int | None:
        """The context length the model was trained on (GGUF ``<arch>.context_length``)."""
        value = self.metadata.get(f"{self.metadata.get('general.architecture')}.context_length")
        return int(value) if value is not None and str(value).isdigit() and int(value) > 0 else None

    @classmethod
    def load(cls, engine_cfg):
        try:
            import llama_cpp
            from llama_cpp._internals import LlamaModel

            params = llama_cpp.llama_model_default_params()
            params.vocab_only = True
            model = LlamaModel(path_model=engine_cfg.gguf_path(), params=params, verbose=False)
            return cls(model, engine_cfg.chat_template_for(model.metadata()))
        except InputError:
            raise
        except Exception:  # noqa: BLE001 - no tokenizer here: the engine still refuses each long prompt
            return None



def plan_stamp(plan) -> str | None:
    """A collected plan's fingerprint (data hashes included)."""
    from judgecal.ids import stable_hash

    return None if plan is None else stable_hash(json.dumps(plan, sort_keys=True, default=str))


def collected_stamp(ws: Workspace) -> str | None:
    """The :func:`plan_stamp` of the collect the folder's study.json records: what a results
    log and a calibration.json record of the collect they read, to be refused after another."""
    study = read_study(ws)
    return plan_stamp(study.get("plan") if isinstance(study, dict) else None)


SETTINGS_FROM = ("fit", "design", "diagnostics", "urw")  # sections a later stage may run otherwise (--set)


def check_log_current(ws: Workspace, log_: dict, where: str) -> None:
    """Refuse a results log (``where``) of the study folder ``ws`` evaluated on an earlier
    collect than the folder's study.json records (see :meth:`StudyRunner.check_log_current`)."""
    spec = log_.get("spec") if isinstance(log_.get("spec"), dict) else {}
    saved = read_study(ws) if ws.exists(STUDY_FILE) else None
    mine, theirs = (saved or {}).get("identity") if isinstance(saved, dict) else None, spec.get("identity")
    # another study's log copied in was drawn, its judge said in a footer alone (a user's finding)
    if isinstance(mine, dict) and isinstance(theirs, dict) and mine != theirs:
        key = next(k for k in dict.fromkeys([*mine, *theirs]) if mine.get(k) != theirs.get(k))
        was, here = (_short(x) for x in _differing(theirs.get(key), mine.get(key)))
        raise InputError(where, f"the results log of another study (its {key} is not this folder's: "
                         f"{was}, here {here}); run `judgecal evaluate` for this one")
    stamp = spec.get("collected_plan")
    if stamp is not None and stamp != plan_stamp(saved.get("plan") if isinstance(saved, dict) else None):
        # a grid variant's log is written by its grid alone: evaluate and run left it stale (a user's finding)
        again = "rerun the grid that wrote it (`judgecal grid GRID.toml`)" if Path(where).parent.name == "grid" \
            and not where.endswith(("/results.json", "/urw_results.json")) else \
            "run `judgecal evaluate` (and `judgecal fit`), or `judgecal run`"
        raise InputError(where, f"evaluated on an earlier collect (the data or the plan changed since); {again}")


def settings_changed(collected: dict | None, now: dict) -> dict[str, list]:
    """``field -> [as collected, now]`` for the settings that change evaluate's numbers and
    differ from the collected config's (``evaluate --set ...``: study.seed and the sections
    above). A field the collected config lacks (an older judgecal's) is not a change."""
    if not isinstance(collected, dict):
        return {}
    old_all, new_all = (json.loads(json.dumps(x)) for x in (collected, now))  # tuples as lists, as saved
    out = {}
    if "seed" in old_all and old_all["seed"] != new_all.get("seed"):
        out["study.seed"] = [old_all["seed"], new_all.get("seed")]
    for section in SETTINGS_FROM:
        old, new = old_all.get(section), new_all.get(section) or {}
        for key in old if isinstance(old, dict) else ():
            if old[key] != new.get(key):
                out[f"{section}.{key}"] = [old[key], new.get(key)]
    return out


def plan_without_data(plan) -> dict:
    """A plan record's entries but its data files' content (compared on its own: _data_change)."""
    return {k: v for k, v in dict(plan or {}).items() if k != DATA}


def _data_change(old_plan, new_plan) -> str | None:
    """What changed between the data entries of the collected plan and this one (None: the same,
    or one of them has none, as a study.json from before plan.data)."""
    old, new = (dict(p or {}).get(DATA) for p in (old_plan, new_plan))
    if isinstance(old, dict) and isinstance(new, dict) and old.get("hash") != new.get("hash"):
        if read_otherwise(old, new) and plan_without_data(old_plan) != plan_without_data(new_plan):
            return None  # the same files, another sample drawn by a changed limit: not the data (a user's finding)
        return describe_change(old, new)
    return None


ABSENT_AS = {"sampling": {"temperature": 0.0, "seed": 0}}  # plan entries absent at these values (prism.plan_spec)

# what a key that holds a hash stands for, in the refusal's words ("another template_version
# (1d4f7ce800dc519a, now a5d5dbfee5c24f81)" told a user nothing of the templates_audit he had set)
HASHED_KEYS = {"template_version": "template_version (the verifier's template set: the templates and the "
                                   "[urw].templates_audit that picks them)",
               "template": "template (the judge's prompt template: its text, or [dataset].template's file)"}


def _same(old: dict, new: dict, where: str, message: str) -> None:
    """Refuse with the first key (in the config's order: max_groups before the seed it brings)
    whose value differs, showing only the entries that differ (two long values cut at the same
    point looked identical: a user's finding)."""
    for key in _keys(old, new):
        if old.get(key) != new.get(key):
            # an entry a plan leaves out at its default is shown as that default ("now none" read as unset)
            was, now = _differing(*(d.get(key, ABSENT_AS.get(key)) for d in (old, new)))
            said = message.format(key=HASHED_KEYS.get(key, key), old=_short(was), new=_short(now))
            if "custom:" in was + now:  # a [dataset].template file's task, named by the file's hash
                said += " (custom:<hash> is the task of a [dataset].template file, by its content)"
            if key == "dataset" and _only_path(old.get(key), new.get(key)):  # a second batch, saved under a new name
                said += (f" (new or corrected labels of the same items? write them into {old[key]['path']}, which "
                         "collect reads again, asking only what changed)")
            if key == "bank" and _bank_edited(old.get(key), new.get(key)):  # the config did not change, the file did
                said += f" (the bank {new[key]['name']!r} changed content since collect: restore the file [pool] bank " \
                        "names, or collect the edited bank into a new output folder)"
            raise InputError(where, said)


def _only_path(old, new) -> bool:
    """Two datasets apart in their path alone (a user's second batch under a new file name was
    told "use a new output folder", which asks every answer again)."""
    return isinstance(old, dict) and isinstance(new, dict) and "path" in old and \
        {k: v for k, v in old.items() if k != "path"} == {k: v for k, v in new.items() if k != "path"}


def _bank_edited(old, new) -> bool:
    """One bank by name whose content differs (a bank file edited after collect: the refusal
    pointed at the config, which had not changed; a user's finding)."""
    return isinstance(old, dict) and isinstance(new, dict) and old.get("name") == new.get("name") \
        and old.get("contents") != new.get("contents")


def _keys(old: dict, new: dict) -> list:
    return [*new, *(k for k in old if k not in new)]


def _differing(old, new) -> tuple[str, str]:
    """Two values as a user reads them, mappings reduced to their entries that differ, each named
    by its path ("columns.quality none", not "{columns {quality none}}": a user's finding)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return _plain(old), _plain(new)
    parts = _differing_entries(old, new, "")
    if not parts:  # {x: None} and {}: equal entries, unequal mappings
        return _plain(old), _plain(new)
    return ", ".join(f"{k} {o}" for k, o, _ in parts), ", ".join(f"{k} {n}" for k, _, n in parts)


def _differing_entries(old: dict, new: dict, prefix: str) -> list[tuple[str, str, str]]:
    """(dotted key, old, new) for each entry that differs, nested mappings walked."""
    parts = []
    for k in _keys(old, new):
        o, n = old.get(k), new.get(k)
        if o == n:
            continue
        if isinstance(o, dict) and isinstance(n, dict):
            parts += _differing_entries(o, n, f"{prefix}{k}.")
        else:
            parts.append((f"{prefix}{k}", _plain(o), _plain(n)))
    return parts


def _short(v) -> str:
    s = _plain(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _plain(v) -> str:
    """A plan value as a user reads it: none, yes/no, lists without Python's quotes
    (``[orders 2 2, scales 1-10]``, not ``[['orders', 2, 2], ['scales', '1-10']]``)."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(" ".join(map(str, x)) if isinstance(x, (list, tuple)) else _plain(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} {_plain(x)}" for k, x in v.items()) + "}"
    return str(v)
