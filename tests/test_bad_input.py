"""Bad input: one line naming the file, row or field; exit code 2; nothing written; stopped
before Ray starts and before the first judge call.

Table-driven: each case writes a small file and a config and runs the CLI in process
(``judgecal.cli.main``, with ``StudyRun.begin``/``collect`` patched to fail the test if a bad
input ever gets that far); one case goes through a real subprocess to check the whole
process's stderr. Rows count from 1 (the N-th data record)."""

import json
import subprocess

import pytest

from conftest import ROOT, judgecal_cmd, write_config
from judgecal import cli
from judgecal.errors import InputError
from judgecal.methods.runner import StudyRun, StudyRunner


class ReachedPipeline(AssertionError):
    pass


@pytest.fixture
def no_pipeline(monkeypatch):
    """Any input that passes every check reaches ``begin`` (the first write) or ``collect``
    (Ray): make that an error the tests can see."""
    def stop(*a, **k):
        raise ReachedPipeline("the input passed every check and reached the pipeline")

    monkeypatch.setattr(StudyRun, "begin", stop)
    monkeypatch.setattr(StudyRun, "collect", stop)


def run_main(tmp_path, capfd, config_text: str, stage: str = "run", sets=()):
    out = tmp_path / "out"
    study = f'[study]\noutput = "{out}"\n'
    text = config_text.replace("[study]\n", study, 1) if "[study]\n" in config_text else study + config_text
    cfg = write_config(tmp_path / "c.toml", text)
    argv = [stage, str(cfg)] + [a for s in sets for a in ("--set", s)]
    code = cli.main(argv)
    captured = capfd.readouterr()
    return code, captured.err, out


# -- files ------------------------------------------------------------------------------
def ok_rows():
    return [{"id": f"i{k}", "doc": f"d{k // 2}", "source": f"article {k // 2}", "text": f"text {k}",
             "quality": 1 + k % 5} for k in range(8)]


def jsonl(tmp, rows, name="items.jsonl"):
    p = tmp / name
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return p


def csv(tmp, rows, name="items.csv", encoding="utf-8", bom=False):
    p = tmp / name
    cols = list(rows[0])
    lines = [",".join(cols)] + [",".join("" if r[c] is None else str(r[c]) for c in cols) for r in rows]
    p.write_bytes(("\ufeff" if bom else "").encode("utf-8") + "\n".join(lines).encode(encoding))
    return p


def generic(path, extra="", task='task = "summary"\n', scale='target_scale = "1-5"\n', columns=None):
    columns = columns or '{item_id = "id", group_id = "doc", content = "text"}'
    return f"""[dataset]
name = "generic"
path = "{path}"
target = ["quality"]
{scale}{task}columns = {columns}
{extra}
[engine]
kind = "simulated"
[fit]
folds = 2
inner_folds = 2
"""


def with_row(k, **change):
    rows = ok_rows()
    rows[k] = {**rows[k], **change}
    return rows


def pair_rows():
    return [{"id": f"p{k}", "prompt": f"Write line {k}.", "response_a": f"line {k}", "response_b": f"no {k}",
             "preferred": "a" if k % 2 else "b"} for k in range(6)]


def urw(pairs_path=None, extra="", evaluation='["generic"]'):
    paths = f'evaluation_paths = {{generic = "{pairs_path}"}}\n' if pairs_path else ""
    return f"""[study]
method = "urw"
[urw]
calibration_max_responses = 3
evaluation = {evaluation}
{paths}{extra}
[engine]
kind = "simulated"
"""


def urw_generic(tmp, rows, name="pairs.jsonl", extra='evaluation_columns = {pair_id = "id"}\n'):
    p = jsonl(tmp, rows, name) if name.endswith(".jsonl") else csv(tmp, rows, name)
    return urw(p, extra)


def llmbar_folder(tmp, subsets=("Natural",), rows=None):
    folder = tmp / "llmbar"
    folder.mkdir(exist_ok=True)
    rows = rows or [{"input": f"Say {k}.", "output_1": f"{k}", "output_2": f"not {k}", "label": 1} for k in range(3)]
    for s in subsets:
        (folder / f"llmbar_{s}.json").write_text(json.dumps(rows), encoding="utf-8")
    return folder


STAY = '"Stay," she said.'  # a TSV value that starts with a quote and goes on after it


def raw(tmp, name, text):
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return p


def llmbar_label_3(tmp, second=None):
    rows = [{"input": "a?", "output_1": "x", "output_2": "y", "label": 1},
            second or {"input": "b?", "output_1": "x", "output_2": "y", "label": 3}]
    folder = llmbar_folder(tmp, rows=rows)
    return urw(evaluation='["llmbar"]', extra=f'llmbar_subsets = ["Natural"]\nevaluation_paths = {{llmbar = "{folder}"}}\n')


def hanna_file(tmp, story):
    """A HANNA-format file of the user's own (name = "hanna" with a path)."""
    rows = [{"story_id": f"s{k}", "prompt": f"p{k // 2}", "story": story if k == 1 else f"story {k}",
             "ratings": {"coherence": [1 + k % 5]}} for k in range(8)]
    p = jsonl(tmp, rows, "hanna.jsonl")
    return f'[dataset]\nname = "hanna"\npath = "{p}"\ntarget = ["coherence"]\n' + SIM


CAL_ROW = {"prompt": "p", "response": "r", "criterion": "Is it c?", "label": 1}


def calibration(path):
    return urw(evaluation='["llmbar"]', extra=f'calibration = "generic"\ncalibration_path = "{path}"\n')


def _sep_line(p):
    p.write_text("sep=;\n" + p.read_text(encoding="utf-8").replace(",", ";"), encoding="utf-8")
    return p


def latin1_csv(tmp):
    rows = ok_rows()
    rows[1]["text"] = "caf\u00e9 au lait"
    return generic(csv(tmp, rows, encoding="latin-1"))


def long_item(tmp, words=400, n_ctx=300):
    rows = with_row(3, text="word " * words)
    return generic(jsonl(tmp, rows)).replace('[engine]\nkind = "simulated"',
                                             f'[engine]\nkind = "llamacpp"\nn_ctx = {n_ctx}')


def empty_bank(tmp):
    bank = tmp / "empty.toml"
    bank.write_text('name = "empty"\nwordings = {}\nattributes = []\n')
    return f'[probes]\nbank = "{bank}"\n[engine]\nkind = "simulated"\n'


def no_neutral_bank(tmp):
    from test_config_checks import GOOD_BANK  # the good custom bank of the bank checks, less its [neutral]

    return write_config(tmp / "mine.toml", GOOD_BANK.split("[neutral]")[0])


SUMMEVAL = '[dataset]\nname = "summeval"\nmax_groups = 4\nmax_items_per_group = 2\n[engine]\nkind = "simulated"\n'
SIM = '[engine]\nkind = "simulated"\n'

