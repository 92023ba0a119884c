"""The one config format (TOML) that drives the CLI, the jobs and the demo.

Sections: [study] name/output/seed/method, [dataset], [pool] (what PRISM collects; the older
name [probes] is read the same) and [design] (what it fits), [urw] (URW), [engine] (``kind``
picks the typed engine config), [collect], [fit]. Every field has a default except where a dataset needs
one; unknown fields are errors, so a typo never silently falls back to a default. Every number
(and every list that must hold something) is checked when the config loads against one table,
:data:`RULES`; an empty config file, a malformed ``--set`` and an output folder under a file
are refused in one line too.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path

from judgecal.calibrate.prism import DEFAULT_GAMMAS
from judgecal.engines.base import EngineConfig, config_fields, engine_config_from_dict
from judgecal.engines.llamacpp import LlamaCppEngineConfig
from judgecal.errors import InputError, field_key, keeping_unread, saved_setting, set_key
from judgecal.pipeline.progress import OUTCOMES_KEPT
from judgecal.scale import ScoreScale


@dataclass(frozen=True)
class DatasetConfig:
    name: str = "summeval"  # summeval | hanna | usr | generic
    path: str = "bundled"
    target: tuple[str, ...] | None = None  # criteria averaged into the target; None: the dataset's default
    target_scale: str | None = None  # e.g. "1-5" (or "1–5"); None: the dataset's published scale
    max_groups: int | None = None
    max_items_per_group: int | None = None
    item_draw: str = "seeded"  # max_items_per_group: drawn with [study] seed, or "first" (file order)
    columns: dict = field(default_factory=dict)  # generic loader: canonical name -> file column
    task: str | None = None  # generic loader: which prompt template (summary | story | dialogue); required
    delimiter: str | None = None  # generic loader: delimited text other than .csv / .tsv ("|", ";", "\t")
    records: str | None = None  # generic loader: a JSON object's array of records, by path ("data.items")
    where: dict = field(default_factory=dict)  # generic loader: rows kept, column (path) -> value or [values]
    group_by: str | None = None  # generic loader: the column to group on (as columns.group_id), or "none"
    template: str | None = None  # a prompt template file (judgecal.probes.template_file) instead of the task's


@dataclass(frozen=True)
class PoolConfig:
    """What is collected: a change re-plans (responses already committed are kept)."""

    bank: str = "style"
    attributes: tuple[str, ...] | None = None  # properties; None: every one of the bank that fits the task
    strengths: tuple[str, ...] = ("standard",)
    families: tuple[str, ...] = ()  # one-sided families to collect: context, role, focus, stakes
    neutral: bool = False  # the bank's neutral clauses (controls for screening)
    criteria: bool = False  # one request per rubric criterion: the G-Eval and SAJA baselines
    runs: int = 1
    scale: str = "1-5"
    # Sampling: 0 asks for the most likely answer (runs then repeat only where the engine is
    # not deterministic); > 0 samples, each run with its own seed (``seed + run``). Both are
    # plan columns and part of every request id.
    temperature: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class DesignConfig:
    """What is fitted from the pool: a change never re-collects. None: everything pooled."""

    attributes: tuple[str, ...] | None = None
    strengths: tuple[str, ...] | None = None
    families: tuple[str, ...] | None = None  # one-sided families used as feature columns
    screen: bool | None = None  # screen units against the neutral controls; None: when the pool has them
    screen_rule: str = "lower_bound"  # a unit passes when this (lower_bound | estimate) of its RMS ratio ...
    screen_threshold: float = 1.0  # ... exceeds this
    screen_bootstrap: int = 2000  # document-bootstrap resamples of the ratio
    confirmation: float | None = None  # share of groups held out for confirmation; None: 0.3 when screening, else 0
    subsets: bool = True  # the subset curve, single-unit omissions and penalty sensitivity
    subsets_per_size: int = 100  # above 16 units, subsets drawn per size (seeded); up to 16: all of them


@dataclass(frozen=True)
class TuneSection:
    """Where study grids run: ``local`` (one process, vectorised), ``ray`` (Ray Tune trials),
    ``auto`` (Ray when the grid is large and a cluster is there)."""

    mode: str = "auto"
    storage: str | None = None  # Tune's storage_path; None: the study's folder (``tune/``), s3:// works


@dataclass(frozen=True)
class DiagnosticsConfig:
    """Judge diagnostics (``judgecal.diagnostics``): which run; each plans the requests it
    needs with the study's and writes one section of the results log."""

    run: tuple[str, ...] = ()
    bootstrap: int = 2000  # document-bootstrap resamples of every diagnostic interval
    joint_pairs: int = 3  # joint probes: this many attribute pairs (two instructions in one probe)
    # which score the diagnostics read: auto (the sample when [pool] temperature > 0, else
    # [fit] score_field) | parsed | expected
    reading: str = "auto"
    orders: int = 4  # order: batched orders per document (as listed, reversed, then random; 2-8)
    pairs_per_group: int = 4  # order: candidate pairs per document judged pairwise, in both orders
    scales: tuple[str, ...] = ("1-5", "1-10", "0-100")  # resolution: the scales the same items are asked on


@dataclass(frozen=True)
class CollectConfig:
    block_rows: int | None = None  # rows per block (one part); None: ~part_seconds of the engine's work
    part_rows: int = 10_000  # the most rows in one part
    part_seconds: float = 60.0  # about how much engine work one part holds (what a kill can lose)
    num_actors: int = 1  # replicas of the engine stage
    max_attempts: int = 3  # a failed request is retried by later runs up to this many tries
    fail_fast_requests: int = 20  # stop when the first this-many requests all fail to connect; 0: never


