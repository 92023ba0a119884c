"""URW data: loaders to the rubric table (response x criterion) and the pairs table.

Pairwise sets: LLMBar (five subsets; bundled, MIT), RM-Bench (chat / code / safety; chosen[i]
vs rejected[i], i = 0..2, the "diagonal" pairing), JudgeBench; from ``../shared/data`` or any
path. Criterion-level labels: InfoBench expert "all agree" (bundled), the calibration set.
Pairwise sets carry no criteria: their rubric rows get criteria later (human ones where a
set has them, else generated, see :mod:`judgecal.rubrics.criteria`). A user's own pairs
(:func:`load_generic_pairs`, CSV / JSONL / Parquet through a column mapping) may bring their
own criteria per prompt.

Every pair loader refuses a duplicate pair id and a label that names neither response (listing
the accepted values); it excludes, and counts in ``PairSet.excluded``, pairs labelled as ties
(ties are not supported in preference labels) and pairs whose two responses are identical
(they cannot be ranked); a user's pairs with an empty response are excluded and counted too
(public preference sets hold blank responses). Rows in messages count from 1 (the N-th record).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from importlib import resources
from pathlib import Path

import pyarrow as pa

from judgecal.datasets.loaders import _read_json, _read_jsonl, _read_table, cell_id, cell_text, missing_columns
from judgecal.datasets.layout import REPEATED_SHARE
from judgecal.datasets.text import blank, storable
from judgecal.datasets.text import column_label as _column
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


TIE = "tie"
EXCLUDED = {TIE: "labelled as ties excluded: ties are not supported in preference labels",
            "identical": "whose two responses are identical excluded: they cannot be ranked",
            "empty": "with an empty response excluded: an empty response has nothing to judge"}


class PairSet:
    """A pairwise dataset: the pairs table plus one rubric-less row per response, the criteria a
    file brings for its prompts (group_id -> criteria) and the pairs excluded, counted by
    (dataset, reason)."""

    def __init__(self):
        self.pairs: dict[str, list] = {f.name: [] for f in PAIRS}
        self.responses: dict[str, tuple[str, str, str]] = {}  # item_id -> (group_id, prompt, response)
        self.criteria: dict[str, list[str]] = {}
        self.excluded: Counter = Counter()
        self.first_excluded: dict[tuple[str, str], str] = {}  # (dataset, reason) -> where the first was
        self.warnings: list[str] = []  # one line each, for the caller's log ("judgecal: warning: ...")
        self.where: dict[str, str] = {}  # pair_id -> where it was first seen (file and row)

    def add(self, dataset: str, key: str, prompt: str, a: str, b: str, preferred: str, where: str,
            accepted: str = "a, b") -> str | None:
        """Add one pair; returns its group id, or None when it is excluded (a tie, an empty
        response, identical responses)."""
        if not isinstance(prompt, str) or not isinstance(a, str) or not isinstance(b, str):
            raise InputError(where, "prompt and both responses must be text")
        for text, role in ((prompt, "prompt"), (a, "response_a"), (b, "response_b")):  # every pair loader's texts
            storable(text, where, role, role)
        pair_id = f"{dataset}/{key}"
        if pair_id in self.where:
            first = self.where[pair_id]
            file, _, row = first.rpartition(" row ")
            same_file = row and where.startswith(file + " row ")
            raise InputError(where, f"duplicate pair id {key!r} (first at {'row ' + row if same_file else first})")
        self.where[pair_id] = where
        if preferred not in ("a", "b", TIE):
            raise InputError(where, f"label {preferred!r} names neither response (accepted: {accepted})")
        group = f"{dataset}/{_sha(prompt)}"
        ia, ib = f"{group}/{_sha(a)}", f"{group}/{_sha(b)}"
        # public preference sets hold blank responses: a pair with one is counted, not refused
        reason = TIE if preferred == TIE else "empty" if blank(a) or blank(b) else \
            "identical" if ia == ib else None
        if reason:
            self.excluded[(dataset, reason)] += 1
            self.first_excluded.setdefault((dataset, reason), where)
            return None
        for i, text in ((ia, a), (ib, b)):
            self.responses[i] = (group, prompt, text)
        for k, v in zip(PAIRS.names, (pair_id, dataset, group, ia, ib, preferred)):
            self.pairs[k].append(v)
        return group

    def exclusions(self) -> list[str]:
        """One line per (dataset, reason): "llmbar/Natural: 2 pairs labelled as ties excluded: ...
        (first: FILE row 7)"."""
        return [f"{ds}: {n} pair{'s' if n != 1 else ''} {EXCLUDED[reason]}"
                + (f" (first: {self.first_excluded[ds, reason]})" if (ds, reason) in self.first_excluded else "")
                for (ds, reason), n in self.excluded.items()]

    def tables(self) -> tuple[pa.Table, dict[str, tuple[str, str, str]]]:
        return pa.Table.from_pydict(self.pairs, schema=PAIRS), self.responses


