"""URW scores as RL rewards, reusing a calibration saved by a URW study (calibration.json).

* TRL (GRPOTrainer): ``URWReward(path)`` is a reward function
  ``f(prompts, completions, criteria, **kwargs) -> list[float | None]``; ``criteria`` is a
  dataset column (per sample, criteria as ``_criteria`` reads them), passed by TRL as a
  keyword with the others it passes (``completion_ids``, ``trainer_state``, further columns),
  which are unused. A row whose criteria cannot be read is refused (``InputError`` naming
  ``criteria[i]``). A sample any of whose verifications failed gets ``None``, which TRL skips. It
  pickles (TRL's async GRPO worker pickles its reward functions into a spawned process): the
  pickle holds the calibration's path and contents and the engine override, never an engine,
  lock or thread pool; the copy builds its engine on its first call and scores like the
  original.
* verl (``custom_reward_function``): ``compute_score(data_source, solution_str,
  ground_truth, extra_info, **kwargs)``, called once per sample from a thread pool, with the
  criteria as ``ground_truth`` (read as ``_criteria`` reads them) and the prompt in
  ``extra_info["prompt"]``; verl's batch reward manager's plural keywords
  (``solution_strs=...``) return a list. The calibration path is the ``urw_calibration``
  keyword (verl's ``custom_reward_function.reward_kwargs``), else
  ``extra_info["urw_calibration"]``, else the ``JUDGECAL_URW_CALIBRATION`` variable. It
  always returns a dict, ``{"score", "urw_score", "urw_failed", "urw_error"}`` with the same
  keys for every sample (verl stacks them per key, logs the numeric ones as metrics, and
  logs a bare float as ``acc``, its accuracy metric, which a URW score is not). A sample that
  could not be verified (a verifier call failed, its ``ground_truth`` cannot be read as
  criteria, or its ``extra_info`` has no ``prompt``, which URW judges the response against)
  gets ``FAILURE_SCORE`` with ``urw_failed: 1`` and the reason in ``urw_error`` rather than
  failing the training step; ``raise_on_failure=True`` raises instead. A missing or broken
  calibration, or plural keywords of different lengths, always raise: no sample could be
  scored, or none is known to be scored against its own criteria. So do the first
  ``INPUT_FAIL_FAST`` samples a process gives one calibration when every one of them fails
  those input checks (no prompt, unreadable criteria) before any sample passed them: that is
  the data set up wrongly, not a stray sample, and would train on ``FAILURE_SCORE`` throughout.

The calibration is a URW study's ``calibration.json`` or the study's output folder holding it,
local or ``s3://``. An empty batch scores as ``[]``.

Both batch every (completion x criterion x template) verification into one engine call
through the engine layer (the calibration's own verifier unless another is given), and
never score a sample from the templates that happened to answer. ``compute_score`` is safe
under verl's thread pool (one scorer per calibration, built once; one engine call at a time
per scorer).
"""

from __future__ import annotations

import json
import os
import sys
import threading

import numpy as np
import pyarrow as pa

from judgecal.calibrate.urw import URW
from judgecal.engines.actor import answer
from judgecal.datasets.text import blank, storable
from judgecal.engines.base import EngineConfig, engine_config_from_dict
from judgecal.errors import InputError
from judgecal.ids import stable_hash
from judgecal.pipeline.render import render_table
from judgecal.rubrics.data import _plain, criterion_ids
from judgecal.rubrics.plan import VerifierRenderer, build_verify_plan
from judgecal.rubrics.templates import QUESTIONS, TemplateSet
from judgecal.rubrics.votes import soft_scores, weak_verifier_lines
from judgecal.schemas import PARSE_ERROR, RUBRIC
from judgecal.workspace import Workspace

FAILURE_SCORE = 0.0
INPUT_FAIL_FAST = 8  # verl samples failing the input checks, before any passed, that stop training
"""verl's score for a sample that could not be verified. verl has no "skip this sample" (the
score goes into the reward tensor; a NaN would spread through the advantages), so it gets
the lowest URW score: a completion that breaks the verifier (say, too long for its context)
must never be rewarded above one that was verified. ``urw_failed`` counts it."""