@dataclass(frozen=True)
class FitConfig:
    gammas: tuple[float, ...] = DEFAULT_GAMMAS
    representation: str = "paired"
    fit_intercept: bool = True  # False: the paper's model (no intercept c)
    folds: int = 5
    inner_folds: int = 5
    fold_seeds: int = 10  # cross-fitting repeated over this many shuffled fold assignments
    score_field: str = "expected"
    bootstrap: int = 2000
    # answers without a usable score (refusals, several numbers, ...): impute (an item without a
    # baseline is left out, a probe without a score counts as no change) | drop (an item missing
    # any score is left out); either way fit and evaluate refuse above this share of requests
    missing: str = "impute"
    max_missing: float = 0.1


@dataclass(frozen=True)
class UrwConfig:
    """URW studies: calibration labels, evaluation pairs, criteria, templates and weighting."""

    calibration: str = "infobench"  # infobench (bundled) | generic
    calibration_path: str = "bundled"
    calibration_columns: dict = field(default_factory=dict)  # generic: prompt/response/criterion/label
    label_means: str = "criterion met"  # generic: what a label of 1 says (criterion met | problem present)
    calibration_max_responses: int | None = None  # N responses drawn with [study].seed, spread over prompts
    evaluation: tuple[str, ...] = ("llmbar",)  # llmbar (bundled) | rm-bench | judgebench | generic
    evaluation_paths: dict = field(default_factory=dict)  # dataset -> folder or file
    evaluation_columns: dict = field(default_factory=dict)  # generic pairs: canonical name -> file column
    evaluation_labels: dict = field(default_factory=dict)  # generic pairs: label value -> "a" | "b" | "tie"
    llmbar_subsets: tuple[str, ...] | None = None  # None: all five
    max_pairs_per_dataset: int | None = None
    pair_draw: str = "seeded"  # max_pairs_per_dataset: drawn with [study] seed, or "first" (file order)
    # verifier answers without a usable verdict are no vote (a criterion left with none is dropped
    # and listed); fit and evaluate refuse above this share of verify requests
    max_missing: float = 0.1
    criteria_per_prompt: int = 3  # generated criteria (K) for prompts without human ones
    # also generate criteria for prompts that have human ones, and report URW with each on them
    compare_criteria: bool = False
    templates_audit: str | None = None  # a template audit result (judgecal audit-templates)
    samples: int = 6  # Sampling Ensemble: draws of the base template
    sample_temperature: float = 0.7
    alpha: float = 0.1  # SCP and Mondrian-SCP level
    mondrian_bins: int = 6
    coverage_alphas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5)
    bootstrap: int = 2000


@dataclass(frozen=True)
class StudyConfig:
    name: str = "study"
    output: str = "runs/study"
    seed: int = 0
    method: str = "prism"  # a registered method: prism | urw
    dataset: DatasetConfig = DatasetConfig()
    pool: PoolConfig = PoolConfig()
    design: DesignConfig = DesignConfig()
    tune: TuneSection = TuneSection()
    diagnostics: DiagnosticsConfig = DiagnosticsConfig()
    engine: EngineConfig = LlamaCppEngineConfig()
    collect: CollectConfig = CollectConfig()
    fit: FitConfig = FitConfig()
    urw: UrwConfig = UrwConfig()

    @property
    def scale(self) -> ScoreScale:
        return ScoreScale.parse(self.pool.scale)

    def to_dict(self) -> dict:
        """The study fields and the sections its method reads (what study.json and the log keep)."""
        from judgecal.methods.base import get_method

        reads = set(get_method(self.method).sections) | {"collect"}
        d = {k: v for k, v in asdict(self).items() if not isinstance(v, dict) or k in reads}
        settable = {f.name for f in config_fields(self.engine)}
        d["engine"] = {"kind": self.engine.kind, **{k: v for k, v in asdict(self.engine).items() if k in settable}}
        return d


def _section(cls, data: dict, where: str):
    names = {f.name: f for f in fields(cls)}
    for k in data:
        if k not in names:
            raise InputError(f"{where}.{k}", f"unknown field (known: {', '.join(names)})")
    return cls(**{k: typed_value(v, str(names[k].type), f"{where}.{k}") for k, v in data.items()})


def typed_value(value, annotation: str, where: str):
    """A config value checked against its field's annotation (``int | None``,
    ``tuple[str, ...]``, ``float``, ``dict``, ...): one line naming the field when it does not fit.
    A bare word where a list is expected is a list of that one word."""
    kinds = [a.strip() for a in annotation.split("|")]
    if value is None:
        if "None" in kinds:
            return None
        raise InputError(where, "must have a value")
    kind = next(k for k in kinds if k != "None")
    if kind.startswith("tuple"):
        items = [value] if isinstance(value, (str, int, float)) else value
        if not isinstance(items, (list, tuple)):
            raise InputError(where, f"must be a list, not {value!r}")
        inner = kind[kind.index("[") + 1:].split(",")[0].strip()
        return tuple(typed_value(x, inner, f"{where}[{i}]") for i, x in enumerate(items))
    checks = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "str": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
              "dict": lambda v: isinstance(v, dict)}
    if kind in checks and not checks[kind](value):
        article = "an" if kind == "int" else "a"
        raise InputError(where, f"must be {article} {kind}{' or nothing' if 'None' in kinds else ''}, not {value!r}")
    return float(value) if kind == "float" else value


SECTIONS = {  # every config section's typed reader; which a study reads is its method's ``sections``
    "dataset": DatasetConfig,
    "pool": PoolConfig,
    "design": DesignConfig,
    "tune": TuneSection,
    "diagnostics": DiagnosticsConfig,
    "collect": CollectConfig,
    "fit": FitConfig,
    "urw": UrwConfig,
}


