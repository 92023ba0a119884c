import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import generic_study
from judgecal.datasets import TargetSpec, load_dataset, load_generic, subset_items
from judgecal.errors import InputError
from judgecal.probes import TEMPLATES, build_plan, load_bank
from judgecal.scale import ScoreScale


def test_bundled_summeval_and_hanna():
    se = load_dataset("summeval")
    assert se.num_rows == 1600 and len(set(se["group_id"].to_pylist())) == 100
    assert {"human.relevance", "human.coherence", "human.fluency", "human.consistency"} <= set(se.column_names)
    np.testing.assert_allclose(se["target"].to_numpy(), se["human.relevance"].to_numpy())
    mean_spec = TargetSpec(("coherence", "relevance"), 1, 5)
    se2 = load_dataset("summeval", target=mean_spec)
    np.testing.assert_allclose(se2["target"].to_numpy(),
                               (se["human.coherence"].to_numpy() + se["human.relevance"].to_numpy()) / 2)
    ha = load_dataset("hanna", target=TargetSpec(("coherence",), 1, 5))
    assert ha.num_rows == 1056 and len(set(ha["group_id"].to_pylist())) == 96
    assert set(ha["task"].to_pylist()) == {"story"}


def test_usr_from_a_path(tmp_path):
    resp = {"response": "i like dogs", "model": "m", "Understandable": [1, 1, 1], "Natural": [3, 2, 3],
            "Overall": [4, 3, 5]}
    data = [{"context": "hi\nhello", "fact": "f", "responses": [resp, {**resp, "Overall": [1, 1, 2]}]}] * 2
    p = tmp_path / "pc_usr_data.json"
    p.write_text(json.dumps(data))
    t = load_dataset("usr", str(p))
    assert t.num_rows == 4 and t["target"].to_pylist()[:2] == [4.0, pytest.approx(4 / 3)]
    assert set(t["task"].to_pylist()) == {"dialogue"}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_generic_loader_with_column_mapping(tmp_path, fmt):
    rows = {"id": ["a", "b", "c", "d"], "doc": ["d1", "d1", "d2", "d2"], "text": ["x y", "z", "w", "v v"],
            "quality": [1.0, 2.0, 3.0, 4.5]}
    t = pa.table(rows)
    p = tmp_path / f"items.{fmt}"
    if fmt == "csv":
        import pyarrow.csv as pc

        pc.write_csv(t, p)
    elif fmt == "jsonl":
        p.write_text("\n".join(json.dumps(r) for r in t.to_pylist()))
    else:
        pq.write_table(t, p)
    items = load_generic(str(p), {"item_id": "id", "group_id": "doc", "content": "text"},
                         TargetSpec(("quality",), 1, 5))
    assert items["target"].to_pylist() == [1.0, 2.0, 3.0, 4.5]
    assert items["group_id"].to_pylist() == ["d1", "d1", "d2", "d2"]


def test_subset_keeps_first_groups_and_items():
    se = load_dataset("summeval")
    s = subset_items(se, 3, 5)
    assert s.num_rows == 15 and len(set(s["group_id"].to_pylist())) == 3


def test_banks():
    style, quality = load_bank("style"), load_bank("quality")
    assert len(style.attributes) >= 8 and len(quality.attributes) == 8
    assert not set(style.attributes) & set(quality.attributes)
    probes = style.probes(strengths=("slight", "standard", "strong"), neutral=True, oneside=True)
    ids = [p.probe_id for p in probes]
    assert ids[0] == "baseline" and len(ids) == len(set(ids))
    assert len([p for p in probes if p.direction in ("more", "less")]) == 8 * 2 * 3
    assert any(p.direction == "neutral" for p in probes) and any(p.direction == "oneside" for p in probes)
    with pytest.raises(InputError, match="unknown attribute 'loudness'"):
        style.probes(["loudness"])


def test_template_puts_the_clause_after_the_content():
    sys_, user = TEMPLATES["summary"].render("ARTICLE", "SUMMARY", "CLAUSE", ScoreScale(1, 10))
    assert user.index("ARTICLE") < user.index("SUMMARY") < user.index("CLAUSE")
    assert user.endswith("CLAUSE") and "1 to 10" in user


