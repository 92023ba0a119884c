import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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
