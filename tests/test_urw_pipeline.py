"""URW end to end on local Ray (simulated verifier for the plumbing), bad input, and the
reward entry points driven by the real local verifier."""

import json
import re
import subprocess

import pytest

from judgecal.config import parse_config
from judgecal.engines import LlamaCppEngineConfig, SimulatedEngineConfig
from judgecal.errors import InputError
from judgecal.rewards import URWReward, compute_score
from judgecal.methods.runner import StudyRunner, plan_stamp

from conftest import ROOT, FailOnMarker, judgecal_cmd, write_config

METHODS = ["Uniform", "Beta-Binomial", "Sampling Ensemble", "SCP", "Mondrian-SCP", "URW", "URW†", "URW‡"]


def config(out, **urw):
    return parse_config({
        "study": {"name": "u", "output": str(out), "method": "urw"},
        "urw": {"calibration_max_responses": 40, "max_pairs_per_dataset": 6, "bootstrap": 300, **urw},
        "engine": {"kind": "simulated"},
        "collect": {"block_rows": 200},
    })


def test_urw_study_with_a_simulated_verifier_and_resume(ray_local, tmp_path, capfd):
    cfg = config(tmp_path / "u")
    log = StudyRunner(cfg).run_all()
    summary = log["results"]
    assert [r["method"] for r in summary["methods"]] == METHODS
    assert summary["pairs"] == 30 and log["simulated_judge"]
    assert summary["criterion_sources"] == {"generated": 60 * 3}
    cov = summary["coverage"]
    assert [c["alpha"] for c in cov["rows"]] == [0.05, 0.1, 0.2, 0.3, 0.5]
    # 40 responses drawn one per prompt first: 40 of InfoBench's 50 prompts, folds by prompt
    assert cov["folds"] == 5 and cov["responses"] == cov["prompts"] == 40
    assert summary["calibration_sample"] == ("40 responses from 40 prompts, drawn with seed 0, "
                                             "at most one per prompt before a second")
    assert all(c["theorem"] <= c["validity"] <= c["alpha"] + 0.1 for c in cov["rows"])
    w = cov["weights"]
    assert w["correct"]["n"] + w["wrong"]["n"] == cov["criteria"] == summary["calibration_criteria"]
    cell = summary["methods"][0]["all"]
    assert cell["pairs"] == 30 and 1 < cell["prompts"] <= 30  # prompt clusters
    assert {"diff_low", "rel_improvement_high", "accuracy_note"} <= set(cell)
    assert all(r["dropped"]["evaluation_criteria"] == 0 for r in summary["methods"])
    text = (tmp_path / "u" / "urw_report.html").read_text()
    assert "Theorem 3.1" in text and "Remark B.3" in text and "5-fold" in text and "folds by prompt" in text
    from judgecal.methods.base import get_method

    # the criteria generation's requests and the verifier's, as the time line counts them
    assert re.search(r"^time: \d+s total, \d+s collecting \([\d,]+ new requests over its 2 request sets, the criteria "
                     r"generation's included\)$", get_method("urw").format_text(log), re.M)
    # an evaluate with another alpha refits its own weighters; calibration.json (what rewards read)
    # stays as fit made it, and the note says so (a user's finding: it said nothing)
    from judgecal import cli

    capfd.readouterr()
    assert cli.main(["evaluate", str(tmp_path / "u"), "--set", "urw.alpha=0.3"]) == 0
    assert ("judgecal: note: calibration.json was fitted with settings other than this evaluate: urw.alpha = 0.1 "
            f"(evaluated with 0.3); `judgecal fit {tmp_path / 'u'} --set urw.alpha=0.3` fits it for these"
            ) in capfd.readouterr().err
    # 30 pairs x 2 responses x 3 criteria x (6 templates + 6 samples) + calibration x 6 templates
    plan_rows = 60 * 3 * 12 + summary["calibration_criteria"] * 6
    assert log["stats"]["responses"]["requests"] == plan_rows
    assert "SIMULATED" in (tmp_path / "u" / "urw_report.html").read_text()
    again = StudyRunner(cfg).collect()
    assert again["responses"]["computed"] == 0 and again["responses"]["already_done"] == plan_rows
    assert again["criteria"]["computed"] == 0 and again["criteria"]["already_done"] == 30
    # a calibration.json fitted on an earlier collect of its study: rewards scored with the old
    # fit after a collect of edited labels (a user's finding); `fit` makes it current again
    folder = tmp_path / "u"
    assert len(URWReward(str(folder))(["Say hi."], ["Hello!"], criteria=[["Is it a greeting?"]])) == 1
    cal = json.loads((folder / "calibration.json").read_text())
    (folder / "calibration.json").write_text(json.dumps({**cal, "collected_plan": "an earlier collect"}))
    with pytest.raises(InputError, match=r"calibration\.json: fitted on another collect than the one .*study\.json "
                       r"records \(its data or plan changed since\); run `judgecal fit .*` to fit it"):
        URWReward(str(folder))
    StudyRunner(cfg).fit()
    assert len(URWReward(str(folder))(["Say hi."], ["Hello!"], criteria=[["Is it a greeting?"]])) == 1
    study = json.loads((folder / "study.json").read_text())
    cal = json.loads((folder / "calibration.json").read_text())
    assert cal["collected_plan"] == plan_stamp(study["plan"])  # fit stamps the collect it fitted on
    # a calibration.json from before the stamp: the collect that changes the plan stamps it with the earlier one
    (folder / "calibration.json").write_text(json.dumps({k: v for k, v in cal.items() if k != "collected_plan"}))
    StudyRunner(cfg)._mark_earlier_log({**study["plan"], "an": "earlier plan"})
    with pytest.raises(InputError, match=r"calibration\.json: fitted on another collect than the one"):
        URWReward(str(folder))
    # a collect of changed data removes the report of the earlier one and keeps the stamped
    # calibration (a training job may hold its path; rewards refuse it) and the marked log
    assert (folder / "urw_report.html").exists()
    StudyRunner(cfg)._remove_earlier_outputs()
    assert not (folder / "urw_report.html").exists()
    assert (folder / "calibration.json").exists() and (folder / "urw_results.json").exists()