def parse_config(data: dict, where: str = "config", runtime: bool = True) -> StudyConfig:
    """``runtime``: also check what running the engine needs (a model file, vLLM installed);
    stages after collect, and ``show``, read a study without running its judge. A section the
    study's method does not read is refused: a setting no one reads is a silent wrong result."""
    from judgecal.methods.base import COMMON_SECTIONS, get_method

    data = dict(data)
    study = data.pop("study", {})
    if "probes" in data:  # the older name of [pool] (also what `--set probes.x=...` writes)
        older, pool = data.pop("probes"), data.get("pool", {})
        both = sorted(set(older) & set(pool)) if isinstance(older, dict) and isinstance(pool, dict) else []
        if both:
            raise InputError(f"{where} [probes].{both[0]}", "also given in [pool] ([probes] is its older name)")
        data["pool"] = {**pool, **older} if isinstance(older, dict) else older
    study_fields = {f.name: str(f.type) for f in fields(StudyConfig) if f.name in ("name", "output", "seed", "method")}
    if not isinstance(study, dict):
        raise InputError(f"{where} [study]", f"must be a section (a table), not {study!r}")
    for k in study:
        if k not in study_fields:
            raise InputError(f"{where} [study].{k}", "unknown field (known: name, output, seed, method)")
    study = {k: typed_value(v, study_fields[k], f"{where} [study].{k}") for k, v in study.items()}
    if "name" in study:
        check_name(study["name"], f"{where} [study].name")
    method = get_method(study.get("method", "prism"))
    reads = (*COMMON_SECTIONS, *method.sections)
    for key in list(data):
        if key not in SECTIONS and key != "engine" and not isinstance(data[key], dict):  # `kind = ...` on top
            raise InputError(f"{where} {key}", "a field outside any section; put it under its section's header "
                             f"(known sections: study, {', '.join(SECTIONS)}, engine)")
        if key not in SECTIONS and key != "engine":
            raise InputError(f"{where} [{key}]", f"unknown section (known: study, {', '.join(SECTIONS)}, engine)")
        if key not in reads:
            raise InputError(f"{where} [{key}]", f"not read by a {method.name} study (it reads: "
                             f"{', '.join(f'[{r}]' for r in reads)}); remove it or set [study].method")
    kw = {}
    for key, cls in SECTIONS.items():
        if key in data:
            if not isinstance(data[key], dict):
                raise InputError(f"{where} [{key}]", f"must be a section (a table), not {data[key]!r}")
            if key == "diagnostics" and not data[key]:  # nothing would run: a section no one reads
                raise InputError(f"{where} [diagnostics]", "is empty, so no diagnostic runs; name them in "
                                 "run = [...] or remove the section")
            kw[key] = _section(cls, _scales_as_text(key, data[key]), f"{where} [{key}]")
    kw = _normalise_scales(kw, where)
    if "engine" in data:
        kw["engine"] = engine_config_from_dict(data["engine"], f"{where} [engine]", validate=runtime)
    cfg = StudyConfig(**study, **kw)
    if "engine" not in data and runtime:
        cfg.engine.validate(f"{where} [engine]")  # the default engine: its model file is there
    check_fields(cfg, where)
    check_engine_numbers(cfg.engine, f"{where} [engine]")
    check_output(cfg.output, f"{where} [study].output")
    if cfg.tune.storage:
        check_output(cfg.tune.storage, f"{where} [tune].storage", "Tune's trials")
    method.check_config(cfg, where)
    return cfg


