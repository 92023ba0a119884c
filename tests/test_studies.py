"""Studies: pool and design, the expanded bank, screening against neutral controls, the
exploration / confirmation split, the subset engine against one PRISM fit, and profiles."""

import json
import re
import subprocess
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from judgecal.calibrate.prism import DEFAULT_GAMMAS, PRISM
from judgecal.evaluate.crossfit import crossfit_predict
from judgecal.evaluate.metrics import within_group
from judgecal.evaluate.prism_eval import evaluate_prism
from judgecal.calibrate.features import FeatureTable
from judgecal.probes import load_bank
from judgecal.studies.design import split_groups
from judgecal.studies.screening import MIN_GROUPS, screen_units
from judgecal.studies.subsets import chunks, enumerate_subsets, prepare, run_local, solve_chunk

from conftest import ROOT, judgecal_cmd, write_config


def synthetic(n_groups=30, per=8, attrs=5, seed=1):
    """A feature table whose baseline carries a bias visible in attribute 0's deltas."""
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"g{i:02d}" for i in range(n_groups)], per)
    n = len(groups)
    y = rng.normal(3, 1, n)
    D = rng.normal(0, 0.3, (n, 2 * attrs))
    s0 = y + rng.normal(0, 1, n) + 1.5 * D[:, 0]
    cols = {"baseline": s0}
    for a in range(attrs):
        cols[f"a{a}:more"], cols[f"a{a}:less"] = D[:, 2 * a], D[:, 2 * a + 1]
    return pd.DataFrame(cols), s0, D, y, groups


# -- the subset engine is PRISM ---------------------------------------------------------------
def test_subset_engine_equals_prism_in_crossfit():
    X, s0, D, y, groups = synthetic()
    m = prepare(s0, D, y, groups, [[2 * a, 2 * a + 1] for a in range(5)], DEFAULT_GAMMAS, 5, 4, seeds=(3,))
    for subset in [(0, 1, 2, 3, 4), (1, 3), (2,)]:
        cols = ["baseline"] + [f"a{a}:{d}" for a in subset for d in ("more", "less")]
        pred, fitted = crossfit_predict(lambda: PRISM(gammas=DEFAULT_GAMMAS, cv=4), X[cols], y, groups, 5, seed=3)
        out = solve_chunk(m, [subset])
        assert out["spearman"][0] == pytest.approx(within_group(pred, y, groups).mean, abs=1e-12)
        assert list(m.gammas[out["chosen"][0]]) == [e.gamma_ for e in fitted]
    # and the gain is the cross-fitted table's difference to Vanilla (one fold assignment)
    feats = FeatureTable(X.assign(group_id=groups, target=y, baseline_other=s0), list(X.columns[1:]), 0, 0)
    results, _ = evaluate_prism(feats, DEFAULT_GAMMAS, "paired", 5, 4, 100, 3, 1)
    prism = next(r for r in results if r.method == "PRISM")
    assert solve_chunk(m, [(0, 1, 2, 3, 4)])["gain"][0] == pytest.approx(prism.diff_vs_vanilla.estimate, abs=1e-12)


def test_subset_engine_equals_prism_where_items_tie():
    """Integer-valued answers (a simulated judge's; a parsed score) give items of one group equal
    features, so PRISM predicts them equal; the engine's moments broke such ties by floating
    noise and its gain differed from the table's (+0.103 against +0.120 on a user's 6 groups,
    and changed when the rows were shuffled). Predictions equal to 10 significant digits rank as ties in
    both (1 of these 30 draws differed by 0.033 without)."""
    for seed in range(30):
        X, s0, D, y, groups = synthetic(n_groups=6, per=5, seed=seed)
        X, y = X.round(0) * 25, np.round(y * 25)  # on a 0-100 target, as the user's
        s0, D = X["baseline"].to_numpy(), X.drop(columns="baseline").to_numpy()
        m = prepare(s0, D, y, groups, [[2 * a, 2 * a + 1] for a in range(5)], DEFAULT_GAMMAS, 3, 2, seeds=(0,))
        pred, _ = crossfit_predict(lambda: PRISM(gammas=DEFAULT_GAMMAS, cv=2), X, y, groups, 3, seed=0)
        engine = solve_chunk(m, [(0, 1, 2, 3, 4)])["spearman"][0]
        assert engine == pytest.approx(within_group(pred, y, groups).mean, abs=1e-12), seed


def test_subset_engine_equals_prism_at_no_penalty_on_a_zero_and_a_repeated_column():
    """With 0 in the grid, a unit the judge never moved on (a zero column) and a column twice
    gave other numbers in the subset engine than in PRISM's fit (a second reader's finding):
    both drop the same negligible directions (the minimum-norm solution)."""
    X, s0, D, y, groups = synthetic(attrs=3)
    D = D.copy()
    D[:, 2:4] = 0.0  # a1 never moves the score
    D[:, 5] = D[:, 4]  # a2:less repeats a2:more
    X = X.assign(**{"a1:more": 0.0, "a1:less": 0.0, "a2:less": D[:, 4]})
    grid = (0.0, 0.01, 1.0)
    m = prepare(s0, D, y, groups, [[2 * a, 2 * a + 1] for a in range(3)], grid, 5, 4, seeds=(3,))
    for subset in [(0, 1, 2), (1, 2), (1,)]:
        cols = ["baseline"] + [f"a{a}:{d}" for a in subset for d in ("more", "less")]
        pred, fitted = crossfit_predict(lambda: PRISM(gammas=grid, cv=4), X[cols], y, groups, 5, seed=3)
        out = solve_chunk(m, [subset])
        assert out["spearman"][0] == pytest.approx(within_group(pred, y, groups).mean, abs=1e-9), subset
        assert list(m.gammas[out["chosen"][0]]) == [e.gamma_ for e in fitted], subset


def test_subset_enumeration_is_every_subset_or_a_stated_sample():
    every = enumerate_subsets(5)
    assert sum(len(v) for v in every.values()) == 2**5 - 1
    sampled = enumerate_subsets(30, per_size=20, seed=4)
    assert all(len(v) == min(20, __import__("math").comb(30, k)) for k, v in sampled.items())
    assert sampled == enumerate_subsets(30, per_size=20, seed=4)  # seeded
    assert all(len(set(v)) == len(v) for v in sampled.values())  # no repeats