def opposite_labels(dataset, group_id, item_a, item_b, preferred) -> dict[str, int]:
    """Pairs that repeat with the opposite label: the same two responses to one prompt (in
    either order) preferred both ways. Counted per dataset (every pair row involved); the pairs
    are kept (each label is someone's judgement, and a method gets one of them right), but the
    count goes to the log and the results, so they are never kept silently."""
    rows = list(zip(dataset, group_id, item_a, item_b, preferred))
    winners: dict = {}
    for ds, g, a, b, p in rows:
        winners.setdefault((ds, g, frozenset((a, b))), set()).add(a if p == "a" else b)
    out: Counter = Counter()
    for ds, g, a, b, _ in rows:
        if len(winners[(ds, g, frozenset((a, b)))]) > 1:
            out[ds] += 1
    return dict(out)


def repeated_pairs(dataset, group_id, item_a, item_b, preferred) -> dict[str, int]:
    """Pairs beyond the first of the same two responses to one prompt with the same label, per
    dataset where they are at least ``REPEATED_SHARE`` of its pairs: a second export round
    stacked under new ids (31% of a file) moved accuracy by 0.13 without a word (a user's
    finding); public sets hold a few repeats by right."""
    seen: Counter = Counter()
    pairs: Counter = Counter()
    for ds, g, a, b, p in zip(dataset, group_id, item_a, item_b, preferred):
        seen[(ds, g, frozenset((a, b)), a if p == "a" else b)] += 1
        pairs[ds] += 1
    extra: Counter = Counter()
    for (ds, *_), n in seen.items():
        extra[ds] += n - 1
    return {ds: n for ds, n in extra.items() if n and n >= REPEATED_SHARE * pairs[ds]}


def opposite_label_lines(counts: dict[str, int], repeated: dict[str, int] | None = None) -> list[str]:
    """One warning line per dataset of :func:`opposite_labels`, then of :func:`repeated_pairs`."""
    return [f"warning: {ds}: {n} pairs repeat the same two responses to one prompt with the opposite label "
            "(preferred both ways); kept, so a method gets one of each right: check the labels"
            for ds, n in counts.items()] + [
        f"warning: {ds}: {n} pair{'s repeat' if n > 1 else ' repeats'} another pair's prompt, two responses and "
        "label (labels of two rounds, or two exports, as rows of their own?); each counts as a pair: keep one row "
        "per pair" for ds, n in (repeated or {}).items()]