def test_request_ids_are_deterministic_and_keyed_on_judge_and_template():
    items = subset_items(load_dataset("summeval"), 2, 2)
    probes = load_bank("style").probes(["length", "hedging"])
    a = build_plan(items, probes, 2, ScoreScale(1, 5), "judge-a")
    assert a.num_rows == 4 * 5 * 2 and len(set(a["request_id"].to_pylist())) == a.num_rows
    assert a["request_id"] == build_plan(items, probes, 2, ScoreScale(1, 5), "judge-a")["request_id"]
    b = build_plan(items, probes, 2, ScoreScale(1, 5), "judge-b")
    c = build_plan(items, probes, 2, ScoreScale(1, 10), "judge-a")
    assert not set(a["request_id"].to_pylist()) & set(b["request_id"].to_pylist())
    assert not set(a["request_id"].to_pylist()) & set(c["request_id"].to_pylist())
    # rows of one item stay together, baseline first
    first = a.slice(0, 5)
    assert set(first["item_id"].to_pylist()) == {items["item_id"][0].as_py()}
    assert first["probe_id"][0].as_py() == "baseline"


def test_columnar_rendering_is_the_template_rendered_per_row():
    """The render stage joins item heads and probe tails in Arrow; every prompt must equal the
    template rendered row by row (SummEval summaries and HANNA stories)."""
    import pyarrow as pa

    from judgecal.datasets import TargetSpec, load_dataset, subset_items
    from judgecal.probes import ProbeRenderer, build_plan, load_bank, template_for
    from judgecal.scale import ScoreScale

    scale = ScoreScale(1, 5)
    for name in ("summeval", "hanna"):
        items = subset_items(load_dataset(name, target=TargetSpec(("coherence",), 1, 5)), 2, 3)
        probes = load_bank("style").probes(["length", "formality"], ("slight", "strong"))
        plan = build_plan(items, probes, 2, scale, "judge")
        rows = plan.append_column("attempt", pa.array([1] * plan.num_rows, pa.int32()))
        out = ProbeRenderer(items, probes, scale).render_table(rows.take(pa.array(range(plan.num_rows)[::-1])))
        by_item = {r["item_id"]: r for r in items.to_pylist()}
        clause = {p.probe_id: p.clause for p in probes}
        for r in out.to_pylist():
            it = by_item[r["item_id"]]
            t = template_for(it["task"])
            assert (r["system"], r["user"]) == t.render(it["source"], it["content"], clause[r["probe_id"]], scale)
            assert r["answer_prefix"] == t.answer_prefix
        shas = {}
        for r in out.to_pylist():  # one hash per distinct prompt, the same for every run
            assert shas.setdefault((r["item_id"], r["probe_id"]), r["prompt_sha"]) == r["prompt_sha"]
        assert len(set(shas.values())) == len(shas)


def test_hanna_loads_with_its_defaults():
    """The target is the mean of the six criteria (each the mean of three raters), on 1-5."""
    import numpy as np

    from judgecal.config import parse_config
    from judgecal.datasets import DEFAULT_TARGETS, load_dataset
    from judgecal.methods.prism import target_spec

    items = load_dataset("hanna")
    six = DEFAULT_TARGETS["hanna"]
    assert len(six) == 6 and items.num_rows == 1056
    human = np.column_stack([items[f"human.{c}"].to_numpy() for c in six])
    np.testing.assert_allclose(items["target"].to_numpy(), human.mean(axis=1))
    assert target_spec(parse_config({"dataset": {"name": "hanna"}})).describe().startswith("mean(coherence")


# -- issue 7 items 11-12: encodings, scales, sampling, generic pairs ------------------------
def _write_pairs(path, rows, fmt):
    if fmt == "csv":  # with a UTF-8 byte-order mark, as spreadsheet programs write it
        import csv
        import io

        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: "\n".join(v) if isinstance(v, list) else v for k, v in r.items()})
        path.write_bytes(b"\xef\xbb\xbf" + buf.getvalue().encode("utf-8"))
    elif fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)