def _text(x) -> str:
    """TRL passes plain strings or conversations (lists of {role, content}; verl's parquet
    rows arrays of them); a content may be None or a list of parts ({"type": "text", "text": ...})."""
    if x is None:
        return ""
    if isinstance(x, (tuple, np.ndarray)):  # verl reads a parquet list column back as an array
        x = list(x)
    if isinstance(x, list):
        return "\n".join(_text(m.get("content")) if isinstance(m, dict) and "role" in m else
                         str(m.get("text", "")) if isinstance(m, dict) else _text(m) for m in x)
    return str(x)


EMPTY_RESPONSE_SCORE = 0.0  # an empty response meets no criterion: every vote 0, the judge not asked


def _sample_text(x, where: str) -> str:
    """A prompt or completion as text (a string or a conversation, as :func:`_text` reads them);
    None or anything else (a number) is the caller's bug, refused naming ``where``: read as
    text, a None completion was scored, and the simulated verifier gave it the top reward (a
    user's finding)."""
    if x is None or not isinstance(x, (str, list, tuple, np.ndarray)):
        raise InputError(where, f"must be text or a conversation, not {x!r:.80}")
    return _text(x)


def _criteria(c, where: str) -> list[str]:
    """One sample's criteria, read the same way for TRL (``criteria[i]``) and verl
    (``ground_truth``): a list, tuple or 1-D array (verl reads a parquet list column back as
    one) of non-empty strings, or a string holding a JSON list of them. Anything else, a plain
    string included (it would be read one character per criterion), and an empty list (a URW
    score needs at least one criterion) raise an ``InputError`` naming ``where``."""
    if isinstance(c, str):
        try:
            c = json.loads(c)
        except json.JSONDecodeError:
            pass
    if not (isinstance(c, (list, tuple)) or (isinstance(c, np.ndarray) and c.ndim == 1)):
        raise InputError(where, f"must be a list of criteria or a JSON list, not {c!r:.80}")
    if len(c) == 0:
        raise InputError(where, "holds no criteria")
    for j, x in enumerate(c):
        if not isinstance(x, str) or blank(x):  # invisible marks alone are no criterion, as in a study's files
            raise InputError(where, f"criterion {j} must be a non-empty string, not {x!r:.80}")
        storable(x, where, "", f"criterion {j}")  # half an emoji: a traceback at its id's hash
    return [str(x) for x in c]


def _same_length(**columns) -> None:
    """One shared refusal when the per-sample columns (TRL's or verl's plural keywords) differ
    in length: zipping them would pair a response with another sample's criteria."""
    if len({len(v) for v in columns.values()}) > 1:
        raise InputError("rewards", ", ".join(f"{len(v)} {k}" for k, v in columns.items())
                         + " (one of each per sample)")


_CALIBRATION_KEYS = ("engine", "template_version", "templates_active", "urw")


def _looks_like(cal) -> str:
    """What a JSON file given as a calibration holds instead, for the refusal."""
    if not isinstance(cal, dict):
        return f"a JSON {type(cal).__name__}, not an object"
    if "log_version" in cal and cal.get("method") == "urw":
        return "a URW study's results log; give the calibration.json beside it"
    if "log_version" in cal:
        return f"a {cal.get('method')} study's results log; only a URW study writes a calibration.json"
    return "no " + ", ".join(k for k in _CALIBRATION_KEYS if k not in cal)


def _check_current(cal, ws: Workspace, where: str) -> None:
    """Refuse a calibration.json fitted on an earlier collect of the study in its folder: a
    collect after edited labels left it in place, and rewards scored with the old fit without a
    word (a user's finding; the study's own report refuses its old results the same way)."""
    from judgecal.config import STUDY_FILE
    from judgecal.methods.runner import collected_stamp

    fitted_on = cal.get("collected_plan") if isinstance(cal, dict) else None
    if fitted_on is None or not ws.exists(STUDY_FILE):  # fitted before stamps (see runner), or out of its study
        return
    if collected_stamp(ws) != fitted_on:
        raise InputError(where, f"fitted on another collect than the one {ws.join(STUDY_FILE)} records (its data "
                         f"or plan changed since); run `judgecal fit {ws.uri}` to fit it on this collect, or copy "
                         "calibration.json out of the study's folder to score with it as it is")


_SAID: set[str] = set()  # the scorers' warning lines said in this process