def test_chunking_does_not_change_a_number():
    _, s0, D, y, groups = synthetic(n_groups=20, attrs=4)
    m = prepare(s0, D, y, groups, [[2 * a, 2 * a + 1] for a in range(4)], DEFAULT_GAMMAS, 5, 4)
    by_size = enumerate_subsets(4)
    whole = run_local(m, chunks(by_size))
    small = run_local(m, chunks(by_size, size=3))
    gains = lambda rs: np.concatenate([r["gain"] for r in rs])  # noqa: E731
    assert np.abs(gains(whole) - gains(small)).max() <= 1e-12


# -- screening ----------------------------------------------------------------------------------
@pytest.mark.parametrize("n_groups, most", [(14, 0.06), (MIN_GROUPS, 0.07)])
def test_screening_null_passes_at_most_about_the_nominal_rate(n_groups, most):
    """A unit that moves the score no more than the neutral clauses passes (lower bound > 1)
    rarely: at 14 groups of 5 items, about 2.5% of draws for a 95% interval; at the fewest
    groups screening accepts, 4.2% in 1000 draws (at 4, which it accepted, 9.3%: a second
    reader's finding)."""
    rng = np.random.default_rng(0)
    passes, sims, n = 0, 300, n_groups * 5
    for _ in range(sims):
        groups = np.repeat(np.arange(n_groups), 5)
        doc = rng.normal(0, 0.05, n_groups)[groups]  # documents differ in how much any rewording moves them
        frame = pd.DataFrame({"group_id": groups.astype(str),
                              **{f"n{i}": doc + rng.normal(0, 0.05, n) for i in range(6)},
                              "u:more": doc + rng.normal(0, 0.05, n), "u:less": doc + rng.normal(0, 0.05, n)})
        res = screen_units(frame, {"u": ["u:more", "u:less"]}, [f"n{i}" for i in range(6)], n_resamples=400,
                           seed=int(rng.integers(1 << 30)))
        passes += int(res.passed[0])
    assert passes / sims <= most, passes


def test_screening_says_how_much_of_a_units_movement_varies_within_groups():
    """A clause that shifts every score alike (a more lenient judge) passes on the shift, which a
    correction ranked within groups cannot use (a second reader's finding): the section's share
    within groups tells it from a unit that ranks."""
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(10), 5)
    frame = pd.DataFrame({"group_id": groups.astype(str), **{f"n{i}": rng.normal(0, 0.05, 50) for i in range(6)},
                          "shift": np.full(50, 0.6), "ranks:more": rng.normal(0, 0.3, 50),
                          "ranks:less": rng.normal(0, 0.3, 50)})
    res = screen_units(frame, {"shift": ["shift"], "ranks": ["ranks:more", "ranks:less"]},
                       [f"n{i}" for i in range(6)])
    assert res.passed.all()  # both move the score more than the controls
    assert res.within_share[0] < 1e-12 and res.within_share[1] > 0.6
    one_each = frame.assign(group_id=[f"i{k}" for k in range(50)])  # evaluated over items: around their mean
    assert screen_units(one_each, {"shift": ["shift"]}, [f"n{i}" for i in range(6)]).within_share[0] < 1e-12


def test_screening_passes_a_unit_that_moves_the_score():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(14), 5).astype(str)
    frame = pd.DataFrame({"group_id": groups, **{f"n{i}": rng.normal(0, 0.05, 70) for i in range(6)},
                          "u:more": rng.normal(0, 0.3, 70), "u:less": rng.normal(0, 0.3, 70)})
    res = screen_units(frame, {"u": ["u:more", "u:less"]}, [f"n{i}" for i in range(6)])
    assert res.passed[0] and res.low[0] > 3


def test_split_is_seeded_disjoint_and_covers_every_group():
    groups = [f"d{i}" for i in range(20)] * 3
    a, b = split_groups(groups, 0.3, seed=5)
    assert len(b) == 6 and not set(a) & set(b) and set(a) | set(b) == set(groups)
    assert (a == split_groups(list(reversed(groups)), 0.3, seed=5)[0]).all()  # not the row order


# -- the expanded bank --------------------------------------------------------------------------
def test_expanded_bank_has_the_families_it_promises():
    bank = load_bank("expanded")
    families = Counter(u.family for u in bank.units)
    assert len(bank.attributes) >= 50 and families["context"] >= 20
    assert families["role"] >= 8 and families["focus"] >= 5 and families["stakes"] >= 4 and len(bank.neutral) >= 5
    for task in ("summary", "story", "dialogue"):
        probes = bank.probes(strengths=("slight", "standard", "strong"), neutral=True, oneside=True, task=task)
        ids = [p.probe_id for p in probes]
        assert len(ids) == len(set(ids))
        assert {p.family for p in probes} == {None, "property", "context", "role", "focus", "stakes", "neutral"}
    with pytest.raises(Exception, match="does not fit task"):
        bank.probes(["suspense"], task="summary")


# -- pool and design end to end ------------------------------------------------------------------
def _cli(*args):
    return subprocess.run(judgecal_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "RAY_AUTH_MODE": "disabled"})


def _cli_script(script, *args):
    return subprocess.run([__import__("sys").executable, script, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**__import__("os").environ, "RAY_AUTH_MODE": "disabled"})


POOL = """
[study]
output = "{out}"
[dataset]
name = "hanna"
max_groups = 14
max_items_per_group = 5
[pool]
bank = "expanded"
attributes = ["length", "suspense", "humour", "imagery"]
families = ["role"]
neutral = true
criteria = true
[engine]
kind = "simulated"
ignores = ["humour", "role:teacher"]
[fit]
folds = 3
inner_folds = 3
bootstrap = 200
fold_seeds = 2
[tune]
mode = "local"
"""