def load_llmbar(path: str | None = None, subsets=LLMBAR_SUBSETS) -> PairSet:
    """LLMBar from its folder (``llmbar_<Subset>.json`` per subset, labels 1 or 2), or bundled."""
    ps = PairSet()
    bundled = path in (None, "bundled")
    if not bundled and not Path(path).is_dir():
        what = "is a file" if Path(path).exists() else "does not exist"
        raise InputError("[urw].evaluation_paths.llmbar", f"{path} {what}; give the folder that holds "
                         "llmbar_<Subset>.json for each subset")
    for sub in subsets:
        if sub not in LLMBAR_SUBSETS:
            raise InputError("[urw].llmbar_subsets", f"unknown subset {sub!r} (known: {', '.join(LLMBAR_SUBSETS)})")
        p = _bundled(f"llmbar_{sub}.json.gz") if bundled else Path(path) / f"llmbar_{sub}.json"
        if not p.is_file():
            have = sorted(q.name for q in Path(path).glob("llmbar_*.json"))
            raise InputError(str(p), f"missing: the folder has no subset {sub} (it has: {', '.join(have) or 'none'}); "
                             "add it or list the ones you have in [urw].llmbar_subsets")
        rows = _read_json(p)
        if not isinstance(rows, list):
            raise InputError(str(p), "must hold a JSON array of pairs")
        for i, row in enumerate(rows):
            where = f"{p} row {i + 1}"
            try:
                ps.add(f"llmbar/{sub}", str(i), row["input"], row["output_1"], row["output_2"],
                       {1: "a", 2: "b"}.get(row["label"], row["label"]), where, accepted="1, 2")
            except (KeyError, TypeError) as e:
                raise InputError(where, f"missing field {e}" if isinstance(e, KeyError) else "not a JSON object") \
                    from None
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
                           "a", f"{p} row {i + 1}")
            except (KeyError, IndexError, TypeError) as e:
                raise InputError(f"{p} row {i + 1}", f"malformed RM-Bench row ({e!r})") from None
    return ps


def load_judgebench(path: str) -> PairSet:
    ps = PairSet()
    files = sorted(Path(path).glob("judgebench_*.jsonl")) if Path(path).is_dir() else [Path(path)]
    if not files or not files[0].exists():
        raise InputError(str(path), "no JudgeBench files (judgebench_*.jsonl)")
    for p in files:
        for i, row in enumerate(_read_jsonl(p)):
            try:
                pref = {"A>B": "a", "B>A": "b", "A=B": TIE, "B=A": TIE}.get(row["label"], row["label"])
                ps.add("judgebench", str(row["pair_id"]), row["question"], row["response_A"], row["response_B"], pref,
                       f"{p} row {i + 1}", accepted="A>B, B>A (A=B: a tie, excluded)")
            except KeyError as e:
                raise InputError(f"{p} row {i + 1}", f"missing field {e}") from None
    return ps


def load_infobench(path: str | None = None) -> pa.Table:
    """Criterion-level expert labels: one rubric row per (instruction, response, question)."""
    p = _bundled("infobench_expert_all_agree.jsonl.gz") if path in (None, "bundled") else Path(path)
    rows = {f.name: [] for f in RUBRIC}
    counter: dict[str, int] = {}
    for i, r in enumerate(_read_jsonl(p)):
        try:
            label = r["label"]
            if label not in (0, 1) or isinstance(label, float):
                raise InputError(f"{p} row {i + 1}", f"label {label!r} is not 0 or 1")
            for c in ("instruction", "response", "question"):  # a number or half an emoji: a traceback (a reader's)
                if not isinstance(r[c], str):  # (the bundled set holds a response of a zero-width space: kept)
                    raise InputError(f"{p} row {i + 1}", f"field {c!r} holds {r[c]!r:.60}, not text")
                storable(r[c], f"{p} row {i + 1}", c, c)
            group = f"infobench/{_sha(r['instruction'])}"
            item = f"{group}/{_sha(r['response'])}"
            k = counter[item] = counter.get(item, -1) + 1
            for name, v in zip(RUBRIC.names, (item, group, r["instruction"], r["response"], f"q{k}", r["question"],
                                              "human", label)):
                rows[name].append(v)
        except KeyError as e:
            raise InputError(f"{p} row {i + 1}", f"missing field {e}") from None
    return pa.Table.from_pydict(rows, schema=RUBRIC)


