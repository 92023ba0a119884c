"""Warnings about how a user's items are laid out: their scale and their groups.

Each is one line on stderr, not an error: a layout that is usually a mistake (a group column
that holds the model, two label rounds stacked) may be meant. Items are ranked within a
group (one question, article or prompt) and folds split by group, so a group that is not
one source, or a source split over groups, changes what the table measures without a word.
"""

from __future__ import annotations

import json
import sys

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal.datasets.items import TargetSpec
from judgecal.schemas import HUMAN_PREFIX

SHARED_TEXT_CHARS = 200  # a copied story or summary is longer; stock refusals and short answers repeat by right


def layout_warnings(items: pa.Table, target: TargetSpec) -> list[str]:
    """Every warning below that applies, once each; of the three about groups and sources
    (:func:`mixed_sources`, :func:`split_sources`, :func:`shared_content`) only the first that
    holds: one mistake, one line. Collect keeps them with the items (:func:`with_warnings`) and
    evaluate in the results log (said once at collect, the report lost them: a user's finding)."""
    df = items.select(["item_id", "group_id", "source", "content"]).to_pandas()
    # compared as read: one prompt in composed and decomposed Unicode (NFC, NFD) was two, and a
    # prompt in two groups went unsaid (a user's finding)
    df["source"], df["content"] = (df[c].str.normalize("NFC").str.strip() for c in ("source", "content"))
    groups = mixed_sources(df) or split_sources(df) or shared_content(df)
    return [w for w in (narrow_range(items, target), groups, repeated_items(df)) if w]


def sample_warnings(sample: pa.Table) -> list[str]:
    """The warnings about the items a study analyses (after ``max_groups`` and
    ``max_items_per_group``): :func:`pair_groups`."""
    return [w for w in (pair_groups(sample.select(["group_id"]).to_pandas()),) if w]


def say_warnings(texts: list[str], where: str) -> None:
    """Each of :func:`layout_warnings`' texts a ``judgecal: warning:`` line naming the file."""
    for text in texts:
        print(f"judgecal: warning: {where}: {text}", file=sys.stderr, flush=True)


WARNINGS_KEY = b"judgecal.data_warnings"  # in items.parquet's schema metadata: what collect said of the file


def with_warnings(items: pa.Table, said: list[str]) -> pa.Table:
    """``items`` carrying the warnings collect said of the whole file (the report shows those,
    not warnings worked out anew on the sample: a second reader's finding)."""
    return items.replace_schema_metadata({**(items.schema.metadata or {}), WARNINGS_KEY: json.dumps(said).encode()})


def said_warnings(items: pa.Table) -> list[str]:
    """The warnings :func:`with_warnings` put on a collected items table (none before it)."""
    return json.loads((items.schema.metadata or {}).get(WARNINGS_KEY, b"[]"))


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _in_several_groups(rows: pd.DataFrame, column: str) -> tuple[int, pd.DataFrame]:
    """How many texts of ``column`` are in more than one group, and the rows of the first."""
    n = rows.groupby(column, sort=False)["group_id"].nunique()
    several = n[n > 1]
    return len(several), rows[rows[column] == several.index[0]] if len(several) else rows.iloc[:0]


def _in_two_groups(rows: pd.DataFrame) -> str:
    """``items 'a', 'b' in groups 'g1', 'g2'``: the first item of each of the first two groups of
    ``rows`` (the rows sharing one text), never two items of one group."""
    first = rows.drop_duplicates("group_id").head(2)
    return f"items {', '.join(map(repr, first['item_id']))} in groups {', '.join(map(repr, first['group_id']))}"


def narrow_range(items: pa.Table, target: TargetSpec) -> str | None:
    """Scores that stay more than half a point from an end of the target scale they declared:
    1-4 scores declared on 1-5 are accepted, but said so; raters' means (1.333 on 1-7) are not
    (it fired on every averaged dataset, so it was read as noise: a user's finding). A target
    of several columns names the ones that stay narrow (a 1-3 column averaged with 1-5 ones
    was said of the mean alone: a user's finding)."""
    width = target.scale_max - target.scale_min  # half a point; less on a 0-1 scale, more on 0-100 (1-98 of
    margin = max(min(0.5, 0.1 * width), 0.05 * width)  # a slider warned: a user's finding)

    def span(y) -> tuple[float, float] | None:
        lo, hi = float(pc.min(y).as_py()), float(pc.max(y).as_py())
        return (lo, hi) if lo > target.scale_min + margin or hi < target.scale_max - margin else None

    if (mean := span(items["target"])) is None:
        return None
    narrow = {c: s for c in target.criteria if len(target.criteria) > 1
              and (s := span(items[HUMAN_PREFIX + c])) is not None}
    if len(target.criteria) > 1 and not narrow:  # each column spans the scale: raters' extremes on other items
        return None
    columns = "".join(f"; {c} only spans {lo:g}-{hi:g}" for c, (lo, hi) in narrow.items())
    return (f"the target {target.describe()} only spans {mean[0]:g}-{mean[1]:g} in the data{columns}; check "
            "[dataset].target_scale (it must be the scale the scores were given on)")


