"""URW data: loaders to the rubric table (response x criterion) and the pairs table.

Pairwise sets: LLMBar (five subsets; bundled, MIT), RM-Bench (chat / code / safety; chosen[i]
vs rejected[i], i = 0..2, the "diagonal" pairing), JudgeBench; from ``../shared/data`` or any
path. Criterion-level labels: InfoBench expert "all agree" (bundled), the calibration set.
Pairwise sets carry no criteria: their rubric rows get criteria later (human ones where a
set has them, else generated, see :mod:`judgecal.rubrics.criteria`).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pyarrow as pa

from judgecal.datasets.loaders import _read_json, _read_jsonl, _read_table
from judgecal.errors import InputError
from judgecal.ids import stable_hash
from judgecal.schemas import PAIRS, RUBRIC

LLMBAR_SUBSETS = ("Natural", "Adversarial_Neighbor", "Adversarial_GPTInst", "Adversarial_GPTOut", "Adversarial_Manual")
RMBENCH_FILES = {"chat": "chat_filtered.json", "code": "code_filtered.json",
                 "safety-refuse": "safety-refuse_filtered.json", "safety-response": "safety-response_filtered.json"}


def _bundled(name: str) -> Path:
    return Path(str(resources.files("judgecal.rubrics").joinpath("data", name)))


def _sha(*parts: str) -> str:
    return stable_hash(*parts, n=12)


class PairSet:
    """A pairwise dataset: the pairs table plus one rubric-less row per response."""

    def __init__(self):
        self.pairs: dict[str, list] = {f.name: [] for f in PAIRS}
        self.responses: dict[str, tuple[str, str, str]] = {}  # item_id -> (group_id, prompt, response)

    def add(self, dataset: str, key: str, prompt: str, a: str, b: str, preferred: str, where: str):
        if not isinstance(prompt, str) or not isinstance(a, str) or not isinstance(b, str):
            raise InputError(where, "prompt and both responses must be text")
        if preferred not in ("a", "b"):
            raise InputError(where, f"label {preferred!r} names neither response")
        group = f"{dataset}/{_sha(prompt)}"
        ia, ib = f"{group}/{_sha(a)}", f"{group}/{_sha(b)}"
        if ia == ib:
            return  # identical responses cannot be ranked
        for i, text in ((ia, a), (ib, b)):
            self.responses[i] = (group, prompt, text)
        for k, v in zip(PAIRS.names, (f"{dataset}/{key}", dataset, group, ia, ib, preferred)):
            self.pairs[k].append(v)

    def tables(self) -> tuple[pa.Table, dict[str, tuple[str, str, str]]]:
        return pa.Table.from_pydict(self.pairs, schema=PAIRS), self.responses


def load_llmbar(path: str | None = None, subsets=LLMBAR_SUBSETS) -> PairSet:
    ps = PairSet()
    for sub in subsets:
        if sub not in LLMBAR_SUBSETS:
            raise InputError("llmbar subsets", f"unknown subset {sub!r} (known: {', '.join(LLMBAR_SUBSETS)})")
        p = _bundled(f"llmbar_{sub}.json.gz") if path in (None, "bundled") else Path(path) / f"llmbar_{sub}.json"
        for i, row in enumerate(_read_json(p)):
            try:
                ps.add(f"llmbar/{sub}", str(i), row["input"], row["output_1"], row["output_2"],
                       {1: "a", 2: "b"}.get(row["label"], str(row["label"])), f"{p} row {i}")
            except KeyError as e:
                raise InputError(f"{p} row {i}", f"missing field {e}") from None
    return ps


def load_rmbench(path: str, subsets=tuple(RMBENCH_FILES)) -> PairSet:
    ps = PairSet()
    for sub in subsets:
        p = Path(path) / RMBENCH_FILES[sub]
        if not p.exists():
            raise InputError(str(p), "no such file")
        for i, row in enumerate(_read_json(p)):
            try:
                for k in range(3):  # the diagonal pairing: same style on both sides
                    ps.add(f"rm-bench/{sub}", f"{row['id']}/{k}", row["prompt"], row["chosen"][k], row["rejected"][k],
                           "a", f"{p} row {i}")
            except (KeyError, IndexError) as e:
                raise InputError(f"{p} row {i}", f"malformed RM-Bench row ({e!r})") from None
    return ps


def load_judgebench(path: str) -> PairSet:
    ps = PairSet()
    files = sorted(Path(path).glob("judgebench_*.jsonl")) if Path(path).is_dir() else [Path(path)]
    if not files or not files[0].exists():
        raise InputError(str(path), "no JudgeBench files (judgebench_*.jsonl)")
    for p in files:
        for i, row in enumerate(_read_jsonl(p)):
            try:
                pref = {"A>B": "a", "B>A": "b"}.get(row["label"], row["label"])
                ps.add("judgebench", row["pair_id"], row["question"], row["response_A"], row["response_B"], pref,
                       f"{p} line {i + 1}")
            except KeyError as e:
                raise InputError(f"{p} line {i + 1}", f"missing field {e}") from None
    return ps


def load_infobench(path: str | None = None) -> pa.Table:
    """Criterion-level expert labels: one rubric row per (instruction, response, question)."""
    p = _bundled("infobench_expert_all_agree.jsonl.gz") if path in (None, "bundled") else Path(path)
    rows = {f.name: [] for f in RUBRIC}
    counter: dict[str, int] = {}
    for i, r in enumerate(_read_jsonl(p)):
        try:
            label = r["label"]
            if label not in (0, 1):
                raise InputError(f"{p} line {i + 1}", f"label {label!r} is not 0 or 1")
            group = f"infobench/{_sha(r['instruction'])}"
            item = f"{group}/{_sha(r['response'])}"
            k = counter[item] = counter.get(item, -1) + 1
            for name, v in zip(RUBRIC.names, (item, group, r["instruction"], r["response"], f"q{k}", r["question"],
                                              "human", label)):
                rows[name].append(v)
        except KeyError as e:
            raise InputError(f"{p} line {i + 1}", f"missing field {e}") from None
    return pa.Table.from_pydict(rows, schema=RUBRIC)


def load_generic_rubric(path: str, columns: dict[str, str]) -> pa.Table:
    """A user's criterion-level table; ``columns`` maps prompt/response/criterion/label to its columns."""
    p = Path(path)
    if not p.exists():
        raise InputError(str(p), "no such file")
    t = _read_table(p)
    need = ["prompt", "response", "criterion"]
    missing = [columns.get(c, c) for c in need if columns.get(c, c) not in t.column_names]
    if missing:
        raise InputError(str(p), f"missing column(s) {', '.join(missing)}")
    lab = columns.get("label", "label")
    labels = t[lab].to_pylist() if lab in t.column_names else [None] * t.num_rows
    rows = {f.name: [] for f in RUBRIC}
    counter: dict[str, int] = {}
    for i, (pr, rs, cr, lb) in enumerate(zip(*(t[columns.get(c, c)].to_pylist() for c in need), labels)):
        if lb not in (None, 0, 1):
            raise InputError(f"{p} row {i}", f"label {lb!r} is not 0 or 1")
        group = f"generic/{_sha(str(pr))}"
        item = f"{group}/{_sha(str(rs))}"
        k = counter[item] = counter.get(item, -1) + 1
        for name, v in zip(RUBRIC.names, (item, group, str(pr), str(rs), f"q{k}", str(cr), "human", lb)):
            rows[name].append(v)
    return pa.Table.from_pydict(rows, schema=RUBRIC)


def check_disjoint(calibration: pa.Table, evaluation_prompts: list[str], evaluation_responses: list[str]) -> None:
    """Refuse to run when a calibration prompt or response appears in the evaluation set."""
    cal_p, cal_r = set(calibration["prompt"].to_pylist()), set(calibration["response"].to_pylist())
    shared = [x for x in evaluation_prompts if x in cal_p] + [x for x in evaluation_responses if x in cal_r]
    if shared:
        first = json.dumps(shared[0][:60])
        raise InputError("calibration/evaluation", f"overlapping sets: {len(shared)} shared prompts or responses "
                         f"(first: {first}); calibration must be disjoint from evaluation")