def load_generic_rubric(path: str, columns: dict[str, str]) -> pa.Table:
    """A user's criterion-level table; ``columns`` maps prompt/response/criterion/label to its columns.
    Every row needs a label (the calibration fits on them), read by :func:`_label_cell`."""
    p = Path(path)
    need = ["prompt", "response", "criterion", "label"]
    for k in columns:
        if k not in need:
            raise InputError(f"[urw].calibration_columns.{k}", "unknown column name (known: prompt, response, "
                             "criterion, label)")
    t = _read_table(p)
    missing = [columns.get(c, c) for c in need if columns.get(c, c) not in t]
    if missing:
        raise missing_columns(str(p), missing, list(t))
    lab = columns.get("label", "label")
    rows = {f.name: [] for f in RUBRIC}
    seen: dict[tuple[str, str, str], tuple[int, int]] = {}  # (prompt, response, criterion) -> (row, label)
    for i, (pr, rs, cr, lb) in enumerate(zip(*(t[columns.get(c, c)] for c in need))):
        where = f"{p} row {i + 1}"
        pr, rs, cr = (cell_text(v, where, columns.get(c, c), c) for v, c in zip((pr, rs, cr), need))
        if _label_empty(lb):  # the first empty one: earlier rows passed
            n = sum(map(_label_empty, t[lab]))
            raise InputError(where, f"{_column(lab, 'label')} is empty ({n} of {len(t[lab])} rows have no label); "
                             "every calibration criterion needs a label, 0 or 1")
        lb = _label_cell(lb, where, lab)
        # one criterion of one response is one calibration point: a repeat would count twice,
        # and with the other label it would be both (a user's finding)
        key = (_plain(pr), _plain(rs), _plain(cr))
        # a criterion in other case is the same question: with both labels it was both (a user's finding)
        same = (key[0], key[1], key[2].casefold())
        if same in seen:
            row, label, text = seen[same]
            case = "" if text == key[2] else ", but for its case"
            also = f" with the other label ({label} there, {lb} here)" if label != lb else ""
            raise InputError(where, f"repeats row {row} (the same prompt, response and criterion{case}){also}; "
                             "keep one")
        seen[same] = (i + 1, lb, key[2])
        group = f"generic/{_sha(pr)}"
        item = f"{group}/{_sha(rs)}"
        # named by its words, not its row: numbered in file order, a re-export in another row
        # order asked every criterion anew (a user's finding); unique in its response (repeats are refused)
        for name, v in zip(RUBRIC.names, (item, group, pr, rs, f"q{_sha(key[2])}", cr, "human", lb)):
            rows[name].append(v)
    return pa.Table.from_pydict(rows, schema=RUBRIC)


# A label as text: one text cell makes a CSV column text, so its 1s arrive as "1"; true/false
# because a CSV column of only true/false arrives as booleans.
LABEL_TEXT = {"0": 0, "1": 1, "0.0": 0, "1.0": 1, "false": 0, "true": 1}


def _label_empty(value) -> bool:
    """An empty cell: null, NaN (a gap in a float column) or blank text."""
    return value is None or isinstance(value, float) and math.isnan(value) or isinstance(value, str) and \
        not value.strip()


def _label_cell(value, where: str, column: str) -> int:
    """A calibration label, 0 or 1, whatever type its column was read as (a cell's meaning never
    depends on its neighbours)."""
    if isinstance(value, str) and value.strip().lower() in LABEL_TEXT:
        return LABEL_TEXT[value.strip().lower()]
    if isinstance(value, (bool, int, float)) and value in (0, 1):
        return int(value)
    # "yes"/"no" are not read: a column may say yes to a problem ([urw].label_means); say what is
    raise InputError(where, f"label {value!r} is not 0 or 1 (column {column!r}; also read: true, false); write 1 "
                     "where the criterion is met and 0 where not")


PAIR_COLUMNS = ("prompt", "response_a", "response_b", "preferred", "pair_id", "criteria")
DEFAULT_LABELS = {"a": "a", "b": "b", TIE: TIE}


