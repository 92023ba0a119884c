"""URW as a study method: criteria (generated where missing) -> verify plan -> collect ->
calibration -> every weighting method on the evaluation pairs.

Workspace artefacts: ``criteria_plan.parquet`` + ``criteria/`` (generated criteria, a
planned request set like any other), ``rubric.parquet``, ``pairs.parquet``,
``verify.parquet`` (the plan), ``responses/``, ``calibration.json`` (the fitted URW,
``URW.to_dict()``, which rewards load), ``urw_results.json`` (the log), ``urw_report.html``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal.calibrate.urw import (
    METHODS,
    SCP,
    URW,
    BetaBinomial,
    MondrianSCP,
    SamplingEnsemble,
    TemplateVoteUniform,
    Uniform,
    URWSingleVote,
    min_calibration,
)
from judgecal.calibrate.features import missing_summary
from judgecal.config import StudyConfig
from judgecal.datasets.items import check_draw, draw_indices, draw_words, id_key
from judgecal.datasets.loaders import BUNDLED_PATHS
from judgecal.engines.base import GENERATE, SAMPLING, SCORE, prompt_tokens_estimate
from judgecal.errors import InputError
from judgecal.evaluate.pairwise import (
    accuracy,
    coverage_table,
    difference,
    pair_outcomes,
    prompt_clusters,
    relative_improvement_interval,
)
from judgecal.ids import stable_hash_many
from judgecal.methods.base import DATA, PlanEstimate, completion_limit, data_spec, register
from judgecal.studies.criteria_source import criteria_source_section
from judgecal.studies.template_sweep import template_sweep, template_votes
from judgecal.studies.tune import check_tune, grid_runner
from judgecal.methods.prism import response_facts
from judgecal.methods.runner import StudyRun, collected_stamp, log
from judgecal.rubrics import (
    CriteriaRenderer,
    PairSet,
    VerifierRenderer,
    build_criteria_plan,
    build_verify_plan,
    check_disjoint,
    criteria_from_answers,
    load_generic_rubric,
    load_infobench,
    load_judgebench,
    load_llmbar,
    load_rmbench,
    load_template_set,
    rubric_for_pairs,
)
from judgecal.rubrics.criteria import BESIDE_HUMAN, short_generation_line
from judgecal.rubrics.criteria import MAX_TOKENS as CRITERIA_MAX_TOKENS
from judgecal.rubrics.data import (LLMBAR_SUBSETS, load_generic_pairs, opposite_label_lines, opposite_labels,
                                   repeated_pairs)
from judgecal.rubrics.votes import one_label_lines, soft_scores, usable, verifier_separation, weak_verifier_lines
from judgecal.rubrics.votes import votes as verdicts

PLAN, STORE = "verify.parquet", "responses"
PAIR_KEYS = ("dataset", "group_id", "item_a", "item_b", "preferred")  # what opposite_labels reads
CRITERION_CHARS = 60  # a generated criterion's length, for estimates before it exists
CRITERIA_PLAN, CRITERIA_STORE = "criteria_plan.parquet", "criteria"


def draw_responses(items, groups, n: int, seed: int) -> list:
    """``n`` responses spread over prompts, drawn with ``seed``: the prompts (``groups``, one per
    row of ``items``) in a seeded shuffle, each prompt's responses in a seeded shuffle too (both
    shuffled from id order, :func:`~judgecal.datasets.items.id_key`: any row order draws alike), then
    taken round-robin across the prompts (one response of every prompt before a second of any)
    until ``n`` (all of them when there are fewer). Returned in draw order."""
    prompt_of = dict(zip(items, groups))  # a response's rows share its prompt (the last one's is kept)
    by_prompt: dict = {}
    for item in sorted(prompt_of, key=id_key):  # in id order: any file order draws the same responses
        by_prompt.setdefault(prompt_of[item], []).append(item)
    rng = np.random.default_rng(seed)
    prompts = sorted(by_prompt, key=id_key)
    order = [by_prompt[prompts[i]] for i in rng.permutation(len(prompts))]
    order = [[r[i] for i in rng.permutation(len(r))] for r in order]
    drawn = [r[k] for k in range(max(map(len, order), default=0)) for r in order if k < len(r)]
    return drawn[:n]


MISSING_RULE = "an answer without a usable verdict is no vote; a criterion left with none is dropped (listed)"


def pair_sample(max_pairs: int | None, draw: str, seed: int) -> str:
    """How :func:`load_pairs` chose each dataset's pairs, for the results log ("" for all)."""
    if max_pairs is None:
        return ""
    return f"at most {max_pairs} pairs of each dataset, {draw_words(draw, seed)}"


