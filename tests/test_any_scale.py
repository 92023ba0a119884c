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
    assert "t = 1 + 0.75 x (s - 1)" in m["vanilla"] and "learn their own map" in m["prism"]
    line = "scales: judge 1-5, target 1-4: Vanilla read linearly onto the target's range"
    assert line in format_table(log) and html.escape(line) in render_html(log)
    assert json.loads((out / "results.json").read_text())["results"]["scale_mapping"] == m
