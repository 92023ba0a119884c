"""Judge diagnostics: sampling as plan columns, repeats that differ, the reliability
statistics on data whose answer is known, and a diagnosed study end to end."""

import json
import subprocess

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import ROOT, judgecal_cmd, write_config
from judgecal.config import StudyConfig, parse_config
from judgecal.datasets import load_dataset, subset_items
from judgecal.diagnostics.base import DIAGNOSTICS, DiagnosticContext, long_responses
from judgecal.errors import InputError
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.report.figures import section_figure
from judgecal.scale import ScoreScale

SCALE = ScoreScale(1, 5)


def _items(n=2):
    return subset_items(load_dataset("summeval"), 1, n)


def test_sampling_settings_are_plan_columns_and_part_of_the_id():
    items, probes = _items(), load_bank("style").probes(["length"])
    greedy = build_plan(items, probes, 2, SCALE, "j")
    sampled = build_plan(items, probes, 2, SCALE, "j", temperature=0.7, seed=5)
    # greedy ids are the ids plans had before sampling was a column (old answers stay valid):
    # pinned from the release before it (commit 4545412, the same call)
    ids = greedy["request_id"].to_pylist()
    assert (ids[0], ids[1], ids[-1], len(ids)) == ("b3d821f8664c5b169044f44b0e77f853", "18e1d6c0bc68b1e7aa5bbcb6e1dbefb1",
                                                  "424638670fc9f6afddc20966558274fa", 12)
    assert not set(greedy["request_id"].to_pylist()) & set(sampled["request_id"].to_pylist())
    assert set(sampled["temperature"].to_pylist()) == {0.7}
    assert sampled["seed"].to_pylist() == [5 + run for run in sampled["run"].to_pylist()]
    # the render stage hands the engine each row's temperature and its run's seed
    rendered = ProbeRenderer(items, probes, SCALE).render_table(sampled.append_column(
        "attempt", pa.array([1] * sampled.num_rows, pa.int32())))
    assert rendered["temperature"].to_pylist() == [0.7] * sampled.num_rows
    assert rendered["seed"].to_pylist() == sampled["seed"].to_pylist()


def test_the_cpu_judge_repeats_differ_when_it_samples_and_repeat_exactly_when_rerun():
    from judgecal.engines import LlamaCppEngineConfig
    from judgecal.pipeline.render import judge_prompts

    items, probes = _items(3), load_bank("style").probes(["length"])[:1]  # the baseline only
    plan = build_plan(items, probes, 4, SCALE, "j", temperature=1.0, seed=0)
    prompts = judge_prompts(ProbeRenderer(items, probes, SCALE), plan)
    eng = LlamaCppEngineConfig().build()
    try:
        first, again = eng.score(prompts, SCALE), eng.score(prompts, SCALE)
        greedy = eng.score(judge_prompts(ProbeRenderer(items, probes, SCALE),
                                         build_plan(items, probes, 4, SCALE, "j")), SCALE)
    finally:
        eng.close()
    runs = pd.DataFrame({"item": plan["item_id"].to_pylist(), "score": [o.score for o in first]})
    assert runs.groupby("item")["score"].nunique().max() > 1  # distinct runs, distinct samples
    assert [o.score for o in again] == [o.score for o in first]  # seeded: a rerun draws the same
    g = pd.DataFrame({"item": plan["item_id"].to_pylist(), "score": [o.score for o in greedy]})
    assert g.groupby("item")["score"].nunique().max() == 1  # greedy: the same answer every run