@dataclass(frozen=True)
class Rule:
    """What one config field's value must be (:data:`RULES`). A number: at least ``low`` (above
    it when ``open_low``), at most ``high`` (below it when ``open_high``), and finite (NaN and
    infinities are refused everywhere). A list (a tuple field): ``nonempty`` refuses ``[]``,
    ``unique`` a value named twice, and each number in it is checked as above. None (an
    optional field left unset) passes."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    nonempty: bool = False
    unique: bool = False
    empty_hint: str = ""  # what to write instead of an empty list
    # tighter ends for new values: one an older judgecal took passes in a study folder's saved
    # config with a warning (the folder stays readable), and is refused where a study starts
    new_low: float | None = None
    new_high: float | None = None

    def check(self, value, at: str) -> None:
        if value is None:
            return
        if isinstance(value, tuple):
            if self.nonempty and not value:
                raise InputError(at, f"is an empty list{'; ' + self.empty_hint if self.empty_hint else ''}")
            if self.unique:
                seen = set()
                for x in value:
                    if x in seen:
                        raise InputError(at, f"{x!r} is named twice")
                    seen.add(x)
            for i, x in enumerate(value):
                self._number(x, f"{at}[{i}]")
            return
        self._number(value, at)

    def _number(self, v, at: str) -> None:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return  # text in a list of names; a field's type is typed_value's check
        text = f"{v:g}" if isinstance(v, float) else str(v)
        finite = not isinstance(v, float) or math.isfinite(v)
        if not finite and (self.low is None or self.high is None):  # a bounded range says it below
            raise InputError(at, f"must be a finite number, not {text}")
        low_ok = self.low is None or (v > self.low if self.open_low else v >= self.low)  # NaN fails both
        high_ok = self.high is None or (v < self.high if self.open_high else v <= self.high)
        if not (low_ok and high_ok):
            raise InputError(at, f"{self.describe()}, not {text}")
        if self.new_low is not None and v < self.new_low or self.new_high is not None and v > self.new_high:
            saved_setting(at, f"{self.describe()}, not {text}")

    def describe(self) -> str:
        lo, hi = (None if b is None else f"{b:g}" for b in (self.new_low if self.new_low is not None else self.low,
                                                             self.new_high if self.new_high is not None else self.high))
        if lo is not None and hi is not None:
            if self.open_low and self.open_high:
                return f"must lie between {lo} and {hi}"
            return f"must lie in {'(' if self.open_low else '['}{lo}, {hi}{')' if self.open_high else ']'}"
        if lo is not None:
            return f"must be above {lo}" if self.open_low else f"must be at least {lo}"
        return f"must be below {hi}" if self.open_high else f"must be at most {hi}"


_NAMES = dict(nonempty=True, unique=True)
# Every number (and every list that must hold something) of every section, checked when the
# config loads: one line naming the field, never a NaN model or a traceback after the collect.
# tests/test_config_checks.py checks that each numeric field of the dataclasses above is here.
# Checks that need more than the field (a design against its pool, folds against the groups
# a dataset has, diagnostics.orders <= 8) stay with the methods (``check_config``).
RULES: dict[str, Rule] = {
    "study.seed": Rule(0),
    "dataset.target": Rule(**_NAMES, empty_hint="leave it out for the dataset's default criteria"),
    "dataset.max_groups": Rule(1),
    "dataset.max_items_per_group": Rule(2),
    "pool.attributes": Rule(**_NAMES, empty_hint="leave it out for every attribute of the bank"),
    "pool.strengths": Rule(**_NAMES, empty_hint="name at least one (slight, standard, strong)"),
    "pool.families": Rule(unique=True),
    "pool.runs": Rule(1),
    "pool.temperature": Rule(0, 2),
    "pool.seed": Rule(0),
    "design.attributes": Rule(unique=True),
    "design.strengths": Rule(**_NAMES, empty_hint="leave it out for every pooled strength"),
    "design.families": Rule(unique=True),
    "design.screen_threshold": Rule(0),
    "design.screen_bootstrap": Rule(100),
    "design.confirmation": Rule(0, 1, open_high=True),
    "design.subsets_per_size": Rule(1),
    "diagnostics.bootstrap": Rule(100),
    "diagnostics.joint_pairs": Rule(0),
    "diagnostics.orders": Rule(2),  # and at most 8: check_diagnostics
    "diagnostics.pairs_per_group": Rule(1),
    "diagnostics.scales": Rule(**_NAMES),
    "collect.block_rows": Rule(1),
    "collect.part_rows": Rule(1),
    "collect.part_seconds": Rule(0, open_low=True),
    "collect.num_actors": Rule(1),
    "collect.max_attempts": Rule(1),
    "collect.fail_fast_requests": Rule(0, new_high=OUTCOMES_KEPT),
    "fit.gammas": Rule(0, nonempty=True, empty_hint="name at least one penalty"),
    "fit.folds": Rule(2),
    "fit.inner_folds": Rule(2),
    "fit.fold_seeds": Rule(1),
    "fit.bootstrap": Rule(1, new_low=100),  # fewer: a "95%" interval that missed its estimate (a user's finding)
    "fit.max_missing": Rule(0, 1),
    "urw.max_missing": Rule(0, 1),
    "urw.calibration_max_responses": Rule(1),
    "urw.evaluation": Rule(**_NAMES, empty_hint="name at least one pairwise set"),
    "urw.llmbar_subsets": Rule(**_NAMES, empty_hint="leave it out for all five"),
    "urw.max_pairs_per_dataset": Rule(1),
    "urw.criteria_per_prompt": Rule(1),
    "urw.samples": Rule(0),
    "urw.sample_temperature": Rule(0, 2),
    "urw.alpha": Rule(0, 1, open_low=True, open_high=True),
    "urw.mondrian_bins": Rule(1),
    "urw.coverage_alphas": Rule(0, 1, open_low=True, open_high=True, nonempty=True),
    "urw.bootstrap": Rule(1, new_low=100),
}


def check_fields(cfg: StudyConfig, where: str) -> None:
    """Every field of :data:`RULES` against its rule, in the table's order (one line naming
    the first that breaks it). Sections a study does not read hold their defaults, which pass."""
    for name, rule in RULES.items():
        section, field_ = name.split(".")
        rule.check(getattr(cfg if section == "study" else getattr(cfg, section), field_), f"{where} [{section}].{field_}")


def check_engine_numbers(engine: EngineConfig, where: str) -> None:
    """No NaN or infinity in any number of the engine's config (``timeout_s = inf``, a NaN
    bias); ranges are each engine's own ``validate``."""
    for f in config_fields(engine):
        value = getattr(engine, f.name)
        items = value.items() if isinstance(value, dict) else [("", value)]
        for key, v in items:
            if isinstance(v, float) and not math.isfinite(v):
                raise InputError(f"{where}.{f.name}{'.' + str(key) if key else ''}", f"must be a finite number, not {v:g}")


_PLAIN_NAME = re.compile(r"\w[\w .+-]{0,99}")


def check_name(name: str, where: str) -> None:
    """A name from a config is a name, never a path: letters, digits, ``_ . + -`` and spaces,
    starting with a letter or digit (so no ``/``, no ``..``, no control characters), at most
    100 characters. Where a name becomes a file, it stays inside the study's output."""
    if not _PLAIN_NAME.fullmatch(name):
        raise InputError(where, f"{name!r} is not a plain name: use letters, digits, '_', '.', '+', '-' and "
                         "spaces, starting with a letter or digit (no '/' or '..'), at most 100 characters")


def check_output(output: str, where: str, what_for: str = "the study's output") -> None:
    """A local output folder cannot be, or lie under, an existing file (``somefile.txt/out``)."""
    if not isinstance(output, str) or "://" in output and not output.startswith("file://"):
        return  # s3:// (the workspace checks its scheme)
    p = Path(output.removeprefix("file://")).expanduser().absolute()
    for q in (p, *p.parents):
        if q.exists() or q.is_symlink():
            if not q.is_dir():
                what = "is a file" if q == p else f"lies under {q}, which is a file"
                raise InputError(where, f"{output!r} {what}, not a folder; give a folder for {what_for}")
            return


_DASHES = str.maketrans({"\u2013": "-", "\u2014": "-", "\u2212": "-", "\u2010": "-", "\u2011": "-"})


