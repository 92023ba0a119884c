"""What a reward call is given, read one way for TRL and verl: a row's criteria, the batch's
lengths, an empty batch, the calibration (a file, a study folder, or something else), and a
verl sample without its prompt."""

import json

import numpy as np
import pytest

import judgecal.rewards as rw
from judgecal.errors import InputError
from judgecal.rewards import FAILURE_SCORE, URWReward, compute_score

from test_rewards_trainers import write_calibration

GOOD = ["Does it greet the user?", "Is it one sentence?"]
INFO = {"prompt": "Say hi to the user."}


@pytest.fixture
def calibration(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "_SCORERS", {})
    return str(write_calibration(tmp_path / "study" / "calibration.json"))


@pytest.mark.parametrize("row", [tuple(GOOD), np.array(GOOD), json.dumps(GOOD)], ids=["tuple", "array", "json"])
def test_a_row_of_criteria_reads_the_same_on_both_paths(calibration, row):
    reward = URWReward(calibration)
    expected = reward(["Say hi to the user."], ["Hello there!"], criteria=[GOOD])
    assert reward(["Say hi to the user."], ["Hello there!"], criteria=[row]) == expected
    assert compute_score("d", "Hello there!", row, INFO, urw_calibration=calibration)["score"] == expected[0]


NOT_A_LIST = "must be a list of criteria or a JSON list, not "
BAD = {  # a row -> the refusal after "criteria[1]: " / "ground_truths[1]: " / "ground_truth: "
    "plain string": ("Does it greet the user?", NOT_A_LIST + "'Does it greet the user?'"),
    "None": (None, NOT_A_LIST + "None"),
    "number": (5, NOT_A_LIST + "5"),
    "JSON string": ('"Does it greet?"', NOT_A_LIST + "'Does it greet?'"),
    "JSON object": ('{"q": "Does it greet?"}', NOT_A_LIST + "{'q': 'Does it greet?'}"),
    "dict": ({"q": "Does it greet?"}, NOT_A_LIST + "{'q': 'Does it greet?'}"),
    "empty list": ([], "holds no criteria"),
    "empty JSON list": ("[]", "holds no criteria"),
    "empty criterion": (["Does it greet?", " "], "criterion 1 must be a non-empty string, not ' '"),
    "number criterion": ('["Does it greet?", 3]', "criterion 1 must be a non-empty string, not 3"),
    # as in a study's files (a reader's findings): invisible marks alone are none; half an emoji was a traceback
    "invisible criterion": (["Does it greet?", "\u200b"], "criterion 1 must be a non-empty string, not '\\u200b'"),
    "half an emoji": (["Does it greet?", "Is it \ud83d?"], "criterion 1 holds a broken character (U+D83D, half of a "
                      "UTF-16 pair: a text cut inside an emoji?) at character 7; remove or mend it"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_row_that_is_not_criteria_is_refused_the_same_way_on_both_paths(calibration, name):
    row, problem = BAD[name]
    with pytest.raises(InputError) as e:
        URWReward(calibration)(["Say hi.", "Say hi."], ["Hi!", "Hi!"], criteria=[GOOD, row])
    assert str(e.value) == f"criteria[1]: {problem}" and "\n" not in str(e.value)
    one = compute_score("d", "Hi!", row, INFO, urw_calibration=calibration)
    assert one == {"score": FAILURE_SCORE, "urw_score": FAILURE_SCORE, "urw_failed": 1,
                   "urw_error": f"ground_truth: {problem}"}
    many = compute_score(data_sources=["d"] * 2, solution_strs=["Hi!"] * 2, ground_truths=[GOOD, row],
                         extra_infos=[INFO] * 2, urw_calibration=calibration)
    assert many[0]["urw_failed"] == 0 and many[1] == dict(one, urw_error=f"ground_truths[1]: {problem}")


def test_an_empty_batch_scores_as_empty(calibration):
    reward = URWReward(calibration)
    assert reward(prompts=[], completions=[], criteria=[]) == []
    assert reward.scorer._engine is None  # nothing to verify, no verifier started
    assert compute_score(data_sources=[], solution_strs=[], ground_truths=[], extra_infos=[],
                         urw_calibration=calibration) == []


def test_columns_of_different_lengths_are_refused_on_both_paths(calibration):
    with pytest.raises(InputError, match=r"^rewards: 2 prompts, 2 completions, 1 criteria \(one of each per sample\)$"):
        URWReward(calibration)(["Say hi."] * 2, ["Hi!", "Yo"], criteria=[GOOD])
    with pytest.raises(InputError, match=r"^rewards: 2 solution_strs, 1 ground_truths, 2 extra_infos, 2 data_sources "
                                         r"\(one of each per sample\)$"):
        compute_score(data_sources=["d"] * 2, solution_strs=["Hi!", "Yo"], ground_truths=[GOOD],
                      extra_infos=[INFO] * 2, urw_calibration=calibration)


def _results_log(method):
    return {"log_version": 1, "method": method, "study": {}, "simulated_judge": None, "spec": {}, "stats": {},
            "results": {}}


@pytest.mark.parametrize("content, looks", [
    (_results_log("urw"), "a URW study's results log; give the calibration.json beside it"),
    (_results_log("prism"), "a prism study's results log; only a URW study writes a calibration.json"),
    ({}, "no engine, template_version, templates_active, urw"),
    ([1, 2], "a JSON list, not an object"),
], ids=["urw_results", "results", "empty", "list"])
def test_a_file_that_is_not_a_calibration_is_refused_by_name(tmp_path, monkeypatch, content, looks):
    monkeypatch.setattr(rw, "_SCORERS", {})
    path = tmp_path / "results.json"
    path.write_text(json.dumps(content))
    expected = f"{path}: not a URW calibration.json ({looks})"
    with pytest.raises(InputError) as e:
        URWReward(str(path))
    assert str(e.value) == expected
    with pytest.raises(InputError) as e:
        compute_score("d", "Hi!", GOOD, INFO, urw_calibration=str(path))
    assert str(e.value) == expected


def test_a_study_folder_holding_calibration_json_is_accepted(calibration, tmp_path):
    folder = str(tmp_path / "study")
    expected = URWReward(calibration)(["Say hi."], ["Hello there!"], criteria=[GOOD])
    for given in (folder, folder + "/"):
        assert URWReward(given)(["Say hi."], ["Hello there!"], criteria=[GOOD]) == expected
        assert compute_score("d", "Hello there!", GOOD, {"prompt": "Say hi."},
                             urw_calibration=given)["score"] == expected[0]
    (tmp_path / "other").mkdir()
    for missing in (tmp_path / "other", tmp_path / "other" / "calibration.json"):
        with pytest.raises(InputError, match=r"neither a file nor a folder holding calibration.json; give a URW "
                                             r"study's calibration.json or its output folder"):
            URWReward(str(missing))


@pytest.mark.parametrize("info", [None, {}, {"index": 3}, {"prompt": None}, {"prompt": ""}],
                         ids=["no extra_info", "empty", "other keys", "None", "empty string"])
def test_a_verl_sample_without_its_prompt_is_counted_as_failed(calibration, info):
    why = "missing; URW judges the response against its prompt"
    assert compute_score("d", "Hello there!", GOOD, info, urw_calibration=calibration) == {
        "score": FAILURE_SCORE, "urw_score": FAILURE_SCORE, "urw_failed": 1, "urw_error": f"extra_info.prompt: {why}"}
    many = compute_score(data_sources=["d"] * 2, solution_strs=["Hello there!"] * 2, ground_truths=[GOOD] * 2,
                         extra_infos=[INFO, info], urw_calibration=calibration)
    assert [m["urw_failed"] for m in many] == [0, 1] and many[1]["urw_error"] == f"extra_infos[1].prompt: {why}"
    with pytest.raises(InputError, match=r"1 of 1 samples could not be verified \(extra_info.prompt: missing"):
        compute_score("d", "Hello there!", GOOD, info, urw_calibration=calibration, raise_on_failure=True)


def test_a_conversation_read_back_as_an_array_is_its_text():
    """verl reads a parquet list column back as a numpy array: a chat prompt stored so was sent
    as the array's repr (a second reader's finding)."""
    import numpy as np

    from judgecal.rewards import _text

    chat = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Say hi."}]
    assert _text(np.array(chat, dtype=object)) == _text(chat) == "Be kind.\nSay hi."
    assert _text(()) == "" and _text(np.array([], dtype=object)) == ""


def test_verl_samples_that_all_fail_the_input_checks_stop_training(calibration):
    """Every sample lacking its prompt scored FAILURE_SCORE silently (a whole run trained on
    0.0): the first INPUT_FAIL_FAST samples all refused raise, one call or many."""
    assert rw.INPUT_FAIL_FAST == 8
    for _ in range(7):
        assert compute_score("d", "Hi!", GOOD, {}, urw_calibration=calibration)["urw_failed"] == 1
    with pytest.raises(InputError, match=r"^rewards: the first 8 samples all failed before verification "
                                         r"\(extra_info.prompt: missing; .*\): the data is set up wrongly"):
        compute_score("d", "Hi!", GOOD, {}, urw_calibration=calibration)
    rw._SCORERS.clear()
    with pytest.raises(InputError, match=r"^rewards: the first 8 samples .*\(extra_infos\[0\].prompt: missing"):
        compute_score(data_sources=["d"] * 8, solution_strs=["Hi!"] * 8, ground_truths=[GOOD] * 8,
                      extra_infos=[{}] * 8, urw_calibration=calibration)
    assert compute_score(data_sources=[], solution_strs=[], ground_truths=[], extra_infos=[],
                         urw_calibration=calibration) == []  # an empty batch after the refusal is still []


def test_a_stray_bad_sample_after_a_good_one_still_scores_failure(calibration):
    assert compute_score("d", "Hi!", GOOD, INFO, urw_calibration=calibration)["urw_failed"] == 0
    for _ in range(10):  # the watch ended with the first sample that passed
        assert compute_score("d", "Hi!", GOOD, {}, urw_calibration=calibration)["urw_failed"] == 1


def test_a_sample_whose_criterion_no_template_answered_with_a_verdict_gets_no_score(calibration, monkeypatch):
    """Answers off the yes/no scale on every template of a criterion left its vote NaN, and URW
    raised inside the reward call (ending the trainer's step; seen in CI, where the fake
    provider's answer depended on its port): the sample gets None, the others their score."""
    from judgecal.engines.base import JudgeOutput
    from judgecal.schemas import PARSE_OUT_OF_SCALE

    reward = URWReward(calibration)
    engine = reward.scorer.engine
    real = engine.score

    def off_scale_for_the_second(prompts, scale):  # every template's answer to the second sample: "7"
        outs = real(prompts, scale)
        return [JudgeOutput("7", None, PARSE_OUT_OF_SCALE) if "Yo there" in p.user else o for p, o in zip(prompts, outs)]

    monkeypatch.setattr(engine, "score", off_scale_for_the_second)
    got = reward(["Say hi."] * 2, ["Hello!", "Yo there"], criteria=[GOOD, GOOD])
    assert isinstance(got[0], float) and got[1] is None


@pytest.mark.parametrize("bad", [None, 42, 3.5, {"text": "Hi"}], ids=["None", "int", "float", "dict"])
def test_a_completion_or_prompt_that_is_no_text_is_refused_on_both_paths(calibration, bad):
    """A stranger's finding: a None completion was read as text and scored (the simulated
    verifier gave it 1.0, the top reward), 42 as "42"."""
    reward = URWReward(calibration)
    for prompts, completions, where in ((["Say hi."] * 2, ["Hi!", bad], "completions[1]"),
                                        (["Say hi.", bad], ["Hi!"] * 2, "prompts[1]")):
        with pytest.raises(InputError) as e:
            reward(prompts, completions, criteria=[GOOD, GOOD])
        assert str(e.value).startswith(f"{where}: must be text or a conversation, not ") and "\n" not in str(e.value)
    one = compute_score("d", bad, GOOD, INFO, urw_calibration=calibration)
    assert one["urw_failed"] == 1 and one["urw_error"].startswith("solution_str: must be text or a conversation")
    many = compute_score(data_sources=["d"] * 2, solution_strs=["Hi!", bad], ground_truths=[GOOD] * 2,
                         extra_infos=[INFO] * 2, urw_calibration=calibration)
    assert many[0]["urw_failed"] == 0 and many[1]["urw_error"].startswith("solution_strs[1]: must be text")


@pytest.mark.parametrize("empty", ["", "  \n", [{"role": "assistant", "content": ""}]], ids=["empty", "blank", "turn"])
def test_an_empty_completion_meets_no_criterion_without_asking_the_judge(calibration, empty, monkeypatch):
    """An empty completion scored 1.0 with the simulated verifier (a stranger's finding): a policy
    that stops at once would learn that. It now scores as meeting no criterion (every vote 0),
    the verifier not asked; an empty prompt is refused (URW judges against the prompt)."""
    reward = URWReward(calibration)
    asked = []
    verify = rw.answer
    monkeypatch.setattr(rw, "answer", lambda engine, rendered: asked.append(rendered.num_rows) or verify(engine,
                                                                                                       rendered))
    got = reward(["Say hi.", "Say hi."], ["Hello there!", empty], criteria=[GOOD, GOOD])
    assert got[1] == rw.EMPTY_RESPONSE_SCORE == 0.0 and got[0] is not None
    assert asked and all(n == len(GOOD) * len(reward.scorer.templates.active) for n in asked)  # the first only
    assert reward(["Say hi."], [empty], criteria=[GOOD]) == [0.0] and len(asked) == 1  # nothing asked at all
    assert compute_score("d", empty, GOOD, INFO, urw_calibration=calibration)["score"] == 0.0
    with pytest.raises(InputError) as e:
        reward(["  "], ["Hi!"], criteria=[GOOD])
    assert str(e.value) == "prompts[0]: is empty; URW judges a response against its prompt"


def test_a_samples_reward_does_not_depend_on_its_place_in_the_batch(calibration, monkeypatch):
    """Ids by place gave the SIMULATED verifier other draws for the same sample in another
    batch: TRL's batch call and verl's one call at a time disagreed (a user's finding). A
    sample repeated in a batch is verified once and scores the same."""
    prompts = [f"Write a line about topic {k}." for k in range(6)]
    responses = [f"A line about topic {k}, " + "with more words " * k for k in range(6)]
    crits = [[f"Does it name topic {k}?", "Is it one line?", "Is it polite?"] for k in range(6)]
    reward = URWReward(calibration)
    batch = reward(prompts, responses, criteria=crits)
    assert len(set(batch)) > 1  # the draws differ between samples: a test that could fail
    assert reward(prompts[::-1], responses[::-1], criteria=crits[::-1]) == batch[::-1]
    assert [reward([p], [r], criteria=[c])[0] for p, r, c in zip(prompts, responses, crits)] == batch
    assert [compute_score("d", r, c, {"prompt": p}, urw_calibration=calibration)["score"]
            for p, r, c in zip(prompts, responses, crits)] == batch
    asked = []
    answer = rw.answer
    monkeypatch.setattr(rw, "answer", lambda engine, rendered: asked.append(rendered.num_rows) or answer(engine,
                                                                                                       rendered))
    twice = reward(prompts[:2] + prompts[:1], responses[:2] + responses[:1], criteria=crits[:2] + crits[:1])
    assert twice == batch[:2] + batch[:1]
    assert asked == [2 * 3 * len(reward.scorer.templates.active)]  # the repeated sample verified once


def test_a_samples_reward_does_not_depend_on_the_order_of_its_criteria(calibration):
    """The same criteria listed in another order made another sample, which the SIMULATED
    verifier scored otherwise: 0.37, 0.79, 0.41, 0.0 over the orders of three (a user's finding)."""
    from itertools import permutations

    crits = ["Does it name topic 3?", "Is it one line?", "Is it polite?"]
    reward = URWReward(calibration)
    orders = [list(p) for p in permutations(crits)]
    scores = reward(["Write a line about topic 3."] * len(orders), ["A line about topic 3, kindly."] * len(orders),
                    criteria=orders)
    assert len(set(scores)) == 1, scores
    others = reward(["Write a line about topic 3."], ["A line about topic 3, kindly."],
                    criteria=[["Does it name topic 4?", "Is it one line?", "Is it polite?"]])
    one_at_a_time = [reward(["Write a line about topic 3."], ["A line about topic 3, kindly."], criteria=[o])[0]
                     for o in orders[:2]]
    # other criteria: another draw (a test that could fail)
    assert one_at_a_time == scores[:2] and others[0] != scores[0]


def test_a_reward_keeps_the_calibration_it_loaded_and_a_new_one_reads_a_refit(calibration, tmp_path):
    """The README: a reward (and its pickled copy) keeps the calibration it was made with for
    its whole life; a fit written after it is read by a new URWReward (a stranger's question)."""
    import pickle

    from judgecal.calibrate.urw import URW

    args = (["Say hi to the user."] * 3, ["Hello there!", "Go away.", "Hi, nice to meet you."])
    crits = {"criteria": [GOOD] * 3}
    reward = URWReward(calibration)
    before = reward(*args, **crits)
    copy = pickle.loads(pickle.dumps(reward))
    cal = json.loads(open(calibration, encoding="utf-8").read())  # refit on other labels: other weights
    cal["urw"] = URW().fit([1, 5 / 6, 4 / 6, 0, 1 / 6, 0.5, 1, 2 / 6], [0, 0, 1, 1, 1, 0, 0, 1]).to_dict()
    open(calibration, "w", encoding="utf-8").write(json.dumps(cal))
    assert reward(*args, **crits) == before and copy(*args, **crits) == before
    assert URWReward(calibration)(*args, **crits) != before
