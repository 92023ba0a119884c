"""Files as users have them: TSV and any delimiter, JSON told apart by content (with a note when
the extension says otherwise), nested records through a column path, a named subset of rows.
Unit tests read with ``load_generic``; two studies run end to end with the simulated judge."""

import json

import pytest

from judgecal.datasets import TargetSpec, load_generic
from judgecal.errors import InputError

from conftest import write_config

TARGET = TargetSpec(("quality",), 1.0, 5.0)
MAP = {"item_id": "id", "group_id": "doc", "content": "text"}


def rows(n=12):
    return [{"id": f"i{k:03d}", "doc": f"d{k // 3}", "source": f"article {k // 3}", "text": f"summary number {k}",
             "quality": 1 + k % 5,
             "split": "test" if k < 9 else "train", "batch": k // 6} for k in range(n)]


def delimited(path, sep, data):
    cols = list(data[0])
    path.write_text("\n".join([sep.join(cols)] + [sep.join(str(r[c]) for c in cols) for r in data]), encoding="utf-8")
    return path


def nested(data):
    """A benchmark-style file: one object, its records under data, scores nested in annotations."""
    return {"version": 2, "data": [{"id": r["id"], "doc": r["doc"], "source": r["source"], "text": r["text"],
                                    "split": r["split"],
                                    "annotations": {"Overall Quality": {"majority_human": r["quality"]}}}
                                   for r in data]}


def test_a_tsv_and_any_delimiter_are_read(tmp_path):
    tsv = load_generic(str(delimited(tmp_path / "items.tsv", "\t", rows())), MAP, TARGET)
    piped = load_generic(str(delimited(tmp_path / "items.txt", "|", rows())), MAP, TARGET, delimiter="|")
    assert tsv.num_rows == piped.num_rows == 12
    assert tsv["item_id"].to_pylist()[0] == "i000"  # ids stay text, leading zeros kept
    assert tsv["target"].to_pylist() == piped["target"].to_pylist() == [float(1 + k % 5) for k in range(12)]


def test_json_is_told_apart_by_content_and_a_wrong_extension_is_said(tmp_path, capfd):
    lines = tmp_path / "lines.json"
    lines.write_text("\n".join(json.dumps(r) for r in rows()), encoding="utf-8")
    array = tmp_path / "array.jsonl"
    array.write_text(json.dumps(rows(), indent=1), encoding="utf-8")
    a, b = load_generic(str(lines), MAP, TARGET), load_generic(str(array), MAP, TARGET)
    assert a["item_id"].to_pylist() == b["item_id"].to_pylist() and a.num_rows == 12
    err = capfd.readouterr().err
    assert f"judgecal: note: {lines} holds JSON Lines (one object per line), not one JSON value" in err
    assert f"judgecal: note: {array} holds a JSON array of records, not JSON Lines" in err


def test_scores_written_as_text_in_json_are_read_as_a_csv_cell_is(tmp_path):
    """A JSON export's "4.5" was refused ("'4.5' (str), not a number") where the same CSV cell
    was read: text that is a number is that number, in either file."""
    data = [{**r, "quality": str(r["quality"]) + (".5" if k % 2 and r["quality"] < 5 else "")}
            for k, r in enumerate(rows())]
    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in data), encoding="utf-8")
    as_json = load_generic(str(p), MAP, TARGET)
    as_csv = load_generic(str(delimited(tmp_path / "items.csv", ",", data)), MAP, TARGET)
    assert as_json["target"].to_pylist() == as_csv["target"].to_pylist()
    assert as_json["target"].to_pylist()[:4] == [1.0, 2.5, 3.0, 4.5]
    p.write_text("\n".join(json.dumps({**r, "quality": "NaN" if k == 2 else r["quality"]}) for k, r in enumerate(data)),
                 encoding="utf-8")
    with pytest.raises(InputError, match=r"row 3 \(item i002\): human score 'quality' is missing or NaN"):
        load_generic(str(p), MAP, TARGET)