def load_generic_pairs(path: str, columns: dict | None = None, labels: dict | None = None,
                       dataset: str = "generic") -> PairSet:
    """A user's pairs: CSV / JSONL / JSON / Parquet, one pair per record.

    ``columns`` maps the canonical names to the file's columns (a name not mapped is looked up as
    itself): ``prompt``, ``response_a``, ``response_b``, ``preferred`` (required); ``pair_id``
    (optional; default: the row number); ``criteria`` (optional: a list of criteria, or text with
    one criterion per line; prompts without any get generated criteria). ``labels`` maps the
    file's values of ``preferred`` to ``a``, ``b`` or ``tie`` (default: a, b, tie, any case);
    ties are excluded and counted."""
    columns, p = dict(columns or {}), Path(path)
    for k in columns:
        if k not in PAIR_COLUMNS:
            raise InputError(f"[urw].evaluation_columns.{k}", f"unknown column name (known: {', '.join(PAIR_COLUMNS)})")
    mapping = {str(k): v for k, v in (labels or DEFAULT_LABELS).items()}
    for k, v in mapping.items():
        if v not in ("a", "b", TIE):
            raise InputError(f"[urw].evaluation_labels.{k}", f"maps to {v!r}; use \"a\", \"b\" or \"tie\"")
    col = {c: columns.get(c, c) for c in PAIR_COLUMNS}
    t = _read_table(p, text_columns=(col["pair_id"], col["preferred"]))
    missing = [col[c] for c in PAIR_COLUMNS[:4] if col[c] not in t]
    missing += [col[c] for c in ("pair_id", "criteria") if c in columns and col[c] not in t]
    if missing:
        raise missing_columns(str(p), missing, list(t))
    others = set(col.values())
    if "criteria" not in columns and col["criteria"] not in t and (near := criteria_like([c for c in t
                                                                                         if c not in others])):
        # a misspelt criteria column was left unread and every prompt got generated criteria (a user's finding)
        raise InputError(str(p), f"has no column 'criteria' but has {near!r}: name it criteria or map it "
                         f"([urw].evaluation_columns = {{criteria = {near!r}}}); without criteria every prompt's "
                         f"criteria are generated (rename {near!r} for that)")
    ps, n = PairSet(), len(t[col["prompt"]])
    own: dict[str, tuple[list[str], str]] = {}  # group -> (criteria, where they were given)
    first_row: dict[str, int] = {}  # group of a kept pair -> its first row
    joined: list[tuple[int, str]] = []  # criteria with several question marks: several on one line?
    for i in range(n):
        where = f"{p} row {i + 1}"
        prompt = cell_text(t[col["prompt"]][i], where, col["prompt"], "prompt")
        a, b = (cell_text(t[col[c]][i], where, col[c], c, optional=True) for c in ("response_a", "response_b"))
        key = cell_id(t[col["pair_id"]][i], where, col["pair_id"], "pair_id") if col["pair_id"] in t else str(i + 1)
        raw = t[col["preferred"]][i]
        value = None if raw is None else str(raw).strip()
        label = mapping.get(value, mapping.get((value or "").lower())) if labels else \
            mapping.get((value or "").lower())
        accepted = ", ".join(mapping) + " (set [urw].evaluation_labels to map yours)"
        if label is None and _label_empty(raw):
            raise InputError(where, f"{_column(col['preferred'], 'preferred')} is empty; accepted values: {accepted}")
        if label is None:
            raise InputError(where, f"label {raw!r} in column {col['preferred']!r} is not one of the accepted values: "
                             f"{accepted}")
        if (kept := ps.add(dataset, key, prompt, a, b, label, where, accepted)) is not None:
            first_row.setdefault(kept, i + 1)
        crit = _criteria_cell(t[col["criteria"]][i], where, col["criteria"]) if col["criteria"] in t else []
        joined += [(i + 1, c) for c in crit if c.count("?") > 1]
        if crit:
            g = f"{dataset}/{_sha(prompt)}"
            # the same criteria in another order are the same (ids by words: the order asks nothing
            # anew); refused as "differ" they read as a wrong refusal (a user's finding)
            if g in own and sorted(map(_plain, own[g][0])) != sorted(map(_plain, crit)):
                other = sorted(set(map(_plain, crit)) ^ set(map(_plain, own[g][0])))
                what = f": {other[0][:60]!r} is in one list only" if other else " (a criterion repeated in one)"
                raise InputError(where, f"criteria differ from those given for the same prompt at {own[g][1]}{what}")
            own.setdefault(g, (crit, f"row {i + 1}"))
    ps.criteria = {g: c for g, (c, _) in own.items()}
    if joined:  # "A?; B?; C?" is judged as one criterion (a user's finding): say so, it may be meant
        ps.warnings.append(f"{p}: {len(joined)} {'criterion holds' if len(joined) == 1 else 'criteria hold'} "
                           f"several question marks (first: row {joined[0][0]}, "
                           f"{joined[0][1][:60]!r}); each is judged as one criterion: a cell takes one criterion "
                           "per line or a JSON list")
    bare = [r for g, r in first_row.items() if g not in own]
    if own and bare:  # the column is in use, so an empty cell may be a slip: say who gets generated criteria
        ps.warnings.append(f"{p}: {len(bare)} of {len(first_row)} prompts have an empty criteria cell "
                           f"(first: row {min(bare)}); they get generated criteria")
    return ps