def test_a_pool_study_screens_confirms_and_a_design_change_never_recollects(tmp_path):
    out = tmp_path / "pool"
    cfg = write_config(tmp_path / "pool.toml", POOL.format(out=out))
    r = _cli("run", str(cfg))
    assert r.returncode == 0, r.stderr
    log = json.loads((out / "results.json").read_text())
    sections = {s["name"]: s for s in log["results"]["sections"]}
    assert {"screening", "confirmation", "subsets", "omission", "penalty", "profile"} <= set(sections)
    passed = set(sections["screening"]["data"]["passed"])
    assert {"length", "suspense", "imagery"} <= passed and "humour" not in passed and "role:teacher" not in passed
    conf = sections["confirmation"]
    assert len(conf["data"]["confirmation_groups"]) == 4  # 30% of 14
    assert not set(conf["data"]["confirmation_groups"]) & set(conf["data"]["exploration_groups"])
    prism = next(row for row in conf["rows"] if row[0] == "PRISM")
    assert prism[1]["metric"]["n"] == 4 and prism[2]["metric"]["low"] is not None
    # the baselines sit beside PRISM in both tables, as PRISM's Table 2
    assert [row[0] for row in conf["rows"]][:4] == ["Vanilla", "G-Eval", "SAJA (rubric ridge)", "PRISM"]
    table = [r["method"] for r in log["results"]["methods"]]
    assert {"G-Eval", "SAJA (rubric ridge)", "PRISM", "alpha-PRISM"} <= set(table)
    kept = len(log["results"]["design"]["fitted"])  # probe columns, not the representation's ("16" for half too)
    assert f"screened: the fitted rows use the {kept} probe columns screening kept (paired representation built " \
           "from them)" in r.stdout
    assert "criterion:coherence" not in log["results"]["design"]["fitted"]
    assert log["results"]["groups"] == 10  # the cross-fitted table sees the exploration groups only
    ties = log["results"]["vanilla_ties"]  # the table's items that Vanilla ties in their group, said when any
    assert isinstance(ties, int) and ("Vanilla ties: " in r.stdout) == (ties > 0)
    assert all(c.split(":")[0] not in ("neutral",) for c in log["results"]["design"]["fitted"])
    assert "Screening against neutral controls" in r.stdout and "Subset curve" in r.stdout
    # profiles side by side (here the study and a copy of its log evaluated at another time:
    # every column, both sides equal); one log given twice is refused
    again = tmp_path / "again.json"
    log2 = json.loads((out / "results.json").read_text())
    log2["stats"]["timing"]["evaluate"] = -1.0
    again.write_text(json.dumps(log2))
    cmp_ = _cli("compare", str(out), str(again))
    assert cmp_.returncode == 0, cmp_.stderr
    lines = [ln for ln in cmp_.stdout.splitlines()[2:] if ln and not ln.startswith(("cells", "each study"))]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines}
    assert set(sections["profile"]["data"]["columns"]) <= set(rows)
    head = cmp_.stdout.splitlines()[0]  # one study twice: its columns told apart by what was given (a user's finding)
    assert f"[{out}]" in head and f"[{again}]" in head, head
    n_cols = len(sections["profile"]["data"]["columns"])
    assert f": dataset hanna, {n_cols} columns" in cmp_.stdout  # what each share is normalised over
    twice = _cli("compare", str(out), str(out / "results.json"))
    assert twice.returncode == 2 and "is the same results log as" in twice.stderr
    assert all(cells[:2] == cells[2:4] for c, cells in rows.items() if c in sections["profile"]["data"]["columns"])
    lonely = _cli("compare", str(out))
    assert lonely.returncode == 2 and "give two or more" in lonely.stderr
    # the same grids as Ray Tune trials: the same numbers, bit for bit
    r_ray = _cli("evaluate", str(out), "--set", 'tune.mode="ray"')
    assert r_ray.returncode == 0, r_ray.stderr
    ray_sections = {s["name"]: s for s in json.loads((out / "results.json").read_text())["results"]["sections"]}
    for name in ("subsets", "omission", "penalty"):
        assert ray_sections[name]["rows"] == sections[name]["rows"], name
    assert list((out / "tune").iterdir())  # the trials' results sit in the study's folder
    plan_mtime = (out / "requests.parquet").stat().st_mtime_ns
    parts = sorted(p.name for p in (out / "responses").iterdir())
    # a design change: evaluate again with fewer units; nothing is planned or collected
    r2 = _cli("evaluate", str(out), "--set", 'design.attributes=["length", "imagery"]', "--set", "design.families=[]")
    assert r2.returncode == 0, r2.stderr
    assert (out / "requests.parquet").stat().st_mtime_ns == plan_mtime
    assert sorted(p.name for p in (out / "responses").iterdir()) == parts
    log2 = json.loads((out / "results.json").read_text())
    assert set(log2["results"]["design"]["columns"]) == {"length:more", "length:less", "imagery:more", "imagery:less"}
    # another share at evaluate is checked as collect checks it (it gave a table of "too few
    # groups" cells where show refused it: a user's finding)
    r3 = _cli("evaluate", str(out), "--set", "design.confirmation=0.1")
    assert r3.returncode == 2 and len(r3.stderr.strip().splitlines()) == 1, r3.stderr
    assert "--set design.confirmation: 0.1 holds out 1 of 14 groups" in r3.stderr, r3.stderr
    # a folder whose split is made is evaluated under the share it was collected with, even one
    # collect would refuse now (a folder an older judgecal collected with 1 group held out was
    # refused at evaluate: a second reader's finding); its confirmation cells say why they have
    # no interval
    study = json.loads((out / "study.json").read_text())
    study["config"]["design"]["confirmation"] = 0.1
    (out / "study.json").write_text(json.dumps(study))
    r3 = _cli("evaluate", str(out))
    assert r3.returncode == 0, r3.stderr
    conf3 = next(s for s in json.loads((out / "results.json").read_text())["results"]["sections"]
                 if s["name"] == "confirmation")
    assert len(conf3["data"]["confirmation_groups"]) == 1 and "too few groups" in json.dumps(conf3["rows"])


@pytest.mark.parametrize("setting, message", [  # the flag that gave the field is named (not the config file)
    ('design.attributes=["loudness"]', "--set design.attributes: 'loudness' is not in the pool"),
    ('design.families=["stakes"]', "--set design.families: 'stakes' is not in the pool"),
    ("pool.neutral=false", "--set design.screen: screening compares units with the neutral controls"),
    ('pool.families=["weather"]', "--set pool.families: bank expanded has no 'weather' units"),
    ("design.confirmation=1.5", "--set design.confirmation: must lie in [0, 1)"),
])
def test_a_design_that_asks_for_what_the_pool_lacks_is_one_line(tmp_path, setting, message):
    out = tmp_path / "bad"
    cfg = write_config(tmp_path / "pool.toml", POOL.format(out=out))
    extra = ["--set", "design.screen=true"] if setting.startswith("pool.neutral") else []
    r = _cli("show", str(cfg), "--set", setting, *extra)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()


