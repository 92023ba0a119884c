"""A user's own URW files (generic calibration criteria and generic pairs): each problem is one
line naming the file, row and column; a surprise that is not an error is one warning line."""

import json

import pyarrow as pa
import pytest

from judgecal.errors import InputError

QUESTION = "What is the largest ocean?"


def _cal_csv(path, labels, label_column="ok"):
    """A calibration CSV: one response to one prompt, one criterion per label (as written)."""
    lines = [f"q,answer,check,{label_column}"] + [f"{QUESTION},The Pacific.,Check {k}?,{lab}"
                                                  for k, lab in enumerate(labels)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


CAL_COLUMNS = {"prompt": "q", "response": "answer", "criterion": "check", "label": "ok"}


def _urw_config(tmp_path, cal=None, columns=CAL_COLUMNS, **urw):
    from judgecal.config import parse_config

    section = {"calibration": "generic", "calibration_path": str(cal), "calibration_columns": columns} if cal else {}
    return parse_config({"study": {"method": "urw"}, "engine": {"kind": "simulated"}, "urw": section | urw})


def test_calibration_label_in_a_text_column_names_its_own_row_and_value(tmp_path):
    """One text cell makes pyarrow read the whole column as text: the 1s before it are still
    labels, and the error names the text cell's row, not row 1."""
    from judgecal.rubrics.data import load_generic_rubric

    p = _cal_csv(tmp_path / "cal.csv", [1, 0, 1, 1, "yes", 0])
    with pytest.raises(InputError, match=r"cal\.csv row 5: label 'yes' is not 0 or 1 \(column 'ok'; also read: true, "
                                         r"false\); write 1 where the criterion is met and 0 where not$"):
        load_generic_rubric(str(p), CAL_COLUMNS)
    _cal_csv(p, [1, 0, " 1", "true", 0])  # a text column of labels is read as labels
    assert load_generic_rubric(str(p), CAL_COLUMNS)["label"].to_pylist() == [1, 0, 1, 1, 0]


def test_calibration_labels_of_every_type_a_file_gives(tmp_path):
    from judgecal.rubrics.data import load_generic_rubric

    labels = [1, 0, "1", "0", 1.0, 0.0, True, False]
    p = tmp_path / "cal.jsonl"
    p.write_text("\n".join(json.dumps({"prompt": "p", "response": "r", "criterion": f"c{k}?", "label": lab})
                           for k, lab in enumerate(labels)), encoding="utf-8")
    assert load_generic_rubric(str(p), {})["label"].to_pylist() == [1, 0, 1, 0, 1, 0, 1, 0]
    for bad, shown in ((2, "2"), (0.5, "0.5"), ("no", "'no'"), ([1], r"\[1\]")):
        p.write_text(json.dumps({"prompt": "p", "response": "r", "criterion": "c?", "label": bad}), encoding="utf-8")
        with pytest.raises(InputError, match=rf"cal\.jsonl row 1: label {shown} is not 0 or 1 \(column 'label'; "
                                            r"also read: true, false\); write 1 where the criterion is met and 0 "
                                            r"where not$"):
            load_generic_rubric(str(p), {})


def test_misspelt_calibration_label_column_is_named(tmp_path):
    from judgecal.methods.urw import load_calibration

    cfg = _urw_config(tmp_path, _cal_csv(tmp_path / "cal.csv", [1, 0]), CAL_COLUMNS | {"label": "okay"})
    with pytest.raises(InputError, match=r"cal\.csv: missing column\(s\) okay \(it has: q, answer, check, ok\)$"):
        load_calibration(cfg)


def test_empty_calibration_label_names_the_first_row_and_how_many(tmp_path):
    from judgecal.methods.urw import load_calibration

    cfg = _urw_config(tmp_path, _cal_csv(tmp_path / "cal.csv", [1, "", 0, ""]))
    with pytest.raises(InputError) as e:
        load_calibration(cfg)
    assert str(e.value).endswith("cal.csv row 2: column 'ok' (label) is empty (2 of 4 rows have no label); every "
                                 "calibration criterion needs a label, 0 or 1")
    p = tmp_path / "cal.jsonl"
    p.write_text(json.dumps({"prompt": "p", "response": "r", "criterion": "c?", "ok": None}), encoding="utf-8")
    with pytest.raises(InputError, match=r"cal\.jsonl row 1: column 'ok' \(label\) is empty \(1 of 1 rows"):
        load_calibration(_urw_config(tmp_path, p, {"label": "ok"}))


def test_overlap_counts_each_shared_prompt_and_response_once():
    from judgecal.rubrics.data import check_disjoint

    cal = pa.table({"prompt": ["Say hi.", "Say hi."], "response": ["hi", "hello"]})
    # "Say hi." comes once per evaluation response (four), "hi" once
    with pytest.raises(InputError, match=r"overlapping sets: 1 shared prompt and 1 shared response \(first: "
                                         r"\"Say hi.\"\)"):
        check_disjoint(cal, ["Say hi."] * 4, ["hi", "yo", "hey", "sup"])
    with pytest.raises(InputError, match=r"overlapping sets: 2 shared responses \(first: \"hi\"\)"):
        check_disjoint(cal, ["Other."] * 3, ["hi", "hello", "hi"])
    check_disjoint(cal, ["Other."], ["fine"])
    with pytest.raises(InputError, match=r"\(first: \"hi\", at p.csv row 3 and in the calibration set c.csv\)"):
        check_disjoint(cal, ["Other."] * 3, ["yo", "hi", "hi"], ["p.csv row 2", "p.csv row 3", "p.csv row 3"], "c.csv")


def test_unknown_evaluation_set_is_named_before_evaluation_columns(tmp_path):
    from judgecal.methods.urw import load_pairs

    cfg = _urw_config(tmp_path, evaluation=["mydata"], evaluation_paths={"generic": str(tmp_path / "p.csv")},
                      evaluation_columns={"prompt": "question"})
    with pytest.raises(InputError, match=r"^\[urw\]\.evaluation: unknown pairwise set 'mydata' \(known: "):
        load_pairs(cfg)
    cfg = _urw_config(tmp_path, evaluation=["llmbar"], evaluation_columns={"prompt": "question"})
    with pytest.raises(InputError, match=r"^\[urw\]\.evaluation_columns: only for generic pairs"):
        load_pairs(cfg)


PAIR = {"prompt": "Say hi.", "response_a": "hi", "response_b": "go away"}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_empty_preference_cell_is_said_to_be_empty(tmp_path, fmt):
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / f"pairs.{fmt}"
    if fmt == "jsonl":
        rows = ({**PAIR, "human_pick": "a"}, {**PAIR, "human_pick": None})
        p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    else:
        p.write_text("prompt,response_a,response_b,human_pick\nSay hi.,hi,go away,a\nSay hi.,hi,go away,\n",
                     encoding="utf-8")
    with pytest.raises(InputError, match=r"pairs\.\w+ row 2: column 'human_pick' \(preferred\) is empty; accepted "
                                         r"values: a, b, tie"):
        load_generic_pairs(str(p), {"preferred": "human_pick"})


def _pairs_with_criteria(path, criteria):
    """One pair per prompt, the k-th prompt's criteria cell ``criteria[k]`` (None: null)."""
    path.write_text("\n".join(json.dumps({"prompt": f"Say {k}.", "response_a": f"{k}", "response_b": f"not {k}",
                                          "preferred": "a", "criteria": c}) for k, c in enumerate(criteria)),
                    encoding="utf-8")
    return path


def test_prompts_with_an_empty_criteria_cell_beside_ones_with_criteria_get_one_warning(tmp_path, capsys):
    from judgecal.methods.urw import load_pairs
    from judgecal.rubrics.data import load_generic_pairs

    p = _pairs_with_criteria(tmp_path / "pairs.jsonl", [["Is it a number?"], ["Is it short?"], [], None, ["\n", ""]])
    ps = load_generic_pairs(str(p))
    assert len(ps.criteria) == 2
    assert ps.warnings == [f"{p}: 3 of 5 prompts have an empty criteria cell (first: row 3); they get generated "
                           "criteria"]
    load_pairs(_urw_config(tmp_path, evaluation=["generic"], evaluation_paths={"generic": str(p)}))
    assert f"judgecal: warning: {ps.warnings[0]}\n" in capsys.readouterr().err
    for every_or_none in ([["Is it?"]] * 3, [None, [], ""]):  # all given, or none: as documented, no warning
        assert load_generic_pairs(str(_pairs_with_criteria(tmp_path / "pairs.jsonl", every_or_none))).warnings == []


@pytest.mark.parametrize("name", ["critera", "Criteria", "rubric", "criterion"])
def test_a_criteria_column_under_another_name_is_refused_not_replaced_by_generated_criteria(tmp_path, name):
    """A column headed `critera` was left unread: `show` and `collect` generated criteria for
    every prompt instead, saying only that they did (a user's finding)."""
    from judgecal.errors import InputError
    from judgecal.rubrics.data import load_generic_pairs

    p = _pairs_with_criteria(tmp_path / "pairs.jsonl", [["Is it a number?"], ["Is it short?"]])
    p.write_text(p.read_text(encoding="utf-8").replace('"criteria"', f'"{name}"'), encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{p}: has no column 'criteria' but has '{name}': name it criteria or map "
                                         rf"it \(\[urw\].evaluation_columns = {{criteria = '{name}'}}\); without"):
        load_generic_pairs(str(p))
    mapped = load_generic_pairs(str(p), {"criteria": name}).criteria  # mapped: read
    assert sorted(mapped.values()) == [["Is it a number?"], ["Is it short?"]]


def test_one_dataset_is_one_set_of_rows_not_two():
    """With one dataset family the table printed every row twice (``all`` and ``generic``,
    identical: a user's finding); the families get rows of their own where there are several."""
    import pandas as pd

    from judgecal.methods.urw import dataset_families

    one = dataset_families(pd.Series(["llmbar/Natural", "llmbar/Adversarial", "llmbar/Natural"]))
    assert list(one) == ["all"] and one["all"].tolist() == [True, True, True]
    two = dataset_families(pd.Series(["generic", "llmbar/Natural", "generic"]))
    assert list(two) == ["all", "generic", "llmbar"]
    assert two["generic"].tolist() == [True, False, True] and two["llmbar"].tolist() == [False, True, False]


def test_a_criteria_cell_holding_a_json_list_is_that_list(tmp_path):
    """A CSV writes a list as text: '["Is it a number?", "Is it short?"]' was judged as one
    criterion, brackets and all (a user's finding). Text that looks like a JSON list but is not
    one is refused naming the row."""
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / "pairs.csv"
    p.write_text('prompt,response_a,response_b,preferred,criteria\n'
                 'Say 1.,one,not one,a,"[""Is it a number?"", ""Is it short?""]"\n'
                 'Say 2.,two,not two,a,"Is it a number?\nIs it short?"\n', encoding="utf-8")
    ps = load_generic_pairs(str(p))
    assert sorted(map(sorted, ps.criteria.values())) == [["Is it a number?", "Is it short?"]] * 2
    p.write_text('prompt,response_a,response_b,preferred,criteria\nSay 1.,one,not one,a,"[""Is it a number?"" ]]"\n',
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"pairs\.csv row 1: column 'criteria' \(criteria\) looks like a JSON list "
                                         r"but is not one \(Extra data\)"):
        load_generic_pairs(str(p))
    # no closing bracket: still meant as a list (it was one criterion, brackets and all: a user's finding)
    p.write_text('prompt,response_a,response_b,preferred,criteria\nSay 1.,one,not one,a,"[""Is it short?"", '
                 '""Is it polite?"""\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"pairs\.csv row 1: column 'criteria' \(criteria\) looks like a JSON list "):
        load_generic_pairs(str(p))
    p.write_text('prompt,response_a,response_b,preferred,criteria\nSay 1.,one,not one,a,"[""Is it short?"", """"]"\n',
                 encoding="utf-8")  # an empty item beside a criterion: refused, not dropped
    with pytest.raises(InputError, match=r"pairs\.csv row 1: column 'criteria' \(criteria\) item 2 of 2 is empty$"):
        load_generic_pairs(str(p))
    # several lines, the first merely starting '["': criteria by line (a second reader's case)
    p.write_text('prompt,response_a,response_b,preferred,criteria\n'
                 'Say 1.,one,not one,a,"[""Hello""] is the first word?\nIs it short?"\n', encoding="utf-8")
    assert list(load_generic_pairs(str(p)).criteria.values()) == [['["Hello"] is the first word?', "Is it short?"]]
    # bracketed text that is no JSON list is criteria by line, as before (a second reader's case)
    p.write_text('prompt,response_a,response_b,preferred,criteria\n'
                 'Say 1.,one,not one,a,"[Format] Is it a table? [Y/N]\n[2] Is it short?"\n', encoding="utf-8")
    assert list(load_generic_pairs(str(p)).criteria.values()) == [["[Format] Is it a table? [Y/N]",
                                                                    "[2] Is it short?"]]
    # a line's number or bullet is not the criterion: the same criteria as the JSON list (they
    # were other criteria, prompts and request ids: a user's finding); "2+2" and "3.5" stay
    p.write_text('prompt,response_a,response_b,preferred,criteria\n'
                 'Say 1.,one,not one,a,"1. Is it a number?\n2) Is it short?\n- Is 2+2 in it?\n* Is 3.5 in it?\n'
                 '• Is it polite?\n6."\n', encoding="utf-8")  # "6." alone was a criterion (a user's finding)
    assert list(load_generic_pairs(str(p)).criteria.values()) == [["Is it a number?", "Is it short?",
                                                                    "Is 2+2 in it?", "Is 3.5 in it?",
                                                                    "Is it polite?"]]


def test_a_criteria_cell_of_list_markers_only_is_refused_naming_its_row(tmp_path):
    """"1.\n2." held no criterion and the prompt got generated criteria without a word (a
    second reader's finding)."""
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / "pairs.csv"
    p.write_text('prompt,response_a,response_b,preferred,criteria\nSay 1.,one,not one,a,Is it short?\n'
                 'Say 2.,two,not two,a,"1.\n2."\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"pairs\.csv row 2: column 'criteria' \(criteria\) holds list markers but "
                                         r"no criterion \('1\.\\n2\.'\); give one criterion per line, or leave the cell "
                                         r"empty for generated criteria$"):
        load_generic_pairs(str(p))


def test_pairs_with_an_empty_response_are_excluded_counted_and_their_first_row_named(tmp_path):
    """Public preference sets hold blank responses; one refused the whole file, one row at a
    time (a second reader's finding). Such a pair is excluded like a tie, its count naming the
    first row; the other pairs are kept."""
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / "pairs.csv"
    p.write_text('prompt,response_a,response_b,preferred\nSay 1.,one,not one,a\nSay 2.,"  ",two,b\n'
                 'Say 3.,three,,a\nSay 4.,four,not four,tie\nSay 5.,five,not five,b\n'
                 'Say 6.,six,\u200b\ufeff,a\n', encoding="utf-8")  # invisible marks alone: empty too
    ps = load_generic_pairs(str(p))
    pairs, _ = ps.tables()
    assert pairs["pair_id"].to_pylist() == ["generic/1", "generic/5"]
    assert ps.exclusions() == [f"generic: 3 pairs with an empty response excluded: an empty response has nothing "
                               f"to judge (first: {p} row 2)",
                               f"generic: 1 pair labelled as ties excluded: ties are not supported in preference "
                               f"labels (first: {p} row 4)"]
    p.write_text('prompt,response_a,response_b,preferred\n"  ",one,two,a\n', encoding="utf-8")  # a prompt still is
    with pytest.raises(InputError, match=r"pairs\.csv row 1: column 'prompt' is empty \(whitespace only\)$"):
        load_generic_pairs(str(p))


def test_a_calibration_criterion_of_spaces_only_is_refused_naming_its_row(tmp_path):
    """A criterion "   " was verified and calibrated with its label (a user's finding at row 2000)."""
    from judgecal.rubrics.data import load_generic_rubric

    p = tmp_path / "cal.csv"
    p.write_text('prompt,response,criterion,label\nSay 1.,one,Is it a number?,1\nSay 1.,one,"   ",0\n',
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"cal\.csv row 2: column 'criterion' is empty \(whitespace only\)$"):
        load_generic_rubric(str(p), {})


def test_criteria_joined_on_one_line_get_a_warning(tmp_path):
    """'A?; B?; C?' in one cell is one criterion (a CSV cell takes one per line): a user joined
    them with '; ' and got one long criterion without a word."""
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / "pairs.csv"
    p.write_text('prompt,response_a,response_b,preferred,criteria\n'
                 'Say 1.,one,not one,a,"Is it a number?; Is it short?"\n'
                 'Say 2.,two,not two,a,"Is it a number?\nIs it short?"\n', encoding="utf-8")
    ps = load_generic_pairs(str(p))
    assert ps.warnings == [f"{p}: 1 criterion holds several question marks (first: row 1, 'Is it a number?; Is it "
                           "short?'); each is judged as one criterion: a cell takes one criterion per line or a "
                           "JSON list"]


REPEATS = {  # a row appended to three labelled criteria (Check 0?, Check 1?, Check 2?): what it repeats
    "the other label": (f"{QUESTION},The Pacific.,Check 1?,1", r"repeats row 2 \(the same prompt, response and "
                        r"criterion\) with the other label \(0 there, 1 here\); keep one$"),
    "spaces around": (f" {QUESTION},The Pacific. ,Check 0?,1", r"repeats row 1 \(the same prompt, response and "
                      r"criterion\); keep one$"),
    # in decomposed Unicode (NFD): the same question (a second reader's finding)
    "decomposed Unicode": (f"{QUESTION},The Pacific.,Cafe\u0301 0?,1", r"repeats row 1 \(the same prompt, response "
                           r"and criterion\); keep one$"),
    # in other case: the same question, accepted twice with both labels (a user's finding)
    "other case": (f"{QUESTION},The Pacific.,CHECK 0?,0", r"repeats row 1 \(the same prompt, response and criterion, "
                   r"but for its case\) with the other label \(1 there, 0 here\); keep one$"),
}


@pytest.mark.parametrize("case", list(REPEATS))
def test_a_calibration_row_repeated_is_refused_naming_both_rows(tmp_path, case):
    """The same criterion of the same response twice was two calibration points (with the other
    label, both labels at once: a user's finding)."""
    from judgecal.rubrics.data import load_generic_rubric

    row, message = REPEATS[case]
    p = _cal_csv(tmp_path / "cal.csv", [1, 0, 1])
    text = p.read_text(encoding="utf-8")
    if case == "decomposed Unicode":  # the first criterion composed (NFC), the repeat decomposed
        text = text.replace("Check 0?", "Caf\u00e9 0?")
    p.write_text(text + row + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"cal\.csv row 4: " + message):
        load_generic_rubric(str(p), CAL_COLUMNS)


def test_a_shared_prompt_is_found_whatever_the_spaces_case_and_punctuation():
    from judgecal.rubrics.data import check_disjoint

    cal = pa.table({"prompt": ["Say hi to the user."], "response": ["hi"]})
    with pytest.raises(InputError, match=r"overlapping sets: 1 shared prompt \(first: \" Say hi to  the user. \"\)"):
        check_disjoint(cal, [" Say hi to  the user. "], ["hello"])
    for copy in ("say hi to the user.", "Say hi to the user", "SAY HI, TO THE USER!"):  # case, punctuation
        with pytest.raises(InputError, match=r"overlapping sets: 1 shared prompt "):
            check_disjoint(cal, [copy], ["hello"])
    check_disjoint(cal, ["Say hi to the other user."], ["hello"])
    # one text in composed and decomposed Unicode (a user's finding)
    cafe = pa.table({"prompt": ["Describe the caf\u00e9."], "response": ["A caf\u00e9."]})
    with pytest.raises(InputError, match=r"overlapping sets: 1 shared prompt and 1 shared response "):
        check_disjoint(cafe, ["Describe the cafe\u0301."], ["A cafe\u0301."])
    # texts that differ in symbols, signs, inner punctuation or marks stay apart (a second reader's cases)
    for a, b in (("What is 2+3?", "What is 2*3?"), ("x = -1", "x = 1"), ("3.5", "3,5"), ("C++", "C#"),
                 ("Is it > 5?", "Is it < 5?"), ("कि", "का"), ("...", "?")):
        check_disjoint(pa.table({"prompt": [a], "response": [a]}), [b], [b])


def test_show_refuses_overlapping_sets_as_collect_does(tmp_path, capsys):
    """``show`` sized a study whose calibration shares a prompt with its evaluation pairs, and
    the collect after it refused (a user's finding): show refuses the same, in one line, and
    before the note on excluded ties (which came first and read as the study going on)."""
    from judgecal.cli import main

    cal = _cal_csv(tmp_path / "cal.csv", [1, 0, 1])
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": QUESTION, "response_a": "The Atlantic.", "response_b": "The Pacific.",
                                 "preferred": "b"}) + "\n"
                     + json.dumps({"prompt": "Name a sea.", "response_a": "The Baltic.", "response_b": "The Red Sea.",
                                   "preferred": "tie"}) + "\n", encoding="utf-8")
    toml = tmp_path / "study.toml"
    toml.write_text(f'[study]\nmethod = "urw"\noutput = "{tmp_path / "out"}"\n[engine]\nkind = "simulated"\n'
                    f'[urw]\ncalibration = "generic"\ncalibration_path = "{cal}"\n'
                    'calibration_columns = { prompt = "q", response = "answer", criterion = "check", label = "ok" }\n'
                    f'evaluation = ["generic"]\nevaluation_paths = {{ generic = "{pairs}" }}\n', encoding="utf-8")
    assert main(["show", str(toml)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the pair's file and row and the calibration file are named (the text alone sent a user searching both)
    assert err == [f'judgecal: error: calibration/evaluation: overlapping sets: 1 shared prompt and 1 shared '
                   f'response (first: "{QUESTION}", at {pairs} row 1 and in the calibration set {cal}); calibration '
                   'must be disjoint from evaluation']
    assert not (tmp_path / "out").exists()


def test_the_verify_plans_request_ids_are_request_id_s_row_by_row():
    """The plan combines its ids for all rows at once (one by one, 451,584 requests took 36 s
    with no line: a user's finding); each is still the id request_id gives, so answers
    collected before are found again. Greedy templates and sampled draws alike."""
    import pyarrow as pa

    from judgecal.ids import stable_hash
    from judgecal.probes.plan import request_id
    from judgecal.rubrics import TemplateSet
    from judgecal.rubrics.plan import build_verify_plan
    from judgecal.schemas import RUBRIC

    rows = [{"item_id": f"r{i}", "group_id": f"g{i // 2}", "prompt": f"Say {i // 2}.", "response": f"answer {i}",
             "criterion_id": f"c{j}", "criterion": f"Is it {j}?", "criterion_source": "human", "label": None}
            for i in range(4) for j in range(3)]
    rubric = pa.Table.from_pylist(rows, schema=RUBRIC)
    t = TemplateSet()
    plan = build_verify_plan(rubric, t, "sim:judge", samples=2, sample_temperature=0.7)
    by_row = {(r["item_id"], r["criterion_id"]): r for r in rows}
    expected = []
    for p in plan.select(["item_id", "criterion_id", "probe_id", "run", "temperature"]).to_pylist():
        r = by_row[(p["item_id"], p["criterion_id"])]
        expected.append(request_id("sim:judge", f"{t.version}:{p['temperature']:g}", r["item_id"],
                                   stable_hash(r["prompt"], r["response"], r["criterion"]), p["probe_id"], p["run"], 0))
    assert plan.num_rows == 4 * 3 * (len(t.active) + 2) and plan["request_id"].to_pylist() == expected
    assert len(set(expected)) == plan.num_rows


def test_a_criteria_cell_of_invisible_marks_alone_is_an_empty_cell():
    """Refused as "list markers but no criterion" though it held none; in a JSON list such an
    item was dropped where an empty one is refused (a second reader's findings)."""
    from judgecal.rubrics.data import _criteria_cell

    assert _criteria_cell("\u200b\ufeff", "w", "criteria") == []
    with pytest.raises(InputError, match=r"^w: column 'criteria' \(criteria\) item 1 of 2 is empty$"):
        _criteria_cell(["\u200b", "Is it short?"], "w", "criteria")


def test_a_calibration_file_in_another_row_order_names_its_criteria_alike(tmp_path):
    """A criterion's id was its place among its response's rows (q0, q1, ...), and the id is in
    its request's: a re-export in another row order asked every criterion anew, and the
    SIMULATED verifier then moved every number (a user's finding). It is named by its words."""
    from judgecal.rubrics.data import load_generic_rubric

    rows = [f"{QUESTION},The Pacific.,Check {k}?,{k % 2}" for k in range(6)]
    rows += [f"{QUESTION},The Atlantic.,Check {k}?,{(k + 1) % 2}" for k in range(3)]
    ids = []
    for name, order in (("a.csv", rows), ("b.csv", rows[::-1])):
        (tmp_path / name).write_text("\n".join(["q,answer,check,ok", *order]) + "\n", encoding="utf-8")
        t = load_generic_rubric(str(tmp_path / name), CAL_COLUMNS)
        ids.append(sorted(zip(t["item_id"].to_pylist(), t["criterion_id"].to_pylist(), t["label"].to_pylist())))
    assert ids[0] == ids[1] and len({c for _, c, _ in ids[0]}) == 6  # "Check 0?" is one id in both responses


def test_a_prompts_criteria_in_another_order_are_the_same_criteria(tmp_path):
    """Evaluation criteria were named by their place in the cell (g0, g1, ...): the same pairs
    file with each prompt's criteria reversed re-asked half its requests and moved URW against
    Uniform from -0.125 to +0.094 under the SIMULATED verifier; two rows of one prompt listing
    the same criteria in two orders were refused as "criteria differ" (a user's findings)."""
    from judgecal.rubrics import rubric_for_pairs
    from judgecal.rubrics.data import load_generic_pairs

    crits = ["Is it a number?", "Is it short?", "Is it polite?"]
    p = tmp_path / "pairs.csv"
    head = "prompt,response_a,response_b,preferred,criteria\n"
    ids = []
    for order in (crits, crits[::-1]):
        cell = "\n".join(order)
        p.write_text(head + f'Say 1.,one,not one,a,"{cell}"\nSay 1.,uno,not uno,a,"{chr(10).join(crits)}"\n',
                     encoding="utf-8")
        ps = load_generic_pairs(str(p))  # row 2 lists the first order: the same criteria, accepted
        (group, listed), = ps.criteria.items()
        t = rubric_for_pairs({"i": (group, "Say 1.", "one")}, {group: (listed, "human")})
        ids.append(sorted(zip(t["criterion_id"].to_pylist(), t["criterion"].to_pylist())))
    assert ids[0] == ids[1] and len({c for c, _ in ids[0]}) == 3
    p.write_text(head + f'Say 1.,one,not one,a,"{chr(10).join(crits)}"\n'
                 f'Say 1.,uno,not uno,a,"{chr(10).join(crits[:2] + ["Is it kind?"])}"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"pairs\.csv row 2: criteria differ from those given for the same prompt at "
                                         r"row 1: 'Is it kind\?' is in one list only"):
        load_generic_pairs(str(p))