def calibration_sample(n_responses: int, n_prompts: int, max_responses: int | None, seed: int) -> str:
    """How the calibration responses were chosen, in one line for the results log."""
    if max_responses is None or n_responses < max_responses:
        return f"all {n_responses} responses to {n_prompts} prompts of the calibration set"
    return (f"{n_responses} responses from {n_prompts} prompts, drawn with seed {seed}, "
            "at most one per prompt before a second")


LABEL_MEANINGS = ("criterion met", "problem present")  # what a calibration label of 1 says
PROBLEM_PRESENT = LABEL_MEANINGS[1]


def load_calibration(cfg: StudyConfig) -> pa.Table:
    """The labelled calibration criteria; with ``calibration_max_responses`` N, those of N
    responses from :func:`draw_responses` with the study's seed (every criterion of a drawn
    response is kept)."""
    u = cfg.urw
    if u.calibration == "infobench":
        t = load_infobench(u.calibration_path)
    elif u.calibration == "generic":
        t = load_generic_rubric(u.calibration_path, u.calibration_columns)
        if u.label_means == PROBLEM_PRESENT:  # a 1 flags a problem: the verifier is asked whether it is met
            t = t.set_column(t.schema.get_field_index("label"), "label",
                             pa.compute.subtract(pa.scalar(1, t["label"].type), t["label"]))
    else:
        raise InputError("[urw].calibration", f"unknown calibration set {u.calibration!r} (infobench, generic)")
    if u.calibration_max_responses is not None:
        keep = draw_responses(t["item_id"].to_pylist(), t["group_id"].to_pylist(), u.calibration_max_responses,
                              cfg.seed)
        t = t.filter(pa.compute.is_in(t["item_id"], value_set=pa.array(keep)))
    return t


def load_pairs(cfg: StudyConfig, calibration: pa.Table | None = None) -> PairSet:
    """Every ``[urw].evaluation`` set, ``max_pairs_per_dataset`` pairs of each of its datasets
    (after exclusions), drawn with the study's seed over their pair ids in id order (a generator
    per dataset, seeded by the seed and the dataset's name, so adding a set leaves the others'
    draws alone) or, with
    ``pair_draw = "first"``, its first pairs; kept in file order. Own criteria (generic pairs)
    kept for the prompts that remain. Excluded pairs (ties, identical responses) are logged with
    their counts, after the refusal of a ``calibration`` that shares a text with them (a refusal
    came after two such notes, which read as the collect going on)."""
    u, merged, notes = cfg.urw, PairSet(), []
    loaders = {"llmbar": lambda p: load_llmbar(p, u.llmbar_subsets or LLMBAR_SUBSETS),
               "rm-bench": load_rmbench, "judgebench": load_judgebench,
               "generic": lambda p: load_generic_pairs(p, u.evaluation_columns, u.evaluation_labels or None)}
    for name in u.evaluation_paths:
        if name not in loaders:
            raise InputError(f"[urw].evaluation_paths.{name}", f"unknown pairwise set (known: {', '.join(loaders)})")
    for name in u.evaluation:  # a misspelt set name first: it is why "generic" seems missing
        if name not in loaders:
            raise InputError("[urw].evaluation", f"unknown pairwise set {name!r} (known: {', '.join(loaders)})")
    if (u.evaluation_columns or u.evaluation_labels) and "generic" not in u.evaluation:
        raise InputError("[urw].evaluation_columns", "only for generic pairs; add \"generic\" to [urw].evaluation")
    for name in u.evaluation:
        path = u.evaluation_paths.get(name, "bundled" if name == "llmbar" else None)
        if path is None:
            raise InputError(f"[urw].evaluation_paths.{name}", "not bundled; give its path")
        loaded = loaders[name](path)
        notes += [f"[urw] {line}" for line in loaded.exclusions()]
        notes += [f"judgecal: warning: {line}" for line in loaded.warnings]
        merged.excluded.update(loaded.excluded)
        pairs, responses = loaded.tables()
        for ds in dict.fromkeys(pairs["dataset"].to_pylist()):
            rows = [r for r in pairs.to_pylist() if r["dataset"] == ds]
            rng = np.random.default_rng([cfg.seed, int(stable_hash_many([ds], n=8), 16)])
            ranked = rows if u.pair_draw == "first" else sorted(rows, key=lambda r: id_key(r["pair_id"]))
            drawn = {id(ranked[j]) for j in draw_indices(len(rows), u.max_pairs_per_dataset, u.pair_draw, rng)}
            rows = [r for r in rows if id(r) in drawn]  # kept in file order
            for r in rows:
                for i in (r["item_a"], r["item_b"]):
                    merged.responses[i] = responses[i]
                if r["group_id"] in loaded.criteria:
                    merged.criteria[r["group_id"]] = loaded.criteria[r["group_id"]]
                for k in merged.pairs:
                    merged.pairs[k].append(r[k])
                merged.where[r["pair_id"]] = loaded.where[r["pair_id"]]
    if calibration is not None:
        cal_file = f"{u.calibration} (bundled)" if u.calibration_path in BUNDLED_PATHS else u.calibration_path
        check_disjoint(calibration, *_texts(merged), cal_file)
    for line in notes:
        log(line)
    return merged