def _answered(deltas: dict, runs=3, groups=12, per=4, seed=0, neutral_sd=0.1, run_sd=0.2):
    """A fabricated answered table: per property a fixed response ``c`` per item (more: +c,
    less: -c) plus run noise ``run_sd``; neutral clauses move by ``neutral_sd``."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(groups):
        for i in range(per):
            item = f"g{g}i{i}"
            sizes = {a: c * rng.choice([0.5, 1.5]) for a, c in deltas.items()}  # the item's own response
            for r in range(runs):
                base = 3.0
                rows.append((item, f"g{g}", "baseline", None, None, None, None, r, base))
                for a, size in sizes.items():
                    for d, sign in (("more", 1), ("less", -1)):
                        rows.append((item, f"g{g}", f"{a}:{d}:standard", a, d, "standard", "property", r,
                                     base + sign * size + rng.normal(0, run_sd)))
                for k in range(2):
                    rows.append((item, f"g{g}", f"neutral:{k}", None, "neutral", None, "neutral", r,
                                 base + rng.normal(0, neutral_sd)))
    df = pd.DataFrame(rows, columns=["item_id", "group_id", "probe_id", "attribute", "direction", "strength",
                                     "family", "run", "expected_score"])
    df["score"] = df["expected_score"]
    df["parse_status"] = "ok"
    return pa.Table.from_pandas(df, preserve_index=False)


def test_an_injection_sits_inside_the_evaluated_content():
    from judgecal.diagnostics.injection import PHRASINGS, injection_probes
    from judgecal.pipeline.render import judge_prompts

    items = _items(1)
    probes = load_bank("style").probes(["length"]) + injection_probes()
    plan = build_plan(items, probes, 1, SCALE, "j")
    prompts = {pid: p for pid, p in zip(plan["probe_id"].to_pylist(), judge_prompts(ProbeRenderer(items, probes, SCALE), plan))}
    content = items["content"][0].as_py()
    injected = prompts["injection:ignore_rubric"].user
    assert f"{content}\n\n{PHRASINGS['ignore_rubric']}" in injected and injected.endswith(PHRASINGS["ignore_rubric"])
    assert prompts["baseline"].user.endswith(content)  # the others are untouched
    assert len(set(plan["request_id"].to_pylist())) == plan.num_rows  # each injection its own request


def test_reliability_statistics_on_data_with_a_known_answer():
    cfg = parse_config({"study": {"seed": 1}, "engine": {"kind": "simulated"},
                        "diagnostics": {"run": ["reliability"], "bootstrap": 300}}, runtime=False)
    ans = _answered({"length": 1.0, "tone": 0.0})
    sections = {s.name: s for s in DIAGNOSTICS.lookup("reliability").run(DiagnosticContext(cfg, ans))}
    rel = {r[0]: r for r in sections["reliability"].rows}
    # a unit that moves the score by +-c with run noise 0.2: RMS sqrt(1.25 c^2 + 0.04) (sizes 0.5c, 1.5c)
    assert rel["length"][2] == pytest.approx(np.sqrt(1.25 + 0.04), rel=0.1)
    assert rel["tone"][2] == pytest.approx(0.2, rel=0.15)  # run noise only
    assert rel["neutral clauses (reference)"][2] == pytest.approx(0.1, rel=0.15)
    assert rel["length"][3].low > 5 and rel["tone"][3].high > 1  # probe / neutral RMS
    assert rel["repeat: the same probe response"][2] == pytest.approx(0.2, rel=0.15)
    # across-run correlation: reproducible share 1.25 / (1.25 + 0.04) for length, about 0 for tone
    assert rel["length"][6].value == pytest.approx(1.25 / 1.29, abs=0.03)
    assert abs(rel["tone"][6].value) < 0.15 and rel["tone"][6].low < 0 < rel["tone"][6].high
    # tone's runs agree on nothing (a product just below 0): said, not printed +0.000 (a user's finding)
    assert rel["tone"][5] == "none (mean Δ_r·Δ_r' < 0: nothing reproducible across runs)"
    assert rel["length"][5] == pytest.approx(np.sqrt(1.25), rel=0.1)
    assert all(m.n == 12 for r in sections["reliability"].rows for m in r if hasattr(m, "n"))
    # the expected reading keeps an expected score whose sample did not parse (as the fit does)
    unparsed = ans.to_pandas().assign(parse_status="unparsed", score=np.nan)
    long = long_responses(pa.Table.from_pandas(unparsed, preserve_index=False), "expected")
    assert long["value"].notna().all()
    # more and less move in opposite directions by the same size: all directional
    comp = sections["probe_components"].rows[0]
    assert comp[0] == "standard" and comp[3].value > 0.9


def test_reliability_with_one_run_says_there_are_no_repeats():
    cfg = parse_config({"engine": {"kind": "simulated"}, "diagnostics": {"run": ["reliability"], "bootstrap": 200}},
                       runtime=False)
    sec = DIAGNOSTICS.lookup("reliability").run(DiagnosticContext(cfg, _answered({"length": 1.0}, runs=1)))[0]
    rows = {r[0]: r for r in sec["rows"]} if isinstance(sec, dict) else {r[0]: r for r in sec.rows}
    assert rows["length"][4] is None and rows["length"][6] is None
    assert "repeat: the same prompt's score" not in rows


def test_long_responses_read_the_sample_when_the_study_samples():
    ans = _answered({"length": 1.0}, runs=2)
    long = long_responses(ans, "parsed")
    assert long.loc[long["probe_id"] == "baseline", "delta"].abs().max() == 0
    assert DiagnosticContext(parse_config({"engine": {"kind": "simulated"}, "pool": {"temperature": 0.5}},
                                          runtime=False), ans).reading == "parsed"
    chosen = parse_config({"engine": {"kind": "simulated"}, "pool": {"temperature": 0.5},
                           "diagnostics": {"run": ["reliability"], "reading": "expected"}}, runtime=False)
    assert DiagnosticContext(chosen, ans).reading == "expected"


@pytest.mark.parametrize("data, message", [
    ({"pool": {"temperature": -0.1}}, "[pool].temperature: must lie in [0, 2], not -0.1"),
    ({"pool": {"temperature": float("nan")}}, "[pool].temperature: must lie in [0, 2], not nan"),
    ({"pool": {"seed": -1}}, "[pool].seed: must be at least 0"),
    ({"diagnostics": {"run": ["nope"]}}, "[diagnostics].run: unknown diagnostic 'nope' (known: injection, order, reliability, resolution)"),
    ({"diagnostics": {"run": ["order"], "orders": 9}}, "[diagnostics].orders: must lie in 2-8"),
    ({"diagnostics": {"run": ["order"], "orders": 1}}, "[diagnostics].orders: must be at least 2"),
    ({"diagnostics": {"run": ["order"], "orders": 2.5}}, "[diagnostics].orders: must be an int, not 2.5"),
    ({"diagnostics": {"run": ["order"], "pairs_per_group": 0}}, "[diagnostics].pairs_per_group: must be at least 1"),
    ({"diagnostics": {"run": ["resolution"], "scales": ["1-5", "one to ten"]}}, "[diagnostics].scales[1]: 'one to ten' does not parse"),
    ({"diagnostics": {"run": ["reliability", "reliability"]}}, "'reliability' is named twice"),
    ({"diagnostics": {"bootstrap": 500}}, "[diagnostics].run: names no diagnostic"),
    ({"diagnostics": {"run": ["reliability"], "bootstrap": 10}}, "[diagnostics].bootstrap: must be at least 100"),
    ({"diagnostics": {"run": ["reliability"], "reading": "sampled"}}, "[diagnostics].reading: unknown reading 'sampled'"),
    ({"diagnostics": {"run": ["reliability"]}, "pool": {"bank": "NO_NEUTRAL"}}, "has none (use a bank with [neutral]"),
    ({"method": "urw", "diagnostics": {"run": ["reliability"]}}, "[diagnostics]: not read by a urw study"),
])
def test_diagnostics_and_sampling_config_mistakes_are_one_line(tmp_path, data, message):
    from importlib import resources

    quality = resources.files("judgecal.probes").joinpath("banks", "quality.toml").read_text()
    bank = tmp_path / "bank.toml"
    bank.write_text(quality.split("[neutral]")[0])  # a bank of one's own without neutral clauses
    if data.get("pool", {}).get("bank") == "NO_NEUTRAL":
        data = {**data, "pool": {"bank": str(bank)}}
    data = {"engine": {"kind": "simulated"}, **data}
    if "method" in data:
        data["study"] = {"method": data.pop("method")}
    with pytest.raises(InputError) as e:
        parse_config(data, "c.toml", runtime=False)
    assert message in str(e.value)


def test_an_engine_that_cannot_sample_is_refused_before_anything_runs(tmp_path):
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{tmp_path / "o"}"\n[dataset]\nname = "summeval"\n[pool]\ntemperature = 0.7\n'
                       '[engine]\nkind = "null"\n')
    r = subprocess.run(judgecal_cmd("run", str(cfg)), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "engine 'null' does not offer sampling" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_a_diagnosed_study_plans_collects_and_reports_its_diagnostics(tmp_path):
    out = tmp_path / "d"
    cfg = write_config(tmp_path / "d.toml", f"""