def scale_range(text: str, where: str, checked: bool = False) -> tuple[float, float]:
    """``"1-5"`` (also written with an en dash, ``"1–5"``) -> (1.0, 5.0): a scale as the judge's
    is one (:class:`ScoreScale`; ``0-1000`` was taken with a warning, a user's finding); one
    line when it is not. ``checked``: the config's load checked it already."""
    try:
        scale = ScoreScale.parse(str(text).translate(_DASHES))
    except InputError as e:
        try:  # an older judgecal took any numbers, low below high: a folder it wrote stays readable
            lo, hi = (float(x) for x in str(text).translate(_DASHES).split("-"))
        except ValueError:
            raise InputError(where, e.problem) from None
        if not lo < hi:
            raise InputError(where, e.problem) from None
        if not checked:  # said once, where the config loads
            saved_setting(where, e.problem)
        return lo, hi
    return float(scale.lo), float(scale.hi)


_SCALE_FIELDS = {"dataset": "target_scale", "pool": "scale", "diagnostics": "scales"}


def _scale_pair(value):
    """``[1, 5]`` (two whole numbers, 0 or more) -> ``"1-5"``; anything else as it is, to be
    refused by the field's check quoting what was written (scales are whole numbers)."""
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)):
        return f"{value[0]}-{value[1]}"
    return value


def _scales_as_text(section: str, data: dict) -> dict:
    """A scale may be written as its two ends, ``[1, 5]``, as well as ``"1-5"``."""
    name = _SCALE_FIELDS.get(section)
    if name not in data:
        return data
    value = data[name]
    if name == "scales" and isinstance(value, (list, tuple)) and _scale_pair(value) == value:
        value = [_scale_pair(v) for v in value]  # a list of scales, each maybe a pair
    elif name != "scales":
        value = _scale_pair(value)
    return {**data, name: value}


def _normalise_scales(kw: dict, where: str) -> dict:
    """Scales written with an en dash (or another dash) mean the same as with a hyphen."""
    from dataclasses import replace

    if "pool" in kw and isinstance(kw["pool"].scale, str):
        kw["pool"] = replace(kw["pool"], scale=kw["pool"].scale.translate(_DASHES))
    d = kw.get("dataset")
    if d is not None and d.target_scale is not None:
        if not isinstance(d.target_scale, str):
            raise InputError(f"{where} [dataset].target_scale",
                             f"must be text such as \"1-5\" (or [1, 5]), not {d.target_scale!r}")
        scale_range(d.target_scale, f"{where} [dataset].target_scale")
        kw["dataset"] = replace(d, target_scale=d.target_scale.translate(_DASHES))
    return kw


def read_toml(p: Path) -> dict:
    """A TOML file (a byte-order mark accepted: Windows editors write one) holding no NUL, or one
    line saying why not. Every TOML a user gives is read so: configs, probe banks, templates."""
    try:
        text = p.read_text(encoding="utf-8-sig")
        data = tomllib.loads(text)
    except UnicodeDecodeError as e:
        raise InputError(str(p), f"does not parse ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(p), f"does not parse ({e}){_toml_hint(text, str(e))}") from None
    _refuse_nul(data, str(p))
    return data


def _refuse_nul(value, where: str, key: str = "", sep: str = ": ") -> None:
    """A "\\u0000" in a TOML text would end it early where it is sent (C strings): refused,
    naming the file (or the --set) and the key."""
    if isinstance(value, dict):
        for k, v in value.items():
            _refuse_nul(v, where, f"{key}.{k}" if key else str(k), sep)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _refuse_nul(v, where, f"{key}[{i}]", sep)
    elif isinstance(value, str) and "\x00" in value:
        raise InputError(f"{where}{sep}{key}" if key else where,
                         f"holds a NUL character (U+0000) at character {value.index(chr(0)) + 1}; remove it")


def _set_key_shown(key: str) -> str:
    """The key of a malformed --set as it may be shown: up to the first character no key holds,
    and a part with a digit (a pasted key, "sk-abc123") as "..."."""
    typed = key.strip()
    cut = re.match(r"[\w.\-]*", typed)[0]
    shown = ".".join("..." if re.search(r"\d", part) else part for part in cut.split("."))
    return shown + ("..." if cut != typed and not shown.endswith("...") else "")


def _toml_hint(text: str, error: str) -> str:
    """The likely cause where TOML's own message does not say it: an inline table continued on
    the next line (TOML 1.0, which Python reads, closes one on the line it opens; a user's
    finding, from a README example)."""
    m = re.search(r"at line (\d+)", error)
    lines = text.splitlines()
    if not m or not 1 <= int(m[1]) <= len(lines):
        return ""
    upto = "\n".join(lines[:int(m[1])])
    opened = upto.rfind("{") > upto.rfind("}") and "{" in lines[int(m[1]) - 1]
    return ("; an inline table { ... } must close on the line it opens: write it on one line, or as its own "
            "[section.key] table" if opened else "")


def load_config(path: str, sets: list[str] | None = None, runtime: bool = True) -> StudyConfig:
    """Read a study file and apply ``--set section.field=value`` overrides to it."""
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "no such config file")
    data = read_toml(p)
    if not data:  # a default study started by an empty file would run on data no one chose
        raise InputError(str(p), "the config is empty (no sections); a study names at least what it runs, e.g. "
                         f"[study] output and [dataset] (see {demo_config_path()}), or for URW [study] method = "
                         f"\"urw\" and [urw] (see {demo_config_path('urw_demo')})")
    for item in sets or []:
        apply_set(data, item)
    from judgecal.methods.base import get_method

    cfg = parse_with_sets(data, str(p), runtime, sets)
    method = get_method(cfg.method)
    section = getattr(method, "data_section", None)  # a method plugin written before the rule has none
    if section and not data.get(section):  # a default study on data no one chose (a user's finding)
        raise InputError(f"{p} [{section}]", f"{'is empty' if section in data else 'is missing'}; a study names the "
                         f"data it runs on: {method.data_hint} (see {demo_config_path(method.demo)})")
    check_relative_paths(cfg, p)
    return cfg


def parse_with_sets(data: dict, where: str, runtime: bool, sets: list[str] | None) -> StudyConfig:
    """:func:`parse_config`, a refusal of a field that a ``--set`` gave named as that flag (it
    named the study's file, where the value is not: a user's finding)."""
    try:
        return parse_config(data, where, runtime)
    except InputError as e:
        raise blame_set(e, sets) or e from None