def test_rubric_ridge_is_ridge_on_the_criterion_ratings():
    from sklearn.linear_model import Ridge

    from judgecal.calibrate.baselines import RubricRidge, geval

    rng = np.random.default_rng(2)
    n = 60
    base = rng.normal(3, 1, n)
    R = base[:, None] + rng.normal(0, 0.5, (n, 3))
    y = R @ [0.5, 0.2, -0.1] + rng.normal(0, 0.3, n)
    X = pd.DataFrame({"baseline": base, **{f"criterion:c{j}": R[:, j] - base for j in range(3)}})
    crit = [f"criterion:c{j}" for j in range(3)]
    est = RubricRidge(crit, gammas=[0.1]).fit(X, y)
    Rc = R - R.mean(0)
    ref = Ridge(alpha=n * 0.1 * np.mean(Rc**2)).fit(R, y)
    assert np.allclose(est.coef_, ref.coef_) and np.isclose(est.intercept_, ref.intercept_)
    assert np.allclose(geval(X, crit), R.mean(1))
    # no penalty on a criterion given twice: the minimum-norm solution, as lstsq (it gave +-2.8e14)
    twice = X.assign(**{"criterion:c3": X["criterion:c0"]})
    est0 = RubricRidge([*crit, "criterion:c3"], gammas=[0.0]).fit(twice, y)
    R4 = np.column_stack([R, R[:, 0]])
    want = np.linalg.lstsq(R4 - R4.mean(0), y - y.mean(), rcond=None)[0]
    assert np.allclose(est0.coef_, want) and est0.coef_[0] == pytest.approx(est0.coef_[3])


def test_urw_template_sweep_at_all_templates_is_the_urw_row(tmp_path):
    from judgecal.config import demo_config_path

    out = tmp_path / "urw"
    r = _cli("run", demo_config_path("urw_demo"), "--set", "engine.kind=simulated", "--set", f'study.output="{out}"')
    assert r.returncode == 0, r.stderr
    log = json.loads((out / "urw_results.json").read_text())
    urw = next(m for m in log["results"]["methods"] if m["method"] == "URW")
    sweep = next(s for s in log["results"]["sections"] if s["name"] == "template_count")
    n_templates = len(log["results"]["templates"])
    assert [row[0] for row in sweep["rows"]] == list(range(1, n_templates + 1))
    assert [row[1] for row in sweep["rows"]] == [__import__("math").comb(n_templates, k) for k in range(1, n_templates + 1)]
    assert sweep["rows"][-1][2]["metric"]["value"] == pytest.approx(urw["all"]["accuracy"], abs=1e-12)
    assert "URW accuracy against the number of templates" in r.stdout
    # n beside the interval says what it resampled: pairs in prompt clusters, as the main table (a user's finding)
    m = sweep["rows"][-1][2]["metric"]
    assert (m["n"], m["clusters"]) == (urw["all"]["pairs"], urw["all"]["prompts"])
    assert f"n={m['n']} in {m['clusters']} clusters" in r.stdout
    # the interval read as too wide for a spread over subsets (a stranger's finding): the note says what it is
    assert "the interval is how much this pair sample could move the mean, not the spread over subsets" in sweep["note"]
    # the calibrations over template subsets as Ray Tune trials: the same section, bit for bit
    r_ray = _cli("evaluate", str(out), "--set", 'tune.mode="ray"')
    assert r_ray.returncode == 0, r_ray.stderr
    ray_log = json.loads((out / "urw_results.json").read_text())
    assert next(s for s in ray_log["results"]["sections"] if s["name"] == "template_count") == sweep
    assert [p.name for p in (out / "tune").iterdir()][0].startswith("templates-")


def two_attribute_study(out, items: int, design: str = "") -> str:
    """A small simulated study of a two-attribute pool (6 groups, one fold assignment), locally."""
    return f"""
[study]
output = "{out}"
[dataset]
max_groups = 6
max_items_per_group = {items}
[pool]
attributes = ["length", "hedging"]
{"[design]" if design else ""}
{design}
[engine]
kind = "simulated"
[fit]
folds = 3
inner_folds = 2
bootstrap = 100
fold_seeds = 1
[tune]
mode = "local"
"""


def test_a_study_grid_evaluates_variants_without_recollecting(tmp_path):
    out = tmp_path / "g"
    write_config(tmp_path / "s.toml", two_attribute_study(out, items=4))
    grid = write_config(tmp_path / "grid.toml", """
[grid]
studies = ["s.toml"]
[grid.vary]
"fit.representation" = ["paired", "half"]
"design.attributes" = [["length"], ["length", "hedging"]]
""")
    r = subprocess.run([__import__("sys").executable, "jobs/study_grid.py", str(grid)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={**__import__("os").environ, "RAY_AUTH_MODE": "disabled"})
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (out / "grid").glob("*.json"))
    assert len(list((out / "grid").glob("*.predictions.parquet"))) == 4  # beside each log, not over the study's
    assert names == sorted(f"representation-{rep}__attributes-{a}.json" for rep in ("paired", "half")
                           for a in ("length", "length+hedging"))
    half = json.loads((out / "grid" / "representation-half__attributes-length.json").read_text())
    assert half["results"]["representation"] == "half" and half["results"]["design"]["columns"] == [
        "length:more", "length:less"]
    assert json.loads((out / "results.json").read_text())["results"]["representation"] == "paired"  # untouched
    # each variant's log records the collect it read, as the study's own does (compare, report refuse it after)
    from judgecal.methods.runner import collected_stamp
    from judgecal.workspace import Workspace
    assert {json.loads((out / "grid" / n).read_text())["spec"]["collected_plan"] for n in names} == {
        collected_stamp(Workspace(str(out)))}
    assert len(r.stdout.strip().splitlines()) == 2 + 4 + 1 and "cross-fitted" in r.stdout  # header, rule, 4 variants
    # a variant picked from the table is picked on the groups it is scored on: the footer says so
    assert r.stdout.strip().splitlines()[-1].startswith("groups: the n each difference averages. Every variant")
    assert "is picked on them, and its figure is no longer held out" in r.stdout
    # each row says its judge is simulated, and n stands beside every interval (users' findings)
    assert all("(SIMULATED judge)" in line and re.search(r"\] n=\d+", line)
               for line in r.stdout.strip().splitlines()[2:-1]), r.stdout  # the footer aside
    import pyarrow.parquet as pq
    ids = pq.read_table(out / "responses", columns=["request_id"])["request_id"].to_pylist()
    assert ids and len(ids) == len(set(ids))  # collected once: blocks may split it into parts, none asked twice
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (out / "responses").glob("part-*.parquet"))
    r2 = subprocess.run([__import__("sys").executable, "jobs/study_grid.py", str(grid)], cwd=ROOT, capture_output=True,
                        text=True, timeout=600, env={**__import__("os").environ, "RAY_AUTH_MODE": "disabled"})
    assert r2.returncode == 0, r2.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (out / "responses").glob("part-*.parquet")) == before