# name -> (build(tmp) -> config text, the expected fragment(s) of the one stderr line)
CASES = {
    # items files
    "half an emoji in a text": (lambda t: generic(jsonl(t, with_row(2, text="cut \ud83d"))),
                                "items.jsonl row 3 (item i2): column 'text' (content) holds a broken character "
                                "(U+D83D, half of a UTF-16 pair: a text cut inside an emoji?) at character 5; "
                                "remove or mend it"),
    "a NUL in a text": (lambda t: generic(jsonl(t, with_row(2, text="a\x00b"))),
                        "items.jsonl row 3 (item i2): column 'text' (content) holds a NUL character (U+0000) at "
                        "character 2"),
    "a text of invisible characters": (lambda t: generic(jsonl(t, with_row(2, text="\u200b\ufeff\u200f"))),
                                       "items.jsonl row 3 (item i2): column 'text' (content) is empty (invisible "
                                       "characters only: zero-width, byte-order or direction marks)"),
    "missing column": (lambda t: generic(jsonl(t, [{k: v for k, v in r.items() if k != "text"} for r in ok_rows()])),
                       "items.jsonl: missing column(s) text"),
    "null score": (lambda t: generic(jsonl(t, with_row(3, quality=None))),
                   "items.jsonl row 4 (item i3): human score 'quality' is missing or NaN"),
    "a rater's blank among several target columns": (
        lambda t: generic(jsonl(t, [{**r, "r2": None if k == 3 else 2} for k, r in enumerate(ok_rows())]))
        .replace('target = ["quality"]', 'target = ["quality", "r2"]'),
        "items.jsonl row 4 (item i3): human score 'r2' is missing or NaN; the target is the mean of "
        "[dataset].target's columns, each given for every item (a column per rater, some left blank? average the "
        "raters into one column first)"),
    "two ids apart by a space at the end": (lambda t: generic(jsonl(t, with_row(1, id="i0 "))),
                                            "items.jsonl row 2: column 'id' (item_id) 'i0 ' and 'i0' (row 1) differ "
                                            "only in spaces "
                                            "at their ends; one item or two? make them equal or distinct"),
    "two group ids apart by a space at the end": (
        lambda t: generic(jsonl(t, with_row(3, doc="d1 "))),
        "items.jsonl row 4: column 'doc' (group_id) 'd1 ' and 'd1' (row 3) differ only in spaces at their ends; "
        "one group or two? make them equal or distinct"),
    # the refusal said group_id where [dataset].group_by had named the user's column
    "two group_by values apart by a space at the end": (
        lambda t: generic(jsonl(t, with_row(3, doc="d1 ")), extra='group_by = "doc"',
                          columns='{item_id = "id", content = "text"}'),
        "items.jsonl row 4: column 'doc' (group_id) 'd1 ' and 'd1' (row 3) differ only in spaces at their ends; "
        "one group or two? make them equal or distinct"),
    # fitted on constant labels, a table of NaN, a report that crashed (a user's finding)
    "one label for every item": (lambda t: generic(jsonl(t, [{**r, "quality": 3} for r in ok_rows()])),
                                 "items.jsonl: target: quality on [1, 5] is the same for every item of each of the 4 "
                                 "groups: there is nothing to rank (every group would be left out); check the labels "
                                 "and [dataset].target"),
    "each group's items labelled alike": (
        lambda t: generic(jsonl(t, [{**r, "quality": 1 + k // 2} for k, r in enumerate(ok_rows())])),
        "items.jsonl: target: quality on [1, 5] is the same for every item of each of the 4 groups"),
    "raters' scores as a list": (lambda t: generic(jsonl(t, with_row(3, quality=[4, 5, 3]))),
                                 "items.jsonl row 4 (item i3): human score 'quality' is [4, 5, 3] (list), not a number "
                                 "(raters' scores? average them into one number per cell)"),
    # a JSON "4" is read as a CSV cell "4" is (it was refused); a word is not a score
    "score as a word": (lambda t: generic(jsonl(t, with_row(3, quality="good"))),
                        "items.jsonl row 4 (item i3): human score 'quality' is 'good', not a number"),
    # the judge-scale line came before the data's refusal: two lines (a user's finding)
    "score as a word, target on another scale than the judge's": (
        lambda t: generic(jsonl(t, with_row(3, quality="good")), scale='target_scale = "1-10"\n'),
        "items.jsonl row 4 (item i3): human score 'quality' is 'good', not a number"),
    # a cell of spaces: "'  ', not a number" beside "missing or NaN" for an n/a cell (a user's finding)
    "a score of spaces": (lambda t: generic(raw(t, "items.csv", "id,doc,source,text,quality\n" + "".join(
        f"i{k},d{k // 2},a,t {k},{'  ' if k == 2 else 1 + k % 5}\n" for k in range(8)))),
        "items.csv row 3 (item i2): human score 'quality' is missing (a cell of spaces)"),
    # one decimal comma makes the reader take the column as text: that cell is named, not row 1 (a user's finding)
    "decimal comma": (lambda t: generic(raw(t, "items.csv", "id;doc;source;text;quality\n" + "".join(
        f"i{k};d{k // 2};a;t {k};{'2,5' if k == 2 else 1 + k % 5}\n" for k in range(8))), extra='delimiter = ";"'),
        "items.csv row 3 (item i2): human score 'quality' is '2,5', not a number (a decimal comma? write 2.5)"),
    # pyarrow read '"Stay," she said.' as 'Stay, she said.': the story was judged altered (a user's finding)
    "a TSV value going on after its closing quote": (
        lambda t: generic(raw(t, "items.tsv", "id\tdoc\tsource\ttext\tquality\n" + "".join(
            f"i{k}\td{k // 2}\ta\t{STAY if k == 3 else f't {k}'}\t{1 + k % 5}\n" for k in range(8)))),
        "items.tsv line 5: a value starts with a quote and goes on after its closing quote (read so, its quotes "
        "would be dropped); quote the whole value, with its own quotes doubled"),
    "score out of range": (lambda t: generic(jsonl(t, with_row(5, quality=7))),
                           "items.jsonl row 6 (item i5): human score 'quality'=7 is outside the scale [1, 5]"),
    "duplicate item ids": (lambda t: generic(jsonl(t, with_row(1, id="i0"))),
                           "items.jsonl row 2: duplicate item_id 'i0' (first at row 1; one row per rater? average "
                           "the raters into one row per item first)"),
    # answers a1..a4 under every question were asked "one row per rater?" (a user's finding)
    "an item id in two groups": (lambda t: generic(jsonl(t, with_row(6, id="i1"))),
                                 "items.jsonl row 7: duplicate item_id 'i1' (first at row 2; in groups 'd0' and 'd3': "
                                 "an id names one item across the file; make them unique, e.g. d3_i1)"),
    "an [engine] section without its kind": (lambda t: SUMMEVAL.replace('kind = "simulated"\n', ""),
                                             "[engine].kind: missing: an [engine] section names its engine (known: "),
    "group with one item": (lambda t: generic(jsonl(t, with_row(7, doc="alone"))),
                            "items.jsonl row 8 (item i7): group 'alone' has one item"),
    "null item id": (lambda t: generic(jsonl(t, with_row(2, id=None))),
                     "items.jsonl row 3: column 'id' (item_id) is empty"),
    "null group id": (lambda t: generic(jsonl(t, with_row(4, doc=None))),
                      "items.jsonl row 5: column 'doc' (group_id) is empty"),
    "content of numbers (jsonl)": (lambda t: generic(jsonl(t, [{**r, "text": k} for k, r in enumerate(ok_rows())])),
                                   "items.jsonl row 1 (item i0): column 'text' (content) holds a number (0), not text"),
    "content of numbers (csv)": (lambda t: generic(csv(t, [{**r, "text": k} for k, r in enumerate(ok_rows())])),
                                 "items.csv row 1 (item i0): column 'text' (content) holds a number (0), not text"),
    "blank content": (lambda t: generic(jsonl(t, with_row(1, text="   "))),
                      "items.jsonl row 2 (item i1): column 'text' (content) is empty (whitespace only)"),
    # a source column not mapped: every prompt would show an empty article (a user's finding)
    "mapped source column empty": (lambda t: generic(jsonl(t, [{**r, "q": " "} for r in ok_rows()]), columns=(
        '{item_id = "id", group_id = "doc", content = "text", source = "q"}')),
        "items.jsonl: source: column 'q' is empty in every row (the question, article or prompt the response "
        "answers), and the 'summary' prompt template shows it; judge with a [dataset].template file"),
    "no source text": (lambda t: generic(jsonl(t, [{k: v for k, v in r.items() if k != "source"} for r in ok_rows()])),
                       "items.jsonl: source: no item has source text (the question, article or prompt the response "
                       "answers), and the 'summary' prompt template shows it; map the column that holds it"),
    "Latin-1 csv": (latin1_csv, "items.csv line 3: is not UTF-8 (byte 0xe9 at byte offset"),
    "JSON object without records": (lambda t: generic(raw(t, "items.json", json.dumps({"data": ok_rows()}))),
                                    "items.json: holds one JSON object with arrays of records (data); name the one "
                                    "to read with [dataset].records"),
    "invalid JSON line": (lambda t: generic(raw(t, "items.jsonl", json.dumps(ok_rows()[0]) + '\n{"id": "i1",\n')),
                          "items.jsonl line 2: not valid JSON"),
    "JSONL line not an object": (lambda t: generic(raw(t, "items.jsonl", json.dumps(ok_rows()[0]) + '\n"i1"\n')),
                                 "items.jsonl line 2: is a JSON string, not an object"),
    "unknown file type": (lambda t: generic(raw(t, "items.txt", "x")),
                          "items.txt: unknown file type (use .csv, .tsv, .jsonl, .json or .parquet, or give "
                          "[dataset].delimiter for delimited text)"),
    "semicolon CSV": (lambda t: generic(raw(t, "items.csv", "id;doc;text;quality\ni0;d0;text 0;1\n")),
                      "items.csv: reads as one column; its header line is separated by ';', not ',': give "
                      "[dataset].delimiter = \";\" (a PRISM dataset), or save it with commas as .csv or with tabs as .tsv"),
    "semicolon CSV, a comma in a text": (
        lambda t: generic(raw(t, "items.csv", "id;doc;text;quality\ni0;d0;text 0;1\ni1;d0;one, two;2\n")),
        ("items.csv line 3: 2 fields where the header has 1 ('i1;d0;one, two;2')", "separated by ';', not ','")),
    # pyarrow's error quoted the record alone: a user at row 3000 had to search for it
    "a record with a field too many": (lambda t: generic(raw(t, "items.csv", "id,doc,text,quality\ni0,d0,a,1\n"
                                                                           "i1,d0,b,c,2\ni2,d1,d,3\n")),
                                       "items.csv line 3: 5 fields where the header has 4 ('i1,d0,b,c,2'); a value "
                                       "holding the delimiter, a quote or a line break is quoted"),
    "a record with a field too few, its text inside a line above": (
        lambda t: generic(raw(t, "items.csv", "id,doc,text,quality\ni0,d0,1,x\nd0,1\n")),
        "items.csv line 3: 2 fields where the header has 4 ('d0,1')"),
    "an unclosed quote": (lambda t: generic(raw(t, "items.csv", 'id,doc,text,quality\ni0,d0,a,1\ni1,d0,"b,2\n'
                                                                'i2,d1,d,3\n')),
                          "items.csv line 3: 3 fields where the header has 4 ('i1,d0,\"b,2\\ni2,d1,d,3')"),
    "no such file": (lambda t: generic(t / "nope.csv"), "nope.csv: no such file"),
    # it said "give [study].output a folder" when the trials were written (a user's finding)
    "empty diagnostics section": (lambda t: generic(jsonl(t, ok_rows())) + "[diagnostics]\n",
                                  "[diagnostics]: is empty, so no diagnostic runs; name them in run = [...] or "
                                  "remove the section"),
    "tune storage is a file": (lambda t: generic(jsonl(t, ok_rows())) + f'[tune]\nstorage = "{t / "items.jsonl"}"\n',
                               ("[tune].storage: '", "items.jsonl' is a file, not a folder; give a folder for Tune's "
                                                     "trials")),
    # with the subset curve off a PRISM study has no grid: "ray" ran everything in process, silently
    "tune ray with no grid": (lambda t: generic(jsonl(t, ok_rows())) + '[design]\nsubsets = false\n[tune]\nmode = "ray"\n',
                              "[tune].mode: set to 'ray', but [design].subsets = false (the subset curve is the grid a "
                              "PRISM study runs on Tune): nothing reads it; remove it, or turn that part on"),
    "tune storage solved locally": (
        lambda t: generic(jsonl(t, ok_rows())) + f'[tune]\nmode = "local"\nstorage = "{t / "trials"}"\n',
        ("[tune].storage: set to '", "trials', but mode = \"local\" solves grids in this process: nothing reads it; "
                                     "remove it, or set mode = \"ray\" or \"auto\"")),
    "group_by none beside a group column": (lambda t: generic(jsonl(t, ok_rows()), extra='group_by = "none"'),
                                            "c.toml [dataset].group_by: \"none\" makes every item its own group, and "
                                            "columns.group_id 'doc' names a column to group on; keep one"),
    "joint pairs beyond the pool": (
        lambda t: generic(jsonl(t, ok_rows()), extra="[pool]\nattributes = [\"length\", \"hedging\", \"detail\"]\n"
                                                     "[diagnostics]\nrun = [\"reliability\"]\njoint_pairs = 5"),
        "c.toml [diagnostics].joint_pairs: 5 pairs, but the pool's 3 properties make 1 disjoint pair; give at most 1"),
    # it passed units by a "95%" interval over 3 groups, which covers 0.70-0.77 (a second reader's finding)
    "screening on 3 exploration groups": (
        lambda t: generic(jsonl(t, ok_rows()), extra="[pool]\nneutral = true"),
        "c.toml [design].confirmation: 0.3 holds out 1 of 4 groups; the confirmation table's intervals need 4 (add "
        "groups: 4 to confirm and 8 to explore; or set screen = false and confirmation = 0 for no confirmation table)"),
    "screening with no confirmation": (
        lambda t: generic(jsonl(t, ok_rows()), extra="[pool]\nneutral = true\n[design]\nconfirmation = 0"),
        "c.toml [design].confirmation: screening selects units on the groups it sees; a table on the same groups "
        "would overstate them: hold some out (e.g. 0.3)"),
    "taylor with one-sided families": (
        lambda t: SUMMEVAL + '[pool]\nbank = "expanded"\nattributes = ["length"]\nfamilies = ["role"]\n'
                             '[fit]\nrepresentation = "taylor"\n',
        "c.toml [design].families: taylor is defined for more/less pairs; one-sided units cannot be taylor features"),
    "neutral from a bank without neutral clauses": (
        lambda t: SUMMEVAL.replace("[engine]", f'[pool]\nbank = "{no_neutral_bank(t)}"\nneutral = true\n[engine]'),
        "c.toml [pool].neutral: bank mine has no neutral clauses"),
    "path is a folder": (lambda t: generic(t), ": is a folder, not a file"),
    "csv with a header only": (lambda t: generic(raw(t, "items.csv", "id,doc,text,quality\n")),
                               "items.csv: has no data rows"),
    "unknown column key": (lambda t: generic(jsonl(t, ok_rows()), columns='{item_id = "id", group_id = "doc", '
                                             'content = "text", conten = "x"}'),
                           "[dataset].columns.conten: not a name judgecal reads: item_id, group_id, content, source, "
                           "or a target criterion ([dataset].target: quality); to use 'conten' as the target, name it "
                           "in [dataset].target"),
    "generic without task": (lambda t: generic(jsonl(t, ok_rows()), task=""),
                             "[dataset].task: needed for a generic dataset: the prompt template to judge it with "
                             "(known: summary, story, dialogue, conversation, reasoning, qa, instruction)"),
    "unknown task": (lambda t: generic(jsonl(t, ok_rows()), task='task = "poem"\n'),
                     "[dataset].task: unknown task 'poem' (known: summary, story, dialogue, conversation, reasoning, qa, "
                     "instruction; or give a [dataset].template file)"),
    "task for a named dataset": (lambda t: '[dataset]\nname = "summeval"\ntask = "story"\n' + SIM,
                                 "[dataset].task: summeval is judged as 'summary'"),
    # found where the items load, away from the file: the line names the config too (a user's finding)
    "generic without target scale": (lambda t: generic(jsonl(t, ok_rows()), scale=""),
                                     "c.toml [dataset].target_scale: needed for a generic dataset"),
    "judge scale 0\u20131000": (lambda t: '[probes]\nscale = "0\u20131000"\n' + SIM,
                                "[pool].scale: 0-1000 is not a score scale judgecal reads"),
    "target scale that does not parse": (lambda t: generic(jsonl(t, ok_rows()), scale='target_scale = "1~5"\n'),
                                         "[dataset].target_scale: '1~5' does not parse"),
    # the target's scale is a scale as the judge's is (0-1000 went through with a warning: a user's finding)
    "target scale past 100": (lambda t: generic(jsonl(t, ok_rows()), scale='target_scale = "0-1000"\n'),
                              "[dataset].target_scale: 0-1000 is not a score scale judgecal reads"),
    # a config with no data named ran the bundled SummEval study, 27,200 requests (a user's finding)
    "no [dataset] section": (lambda t: SIM, "c.toml [dataset]: is missing; a study names the data it runs on: "
                             'name = "summeval" or "hanna" (bundled), or name = "generic" with path, task and '
                             "target_scale (and target, columns as your file names them) (see "),
    "an empty [dataset] section": (lambda t: "[dataset]\n" + SIM, "c.toml [dataset]: is empty; a study names the "
                                   "data it runs on"),
    "a URW study without [urw]": (lambda t: '[study]\nmethod = "urw"\n' + SIM, "c.toml [urw]: is missing; a study "
                                  'names the data it runs on: calibration = "infobench" (bundled)'),
    "a target renamed in columns and content's column": (
        lambda t: generic(jsonl(t, ok_rows()), columns='{item_id = "id", group_id = "doc", content = "text", '
                          'quality = "text"}'),
        "[dataset].columns.quality: 'text' is content's column and quality's; give each its own"),
    # every prompt read "Question: <answer> Answer: <answer>" (a user's finding)
    "one column as source and content": (
        lambda t: generic(jsonl(t, ok_rows()), columns='{item_id = "id", group_id = "doc", content = "text", '
                          'source = "text"}'),
        "[dataset].columns.source: 'text' is content's column and source's; give each its own"),
    "the target as the content": (
        lambda t: generic(jsonl(t, ok_rows()), columns='{item_id = "id", group_id = "doc", content = "quality"}'),
        "[dataset].columns.content: 'quality' is content's column and quality's; give each its own"),
    # a file of prompts and responses with no id column: the prompt is the item, its group and its source
    "the target named by [dataset].target as the source": (
        lambda t: generic(jsonl(t, ok_rows()), columns='{item_id = "id", group_id = "doc", content = "text", '
                          'source = "quality"}'),
        "[dataset].columns.source: 'quality' is source's column and quality's; give each its own"),
    "target scale backwards": (lambda t: generic(jsonl(t, ok_rows()), scale='target_scale = "5-1"\n'),
                               "[dataset].target_scale: 5-1 is not a score scale judgecal reads"),
    "3 groups, 5 folds": (lambda t: SUMMEVAL.replace("max_groups = 4", "max_groups = 3"),
                          "[fit].folds: the dataset has 3 groups (as [dataset] reads and draws it); folds = 5 with "
                          "inner_folds = 5 need at least 7 (each outer training part holds the inner folds' groups); "
                          "add groups: the fewest folds, folds = 2 with inner_folds = 2, need 4"),
    "confirmation leaves too few groups": (lambda t: SUMMEVAL + "[design]\nconfirmation = 0.5\n",
                                           "[design].confirmation: 0.5 holds out 2 of 4 groups; the confirmation "
                                           "table's intervals need 4 (add groups: 4 to confirm and 7 to explore"),
    "too few groups for inner folds": (lambda t: SUMMEVAL.replace("max_groups = 4", "max_groups = 6"),
                                       "[fit].inner_folds: the dataset has 6 groups (as [dataset] reads and draws "
                                       "it); folds = 5 with inner_folds = 5 need at least 7 (each outer training part "
                                       "holds the inner folds' groups); lower [fit].folds and [fit].inner_folds (2 and "
                                       "2 need 4) or add groups"),
    # config fields
    "max_groups as text": (lambda t: '[dataset]\nmax_groups = "20"\n' + SIM,
                           "[dataset].max_groups: must be an int or nothing, not '20'"),
    "max_groups = 0": (lambda t: '[dataset]\nmax_groups = 0\n' + SIM, "[dataset].max_groups: must be at least 1, not 0"),
    "num_actors = 0": (lambda t: '[collect]\nnum_actors = 0\n' + SIM, "[collect].num_actors: must be at least 1, not 0"),
    "negative block_rows": (lambda t: '[collect]\nblock_rows = -5\n' + SIM,
                            "[collect].block_rows: must be at least 1, not -5"),
    "negative seed": (lambda t: '[study]\nseed = -1\n' + SIM, "[study].seed: must be at least 0, not -1"),
    "judge scale upside down": (lambda t: '[probes]\nscale = "5-1"\n' + SIM,
                                "[pool].scale: 5-1 is not a score scale judgecal reads"),
    "judge scale of one value": (lambda t: '[probes]\nscale = "3-3"\n' + SIM,
                                 "[pool].scale: 3-3 is not a score scale judgecal reads"),
    "config does not parse": (lambda t: "[dataset\nname = 1", "c.toml: does not parse"),
    "section not a table": (lambda t: "dataset = 3\n[study]\n" + SIM, "[dataset]: must be a section"),
    "empty bank": (empty_bank, "empty bank: no attributes"),
    "unknown attribute": (lambda t: '[probes]\nattributes = ["loudness"]\n' + SIM, "unknown attribute 'loudness'"),
    "unknown engine": (lambda t: '[engine]\nkind = "gpt-9"\n', "[engine].kind: unknown engine 'gpt-9'"),
    "unknown field": (lambda t: "[fit]\ngamma = 1.0\n" + SIM, "[fit].gamma: unknown field"),
    "model_path that does not exist": (lambda t: f'[engine]\nkind = "llamacpp"\nmodel_path = "{t}/none.gguf"\n',
                                       ("[engine].model_path: ", "none.gguf: no such file")),
    "relative model_path that does not exist": (  # it did not say where it looked (a user's finding)
        lambda t: '[engine]\nkind = "llamacpp"\nmodel_path = "nowhere/none.gguf"\n',
        ("[engine].model_path: nowhere/none.gguf: no such file (a relative path: looked for in ", "judgecal runs in)")),
    # a text file named .gguf passed every check, then failed inside the replica after the
    # study's files were written (a user's finding)
    "model_path not a GGUF": (lambda t: (t / "notes.gguf").write_text("not a model\n") and
                              f'[engine]\nkind = "llamacpp"\nmodel_path = "{t}/notes.gguf"\n',
                              ("[engine].model_path: ", "notes.gguf: is not a GGUF file (it starts with b'not ', "
                               "a GGUF with b'GGUF')")),
    "prompt longer than n_ctx": (long_item, ("[engine].n_ctx: the longest prompt of 1 of 8 items does not fit the "
                                             "judge's context of 300 tokens (longest: i3, ",
                                             "raise [engine].n_ctx (at most 8192, the context the model was trained "
                                             "on) or shorten those texts")),
    # n_ctx raised past the model's training context, as the line above says to: SmolLM2's answers
    # there were "\ufffd" and "\n", scored as usable (a user's finding)
    "prompt longer than the model's training context": (
        lambda t: long_item(t, words=9000, n_ctx=16384),
        "[engine].n_ctx: the longest prompt of 1 of 8 items is longer than the 8192 tokens the judge's model was "
        "trained on (longest: i3, "),
    "prompt longer than the model's training context, n_ctx at it": (
        lambda t: long_item(t, words=9000, n_ctx=8192),
        ("[engine].n_ctx: the longest prompt of 1 of 8 items is longer than the 8192 tokens the judge's model was "
         "trained on (longest: i3, ", "tokens): past them its answers are no judgement; shorten those texts")),
    # URW inputs
    "LLMBar path is a file": (lambda t: urw(evaluation='["llmbar"]', extra=f'evaluation_paths = {{llmbar = '
                                          f'"{raw(t, "llmbar_Natural.json", "[]")}"}}\n'),
                              ("[urw].evaluation_paths.llmbar: ", "llmbar_Natural.json is a file; give the folder")),
    "LLMBar folder missing a subset": (lambda t: urw(evaluation='["llmbar"]', extra=f'llmbar_subsets = ["Natural", '
                                                 f'"Adversarial_Neighbor"]\nevaluation_paths = {{llmbar = '
                                                 f'"{llmbar_folder(t)}"}}\n'),
                                       "llmbar_Adversarial_Neighbor.json: missing: the folder has no subset "
                                       "Adversarial_Neighbor (it has: llmbar_Natural.json)"),
    # half an emoji in any pair loader's file, or a bundled format's file of the user's: a traceback (a reader's)
    "LLMBar response with half an emoji": (
        lambda t: llmbar_label_3(t, {"input": "b?", "output_1": "x \ud83d", "output_2": "y", "label": 1}),
        "llmbar_Natural.json row 2: column 'response_a' holds a broken character (U+D83D"),
    "a HANNA file of yours with half an emoji": (lambda t: hanna_file(t, "once \udc00"),
                                                 "hanna.jsonl row 2 (item s1): column 'content' holds a broken "
                                                 "character (U+DC00"),
    "a HANNA file of yours with a story of a number": (lambda t: hanna_file(t, 5),
                                                       "hanna.jsonl row 2 (item s1): the item's content holds 5, not "
                                                       "text"),
    "LLMBar label 3": (llmbar_label_3, "llmbar_Natural.json row 2: label 3 names neither response (accepted: 1, 2)"),
    "duplicate pair ids": (lambda t: urw_generic(t, [*pair_rows()[:2], {**pair_rows()[2], "id": "p0"}]),
                           "pairs.jsonl row 3: duplicate pair id 'p0' (first at row 1)"),
    "pair label not accepted": (lambda t: urw_generic(t, [pair_rows()[0], {**pair_rows()[1], "preferred": "c"}]),
                                "pairs.jsonl row 2: label 'c' in column 'preferred' is not one of the accepted values: "
                                "a, b, tie"),
    "pairs missing a column": (lambda t: urw_generic(t, [{k: v for k, v in r.items() if k != "response_b"}
                                                         for r in pair_rows()], "pairs.csv"),
                               "pairs.csv: missing column(s) response_b"),
    "pair with a null prompt": (lambda t: urw_generic(t, [pair_rows()[0], {**pair_rows()[1], "prompt": None}]),
                                "pairs.jsonl row 2: column 'prompt' is empty"),
    "pair with a null id": (lambda t: urw_generic(t, [pair_rows()[0], {**pair_rows()[1], "id": None}]),
                            "pairs.jsonl row 2: column 'id' (pair_id) is empty"),
    # JSON "\ud83d" (a string cut inside an emoji) ended in a traceback, exit 1 (a user's finding)
    "pair response with half an emoji": (lambda t: urw_generic(t, [{**pair_rows()[0], "response_b": "ok \ud83d"}]),
                                         "pairs.jsonl row 1: column 'response_b' holds a broken character (U+D83D, "
                                         "half of a UTF-16 pair: a text cut inside an emoji?) at character 4"),
    "pair criterion with half an emoji": (lambda t: urw_generic(t, [{**pair_rows()[0], "criteria": ["Is it \udc00?"]}]),
                                          "pairs.jsonl row 1: column 'criteria' holds a broken character (U+DC00"),
    "pair response of numbers": (lambda t: urw_generic(t, [{**pair_rows()[0], "response_a": 3}]),
                                 "pairs.jsonl row 1: column 'response_a' holds a number (3), not text"),
    "criteria differ for one prompt": (lambda t: urw_generic(t, [{**pair_rows()[0], "criteria": ["Is it a line?"]},
                                                                  {**pair_rows()[0], "id": "q", "criteria": ["Other?"]}]),
                                       "pairs.jsonl row 2: criteria differ from those given for the same prompt at "
                                       "row 1"),
    "generic pairs without a path": (lambda t: urw(), "[urw].evaluation_paths.generic: not bundled; give its path"),
    "unknown pairwise set": (lambda t: urw(evaluation='["llmbarr"]'), "[urw].evaluation: unknown pairwise set 'llmbarr'"),
    "unknown evaluation_paths key": (lambda t: urw(evaluation='["llmbar"]', extra='evaluation_paths = {llmbr = "x"}\n'),
                                     "[urw].evaluation_paths.llmbr: unknown pairwise set"),
    "evaluation_columns unknown key": (lambda t: urw_generic(t, pair_rows(), extra='evaluation_columns = {prompts = "p"}\n'),
                                       "[urw].evaluation_columns.prompts: unknown column name"),
    "evaluation_labels to a bad value": (lambda t: urw_generic(t, pair_rows(), extra='evaluation_labels = {x = "c"}\n'),
                                         "[urw].evaluation_labels.x: maps to 'c'"),
    "criteria_per_prompt = 0": (lambda t: urw_generic(t, pair_rows(), extra="criteria_per_prompt = 0\n"),
                                "[urw].criteria_per_prompt: must be at least 1, not 0"),
    "alpha outside (0, 1)": (lambda t: urw_generic(t, pair_rows(), extra="alpha = 1.5\n"),
                             "[urw].alpha: must lie between 0 and 1, not 1.5"),
    "generic calibration without a path": (  # it said "bundled: no such file" (a user's finding)
        lambda t: urw(evaluation='["llmbar"]', extra='calibration = "generic"\n'),
        "[urw].calibration_path: calibration = \"generic\" reads your own labels: give calibration_path"),
    "calibration label 2": (lambda t: calibration(jsonl(t, [{**CAL_ROW, "label": 2}], "cal.jsonl")),
                            "cal.jsonl row 1: label 2 is not 0 or 1"),
    "calibration Latin-1 csv": (lambda t: calibration(csv(t, [{**CAL_ROW, "criterion": "Caf\u00e9?"}], "cal.csv",
                                                          "latin-1")),
                                "cal.csv line 2: is not UTF-8 (byte 0xe9"),
    # Excel's exports (a user's findings): its "Unicode text" was named by its byte 0xff alone, its
    # separator line read as the header
    "UTF-16 csv": (lambda t: generic(csv(t, ok_rows(), encoding="utf-16")),
                   "items.csv: is UTF-16 (it starts with a UTF-16 byte-order mark); save the file as UTF-8"),
    "Excel's sep= line": (lambda t: generic(_sep_line(csv(t, ok_rows())), extra='delimiter = ";"'),
                          "items.csv line 1: is Excel's 'sep=;' line, not a header: delete it"),
    # fields added for data as users have it (issue 17) and judge output (issue 15): each one line, exit 2
    "delimiter of two characters": (lambda t: generic(jsonl(t, ok_rows()), extra='delimiter = "||"'),
                                    "[dataset].delimiter: must be one character, not '||'"),
    "records key missing": (lambda t: generic(raw(t, "items.json", json.dumps({"data": ok_rows()})),
                                              extra='records = "items"'),
                            "items.json: [dataset].records 'items': no key 'items' here (keys holding records or "
                            "objects: data)"),
    "where names no column": (lambda t: generic(jsonl(t, ok_rows()), extra='where = {split = "test"}'),
                              ("[dataset].where.split: ", "items.jsonl has no such column or column path")),
    "where keeps nothing": (lambda t: generic(jsonl(t, ok_rows()), extra='where = {doc = "zzz"}'),
                            ("[dataset].where: no row of ", "items.jsonl matches {'doc': 'zzz'}")),
    "group_by beside columns.group_id": (lambda t: generic(jsonl(t, ok_rows()), extra='group_by = "prompt_id"'),
                                         "[dataset].group_by: 'prompt_id' and columns.group_id 'doc' name two "
                                         "columns to group on; keep one"),
    "column path into text": (lambda t: generic(jsonl(t, ok_rows()), columns='{item_id = "id", group_id = "doc", '
                                                'content = "text.body"}'),
                              "items.jsonl row 1: column path 'text.body': 'text' holds str 'text 0' where an object "
                              "with key 'body' was expected"),
    "template file missing": (lambda t: generic(jsonl(t, ok_rows()), task="", extra=f'template = "{t}/none.toml"'),
                              "none.toml: no such file"),
    "template with an unknown slot": (lambda t: generic(jsonl(t, ok_rows()), task="", extra='template = "%s"' % raw(
        t, "tp.toml", 'system = "Rate it."\nuser = "{{ contnt }} {{ probe }}"\n')),
                                      "tp.toml: user: unknown slot {{ contnt }} (the slots: {{ content }}"),
    "label_means unknown": (lambda t: calibration(jsonl(t, [CAL_ROW], "cal.jsonl")).replace(
        "[urw]\n", '[urw]\nlabel_means = "bad"\n'),
                            "[urw].label_means: unknown meaning 'bad' (use 'criterion met' or 'problem present')"),
    "missing policy unknown": (lambda t: '[fit]\nmissing = "median"\n' + SIM,
                               "[fit].missing: unknown policy 'median' (use impute or drop)"),
    "max_missing above 1": (lambda t: '[fit]\nmax_missing = 1.5\n' + SIM,
                            "[fit].max_missing: must lie in [0, 1], not 1.5"),
    "URW max_missing below 0": (lambda t: urw(evaluation='["llmbar"]', extra="max_missing = -0.1\n"),
                                "[urw].max_missing: must lie in [0, 1], not -0.1"),
    "judge scale 1-200": (lambda t: '[pool]\nscale = "1-200"\n' + SIM,
                          "[pool].scale: 1-200 is not a score scale judgecal reads (integers lo-hi with 0 <= lo < hi "
                          "<= 100"),
    "item_draw unknown": (lambda t: SUMMEVAL.replace("[engine]", 'item_draw = "random"\n[engine]'),
                          "[dataset].item_draw: unknown draw 'random' (use 'seeded' or 'first')"),
    "pair_draw unknown": (lambda t: urw(evaluation='["llmbar"]',
                                        extra='max_pairs_per_dataset = 2\npair_draw = "last"\n'),
                          "[urw].pair_draw: unknown draw 'last' (use 'seeded' or 'first')"),
    "local judge unknown": (lambda t: '[engine]\nkind = "llamacpp"\nmodel = "llama-70b"\n',
                            "[engine].model: unknown local judge 'llama-70b' (known: smollm2-135m, gemma3-270m; or "
                            "give model_path = a GGUF file)"),
    # engine fields are typed as every other section's: a word for a bool is not "true"
    "parallel_probes not a bool": (lambda t: '[engine]\nkind = "llamacpp"\nparallel_probes = "maybe"\n',
                                   "[engine].parallel_probes: must be a bool or nothing, not 'maybe'"),
    "parallel_seqs below 1": (lambda t: '[engine]\nkind = "llamacpp"\nparallel_seqs = 0\n',
                              "[engine].parallel_seqs: must be >= 1"),
    "n_batch below 8": (lambda t: '[engine]\nkind = "llamacpp"\nn_batch = 4\n', "n_batch >= 8"),
    # screening (on with neutral clauses) holds out confirmation groups: "the dataset has 4 groups" of 6 misled
    # (8 groups, 5 folds, 0.5: "lower it", then at 0.4 "raise it": one line says what serves both)
    "folds over the groups confirmation leaves": (
        lambda t: SUMMEVAL.replace("max_groups = 4", "max_groups = 14") + "[pool]\nneutral = true\n"
        "[fit]\nfolds = 5\ninner_folds = 9\n",
        "[design].confirmation: 0.3 holds out 4 of 14 groups; 10 are left to explore and the folds and screening "
        "need 12 ([fit] folds = 5, inner_folds = 9) (add groups: 4 to confirm and 12 to explore; or set screen = "
        "false and confirmation = 0 for no confirmation table)"),
    "folds and confirmation both served by another share": (
        lambda t: SUMMEVAL.replace("max_groups = 4", "max_groups = 12") + "[design]\nconfirmation = 0.5\n"
        "[fit]\nfolds = 5\ninner_folds = 5\n",
        "[design].confirmation: 0.5 holds out 6 of 12 groups; 6 are left to explore and the folds need 7 ([fit] "
        "folds = 5, inner_folds = 5) (set it to 0.45; or set it to 0 for no confirmation table)"),
    # every confirmation cell read "too few groups" after the whole collect (a user's finding)
    "a hold-out too small for confirmation intervals": (
        lambda t: SUMMEVAL.replace("max_groups = 4", "max_groups = 12") + "[design]\nconfirmation = 0.1\n"
        "[fit]\nfolds = 3\ninner_folds = 2\n",
        "[design].confirmation: 0.1 holds out 1 of 12 groups; the confirmation table's intervals need 4 (set it "
        "to 0.3; or set it to 0 for no confirmation table)"),
    "screening on too few groups to confirm": (
        lambda t: SUMMEVAL.replace("max_groups = 4", "max_groups = 6") + "[pool]\nneutral = true\n"
        "[fit]\nfolds = 3\ninner_folds = 3\n",
        "[design].confirmation: 0.3 holds out 2 of 6 groups; the confirmation table's intervals need 4 (add groups: "
        "4 to confirm and 8 to explore; or set screen = false and confirmation = 0 for no confirmation table)"),
    # accepted on a bundled dataset, the labels were read onto 1-10 and every number moved (a user's finding)
    "target_scale on a bundled dataset": (lambda t: SUMMEVAL.replace("[dataset]\n", '[dataset]\ntarget_scale = "1-10"\n'),
                                          "[dataset].target_scale: summeval's labels are on 1-5, not 1-10; "
                                          "target_scale is for a generic dataset"),
    # refused by fit, after the whole collect had run (a user's finding)
    "unknown score_field": (lambda t: SIM + '[fit]\nscore_field = "foo"\n',
                            "[fit].score_field: unknown value 'foo' (use expected, parsed)"),
    "unknown representation": (lambda t: SIM + '[fit]\nrepresentation = "foo"\n',
                               "[fit].representation: unknown value 'foo' (use paired, half, quadratic, taylor)"),
    "a simulated judge's bias of text": (lambda t: '[engine]\nkind = "simulated"\nbiases = {length = "x"}\n',
                                          "[engine].biases.length: must be a finite number, not 'x'"),
    "a simulated judge's negative noise": (lambda t: '[engine]\nkind = "simulated"\nnoise = -1\n',
                                           "[engine].noise: must be >= 0, not -1"),
    "a simulated judge's flip rate above 1": (lambda t: '[engine]\nkind = "simulated"\nmax_flip = 2\n',
                                              "[engine].max_flip: must lie in [0, 1], not 2"),
    # a misspelt name was asked for target_scale, target and columns first (a user's finding)
    # a key pasted as the variable's name went to study.json and into "$sk-... is not set" (a reader's finding)
    "a key given as api_key_env": (lambda t: '[engine]\nkind = "http"\napi_key_env = "sk-proj-abc123"\n',
                                   "[engine].api_key_env: names the environment variable that holds the key (such as "
                                   "OPENAI_API_KEY), not the key itself (not repeated here)"),
    "a key shaped like a variable's name as api_key_env": (
        lambda t: '[engine]\nkind = "http"\napi_key_env = "gsk_4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"\n',
        "[engine].api_key_env: names the environment variable that holds the key"),
    "a misspelt dataset name": (lambda t: '[dataset]\nname = "hana"\n' + SIM,
                                "[dataset].name: unknown dataset 'hana' (known: summeval, hanna, usr, generic)"),
    "an http judge's base_url that is no URL": (lambda t: '[engine]\nkind = "http"\nbase_url = "notaurl"\n',
                                                "[engine].base_url: must be an http:// or https:// URL with a host, "
                                                "not 'notaurl'"),
    "gone_after below 0": (lambda t: '[engine]\nkind = "http"\nbase_url = "http://127.0.0.1:9/v1"\ngone_after = -1\n',
                           "gone_after >= 0"),
    "fail_fast_requests above the outcomes a replica reports": (
        lambda t: SIM + "[collect]\nfail_fast_requests = 5000\n",
        "[collect].fail_fast_requests: must lie in [0, 1000], not 5000"),
}


def test_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input(tmp_path, capfd, no_pipeline, case):
    build, fragment = CASES[case]
    code, err, out = run_main(tmp_path, capfd, build(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("judgecal: error: "), err
    for part in (fragment,) if isinstance(fragment, str) else fragment:
        assert part in lines[0], lines[0]
    assert not out.exists()


GROUP_CASES = [c for c, (_, f) in CASES.items() if isinstance(f, str) and (
    f.startswith(("[fit].folds", "[fit].inner_folds", "[design].confirmation")) or "has one item" in f)]


@pytest.mark.parametrize("case", GROUP_CASES)
def test_show_refuses_what_collect_would_refuse_about_the_groups(tmp_path, capfd, case):
    """`show` read a study whose groups cannot fill its folds and sized it (exit 0); `run` then
    refused it (a user's finding). The same line now comes from `show`."""
    build, fragment = CASES[case]
    code, err, out = run_main(tmp_path, capfd, build(tmp_path), stage="show")
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
    assert not out.exists()


def test_the_group_cases_are_there():
    assert len(GROUP_CASES) == 8


@pytest.mark.parametrize("case", ["prompt longer than n_ctx", "prompt longer than the model's training context"])
def test_show_refuses_a_prompt_past_the_judges_context_as_collect_does(tmp_path, capfd, case):
    """`show` sized a study with a 52k-token answer; `collect` then refused it (a user's finding)."""
    build, fragment = CASES[case]
    code, err, out = run_main(tmp_path, capfd, build(tmp_path), stage="show")
    fragments = fragment if isinstance(fragment, tuple) else (fragment,)
    assert code == 2 and err.count("\n") == 1 and all(f in err for f in fragments), err
    assert not out.exists()


@pytest.mark.parametrize("config", [
    lambda t: generic(jsonl(t, ok_rows())),
    lambda t: generic(csv(t, ok_rows(), bom=True), scale='target_scale = "1\u20135"\n'),
    lambda t: SUMMEVAL + "[fit]\nfolds = 2\ninner_folds = 2\n",
    lambda t: urw_generic(t, pair_rows()),
    lambda t: urw(evaluation='["llmbar"]', extra=f'llmbar_subsets = ["Natural"]\nevaluation_paths = '
                                                 f'{{llmbar = "{llmbar_folder(t)}"}}\n'),
])
def test_the_good_inputs_of_the_table_reach_the_pipeline(tmp_path, capfd, no_pipeline, config):
    """The cases above are these inputs with one thing broken: unbroken, they pass every check."""
    with pytest.raises(ReachedPipeline):
        run_main(tmp_path, capfd, config(tmp_path))


def test_one_line_from_a_real_process(tmp_path):
    """The whole process's stderr (imports, Ray, warnings) is the one line."""
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{out}"\n' + latin1_csv(tmp_path))
    r = subprocess.run(judgecal_cmd("run", str(cfg)), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is not UTF-8" in r.stderr, r.stderr
    assert not out.exists()


def _collected_study(tmp_path, config_text, parts=True):
    """A workspace whose study.json records ``config_text`` (as collect would, without
    collecting), and one committed part (a study with nothing committed starts anew)."""
    import pyarrow as pa

    from judgecal.config import load_config

    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{tmp_path / "out"}"\n' + config_text)
    runner = StudyRunner(load_config(str(cfg)))
    runner.check_identity(write=True)
    if parts:
        runner.ws.write_parquet("responses/part-0.parquet", pa.table({"request_id": ["r0"], "parse_status": ["ok"]}))
    return sorted(p.name for p in (tmp_path / "out").iterdir())


def test_a_study_that_committed_nothing_starts_anew_under_another_judge(tmp_path, capfd):
    """A first collect stopped at the judge's check (a wrong model name) left study.json; the
    corrected config was refused the folder as "another judge" (a user's finding). Nothing was
    committed, so collect takes the folder anew, and says so; one part, and it refuses."""
    from judgecal.config import load_config

    text = generic(jsonl(tmp_path, ok_rows()))
    _collected_study(tmp_path, text, parts=False)
    other = text.replace('kind = "simulated"', 'kind = "simulated"\nnoise = 0.9')
    cfg = write_config(tmp_path / "other.toml", f'[study]\noutput = "{tmp_path / "out"}"\n' + other)
    runner = StudyRunner(load_config(str(cfg)))
    runner.check_collectable()  # what show and collect check first
    runner.check_identity(write=True)
    assert ", of which nothing was committed: the study starts anew" in capfd.readouterr().err
    assert runner.ws.read_json("study.json")["identity"] == runner.identity()
    _collected_study(tmp_path, text, parts=False)  # the first judge again, its batches at a provider
    (tmp_path / "out" / "responses").mkdir(exist_ok=True)
    (tmp_path / "out" / "responses" / "batches.json").write_text("[]")
    with pytest.raises(InputError, match="this folder holds a study with another judge"):
        StudyRunner(load_config(str(cfg))).check_collectable()
    (tmp_path / "out" / "responses" / "batches.json").unlink()
    _collected_study(tmp_path, text)  # the first judge again, with a part committed
    with pytest.raises(InputError, match="this folder holds a study with another judge"):
        StudyRunner(load_config(str(cfg))).check_collectable()


def test_show_on_a_folder_collect_takes_anew_reads_none_of_the_other_studys_plan(tmp_path, capfd):
    """`show` under the corrected config read the other study's written plan ("committed: 0 of the
    written plan's 544") and compared the data with its (a stranger's finding): it says whose it is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = generic(jsonl(tmp_path, ok_rows()))
    _collected_study(tmp_path, text, parts=False)
    other_plan = pa.table({"request_id": [f"r{k}" for k in range(544)]})
    pq.write_table(other_plan, tmp_path / "out" / "requests.parquet")
    other = text.replace('kind = "simulated"', 'kind = "simulated"\nnoise = 0.9')
    cfg = write_config(tmp_path / "other.toml", f'[study]\noutput = "{tmp_path / "out"}"\n' + other)
    assert cli.main(["show", str(cfg)]) == 0
    shown = capfd.readouterr().out
    assert "(another study, of which nothing was committed: collect starts this one anew there)" in shown, shown
    assert "committed: none (the folder's plan is the other study's)" in shown and "544" not in shown, shown


@pytest.mark.parametrize("stage", ["fit", "evaluate", "report"])
@pytest.mark.parametrize("change, fragment", [
    ("dataset.target=[\"coherence\"]", "this folder holds a study with another target"),
    # a second batch under a new name: where new labels go, not only "a new output folder" (a user's finding)
    ("dataset.path=\"elsewhere.jsonl\"", "now path elsewhere.jsonl); use a new output folder or the config it was "
                                       "collected with (new or corrected labels of the same items? write them into "),
    ("dataset.task=\"story\"", "this folder holds a study with another dataset (task summary, now task story)"),
    ("dataset.max_groups=3", "the config's plan differs from the collected one (max_groups: collected 4, now 3)"),
])
def test_a_changed_dataset_section_is_refused_after_collect(tmp_path, capfd, no_pipeline, stage, change, fragment):
    text = generic(jsonl(tmp_path, ok_rows()), extra="max_groups = 4\n")
    before = _collected_study(tmp_path, text)
    code, err, out = run_main(tmp_path, capfd, text, stage, [change])
    lines = err.strip().splitlines()
    if stage == "report":  # report reads no setting: any --set is refused first
        fragment = f"--set {change.split('=')[0]}: report draws the results log as evaluate wrote it"
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written


def test_a_changed_setting_is_named_itself_and_only_what_differs_is_shown(tmp_path, capfd, no_pipeline):
    """Both sides of a long value were cut at the same point and looked identical, and
    max_groups set where none was named the seed it brings (users' findings)."""
    text = generic(jsonl(tmp_path, ok_rows()))
    _collected_study(tmp_path, text)
    code, err, _ = run_main(tmp_path, capfd, text, "fit", ["dataset.max_groups=3"])
    assert code == 2 and "plan differs from the collected one (max_groups: collected none, now 3)" in err, err


@pytest.mark.parametrize("change, fragment", [
    ("engine.noise=0.9", "this folder holds a study with another judge"),
    ("dataset.target=[\"coherence\"]", "this folder holds a study with another target"),
    ("pool.temperature=0.7", "engine 'null' does not offer sampling, which this study needs"),
])
def test_show_refuses_what_collect_would_refuse_about_the_judge(tmp_path, capfd, change, fragment):
    """`show` said 'committed: 264 of 264 answered' for a study with another judge, which
    collect then refused, and sized a sampled study on an engine that cannot sample (a
    user's finding): it refuses the same lines now, writing nothing."""
    text = generic(jsonl(tmp_path, ok_rows()))
    if change.startswith("pool."):
        text = text.replace('kind = "simulated"', 'kind = "null"')
    before = _collected_study(tmp_path, text)
    code, err, out = run_main(tmp_path, capfd, text, "show", [change])
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize("engine, fragment", [
    ('kind = "simulated"\nlatency_s = -1', "[engine].latency_s: must be a number of seconds >= 0"),
    ('kind = "vllm"\nmodel_source = "{model}"\ndevice = "cpu"\nlogprobs = 0', "[engine].logprobs: must be 1..20"),
    ('kind = "vllm"\nmodel_source = "{model}"\ndevice = "CPU"', "[engine].device: 'CPU' is not one of"),
    ('kind = "llamacpp"\nparallel_seqs = 0', "[engine].parallel_seqs: must be >= 1"),
    ('kind = "llamacpp"\nmodel = "nope"', "[engine].model: unknown local judge 'nope'"),
    ('kind = "http"\nmodel = "m"\nconcurrency = 0', "[engine]: concurrency must be >= 1"),
    # what running the judge needs here is not checked: a vLLM study's model folder lives on its cluster
    ('kind = "vllm"\nmodel_source = "{model}/gone"\ndevice = "cpu"', None),
])
def test_show_refuses_an_engine_config_collect_refuses(tmp_path, capfd, engine, fragment):
    """The vLLM stranger's finding: `show` printed configs (logprobs 0, device "CPU") that `collect`
    refused at once: show did not check the engine's fields. It still does not ask for what
    running the judge needs here (vLLM installed, its model folder), as the README says."""
    (tmp_path / "model").mkdir()
    text = generic(jsonl(tmp_path, ok_rows())).replace('kind = "simulated"', engine.format(model=tmp_path / "model"))
    code, err, out = run_main(tmp_path, capfd, text, "show")
    if fragment is None:
        assert code == 0, err
        return
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
    assert not out.exists()


def test_a_plan_change_is_named_in_plain_words():
    """'(diagnostic_plans: collected [['orders', 2, 2], ['scales', '1-10']], now None)' was
    Python's repr of the plan (a user's finding)."""
    from judgecal.methods.runner import _same

    with pytest.raises(InputError) as e:
        _same({"diagnostic_plans": [["orders", 2, 2], ["scales", "1-10"]]}, {}, "study.json",
              "({key}: collected {old}, now {new})")
    assert str(e.value) == "study.json: (diagnostic_plans: collected [orders 2 2, scales 1-10], now none)"
    with pytest.raises(InputError) as e:
        _same({"item_draw": {"draw": "random", "seed": 0}}, {}, "study.json", "({key}: collected {old}, now {new})")
    assert str(e.value) == "study.json: (item_draw: collected {draw random, seed 0}, now none)"


def test_a_conversation_without_context_and_a_study_collected_before_the_source_check_still_run(tmp_path, capfd,
                                                                                               no_pipeline):
    """The source check is where work is planned, for templates whose source is needed: a
    conversation may have no context, and a study collected with empty sources before the check
    fits and reports (a second reader's finding)."""
    rows = [{k: v for k, v in r.items() if k != "source"} for r in ok_rows()]
    with pytest.raises(ReachedPipeline):
        run_main(tmp_path, capfd, generic(jsonl(tmp_path, rows), task='task = "conversation"\n'))
    text = generic(jsonl(tmp_path, rows))
    _collected_study(tmp_path, text)  # study.json as collect wrote it before the check
    code, err, _ = run_main(tmp_path, capfd, text, "fit")
    assert "source" not in err and "run `judgecal collect` first" in err, err  # past the identity, at the answers


def test_a_refused_value_given_by_set_is_named_as_the_flag(tmp_path, capfd, no_pipeline):
    """A bad value from --set was blamed on the study's file ('study.json [tune].storage: ...'),
    where it is not (a user's finding)."""
    code, err, _ = run_main(tmp_path, capfd, generic(jsonl(tmp_path, ok_rows())), "run", ["fit.folds=1"])
    line = err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("judgecal: error: --set fit.folds: "), err


def test_a_set_flag_is_blamed_for_its_own_field_only_and_also_where_the_items_load(tmp_path, capfd, no_pipeline):
    """'--set design.subsets' was blamed for [design].subsets_per_size, a field it merely starts
    (a value the flag never gave); a refusal found where the items load named the file although
    a --set gave the field (a second reader's findings)."""
    text = generic(jsonl(tmp_path, ok_rows())) + "[design]\nsubsets_per_size = 50\n"
    code, err, _ = run_main(tmp_path, capfd, text, "show", ["design.subsets=false"])
    assert code == 2 and "c.toml [design].subsets_per_size: set to 50, but [design].subsets = false" in err, err
    code, err, _ = run_main(tmp_path, capfd, generic(jsonl(tmp_path, ok_rows())), "show", ['dataset.group_by="none"'])
    assert code == 2 and err.strip().startswith("judgecal: error: --set dataset.group_by: \"none\" makes every item "
                                                "its own group"), err