PAIRS = [
    {"qid": "q1", "question": "Name a fruit.", "first": "apple", "second": "car", "winner": "A",
     "checks": ["Does it name a fruit?", "Is it one word?"]},
    {"qid": "q2", "question": "Name a fruit.", "first": "pear", "second": "apple", "winner": "B",
     "checks": ["Does it name a fruit?", "Is it one word?"]},
    {"qid": "q3", "question": "Say hello.", "first": "hello", "second": "bye", "winner": "A", "checks": []},
    {"qid": "q4", "question": "Say hello.", "first": "hi", "second": "hey", "winner": "tie", "checks": []},
    {"qid": "q5", "question": "Say hello.", "first": "same", "second": "same", "winner": "B", "checks": []},
]
PAIR_COLUMNS = {"pair_id": "qid", "prompt": "question", "response_a": "first", "response_b": "second",
                "preferred": "winner", "criteria": "checks"}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_generic_pairs_loader_in_three_formats(tmp_path, fmt):
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / f"pairs.{fmt}"
    _write_pairs(p, PAIRS, fmt)
    ps = load_generic_pairs(str(p), PAIR_COLUMNS)
    pairs, responses = ps.tables()
    assert pairs["pair_id"].to_pylist() == ["generic/q1", "generic/q2", "generic/q3"]
    assert pairs["preferred"].to_pylist() == ["a", "b", "a"]  # A/B in any case
    assert set(pairs["dataset"].to_pylist()) == {"generic"}
    assert {r for _, _, r in responses.values()} == {"apple", "car", "pear", "hello", "bye"}
    fruit = pairs["group_id"][0].as_py()
    assert pairs["group_id"][1].as_py() == fruit  # one prompt, one group
    assert ps.criteria == {fruit: ["Does it name a fruit?", "Is it one word?"]}  # "Say hello." gets generated ones
    assert ps.exclusions() == [
        f"generic: 1 pair labelled as ties excluded: ties are not supported in preference labels (first: {p} row 4)",
        f"generic: 1 pair whose two responses are identical excluded: they cannot be ranked (first: {p} row 5)"]


def test_generic_pairs_label_mapping_and_row_ids(tmp_path):
    from judgecal.rubrics.data import load_generic_pairs

    rows = [{"prompt": "p1", "response_a": "x", "response_b": "y", "preferred": 1},
            {"prompt": "p2", "response_a": "x", "response_b": "y", "preferred": 2},
            {"prompt": "p3", "response_a": "x", "response_b": "y", "preferred": 0}]
    p = tmp_path / "pairs.jsonl"
    _write_pairs(p, rows, "jsonl")
    ps = load_generic_pairs(str(p), labels={"1": "a", "2": "b", "0": "tie"})
    pairs, _ = ps.tables()
    assert pairs["pair_id"].to_pylist() == ["generic/1", "generic/2"]  # no pair_id column: the row number
    assert pairs["preferred"].to_pylist() == ["a", "b"] and not ps.criteria
    with pytest.raises(InputError, match=r"row 1: label 1 in column 'preferred' is not one of the accepted values: "
                                         r"a, b, tie"):
        load_generic_pairs(str(p))


def test_load_pairs_logs_what_it_excludes(tmp_path, capsys):
    from judgecal.config import parse_config
    from judgecal.methods.urw import load_pairs

    p = tmp_path / "pairs.jsonl"
    _write_pairs(p, PAIRS, "jsonl")
    cfg = parse_config({"study": {"method": "urw"}, "engine": {"kind": "simulated"},
                        "urw": {"evaluation": ["generic", "llmbar"], "evaluation_paths": {"generic": str(p)},
                                "evaluation_columns": PAIR_COLUMNS, "llmbar_subsets": ["Natural"],
                                "max_pairs_per_dataset": 2}})
    merged = load_pairs(cfg)
    pairs, _ = merged.tables()
    assert pairs["dataset"].to_pylist() == ["generic", "generic", "llmbar/Natural", "llmbar/Natural"]
    assert list(merged.criteria) == [pairs["group_id"][0].as_py()]
    err = capsys.readouterr().err
    assert "[urw] generic: 1 pair labelled as ties excluded: ties are not supported in preference labels" in err
    assert "[urw] generic: 1 pair whose two responses are identical excluded" in err


