"""The one config format (TOML) that drives the CLI, the jobs and the demo.

Sections: [study] name/output/seed/method, [dataset] and [probes] (PRISM), [urw] (URW),
[engine] (``kind`` picks the typed engine config), [collect], [fit]. Every field has a default except where a dataset needs
one; unknown fields are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path

from judgecal.calibrate.prism import DEFAULT_GAMMAS, REPRESENTATIONS
from judgecal.engines.base import EngineConfig, engine_config_from_dict
from judgecal.engines.llamacpp import LlamaCppEngineConfig
from judgecal.errors import InputError
from judgecal.scale import ScoreScale


@dataclass(frozen=True)
class DatasetConfig:
    name: str = "summeval"  # summeval | hanna | usr | generic
    path: str = "bundled"
    target: tuple[str, ...] | None = None  # criteria averaged into the target; None: the dataset's default
    target_scale: str | None = None  # e.g. "1-5"; None: the dataset's published scale
    max_groups: int | None = None
    max_items_per_group: int | None = None
    columns: dict = field(default_factory=dict)  # generic loader: canonical name -> file column
    task: str = "summary"  # generic loader: which prompt template


@dataclass(frozen=True)
class ProbesConfig:
    bank: str = "style"
    attributes: tuple[str, ...] | None = None  # None: every attribute of the bank
    strengths: tuple[str, ...] = ("standard",)
    runs: int = 1
    scale: str = "1-5"


@dataclass(frozen=True)
class CollectConfig:
    block_rows: int = 64
    num_actors: int = 1


@dataclass(frozen=True)
class FitConfig:
    gammas: tuple[float, ...] = DEFAULT_GAMMAS
    representation: str = "paired"
    folds: int = 5
    inner_folds: int = 5
    score_field: str = "expected"
    bootstrap: int = 2000


@dataclass(frozen=True)
class UrwConfig:
    """URW studies: calibration labels, evaluation pairs, criteria, templates and weighting."""

    calibration: str = "infobench"  # infobench (bundled) | generic
    calibration_path: str = "bundled"
    calibration_columns: dict = field(default_factory=dict)  # generic: prompt/response/criterion/label
    calibration_max_responses: int | None = None
    evaluation: tuple[str, ...] = ("llmbar",)  # llmbar (bundled) | rm-bench | judgebench
    evaluation_paths: dict = field(default_factory=dict)  # dataset -> folder or file
    llmbar_subsets: tuple[str, ...] | None = None  # None: all five
    max_pairs_per_dataset: int | None = None
    criteria_per_prompt: int = 3  # generated criteria (K) for prompts without human ones
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
    method: str = "prism"  # prism | urw
    dataset: DatasetConfig = DatasetConfig()
    probes: ProbesConfig = ProbesConfig()
    engine: EngineConfig = LlamaCppEngineConfig()
    collect: CollectConfig = CollectConfig()
    fit: FitConfig = FitConfig()
    urw: UrwConfig = UrwConfig()

    @property
    def scale(self) -> ScoreScale:
        return ScoreScale.parse(self.probes.scale)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["engine"] = {"kind": self.engine.kind, **asdict(self.engine)}
        return d


def _section(cls, data: dict, where: str):
    names = {f.name: f for f in fields(cls)}
    for k in data:
        if k not in names:
            raise InputError(f"{where}.{k}", f"unknown field (known: {', '.join(names)})")
    kw = {}
    for k, v in data.items():
        kw[k] = tuple(v) if isinstance(v, list) else v
    return cls(**kw)


def parse_config(data: dict, where: str = "config") -> StudyConfig:
    data = dict(data)
    study = data.pop("study", {})
    sections = {
        "dataset": DatasetConfig,
        "probes": ProbesConfig,
        "collect": CollectConfig,
        "fit": FitConfig,
        "urw": UrwConfig,
    }
    kw = {}
    for key in list(data):
        if key not in sections and key != "engine":
            raise InputError(f"{where} [{key}]", f"unknown section (known: study, {', '.join(sections)}, engine)")
    for key, cls in sections.items():
        if key in data:
            kw[key] = _section(cls, data[key], f"{where} [{key}]")
    if "engine" in data:
        kw["engine"] = engine_config_from_dict(data["engine"], f"{where} [engine]")
    for k in study:
        if k not in ("name", "output", "seed", "method"):
            raise InputError(f"{where} [study].{k}", "unknown field (known: name, output, seed, method)")
    if study.get("method", "prism") not in ("prism", "urw"):
        raise InputError(f"{where} [study].method", f"unknown method {study['method']!r} (use prism or urw)")
    cfg = StudyConfig(**study, **kw)
    cfg.scale  # noqa: B018 - validates the scale early
    if cfg.fit.representation not in REPRESENTATIONS:
        raise InputError(f"{where} [fit].representation", f"unknown value {cfg.fit.representation!r}")
    if cfg.probes.runs < 1:
        raise InputError(f"{where} [probes].runs", "must be at least 1")
    return cfg


def load_config(path: str, overrides: dict | None = None) -> StudyConfig:
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "no such config file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise InputError(str(p), f"does not parse ({e})") from None
    for k, v in (overrides or {}).items():
        data.setdefault("study", {})[k] = v
    return parse_config(data, str(p))


def demo_config_path(name: str = "demo") -> str:
    return str(resources.files("judgecal").joinpath("configs", f"{name}.toml"))
