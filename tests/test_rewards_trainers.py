"""Rewards where trainers run them, without TRL or verl installed: the README's TRL and verl
snippets executed the way those trainers call them, a pickled URWReward (also through a
spawned process, as TRL's async GRPO worker sends it) scoring exactly like the original, and
verl's compute_score counting a failed verification instead of failing the step."""

import importlib.util
import json
import multiprocessing
import os
import pickle
import re
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest
import yaml

import judgecal.rewards as rw
from judgecal.engines import SimulatedEngineConfig
from judgecal.errors import InputError
from judgecal.rewards import FAILURE_SCORE, URWReward, URWScorer, compute_score

from conftest import ROOT, FailOnMarker

VERL_KEYS = ["score", "urw_score", "urw_failed", "urw_error"]
PROMPTS = ["Say hi to the user.", [{"role": "user", "content": "Name a prime number."}]]
COMPLETIONS = ["Hello there!", [{"role": "assistant", "content": "7"}]]
CRITERIA = [["Does it greet the user?", "Is it one sentence?"], ["Is the answer a prime number?"]]


def write_calibration(path):
    """A calibration.json as a URW study's fit stage writes it, for the SIMULATED verifier."""
    from judgecal.calibrate.urw import URW
    from judgecal.rubrics import TemplateSet

    urw = URW().fit([1, 5 / 6, 4 / 6, 0, 1 / 6, 0.5, 1, 2 / 6], [1, 1, 0, 0, 0, 1, 1, 0])
    t = TemplateSet()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"verifier": "sim", "engine": {"kind": "simulated"}, "template_version": t.version,
                                "templates_active": list(t.active), "urw": urw.to_dict()}))
    return path


@pytest.fixture
def calibration(tmp_path):
    return write_calibration(tmp_path / "study" / "calibration.json")


class HoldsALockAndAPool(SimulatedEngineConfig):
    """A simulated verifier whose engine holds what real ones hold and pickle cannot carry."""

    def build(self):
        engine = super().build()
        engine.lock, engine.pool = threading.Lock(), ThreadPoolExecutor(1)
        return engine