def blame_set(e: InputError, sets: list[str] | None) -> InputError | None:
    """``e`` named as the ``--set`` flag that gave its field (``[design].subsets``, never one it
    merely starts: ``[design].subsets_per_size``), or None when no flag did."""
    key = field_key(e.where)
    return InputError(f"--set {key}", e.problem) if key and key in {set_key(i) for i in sets or []} else None


def local_paths(cfg: StudyConfig) -> list[tuple[str, str]]:
    """The config's fields that name a local file or folder, as (field, value): data, templates,
    a bank file, a template audit, a GGUF file (a shipped name or ``bundled`` is none)."""
    from judgecal.probes.bank import shipped_bank

    d, u = cfg.dataset, cfg.urw
    named = [("[dataset].path", d.path), ("[dataset].template", d.template),
             ("[pool].bank", None if shipped_bank(cfg.pool.bank) else cfg.pool.bank),
             ("[engine].model_path", getattr(cfg.engine, "model_path", None)),
             ("[urw].calibration_path", u.calibration_path), ("[urw].templates_audit", u.templates_audit),
             *((f"[urw].evaluation_paths.{k}", v) for k, v in u.evaluation_paths.items())]
    return [(f, v) for f, v in named if isinstance(v, str) and v and v != "bundled" and "://" not in v]


def check_relative_paths(cfg: StudyConfig, config_file: Path) -> None:
    """A relative path is read from the folder judgecal runs in (where a relative ``[study]
    output`` is written too), not from the config's folder. A config run from another folder
    whose own folder holds a file of that name is refused: which of the two was meant cannot
    be told, and reading the other one would be a silent wrong result."""
    here, base = Path.cwd().resolve(), config_file.parent.resolve()
    if here == base:
        return
    for name, value in local_paths(cfg):
        path = Path(value).expanduser()
        beside = base / path
        if path.is_absolute() or not beside.exists():
            continue
        used = here / path
        if used.exists() and used.resolve() == beside.resolve():
            continue
        found, too = ("", " too") if used.exists() else (", where there is none", "")  # "too" beside none misread
        raise InputError(f"{config_file} {name}", f"{value!r} is read from the folder judgecal runs in ({used}"
                         f"{found}), but the config's folder has one{too} ({beside}); give an absolute path, or "
                         f"a path from {here}")


STUDY_FILE = "study.json"
DATA_SUFFIXES = (".csv", ".tsv", ".tab", ".jsonl", ".ndjson", ".json", ".parquet", ".gz")


def read_study(ws) -> dict:
    """A study folder's ``study.json``. It is written whole (a temporary file renamed), so a
    damaged one was damaged from outside: the error says what to do (a user was left with it)."""
    return ws.read_json(STUDY_FILE, damaged="; restore it, or delete it and run `judgecal collect` with the study's "
                        "config again (the answers committed are kept and reused)")


PATHS_FROM = "paths_from"  # study.json: the folder collect ran in, which relative paths were read from


RAY_JOB_COPY = "runtime_resources/working_dir_files"  # where Ray unpacks a job's --working-dir
DATA_FIELDS = ("[dataset].path", "[urw].calibration_path", "[urw].evaluation_paths.")  # local_paths' names


def check_paths_from(cfg: StudyConfig, read_from, where: str, reads_data: bool, saved_config=None) -> None:
    """A study folder used from another folder than the one its collect ran in (``read_from``):
    a relative path named a file there. A file of that name here with other bytes is refused
    (collect would read it as the study's data without a word: a user's finding); a copy with
    the same bytes (the project copied elsewhere) is the same file. One missing here is refused
    where the command reads it: a data file where ``reads_data`` (collect, run, show, the batch
    commands; later stages use the study's copy), a template, bank or template audit at every
    stage (they enter the study's identity); never the model file (the runtime check names it).
    ``saved_config``: study.json's config, whose spelling of each path was read from
    ``read_from`` (a TOML naming the file otherwise: its own path was looked up there, and a
    refusal named a file the study never read; a user's finding)."""
    from judgecal.methods.base import files_fingerprint

    if not isinstance(read_from, str):  # a study collected before this was recorded
        return
    here, there = Path.cwd().resolve(), Path(read_from)
    if here == there or not there.is_dir():  # not there: moved, or collected on another machine
        return
    if any(RAY_JOB_COPY in str(p) for p in (here, there)):  # a Ray job runs in its upload's unpacked copy,
        return  # a new one for every upload of changed files: the old copy is no folder to run from
    for name, value in local_paths(cfg):
        path = Path(value).expanduser()
        used, collected = here / path, there / path
        was = _saved_value(saved_config, name)  # study.json's spelling of this file, where it names the same one
        if isinstance(was, str) and was and was != value and _same_file(there / Path(was).expanduser(), used):
            collected = there / Path(was).expanduser()
        if path.is_absolute() or not collected.exists():
            continue
        if used.exists():
            if used.resolve() == collected.resolve() or files_fingerprint([used]) == files_fingerprint([collected]):
                continue
            found = "another file"
        elif name == "[engine].model_path" or (name.startswith(DATA_FIELDS) and not reads_data):
            continue
        else:
            found = "no such file"
        raise InputError(f"{where} {name}", f"{value!r} is read from the folder judgecal runs in ({used}: "
                         f"{found}), but this study read {collected} at collect; run judgecal from {there}")


def _same_file(a: Path, b: Path) -> bool:
    """Two paths naming one file or folder (False where either cannot be resolved)."""
    try:
        return a.resolve() == b.resolve()
    except (OSError, ValueError):  # a loop of links, a NUL
        return False