def test_a_folder_turns_a_part_off_and_a_report_toml_must_match_its_log(tmp_path):
    """Strangers' findings: `evaluate FOLDER --set design.subsets=false` on a study that set
    subsets_per_size was refused with "remove it", which no --set can; a grid variant turning
    the subsets off passed the grid's check, then was refused after the studies before it had
    run; `report study.toml` with a design the log was not evaluated with drew the old log
    without a word."""
    out = tmp_path / "s"
    text = two_attribute_study(out, items=3, design="subsets_per_size = 20")
    toml = write_config(tmp_path / "s.toml", text)
    assert _cli("run", str(toml)).returncode == 0
    r = _cli("evaluate", str(out), "--set", "design.subsets=false")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "[design].subsets_per_size: set to 20, but [design].subsets = false: nothing reads it (kept: the study " \
           "folder's saved config)" in r.stderr
    assert r.stderr.count("[design].subsets_per_size: set to 20") == 1, r.stderr  # each stage read it: 3 times
    assert not any(x["name"] == "subsets" for x in json.loads((out / "results.json").read_text())["results"].get(
        "sections", []))
    r = _cli("report", str(out))  # the user's own evaluate --set is no change of the folder's: no note
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    grid = write_config(tmp_path / "grid.toml",
                        '[grid]\nstudies = ["s.toml"]\n[grid.vary]\n"design.subsets" = [false]\n')
    r = _cli_script("jobs/study_grid.py", str(grid))
    assert r.returncode == 0 and (out / "grid" / "subsets-False.json").is_file(), r.stderr[-2000:]
    changed = write_config(tmp_path / "s2.toml", text.replace("subsets_per_size = 20", "subsets_per_size = 30"))
    r = _cli("report", str(changed))
    assert r.returncode == 0 and (
        f"judgecal: note: {changed}: given with settings other than results.json's evaluate run: "
        "design.subsets_per_size = 30 (evaluated with 20); the report draws that run (`judgecal evaluate "
        f"{changed}`, then report, for these settings)") in r.stderr, r.stderr
    r = _cli("report", str(out))  # the folder: the log as evaluated (the grid's run rewrote it), no note
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    # the text report too, not the HTML path alone (a stranger's finding)
    assert r.stdout.startswith("SIMULATED") and "\nmethod " in r.stdout and r.stdout.rstrip().endswith(
        f"wrote {out / 'report.html'}"), r.stdout[:500]
    # a collect of the changed config records it in study.json; the folder's report then says the
    # log is of other settings (it drew the old log without a word: a stranger's finding)
    assert _cli("collect", str(changed)).returncode == 0
    r = _cli("report", str(out))
    assert r.returncode == 0 and (
        f"judgecal: note: {out}: recorded in study.json with settings other than results.json's evaluate run: "
        "design.subsets_per_size = 30 (evaluated with 20)") in r.stderr, r.stderr


def test_a_grid_file_with_a_misspelt_section_is_refused(tmp_path):
    """`[grids.vary]` was left unread and the grid ran its base study alone (a stranger's finding)."""
    from judgecal.errors import InputError
    from judgecal.studies.grid import read_grid

    write_config(tmp_path / "s.toml", "")
    grid = write_config(tmp_path / "grid.toml", '[grid]\nstudies = ["s.toml"]\n[grids.vary]\n"fit.folds" = [3]\n')
    with pytest.raises(InputError, match=r"grid.toml \[grids\]: unknown section"):
        read_grid(str(grid))


def test_a_grid_that_varies_what_is_collected_is_refused(tmp_path):
    from judgecal.errors import InputError
    from judgecal.studies.grid import read_grid

    write_config(tmp_path / "s.toml", "")
    grid = write_config(tmp_path / "grid.toml", '[grid]\nstudies = ["s.toml"]\n[grid.vary]\n"pool.runs" = [1, 2]\n')
    with pytest.raises(InputError, match="a variant never re-collects"):
        read_grid(str(grid))


@pytest.mark.parametrize("vary, says, why", [
    ('"design.attributes" = [["length"], ["length", "formality"]]',
     "variant attributes-length+formality of s.toml: ", "[design].attributes: 'formality' is not in the pool"),
    ('"fit.reprsentation" = ["half"]', "variant reprsentation-half of s.toml: ", "[fit].reprsentation: "
                                       "unknown field 'reprsentation' of [fit]"),  # no --set flag was typed
    ('"fit.folds" = [3, 20]', "variant folds-20 of s.toml: ", "[fit].folds: the dataset has 12 groups"),
])
def test_a_grid_variant_the_study_cannot_take_is_refused_before_any_study_runs(tmp_path, vary, says, why):
    """A variant that selects what the pool does not collect, or names a misspelt field, stopped
    the grid only when its turn came, after the studies before it had run (a user's finding)."""
    from judgecal.errors import InputError
    from judgecal.studies.grid import run_grid_file

    out = tmp_path / "out"
    write_config(tmp_path / "s.toml", f'[study]\noutput = "{out}"\n[dataset]\nmax_groups = 12\n'
                                      '[pool]\nattributes = ["length"]\n[engine]\nkind = "simulated"\n')
    grid = write_config(tmp_path / "grid.toml", f'[grid]\nstudies = ["s.toml"]\n[grid.vary]\n{vary}\n')
    with pytest.raises(InputError) as e:
        run_grid_file(str(grid), log=lambda m: None)
    assert says in str(e.value) and why in str(e.value) and str(e.value).startswith(f"{grid} [grid.vary] "), \
        str(e.value)
    assert not out.exists()  # refused before the study ran