[study]
output = "{out}"
[dataset]
name = "summeval"
max_groups = 8
max_items_per_group = 4
[pool]
attributes = ["length", "hedging", "detail", "formality"]
temperature = 0.7
[diagnostics]
run = ["reliability", "injection"]
bootstrap = 200
joint_pairs = 2
[engine]
kind = "simulated"
[fit]
folds = 3
inner_folds = 3
fold_seeds = 1
bootstrap = 200
[design]
subsets = false
""")
    r = subprocess.run(judgecal_cmd("run", str(cfg)), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    plan = pq.read_table(out / "requests.parquet").to_pandas()
    assert sorted(plan["run"].unique()) == [0, 1]  # reliability needs repeats: 2 runs
    # and says so, beside [pool] runs = 1 (the plan doubled without a word: a user's finding)
    assert "x 2 runs ([pool] runs = 1, raised: a diagnostic needs repeats)" in r.stderr
    assert {"neutral", "joint"} <= set(plan["family"].dropna())
    assert set(plan["temperature"]) == {0.7}
    log = json.loads((out / "results.json").read_text())
    sections = {s["name"]: s for s in log["results"]["sections"]}
    assert {"reliability", "probe_components", "joint_probes", "injection"} <= set(sections)
    assert not any(c.startswith(("joint:", "neutral:", "injection:")) for c in log["results"]["features"])
    inj = {row[0]: row for row in sections["injection"]["rows"]}
    assert list(inj)[:3] == ["ignore_rubric", "evaluator_note", "system_override"]
    shift = inj["ignore_rubric"][1]["metric"]  # the simulated judge's gullibility: +0.5 (before rounding)
    assert 0.2 < shift["value"] < 0.8 and shift["low"] > 0 and shift["n"] == 8
    assert "property probes (reference)" in inj
    units = [row[0] for row in sections["reliability"]["rows"]]  # diagnostics' own probes are not units
    assert units[:units.index("all probes (pooled)")] == ["length", "hedging", "detail", "formality"]
    joint = {row[0]: row for row in sections["joint_probes"]["rows"]}
    assert list(joint) == ["length + hedging", "detail + formality", "all pairs (pooled)",
                           "additive reference: √2 × neutral RMS"]
    neutral = {row[0]: row for row in sections["reliability"]["rows"]}["neutral clauses (reference)"][2]
    assert joint["additive reference: √2 × neutral RMS"][3] == pytest.approx(np.sqrt(2) * neutral)
    assert joint["all pairs (pooled)"][3]["metric"]["n"] == 8
    # the figure's caption promises the additive reference dashed in the interaction panel (it was
    # missing: the row has no interval, so the generic plot left it out without a line)
    panel = next(ax for ax in section_figure(sections["joint_probes"], log).axes
                 if ax.get_xlabel() == "interaction RMS [95% CI]")
    dashed = [line.get_xdata()[0] for line in panel.lines if line.get_linestyle() == "--"]
    assert dashed == [pytest.approx(np.sqrt(2) * neutral)]
    for title in ("Probe reliability", "Joint instructions"):
        assert title in r.stdout and title in (out / "report.html").read_text()
    # every section says what answered it, in the text, the HTML and its figure (only the methods
    # table did: a section copied on its own read as a real judge's, a user's finding)
    assert r.stdout.count(" (SIMULATED judge) ==") == len(sections)
    assert (out / "report.html").read_text().count(" (SIMULATED judge)</h2>") == len(sections)
    assert section_figure(sections["injection"], log)._suptitle.get_text().endswith("(SIMULATED judge)")
    assert "sampled at temperature 0.7" in sections["reliability"]["note"]
    # evaluate again: the same sections from the same answers (nothing re-collected)
    r2 = subprocess.run(judgecal_cmd("evaluate", str(out)), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stderr
    again = {s["name"]: s for s in json.loads((out / "results.json").read_text())["results"]["sections"]}
    assert again["reliability"] == sections["reliability"]


def test_study_config_has_no_diagnostics_by_default():
    assert StudyConfig().diagnostics.run == ()