def _say_once(line: str) -> None:
    """A scorer's warning, once per process: TRL's and verl's scorers of one calibration said
    each twice (a user's finding)."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr, flush=True)


class URWScorer:
    """A calibration and its verifier. Pickles as what rebuilds it (see ``__getstate__``)."""

    def __init__(self, calibration_path: str, engine: EngineConfig | None = None):
        """``calibration_path``: a URW study's ``calibration.json``, or the study's output
        folder holding it, local or ``s3://``; ``engine``: a verifier other than the
        calibration's own."""
        folder, _, name = str(calibration_path).rstrip("/").rpartition("/")
        ws = Workspace(folder or ".")
        if not ws.exists(name):
            inner = Workspace(str(calibration_path))
            if not inner.exists("calibration.json"):
                raise InputError(ws.join(name), "neither a file nor a folder holding calibration.json; give a URW "
                                 "study's calibration.json or its output folder (its `fit` stage writes it)")
            ws, name = inner, "calibration.json"
        cal = ws.read_json(name)
        _check_current(cal, ws, ws.join(name))
        self._load(str(calibration_path), cal, engine, ws.join(name))

    def _load(self, path: str, cal: dict, engine: EngineConfig | None, where: str) -> None:
        if not isinstance(cal, dict) or not all(k in cal for k in _CALIBRATION_KEYS):
            raise InputError(where, f"not a URW calibration.json ({_looks_like(cal)})")
        self.calibration_path, self._calibration, self._engine_override = path, cal, engine
        self.templates = TemplateSet(QUESTIONS, tuple(cal["templates_active"]))
        self.templates.check_same(cal["template_version"], where)
        self.urw = URW.from_dict(cal["urw"])
        self.engine_cfg = engine or engine_config_from_dict(cal["engine"], f"{where} engine")
        # a batch API cannot answer while a trainer waits: the same judge (same identity, same
        # reader) through the provider's synchronous endpoint (it was refused: a user's finding)
        self.synchronous_for_batch = getattr(self.engine_cfg, "driver_side", False) and hasattr(self.engine_cfg,
                                                                                               "as_http")
        if self.synchronous_for_batch:
            self.engine_cfg = self.engine_cfg.as_http()
        self._lock = threading.Lock()
        self._engine = None
        self.input_failures: int | None = 0  # verl samples refused before any passed its checks; None after

    def __getstate__(self) -> dict:
        """The calibration's contents (a few KB, so the copy needs no access to the file and
        cannot see a newer one), its path (for messages) and the engine override; never the
        engine (a model, sockets, thread pools) or the lock."""
        return {"calibration_path": self.calibration_path, "calibration": self._calibration,
                "engine": self._engine_override}

    def __setstate__(self, state: dict) -> None:
        """Rebuilds the calibration now (cheap; a changed template set is refused here, as on
        load) and the engine on the first call."""
        self._load(state["calibration_path"], state["calibration"], state["engine"], state["calibration_path"])

    def note_inputs(self, passed: int, refused: list[str]) -> None:
        """Raises once the first ``INPUT_FAIL_FAST`` verl samples were all refused by the input
        checks (see the module docstring); a sample that passed ends the watch."""
        with self._lock:
            if self.input_failures is None or not (passed or refused):  # watch over, or an empty batch
                return
            if passed:
                self.input_failures = None
                return
            self.input_failures += len(refused)
            if self.input_failures >= INPUT_FAIL_FAST:
                raise InputError("rewards", f"the first {self.input_failures} samples all failed before "
                                 f"verification ({refused[0]}): the data is set up wrongly; none would score "
                                 f"but {FAILURE_SCORE}")

    @property
    def engine(self):
        if self._engine is None:
            self._engine = self.engine_cfg.build()
            if "simulated" in (self.engine_cfg.kind, dict(self._calibration.get("engine") or {}).get("kind")):
                # the tables and reports say SIMULATED; a reward had no such word (a user's finding)
                _say_once(f"judgecal: warning: {self.calibration_path}: "
                          f"{'a SIMULATED verifier gives these rewards' if self.engine_cfg.kind == 'simulated' else 'this calibration was fitted with a SIMULATED verifier'}"  # noqa: E501
                          "; they test the plumbing only, not a judge")
            separation = None if self._engine_override else self._calibration.get("verifier_separation")
            for line in weak_verifier_lines(separation):  # as fit measured it, on the calibration's own verifier
                _say_once(f"judgecal: warning: {self.calibration_path}: {line}")
            if self.synchronous_for_batch:
                _say_once(f"judgecal: note: {self.calibration_path}: the batch judge ({self.engine_cfg.model}) "
                          "verifies through the provider's synchronous endpoint at its full price (a batch cannot "
                          "answer during training)")
        return self._engine

    def score(self, prompts: list[str], responses: list[str], criteria: list[list[str]]) -> list[float | None]:
        """Per sample: the URW score, or None when one of its verifications failed."""
        return self.verify(prompts, responses, criteria)[0]

    def verify(self, prompts, responses, criteria) -> tuple[list[float | None], list[str | None]]:
        """Per sample: (the URW score or None, the first failed verification's reason or None)."""
        with self._lock:  # engines are not thread-safe; verl calls from a thread pool
            return self._verify(prompts, responses, criteria)

    def _verify(self, prompts, responses, criteria):
        _same_length(prompts=prompts, completions=responses, criteria=criteria)
        criteria = [_criteria(c, f"criteria[{i}]") for i, c in enumerate(criteria)]
        if not criteria:
            return [], []
        # ids by content, not by place in the batch: a SIMULATED verifier's draws follow the ids,
        # and a sample's reward changed with its neighbours (TRL's batch against verl's one call:
        # a user's finding); a sample repeated in a batch is verified once
        ids = [_sample_id(pr, rs, cs) for pr, rs, cs in zip(prompts, responses, criteria)]
        # an empty completion (a policy that stops at once) is scored as meeting no criterion,
        # not asked: a small verifier may say "yes" to nothing, and a policy would learn it
        empty = {r for r, rs in zip(ids, responses) if not _text(rs).strip()}
        rows = {f.name: [] for f in RUBRIC}
        for r, pr, rs, cs in dict((r, (r, pr, rs, cs)) for r, pr, rs, cs in zip(ids, prompts, responses, criteria)
                                  if r not in empty).values():
            for c_id, c in zip(criterion_ids(cs, "c"), cs):
                for n, v in zip(RUBRIC.names, (r, "g", _text(pr), _text(rs), c_id, c, "human", None)):
                    rows[n].append(v)
        if len(empty) == len(set(ids)):
            return [EMPTY_RESPONSE_SCORE] * len(responses), [None] * len(responses)
        rubric = pa.Table.from_pydict(rows, schema=RUBRIC)
        plan = build_verify_plan(rubric, self.templates, self.engine.identity, 0)
        rows = plan.append_column("attempt", pa.array([1] * plan.num_rows, pa.int32()))
        rendered = render_table(VerifierRenderer(rubric, self.templates), rows, self.engine_cfg.wants_meta)
        outs = answer(self.engine, rendered)
        # A sample with a failed verification gets no score: a reward from the templates that
        # happened to answer would be another reward.
        reasons: dict[str, str] = {}
        for item, text, status in zip(outs["item_id"].to_pylist(), outs["raw_text"].to_pylist(),
                                      outs["parse_status"].to_pylist()):
            if status == PARSE_ERROR and item not in reasons:
                reasons[item] = ((text or "").splitlines() or ["unknown error"])[0][:160]
        ok = pa.array([i not in reasons for i in plan["item_id"].to_pylist()])
        outs = outs.drop_columns(["item_id", "group_id", "probe_id", "run", "attempt"])
        by = {}
        if pa.compute.any(ok).as_py():
            votes = soft_scores(plan.filter(ok).join(outs, keys="request_id"), self.templates)
            # a criterion no template answered with a verdict (an answer off the yes/no scale) has
            # no vote: the sample gets no score, as a failed one (it raised inside URW, ending the
            # caller's training step: a CI run's finding)
            unread = votes.loc[~np.isfinite(votes["v_tmpl"].to_numpy(float)), "item_id"]
            for item in unread:
                reasons.setdefault(item, "no template's answer to a criterion was a verdict (yes/no)")
            votes = votes[~votes["item_id"].isin(set(unread))]
            if len(votes):
                by = dict(zip(*self.urw.response_scores(votes["v_tmpl"].to_numpy(), votes["item_id"].to_numpy())))
        return ([EMPTY_RESPONSE_SCORE if r in empty else None if r in reasons else float(by[r]) for r in ids],
                [reasons.get(r) for r in ids])