def _plain(text: str) -> str:
    """A text as compared for sameness: its words, whatever the spaces around and between them
    and whichever Unicode form (NFC, NFD) writes them, as :func:`_words` compares for leakage."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def criterion_ids(criteria: list[str], prefix: str) -> list[str]:
    """A response's criteria named by their words, not their place in its list: numbered by
    place, the same criteria listed in another order were asked anew, and a simulated verifier
    read them as others (a user's finding). A criterion listed twice is two criteria, as URW
    counts them: the repeat is numbered (``#2``)."""
    seen: dict[str, int] = {}
    out = []
    for c in criteria:
        key = _plain(c)
        seen[key] = seen.get(key, 0) + 1
        out.append(f"{prefix}{_sha(key)}" + (f"#{seen[key]}" if seen[key] > 1 else ""))
    return out


def _words(text: str) -> str:
    """A text as compared for leakage: its words, lowercased, without the punctuation around
    them (not inside: "2+3" and "2*3", "3.5" and "3,5" stay apart; not dashes: "-1" is not
    "1"); a text of punctuation only stays itself. Unicode composed and decomposed forms (NFC,
    NFD: "é" as one character or two) are one text (a user's finding)."""
    text = unicodedata.normalize("NFC", text)
    words = [w.strip(_AROUND) for w in text.casefold().split()]
    return " ".join(w for w in words if w) or " ".join(text.casefold().split())


_AROUND = "".join(chr(c) for c in range(0x3000) if unicodedata.category(chr(c)).startswith("P")
                  and unicodedata.category(chr(c)) != "Pd")  # punctuation but dashes, as str.strip takes it


# "1. ", "2) ", "- ", "* ", "• ", or the marker alone on its line ("3." was the criterion "3.": a user's finding)
LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}\s*[.)]|[-*•])(?:\s+|$)")


CRITERIA_WORDS = ("rubric", "rubrics", "checklist", "criterion")  # what else a criteria column is called


def criteria_like(names: list[str]) -> str | None:
    """The first column whose whole name is ``criteria`` misspelt (a letter or two), in another
    case, or a synonym; a longer name that holds the word (``criteria_met``) is another column."""
    import difflib

    for name in names:
        low = str(name).strip().lower()
        if low in CRITERIA_WORDS or (abs(len(low) - len("criteria")) <= 1
                                     and difflib.SequenceMatcher(None, low, "criteria").ratio() >= 0.8):
            return name
    return None