def test_a_grid_study_whose_data_lacks_a_field_is_named(tmp_path):
    """A field found missing where the items load ("[dataset].target: needed for a generic
    dataset") named no study in a grid (show and run name the config they were given)."""
    from judgecal.errors import InputError
    from judgecal.studies.grid import run_grid_file

    (tmp_path / "items.jsonl").write_text('{"id": "a", "doc": "d", "text": "t", "quality": 3}\n')
    out = tmp_path / "out"
    write_config(tmp_path / "s.toml", f'[study]\noutput = "{out}"\n[dataset]\nname = "generic"\n'
                                      f'path = "{tmp_path / "items.jsonl"}"\ntask = "summary"\n'
                                      'target_scale = [1, 5]\n[engine]\nkind = "simulated"\n')
    grid = write_config(tmp_path / "grid.toml", '[grid]\nstudies = ["s.toml"]\n[grid.vary]\n"fit.folds" = [3]\n')
    with pytest.raises(InputError) as e:
        run_grid_file(str(grid), log=lambda m: None)
    assert str(e.value) == f"{tmp_path / 's.toml'} [dataset].target: needed for a generic dataset (the criteria to " \
                           "average)", str(e.value)
    assert not out.exists()


def test_two_grid_studies_writing_to_one_folder_are_refused(tmp_path):
    from judgecal.errors import InputError
    from judgecal.studies.grid import run_grid_file

    for name in ("a", "b"):
        write_config(tmp_path / f"{name}.toml",
                     f'[study]\noutput = "{tmp_path / "out"}"\n[dataset]\nname = "summeval"\n'
                     '[engine]\nkind = "simulated"\n')
    grid = write_config(tmp_path / "grid.toml", '[grid]\nstudies = ["a.toml", "b.toml"]\n')
    with pytest.raises(InputError, match="write to one output folder"):
        run_grid_file(str(grid), log=lambda m: None)
    assert not (tmp_path / "out").exists()


def test_a_study_listed_twice_in_a_grid_is_refused(tmp_path):
    from judgecal.errors import InputError
    from judgecal.studies.grid import read_grid

    write_config(tmp_path / "s.toml", "")
    grid = write_config(tmp_path / "grid.toml", '[grid]\nstudies = ["s.toml", "./s.toml"]\n')
    with pytest.raises(InputError, match="s.toml is listed twice"):
        read_grid(str(grid))


def test_urw_evaluate_loads_the_saved_calibration_and_never_a_stale_one(tmp_path):
    """evaluate reuses fit's weighters (same numbers as fitting them afresh); one fitted on
    other calibration data is not reused."""
    from judgecal.calibrate.urw import URW

    from judgecal.config import demo_config_path

    out = tmp_path / "urw"
    r = _cli("run", demo_config_path("urw_demo"), "--set", "engine.kind=simulated", "--set", f'study.output="{out}"')
    assert r.returncode == 0, r.stderr
    saved = json.loads((out / "calibration.json").read_text())
    assert set(saved["weighters"]) == {"SCP", "Mondrian-SCP", "URW", "URW‡"} and saved["calibration_data"]
    assert URW.from_dict(saved["weighters"]["URW"]).conformity == "absolute"
    first = json.loads((out / "urw_results.json").read_text())["results"]["methods"]
    # a calibration fitted on other data: tampered scores would change the URW row if it were read
    saved["weighters"]["URW"]["fitted"]["scores_"] = [1.0] * len(saved["weighters"]["URW"]["fitted"]["scores_"])
    saved["calibration_data"] = "something else"
    (out / "calibration.json").write_text(json.dumps(saved))
    assert _cli("evaluate", str(out)).returncode == 0
    assert json.loads((out / "urw_results.json").read_text())["results"]["methods"] == first
    # the same tampered scores with the right data hash are read: the URW row moves
    good = _cli("fit", str(out))
    assert good.returncode == 0
    saved = json.loads((out / "calibration.json").read_text())
    saved["weighters"]["URW"]["fitted"]["scores_"] = [1.0] * len(saved["weighters"]["URW"]["fitted"]["scores_"])
    (out / "calibration.json").write_text(json.dumps(saved))
    assert _cli("evaluate", str(out)).returncode == 0
    after = json.loads((out / "urw_results.json").read_text())["results"]["methods"]
    assert next(m for m in after if m["method"] == "URW") != next(m for m in first if m["method"] == "URW")
    assert next(m for m in after if m["method"] == "SCP") == next(m for m in first if m["method"] == "SCP")
    # another [urw].alpha: the saved weighters were built with the old one, so they are refitted
    refit = _cli("evaluate", str(out), "--set", "urw.alpha=0.2")
    assert refit.returncode == 0, refit.stderr
    urw_row = next(m for m in json.loads((out / "urw_results.json").read_text())["results"]["methods"]
                   if m["method"] == "URW")
    assert urw_row == next(m for m in first if m["method"] == "URW")  # fitted afresh, not the tampered file


def test_a_study_folder_of_the_previous_version_still_loads(tmp_path):
    """study.json written before pools kept every section, PRISM's under [probes]."""
    from judgecal.config import demo_config_path, load_config, load_study
    from judgecal.workspace import Workspace

    for name in ("demo", "urw_demo"):
        cfg = load_config(demo_config_path(name), runtime=False)
        old = cfg.to_dict()
        old.pop("pool", None)
        old |= {"probes": {"bank": "style", "attributes": None, "strengths": ["standard"], "runs": 1, "scale": "1-5"},
                "dataset": {"name": "summeval"}, "fit": {"folds": 5}, "urw": {"alpha": 0.1}}
        folder = tmp_path / name
        Workspace(str(folder)).write_json("study.json", {"config": old})
        back = load_study(str(folder), runtime=False)
        assert back.method == cfg.method and back.engine == cfg.engine


def test_held_out_groups_leave_enough_for_the_folds_or_collect_refuses(tmp_path):
    out = tmp_path / "few"
    cfg = write_config(tmp_path / "pool.toml", POOL.format(out=out).replace("max_groups = 14", "max_groups = 6")
                       .replace("folds = 3\ninner_folds = 3", "folds = 5\ninner_folds = 2"))
    r = _cli("collect", str(cfg))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "[design].confirmation: 0.3 holds out 2 of 6 groups" in lines[0], \
        r.stderr
    assert not out.exists()