def test_every_loader_accepts_a_byte_order_mark(tmp_path):
    from judgecal.config import load_config
    from judgecal.rubrics.data import load_generic_rubric, load_infobench, load_llmbar

    bom = b"\xef\xbb\xbf"
    rows = [{"id": f"i{k}", "doc": f"d{k // 2}", "text": f"t{k}", "quality": 1 + k % 5} for k in range(4)]
    cols, target = {"item_id": "id", "group_id": "doc", "content": "text"}, TargetSpec(("quality",), 1, 5)
    (tmp_path / "items.csv").write_bytes(bom + b"id,doc,text,quality\n" + b"".join(
        f"{r['id']},{r['doc']},{r['text']},{r['quality']}\n".encode() for r in rows))
    (tmp_path / "items.jsonl").write_bytes(bom + "\n".join(json.dumps(r) for r in rows).encode())
    for name in ("items.csv", "items.jsonl"):
        assert load_generic(str(tmp_path / name), cols, target)["item_id"].to_pylist() == ["i0", "i1", "i2", "i3"]
    (tmp_path / "cal.csv").write_bytes(bom + b"prompt,response,criterion,label\np,r,Is it r?,1\n")
    assert load_generic_rubric(str(tmp_path / "cal.csv"), {})["label"].to_pylist() == [1]
    (tmp_path / "ib.jsonl").write_bytes(bom + json.dumps({"instruction": "i", "response": "r", "question": "q?",
                                                           "label": 0}).encode())
    assert load_infobench(str(tmp_path / "ib.jsonl")).num_rows == 1
    (tmp_path / "llmbar").mkdir()
    (tmp_path / "llmbar" / "llmbar_Natural.json").write_bytes(bom + json.dumps(
        [{"input": "q", "output_1": "a", "output_2": "b", "label": 2}]).encode())
    assert load_llmbar(str(tmp_path / "llmbar"), ["Natural"]).tables()[0]["preferred"].to_pylist() == ["b"]
    usr = [{"context": "hi", "fact": "", "responses": [{"response": "yo", "Overall": [3]}, {"response": "hey",
                                                                                          "Overall": [4]}]}]
    (tmp_path / "usr.json").write_bytes(bom + json.dumps(usr).encode())
    assert load_dataset("usr", str(tmp_path / "usr.json")).num_rows == 2
    # and an en dash
    (tmp_path / "c.toml").write_bytes(bom + b'[dataset]\nname = "summeval"\n[probes]\nscale = "1\xe2\x80\x935"\n')
    assert str(load_config(str(tmp_path / "c.toml")).scale) == "1-5"


def test_scales_written_with_an_en_dash():
    from judgecal.config import parse_config
    from judgecal.methods.prism import target_spec

    cfg = parse_config({"probes": {"scale": "1\u201310"},
                        "dataset": {"name": "generic", "path": "x.csv", "task": "summary", "target": ["q"],
                                    "target_scale": "1\u201310"}})
    assert str(cfg.scale) == "1-10" and cfg.dataset.target_scale == "1-10"
    assert (target_spec(cfg).scale_min, target_spec(cfg).scale_max) == (1.0, 10.0)


def test_scales_written_as_their_two_ends():
    from judgecal.config import parse_config
    from judgecal.errors import InputError

    cfg = parse_config({"pool": {"scale": [1, 4]},
                        "dataset": {"name": "generic", "path": "x.csv", "task": "summary", "target": ["q"],
                                    "target_scale": [0, 100]}})
    assert str(cfg.scale) == "1-4" and cfg.dataset.target_scale == "0-100"
    cfg = parse_config({"diagnostics": {"run": ["resolution"], "scales": [[1, 5], "1-10"]}})
    assert cfg.diagnostics.scales == ("1-5", "1-10")
    # past 100 a target scale is refused as the judge's (README), quoted as written, never rounded
    with pytest.raises(InputError, match="target_scale: 0-1234567 is not a score scale"):
        parse_config({"dataset": {"name": "generic", "path": "x.csv", "task": "summary", "target": ["q"],
                                  "target_scale": [0, 1234567]}})
    # reversed ends, three numbers, a boolean, a fraction, a negative end: one line each, naming
    # the field and quoting what was written
    for bad in ([5, 1], [1, 2, 3], [True, 5], [1, 4.9999999], [-1, 5]):
        with pytest.raises(InputError, match="target_scale") as e:
            parse_config({"dataset": {"name": "generic", "path": "x.csv", "task": "summary", "target": ["q"],
                                      "target_scale": bad}})
        assert "\n" not in str(e.value)


def test_max_groups_samples_groups_with_the_seed():
    se = load_dataset("summeval")
    order = list(dict.fromkeys(se["group_id"].to_pylist()))
    a, b, c = (subset_items(se, 5, 3, seed=s) for s in (0, 0, 1))
    groups = list(dict.fromkeys(a["group_id"].to_pylist()))
    assert a.equals(b) and len(groups) == 5 and a.num_rows == 15
    assert groups == sorted(groups, key=order.index)  # table order kept (prefix reuse)
    expected = sorted((order[j] for j in np.random.default_rng(0).choice(len(order), 5, replace=False)),
                      key=order.index)
    assert groups == expected and groups != order[:5]
    assert set(c["group_id"].to_pylist()) != set(groups)