def _sample_id(prompt, response, criteria: list[str]) -> str:
    # the criteria as a set (with repeats): listed in another order, a sample was another sample
    # and a simulated verifier scored it otherwise (a user's finding); JSON: no part runs into the next
    return "r" + stable_hash(json.dumps([_text(prompt), _text(response), sorted(map(_plain, criteria))]))


class URWReward:
    """A TRL reward function (GRPOTrainer ``reward_funcs=[URWReward(path)]``); picklable."""

    __name__ = "urw_reward"  # TRL logs rewards under the function's name

    def __init__(self, calibration_path: str, engine: EngineConfig | None = None):
        self.scorer = URWScorer(calibration_path, engine)

    def __call__(self, prompts, completions, criteria=None, **kwargs) -> list[float | None]:
        if criteria is None:
            raise InputError("criteria", "the dataset needs a 'criteria' column (a list of criteria per prompt)")
        prompts, completions = list(prompts), list(completions)
        for i, (p, c) in enumerate(zip(prompts, completions)):
            if not _sample_text(p, f"prompts[{i}]").strip():  # URW judges a response against its prompt
                raise InputError(f"prompts[{i}]", "is empty; URW judges a response against its prompt")
            _sample_text(c, f"completions[{i}]")
        return self.scorer.score(prompts, completions, list(criteria))