def test_scp_with_too_few_calibration_criteria_says_it_abstains_everywhere(ray_local, tmp_path, capsys):
    """With fewer calibration criteria than ceil(1/alpha) - 1 no p-value can reach alpha: SCP
    abstains on every criterion and falls back to the uniform mean vote, so its row was plain
    voting without a word (a user's finding). fit warns; the table counts the responses."""
    from judgecal.report.urw import format_urw_table

    log = StudyRunner(config(tmp_path / "u", calibration_max_responses=1, max_pairs_per_dataset=2)).run_all()
    res = log["results"]
    n_cal = res["calibration_criteria"]
    assert n_cal < 9
    err = capsys.readouterr().err
    for name in ("SCP", "Mondrian-SCP"):
        assert (f"[urw] warning: {name} has {n_cal} usable calibration criteria, fewer than the 9 with which alpha "
                f"= 0.1 can ever give a single label: it abstains on every criterion") in err
    responses = 2 * res["pairs"]
    by_method = {r["method"]: r["dropped"]["abstained_responses"] for r in res["methods"]}
    assert by_method == {m: responses if m in ("SCP", "Mondrian-SCP") else 0 for m in METHODS}
    labels = res["calibration_labels"]
    assert sum(labels.values()) == n_cal and f"calibration: {n_cal} labelled criteria ({labels['met']} met, " in \
        format_urw_table(log)
    text = format_urw_table(log)
    assert (f"responses on which the method abstained on every criterion:\n  SCP: {responses} of {responses} "
            "evaluation responses (each scored by the uniform mean of its votes)") in text