def test_a_study_samples_its_groups_and_warns_on_a_narrow_range(tmp_path, capsys):
    from judgecal.config import parse_config
    from judgecal.methods.prism import load_items

    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps({"id": f"i{k}", "doc": f"d{k // 4}", "text": f"t{k}", "quality": 1 + k % 4})
                           for k in range(40)))
    cfg = parse_config({"study": {"seed": 3}, "dataset": {
        "name": "generic", "path": str(p), "task": "summary", "target": ["quality"], "target_scale": "1-5",
        "columns": {"item_id": "id", "group_id": "doc", "content": "text"}, "max_groups": 4}})
    items = load_items(cfg)
    assert len(set(items["group_id"].to_pylist())) == 4
    assert items.equals(subset_items(load_generic(str(p), cfg.dataset.columns, TargetSpec(("quality",), 1, 5)),
                                     4, None, seed=3))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("judgecal: warning: ") and "only spans 1-4" in err[0]
    # raters' means half a point or less from the ends: no warning
    p.write_text("\n".join(json.dumps({"id": f"i{k}", "doc": f"d{k // 4}", "text": f"t{k}",
                                       "quality": [4 / 3, 3.0, 14 / 3, 5.0][k % 4]}) for k in range(40)))
    load_items(cfg)
    assert capsys.readouterr().err == ""


def test_groups_of_different_sources_get_one_warning_naming_the_first(tmp_path, capsys):
    """A group column that held the model, not the prompt, ranked stories of different prompts
    against each other without a word (a user's finding): one warning line; grouped by the
    prompt, none."""
    from judgecal.config import parse_config
    from judgecal.methods.prism import load_items

    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps({"id": f"i{k}", "model": f"m{k % 3}", "prompt_id": f"p{k // 3}",
                                       "prompt": f"Write about {k // 3}.", "text": f"t{k}", "quality": 1 + k % 5})
                           for k in range(30)))

    def config(group):
        return parse_config({"dataset": {"name": "generic", "path": str(p), "task": "story", "target": ["quality"],
                                         "target_scale": "1-5", "columns": {"item_id": "id", "group_id": group,
                                                                            "source": "prompt", "content": "text"}}})
    load_items(config("model"))
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"judgecal: warning: {p}: 3 of 3 groups hold items with different source texts (first: group "
                   "'m0', 10 sources); items are ranked within a group, one question, article or prompt: check "
                   "[dataset].columns.group_id"]
    load_items(config("prompt_id"))
    assert capsys.readouterr().err == ""


def test_a_response_text_in_two_groups_gets_one_warning(tmp_path, capsys):
    """A story filed under two prompt ids passed without a word; folds split by group, so its
    copy may be fitted on and tested on (a user's finding). Short answers may repeat."""
    from judgecal.config import parse_config
    from judgecal.methods.prism import load_items

    p = tmp_path / "items.jsonl"
    rows = [{"id": f"i{k}", "doc": f"d{k // 3}", "text": f"A story of some length, number {k}. " * 8,
             "quality": 1 + k % 5} for k in range(12)]
    rows[7]["text"] = rows[2]["text"] = rows[1]["text"]  # i1, i2 in group d0; i7 in d2
    rows[8]["text"] = rows[11]["text"] = "I'm sorry, but I can't help with that request."  # short: repeats by right
    p.write_text("\n".join(json.dumps(r) for r in rows))
    load_items(parse_config({"dataset": {"name": "generic", "path": str(p), "task": "summary", "target": ["quality"],
                                         "target_scale": "1-5",
                                         "columns": {"item_id": "id", "group_id": "doc", "content": "text"}}}))
    assert capsys.readouterr().err.strip().splitlines() == [
        f"judgecal: warning: {p}: 1 response text is an item of several groups (first: items 'i1', 'i7' in groups "
        "'d0', 'd2'); folds split by group, so a copy may be fitted on and tested on"]  # not i2: its group is d0