_SCORERS: dict[str, URWScorer] = {}
_SCORERS_LOCK = threading.Lock()


def _scorer(path: str) -> URWScorer:
    with _SCORERS_LOCK:
        if path not in _SCORERS:
            _SCORERS[path] = URWScorer(path)
        return _SCORERS[path]


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *,
                  data_sources=None, solution_strs=None, ground_truths=None, extra_infos=None,
                  urw_calibration=None, raise_on_failure=False, **kwargs):
    """verl's custom reward function: per sample ``{"score", "urw_score", "urw_failed",
    "urw_error"}`` (a list of them when called with the plural keywords). A sample that could
    not be verified scores ``FAILURE_SCORE`` with ``urw_failed: 1`` unless
    ``raise_on_failure`` is true. Further keywords verl passes (e.g.
    ``reward_router_address``) are accepted and unused."""
    if not isinstance(raise_on_failure, bool):
        raise InputError("raise_on_failure", f"must be true or false, not {raise_on_failure!r}")
    batched = solution_strs is not None
    sols = list(solution_strs) if batched else [solution_str]
    gts = list(ground_truths if batched else [ground_truth])
    infos = list(extra_infos) if batched and extra_infos is not None else [extra_info] * len(sols)
    if batched:
        _same_length(solution_strs=sols, ground_truths=gts, extra_infos=infos,
                     **({} if data_sources is None else {"data_sources": list(data_sources)}))
    infos = [i or {} for i in infos]
    path = (urw_calibration or (infos[0].get("urw_calibration") if infos else None)
            or os.environ.get("JUDGECAL_URW_CALIBRATION"))
    if not path:
        raise InputError("urw_calibration", "no calibration (set custom_reward_function.reward_kwargs."
                         "urw_calibration, extra_info.urw_calibration or JUDGECAL_URW_CALIBRATION)")
    scorer = _scorer(str(path))
    scores: list[float | None] = [None] * len(sols)
    reasons: list[str | None] = [None] * len(sols)
    todo, criteria = [], []
    for i, (gt, info) in enumerate(zip(gts, infos)):
        at = f"s[{i}]" if batched else ""  # ground_truths[2] in a batch, ground_truth alone
        try:
            cs = _criteria(gt, f"ground_truth{at}")
            _sample_text(sols[i], f"solution_str{at}")
            if not _text(info.get("prompt")).strip():  # URW judges a response against its prompt
                raise InputError(f"extra_info{at}.prompt", "missing; URW judges the response against its prompt")
        except InputError as e:
            reasons[i] = str(e)
            continue
        todo.append(i)
        criteria.append(cs)
    scorer.note_inputs(len(todo), [r for r in reasons if r])
    if todo:
        got, why = scorer.verify([infos[i]["prompt"] for i in todo], [sols[i] for i in todo], criteria)
        for i, s, r in zip(todo, got, why):
            scores[i], reasons[i] = s, r
    failed = [r for s, r in zip(scores, reasons) if s is None]
    if failed and raise_on_failure:
        raise InputError("rewards", f"{len(failed)} of {len(sols)} samples could not be verified ({failed[0]})")
    out = [{"score": FAILURE_SCORE, "urw_score": FAILURE_SCORE, "urw_failed": 1, "urw_error": r or "unknown error"}
           if s is None else {"score": s, "urw_score": s, "urw_failed": 0, "urw_error": ""}
           for s, r in zip(scores, reasons)]
    return out if batched else out[0]