def run_cli(tmp_path, text):
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{tmp_path / "out"}"\nmethod = "urw"\n' + text)
    return subprocess.run(judgecal_cmd("run", str(cfg)), cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_overlapping_calibration_and_evaluation_is_refused(tmp_path):
    rows = [{"prompt": "Say hi.", "response": "hi", "criterion": "Does it greet?", "label": 1},
            {"prompt": "Say hi.", "response": "hi", "criterion": "Is it short?", "label": 1}]
    cal = tmp_path / "cal.jsonl"
    cal.write_text("\n".join(json.dumps(r) for r in rows))
    pairs = tmp_path / "llmbar"
    pairs.mkdir()
    (pairs / "llmbar_Natural.json").write_text(json.dumps([{"input": "Say hi.", "output_1": "hello", "output_2": "no",
                                                            "label": 1}]))
    r = run_cli(tmp_path, f'[urw]\ncalibration = "generic"\ncalibration_path = "{cal}"\n'
                          f'llmbar_subsets = ["Natural"]\nevaluation_paths = {{llmbar = "{pairs}"}}\n'
                          '[engine]\nkind = "simulated"\n')
    assert r.returncode == 2 and "overlapping sets" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_bad_calibration_label_is_refused(tmp_path):
    cal = tmp_path / "cal.jsonl"
    cal.write_text(json.dumps({"prompt": "p", "response": "r", "criterion": "c?", "label": 2}))
    r = run_cli(tmp_path, f'[urw]\ncalibration = "generic"\ncalibration_path = "{cal}"\n[engine]\nkind = "simulated"\n')
    assert r.returncode == 2 and "row 1: label 2 is not 0 or 1" in r.stderr


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """A calibration file as a URW study's fit stage writes it, for the real local verifier."""
    from judgecal.calibrate.urw import URW
    from judgecal.rubrics import TemplateSet

    urw = URW().fit([1, 5 / 6, 4 / 6, 0, 1 / 6, 0.5, 1, 2 / 6], [1, 1, 0, 0, 0, 1, 1, 0])
    t = TemplateSet()
    cfg = LlamaCppEngineConfig()
    p = tmp_path_factory.mktemp("cal") / "calibration.json"
    p.write_text(json.dumps({"verifier": cfg.identity, "engine": {"kind": "llamacpp"}, "template_version": t.version,
                             "templates_active": list(t.active), "urw": urw.to_dict()}))
    return p


def test_trl_and_verl_rewards_with_the_real_local_verifier(calibration):
    reward = URWReward(str(calibration))
    prompts = ["Write one sentence about cats.", [{"role": "user", "content": "Name a prime number."}]]
    completions = ["Cats are small, curious animals.", [{"role": "assistant", "content": "7"}]]
    criteria = [["Is it one sentence?", "Is it about cats?"], ["Is the answer a prime number?"]]
    scores = reward(prompts, completions, criteria=criteria)
    assert len(scores) == 2 and all(0.0 <= s <= 1.0 for s in scores)
    assert reward.__name__ == "urw_reward"
    one = compute_score("demo", "Cats are small, curious animals.", json.dumps(criteria[0]),
                        {"prompt": prompts[0], "urw_calibration": str(calibration)})
    assert one["score"] == pytest.approx(scores[0]) and one["urw_failed"] == 0
    many = compute_score(data_sources=["d", "d"], solution_strs=["Cats purr.", "Dogs bark."],
                         ground_truths=[criteria[0], criteria[0]],
                         extra_infos=[{"prompt": prompts[0], "urw_calibration": str(calibration)}] * 2)
    assert len(many) == 2 and all(m["urw_failed"] == 0 for m in many)


def test_a_changed_template_set_is_refused(calibration, tmp_path):
    data = json.loads(calibration.read_text())
    data["template_version"] = "0000"
    p = tmp_path / "old.json"
    p.write_text(json.dumps(data))
    from judgecal.errors import InputError

    with pytest.raises(InputError, match="template set changed since calibration"):
        URWReward(str(p))


@pytest.fixture
def simulated_calibration(tmp_path):
    from judgecal.calibrate.urw import URW
    from judgecal.rubrics import TemplateSet

    urw = URW().fit([1, 5 / 6, 4 / 6, 0, 1 / 6, 0.5, 1, 2 / 6], [1, 1, 0, 0, 0, 1, 1, 0])
    t = TemplateSet()
    p = tmp_path / "calibration.json"
    p.write_text(json.dumps({"verifier": "sim", "engine": {"kind": "simulated"}, "template_version": t.version,
                             "templates_active": list(t.active), "urw": urw.to_dict()}))
    return p


def test_rewards_from_a_simulated_calibration_say_so_once(simulated_calibration, capsys):
    """The tables and reports say SIMULATED; rewards from the same study had no such word (a
    user's finding): one warning line when the verifier is first used."""
    for reward in (URWReward(str(simulated_calibration)), URWReward(str(simulated_calibration))):
        for _ in range(2):  # two scorers of one calibration (TRL's and verl's) said it twice each
            reward(["Say hi."], ["hi"], criteria=[["Does it greet?"]])
    err = capsys.readouterr().err
    assert err.count("judgecal: warning: ") == 1
    assert f"{simulated_calibration}: a SIMULATED verifier gives these rewards; they test the plumbing only" in err


def test_a_verifier_whose_votes_do_not_tell_met_from_unmet_is_said_at_fit_and_by_its_rewards(simulated_calibration,
                                                                                              capsys):
    """A calibration on SmolLM2's votes gave 1.0 to right and wrong answers alike, fitted and
    loaded without a word (a user's finding): fit records how well the votes rank the labelled
    criteria, and a weak record is one warning line when the rewards first verify."""
    import pandas as pd

    from judgecal.rubrics.votes import verifier_separation, weak_verifier_lines

    cal = pd.DataFrame({"v_tmpl": [1.0, 1.0, 0.5, 1.0, 1.0, 0.0], "label": [1, 0, 1, 0, 1, 1]})
    weak = verifier_separation(cal)
    assert weak == {"auroc": 0.25, "met": 4, "not_met": 2}  # of the 8 met/unmet pairs, 4 tie (1.0), none right
    assert weak_verifier_lines(weak) == [
        "the verifier's votes rank met above unmet calibration criteria in 0.25 of such pairs (AUROC, 0.5 is chance; "
        "4 met, 2 not met): URW's scores, and rewards from this calibration, carry little or no signal; use a "
        "stronger verifier"]
    strong = verifier_separation(cal.assign(v_tmpl=[1.0, 0.0, 0.8, 0.2, 0.9, 0.7]))
    assert strong["auroc"] == 1.0 and weak_verifier_lines(strong) == []
    assert verifier_separation(cal.assign(label=1)) is None  # one label: label_warnings says so

    data = json.loads(simulated_calibration.read_text()) | {"verifier_separation": weak}
    simulated_calibration.write_text(json.dumps(data))
    for reward in (URWReward(str(simulated_calibration)), URWReward(str(simulated_calibration))):
        for _ in range(2):  # two scorers of one calibration (TRL's and verl's) said it twice each
            reward(["Say hi."], ["hi"], criteria=[["Does it greet?"]])
    err = capsys.readouterr().err
    assert err.count("judgecal: warning: ") == 2  # SIMULATED, and weak: once each
    assert f"{simulated_calibration}: the verifier's votes rank met above unmet calibration criteria in 0.25" in err
    other = URWReward(str(simulated_calibration), SimulatedEngineConfig())  # another verifier: not measured
    other(["Say hi."], ["hi"], criteria=[["Does it greet?"]])
    assert "carry little or no signal" not in capsys.readouterr().err


def test_rewards_in_real_trainers_failed_samples_odd_contents_and_threads(simulated_calibration):
    """TRL: a sample whose verification failed gets None, the others their score; message
    contents may be None or lists of parts. verl: extra keywords, concurrent calls."""
    from concurrent.futures import ThreadPoolExecutor

    from judgecal.errors import InputError

    reward = URWReward(str(simulated_calibration), FailOnMarker())
    prompts = [[{"role": "user", "content": [{"type": "text", "text": "Name a prime."}]}], "Say hi.", "Say hi."]
    completions = [[{"role": "assistant", "content": None}], "hi FAIL", "hello there"]
    scores = reward(prompts, completions, criteria=[["Is it prime?"], ["Does it greet?"], ["Does it greet?"]])
    assert scores[1] is None and all(0.0 <= s <= 1.0 for s in (scores[0], scores[2]))
    path = str(simulated_calibration)
    args = [("d", f"reply {k}", ["Is it polite?", "Is it short?"], {"prompt": "Say hi.", "urw_calibration": path})
            for k in range(8)]
    alone = [compute_score(*a, reward_router_address=None) for a in args]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda a: compute_score(*a, extra_kwarg=1), args))
    assert together == alone and all(0.0 <= r["score"] <= 1.0 and r["urw_failed"] == 0 for r in alone)
    os_path = {"prompt": "Say hi.", "urw_calibration": path}
    import judgecal.rewards as rw

    rw._SCORERS[path] = rw.URWScorer(path, FailOnMarker())
    assert compute_score("d", "FAIL", ["Does it greet?"], os_path)["urw_failed"] == 1
    with pytest.raises(InputError, match="1 of 1 samples could not be verified"):
        compute_score("d", "FAIL", ["Does it greet?"], os_path, raise_on_failure=True)