def _dialogue_warnings(tmp_path, capsys, rows, group="context_id", target=("overall",)):
    from judgecal.config import parse_config
    from judgecal.methods.prism import load_items

    p = tmp_path / "dialogue.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    load_items(parse_config({"dataset": {"name": "generic", "path": str(p), "task": "dialogue",
                                         "target": list(target), "target_scale": "1-5",
                                         "columns": {"item_id": "id", "group_id": group, "source": "context",
                                                     "content": "response"}}}))
    return p, capsys.readouterr().err.strip().splitlines()


def _dialogue_rows(contexts=8, systems=4):
    return [{"id": f"r{c}_{k}", "context_id": f"c{c}", "context": f"A: hello, topic {c}.\nB: \"sure\"",
             "response": f"reply {k} to {c}", "overall": 1 + (c + k) % 5, "engaging": 1 + k % 3}
            for c in range(contexts) for k in range(systems)]


def test_a_source_in_several_groups_gets_one_warning(tmp_path, capsys):
    """Dialogue contexts copied under two ids, and items grouped by their own id, passed
    without a word: held-out groups shared a context with the groups fitted on (a user's
    findings, short responses under the 200-character copy warning)."""
    rows = _dialogue_rows()
    for r in rows[16:]:  # c4..c7 hold c0..c3's contexts and responses
        r["context"] = r["context"].replace(r["context_id"][1:], str(int(r["context_id"][1:]) - 4))
        r["response"] = r["response"].replace(f"to {r['context_id'][1:]}", f"to {int(r['context_id'][1:]) - 4}")
    p, err = _dialogue_warnings(tmp_path, capsys, rows)
    assert err == [f"judgecal: warning: {p}: 4 source texts are in several groups (first: items 'r0_0', 'r4_0' in "
                   "groups 'c0', 'c4'); folds split by group, so a question, article or prompt may be fitted on and "
                   "tested on: group by the source ([dataset].columns.group_id or group_by)"]
    p, err = _dialogue_warnings(tmp_path, capsys, _dialogue_rows(), group="id")
    assert len(err) == 1 and "8 source texts are in several groups (first: items 'r0_0', 'r0_1' in groups 'r0_0', " \
        "'r0_1')" in err[0], err
    _, err = _dialogue_warnings(tmp_path, capsys, _dialogue_rows())
    assert err == []
    # one context in composed and decomposed Unicode (NFC, NFD) was two texts, unsaid (a user's finding)
    rows = _dialogue_rows()
    for r in rows:
        r["context"] = r["context"].replace("hello", "h\u00e9llo")
    for r in rows[16:20]:  # c4 holds c0's context, decomposed
        r["context"] = rows[0]["context"].replace("\u00e9", "e\u0301")
        r["response"] = r["response"].replace("to 4", "to 0")
    _, err = _dialogue_warnings(tmp_path, capsys, rows)
    assert len(err) == 1 and "1 source text is in several groups (first: items 'r0_0', 'r4_0' in groups 'c0', " \
        "'c4')" in err[0], err


def test_the_data_warnings_stay_in_the_results_log_the_table_and_the_report(tmp_path, capfd):
    """A warning said once at collect was lost: the table, results.json and report.html showed
    none of it (a user's finding). Evaluate keeps those of the collected items."""
    from judgecal import cli

    rows = _dialogue_rows(contexts=8)
    rows += [{**r, "id": f"round2_{j}"} for j, r in enumerate(rows[:4])]  # four items again under new ids
    p = tmp_path / "dialogue.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "out"
    toml = generic_study(tmp_path / "d.toml", out, p, 'item_id = "id", group_id = "context_id", source = "context", '
                         'content = "response"', task="dialogue", target="overall")
    # drawn: the warnings are those collect said of the whole file, not worked out again on the
    # sample (where they may vanish or a narrow range appear: a second reader's finding)
    toml.write_text(toml.read_text().replace('task = "dialogue"', 'task = "dialogue"\nmax_groups = 5'))
    assert cli.main(["run", str(toml)]) == 0
    cap = capfd.readouterr()
    warning = ("4 items repeat another item of their group, source and response text alike (first: items 'r0_0', "
               "'round2_0' in group 'c0')")
    assert f"judgecal: warning: {p}: {warning}" in cap.err
    log = json.loads((out / "results.json").read_text())
    assert len(log["results"]["data_warnings"]) == 1 and log["results"]["data_warnings"][0].startswith(warning)
    assert log["results"]["groups"] == 5
    assert f"data warning: {warning}" in cap.out
    assert "data warning: " + warning.replace("'", "&#x27;") in (out / "report.html").read_text()