def readme_blocks() -> dict[str, tuple[str, str]]:
    """The README's fenced blocks marked ``<!-- test: NAME -->``: name -> (language, code)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- test: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", text, re.S)
    return {name: (lang, code) for name, lang, code in found}


def test_readme_has_the_trainer_snippets():
    blocks = readme_blocks()
    assert {k: v[0] for k, v in blocks.items()} == {"trl": "python", "verl-file": "python",
                                                    "verl-config": "yaml", "verl-row": "python"}
    trl = blocks["trl"][1]
    assert "GRPOTrainer(" in trl and "reward_funcs=[reward]" in trl  # the construction a user copies


def test_readme_trl_snippet_runs_as_grpo_trainer_calls_it(tmp_path, monkeypatch, capsys):
    write_calibration(tmp_path / "runs" / "urw_demo" / "calibration.json")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rw, "_SCORERS", {})  # the snippet's relative path, cached under another cwd
    ns: dict = {}
    exec(compile(readme_blocks()["trl"][1], "README.md[trl]", "exec"), ns)
    scores = ns["scores"]
    assert len(scores) == 1 and isinstance(scores[0], float) and 0.0 <= scores[0] <= 1.0
    assert str(scores) in capsys.readouterr().out
    # The same sample through verl's entry point gets the same number.
    row = ns["rows"][0]
    verl = compute_score("d", "Hello there!", row["criteria"], {"prompt": row["prompt"]},
                         urw_calibration="runs/urw_demo/calibration.json")
    assert verl["score"] == scores[0]


def _call_with_kwargs(raw_fn, extra_kwargs, *args, **kwargs):
    """verl's wrapper (verl.trainer.ppo.reward): reward_kwargs merged over the call's keywords."""
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


def load_like_verl(config: dict):
    """verl's get_custom_reward_fn: the file by path (importlib, an unregistered module), the
    function by name, wrapped with reward_kwargs."""
    fn_cfg = config["custom_reward_function"]
    path = fn_cfg["path"]
    spec = importlib.util.spec_from_file_location(f"custom_module_{hash(os.path.abspath(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return partial(_call_with_kwargs, getattr(module, fn_cfg["name"]), dict(fn_cfg.get("reward_kwargs", {})))


def test_readme_verl_snippets_load_and_score_as_verl_calls_them(tmp_path, monkeypatch):
    write_calibration(tmp_path / "runs" / "urw_demo" / "calibration.json")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rw, "_SCORERS", {})
    monkeypatch.delenv("JUDGECAL_URW_CALIBRATION", raising=False)
    blocks = readme_blocks()
    config = yaml.safe_load(blocks["verl-config"][1])
    assert config["custom_reward_function"]["reward_kwargs"]["raise_on_failure"] is False
    (tmp_path / config["custom_reward_function"]["path"]).write_text(blocks["verl-file"][1])
    reward_fn = load_like_verl(config)
    ns: dict = {}
    exec(compile(blocks["verl-row"][1], "README.md[verl-row]", "exec"), ns)
    row = ns["row"]

    def one_sample(solution):  # verl's naive reward loop: keywords, extra_info grown per sample
        info = dict(row["extra_info"], num_turns=None, rollout_reward_scores={})
        return reward_fn(data_source=row["data_source"], solution_str=solution,
                         ground_truth=row["reward_model"]["ground_truth"], extra_info=info)

    solutions = [f"Hello there, friend number {k}!" for k in range(6)]
    with ThreadPoolExecutor(4) as pool:  # verl calls from a thread pool
        results = list(pool.map(one_sample, solutions))
    assert results == [one_sample(s) for s in solutions]
    for r in results:
        assert list(r) == VERL_KEYS and "acc" not in r
        assert 0.0 <= r["score"] <= 1.0 and r["urw_score"] == r["score"]
        assert r["urw_failed"] == 0 and r["urw_error"] == ""
    # verl's batch reward manager: plural keywords, one dict per sample
    many = reward_fn(data_sources=np.array([row["data_source"]] * 2), solution_strs=solutions[:2],
                     ground_truths=[row["reward_model"]["ground_truth"]] * 2, extra_infos=[row["extra_info"]] * 2)
    assert [list(m) for m in many] == [VERL_KEYS] * 2 and many[0] == results[0]
    trl = URWReward(config["custom_reward_function"]["reward_kwargs"]["urw_calibration"])
    criteria = json.loads(row["reward_model"]["ground_truth"])
    assert [m["score"] for m in many] == trl([row["extra_info"]["prompt"]] * 2, solutions[:2], criteria=[criteria] * 2)


def test_a_pickled_reward_holds_no_engine_and_scores_like_the_original(calibration):
    reward = URWReward(str(calibration), HoldsALockAndAPool())
    expected = reward(PROMPTS, COMPLETIONS, criteria=CRITERIA)  # builds the engine (a lock and a pool)
    assert all(isinstance(s, float) for s in expected)
    blob = pickle.dumps(reward)
    calibration.unlink()  # the copy carries the calibration, not a path it must still reach
    copy = pickle.loads(blob)
    assert copy.scorer._engine is None and copy.scorer.engine_cfg == reward.scorer.engine_cfg
    assert copy.__name__ == "urw_reward"
    assert copy(prompts=PROMPTS, completions=COMPLETIONS, completion_ids=[[1], [2]], trainer_state=None,
                criteria=CRITERIA) == expected
    assert copy.scorer._engine is not None
    assert pickle.loads(pickle.dumps(copy))(PROMPTS, COMPLETIONS, criteria=CRITERIA) == expected


def test_a_changed_template_set_is_refused_when_unpickled(calibration):
    scorer = URWScorer(str(calibration))
    state = scorer.__getstate__()
    state["calibration"] = dict(state["calibration"], template_version="0000")
    with pytest.raises(InputError, match="template set changed since calibration"):
        URWScorer.__new__(URWScorer).__setstate__(state)


def test_a_reward_sent_to_a_spawned_process_scores_like_the_original(calibration):
    reward = URWReward(str(calibration), SimulatedEngineConfig(max_flip=0.2))
    expected = reward(PROMPTS, COMPLETIONS, criteria=CRITERIA)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        got = pool.submit(reward, prompts=PROMPTS, completions=COMPLETIONS, completion_ids=[[1], [2]],
                          trainer_state=None, criteria=CRITERIA).result(timeout=120)
    assert got == expected


@pytest.fixture
def failing(calibration, monkeypatch):
    """compute_score's scorer for this calibration, with a verifier that fails on FAIL."""
    path = str(calibration)
    monkeypatch.setitem(rw._SCORERS, path, URWScorer(path, FailOnMarker()))
    return path