def mixed_sources(df: pd.DataFrame) -> str | None:
    """Groups that hold items of different source texts: a group column that is something else
    than the prompt (a model, a rater) passed without a word (a user's finding)."""
    n = df[df["source"] != ""].groupby("group_id", sort=False)["source"].nunique()
    mixed = n[n > 1]
    if not len(mixed):
        return None
    hold = "holds" if len(mixed) == 1 else "hold"
    return (f"{len(mixed)} of {len(n)} groups {hold} items with different source texts "
            f"(first: group {mixed.index[0]!r}, {int(mixed.iloc[0])} sources); items are ranked within a group, one "
            "question, article or prompt: check [dataset].columns.group_id")


def split_sources(df: pd.DataFrame) -> str | None:
    """A source text in several groups: held-out groups share a question, article or prompt
    with the groups fitted on. Dialogue contexts copied under two ids, and items grouped by
    their own id, passed without a word (a user's findings)."""
    count, first = _in_several_groups(df[df["source"] != ""], "source")
    if not count:
        return None
    return (f"{_plural(count, 'source text is', 'source texts are')} in several groups (first: "
            f"{_in_two_groups(first)}); folds split by group, so a question, article or prompt may be fitted on "
            "and tested on: group by the source ([dataset].columns.group_id or group_by)")


def shared_content(df: pd.DataFrame) -> str | None:
    """A response text of ``SHARED_TEXT_CHARS`` or more that is an item of several groups: a
    copy may be fitted on and tested on (a story filed under two prompt ids passed without a
    word: a user's finding). Short answers repeat by right."""
    count, first = _in_several_groups(df[df["content"].str.len() >= SHARED_TEXT_CHARS], "content")
    if not count:
        return None
    return (f"{_plural(count, 'response text is an item', 'response texts are items')} of several groups (first: "
            f"{_in_two_groups(first)}); folds split by group, so a copy may be fitted on and tested on")


REPEATED_SHARE = 0.1  # SummEval's systems wrote 52 identical summaries of 1,600 (3%); stacked rounds are far more


def repeated_items(df: pd.DataFrame) -> str | None:
    """Items that repeat another item of their group, source and response alike, at least
    ``REPEATED_SHARE`` of the items: a second round of labels stacked under new ids ran as
    more items (a user's finding); a few repeats are systems' identical answers."""
    dup = df[df.duplicated(["group_id", "source", "content"], keep=False)]
    twins = dup.groupby(["group_id", "source", "content"], sort=False)["item_id"].agg(list)
    extra = len(dup) - len(twins)  # the rows beyond one per text
    if not extra or extra < REPEATED_SHARE * len(df):
        return None
    first, group = twins.iloc[0], twins.index[0][0]
    its = "its" if extra == 1 else "their"
    return (f"{_plural(extra, 'item repeats', 'items repeat')} another item of {its} group, source and "
            f"response text alike (first: items {first[0]!r}, {first[1]!r} in group {group!r}); "
            "labels of two rounds, or of two raters, as rows of their own? keep one row per item (average "
            "the labels); two systems' identical answers need nothing")


def pair_groups(df: pd.DataFrame) -> str | None:
    """Half the groups or more of two items: a within-group Spearman there is -1, 0 or +1, the
    order of one pair, so a mean over a few such groups reads as a confident figure (a
    user's finding: "+1.000 (all groups equal 1, n = 4)" of 4 groups of 2)."""
    sizes = df.groupby("group_id", sort=False).size()
    pairs = int((sizes == 2).sum())
    if pairs == 0 or 2 * pairs < len(sizes):
        return None
    return (f"{pairs} of {len(sizes)} groups have 2 items: within such a group Spearman is -1, 0 or +1 (the order "
            "of one pair), so the table's means move in large steps; more items per group, or more groups, say more")