def test_a_second_round_stacked_under_new_ids_gets_one_warning(tmp_path, capsys):
    """Two annotation rounds concatenated with fresh row ids ran as 1.5x the items, 60 of them
    twice in their group with other labels (a user's finding)."""
    rows = _dialogue_rows()
    again = [{**r, "id": f"round2_{j}", "overall": 1 + r["overall"] % 5} for j, r in enumerate(rows[:6])]
    p, err = _dialogue_warnings(tmp_path, capsys, rows + again)
    assert err == [f"judgecal: warning: {p}: 6 items repeat another item of their group, source and response text "
                   "alike (first: items 'r0_0', 'round2_0' in group 'c0'); labels of two rounds, or of two raters, as "
                   "rows of their own? keep one row per item (average the labels); two systems' identical answers "
                   "need nothing"]


def test_a_few_identical_answers_in_a_group_are_no_warning(tmp_path, capsys):
    """Systems' identical answers ("Paris.") repeat by right: SummEval's 52 identical summaries
    of 1,600 warned as stacked rounds (a second reader's finding); under a tenth, no warning."""
    rows = _dialogue_rows()
    rows[1]["response"] = rows[0]["response"]
    rows[5]["response"] = rows[4]["response"]
    _, err = _dialogue_warnings(tmp_path, capsys, rows)
    assert err == []


def test_two_item_groups_get_one_warning(tmp_path, capsys):
    """4 groups of 2 items printed "+1.000 (all groups equal 1, n = 4)": a within-group Spearman
    of two items is the order of one pair (a user's finding)."""
    p, err = _dialogue_warnings(tmp_path, capsys, _dialogue_rows(contexts=6, systems=2))
    assert err == [f"judgecal: warning: {p}: 6 of 6 groups have 2 items: within such a group Spearman is -1, 0 or +1 "
                   "(the order of one pair), so the table's means move in large steps; more items per group, or more "
                   "groups, say more"]
    # of the items analysed: max_items_per_group = 2 makes pairs of groups of 4 (a second reader's finding)
    from judgecal.config import parse_config
    from judgecal.methods.prism import load_items

    p.write_text("\n".join(json.dumps(r) for r in _dialogue_rows(contexts=6, systems=4)))
    load_items(parse_config({"dataset": {"name": "generic", "path": str(p), "task": "dialogue", "target": ["overall"],
                                         "target_scale": "1-5", "max_items_per_group": 2,
                                         "columns": {"item_id": "id", "group_id": "context_id", "source": "context",
                                                     "content": "response"}}}))
    assert "6 of 6 groups have 2 items" in capsys.readouterr().err


def test_a_narrow_column_of_a_target_of_several_is_named(tmp_path, capsys):
    """A 1-3 column averaged with a 1-5 one on a declared 1-5 scale: the warning said the mean's
    span alone (a user's finding); it names the narrow column."""
    rows = [{**r, "overall": 1 + 4 * (k % 2)} for k, r in enumerate(_dialogue_rows())]
    p, err = _dialogue_warnings(tmp_path, capsys, rows, target=("overall", "engaging"))
    assert err == [f"judgecal: warning: {p}: the target mean(overall, engaging) on [1, 5] only spans 1-3.5 in the "
                   "data; engaging only spans 1-3; check [dataset].target_scale (it must be the scale the scores were "
                   "given on)"], err
    # a 0-100 slider from 1 to 98: no warning (half a point warned); from 10 to 90, one
    rows = [{**r, "overall": [1, 98, 40, 60][k % 4]} for k, r in enumerate(_dialogue_rows())]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    from judgecal.config import parse_config
    from judgecal.methods.prism import load_items

    def slider():
        load_items(parse_config({"dataset": {"name": "generic", "path": str(p), "task": "dialogue",
                                             "target": ["overall"], "target_scale": "0-100",
                                             "columns": {"item_id": "id", "group_id": "context_id",
                                                         "source": "context", "content": "response"}}}))
        return capsys.readouterr().err
    assert slider() == ""
    rows = [{**r, "overall": [10, 90, 40, 60][k % 4]} for k, r in enumerate(_dialogue_rows())]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    assert "the target overall on [0, 100] only spans 10-90 in the data" in slider()
    # every column spans the scale, their mean does not (raters' extremes on other items): no warning
    rows = [{**r, "overall": 1 + 4 * (k % 2), "engaging": 5 - 4 * (k % 2)} for k, r in enumerate(_dialogue_rows())]
    _, err = _dialogue_warnings(tmp_path, capsys, rows, target=("overall", "engaging"))
    assert err == []


