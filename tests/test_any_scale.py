"""Any integer scale (issue 17.1): judges and targets on 1-4, 1-7, 0-10 ..., declared apart; a
judge scale that differs from the target's is mapped, and the map stated in the results log
and both reports. (The CPU judge's expected score over values of several tokens, 1-10 and
0-100: tests/test_llamacpp_scales.py.)"""

import html
import json

import pytest

from judgecal.errors import InputError
from judgecal.scale import ScoreScale

from conftest import write_config


@pytest.mark.parametrize("text,values", [("1-4", [1, 2, 3, 4]), ("1-7", list(range(1, 8))), ("0-10", list(range(11)))])
def test_any_integer_scale_is_a_scale(text, values):
    s = ScoreScale.parse(text)
    assert s.values == values and str(s) == text
    assert s.read(f"{values[-1] - 1}/{values[-1]}") == (values[-1] - 1, "ok")
    assert s.read(str(values[-1] + 1)) == (None, "out_of_scale")


@pytest.mark.parametrize("text", ["5-1", "3-3", "0-1000"])
def test_a_scale_that_is_no_scale_is_one_line(text):
    with pytest.raises(InputError, match="is not a score scale judgecal reads"):
        ScoreScale.parse(text)


def test_a_1_to_4_target_judged_on_1_to_5_states_its_map(ray_local, tmp_path):
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner
    from judgecal.report.html import render_html
    from judgecal.report.table import format_table

    p = tmp_path / "items.tsv"
    p.write_text("id\tdoc\tsource\ttext\tquality\n" + "\n".join(f"i{k}\td{k // 4}\tarticle {k // 4}\t{'word ' * (3 + k)}\t{1 + k % 4}"
                                                          for k in range(24)), encoding="utf-8")
    out = tmp_path / "out"
    cfg = load_config(str(write_config(tmp_path / "c.toml", f"""[study]
output = "{out}"
[dataset]
name = "generic"
path = "{p}"
target = ["quality"]
target_scale = "1-4"
task = "summary"
columns = {{item_id = "id", group_id = "doc", content = "text"}}
[pool]
attributes = ["length"]
scale = "1-5"
[engine]
kind = "simulated"
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
fold_seeds = 1
""")))
    log = StudyRunner(cfg).run_all()
    m = log["results"]["scale_mapping"]
    assert (m["judge"], m["target"]) == ("1-5", "1-4")
    assert "t = 1 + 0.75 x (s - 1)" in m["vanilla"] and "fitted on that reading" in m["prism"]
    line = "scales: judge 1-5, target 1-4: Vanilla read linearly onto the target's range"
    assert line in format_table(log) and html.escape(line) in render_html(log)
    assert json.loads((out / "results.json").read_text())["results"]["scale_mapping"] == m


def _relabelled_study(tmp_path, name: str, target_scale: str, label, per_group: int = 6):
    """The same 36 items and simulated judge (1-5), the labels written by ``label(k)`` on
    ``target_scale``, ``per_group`` items to a group."""
    from judgecal.config import load_config

    p = tmp_path / f"{name}.tsv"
    p.write_text("id\tdoc\tsource\ttext\tquality\n" + "\n".join(
        f"i{k}\td{k // per_group}\tarticle {k // per_group}\t{'word ' * (3 + (7 * k) % 11)}\t{label(k)}"
        for k in range(36)),
        encoding="utf-8")
    return load_config(str(write_config(tmp_path / f"{name}.toml", f"""[study]
output = "{tmp_path / name}"
[dataset]
name = "generic"
path = "{p}"
target = ["quality"]
target_scale = "{target_scale}"
task = "summary"
columns = {{item_id = "id", group_id = "doc", content = "text"}}
[pool]
attributes = ["length", "hedging"]
scale = "1-5"
[engine]
kind = "simulated"
[fit]
folds = 3
inner_folds = 2
bootstrap = 100
fold_seeds = 2
[design]
subsets = false
""")))


def test_labels_rewritten_on_another_declared_scale_give_the_same_results(ray_local, tmp_path):
    """Labels 1-5 against the same labels as 2y - 1 on a declared 1-9 scale, judged on 1-5: the
    same study. PRISM's diff moved (+0.048 to -0.031 in a user's run: its baseline, slope 1, was
    read on the judge's scale, not the target's) and the simulated judge read a 9 as a score on
    its own 1-5 scale (half its baselines at the ceiling)."""
    from judgecal.methods.runner import StudyRunner

    def label(k):
        return 1 + (k * 7 + k // 6) % 5

    five = StudyRunner(_relabelled_study(tmp_path, "five", "1-5", label)).run_all()
    nine = StudyRunner(_relabelled_study(tmp_path, "nine", "1-9", lambda k: 2 * label(k) - 1)).run_all()
    rows = {name: {m["method"]: m for m in log["results"]["methods"]} for name, log in (("five", five),
                                                                                          ("nine", nine))}
    assert set(rows["five"]) == set(rows["nine"]) >= {"Vanilla", "PRISM", "alpha-PRISM"}
    for method, r in rows["five"].items():
        for key in ("spearman", "diff"):
            if key in r:
                assert rows["nine"][method][key] == pytest.approx(r[key], abs=1e-9), (method, key)
    # the fitted models are one model on the two scales, predicting 2y - 1 where the other predicts
    # y: each probe weight and alpha equal, the intercept c' = 2c + 1 - alpha
    m5, m9 = (json.loads((tmp_path / n / "models.json").read_text()) for n in ("five", "nine"))
    for name in ("PRISM", "alpha-PRISM"):
        a, b = m5[name], m9[name]
        assert b["gamma"] == a["gamma"] and b["alpha"] == pytest.approx(a["alpha"], rel=1e-9)
        assert b["coef"] == pytest.approx(a["coef"], rel=1e-6, abs=1e-9)
        assert b["intercept"] == pytest.approx(2 * a["intercept"] + 1 - a["alpha"], rel=1e-6, abs=1e-9)
    assert "scale_mapping" not in five["results"] and nine["results"]["scale_mapping"]["target"] == "1-9"
    # models.json says how new raw scores enter the model (it held the coefficients alone)
    inp = m9["PRISM"]["inputs"]
    assert inp["judge_scale"] == [1, 5] and inp["target_scale"] == [1, 9] and inp["slope"] == 2
    assert inp["apply"].startswith("baseline as 1 + 2 x (s - 1), each probe column (a score change) times 2")
    assert m5["PRISM"]["inputs"]["slope"] == 1 and "as they are" in m5["PRISM"]["inputs"]["apply"]


def test_screening_says_its_neutral_rms_is_on_the_targets_scale(tmp_path):
    """With the judge on 1-5 and labels on 1-9 the features (and so screening's neutral RMS)
    are on the target's scale, and the reliability diagnostic's on the judge's: the screening
    note says which, so the two numbers are not read as one."""
    import dataclasses

    from judgecal.methods.runner import StudyRunner

    def label(k):
        return 1 + (k * 7 + k // 6) % 5

    # 12 groups: screening's confirmation holds out 4, enough for its intervals
    cfg = _relabelled_study(tmp_path, "nine", "1-9", lambda k: 2 * label(k) - 1, per_group=3)
    cfg = dataclasses.replace(cfg, pool=dataclasses.replace(cfg.pool, neutral=True),
                              design=dataclasses.replace(cfg.design, screen=True))
    log = StudyRunner(cfg).run_all()
    note = next(s["note"] for s in log["results"]["sections"] if s["name"] == "screening")
    assert "score changes: " in note and "(on the target's 1-9 scale, the judge's changes times 2; the " \
        "reliability diagnostic's are on the judge's)" in note