def _saved_value(config, name: str):
    """A ``[section].field.key`` of a saved config dict (study.json's), or None."""
    if not isinstance(config, dict) or not name.startswith("["):
        return None
    section, _, rest = name[1:].partition("].")
    value = config if section == "study" else config.get(section)
    for key in rest.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def spelt_as_collected(current, saved, cfg: StudyConfig, read_from) -> object:
    """``current`` (this config's study identity or plan) with each local path of the config
    that ``saved`` (study.json's) spells otherwise but that names the same file (``data.csv``
    read from ``read_from``, the folder collect ran in, and its absolute path now) spelt as
    ``saved`` spells it: the study's files are compared, not their spellings (the absolute
    path, as the refusal of a relative one run elsewhere advises, was refused as "another
    dataset": a user's finding), and a results log records the folder's spelling."""
    if not isinstance(read_from, str):  # collected before the folder was recorded
        return current
    here, there = Path.cwd().resolve(), Path(read_from)
    paths = {value for _, value in local_paths(cfg)}

    def same(old, new) -> bool:
        return _same_file(there / Path(old).expanduser(), here / Path(new).expanduser())

    def align(new, old):
        if isinstance(new, dict) and isinstance(old, dict):
            return {k: align(v, old[k]) if k in old else v for k, v in new.items()}
        if isinstance(new, list) and isinstance(old, list) and len(old) == len(new):
            return [align(n, o) for n, o in zip(new, old)]
        if isinstance(new, str) and isinstance(old, str) and old != new and new in paths and same(old, new):
            return old
        return new

    return align(current, saved)


def names_a_config_file(target: str) -> bool:
    """A TOML file (it starts a study), not a study's folder or URI (it continues one)."""
    p = Path(target)
    return p.is_file() or p.suffix.lower() == ".toml"


def load_study(target: str, sets: list[str] | None = None, runtime: bool = True,
               reads_data: bool = False) -> StudyConfig:
    """A TOML file starts a study; a study's folder or URI (``runs/demo``, ``s3://bucket/x``)
    continues it with the config it was run with (``study.json``), so no later stage needs
    the TOML or the same ``--set`` flags again. ``--set`` still applies on top (for that
    command: only collect and run record the config); the output is the folder given (the
    study may have moved). Run from another folder than collect's, a relative path is checked
    (:func:`check_paths_from`; ``reads_data``: the command reads the data files)."""
    from judgecal.workspace import Workspace

    p = Path(target)
    if p.is_file() and p.suffix.lower() != ".toml":  # read as TOML: "does not parse" (a user's finding)
        if p.parent.name == "grid" and (p.parent.parent / STUDY_FILE).is_file():
            raise InputError(target, "is a grid variant's results log: `judgecal compare` reads it; the other "
                             f"commands take a study folder ({p.parent.parent})")
        if study := next((d for d in (p.parent, p.parent.parent) if (d / STUDY_FILE).is_file()), None):
            raise InputError(target, f"is a file of the study folder {study}: give the folder")  # its report, a part
        if p.suffix.lower() in DATA_SUFFIXES:
            raise InputError(target, "is a data file, not a study config (TOML) or a study folder: name it in a "
                             "config's [dataset] path (or [urw] evaluation_paths), then give that config")
    if names_a_config_file(target):
        return load_config(target, sets, runtime)
    try:
        ws = Workspace(target)
    except InputError:
        raise InputError(target, "neither a config file nor a study folder") from None
    if not ws.exists(STUDY_FILE):
        what = "no such file or folder" if not ws.is_s3 and not p.exists() else \
            "no such bucket" if ws.is_s3 and not ws.bucket_exists() else f"holds no {STUDY_FILE}"
        raise InputError(target, f"{what}: give a study config (TOML) to start a study, or the folder of one "
                         "that has run (its output)")
    saved = read_study(ws)
    if not isinstance(saved, dict) or not isinstance(saved.get("config"), dict):
        raise InputError(ws.join(STUDY_FILE), "records no config (written by an earlier judgecal); "
                         "run the stage with the study's TOML config")
    data = config_to_toml_dict(saved["config"])
    data["study"]["output"] = ws.uri
    # collected before seeded draws: its limits took the first rows, and its plan says so
    for section, draw in (("dataset", "item_draw"), ("urw", "pair_draw")):
        if isinstance(data.get(section), dict) and draw not in saved["config"].get(section, {}):
            data[section][draw] = "first"
    for item in sets or []:
        apply_set(data, item)
    if data["study"].get("output") != ws.uri and not _same_folder(data["study"].get("output"), ws.uri):
        # `report runs/A --output runs/B` read B's study as A's config (a user's finding)
        raise InputError("--output (study.output)", f"{target} is a study folder, which its stages read and write; "
                         f"to use {data['study'].get('output')}, give it instead of {target}, or give a study config "
                         "(TOML) with --output to collect there")
    with keeping_unread("kept: the study folder's saved config", sets):  # its collect took it; not a --set
        cfg = parse_with_sets(data, ws.join(STUDY_FILE), runtime, sets)
    check_paths_from(cfg, saved.get(PATHS_FROM), ws.join(STUDY_FILE), reads_data, saved.get("config"))
    return cfg


def _same_folder(a, b: str) -> bool:
    """Two spellings of one local folder (an S3 URI is compared as written)."""
    if not isinstance(a, str) or "://" in a or "://" in b:
        return False
    return _same_file(Path(a).expanduser(), Path(b).expanduser())


_MISSING = object()


def value_at(config: dict | None, key: str):
    """A ``section.field`` of a config dict as ``StudyConfig.to_dict()`` (and study.json) hold
    it (study fields at the top), JSON-normalised so tuples equal lists; a sentinel if absent."""
    section, _, name = key.partition(".")
    base = config if section == "study" else (config or {}).get(section)
    if not isinstance(base, dict) or name not in base:
        return _MISSING
    return json.loads(json.dumps(base[name], default=str))