def test_compute_score_counts_a_failed_verification_instead_of_raising(failing):
    info = {"prompt": "Say hi."}
    r = compute_score("d", "hi FAIL", ["Does it greet?"], info, urw_calibration=failing)
    assert r == {"score": FAILURE_SCORE, "urw_score": FAILURE_SCORE, "urw_failed": 1,
                 "urw_error": "TimeoutError: judge timed out"}
    assert FAILURE_SCORE == 0.0
    ok = compute_score("d", "hello there", ["Does it greet?"], info, urw_calibration=failing)
    assert ok["urw_failed"] == 0 and 0.0 <= ok["score"] <= 1.0
    # verl reads a list column of its parquet back as a numpy array
    assert compute_score("d", "hello there", np.array(["Does it greet?"]), info, urw_calibration=failing) == ok
    # A batch mixing a failed call, a verified sample and rows whose ground_truth holds no criteria
    many = compute_score(data_sources=["d"] * 4, solution_strs=["hello there", "hi FAIL", "hey", "yo"],
                         ground_truths=[["Does it greet?"], ["Does it greet?"], "[]", "not a list"],
                         extra_infos=[info] * 4, urw_calibration=failing)
    assert [m["urw_failed"] for m in many] == [0, 1, 1, 1]
    assert many[0] == ok and many[1] == r  # the others' failures do not change a verified sample's score
    assert many[2]["urw_error"] == "ground_truths[2]: holds no criteria"
    assert many[3]["urw_error"] == "ground_truths[3]: must be a list of criteria or a JSON list, not 'not a list'"
    # verl stacks the keys of the first sample over all samples: every sample has them all
    stacked = {k: np.array([m[k] for m in many]) for k in many[0]}
    assert stacked["urw_failed"].mean() == 0.75 and list(stacked["score"]) == [ok["score"], 0.0, 0.0, 0.0]


def test_compute_score_raises_when_asked(failing, monkeypatch):
    info = {"prompt": "Say hi."}
    with pytest.raises(InputError, match=r"1 of 1 samples could not be verified \(TimeoutError: judge timed out\)"):
        compute_score("d", "hi FAIL", ["Does it greet?"], info, urw_calibration=failing, raise_on_failure=True)
    with pytest.raises(InputError, match="raise_on_failure: must be true or false"):
        compute_score("d", "hi", ["Does it greet?"], info, urw_calibration=failing, raise_on_failure="false")
    assert compute_score("d", "hello", ["Does it greet?"], info, urw_calibration=failing,
                         raise_on_failure=True)["urw_failed"] == 0
    # No calibration: nothing could be scored, so this always raises.
    monkeypatch.delenv("JUDGECAL_URW_CALIBRATION", raising=False)
    with pytest.raises(InputError, match="urw_calibration: no calibration"):
        compute_score("d", "hi", ["Does it greet?"], info)
