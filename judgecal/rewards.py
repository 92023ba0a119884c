"""URW scores as RL rewards, reusing a calibration saved by a URW study (calibration.json).

* TRL (GRPOTrainer): ``URWReward(path)`` is a reward function
  ``f(prompts, completions, criteria, **kwargs) -> list[float]``; ``criteria`` is a dataset
  column (one list of criterion strings per sample), passed by TRL as a keyword.
* verl (custom reward loader): ``compute_score(data_source, solution_str, ground_truth,
  extra_info=None) -> float`` with the criteria as ``ground_truth`` (a list or a JSON list)
  and the prompt in ``extra_info["prompt"]``; verl's batch reward manager's plural keywords
  (``solution_strs=...``) return a list. The calibration path comes from
  ``extra_info["urw_calibration"]`` or the ``JUDGECAL_URW_CALIBRATION`` variable.

Both batch every (completion x criterion x template) verification into one engine call
through the engine layer (the calibration's own verifier unless another is given). A sample
any of whose verifications failed gets ``None`` (TRL skips it) instead of a score from the
templates that happened to answer; verl's ``compute_score`` raises for it, with the reason.
``compute_score`` takes any further keywords verl passes, and is safe to call from verl's
thread pool (one scorer per calibration, built once; one engine call at a time per scorer).
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter

import pyarrow as pa

from judgecal.calibrate.urw import URW
from judgecal.engines.actor import answer
from judgecal.engines.base import EngineConfig, engine_config_from_dict
from judgecal.errors import InputError
from judgecal.pipeline.render import render_table
from judgecal.rubrics.plan import VerifierRenderer, build_verify_plan
from judgecal.rubrics.templates import QUESTIONS, TemplateSet
from judgecal.rubrics.votes import soft_scores
from judgecal.schemas import PARSE_ERROR, RUBRIC
from judgecal.workspace import Workspace


def _text(x) -> str:
    """TRL passes plain strings or conversations (lists of {role, content}); a content may be
    None or a list of parts ({"type": "text", "text": ...})."""
    if x is None:
        return ""
    if isinstance(x, list):
        return "\n".join(_text(m.get("content")) if isinstance(m, dict) and "role" in m else
                         str(m.get("text", "")) if isinstance(m, dict) else _text(m) for m in x)
    return str(x)


class URWScorer:
    def __init__(self, calibration_path: str, engine: EngineConfig | None = None):
        """``calibration_path``: a URW study's ``calibration.json``, local or ``s3://``."""
        folder, _, name = str(calibration_path).rstrip("/").rpartition("/")
        ws = Workspace(folder or ".")
        ws.require(name, "no URW calibration there (run a URW study's `fit` stage)")
        cal = ws.read_json(name)
        where = ws.join(name)
        self.templates = TemplateSet(QUESTIONS, tuple(cal["templates_active"]))
        self.templates.check_same(cal["template_version"], where)
        self.urw = URW.from_dict(cal["urw"])
        self.engine_cfg = engine or engine_config_from_dict(cal["engine"], f"{where} engine")
        self._lock = threading.Lock()
        self.last_failures: Counter = Counter()
        self._engine = None

    @property
    def engine(self):
        if self._engine is None:
            self._engine = self.engine_cfg.build()
        return self._engine

    def score(self, prompts: list[str], responses: list[str], criteria: list[list[str]]) -> list[float | None]:
        """Per sample: the URW score, or None when one of its verifications failed."""
        with self._lock:  # engines are not thread-safe; verl calls from a thread pool
            return self._score(prompts, responses, criteria)

    def _score(self, prompts, responses, criteria) -> list[float | None]:
        if not (len(prompts) == len(responses) == len(criteria)):
            raise InputError("rewards", f"{len(prompts)} prompts, {len(responses)} completions, {len(criteria)} criteria")
        rows = {f.name: [] for f in RUBRIC}
        for i, (pr, rs, cs) in enumerate(zip(prompts, responses, criteria)):
            if not cs:
                raise InputError(f"criteria[{i}]", "this response has no criteria")
            for j, c in enumerate(cs):
                for n, v in zip(RUBRIC.names, (f"r{i}", "g", _text(pr), _text(rs), f"c{j}", str(c), "human", None)):
                    rows[n].append(v)
        rubric = pa.Table.from_pydict(rows, schema=RUBRIC)
        plan = build_verify_plan(rubric, self.templates, self.engine.identity, 0)
        rows = plan.append_column("attempt", pa.array([1] * plan.num_rows, pa.int32()))
        rendered = render_table(VerifierRenderer(rubric, self.templates), rows, self.engine_cfg.wants_meta)
        outs = answer(self.engine, rendered)
        # A sample with a failed verification gets no score: a reward from the templates that
        # happened to answer would be another reward.
        status = outs["parse_status"].to_pylist()
        self.last_failures = Counter(t.splitlines()[0][:160] for t, s in zip(outs["raw_text"].to_pylist(), status)
                                     if s == PARSE_ERROR)
        failed = {i for i, s in zip(outs["item_id"].to_pylist(), status) if s == PARSE_ERROR}
        ok = pa.array([i not in failed for i in plan["item_id"].to_pylist()])
        outs = outs.drop_columns(["item_id", "group_id", "probe_id", "run", "attempt"])
        by = {}
        if pa.compute.any(ok).as_py():
            votes = soft_scores(plan.filter(ok).join(outs, keys="request_id"), self.templates)
            by = dict(zip(*self.urw.response_scores(votes["v_tmpl"].to_numpy(), votes["item_id"].to_numpy())))
        return [None if f"r{i}" in failed else float(by[f"r{i}"]) for i in range(len(prompts))]