@pytest.mark.parametrize("compare", [False, True])
def test_urw_on_generic_pairs_runs_end_to_end(tmp_path, capfd, compare):
    """A generic pairs config (own criteria for one prompt, generated for the other) through the
    CLI with the SIMULATED verifier; ``compare``: criteria are generated for the prompt with
    human ones too, and URW is reported with each on its pairs."""
    from judgecal import cli

    p = tmp_path / "pairs.csv"
    _write_pairs(p, PAIRS, "csv")
    cols = ", ".join(f'{k} = "{v}"' for k, v in PAIR_COLUMNS.items())
    cfg = tmp_path / "u.toml"
    cfg.write_text(f"""[study]
output = "{tmp_path / 'out'}"
method = "urw"
[urw]
calibration_max_responses = 4
evaluation = ["generic"]
evaluation_paths = {{generic = "{p}"}}
evaluation_columns = {{{cols}}}
criteria_per_prompt = 2
samples = 2
bootstrap = 200
compare_criteria = {str(compare).lower()}
[engine]
kind = "simulated"
[collect]
block_rows = 200
""", encoding="utf-8")
    try:
        assert cli.main(["run", str(cfg)]) == 0
    finally:
        import ray

        ray.shutdown()
    captured = capfd.readouterr()
    err = captured.err
    assert "[urw] generic: 1 pair labelled as ties excluded" in err
    log = json.loads((tmp_path / "out" / "urw_results.json").read_text())
    res = log["results"]
    assert res["pairs"] == 3 and log["simulated_judge"]
    # 4 responses of "Name a fruit." x its 2 own criteria; 2 of "Say hello." x 2 generated ones
    assert res["criterion_sources"] == {"human": 3 * 2, "generated": 2 * 2}
    plan = pq.read_table(tmp_path / "out" / "verify.parquet").to_pandas()
    beside = plan[plan["criterion_id"].str.startswith("b")]
    sections = {s["name"]: s for s in res["sections"]}
    if not compare:
        assert beside.empty and "criteria_source" not in sections
        return
    # the 3 responses of "Name a fruit." (2 pairs) also checked against 2 generated criteria
    assert beside["item_id"].nunique() == 3 and beside["criterion_id"].nunique() == 2
    sec = sections["criteria_source"]
    assert [r[0] for r in sec["rows"]] == ["Uniform", "URW"] and sec["data"] == {"pairs": 2, "prompts": 1}
    urw_human = sec["rows"][1][1]["metric"]
    assert urw_human["n"] == 2 and 0 <= urw_human["value"] <= 1
    assert "URW with human against generated criteria" in captured.out


def test_usr_ratings_are_read_on_their_own_scales():
    """USR rates overall on 1-5, engaging, natural and maintains_context on 1-3, understandable
    and uses_knowledge on 0-1: "engaging" was read as 1-5 without a word, and a right
    target_scale refused (a second reader's findings)."""
    from judgecal.config import parse_config
    from judgecal.errors import InputError
    from judgecal.methods.prism import target_spec

    def spec(**dataset):
        t = target_spec(parse_config({"dataset": {"name": "usr", "path": "usr.json", **dataset}}))
        return t.scale_min, t.scale_max

    assert spec() == (1.0, 5.0) and spec(target=["engaging"]) == (1.0, 3.0)
    assert spec(target=["understandable", "uses_knowledge"]) == (0.0, 1.0)
    assert spec(target=["engaging"], target_scale="1-3") == (1.0, 3.0)
    with pytest.raises(InputError, match=r"^\[dataset\]\.target_scale: needed: USR's engaging, overall are rated "
                                         r"on different scales \(overall 1-5, engaging 1-3, "):
        spec(target=["engaging", "overall"])
    with pytest.raises(InputError, match=r"^\[dataset\]\.target: 'Overall' is no USR rating \(known: overall 1-5"):
        spec(target=["Overall"])
    with pytest.raises(InputError, match=r"target_scale: usr's labels are on 1-3, not 1-5"):
        parse_config({"dataset": {"name": "usr", "path": "usr.json", "target": ["engaging"], "target_scale": "1-5"}},
                     "c.toml")