def test_whole_float_ids_are_the_ids_and_decimal_scores_are_numbers(tmp_path):
    """A JSON row correcting item 1012's label under "answer_id": 1012.0 was a second item
    beside 1012, both fitted; a Parquet id column with one gap (floats) renamed every item
    "1001.0"; a database's DECIMAL(5,2) score was "not a number" (a user's findings)."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows()
    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps({**r, "id": 1000 + k}) for k, r in enumerate(data)) + "\n"
                 + json.dumps({**data[3], "id": 1003.0, "quality": 5}), encoding="utf-8")
    with pytest.raises(InputError, match=r"row 13: duplicate item_id '1003' \(first at row 4"):
        load_generic(str(p), MAP, TARGET)
    table = pa.table({"id": pa.array([1000.0 + k for k in range(12)]), "doc": [r["doc"] for r in data],
                      "text": [r["text"] for r in data],
                      "quality": pa.array([Decimal(f"{r['quality']}.50") if r["quality"] < 5 else Decimal("5.00")
                                           for r in data], pa.decimal128(5, 2))})
    pq.write_table(table, tmp_path / "items.parquet")
    items = load_generic(str(tmp_path / "items.parquet"), MAP, TARGET)
    assert items["item_id"].to_pylist()[:2] == ["1000", "1001"]
    assert items["target"].to_pylist()[:2] == [1.5, 2.5]


def test_nested_records_through_a_records_path_and_column_paths(tmp_path):
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(nested(rows())), encoding="utf-8")
    cols = MAP | {"quality": "annotations.Overall Quality.majority_human"}
    items = load_generic(str(p), cols, TARGET, records="data")
    assert items["target"].to_pylist() == [float(1 + k % 5) for k in range(12)]
    with pytest.raises(InputError, match=r"arrays of records \(data\); name the one to read with \[dataset\].records"):
        load_generic(str(p), cols, TARGET)
    with pytest.raises(InputError, match=r"\[dataset\].records 'results': no key 'results' here \(keys holding "
                                         r"records or objects: data\)"):
        load_generic(str(p), cols, TARGET, records="results")


def test_a_missing_key_on_a_column_path_names_the_row(tmp_path):
    data = nested(rows())
    del data["data"][4]["annotations"]["Overall Quality"]
    data["data"][7]["annotations"] = "n/a"
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    cols = MAP | {"quality": "annotations.Overall Quality.majority_human"}
    with pytest.raises(InputError, match=r"bench.json row 8: column path 'annotations.Overall Quality."
                                         r"majority_human': 'annotations' holds str 'n/a'"):
        load_generic(str(p), cols, TARGET, records="data")
    data["data"][7]["annotations"] = {"Overall Quality": {"majority_human": 3}}
    p.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError) as e:
        load_generic(str(p), cols, TARGET, records="data")
    assert "row 5" in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_name_that_is_both_a_column_and_a_path_into_another_is_refused(tmp_path):
    """A flat "human.mean" (old labels) beside {"human": {"mean": ...}} won without a word (a
    user's finding): refused naming both. A flat column beside a column of other values, or
    beside records without that key, is read as before."""
    p = tmp_path / "items.jsonl"
    data = [{**r, "human": {"mean": 1 + (k + 2) % 5}, "human.mean": r["quality"]} for k, r in enumerate(rows())]
    p.write_text("\n".join(json.dumps(r) for r in data), encoding="utf-8")
    cols = MAP | {"quality": "human.mean"}
    with pytest.raises(InputError, match=rf"^{p}: 'human.mean' names both a column of that name and the field "
                                         r"'mean' inside column 'human'; rename one of them"):
        load_generic(str(p), cols, TARGET)
    same = [{**r, "human": {"mean": r["quality"]}} for r in data]  # the same values twice: either serves
    p.write_text("\n".join(json.dumps(r) for r in same), encoding="utf-8")
    assert load_generic(str(p), cols, TARGET)["target"].to_pylist() == [float(r["quality"]) for r in data]
    for other in ({"rater": 2}, "two raters"):  # no 'mean' in them: the flat column it is
        p.write_text("\n".join(json.dumps({**r, "human": other}) for r in data), encoding="utf-8")
        assert load_generic(str(p), cols, TARGET)["target"].to_pylist() == [float(r["quality"]) for r in data]


def test_where_keeps_a_named_subset_and_rows_keep_their_file_numbers(tmp_path):
    data = rows()
    data[10]["text"] = ""  # a blank text in the train split: not read when only test is kept
    p = delimited(tmp_path / "items.tsv", "\t", data)
    test = load_generic(str(p), MAP, TARGET, where={"split": "test"})
    assert test.num_rows == 9 and sorted(set(test["group_id"].to_pylist())) == ["d0", "d1", "d2"]
    both = {"split": ["test", "train"]}
    with pytest.raises(InputError, match=r"items.tsv row 11 \(item i010\): column 'text' \(content\) is empty"):
        load_generic(str(p), MAP, TARGET, where=both)
    with pytest.raises(InputError, match=r"\[dataset\].where.lang: .*items.tsv has no such column"):
        load_generic(str(p), MAP, TARGET, where={"lang": "en"})
    with pytest.raises(InputError, match=r"\[dataset\].where: no row of .*items.tsv matches \{'split': 'dev'\}"):
        load_generic(str(p), MAP, TARGET, where={"split": "dev"})
    nums = load_generic(str(p), MAP, TARGET, where={"batch": [0, 0.0, "0"]})  # 0 however it is written
    assert nums["item_id"].to_pylist() == [f"i{k:03d}" for k in range(6)]


@pytest.mark.parametrize("extra,says", [
    ('delimiter = "||"', "[dataset].delimiter: must be one character, not '||'"),
    ("where = {split = {a = 1}}", "[dataset].where.split: must be a value or a list of values"),
])
def test_reader_fields_are_checked_when_the_config_loads(tmp_path, extra, says):
    from judgecal.config import load_config

    p = delimited(tmp_path / "items.tsv", "\t", rows())
    cfg = write_config(tmp_path / "c.toml", f"""[dataset]
name = "generic"
path = "{p}"
target = ["quality"]
target_scale = "1-5"
task = "summary"
columns = {{item_id = "id", group_id = "doc", content = "text"}}
{extra}
[engine]
kind = "simulated"
""")
    with pytest.raises(InputError) as e:
        load_config(str(cfg))
    assert says in str(e.value)


def test_reader_fields_on_a_bundled_dataset_are_refused(tmp_path):
    from judgecal.config import load_config

    cfg = write_config(tmp_path / "c.toml", '[dataset]\nwhere = {split = "test"}\n[engine]\nkind = "simulated"\n')
    with pytest.raises(InputError, match=r"\[dataset\].where: is for a generic dataset's file \(name = \"generic\"\), "
                       r"not summeval \(\[dataset\].name defaults to summeval\)"):
        load_config(str(cfg))


def test_a_users_file_given_without_name_generic_is_not_read_as_summeval_silently(tmp_path):
    """A JSON Lines file given by path with its columns, name left out: it was read as SummEval's
    JSON and refused as 'line 2: not valid JSON' on a line that is fine (a user's finding)."""
    from judgecal.config import load_config
    from judgecal.datasets.loaders import load_dataset

    data = tmp_path / "items.jsonl"
    data.write_text('{"id": "i0", "doc": "d0", "text": "a", "quality": 3}\n{"id": "i1", "doc": "d0", "text": "b", '
                    '"quality": 4}\n')
    cfg = write_config(tmp_path / "c.toml", f'[dataset]\npath = "{data}"\ntask = "summary"\ntarget_scale = "1-5"\n'
                       'columns = {item_id = "id", group_id = "doc", content = "text", target = "quality"}\n'
                       '[engine]\nkind = "simulated"\n')
    with pytest.raises(InputError, match=r"\[dataset\].columns: is for a generic dataset's file \(name = \"generic\"\)"):
        load_config(str(cfg))
    with pytest.raises(InputError) as e:  # no columns either: the reader's line says how it read the file
        load_dataset("summeval", str(data))
    assert str(e.value).endswith('(read as the summeval dataset, [dataset].name; a file of your own with its own '
                                 'columns is name = "generic")')


@pytest.mark.parametrize("layout", ["tsv", "nested"])
def test_a_study_on_a_file_as_it_comes(ray_local, tmp_path, layout):
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner

    data = rows(24)
    for r in data:
        r["split"] = "test" if r["doc"] not in ("d6", "d7") else "train"
    if layout == "tsv":
        path, reader = delimited(tmp_path / "items.tsv", "\t", data), 'columns = {item_id = "id", group_id = "doc", ' \
            'content = "text"}'
    else:
        path = tmp_path / "bench.json"
        path.write_text(json.dumps(nested(data)), encoding="utf-8")
        reader = 'records = "data"\ncolumns = {item_id = "id", group_id = "doc", content = "text", ' \
                 'quality = "annotations.Overall Quality.majority_human"}'
    out = tmp_path / "out"
    cfg = load_config(str(write_config(tmp_path / "c.toml", f"""[study]
output = "{out}"
[dataset]
name = "generic"
path = "{path}"
target = ["quality"]
target_scale = "1-5"
task = "summary"
where = {{split = "test"}}
{reader}
[pool]
attributes = ["length"]
[engine]
kind = "simulated"
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
fold_seeds = 1
""")))
    log = StudyRunner(cfg).run_all()
    assert log["results"]["items"] == 18 and log["results"]["groups"] == 6  # the test split only
    spec = json.loads((out / "study.json").read_text())
    assert spec["identity"]["dataset"]["where"] == {"split": "test"}


def _urw_config(tmp_path, cal, extra=""):
    from judgecal.config import load_config

    return load_config(str(write_config(tmp_path / "u.toml", f"""[study]
method = "urw"
[urw]
calibration = "generic"
calibration_path = "{cal}"
{extra}
[engine]
kind = "simulated"
""")))


def test_calibration_labels_that_flag_a_problem_are_turned_the_right_way(tmp_path):
    from judgecal.config import load_config
    from judgecal.methods import get_method
    from judgecal.methods.urw import load_calibration

    rows_ = [{"prompt": "Say hi.", "response": "hi", "criterion": "Does it greet?", "label": 0},
             {"prompt": "Say hi.", "response": "hi", "criterion": "Is it rude?", "label": 1}]
    cal = tmp_path / "cal.jsonl"
    cal.write_text("\n".join(json.dumps(r) for r in rows_), encoding="utf-8")
    met = load_calibration(_urw_config(tmp_path, cal))
    flagged = _urw_config(tmp_path, cal, 'label_means = "problem present"')
    assert met["label"].to_pylist() == [0, 1]
    assert load_calibration(flagged)["label"].to_pylist() == [1, 0]  # 1 = the criterion is met, as the verifier says
    assert get_method("urw").identity(flagged)["calibration"]["label_means"] == "problem present"
    with pytest.raises(InputError, match=r"\[urw\].label_means: unknown meaning 'bad'"):
        _urw_config(tmp_path, cal, 'label_means = "bad"')
    infobench = write_config(tmp_path / "i.toml", '[study]\nmethod = "urw"\n[urw]\nlabel_means = "problem present"\n'
                                                  '[engine]\nkind = "simulated"\n')
    with pytest.raises(InputError, match=r"\[urw\].label_means: infobench's labels say the criterion is met"):
        load_config(str(infobench))


def test_group_by_none_makes_every_item_its_own_group_and_a_mixed_file_is_one_line(tmp_path):
    data = [{k: v for k, v in r.items() if k != "doc"} for r in rows()]
    p = tmp_path / "single.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in data), encoding="utf-8")
    items = load_generic(str(p), {"item_id": "id", "content": "text"}, TARGET, group_by="none")
    assert items["group_id"].to_pylist() == items["item_id"].to_pylist() and items.num_rows == 12
    mixed = rows(7)  # d0, d1 of three items, d2 of one
    q = delimited(tmp_path / "mixed.tsv", "\t", mixed)
    with pytest.raises(InputError, match=r"mixed.tsv row 7 \(item i006\): group 'd2' has one item while others have "
                                         r"more; .*1 of 3 groups have one"):
        load_generic(str(q), MAP, TARGET)
    with pytest.raises(InputError, match=r"\[dataset\].group_by: 'split' and columns.group_id 'doc' name two columns"):
        load_generic(str(q), MAP, TARGET, group_by="split")
    by_split = load_generic(str(q), {"item_id": "id", "content": "text"}, TARGET, group_by="split")
    assert set(by_split["group_id"].to_pylist()) == {"test"}


def test_a_study_with_one_response_per_prompt_is_evaluated_over_items(ray_local, tmp_path):
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner
    from judgecal.report.table import format_table

    p = tmp_path / "single.jsonl"
    p.write_text("\n".join(json.dumps({"id": f"r{k}", "source": f"article {k}", "text": "word " * (4 + k % 9),
                                       "quality": 1 + k % 5})
                           for k in range(40)), encoding="utf-8")
    out = tmp_path / "out"
    body = f"""[study]
output = "{out}"
[dataset]
name = "generic"
path = "{p}"
target = ["quality"]
target_scale = "1-5"
task = "summary"
group_by = "none"
columns = {{item_id = "id", content = "text"}}
[pool]
attributes = ["length"]
[engine]
kind = "simulated"
[fit]
folds = 4
inner_folds = 3
bootstrap = 200
fold_seeds = 2
"""
    with pytest.raises(InputError, match=r"\[design\].subsets: every group has one item \(one response per prompt\), "
                                         r"and the subset curve ranks within groups: set \[design\] subsets = false$"):
        StudyRunner(load_config(str(write_config(tmp_path / "a.toml", body)))).run_all()
    # every part that ranks within groups in one line (one at a time, each fix met the next refusal)
    pooled = body.replace('attributes = ["length"]', 'attributes = ["length"]\nneutral = true')
    with pytest.raises(InputError) as e:
        StudyRunner(load_config(str(write_config(tmp_path / "c.toml", pooled)))).run_all()
    assert str(e.value).endswith("the subset curve ranks within groups; screening bootstraps over groups; the "
                                 "confirmation table ranks within held-out groups: set [design] subsets = false, "
                                 "[design] screen = false, [design] confirmation = 0")
    assert not (out / "responses").exists()  # refused before any request
    log = StudyRunner(load_config(str(write_config(tmp_path / "b.toml", body + "[design]\nsubsets = false\n")))).run_all()
    res = log["results"]
    assert res["unit"] == "items" and res["items"] == res["groups"] == 40
    for m in res["methods"]:
        assert m["unit"] == "items" and m["groups"] == 40 and m["spearman_note"] == "Fisher z"
        assert m["spearman_low"] < m["spearman"] < m["spearman_high"]
    prism = next(m for m in res["methods"] if m["method"] == "PRISM")
    assert prism["diff_note"] == "percentile" and prism["diff_low"] <= prism["diff"] <= prism["diff_high"]
    text = format_table(log)
    assert "40 items, one per group: held-out Spearman over all items" in text and "n: items" in text
    first, head = text.splitlines()[:2]
    assert first == "SIMULATED judge: these numbers test the method, not any real model"  # above the table too
    assert head.rstrip().endswith("items  gamma on grid top, bottom")


def test_a_file_with_no_id_column_takes_the_prompt_as_item_group_and_source(tmp_path):
    """One response per prompt and no id column: the prompt is the item, its group and its
    source; the check of one column in two roles refuses content as the source, not this (a
    second reader's finding)."""
    p = tmp_path / "pairs.jsonl"
    p.write_text("\n".join(json.dumps({"prompt": f"q{k}", "response": f"r{k}", "quality": 1 + k % 5})
                           for k in range(6)))
    items = load_generic(str(p), {"item_id": "prompt", "source": "prompt", "content": "response"}, TARGET,
                         group_by="none")
    assert items["item_id"].to_pylist() == items["source"].to_pylist() == [f"q{k}" for k in range(6)]
    with pytest.raises(InputError, match=r"\[dataset\]\.columns\.source: 'response' is content's column and "
                                         r"source's; give each its own"):
        load_generic(str(p), {"item_id": "prompt", "source": "response", "content": "response"}, TARGET,
                     group_by="none")


def test_quotes_pyarrow_reads_leniently_are_refused_naming_the_line(tmp_path):
    """A value that goes on after its closing quote lost its quotes ('"Stay," she said.' read as
    'Stay, she said.': a user's finding); a quote never closed took the rest of the file into
    one value. Each is one line naming where. A quoted semicolon file read with commas still
    gets the separator hint (a second reader's case), and quotes inside a value are fine."""
    from judgecal.datasets.loaders import _read_table

    def read(name, text):
        p = tmp_path / name
        p.write_text(text, encoding="utf-8")
        return p, lambda: _read_table(p)

    p, go = read("a.tsv", 'id\ttext\n1\tplain\n2\t"Stay," she said.\n')
    with pytest.raises(InputError, match=rf"^{p} line 3: a value starts with a quote and goes on after its closing "):
        go()
    p, go = read("b.csv", 'id,text\n1,"abc\n2,def\n')
    with pytest.raises(InputError, match=rf"^{p} line 2: a quote opened in this record is never closed"):
        go()
    p, go = read("c.csv", '"id";"text"\n"1";"Hi"\n')
    with pytest.raises(InputError, match=rf"^{p}: reads as one column; its header line is separated by ';'"):
        go()
    p, go = read("d.csv", 'id,text\r\n1,"""Stay,"" she said."\r\n2,he said "hi"\r\n3,""\r\n4,"multi\nline"')
    assert go()["text"] == ['"Stay," she said.', 'he said "hi"', '', "multi\nline"]


def test_rows_of_empty_fields_at_a_files_end_are_left_out_with_a_note(tmp_path, capfd):
    """Excel's exports end in ",,,," rows: refused as "row 61: column 'id' is empty" (a user's
    finding). At the end only, so every other row keeps its number in later errors."""
    target = TargetSpec(("q",), 1, 5)
    cols = {"item_id": "id", "group_id": "doc", "content": "text"}
    p = tmp_path / "items.csv"
    p.write_text("id,doc,text,q\ni0,d0,a,1\ni1,d0,b,2\n,,,\n,,,\n", encoding="utf-8")
    items = load_generic(str(p), cols, target)
    assert items["item_id"].to_pylist() == ["i0", "i1"]
    note = f"judgecal: note: {p}: 2 rows at its end with every field empty left out (rows 3-4)"
    assert note in capfd.readouterr().err
    load_generic(str(p), cols, target)  # each stage reads the data again: said once (it came 4 times in a run)
    assert note not in capfd.readouterr().err
    p.write_text("id,doc,text,q\ni0,d0,a,1\n,,,\ni1,d0,b,2\n", encoding="utf-8")  # inside the file: still refused
    with pytest.raises(InputError, match=r"items\.csv row 2: column 'id' \(item_id\) is empty"):
        load_generic(str(p), cols, target)


def test_a_data_file_given_where_a_config_goes_is_named_as_such(tmp_path, capfd):
    from judgecal import cli

    p = tmp_path / "items.csv"
    p.write_text("id,doc\n1,2\n", encoding="utf-8")
    for stage in ("run", "evaluate", "show"):
        assert cli.main([stage, str(p)]) == 2
        assert capfd.readouterr().err.strip() == (f"judgecal: error: {p}: is a data file, not a study config (TOML) "
                                                  "or a study folder: name it in a config's [dataset] path (or [urw] "
                                                  "evaluation_paths), then give that config")
    # a study's own files, and a grid variant's log, are named as such (a second reader's finding)
    (tmp_path / "study.json").write_text("{}", encoding="utf-8")
    (tmp_path / "grid").mkdir()
    (tmp_path / "grid" / "v.json").write_text("{}", encoding="utf-8")
    assert cli.main(["report", str(tmp_path / "study.json")]) == 2
    assert capfd.readouterr().err.strip().endswith(f"is a file of the study folder {tmp_path}: give the folder")
    (tmp_path / "report.html").write_text("<html></html>", encoding="utf-8")  # read as TOML: "does not parse"
    assert cli.main(["report", str(tmp_path / "report.html")]) == 2
    assert capfd.readouterr().err.strip().endswith(f"is a file of the study folder {tmp_path}: give the folder")
    assert cli.main(["report", str(tmp_path / "grid" / "v.json")]) == 2
    assert capfd.readouterr().err.strip().endswith(f"is a grid variant's results log: `judgecal compare` reads it; "
                                                   f"the other commands take a study folder ({tmp_path})")