def _criteria_cell(value, where: str, column: str) -> list[str]:
    """A criteria cell: a list of criteria, text holding a JSON list of them (a CSV's way of
    writing a list), or text with one criterion per line; empty: none."""
    if value is None:
        return []
    text = value.strip() if isinstance(value, str) else None
    # '["' starts a JSON list whatever follows (a missing "]" was one criterion: a user's finding);
    # other text in brackets ("[Format] A table? [Y/N]") is criteria by line unless it parses
    if text is not None and (text.startswith('["') or (text.startswith("[") and text.endswith("]"))):
        try:  # read as one criterion, '["Is it polite?", ...]' was judged as written (a user's finding)
            value = json.loads(text)
        except json.JSONDecodeError as e:
            # meant as a JSON list (one line, or bracketed at both ends): judging it as text would
            # be wrong; several lines of which the first merely starts '["' are criteria by line
            if text.startswith('["') and (text.endswith("]") or "\n" not in text):
                raise InputError(where, f"column {column!r} (criteria) looks like a JSON list but is not one "
                                 f"({e.msg}); give a JSON list of strings or one criterion per line") from None
    if isinstance(value, str):
        # a line's number or bullet is not the criterion: "1. Is it short?" and the same criterion
        # in a JSON list were other criteria, prompts and request ids (a user's finding)
        items = [LIST_MARKER.sub("", line) for line in value.splitlines()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
        empty = [k for k, x in enumerate(items, 1) if isinstance(x, str) and blank(x)]
        if 0 < len(empty) < len(items):  # an empty item beside criteria is a slip (the rewards refuse it too)
            raise InputError(where, f"column {column!r} (criteria) item {empty[0]} of {len(items)} is empty")
    else:
        raise InputError(where, f"column {column!r} (criteria) holds {value!r}; give a list or one criterion per line")
    out = []
    for x in items:
        if not isinstance(x, str):
            raise InputError(where, f"column {column!r} (criteria) holds {x!r}, not text")
        if not blank(x) and x.strip() not in out:  # invisible marks alone are no criterion
            out.append(storable(x.strip(), where, column, "criteria"))
    if not out and isinstance(value, str) and not blank(value):  # "1.\n2." read as no criteria sent the
        # prompt to generated ones without a word (a second reader's finding)
        raise InputError(where, f"column {column!r} (criteria) holds list markers but no criterion "
                         f"({value.strip()[:40]!r}); give one criterion per line, or leave the cell empty for "
                         "generated criteria")
    return out


def check_disjoint(calibration: pa.Table, evaluation_prompts: list[str], evaluation_responses: list[str],
                   evaluation_where: list[str] | None = None, calibration_where: str | None = None) -> None:
    """Refuse to run when a calibration prompt or response appears in the evaluation set; each
    shared text counted once (a prompt comes once per evaluation response). ``evaluation_where``
    (one per evaluation response: its pair's file and row) and ``calibration_where`` (the
    calibration file) name where the first shared text is."""
    # compared by their words, whatever the case and punctuation: a space added at either end, a
    # lowercased copy or a dropped full stop hid a shared prompt (users' findings)
    cal_p, cal_r = ({_words(x) for x in calibration[c].to_pylist()} for c in ("prompt", "response"))
    prompts = [x for x in dict.fromkeys(evaluation_prompts) if _words(x) in cal_p]
    responses = [x for x in dict.fromkeys(evaluation_responses) if _words(x) in cal_r]
    if prompts or responses:
        counts = " and ".join(f"{len(shared)} shared {what}{'s' if len(shared) != 1 else ''}"
                              for shared, what in ((prompts, "prompt"), (responses, "response")) if shared)
        first = json.dumps((prompts or responses)[0][:60])
        if evaluation_where:  # the overlap named a text only; a user had to search both files (a user's finding)
            k = (evaluation_prompts if prompts else evaluation_responses).index((prompts or responses)[0])
            first += f", at {evaluation_where[k]}"
            first += f" and in the calibration set {calibration_where}" if calibration_where else ""
        raise InputError("calibration/evaluation", f"overlapping sets: {counts} (first: {first}); calibration must "
                         "be disjoint from evaluation")