# The vote columns each method reads on the evaluation set (the first is its v_hat), and the
# one it is calibrated on. A criterion missing one of them has no usable vote for the method:
# it is dropped (and counted), never replaced by another vote.
READS = {"Uniform": ("v_base",), "Beta-Binomial": ("v_tmpl",), "Sampling Ensemble": ("v_samp",),
         "SCP": ("v_tmpl",), "Mondrian-SCP": ("v_tmpl",), "URW": ("v_tmpl",), "URW†": ("v_tmpl",),
         "URW‡": ("v_two", "v_base")}
FITS_ON = {"SCP": "v_tmpl", "Mondrian-SCP": "v_tmpl", "URW": "v_tmpl", "URW‡": "v_two"}


CALIBRATION = "calibration.json"
WEIGHTER_CLASSES = {c.__name__: c for c in (URW, SCP, MondrianSCP, URWSingleVote)}


def _weighter_params(u) -> dict:
    """The [urw] settings the calibrated weighters are built with: another value refits them."""
    return {"alpha": u.alpha, "mondrian_bins": u.mondrian_bins}


def _calibration_hash(cal: pd.DataFrame) -> str:
    """What the weighters were fitted on: every calibration criterion's soft scores and label."""
    cols = ["item_id", "criterion_id", "v_tmpl", "v_two", "label", "length"]
    return stable_hash_many(cal[cols].sort_values(["item_id", "criterion_id"]).itertuples(index=False))


def _estimator(name: str, cal: pd.DataFrame, u, n_templates: int):
    """The weighter of ``name``, fitted on the calibration criteria it can read."""
    if name not in FITS_ON:
        return {"Uniform": Uniform, "Beta-Binomial": lambda: BetaBinomial(n_templates),
                "Sampling Ensemble": SamplingEnsemble, "URW†": TemplateVoteUniform}[name]()
    c = cal[usable(cal, FITS_ON[name])]
    v, y = c[FITS_ON[name]].to_numpy(), c["label"].to_numpy(float)
    if name == "Mondrian-SCP":
        return MondrianSCP(u.alpha, u.mondrian_bins).fit(v, y, c["length"].to_numpy())
    return {"SCP": lambda: SCP(u.alpha), "URW": URW, "URW‡": URWSingleVote}[name]().fit(v, y)


def _score_kwargs(name: str, ev: pd.DataFrame) -> dict:
    return {"Beta-Binomial": {"n_parsed": ev["n_tmpl"].to_numpy()}, "Mondrian-SCP": {"strata": ev["length"].to_numpy()},
            "URW‡": {"votes": ev["v_base"].to_numpy()}}.get(name, {})


def weighted_scores(cal: pd.DataFrame, ev: pd.DataFrame, u, n_templates: int,
                    fitted: dict | None = None) -> tuple[dict[str, pd.Series], dict]:
    """Per method: score per evaluation response (NaN where none of its criteria has a usable
    vote), and the criteria dropped for want of a usable vote (evaluation, calibration) with
    the responses left unscored. ``fitted``: the calibrated weighters ``fit`` saved (by
    method name); a calibrated method missing from it is fitted here on ``cal``."""
    responses = pd.Index(ev["item_id"].unique())
    scores, dropped = {}, {}
    for name in METHODS:
        ok = usable(ev, *READS[name])
        e = ev[ok]
        est = (fitted or {}).get(name) or _estimator(name, cal, u, n_templates)
        keys, s = est.response_scores(e[READS[name][0]].to_numpy(), e["item_id"].to_numpy(), **_score_kwargs(name, e))
        scores[name] = pd.Series(s, index=keys, dtype=float).reindex(responses)
        cal_out = int((~usable(cal, FITS_ON[name])).sum()) if name in FITS_ON else 0
        dropped[name] = {"evaluation_criteria": int((~ok).sum()), "calibration_criteria": cal_out,
                         "unscored_responses": int(scores[name].isna().sum()),
                         "abstained_responses": _abstained(est, e, name), "evaluation_responses": len(responses)}
    return scores, dropped