class URWReward:
    """A TRL reward function (GRPOTrainer ``reward_funcs=[URWReward(path)]``)."""

    __name__ = "urw_reward"  # TRL logs rewards under the function's name

    def __init__(self, calibration_path: str, engine: EngineConfig | None = None):
        self.scorer = URWScorer(calibration_path, engine)

    def __call__(self, prompts, completions, criteria=None, **kwargs) -> list[float]:
        if criteria is None:
            raise InputError("criteria", "the dataset needs a 'criteria' column (a list of criteria per prompt)")
        return self.scorer.score(list(prompts), list(completions), [list(c) for c in criteria])


_SCORERS: dict[str, URWScorer] = {}
_SCORERS_LOCK = threading.Lock()


def _criteria(gt) -> list[str]:
    if isinstance(gt, str):
        try:
            gt = json.loads(gt)
        except json.JSONDecodeError:
            raise InputError("ground_truth", "must be a list of criteria or a JSON list") from None
    return [str(c) for c in gt]


def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, *,
                  data_sources=None, solution_strs=None, ground_truths=None, extra_infos=None, **kwargs):
    """verl's custom reward function; batched when called with the plural keywords. Further
    keywords verl passes (e.g. ``reward_router_address``) are accepted and unused."""
    batched = solution_strs is not None
    sols = list(solution_strs) if batched else [solution_str]
    gts = list(ground_truths) if batched else [ground_truth]
    infos = list(extra_infos) if batched and extra_infos is not None else [extra_info] * len(sols)
    infos = [i or {} for i in infos]
    path = infos[0].get("urw_calibration") or os.environ.get("JUDGECAL_URW_CALIBRATION")
    if not path:
        raise InputError("extra_info.urw_calibration", "no calibration (or set JUDGECAL_URW_CALIBRATION)")
    with _SCORERS_LOCK:
        if path not in _SCORERS:
            _SCORERS[path] = URWScorer(path)
        scorer = _SCORERS[path]
    scores = scorer.score([i.get("prompt", "") for i in infos], sols, [_criteria(g) for g in gts])
    if None in scores:
        top = scorer.last_failures.most_common(1)
        raise InputError("rewards", f"{scores.count(None)} of {len(scores)} samples could not be verified "
                         f"({top[0][0] if top else 'unknown error'})")
    return scores if batched else scores[0]