def test_a_calibration_of_one_label_gets_a_warning():
    """Every calibration label 1 was accepted without a word (a user's finding)."""
    import pandas as pd

    from judgecal.methods.urw import label_warnings

    assert label_warnings(pd.Series([1, 1, 1])) == ["every calibration label is 1 (met, 3 criteria): the weights are "
                                                    "calibrated on met criteria only; add labelled unmet ones"]
    assert label_warnings(pd.Series([0, 0]))[0].startswith("every calibration label is 0 (not met, 2 criteria)")
    assert label_warnings(pd.Series([0, 1, 1])) == []


def test_a_changed_template_set_is_named_in_words_not_only_by_its_hash():
    """`fit --set urw.templates_audit=...` was refused as "another template_version (1d4f...,
    now a5d5...)", which told a user nothing of the audit he had set (a user's finding)."""
    from judgecal.errors import InputError
    from judgecal.methods.runner import _same

    with pytest.raises(InputError, match=r"^w: another template_version \(the verifier's template set: the templates "
                                         r"and the \[urw\].templates_audit that picks them\) \(1d4f, now a5d5\)$"):
        _same({"verifier": "v", "template_version": "1d4f"}, {"verifier": "v", "template_version": "a5d5"}, "w",
              "another {key} ({old}, now {new})")
    with pytest.raises(InputError, match=r"\(custom:<hash> is the task of a \[dataset\].template file, by its "
                                         r"content\)$"):  # an edited template file: the dataset's task changes
        _same({"dataset": {"name": "generic", "task": "custom:1d4f"}},
              {"dataset": {"name": "generic", "task": "custom:a5d5"}}, "w", "another {key} ({old}, now {new})")