def _abstained(est, e: pd.DataFrame, name: str) -> int:
    """Responses on which an SCP abstained on every criterion (scored by their uniform mean vote,
    see judgecal.calibrate.urw): counted, so a row equal to plain voting says why."""
    if not isinstance(est, SCP) or e.empty:
        return 0
    raw = est.raw_weight(e[READS[name][0]].to_numpy(), _score_kwargs(name, e).get("strata"))
    return int((pd.Series(raw).groupby(e["item_id"].to_numpy()).sum() == 0).sum())


def label_warnings(labels: pd.Series) -> list[str]:
    """A line when every calibration label is one value: the p-values then come from criteria
    of one kind only (a user's finding: all 1s, accepted without a word)."""
    values = labels.dropna().astype(int)
    return one_label_lines(int((values == 1).sum()), int((values == 0).sum()))


def scp_warnings(weighters: dict, alpha: float) -> list[str]:
    """A line per SCP fitted on fewer calibration criteria than can ever give a single label
    at ``alpha`` (Mondrian-SCP merges its bins up to that size; with too few in all it cannot)."""
    need = min_calibration(alpha)
    return [f"{name} has {w.urw_.n_cal_} usable calibration criteria, fewer than the {need} with which alpha = "
            f"{alpha:g} can ever give a single label: it abstains on every criterion and scores each response by "
            "the uniform mean of its votes (its row is plain voting)"
            for name, w in weighters.items() if isinstance(w, SCP) and w.urw_.n_cal_ < need]


def calibration_coverage(cal: pd.DataFrame, alphas, seed: int) -> dict:
    """The coverage check (``coverage_table``) on the calibration criteria with a usable
    template vote, folds by prompt (``group_id``): a prompt's criteria are shared word for word
    by its responses, so folds by response would hold out criteria whose text calibrates too."""
    c = cal[usable(cal, "v_tmpl")]
    return coverage_table(c["v_tmpl"], c["label"], c["group_id"], alphas, seed=seed, responses=c["item_id"])


def comparison(method, uniform, clusters, n_resamples: int, seed: int) -> dict:
    """One results cell: accuracy, difference from Uniform and relative improvement over it,
    each with its cluster-bootstrap interval over prompts (note: why an interval is missing)."""
    cell = {}
    for key, iv in (("accuracy", accuracy(method, clusters, n_resamples, seed)),
                    ("diff", difference(method, uniform, clusters, n_resamples, seed)),
                    ("rel_improvement", relative_improvement_interval(method, uniform, clusters, n_resamples, seed))):
        cell |= {key: iv.estimate, f"{key}_low": iv.low, f"{key}_high": iv.high, f"{key}_note": iv.note}
        cell |= {"pairs": iv.n, "prompts": iv.clusters}
    return cell


def dataset_families(datasets: pd.Series) -> dict[str, np.ndarray]:
    """The rows of the table (a mask over pairs each): ``all``, then each dataset family
    (``llmbar/Natural`` is ``llmbar``) where there are several; one family's rows would repeat
    ``all``'s."""
    family = datasets.str.split("/").str[0].to_numpy()
    names = list(dict.fromkeys(family))
    return {"all": np.ones(len(family), bool), **({f: family == f for f in names} if len(names) > 1 else {})}


def method_table(outcomes: dict, clusters, families: dict, dropped: dict, n_resamples: int, seed: int) -> list[dict]:
    """Per method: its dropped criteria and, per dataset family (a mask over pairs), ``comparison``."""
    uni = outcomes["Uniform"]
    return [{"method": m, "dropped": dropped[m],
             **{fam: comparison(outcomes[m][k], uni[k], clusters[k], n_resamples, seed) for fam, k in families.items()}}
            for m in METHODS]


def urw_data_spec(cfg: StudyConfig) -> dict | None:
    """The study's own data files (calibration and evaluation sets given by path; bundled ones
    are fixed), hashed: a label edited after collect makes fit and evaluate refuse (they read
    the collected copies, rubric.parquet and pairs.parquet)."""
    u = cfg.urw
    files = [u.calibration_path] if u.calibration_path not in BUNDLED_PATHS else []
    files += [u.evaluation_paths[n] for n in u.evaluation if u.evaluation_paths.get(n) not in BUNDLED_PATHS]
    if not all(isinstance(f, str) for f in files):
        return None
    return data_spec(files)  # the files' bytes