def test_prism_never_takes_the_target_or_controls_as_features():
    X, s0, D, y, groups = synthetic(n_groups=10, attrs=2)
    clean = PRISM(gammas=[0.1]).fit(X, y)
    noisy = X.assign(target=y, group_id=groups, baseline_other=s0, **{"neutral:0": y, "criterion:c": y})
    assert PRISM(gammas=[0.1]).fit(noisy, y).design_names_ == clean.design_names_


def test_compare_names_a_urw_study_as_such(tmp_path):
    """A URW study's folder was called "not a PRISM study folder that has been evaluated" though
    it was evaluated (a user's finding)."""
    from judgecal.errors import InputError
    from judgecal.studies.compare import read_log

    (tmp_path / "urw_results.json").write_text("{}")
    with pytest.raises(InputError, match=r": a URW study \(urw_results.json\); compare reads PRISM correction "
                                         r"profiles$"):
        read_log(str(tmp_path))
    (tmp_path / "urw_results.json").unlink()
    with pytest.raises(InputError, match=r"results.json: missing; not a PRISM study folder that has been evaluated"):
        read_log(str(tmp_path))


def test_compare_refuses_a_log_evaluated_on_an_earlier_collect_of_its_folder(tmp_path):
    """A collect of edited labels leaves results.json (and a grid's variants) in place, marked
    as of the earlier collect: report refused it, compare laid its profile beside the others
    without a word (a second reader's finding). Its folder, the file, a grid variant's file."""
    from judgecal.errors import InputError
    from judgecal.methods.runner import plan_stamp
    from judgecal.studies.compare import read_log

    (tmp_path / "study.json").write_text(json.dumps({"plan": {"data": "edited"}}))
    (tmp_path / "grid").mkdir()
    old = {"spec": {"collected_plan": plan_stamp({"data": "as it was"})}, "results": {}}
    for where in ("results.json", "grid/representation-half.json"):
        (tmp_path / where).write_text(json.dumps(old))
    for target in (tmp_path, tmp_path / "results.json", tmp_path / "grid" / "representation-half.json"):
        shown = target if target.name != tmp_path.name else tmp_path / "results.json"
        with pytest.raises(InputError) as e:
            read_log(str(target))
        # a variant's log is its grid's to rewrite: evaluate and run left it as it was (a user's finding)
        again = "rerun the grid that wrote it (`judgecal grid GRID.toml`)" if "grid" in str(target) else \
            "run `judgecal evaluate` (and `judgecal fit`), or `judgecal run`"
        assert str(e.value) == (f"{shown}: evaluated on an earlier collect (the data or the plan changed since); "
                                f"{again}"), str(e.value)
    current = {"spec": {"collected_plan": plan_stamp({"data": "edited"})}, "results": {}}
    (tmp_path / "results.json").write_text(json.dumps(current))
    assert read_log(str(tmp_path)) == read_log(str(tmp_path / "results.json")) == current
    (tmp_path / "study.json").unlink()  # a log copied out of its folder: nothing to check it against
    assert read_log(str(tmp_path / "grid" / "representation-half.json")) == old
    # another study's log copied in: refused by its identity (it was drawn, the judge in its footer alone)
    (tmp_path / "study.json").write_text(json.dumps({"plan": {"data": "edited"}, "identity": {"judge": "a"}}))
    stamp = plan_stamp({"data": "edited"})
    (tmp_path / "results.json").write_text(json.dumps({"spec": {"identity": {"judge": "b"}, "collected_plan": stamp},
                                                       "results": {}}))
    with pytest.raises(InputError) as e:
        read_log(str(tmp_path))
    assert str(e.value) == f"{tmp_path / 'results.json'}: the results log of another study (its judge is not this " \
                           "folder's: b, here a); run `judgecal evaluate` for this one", str(e.value)
    # a study whose own folder is named grid: its results.json is checked against its own study.json
    (tmp_path / "grid" / "study.json").write_text(json.dumps({"plan": {"data": "edited"}}))
    (tmp_path / "grid" / "results.json").write_text(json.dumps(old))
    with pytest.raises(InputError, match="evaluated on an earlier collect"):
        read_log(str(tmp_path / "grid" / "results.json"))


def test_confirmation_groups_with_all_labels_equal_are_counted_in_the_note():
    """Every confirmation cell read "n/a (too few groups for an interval, n = 0)" beside "4
    confirmation groups", all of them tied (a user's finding): the note says how many."""
    from types import SimpleNamespace

    from judgecal.calibrate.prism import PRISM
    from judgecal.studies.study import Selection, confirmation_section

    X, s0, _, y, groups = synthetic(n_groups=12, attrs=2)
    confirm = np.array([f"g{i:02d}" for i in range(8, 12)])
    y = np.where(np.isin(groups, confirm[:3]), 3.0, y)  # 3 of the 4 held-out groups tied
    feats = FeatureTable(X.assign(group_id=groups, target=y), list(X.columns[1:]), 0, 0)
    cols = list(X.columns)
    sel = Selection(cols[1:], cols[1:], np.array([f"g{i:02d}" for i in range(8)]), confirm)
    section = confirmation_section(feats, sel, SimpleNamespace(bootstrap=50), 0,
                                   {"PRISM": PRISM(gammas=DEFAULT_GAMMAS, cv=4).set_params()}, {})
    assert section.note.startswith("4 confirmation groups (32 items; 3 of them with all labels equal or one item, "
                                   "so no within-group correlation) never seen by screening")
    assert section.rows[0][1].note == "too few groups for an interval that holds, n = 1 (needs 4)"