def config_to_toml_dict(d: dict) -> dict:
    """``StudyConfig.to_dict()`` (as study.json and the results log keep it) -> the sections a
    TOML file has: study fields under ``[study]``, fields left unset (None) left out."""
    from judgecal.methods.base import COMMON_SECTIONS, get_method

    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in d.items()}
    out = {"study": {k: d.pop(k) for k in ("name", "output", "seed", "method") if k in d}}
    reads = {*COMMON_SECTIONS, *get_method(out["study"].get("method", "prism")).sections}
    reads |= {"probes"} if "pool" in reads else set()  # [pool]'s older name, where [pool] is read
    d = {k: v for k, v in d.items() if k in reads}  # study.json of earlier versions kept every section
    for section, values in d.items():
        out[section] = {k: v for k, v in values.items() if v is not None} if isinstance(values, dict) else values
    return out


def toml_value(v) -> str:
    """A config value as a TOML file writes it."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {toml_value(x)}"
                                for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return json.dumps(v, ensure_ascii=False)  # TOML takes UTF-8; JSON's \ud83d-style escapes it refuses


def apply_set(data: dict, item: str) -> None:
    """``a.b=c``: c is read as a TOML value (``4``, ``true``, ``["x"]``, ``{k = 1}``); a bare word
    (``generic``, ``runs/x``, ``1-5``: not starting with a bracket or a quote) is a string. One
    line naming the ``--set`` when it has no ``=`` or no value, names no known section or field,
    or its value is not TOML (``[1, 2``, ``"x``)."""
    at = "--set " + item.replace("\n", "\\n")  # one line, whatever the shell passed
    key, sep, raw = item.partition("=")
    path = [k.strip() for k in key.split(".")]
    if not sep or len(path) < 2 or not all(re.fullmatch(r"[\w\-]+", k) for k in path):
        # never the value, nor a key typed with it ("engine.api_key:sk-...", "api_key sk-...=="):
        # printed back whole before (a user's and a second reader's findings)
        raise InputError(f"--set {_set_key_shown(key)}" + ("=..." if sep else ""), "write it as section.field=value")
    if not raw.strip():
        raise InputError(at, 'no value after "=" (write text in quotes: field="")')
    # not its value: an api_key given so was printed back
    _check_set_path(data, path, "--set " + key.strip().replace("\n", "\\n"))
    try:
        parsed = tomllib.loads(f"v = {raw}")
        problem = "" if set(parsed) == {"v"} else "more than one value"
    except tomllib.TOMLDecodeError as e:
        parsed, problem = None, str(e)
    if not problem:
        value = parsed["v"]
        _refuse_nul(value, "--set", ".".join(path), " ")
    elif raw.strip()[0] in "[{\"'" or "\n" in raw:
        raise InputError(at, f"the value is not TOML ({problem}); write lists as [\"a\", 1], tables as {{k = 1}}, "
                         "text in quotes")
    else:
        value = raw
    if path[0] in ("pool", "probes") and len(path) > 1:  # one section, two names: set it where it is
        path[0] = next((k for k in ("pool", "probes") if k in data), "pool")
    node = data
    for k in path[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise InputError(at, f"{k!r} is not a section")
    if path == ["engine", "kind"] and node.get("kind") != value:
        if {node.get("kind"), value} == SAME_JUDGE_KINDS:  # one judge, synchronously or in batches: its model,
            from judgecal.engines.batch import JUDGE_FIELDS  # endpoint and key stay (a user had them reset)

            kept = {k: v for k, v in node.items() if k in JUDGE_FIELDS}
            node.clear()
            node.update(kept)
        else:
            node.clear()  # another engine: the old engine's fields do not apply to it
    node[path[-1]] = value
    if path == ["diagnostics", "run"] and value == []:  # diagnostics off for this command: the section
        data.pop("diagnostics")  # goes, as its refusal of other fields advises (--set cannot remove one)


SAME_JUDGE_KINDS = {"http", "openai-batch"}  # the same judge's identity and request ids (engines/batch.py)


def _check_set_path(data: dict, path: list[str], at: str) -> None:
    """The section and field a ``--set`` names exist (an engine's fields: those of the kind set
    so far); only a table field (``dataset.columns``) takes a third part (``dataset.columns.item_id``)."""
    from judgecal.engines.base import _REGISTRY

    section, name = path[0], path[1]
    if section == "engine":
        node = data.get("engine")
        kind = node.get("kind") if isinstance(node, dict) else None
        if name != "kind" and kind in _REGISTRY:
            known = {f.name: str(f.type) for f in config_fields(_REGISTRY[kind])}
            if name not in known:
                secret = "; a key is never a config field: export it and name the variable in api_key_env" \
                    if "key" in name.lower() and "api_key_env" in known else ""
                raise InputError(at, f"unknown field for engine {kind!r} (known: kind, {', '.join(sorted(known))})"
                                 + secret)
            if len(path) > 2 and not known[name].startswith("dict"):
                raise InputError(at, f"[engine].{name} is not a table; write engine.{name}=value")
        return
    if section == "study":
        known = {f.name: str(f.type) for f in fields(StudyConfig) if f.name in ("name", "output", "seed", "method")}
    elif section in SECTIONS or section == "probes":
        known = {f.name: str(f.type) for f in fields(SECTIONS["pool" if section == "probes" else section])}
    else:
        raise InputError(at, f"unknown section {section!r} (known: study, {', '.join(SECTIONS)}, engine)")
    if name not in known:
        raise InputError(at, f"unknown field {name!r} of [{section}] (known: {', '.join(known)})")
    if len(path) > 2 and (known[name] != "dict" or len(path) > 3):
        what = "is not a table" if known[name] != "dict" else "holds no tables"
        raise InputError(at, f"[{section}].{name} {what}; write {section}.{name}"
                         f"{'.key' if known[name] == 'dict' else ''}=value")


def demo_config_path(name: str = "demo") -> str:
    return str(resources.files("judgecal").joinpath("configs", f"{name}.toml"))