def _texts(pairs: PairSet) -> tuple[list[str], list[str], list[str]]:
    """The evaluation responses' prompts and texts, and where each one's first pair is (file
    and row), for the calibration-overlap check."""
    first = {}  # every response is in a pair: the first one's place
    for pid, a, b in zip(*(pairs.pairs[k] for k in ("pair_id", "item_a", "item_b"))):
        for i in (a, b):
            first.setdefault(i, pairs.where[pid])
    items = list(pairs.responses)
    return ([pairs.responses[i][1] for i in items], [pairs.responses[i][2] for i in items],
            [first[i] for i in items])


def _to_generate(responses: dict, pairset, u) -> dict[str, str]:
    """The prompts (group -> text) that get generated criteria."""
    return {g: p for g, p, _ in responses.values() if g not in pairset.criteria or u.compare_criteria}


class UrwMethod:
    name = "urw"
    results_name, report_name = "urw_results.json", "urw_report.html"
    outputs = (CALIBRATION, results_name, report_name)
    stamped_outputs = (CALIBRATION,)  # its "collected_plan": the collect it was fitted on (rewards.py)
    sections = ("urw", "tune")
    data_section = "urw"
    simulated_truth = "the calibration labels (an evaluation pair's label alone changes nothing)"
    truthless_sets = ("criteria",)  # generated with the judge's identity alone: reused whatever the labels
    data_hint = 'calibration = "infobench" (bundled) or a calibration file, and evaluation = [...]'
    demo = "urw_demo"
    fit_ignores = ("tune.",)  # the template-count sweep is evaluate's

    def request_sets(self, cfg: StudyConfig) -> list[tuple[str, str, str]]:
        """The criteria generation (empty where every prompt brings its own), then the verification."""
        return [("criteria", CRITERIA_PLAN, CRITERIA_STORE), ("verify", PLAN, STORE)]

    def check_config(self, cfg: StudyConfig, where: str) -> None:
        """[urw]'s numbers and lists are checked with every section's when the config loads
        (judgecal.config.RULES: one line naming the field, never a traceback later)."""
        check_tune(cfg.tune, where)
        u = cfg.urw
        if u.label_means not in LABEL_MEANINGS:
            raise InputError(f"{where} [urw].label_means", f"unknown meaning {u.label_means!r} (use "
                             f"{' or '.join(map(repr, LABEL_MEANINGS))})")
        check_draw(u.pair_draw, f"{where} [urw].pair_draw")
        if u.calibration == "generic" and u.calibration_path == "bundled":  # it said "bundled: no such file"
            raise InputError(f"{where} [urw].calibration_path", "calibration = \"generic\" reads your own labels: "
                             "give calibration_path, a file of prompt, response, criterion and label (0/1) rows")
        if u.label_means != LABEL_MEANINGS[0] and u.calibration != "generic":
            raise InputError(f"{where} [urw].label_means", f"{u.calibration}'s labels say the criterion is met; "
                             "label_means is for a generic calibration file")

    def identity(self, cfg: StudyConfig) -> dict:
        u = cfg.urw
        return {
            "verifier": cfg.engine.identity,
            "template_version": load_template_set(u.templates_audit).version,
            "calibration": {"name": u.calibration, "path": u.calibration_path,
                            "columns": dict(u.calibration_columns),
                            **({"label_means": u.label_means} if u.label_means != LABEL_MEANINGS[0] else {})},
            "criteria_per_prompt": u.criteria_per_prompt,
            "sample_temperature": u.sample_temperature,
        }

    def plan_spec(self, cfg: StudyConfig) -> dict:
        u = cfg.urw
        # the seed draws the calibration responses when they are capped (draw_responses)
        spec = {"calibration_max_responses": u.calibration_max_responses,
                **({"calibration_seed": cfg.seed} if u.calibration_max_responses is not None else {}),
                "evaluation": list(u.evaluation),
                "evaluation_paths": dict(u.evaluation_paths), "llmbar_subsets": u.llmbar_subsets and list(
                    u.llmbar_subsets), "max_pairs_per_dataset": u.max_pairs_per_dataset, "samples": u.samples,
                **({"evaluation_columns": dict(u.evaluation_columns), "evaluation_labels": dict(u.evaluation_labels)}
                   if u.evaluation_columns or u.evaluation_labels else {}),
                **({"compare_criteria": True} if u.compare_criteria else {}),
                # absent: the first pairs, as before seeded draws
                **({"pair_draw": {"draw": u.pair_draw, "seed": cfg.seed}}
                   if u.max_pairs_per_dataset is not None and u.pair_draw != "first" else {})}
        data = urw_data_spec(cfg)
        return spec | ({DATA: data} if data is not None else {})

    def needs(self, cfg: StudyConfig) -> set[str]:
        return {SCORE, GENERATE} | ({SAMPLING} if cfg.urw.samples else set())

    def estimate(self, cfg: StudyConfig) -> list[PlanEstimate]:
        """Criteria generation exactly; verification with K = criteria_per_prompt for the
        prompts whose criteria are still to be generated (the model may give fewer)."""
        u = cfg.urw
        templates = load_template_set(u.templates_audit)
        cal = load_calibration(cfg)
        pairset = load_pairs(cfg, cal)  # an overlap collect refuses, show refuses (a user's finding)
        _, responses = pairset.tables()
        prompts = _to_generate(responses, pairset, u)
        gen = CriteriaRenderer(prompts, u.criteria_per_prompt).render([{"item_id": g} for g in prompts])
        gen_chars = sum(len(r.system) + len(r.user) for r in gen)
        frame = [sum(map(len, templates.render(t, "", "", ""))) for t in templates.active]
        base_frame = sum(map(len, templates.render(templates.base, "", "", "")))
        n_cal = cal.num_rows * len(templates.active)
        chars = sum(sum(frame) + len(templates.active) * (len(p) + len(r) + len(c))
                    for p, r, c in zip(*(cal[k].to_pylist() for k in ("prompt", "response", "criterion"))))
        n_ev = ev_chars = 0
        for g, prompt, text in responses.values():
            k = len(pairset.criteria[g]) if g in pairset.criteria else u.criteria_per_prompt
            k += u.criteria_per_prompt if g in pairset.criteria and u.compare_criteria else 0
            n_ev += k * (len(templates.active) + u.samples)
            ev_chars += k * (sum(frame) + u.samples * base_frame
                             + (len(templates.active) + u.samples) * (len(prompt) + len(text) + CRITERION_CHARS))
        per = completion_limit(cfg.engine)
        criteria, verify = self.request_sets(cfg)
        return [PlanEstimate(*criteria, len(gen), prompt_tokens_estimate(gen_chars, len(gen)),
                             len(gen) * CRITERIA_MAX_TOKENS, f"one per prompt{'' if u.compare_criteria else ' without criteria of its own'}, "
                             f"{u.criteria_per_prompt} asked"),
                PlanEstimate(*verify, n_cal + n_ev, prompt_tokens_estimate(chars + ev_chars, n_cal + n_ev),
                             (n_cal + n_ev) * per, f"{cal.num_rows} calibration criteria x {len(templates.active)} templates; "
                             f"{'at most ' if gen else ''}{n_ev // max(1, len(templates.active) + u.samples)} "
                             f"evaluation criteria{' (the judge may generate fewer than asked)' if gen else ''} x "
                             f"({len(templates.active)} templates + {u.samples} samples)")]

    def collect(self, run: StudyRun) -> None:
        cfg, u, ws = run.cfg, run.cfg.urw, run.ws
        templates = load_template_set(u.templates_audit)
        cal = load_calibration(cfg)
        pairset = load_pairs(cfg, cal)
        pairs, responses = pairset.tables()
        if pairs.num_rows == 0:
            raise InputError("[urw].evaluation", "no evaluation pairs")
        keys = [pairs[c].to_pylist() for c in PAIR_KEYS]
        for line in opposite_label_lines(opposite_labels(*keys), repeated_pairs(*keys)):
            log(f"[urw] {line}")
        # Criteria are generated for the prompts whose file brought none of their own (and, to
        # compare the two, for those that did).
        prompts = _to_generate(responses, pairset, u)
        cplan = build_criteria_plan(prompts, u.criteria_per_prompt, cfg.engine.identity)
        run.begin()
        ws.write_parquet(CRITERIA_PLAN, cplan)
        log(f"[urw] criteria generation: {len(prompts)} prompts ask the engine for {u.criteria_per_prompt} criteria "
            "each" if prompts else "[urw] criteria generation: none (every prompt brings its criteria)")
        run.collect(CRITERIA_STORE, cplan, CriteriaRenderer(prompts, u.criteria_per_prompt))
        generated = criteria_from_answers(run.answered(CRITERIA_STORE, CRITERIA_PLAN), prompts, u.criteria_per_prompt)
        if line := short_generation_line(generated, prompts, u.criteria_per_prompt):
            log(f"[urw] criteria generation: {line}")
        criteria = generated | {g: (c, "human") for g, c in pairset.criteria.items()}
        ev = rubric_for_pairs(responses, criteria)
        if u.compare_criteria:
            ev = pa.concat_tables([ev, rubric_for_pairs(responses, {g: generated[g] for g in pairset.criteria
                                                                    if g in generated}, BESIDE_HUMAN)])
        rubric = pa.concat_tables([cal, ev])
        # simulated verifiers only: the calibration labels, given before the plan, whose request
        # ids they enter (engines.simulated)
        truth = {f"{i}/{c}": lab for i, c, lab in zip(cal["item_id"].to_pylist(), cal["criterion_id"].to_pylist(),
                                                      cal["label"].to_pylist())}
        judge = cfg.engine.with_truth(truth).identity
        plan = pa.concat_tables([build_verify_plan(cal, templates, judge, 0),
                                 build_verify_plan(ev, templates, judge, u.samples, u.sample_temperature)])
        ws.write_parquet("rubric.parquet", rubric)
        ws.write_parquet("pairs.parquet", pairs)
        ws.write_parquet(PLAN, plan)
        src = pd.Series(ev["criterion_source"].to_pylist()).value_counts().to_dict()
        drawn = calibration_sample(len(set(cal["item_id"].to_pylist())), len(set(cal["group_id"].to_pylist())),
                                   u.calibration_max_responses, cfg.seed)
        pairs_drawn = pair_sample(u.max_pairs_per_dataset, u.pair_draw, cfg.seed)
        log(f"[urw] calibration: {cal.num_rows} labelled criteria of {drawn}; evaluation: {pairs.num_rows} pairs"
            f"{f' ({pairs_drawn})' if pairs_drawn else ''}, {ev.num_rows} criteria ({src}); {plan.num_rows} verifier "
            "requests")
        run.collect(STORE, plan, VerifierRenderer(rubric, templates), truth)

    def _votes(self, run: StudyRun):
        ws = run.ws
        templates = load_template_set(run.cfg.urw.templates_audit)
        ans = run.answered(STORE, PLAN)
        for name in ("rubric.parquet", "pairs.parquet"):
            ws.require(name, "run `judgecal collect` first")
        each = verdicts(ans)  # refused here, before any weighting, above [urw] max_missing
        run.memo["missing_verdicts"] = missing_summary(
            pd.DataFrame({"value": each["vote"], "parse_status": each["parse_status"]}), "drop",
            run.cfg.urw.max_missing, MISSING_RULE, "[urw].max_missing")
        votes = soft_scores(ans, templates, each)
        meta = ws.read_parquet("rubric.parquet").select(
            ["item_id", "group_id", "criterion_id", "criterion", "criterion_source", "label"]).to_pandas()
        votes = votes.merge(meta, on=["item_id", "criterion_id"], how="inner")
        votes["length"] = votes["criterion"].str.split().str.len().astype(float)
        pairs = ws.read_parquet("pairs.parquet").to_pandas()
        ev_items = set(pairs["item_a"]) | set(pairs["item_b"])
        cal = votes[~votes["item_id"].isin(ev_items) & votes["label"].notna()]
        ev = votes[votes["item_id"].isin(ev_items)]
        beside = ev["criterion_id"].str.startswith(BESIDE_HUMAN)  # compare_criteria's extra rows
        return cal, ev[~beside], pairs, ans, templates, ev[beside]

    def fitted_settings(self, ws) -> tuple[str, dict | None]:
        """The weighters' [urw] settings (an evaluate with others refits its own; rewards read
        calibration.json's: a user's finding, --set urw.alpha=0.3 left it at 0.1 without a word)."""
        try:
            saved = ws.read_json(CALIBRATION) if ws.exists(CALIBRATION) else None
        except Exception:  # noqa: BLE001 - a damaged calibration.json is fit's to rewrite
            return CALIBRATION, None
        params = saved.get("weighter_params") if isinstance(saved, dict) else None
        return CALIBRATION, {"urw": params} if isinstance(params, dict) else None

    def fit(self, run: StudyRun) -> dict:
        cal, _, _, _, templates, _ = self._votes(run)
        weighters = {name: _estimator(name, cal, run.cfg.urw, len(templates.active)) for name in FITS_ON}
        separation = verifier_separation(cal)
        for line in [*scp_warnings(weighters, run.cfg.urw.alpha), *label_warnings(cal["label"]),
                     *weak_verifier_lines(separation)]:
            log(f"[urw] warning: {line}")
        urw = weighters["URW"]
        saved = {"verifier": run.cfg.engine.identity, "engine": run.cfg.to_dict()["engine"],
                 "verifier_separation": separation,
                 "template_version": templates.version, "templates_active": list(templates.active),
                 "calibration_data": _calibration_hash(cal), "weighter_params": _weighter_params(run.cfg.urw),
                 "urw": urw.to_dict(), "weighters": {name: w.to_dict() for name, w in weighters.items()},
                 # the collect it was fitted on: rewards refuse it after a later collect (rewards.py)
                 "collected_plan": collected_stamp(run.ws)}
        run.ws.write_json(CALIBRATION, saved)
        return {"n_cal": urw.n_cal_, "calibration": run.ws.join(CALIBRATION)}

    def _calibrated(self, run: StudyRun, templates, cal: pd.DataFrame) -> dict | None:
        """The weighters ``fit`` saved, when they were fitted on exactly this calibration data
        with this verifier and template set (evaluation then reuses them); None: evaluate fits
        them itself (a calibration.json from before a re-collect is never reused)."""
        if not run.ws.exists(CALIBRATION):
            return None
        saved = run.ws.read_json(CALIBRATION)
        if (saved.get("verifier") != run.cfg.engine.identity or "weighters" not in saved
                or list(saved.get("templates_active", [])) != list(templates.active)
                or saved.get("calibration_data") != _calibration_hash(cal)
                or saved.get("weighter_params") != _weighter_params(run.cfg.urw)):
            return None
        where = run.ws.join(CALIBRATION)
        return {name: WEIGHTER_CLASSES[d["class"]].from_dict(d, f"{where} weighters.{name}")
                for name, d in saved["weighters"].items() if d.get("class") in WEIGHTER_CLASSES}

    def evaluate(self, run: StudyRun) -> tuple[dict, dict]:
        cfg, u = run.cfg, run.cfg.urw
        cal, ev, pairs, ans, templates, beside = self._votes(run)
        fitted = self._calibrated(run, templates, cal)
        scores, dropped = weighted_scores(cal, ev, u, len(templates.active), fitted)
        families = dataset_families(pairs["dataset"])
        keys = [pairs[c].tolist() for c in PAIR_KEYS]  # pairs given again: rubrics.data.opposite_labels, repeated_pairs
        outcomes = {m: pair_outcomes(s.reindex(pairs["item_a"]).to_numpy(), s.reindex(pairs["item_b"]).to_numpy(),
                                     pairs["preferred"].to_numpy()) for m, s in scores.items()}
        table = method_table(outcomes, prompt_clusters(pairs["group_id"]), families, dropped, u.bootstrap, cfg.seed)
        section = {
            "verifier": cfg.engine.identity, "template_version": templates.version,
            "templates": list(templates.active), "datasets": list(families),
            "calibration_criteria": int(len(cal)),
            "calibration_labels": {"met": int((cal["label"] == 1).sum()), "not met": int((cal["label"] == 0).sum())},
            "calibration_sample": calibration_sample(cal["item_id"].nunique(), cal["group_id"].nunique(),
                                                     u.calibration_max_responses, cfg.seed),
            "evaluation_criteria": int(len(ev)), "pairs": int(len(pairs)),
            **({"pair_sample": line} if (line := pair_sample(u.max_pairs_per_dataset, u.pair_draw, cfg.seed)) else {}),
            "opposite_label_pairs": opposite_labels(*keys),  # pairs given both ways (kept; counted per dataset)
            "repeated_pairs": repeated_pairs(*keys),  # same label, >= 10%
            "missing_verdicts": run.memo["missing_verdicts"],
            "criterion_sources": ev["criterion_source"].value_counts().to_dict(),
            "methods": table, "bootstrap_resamples": u.bootstrap,
            "coverage": calibration_coverage(cal, u.coverage_alphas, cfg.seed),
            "sections": [template_sweep(template_votes(ans, tuple(templates.active)),
                                        cal[["item_id", "criterion_id", "label"]], ev[["item_id", "criterion_id"]],
                                        pairs, u.bootstrap, cfg.seed,
                                        grid_runner(cfg.tune, run.ws, "templates", log)).to_dict()],
        }
        if u.compare_criteria:
            section["sections"].append(criteria_source_section(
                ev, beside, pairs, lambda e: weighted_scores(cal, e, u, len(templates.active), fitted)[0],
                u.bootstrap, cfg.seed).to_dict())
        return section, response_facts(ans, cfg.engine)

    def format_text(self, log_: dict) -> str:
        from judgecal.report.urw import format_urw_table

        return format_urw_table(log_)

    def render_html(self, log_: dict) -> str:
        from judgecal.report.urw import render_urw_html

        return render_urw_html(log_)


register(UrwMethod())