def test_the_penalty_note_counts_vanilla_ties_that_leave_a_gain_at_the_strongest_penalty():
    """A gain of +0.022 at the top of the penalty grid read against the README's '0 from 316 up':
    a correction next to none still orders items Vanilla ties in their group (a user's finding)."""
    from types import SimpleNamespace

    from judgecal.calibrate.features import FeatureTable
    from judgecal.studies.study import Selection, subset_sections

    rng = np.random.default_rng(0)
    n = 48
    groups = np.repeat([f"g{i}" for i in range(8)], 6)
    base = np.round(rng.normal(3, 1, n))  # whole numbers: ties inside groups
    frame = pd.DataFrame({"group_id": groups, "target": base + rng.normal(0, 1, n), "baseline": base,
                          "baseline_other": base, "length:more": rng.normal(0, 1, n),
                          "length:less": rng.normal(0, 1, n)}, index=[f"i{k}" for k in range(n)])
    feats = FeatureTable(frame, ["length:more", "length:less"], 0, 0, families={"length:more": "property",
                                                                                "length:less": "property"})
    sel = Selection(["length:more", "length:less"], ["length:more", "length:less"], np.unique(groups), np.array([]))
    fc = SimpleNamespace(representation="paired", gammas=(0.1, 1.0, 1000.0), folds=4, inner_folds=3,
                         fit_intercept=True)
    penalty = next(s for s in subset_sections(feats, sel, fc, 0, 10) if s.name == "penalty")
    # items that share their score with another in their group (all of them, not those after the first)
    tied = int(sum(c for _, b in frame.groupby("group_id")["baseline"] for c in b.value_counts() if c > 1))
    assert tied > 0 and f"{tied} items tie another's Vanilla score in their group" in penalty.note


def test_no_unit_through_screening_says_why_the_subset_sections_are_missing():
    """With every unit screened out the subset curve, omissions and penalty sections vanished
    without a word (a stranger's finding, `screen_threshold = 100`)."""
    from types import SimpleNamespace

    from judgecal.calibrate.features import FeatureTable
    from judgecal.studies.study import Selection, subset_sections

    frame = pd.DataFrame({"group_id": ["g0", "g0", "g1", "g1"], "target": [1.0, 2, 3, 4], "baseline": [1.0, 2, 3, 4],
                          "length:more": [0.0, 1, 0, 1], "length:less": [0.0, 1, 0, 1]})
    feats = FeatureTable(frame, ["length:more", "length:less"], 0, 0)
    sel = Selection([], ["length:more", "length:less"], np.array(["g0", "g1"]), np.array([]))  # none passed
    fc = SimpleNamespace(representation="paired", gammas=(1.0,), folds=2, inner_folds=2, fit_intercept=True)
    (section,) = subset_sections(feats, sel, fc, 0, 10)
    assert section.name == "subsets" and section.rows == [] and "not computed: no unit passed screening" in section.note


def test_tunes_progress_line_comes_when_its_count_moves():
    """`[subsets] 0/86 chunks solved` came 5 times in a row (a stranger's finding)."""
    import threading
    import time

    from judgecal.studies.tune import _poll

    class Folder:  # a trial's results file lands after the first poll
        calls = 0

        def list(self, prefix, suffix):
            Folder.calls += 1
            return [] if Folder.calls < 3 else ["trial-0.npz"]

    said, stop = [], threading.Event()
    poller = threading.Thread(target=_poll, args=(Folder(), 2, 4, lambda d, n: said.append((d, n)), stop))
    poller.start()
    time.sleep(8.5)  # four polls, 2 s apart: 0, 0, 2, 2
    stop.set()
    poller.join()
    assert said == [(0, 4), (2, 4)], said


@pytest.mark.parametrize("chunks, up, address, expected", [(65, True, None, "ray"), (64, True, None, "local"),
                                                          (65, False, None, "local"), (65, False, "auto", "ray")])
def test_auto_runs_tune_for_more_than_64_chunks_when_ray_is_up_or_named(monkeypatch, chunks, up, address, expected):
    import ray

    from judgecal.studies import tune

    monkeypatch.setattr(ray, "is_initialized", lambda: up)
    if address:
        monkeypatch.setenv("RAY_ADDRESS", address)
    else:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(tune, "run_local", lambda *a, **k: ["local"])
    monkeypatch.setattr(tune, "run_tune", lambda *a, **k: ["ray"])
    assert tune.RAY_ABOVE_CHUNKS == 64
    assert tune.run_grid(None, [0] * chunks, "auto", "unused", "grid") == [expected]


def test_compare_names_a_generic_dataset_by_its_file():
    """Two studies of one's own files read "dataset generic" alike in compare's footer (a
    user's finding): a generic dataset is named by its file."""
    from judgecal.studies.compare import _data

    assert _data({"spec": {"config": {"dataset": {"name": "generic", "path": "a.jsonl", "task": "story"}}}}) == \
        "dataset generic (a.jsonl), task story"
    assert _data({"spec": {"config": {"dataset": {"name": "hanna", "path": "x"}}}}) == "dataset hanna"
    # and by its target: profiles fitted to two label columns of one file read as one study (a user's finding)
    assert _data({"spec": {"config": {"dataset": {"name": "generic", "path": "a.jsonl", "target": ["engaging"]}}}}) == \
        "dataset generic (a.jsonl), target engaging"
    assert _data({"spec": {"config": {"dataset": {"name": "hanna", "target": ["a", "b"]}}}}) == \
        "dataset hanna, target mean(a, b)"


def test_the_grid_summary_gives_the_n_the_confirmation_difference_averages():
    """The confirmation cell read "n=4" (two of six groups with tied labels left out) beside a
    groups column of 6 (a second reader's finding): the column is the cell's n."""
    from judgecal.report.sections import Metric, Section
    from judgecal.studies.grid import prism_gain

    rows = [["PRISM", Metric(0.5, 0.1, 0.7, 4), Metric(0.25, -0.05, 0.72, 4)]]
    section = Section("confirmation", "Confirmation", ["method", "Spearman", "diff"], rows, "",
                      {"confirmation_groups": [f"g{k}" for k in range(6)]}).to_dict()
    cell, table, n = prism_gain({"sections": [section], "methods": [], "groups": 14})
    assert table == "confirmation" and n == "4" and cell.endswith("n=4")
    crossfit = {"sections": [], "groups": 14, "methods": [{"method": "PRISM", "diff": 0.2, "diff_low": 0.0,
                                                            "diff_high": 0.4, "groups": 12}]}
    assert prism_gain(crossfit)[1:] == ["cross-fitted", "12"]


def test_a_column_the_correction_never_uses_holds_no_sign():
    """A constant column's share is 0 in every fold, and sign(0) == sign(0) printed "+0.000 (5/5)"
    as if its sign held in every fold (a second reader's finding)."""
    from judgecal.studies.study import sign_held_text, signs_held

    prof = np.array([[0.5, 0.0, 0.2], [0.4, 0.0, -0.1], [0.6, 0.0, 0.3]])
    held = signs_held(prof)
    assert held == [3, None, 2]
    assert [sign_held_text(h, 3) for h in held] == ["3/3", "none: 0 in every fold", "2/3"]
