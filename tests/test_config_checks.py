"""No silent wrong input (issue 15, item 3): every config number, every custom bank key, every
``--set``, a data file with two columns of one name, an empty config, an output under a file,
data edited after collect and pairs labelled both ways.

Most cases call the loaders directly (fast); a few run the CLI in a real process, as a user
would, to check the whole stderr is one line, the exit code is 2 and nothing is written."""

import json
import subprocess
from dataclasses import fields

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import ROOT, generic_study, judgecal_cmd, write_config
from judgecal import cli
from judgecal.config import RULES, SECTIONS, Rule, StudyConfig, apply_set, demo_config_path, load_config, parse_config
from judgecal.errors import InputError
from judgecal.methods.runner import StudyRun, StudyRunner
from judgecal.probes.bank import load_bank

SIM = {"engine": {"kind": "simulated"}}


def refused(data: dict, runtime: bool = False) -> str:
    """The one line parse_config refuses ``data`` with."""
    with pytest.raises(InputError) as e:
        parse_config({**SIM, **data}, "c.toml", runtime=runtime)
    assert "\n" not in str(e.value)
    return str(e.value)


# -- 1. every config number, checked when the config loads --------------------------------
NAN, INF = float("nan"), float("inf")
URW = {"study": {"method": "urw"}}

NUMBER_CASES = {
    "NaN penalty": ({"fit": {"gammas": [0.1, NAN]}}, "c.toml [fit].gammas[1]: must be a finite number, not nan"),
    "infinite penalty": ({"fit": {"gammas": [INF]}}, "[fit].gammas[0]: must be a finite number, not inf"),
    "negative penalty": ({"fit": {"gammas": [-1.0]}}, "[fit].gammas[0]: must be at least 0, not -1"),
    "empty penalties": ({"fit": {"gammas": []}}, "[fit].gammas: is an empty list; name at least one penalty"),
    "a single NaN penalty": ({"fit": {"gammas": NAN}}, "[fit].gammas[0]: must be a finite number, not nan"),
    "infinite part time": ({"collect": {"part_seconds": INF}}, "[collect].part_seconds: must be a finite number, not inf"),
    "zero part time": ({"collect": {"part_seconds": 0}}, "[collect].part_seconds: must be above 0, not 0"),
    "NaN part time": ({"collect": {"part_seconds": NAN}}, "[collect].part_seconds: must be a finite number, not nan"),
    "part_rows 0": ({"collect": {"part_rows": 0}}, "[collect].part_rows: must be at least 1, not 0"),
    "num_actors 0": ({"collect": {"num_actors": 0}}, "[collect].num_actors: must be at least 1, not 0"),
    "max_attempts 0": ({"collect": {"max_attempts": 0}}, "[collect].max_attempts: must be at least 1, not 0"),
    "fail_fast_requests -1": ({"collect": {"fail_fast_requests": -1}},
                              "[collect].fail_fast_requests: must lie in [0, 1000], not -1"),
    "fit bootstrap 0": ({"fit": {"bootstrap": 0}}, "[fit].bootstrap: must be at least 100, not 0"),
    "fit bootstrap -5": ({"fit": {"bootstrap": -5}}, "[fit].bootstrap: must be at least 100, not -5"),
    # 1 or 2 resamples printed "95%" intervals that missed their own estimates (a user's finding)
    "fit bootstrap 2": ({"fit": {"bootstrap": 2}}, "[fit].bootstrap: must be at least 100, not 2"),
    "design bootstrap 0": ({"design": {"screen_bootstrap": 0}}, "[design].screen_bootstrap: must be at least 100, not 0"),
    "NaN screen threshold": ({"design": {"screen_threshold": NAN}}, "[design].screen_threshold: must be a finite number"),
    "NaN confirmation": ({"design": {"confirmation": NAN}}, "[design].confirmation: must lie in [0, 1), not nan"),
    "subsets_per_size 0": ({"design": {"subsets_per_size": 0}}, "[design].subsets_per_size: must be at least 1"),
    "empty design strengths": ({"design": {"strengths": []}}, "[design].strengths: is an empty list"),
    "empty strength list": ({"pool": {"strengths": []}}, "[pool].strengths: is an empty list; name at least one"),
    "a strength twice": ({"pool": {"strengths": ["strong", "strong"]}}, "[pool].strengths: 'strong' is named twice"),
    "empty attribute list": ({"pool": {"attributes": []}}, "[pool].attributes: is an empty list; leave it out"),
    "an attribute twice": ({"pool": {"attributes": ["length", "length"]}}, "[pool].attributes: 'length' is named twice"),
    "infinite temperature": ({"pool": {"temperature": INF}}, "[pool].temperature: must lie in [0, 2], not inf"),
    "runs 0": ({"pool": {"runs": 0}}, "[pool].runs: must be at least 1, not 0"),
    "empty target": ({"dataset": {"target": []}}, "[dataset].target: is an empty list; leave it out for the dataset's"),
    "a target twice": ({"dataset": {"target": ["relevance", "relevance"]}}, "[dataset].target: 'relevance' is named "
                                                                             "twice"),
    "max_items_per_group 1": ({"dataset": {"max_items_per_group": 1}}, "[dataset].max_items_per_group: must be at "
                                                                        "least 2, not 1"),
    "folds 1": ({"fit": {"folds": 1}}, "[fit].folds: must be at least 2, not 1"),
    "fold_seeds 0": ({"fit": {"fold_seeds": 0}}, "[fit].fold_seeds: must be at least 1, not 0"),
    "empty scales": ({"diagnostics": {"run": ["resolution"], "scales": []}}, "[diagnostics].scales: is an empty list"),
    "diagnostics bootstrap 0": ({"diagnostics": {"run": ["reliability"], "bootstrap": 0}},
                                "[diagnostics].bootstrap: must be at least 100, not 0"),
    "negative joint pairs": ({"diagnostics": {"run": ["reliability"], "joint_pairs": -1}},
                             "[diagnostics].joint_pairs: must be at least 0"),
    "negative seed": ({"study": {"seed": -3}}, "[study].seed: must be at least 0, not -3"),
    # [urw]
    "urw bootstrap 0": ({**URW, "urw": {"bootstrap": 0}}, "[urw].bootstrap: must be at least 100, not 0"),
    "alpha 0": ({**URW, "urw": {"alpha": 0.0}}, "[urw].alpha: must lie between 0 and 1, not 0"),
    "alpha 1": ({**URW, "urw": {"alpha": 1}}, "[urw].alpha: must lie between 0 and 1, not 1"),
    "NaN alpha": ({**URW, "urw": {"alpha": NAN}}, "[urw].alpha: must lie between 0 and 1, not nan"),
    "empty coverage alphas": ({**URW, "urw": {"coverage_alphas": []}}, "[urw].coverage_alphas: is an empty list"),
    "coverage alpha 1": ({**URW, "urw": {"coverage_alphas": [0.1, 1.0]}}, "[urw].coverage_alphas[1]: must lie between "
                                                                         "0 and 1, not 1"),
    "infinite sample temperature": ({**URW, "urw": {"sample_temperature": INF}},
                                    "[urw].sample_temperature: must lie in [0, 2], not inf"),
    "negative samples": ({**URW, "urw": {"samples": -1}}, "[urw].samples: must be at least 0, not -1"),
    "mondrian_bins 0": ({**URW, "urw": {"mondrian_bins": 0}}, "[urw].mondrian_bins: must be at least 1, not 0"),
    "max_pairs_per_dataset 0": ({**URW, "urw": {"max_pairs_per_dataset": 0}}, "[urw].max_pairs_per_dataset: must be at "
                                                                              "least 1, not 0"),
    "calibration_max_responses 0": ({**URW, "urw": {"calibration_max_responses": 0}},
                                    "[urw].calibration_max_responses: must be at least 1, not 0"),
    "empty evaluation": ({**URW, "urw": {"evaluation": []}}, "[urw].evaluation: is an empty list; name at least one"),
    "evaluation named twice": ({**URW, "urw": {"evaluation": ["llmbar", "llmbar"]}},
                               "[urw].evaluation: 'llmbar' is named twice"),
    "empty llmbar subsets": ({**URW, "urw": {"llmbar_subsets": []}}, "[urw].llmbar_subsets: is an empty list; leave it "
                                                                     "out for all five"),
    # [engine]: no NaN or infinity in any of its numbers
    "NaN judge noise": ({"engine": {"kind": "simulated", "noise": NAN}}, "c.toml [engine].noise: must be a finite "
                                                                         "number, not nan"),
    "infinite bias": ({"engine": {"kind": "simulated", "biases": {"length": INF}}},
                      "[engine].biases.length: must be a finite number, not inf"),
    "infinite http timeout": ({"engine": {"kind": "http", "timeout_s": INF}}, "[engine].timeout_s: must be a finite "
                                                                              "number, not inf"),
}


@pytest.mark.parametrize("case", list(NUMBER_CASES))
def test_every_config_number_is_checked_when_the_config_loads(case):
    data, message = NUMBER_CASES[case]
    assert message in refused(data)


@pytest.mark.parametrize("design, field_", [({"screen": False, "screen_rule": "estimate"}, "screen_rule"),
                                            ({"screen_threshold": 2.0}, "screen_threshold"),  # no neutral pool
                                            ({"subsets": False, "subsets_per_size": 5}, "subsets_per_size")])
def test_a_design_setting_nothing_reads_is_refused(design, field_):
    """screen_rule with screen = false ran without it, without a word (a user's finding)."""
    assert f"[design].{field_}: set to " in refused({"design": design})
    assert "nothing reads it" in refused({"design": design})


def test_every_numeric_field_of_every_section_has_a_rule():
    """The table is the one place: a numeric field added to a section without a rule fails here."""
    sections = {"study": [f for f in fields(StudyConfig) if f.name in ("name", "output", "seed", "method")],
                **{name: list(fields(cls)) for name, cls in SECTIONS.items()}}
    numeric = {f"{s}.{f.name}" for s, fs in sections.items() for f in fs
               if any(k in str(f.type) for k in ("int", "float"))}
    assert numeric - set(RULES) == set()
    known = {f"{s}.{f.name}" for s, fs in sections.items() for f in fs}
    assert set(RULES) - known == set()  # every rule names a real field


def test_the_defaults_and_the_bundled_configs_pass_every_rule():
    parse_config(SIM, "c.toml", runtime=False)
    parse_config({**SIM, **URW}, "c.toml", runtime=False)
    for name in ("demo", "urw_demo", "diagnostics_demo", "expanded_hanna"):
        load_config(demo_config_path(name), runtime=False)


def test_a_rule_describes_its_range():
    assert Rule(1).describe() == "must be at least 1"
    assert Rule(0, open_low=True).describe() == "must be above 0"
    assert Rule(0, 1, open_low=True, open_high=True).describe() == "must lie between 0 and 1"
    assert Rule(0, 1, open_high=True).describe() == "must lie in [0, 1)"
    assert Rule(high=5).describe() == "must be at most 5"
    Rule(0, nonempty=True).check(None, "x")  # an optional field left unset passes
    with pytest.raises(InputError, match=r"x\[2\]: must be at least 0, not -0.5"):
        Rule(0).check((1.0, 2.0, -0.5), "x")


# -- 2. every mistake in a custom bank -----------------------------------------------------
WORDINGS = "\n".join(f'{d}_{s} = "{d} {s} weight on {{phrase}}."' for d in ("more", "less")
                     for s in ("slight", "standard", "strong"))
GOOD_BANK = f'''name = "mine"
version = "1"

[wordings]
{WORDINGS}

[[attributes]]
name = "length"
phrase = "how long it is"

[[attributes]]
name = "detail"
phrase = "how detailed it is"

[[units]]
family = "role"
name = "editor"
clause = "Judge as an editor would."

[neutral]
clauses = ["Take your time."]
'''

BANK_CASES = {
    "unknown top-level key": (GOOD_BANK.replace('version = "1"', 'version = "1"\ndescripton = "x"'),
                              "mine.toml descripton: unknown key (known: name, version"),
    "name not text": (GOOD_BANK.replace('name = "mine"', "name = 3"), "mine.toml name: must be text, not 3"),
    "wordings not a table": (GOOD_BANK.replace(f"[wordings]\n{WORDINGS}", 'wordings = "x"'),
                             "mine.toml wordings: must be a table, not 'x'"),
    "unknown wording": (GOOD_BANK.replace("[wordings]\n", '[wordings]\nmore_huge = "{phrase}"\n'),
                        "mine.toml wordings.more_huge: unknown key (known: more_slight"),
    "wording without a phrase slot": (GOOD_BANK.replace("more strong weight on {phrase}.", "more strong weight."),
                                      "mine.toml wordings.more_strong: must hold one {phrase} slot"),
    "wording with a misspelt slot": (GOOD_BANK.replace("more strong weight on {phrase}.", "more on {phrse}."),
                                     "mine.toml wordings.more_strong: must hold one {phrase} slot"),
    "wording of a number": (GOOD_BANK.replace('more_slight = "more slight weight on {phrase}."', "more_slight = 4"),
                            "mine.toml wordings.more_slight: must be text, not 4"),
    "attributes not an array of tables": (GOOD_BANK.split("[[attributes]]")[0].replace('version = "1"', 'version = "1"\n'
                                                                                       'attributes = "length"'),
                                          "mine.toml attributes: must be an array of tables"),
    "unknown attribute key": (GOOD_BANK.replace('phrase = "how long it is"', 'phrase = "how long it is"\nphrasse = "x"'),
                              "mine.toml attributes[0].phrasse: unknown key (known: name, phrase, tasks"),
    "attribute without a name": (GOOD_BANK.replace('name = "length"\n', ""), "mine.toml attributes[0]: missing field 'name'"),
    "attribute name with a colon": (GOOD_BANK.replace('name = "length"', 'name = "len:gth"'),
                                    "mine.toml attributes[0].name: name 'len:gth' must be lowercase"),
    "duplicate attribute names": (GOOD_BANK.replace('name = "detail"', 'name = "length"'),
                                  "mine.toml attributes[1].name: duplicate attribute 'length'"),
    "empty phrase": (GOOD_BANK.replace('phrase = "how long it is"', 'phrase = ""'),
                     "mine.toml attributes[0] (length).phrase: is empty"),
    "blank phrase": (GOOD_BANK.replace('phrase = "how long it is"', 'phrase = "   "'),
                     "mine.toml attributes[0] (length).phrase: is empty"),
    "phrase of a number": (GOOD_BANK.replace('phrase = "how long it is"', "phrase = 3"),
                           "mine.toml attributes[0] (length).phrase: must be text, not 3"),
    "empty override": (GOOD_BANK.replace('phrase = "how long it is"', 'phrase = "how long it is"\nmore_strong = ""'),
                       "mine.toml attributes[0] (length).more_strong: is empty"),
    "attribute without phrase or wording": (GOOD_BANK.replace('phrase = "how long it is"\n', ""),
                                            "mine.toml attributes[0] (length): no wording for 'more_slight'"),
    # the missing text is in [wordings], not in the attribute, which has its phrase (a user's finding)
    "wordings lacking one": (GOOD_BANK.replace('more_slight = "more slight weight on {phrase}."\n', ""),
                             "mine.toml wordings: no 'more_slight', which attribute 'length' fills its phrase into"),
    "unknown unit key": (GOOD_BANK.replace('family = "role"', 'family = "role"\nclose = "x"'),
                         "mine.toml units[0].close: unknown key (known: family, name, clause, tasks)"),
    "unit without a clause": (GOOD_BANK.replace('clause = "Judge as an editor would."\n', ""),
                              "mine.toml units[0]: missing field 'clause'"),
    "empty unit clause": (GOOD_BANK.replace('clause = "Judge as an editor would."', 'clause = ""'),
                          "mine.toml units[0].clause: is empty"),
    "unit clause of a number": (GOOD_BANK.replace('clause = "Judge as an editor would."', "clause = 7"),
                                "mine.toml units[0].clause: must be text, not 7"),
    "unknown unit family": (GOOD_BANK.replace('family = "role"', 'family = "mood"'),
                            "mine.toml units[0].family: unknown family 'mood'"),
    # 'role:more' read as the more side of a property 'role': two units merged into one (a reader's finding)
    "unit named more": (GOOD_BANK.replace('name = "editor"', 'name = "more"'),
                        "mine.toml units[0].name: a unit named 'more' gives the column 'role:more', which reads as "
                        "the more side of a property 'role'; name the unit otherwise"),
    "one-sided unit named less": (GOOD_BANK.replace("[neutral]", '[oneside]\nstakes_less = "Little rides on it."\n\n'
                                                    "[neutral]"),
                                  "mine.toml oneside.stakes_less: a unit named 'less' gives the column 'stakes:less'"),
    "units not an array": (GOOD_BANK.split("[[units]]")[0].replace('version = "1"', 'version = "1"\nunits = 3'),
                           "mine.toml units: must be an array of tables"),
    "unknown neutral key": (GOOD_BANK.replace("[neutral]\n", '[neutral]\nclause = "x"\n'),
                            "mine.toml neutral.clause: unknown key (known: clauses)"),
    "empty neutral clause": (GOOD_BANK.replace('clauses = ["Take your time."]', 'clauses = ["Take your time.", ""]'),
                             "mine.toml neutral.clauses[1]: is empty"),
    "neutral clause twice": (GOOD_BANK.replace('clauses = ["Take your time."]', 'clauses = ["Wait.", "Wait."]'),
                             "mine.toml neutral.clauses[1]: repeats clause 0"),
    "neutral clauses not a list": (GOOD_BANK.replace('clauses = ["Take your time."]', 'clauses = "Wait."'),
                                   "mine.toml neutral.clauses: must be a list of clauses"),
    "oneside clause of a number": (GOOD_BANK.replace("[neutral]", "[oneside]\nrole_teacher = 5\n\n[neutral]"),
                                   "mine.toml oneside.role_teacher: must be text, not 5"),
    "version of a list": (GOOD_BANK.replace('version = "1"', "version = [1]"), "mine.toml version: must be text"),
    "unknown task": (GOOD_BANK.replace('phrase = "how long it is"', 'phrase = "how long it is"\ntasks = ["poem"]'),
                     "unknown task 'poem' (known: summary, story"),
    "unknown unit task": (GOOD_BANK.replace('clause = "Judge as an editor would."',
                                            'clause = "Judge as an editor would."\ntasks = ["summry"]'),
                          "unknown task 'summry' (known: summary, story"),
}


@pytest.mark.parametrize("case", list(BANK_CASES))
def test_every_mistake_in_a_custom_bank_is_one_line_naming_the_file_and_key(tmp_path, case):
    text, message = BANK_CASES[case]
    bank = write_config(tmp_path / "mine.toml", text)
    with pytest.raises(InputError) as e:
        load_bank(str(bank))
    assert "\n" not in str(e.value) and message in str(e.value), str(e.value)
    assert str(bank) in str(e.value)


def test_the_good_bank_loads_and_the_shipped_banks_keep_their_hashes(tmp_path):
    bank = load_bank(str(write_config(tmp_path / "mine.toml", GOOD_BANK)))
    assert list(bank.attributes) == ["length", "detail"] and bank.neutral == ("Take your time.",)
    assert bank.attributes["length"]["less_slight"] == "less slight weight on how long it is."
    # the checks read the shipped banks exactly as before (a changed hash would refuse every study)
    assert {n: load_bank(n).contents_hash() for n in ("style", "quality", "expanded")} == {
        "style": "566a56b3ab2e2f7a", "quality": "d45c66abf601513b", "expanded": "2f6f08257d03d7a9"}


def test_an_edited_bank_is_never_mixed_with_answers_to_the_old_one(tmp_path):
    """The README: the bank's contents are hashed into the study's identity."""
    bank = write_config(tmp_path / "mine.toml", GOOD_BANK)
    cfg, _ = _collected(tmp_path, {**SIM, "dataset": {"max_groups": 4, "max_items_per_group": 2},
                                   "pool": {"bank": str(bank), "attributes": ["length"]}})
    StudyRunner(cfg).check_identity(write=False)  # unchanged: passes
    write_config(bank, GOOD_BANK.replace("how long it is", "its length"))
    edited = parse_config({**SIM, "dataset": {"max_groups": 4, "max_items_per_group": 2},
                           "pool": {"bank": str(bank), "attributes": ["length"]},
                           "study": {"output": str(tmp_path / "out")}}, "c.toml", runtime=False)
    with pytest.raises(InputError, match=r"this folder holds a study with another bank \(contents ") as e:
        StudyRunner(edited).check_identity(write=False)
    # the config had not changed, the file had: said so (a user's finding)
    assert str(e.value).endswith("(the bank 'mine' changed content since collect: restore the file [pool] bank names, "
                                 "or collect the edited bank into a new output folder)")


def test_a_bank_mistake_is_refused_when_the_config_loads(tmp_path):
    bank = write_config(tmp_path / "mine.toml", GOOD_BANK.replace('phrase = "how long it is"', 'phrase = ""'))
    assert "mine.toml attributes[0] (length).phrase: is empty" in refused({"pool": {"bank": str(bank)}})


# -- 3. every malformed --set --------------------------------------------------------------
SET_CASES = {
    "no =": ("fit.folds", "--set fit.folds: write it as section.field=value"),
    "no field": ("fit=3", "--set fit=...: write it as section.field=value"),
    "empty part": ("fit..folds=3", "--set fit..folds=...: write it as section.field=value"),
    "no value": ("fit.folds=", '--set fit.folds=: no value after "="'),
    "unknown section": ("fitt.folds=3", "--set fitt.folds: unknown section 'fitt' (known: study, dataset"),
    "unknown field": ("fit.gama=1", "--set fit.gama: unknown field 'gama' of [fit] (known: gammas"),
    "unknown study field": ("study.nmae=x", "--set study.nmae: unknown field 'nmae' of [study]"),
    "unknown field of the older [probes]": ("probes.runz=2", "--set probes.runz: unknown field 'runz' of [probes]"),
    "a field that is no table": ("dataset.max_groups.x=1", "[dataset].max_groups is not a table"),
    "too deep into a table": ("dataset.columns.a.b=1", "[dataset].columns holds no tables"),
    "unknown engine field": ("engine.nosie=1", "--set engine.nosie: unknown field for engine 'simulated'"),
    # the value (a key given on the command line) was printed back in the line
    "an api key given as a field": ("engine.api_key=sk-abcdefgh12345", "--set engine.api_key: unknown field for engine"),
    "an api key given without a section": ("api_key=sk-abcdefgh12345", "--set api_key=...: write it as"),
    "an api key typed with a colon": ("engine.api_key:sk-abcdefgh12345", "--set engine.api_key...: write it as"),
    "an api key typed after a space": ("engine.api_key sk-abcdefgh12345", "--set engine.api_key...: write it as"),
    "an api key typed after a space, ending in =": ("engine.api_key sk-abcdefgh12345==",
                                                   "--set engine.api_key...=...: write it as"),
    "an api key alone": ("sk-abcdefgh12345", "--set ...: write it as"),
    "a NUL in a value": ('study.name="a\\u0000b"', "--set study.name: holds a NUL character"),
    "an unclosed list": ("fit.gammas=[0.1, 1", "--set fit.gammas=[0.1, 1: the value is not TOML"),
    "an unclosed string": ('study.name="x', "the value is not TOML"),
    "an unclosed table": ("dataset.columns={item_id = 'id'", "the value is not TOML"),
    "two values": ("fit.folds=3\nbootstrap = 5", "--set fit.folds=3\\nbootstrap = 5: the value is not TOML"),
}


@pytest.mark.parametrize("case", list(SET_CASES))
def test_every_malformed_set_is_one_line(case):
    item, message = SET_CASES[case]
    with pytest.raises(InputError) as e:
        apply_set({"engine": {"kind": "simulated"}}, item)
    assert "\n" not in str(e.value) and message in str(e.value), str(e.value)
    assert "sk-abcdefgh12345" not in str(e.value)
    with pytest.raises(InputError) as e:  # a line break in the key: still one line
        apply_set({"engine": {"kind": "http"}}, "engine\napi_key=x")
    assert "\n" not in str(e.value)


def test_a_judge_with_no_key_names_no_variable():
    """api_key_env = "" is a local server's judge without a key: kept (a reader's finding)."""
    from judgecal.engines.http import check_endpoint

    check_endpoint("http://127.0.0.1:8000/v1", "", "[engine]")
    check_endpoint("http://127.0.0.1:8000/v1", "MY_PROVIDER_API_KEY_2024", "[engine]")


def test_an_api_key_set_as_a_field_of_an_http_judge_points_to_api_key_env():
    with pytest.raises(InputError) as e:
        apply_set({"engine": {"kind": "http"}}, "engine.api_key=sk-abcdefgh12345")
    assert str(e.value).endswith("a key is never a config field: export it and name the variable in api_key_env")
    assert "sk-abcdefgh12345" not in str(e.value)


def test_well_formed_sets_still_apply():
    data = {"engine": {"kind": "simulated"}, "probes": {"runs": 1}}
    for item in ("dataset.name=generic", "study.output=runs/my study", "pool.runs=2", "dataset.target_scale=1-5",
                 "dataset.columns.item_id=id", 'fit.gammas=[0.1, 1.0]', "engine.biases={length = 0.5}",
                 "engine.kind=http", "engine.base_url=http://127.0.0.1:9/v1?a=b"):
        apply_set(data, item)
    assert data["dataset"] == {"name": "generic", "target_scale": "1-5", "columns": {"item_id": "id"}}
    assert data["probes"] == {"runs": 2} and data["study"] == {"output": "runs/my study"}
    assert data["engine"] == {"kind": "http", "base_url": "http://127.0.0.1:9/v1?a=b"}


def test_switching_between_http_and_openai_batch_keeps_the_judge():
    """`--set engine.kind=http` on an openai-batch study reset its model and endpoint to the
    defaults (a user's finding): one judge, two ways of asking it, so the fields both have stay;
    another kind's fields do not apply (and go)."""
    # timeout_s and max_retries have one name in both and other meanings (one upload of up to 200 MB, one
    # chat request): not kept
    batch = {"kind": "openai-batch", "model": "acme-1", "base_url": "https://x/v1", "api_key_env": "ACME_KEY",
             "poll_s": 5.0, "batch_price_per_million_prompt_tokens": 1.0, "timeout_s": 600.0, "max_retries": 2}
    data = {"engine": dict(batch)}
    apply_set(data, "engine.kind=http")
    assert data["engine"] == {"kind": "http", "model": "acme-1", "base_url": "https://x/v1", "api_key_env": "ACME_KEY"}
    apply_set(data, "engine.kind=openai-batch")
    assert data["engine"] == {"kind": "openai-batch", "model": "acme-1", "base_url": "https://x/v1",
                              "api_key_env": "ACME_KEY"}
    apply_set(data, "engine.kind=simulated")
    assert data["engine"] == {"kind": "simulated"}


# -- 4. a data file with two columns of one name -------------------------------------------
def _items(k=8):
    return [{"id": f"i{j}", "doc": f"d{j // 2}", "source": f"article {j // 2}", "text": f"text {j}",
             "quality": 1 + j % 5} for j in range(k)]


def _generic(path, extra=""):
    return {**SIM, "dataset": {"name": "generic", "path": str(path), "target": ["quality"], "target_scale": "1-5",
                               "task": "summary", "columns": {"item_id": "id", "group_id": "doc", "content": "text"}},
            "fit": {"folds": 2, "inner_folds": 2}}


def _load_items(path):
    from judgecal.methods.prism import load_items

    return load_items(parse_config(_generic(path), "c.toml", runtime=False), warn=False)


def test_a_csv_with_two_columns_of_one_name_is_refused(tmp_path):
    p = tmp_path / "items.csv"
    p.write_text("id,doc,text,quality,quality\n" + "".join(f"i{j},d{j // 2},t {j},{1 + j % 5},5\n" for j in range(8)))
    with pytest.raises(InputError) as e:
        _load_items(p)
    assert str(e.value) == (f"{p}: column 'quality' appears twice in the header (columns 4 and 5); rename one")


def test_a_parquet_file_with_two_columns_of_one_name_is_refused(tmp_path):
    p = tmp_path / "items.parquet"
    t = pa.table({"id": [f"i{j}" for j in range(8)], "doc": [f"d{j // 2}" for j in range(8)],
                  "text": [f"t {j}" for j in range(8)], "quality": [1.0 + j % 5 for j in range(8)]})
    pq.write_table(t.append_column("id", pa.array([f"x{j}" for j in range(8)])), p)
    with pytest.raises(InputError, match="column 'id' appears twice in the header"):
        _load_items(p)


def test_a_json_object_that_gives_one_key_twice_is_refused(tmp_path):
    p = tmp_path / "items.jsonl"
    lines = [json.dumps(r) for r in _items()]
    lines[2] = lines[2].replace('"quality": ', '"quality": 5, "quality": ')
    p.write_text("\n".join(lines))
    with pytest.raises(InputError) as e:
        _load_items(p)
    assert str(e.value) == f"{p} line 3: gives key 'quality' twice (a column of one name twice)"
    arr = tmp_path / "items.json"
    arr.write_text("[" + ",".join(lines) + "]")
    with pytest.raises(InputError, match="an object gives key 'quality' twice"):
        _load_items(arr)


def test_pairs_with_two_columns_of_one_name_are_refused(tmp_path):
    from judgecal.rubrics.data import load_generic_pairs

    p = tmp_path / "pairs.csv"
    p.write_text("prompt,response_a,response_b,preferred,preferred\nq,x,y,a,b\n")
    with pytest.raises(InputError, match="pairs.csv: column 'preferred' appears twice"):
        load_generic_pairs(str(p))


# -- 5. an empty config, the same evaluation set twice, a section no one reads -------------
def test_an_empty_config_is_refused(tmp_path):
    for text in ("", "# only a comment\n\n"):
        with pytest.raises(InputError, match="the config is empty"):
            load_config(str(write_config(tmp_path / "c.toml", text)))


def test_a_section_the_method_does_not_read_is_refused():
    assert "[urw]: not read by a prism study" in refused({"urw": {"alpha": 0.2}})


# -- 6. an output path under a file ---------------------------------------------------------
def test_an_output_under_a_file_or_at_a_file_is_one_line(tmp_path):
    f = tmp_path / "somefile.txt"
    f.write_text("x")
    msg = refused({"study": {"output": str(f / "out")}})
    assert f"[study].output: '{f / 'out'}' lies under {f}, which is a file, not a folder" in msg
    assert "is a file, not a folder" in refused({"study": {"output": str(f)}})
    assert "lies under" in refused({"study": {"output": f"file://{f}/a/b"}})
    parse_config({**SIM, "study": {"output": "s3://bucket/x"}}, "c.toml", runtime=False)  # not checked here
    parse_config({**SIM, "study": {"output": str(tmp_path / "new" / "deeper")}}, "c.toml", runtime=False)


# -- 7. the content of a study's data files is part of its identity ------------------------
def _collected(tmp_path, data: dict):
    """A workspace whose study.json records ``data`` as collect would (without collecting)."""
    out = tmp_path / "out"
    cfg = parse_config({**data, "study": {**data.get("study", {}), "output": str(out)}}, "c.toml", runtime=False)
    StudyRunner(cfg).check_identity(write=True)
    return cfg, out


def _write_items(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    return path


def test_a_label_edited_after_collect_is_refused_at_fit_and_evaluate(tmp_path):
    p = _write_items(tmp_path / "items.jsonl", _items())
    cfg, out = _collected(tmp_path, _generic(p))
    assert json.loads((out / "study.json").read_text())["plan"]["data"]["files"] == [str(p)]
    StudyRunner(cfg).check_identity(write=False)  # unchanged: passes
    rows = _items()
    rows[3]["quality"] = 5 if rows[3]["quality"] != 5 else 1
    _write_items(p, rows)
    with pytest.raises(InputError) as e:
        StudyRunner(cfg).check_identity(write=False)
    assert f"the data changed since collect ({p}: content " in str(e.value)
    assert "run `judgecal collect` to re-read it" in str(e.value)
    StudyRunner(cfg).check_identity(write=True)  # what a new collect records: then it passes again
    StudyRunner(cfg).check_identity(write=False)


def test_a_folder_whose_same_file_now_draws_other_items_says_so(tmp_path):
    """A folder collected when a seeded limit drew by the file's row order (before 2026-12-07)
    holds another sample than the same file draws now: the same bytes, other items. The refusal
    said "content ... at collect, now ..." of a file nobody had touched; it says what changed,
    and that a collect draws it again. (The old draw stood in by the recorded items' hash.)"""
    p = _write_items(tmp_path / "items.jsonl", _items(12))
    data = _generic(p)
    data["dataset"]["max_groups"] = 4
    cfg, out = _collected(tmp_path, data)
    study = json.loads((out / "study.json").read_text())
    study["plan"]["data"]["hash"] = "0" * 16  # the items the file-order draw chose
    (out / "study.json").write_text(json.dumps(study))
    with pytest.raises(InputError) as e:
        StudyRunner(cfg).check_identity(write=False)
    said = str(e.value)
    assert f"({p}: the same bytes, read into other items: a sample drawn before 2026-12-07 followed the file's row " \
           "order, and a seeded limit now draws by id" in said, said
    assert said.endswith("run `judgecal collect` to draw it again (answers to the items drawn again are reused)"), said
    assert "restore the file" not in said


def test_show_says_the_data_changed_since_collect(tmp_path, capsys):
    """show reported "committed: N of N" for a folder whose labels were edited, which fit then
    refused (a user's finding): it says so."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    _, out = _collected(tmp_path, _generic(p))
    assert cli.main(["show", str(out)]) == 0
    assert "the data changed" not in capsys.readouterr().out
    rows = _items()
    rows[3]["quality"] = 5 if rows[3]["quality"] != 5 else 1
    _write_items(p, rows)
    assert cli.main(["show", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[1].startswith(f"# the data changed since the last collect ({p}: content ")  # under the first line


def test_a_text_edited_after_collect_is_refused_too(tmp_path):
    p = _write_items(tmp_path / "items.jsonl", _items())
    cfg, _ = _collected(tmp_path, _generic(p))
    rows = _items()
    rows[0]["text"] = "another text"
    _write_items(p, rows)
    with pytest.raises(InputError, match="the data changed since collect"):
        StudyRunner(cfg).check_identity(write=False)


def test_a_study_collected_before_the_data_hash_still_loads(tmp_path):
    """study.json of earlier versions has no plan.data: nothing to compare, nothing refused."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    cfg, out = _collected(tmp_path, _generic(p))
    saved = json.loads((out / "study.json").read_text())
    del saved["plan"]["data"]
    (out / "study.json").write_text(json.dumps(saved))
    rows = _items()
    rows[3]["quality"] = 1 if rows[3]["quality"] != 1 else 2
    _write_items(p, rows)
    StudyRunner(cfg).check_identity(write=False)


def test_a_data_file_gone_after_collect_is_not_refused(tmp_path):
    """The workspace holds the collected copy; a study moved without its source still fits."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    cfg, _ = _collected(tmp_path, _generic(p))
    p.unlink()
    StudyRunner(cfg).check_identity(write=False)


def test_bundled_data_adds_no_data_hash(tmp_path):
    _, out = _collected(tmp_path, {**SIM, "dataset": {"max_groups": 4, "max_items_per_group": 2}})
    assert "data" not in json.loads((out / "study.json").read_text())["plan"]


def test_urw_pairs_edited_after_collect_are_refused(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"id": f"p{k}", "prompt": f"Write line {k}.", "response_a": f"line {k}", "response_b": f"no {k}",
             "preferred": "a"} for k in range(4)]
    _write_items(pairs, rows)
    data = {**SIM, **URW, "urw": {"evaluation": ["generic"], "evaluation_paths": {"generic": str(pairs)},
                                  "evaluation_columns": {"pair_id": "id"}, "calibration_max_responses": 3}}
    cfg, out = _collected(tmp_path, data)
    assert json.loads((out / "study.json").read_text())["plan"]["data"]["files"] == [str(pairs)]
    rows[1]["preferred"] = "b"
    _write_items(pairs, rows)
    with pytest.raises(InputError, match="the data changed since collect"):
        StudyRunner(cfg).check_identity(write=False)


def test_fit_and_evaluate_refuse_edited_data_in_one_line_with_nothing_written(tmp_path, capfd, monkeypatch):
    def stop(*a, **k):
        raise AssertionError("reached the pipeline")

    monkeypatch.setattr(StudyRun, "begin", stop)
    monkeypatch.setattr(StudyRun, "collect", stop)
    p = _write_items(tmp_path / "items.jsonl", _items())
    _, out = _collected(tmp_path, _generic(p))
    rows = _items()
    rows[5]["quality"] = 1 if rows[5]["quality"] != 1 else 2
    _write_items(p, rows)
    before = {q.name: q.stat().st_mtime_ns for q in out.iterdir()}
    for stage in ("fit", "evaluate"):
        code = cli.main([stage, str(out)])
        err = capfd.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "the data changed since collect" in err[0], err
    assert {q.name: q.stat().st_mtime_ns for q in out.iterdir()} == before


def _baseline_tracks(out, labels: dict) -> float:
    """The correlation of the collected baseline scores with ``labels`` (item id -> label)."""
    import numpy as np

    from judgecal.pipeline import PartStore, answered
    from judgecal.workspace import Workspace

    ws = Workspace(str(out))
    got = answered(ws.read_parquet("requests.parquet"), PartStore(ws.child("responses"))).to_pandas()
    base = got[got["probe_id"] == "baseline"].groupby("item_id")["expected_score"].mean()
    return float(np.corrcoef(base.to_numpy(), [labels[i] for i in base.index])[0, 1])


def test_a_report_after_a_collect_that_changed_the_labels_is_refused_until_evaluate(tmp_path, capfd):
    """Labels edited, then `collect` (which re-reads them): `report` drew the old labels' numbers
    from the results log left in place, without a word (a user's finding). The collect names
    what is stale; report refuses the old log; evaluate then report pass. An `evaluate --set`
    variant's report says which settings it ran with."""
    p = _write_items(tmp_path / "items.jsonl", _items(24))
    out = tmp_path / "out"
    # no planted bias: on 2-word texts the length bias floors every score
    toml = generic_study(tmp_path / "study.toml", out, p, 'item_id = "id", group_id = "doc", content = "text"',
                         engine='kind = "simulated"\nbiases = {}')
    assert cli.main(["run", str(toml)]) == 0
    assert _baseline_tracks(out, {r["id"]: r["quality"] for r in _items(24)}) > 0.9
    rows = _items(24)
    for r in rows:
        r["quality"] = 6 - r["quality"]
    _write_items(p, rows)
    capfd.readouterr()
    # show's "0 not yet asked" of the written plan read as nothing to do; the collect asked it all anew
    assert cli.main(["show", str(out)]) == 0
    assert ("  (the written plan is of the data as it was; the next collect plans it anew and asks anew the requests "
            "of new items and of items whose texts changed, and all of them where the sample's labels changed (the "
            "SIMULATED judge's answers are built from them; an item added or removed changes them too))") \
        in capfd.readouterr().out.splitlines()
    assert cli.main(["collect", str(toml)]) == 0
    # the SIMULATED judge's answers are built from the labels: the old ones were reused, the
    # scores tracking the old labels against the new (a user's finding); a real judge's are reused
    assert _baseline_tracks(out, {r["id"]: r["quality"] for r in rows}) > 0.9
    err = capfd.readouterr().err
    assert "labels included; the SIMULATED judge's answers are built from the sample's labels (an item added or " \
           "removed changes them too): a collect after they changed asks those answers anew" in err
    # a report.html and models.json of the old labels stayed, to be opened and read (a user's finding)
    assert ("[collect] removed features.parquet, models.json, predictions.parquet, report.html, made from the earlier "
            "collect; results.json kept, marked as of the earlier collect (refused until made anew): `judgecal fit`, "
            "`evaluate` and `report` (or `run`) make them anew") in err
    assert not any((out / n).exists() for n in ("features.parquet", "models.json", "predictions.parquet",
                                                "report.html"))
    assert cli.main(["report", str(out)]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err == [f"judgecal: error: {out / 'results.json'}: evaluated on an earlier collect (the data or the plan "
                   "changed since); run `judgecal evaluate` (and `judgecal fit`), or `judgecal run`"]
    assert not (out / "report.html").exists()
    assert cli.main(["evaluate", str(out), "--set", 'fit.representation="half"']) == 0
    text = capfd.readouterr().out
    line = 'evaluated with settings other than the study\'s collect: fit.representation = "half" (collected with ' \
           '"paired")'
    assert line in text
    assert cli.main(["report", str(out)]) == 0
    assert line.replace('"', "&quot;").replace("'", "&#x27;") in (out / "report.html").read_text()
    assert cli.main(["evaluate", str(out), "--set", 'fit.representation="half"']) == 0
    assert "still shows" not in capfd.readouterr().err  # the report's own results again: nothing to draw anew
    assert cli.main(["evaluate", str(out), "--set", 'fit.representation="half"', "--set", "fit.fold_seeds=1"]) == 0
    assert f"judgecal: note: report.html still shows the previous results; `judgecal report {out}` draws this " \
           "one" in capfd.readouterr().err  # evaluate left the old report without a word (a user's finding)
    # a --set that report or fit never reads is refused (report redrew the old log without a word)
    capfd.readouterr()
    before = (out / "report.html").stat().st_mtime_ns
    assert cli.main(["report", str(out), "--set", 'design.attributes=["length"]']) == 2
    assert capfd.readouterr().err.strip() == (
        "judgecal: error: --set design.attributes: report draws the results log as evaluate wrote it and reads no "
        "setting; run `judgecal evaluate FOLDER --set ...`, then report")
    assert (out / "report.html").stat().st_mtime_ns == before
    assert cli.main(["fit", str(out), "--set", "fit.fold_seeds=7"]) == 2
    assert "--set fit.fold_seeds: fit never reads it" in capfd.readouterr().err
    # a --set repeating the collected value changes nothing and passes (a TOML run needs it to match)
    assert cli.main(["report", str(toml), "--set", 'pool.attributes=["length"]']) == 0
    # fit's models against the log's run (evaluated with half): the same setting says nothing, the
    # collected one says the models differ from what the log describes
    capfd.readouterr()
    assert cli.main(["fit", str(out), "--set", 'fit.representation="half"']) == 0
    assert "fitted with settings other" not in capfd.readouterr().out
    assert cli.main(["fit", str(out)]) == 0
    assert ('fitted with settings other than results.json\'s evaluate run: fit.representation = "paired" (evaluated '
            'with "half"); results.json and the report describe that run, not these models') in capfd.readouterr().out
    # and the other way round: an evaluate whose settings are not those of models.json says so (a
    # user's finding: models.json of "half" stayed beside a plain evaluate's results without a word)
    assert cli.main(["fit", str(out), "--set", 'fit.representation="half"']) == 0
    assert cli.main(["evaluate", str(out)]) == 0
    assert (f'judgecal: note: models.json was fitted with settings other than this evaluate: fit.representation = '
            f'"half" (evaluated with "paired"); `judgecal fit {out} --set \'fit.representation="paired"\'` fits it for '
            'these') in capfd.readouterr().err
    assert cli.main(["evaluate", str(out), "--set", 'fit.representation="half"', "--set", "fit.folds=3"]) == 0
    assert "models.json was fitted" not in capfd.readouterr().err  # folds: evaluate's own, never fit's


def test_a_report_is_of_the_same_results_whatever_the_stages_took_and_however_the_folder_was_spelt():
    """`run study.toml` (output "runs/s"), then `evaluate runs/s` (its absolute path): the note
    "report.html still shows the previous results" came for the same results (found by hand)."""
    from judgecal.methods.runner import results_digest

    log_ = {"results": {"PRISM": 0.9}, "spec": {"config": {"output": "runs/s", "seed": 0}},
            "stats": {"timing": {"total": 1.3}, "collect": {"responses": {"computed": 0}}}}
    same = {**log_, "spec": {"config": {"output": "/abs/runs/s", "seed": 0}}, "stats": {**log_["stats"], "timing": {}}}
    assert results_digest(same) == results_digest(log_)
    for other in ({**log_, "results": {"PRISM": 0.8}}, {**log_, "spec": {"config": {"output": "runs/s", "seed": 1}}}):
        assert results_digest(other) != results_digest(log_)


def test_settings_changed_names_what_changes_the_numbers_and_not_what_an_older_collect_lacked():
    from judgecal.methods.runner import settings_changed

    collected = {"seed": 0, "fit": {"representation": "paired", "gammas": (1.0, 2.0)}, "urw": {"alpha": 0.1},
                 "tune": {"mode": "local"}}
    now = {"seed": 7, "fit": {"representation": "paired", "gammas": [1.0, 2.0], "added_later": 3},
           "urw": {"alpha": 0.1, "pair_draw": "first"}, "tune": {"mode": "ray"}}
    assert settings_changed(collected, now) == {"study.seed": [0, 7]}
    assert settings_changed(None, now) == {}


def test_a_results_log_from_before_logs_recorded_their_collect_is_refused_after_a_new_collect(tmp_path, capfd):
    """Logs written before the stamp had none, so report drew them after a collect that changed
    the labels, though collect said it would refuse (a second reader's finding)."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    cfg, out = _collected(tmp_path, _generic(p))
    (out / "results.json").write_text(json.dumps({"log_version": 1, "method": "prism", "spec": {"config": {}}}))
    rows = _items()
    rows[3]["quality"] = 5 if rows[3]["quality"] != 5 else 1
    _write_items(p, rows)
    StudyRunner(cfg).check_identity(write=True)  # what a collect of the edited file records
    with pytest.raises(InputError, match="evaluated on an earlier collect"):
        StudyRunner(cfg).check_log_current(json.loads((out / "results.json").read_text()))


# -- 8. pairs that repeat with opposite labels -----------------------------------------------
def test_pairs_repeated_with_opposite_labels_are_counted():
    from judgecal.rubrics.data import opposite_label_lines, opposite_labels

    rows = [("d", "g", "x", "y", "a"), ("d", "g", "y", "x", "a"),  # x > y, then y > x: both ways
            ("d", "g", "x", "z", "a"), ("d", "g", "z", "x", "b"),  # x > z twice (swapped order): consistent
            ("d", "h", "x", "y", "b"), ("e", "g", "x", "y", "b")]  # another prompt, another dataset
    counts = opposite_labels(*zip(*rows))
    assert counts == {"d": 2}
    line, = opposite_label_lines(counts)
    assert line.startswith("warning: d: 2 pairs repeat the same two responses to one prompt with the opposite label")
    assert opposite_labels(*zip(*rows[2:])) == {}


def test_pairs_repeated_with_the_same_label_are_counted_from_a_tenth_of_a_dataset():
    """A second export round stacked under new ids moved accuracy without a word (a user's finding)."""
    from judgecal.rubrics.data import opposite_label_lines, repeated_pairs

    rows = [("d", f"g{i}", "x", "y", "a") for i in range(18)]
    rows += [("d", "g0", "y", "x", "b"), ("d", "g1", "x", "y", "a")]  # 2 of 20 repeat g0, g1 (swapped or not)
    rows += [("e", "g", "x", "y", "a"), ("e", "h", "x", "y", "a")]  # other prompts: not repeats
    assert repeated_pairs(*zip(*rows)) == {"d": 2}
    assert repeated_pairs(*zip(*rows[1:])) == {}  # 1 of 19: below a tenth, a set's own few repeats
    line, = opposite_label_lines({}, {"d": 2})
    assert line.startswith("warning: d: 2 pairs repeat another pair's prompt, two responses and label")


def test_a_urw_collect_logs_pairs_labelled_both_ways(tmp_path, capfd, monkeypatch):
    """The warning comes before anything is written (the plan is refused or run with it said)."""
    class Reached(Exception):
        pass

    def stop(*a, **k):
        raise Reached

    monkeypatch.setattr(StudyRun, "begin", stop)
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"id": "p0", "prompt": "Say hi.", "response_a": "hi", "response_b": "bye", "preferred": "a"},
            {"id": "p1", "prompt": "Say hi.", "response_a": "bye", "response_b": "hi", "preferred": "a"},
            {"id": "p2", "prompt": "Say yo.", "response_a": "yo", "response_b": "no", "preferred": "a"},
            {"id": "p3", "prompt": "Say yo.", "response_a": "yo", "response_b": "no", "preferred": "a"}]
    _write_items(pairs, rows)
    cfg = parse_config({**SIM, **URW, "study": {"method": "urw", "output": str(tmp_path / "out")},
                        "urw": {"evaluation": ["generic"], "evaluation_paths": {"generic": str(pairs)},
                                "evaluation_columns": {"pair_id": "id"}, "calibration_max_responses": 3}},
                       "c.toml", runtime=False)
    with pytest.raises(Reached):
        StudyRunner(cfg).collect()
    err = capfd.readouterr().err
    assert "[urw] warning: generic: 2 pairs repeat the same two responses to one prompt with the opposite label" in err
    assert "[urw] warning: generic: 1 pair repeats another pair's prompt, two responses and label" in err


# -- end to end: a real process, one line, exit 2, nothing written --------------------------
@pytest.mark.parametrize("build, fragment", [
    (lambda t: "", "c.toml: the config is empty (no sections)"),
    (lambda t: f'[study]\noutput = "{t / "file.txt"}/out"\n[engine]\nkind = "simulated"\n', "which is a file, not a folder"),
    (lambda t: '[engine]\nkind = "simulated"\n[fit]\ngammas = [0.1, nan]\n', "[fit].gammas[1]: must be a finite number"),
    (lambda t: '[engine]\nkind = "simulated"\n[collect]\npart_seconds = inf\n', "[collect].part_seconds: must be a finite"),
    (lambda t: '[study]\nmethod = "urw"\n[engine]\nkind = "simulated"\n[urw]\nevaluation = ["llmbar", "llmbar"]\n',
     "[urw].evaluation: 'llmbar' is named twice"),
])
def test_one_line_from_a_real_process(tmp_path, build, fragment):
    (tmp_path / "file.txt").write_text("keep me")
    cfg = write_config(tmp_path / "c.toml", build(tmp_path))
    before = sorted(p.name for p in tmp_path.iterdir())
    r = subprocess.run(judgecal_cmd("collect", str(cfg)), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and fragment in r.stderr, r.stderr
    assert r.stderr.startswith("judgecal: error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written (no runs/study either)
    assert (tmp_path / "file.txt").read_text() == "keep me"


def test_a_malformed_set_from_a_real_process(tmp_path):
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{tmp_path / "out"}"\n[engine]\nkind = "simulated"\n')
    r = subprocess.run(judgecal_cmd("collect", str(cfg), "--set", "fit.gammas=[0.1,"), cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--set fit.gammas=[0.1,: the value is not TOML" in r.stderr
    assert not (tmp_path / "out").exists()


# -- a relative path in a config run from another folder ------------------------------------
def test_a_relative_path_that_the_configs_folder_also_holds_is_refused_from_another_folder(tmp_path, monkeypatch):
    """Relative paths are read from the folder judgecal runs in; a config in sub/ naming
    pairs.csv, run from the folder above that holds another pairs.csv, read that one without a
    word (a user's finding). Now it is one line naming both files."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "pairs.csv").write_text("prompt,response_a,response_b,preferred\nq,a,b,a\n")
    cfg = sub / "study.toml"
    cfg.write_text('[study]\nmethod = "urw"\noutput = "out"\n[engine]\nkind = "simulated"\n'
                   '[urw]\nevaluation = ["generic"]\nevaluation_paths = {generic = "pairs.csv"}\n')
    monkeypatch.chdir(sub)  # from the config's folder: the one file there is the one read
    assert load_config(str(cfg), runtime=False).urw.evaluation_paths == {"generic": "pairs.csv"}
    monkeypatch.chdir(tmp_path)
    for other in (False, True):  # the folder judgecal runs in without, then with, a pairs.csv of its own
        if other:
            (tmp_path / "pairs.csv").write_text("prompt,response_a,response_b,preferred\nx,y,z,b\n")
        with pytest.raises(InputError) as e:
            load_config(str(cfg), runtime=False)
        msg = str(e.value)
        assert msg.startswith(f"{cfg} [urw].evaluation_paths.generic: 'pairs.csv' is read from the folder judgecal "
                              f"runs in ({tmp_path / 'pairs.csv'}") and "\n" not in msg, msg
        too = " too" if other else ""  # "has one too" beside "where there is none" (a user's finding)
        assert f"the config's folder has one{too} ({sub / 'pairs.csv'})" in msg
        assert (", where there is none" in msg) is not other
    # an absolute path, or a path from the folder judgecal runs in to the same file, is what was meant
    text = cfg.read_text()
    for given in (str(sub / "pairs.csv"), "sub/pairs.csv"):
        cfg.write_text(text.replace('"pairs.csv"', json.dumps(given)))
        assert load_config(str(cfg), runtime=False).urw.evaluation_paths["generic"] == given
    # the shipped configs name nothing by a relative path: they load from any folder
    assert load_config(demo_config_path("urw_demo"), runtime=False).method == "urw"


def test_the_refusal_names_the_file_that_changed_of_several(tmp_path):
    """A URW study reads a calibration file and a pairs file; the refusal named both files and
    one hash of them all (a user's finding). It names the one whose bytes changed; a study.json
    from before per-file hashes still passes unchanged data and names every file when it changed."""
    pairs, calib = tmp_path / "pairs.jsonl", tmp_path / "calib.jsonl"
    rows = [{"id": f"p{k}", "prompt": f"Write line {k}.", "response_a": f"line {k}", "response_b": f"no {k}",
             "preferred": "a"} for k in range(4)]
    _write_items(pairs, rows)
    _write_items(calib, [{"prompt": f"Say {k}.", "response": f"said {k}", "criterion": "Is it said?", "label": k % 2}
                         for k in range(6)])
    data = {**SIM, **URW, "urw": {"evaluation": ["generic"], "evaluation_paths": {"generic": str(pairs)},
                                  "evaluation_columns": {"pair_id": "id"}, "calibration": "generic",
                                  "calibration_path": str(calib), "calibration_max_responses": 3}}
    cfg, out = _collected(tmp_path, data)
    assert sorted(json.loads((out / "study.json").read_text())["plan"]["data"]["file_hashes"]) == \
        sorted([str(pairs), str(calib)])
    rows[1]["preferred"] = "b"
    _write_items(pairs, rows)
    with pytest.raises(InputError) as e:
        StudyRunner(cfg).check_identity(write=False)
    assert f"the data changed since collect ({pairs}: content " in str(e.value) and str(calib) not in str(e.value)
    # study.json written before per-file hashes: unchanged data passes, changed data names every file
    StudyRunner(cfg).check_identity(write=True)
    saved = json.loads((out / "study.json").read_text())
    del saved["plan"]["data"]["file_hashes"]
    (out / "study.json").write_text(json.dumps(saved))
    StudyRunner(cfg).check_identity(write=False)
    rows[2]["preferred"] = "b"
    _write_items(pairs, rows)
    with pytest.raises(InputError) as e:
        StudyRunner(cfg).check_identity(write=False)
    assert str(calib) in str(e.value) and str(pairs) in str(e.value)


def test_a_study_used_from_another_folder_never_reads_another_file_of_that_name(tmp_path, monkeypatch, capfd):
    """A relative data path names a file in the folder collect ran in. Run from a folder that
    holds another file of that name, collect read it as the study's data without a word (a
    user's finding: the labels swapped); now refused in one line, as is a command that reads
    the data where the file is missing. A later stage where there is no such file still runs."""
    from judgecal.config import load_study

    a, b, c = (tmp_path / n for n in "abc")
    for d in (a, b, c):
        d.mkdir()
    _write_items(a / "items.jsonl", _items())
    rows = _items()
    rows[0]["quality"] = 5 if rows[0]["quality"] != 5 else 1
    _write_items(b / "items.jsonl", rows)
    monkeypatch.chdir(a)
    _, out = _collected(tmp_path, _generic("items.jsonl"))
    assert json.loads((out / "study.json").read_text())["paths_from"] == str(a.resolve())
    StudyRunner(load_study(str(out), reads_data=True)).check_identity(write=False)  # from a: as collected
    monkeypatch.chdir(b)
    want = (f"'items.jsonl' is read from the folder judgecal runs in ({b.resolve() / 'items.jsonl'}: another file), "
            f"but this study read {a.resolve() / 'items.jsonl'} at collect; run judgecal from {a.resolve()}")
    for stage in ("collect", "fit", "show"):
        assert cli.main([stage, str(out)]) == 2
        (line,) = capfd.readouterr().err.strip().splitlines()
        assert line == f"judgecal: error: {out / 'study.json'} [dataset].path: {want}", line
    monkeypatch.chdir(c)
    with pytest.raises(InputError, match=r"\(.*/c/items.jsonl: no such file\), but this study read "):
        load_study(str(out), reads_data=True)
    StudyRunner(load_study(str(out))).check_identity(write=False)  # fit, evaluate, report: the copy suffices
    (c / "items.jsonl").write_bytes((a / "items.jsonl").read_bytes())  # the project copied: the same bytes
    StudyRunner(load_study(str(out), reads_data=True)).check_identity(write=False)
    # the study's TOML run from b (its output absolute) meets the same check before collecting
    monkeypatch.chdir(b)
    cfg = parse_config({**_generic("items.jsonl"), "study": {"output": str(out)}}, "c.toml", runtime=False)
    with pytest.raises(InputError, match=r"\(.*/b/items.jsonl: another file\), but this study read "):
        StudyRunner(cfg).check_collectable()


def test_the_collected_file_named_another_way_is_the_same_study(tmp_path, monkeypatch):
    """The refusal of a relative path run from elsewhere says to run from the study's folder;
    the data's absolute path (or another relative one naming it) from anywhere was refused as
    "another dataset" (path items.jsonl, now path /abs/items.jsonl): a user's finding. The
    file it names is compared now; another file by that name still is another dataset."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    _write_items(a / "items.jsonl", _items())
    monkeypatch.chdir(a)
    _, out = _collected(tmp_path, _generic("items.jsonl"))
    monkeypatch.chdir(b)
    for spelt in (str(a / "items.jsonl"), "../a/items.jsonl"):
        cfg = parse_config({**_generic(spelt), "study": {"output": str(out)}}, "c.toml", runtime=False)
        StudyRunner(cfg).check_identity(write=False)  # fit and evaluate with this config
        StudyRunner(cfg).check_collectable()
        # what evaluate's results log records, which report compares with study.json's (report
        # refused a log evaluated with the absolute path as another study's: a second reader's finding)
        saved = json.loads((out / "study.json").read_text())
        assert StudyRunner(cfg).recorded_identity(saved) == saved["identity"]
    rows = _items()
    rows[0]["quality"] = 5 if rows[0]["quality"] != 5 else 1
    _write_items(b / "items.jsonl", rows)
    cfg = parse_config({**_generic(str(b / "items.jsonl")), "study": {"output": str(out)}}, "c.toml", runtime=False)
    with pytest.raises(InputError, match=r"another dataset \(path items.jsonl, now path /"):
        StudyRunner(cfg).check_identity(write=False)


def test_a_collect_from_another_folder_says_where_relative_paths_are_read(tmp_path, monkeypatch, capfd):
    """A collect from another folder (beside a same-bytes copy) moved the study onto that copy
    without a word (a user's finding): it says so. A results log of the same file spelt
    otherwise is then refused as evaluated on an earlier collect, not as another study's."""
    from judgecal.methods.runner import check_log_current, plan_stamp
    from judgecal.workspace import Workspace

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    _write_items(a / "items.jsonl", _items())
    (b / "items.jsonl").write_bytes((a / "items.jsonl").read_bytes())
    monkeypatch.chdir(a)
    cfg, out = _collected(tmp_path, _generic("items.jsonl"))
    study = json.loads((out / "study.json").read_text())
    for name in ("results.json", "grid/fit.folds=3.json"):  # the study's log and a grid variant's
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text(json.dumps({"spec": {"identity": study["identity"],
                                                     "collected_plan": plan_stamp(study["plan"])}}))
    monkeypatch.chdir(b)
    capfd.readouterr()
    StudyRunner(cfg).check_identity(write=True)  # the copy in b, read by the same relative path
    assert (f"relative paths (items.jsonl) are read from {b.resolve()} from now on; the last collect read them "
            f"from {a.resolve()}") in capfd.readouterr().err
    monkeypatch.chdir(tmp_path)
    spelt = parse_config({**_generic(str(b / "items.jsonl")), "study": {"output": str(out)}}, "c.toml", runtime=False)
    StudyRunner(spelt).check_identity(write=True)  # the same file, spelt absolute
    for name in ("results.json", "grid/fit.folds=3.json"):
        log_ = json.loads((out / name).read_text())
        with pytest.raises(InputError, match="evaluated on an earlier collect"):
            check_log_current(Workspace(str(out)), log_, str(out / name))


def test_a_collect_only_setting_given_to_fit_or_evaluate_is_refused(tmp_path, capfd):
    """`evaluate runs/s1 --set collect.num_actors=2` ran as if it were not given (a user's finding)."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    _, out = _collected(tmp_path, _generic(p))
    for stage in ("fit", "evaluate"):
        assert cli.main([stage, str(out), "--set", "collect.num_actors=3"]) == 2
        (line,) = capfd.readouterr().err.strip().splitlines()
        assert line == (f"judgecal: error: --set collect.num_actors: {stage} never reads it (it sizes the collect's "
                        "work): give it to `judgecal collect`"), line


def test_a_changed_limit_is_no_data_change(tmp_path):
    """max_items_per_group 3 -> 4 on the same file: collect said "the data changed since the last
    collect (data/a.csv: the same bytes, read into other items ...)" (a user's finding): the
    limit drew another sample; the data did not change."""
    p = _write_items(tmp_path / "items.jsonl", _items(16))
    data = _generic(p)
    data["dataset"]["max_groups"] = 4
    _, out = _collected(tmp_path, data)
    data["dataset"]["max_groups"] = 6
    cfg = parse_config({**data, "study": {"output": str(out)}}, "c.toml", runtime=False)
    assert StudyRunner(cfg).data_changed() is None


def test_a_folder_collected_under_one_spelling_is_checked_with_that_spelling(tmp_path, monkeypatch):
    """Collected from `other/` as `../proj/data/items.jsonl`, then run from `proj/studies/` as
    `../data/items.jsonl` (the same file): the check looked the new spelling up in `other/`,
    found an unrelated `data/items.jsonl` beside it and refused, naming a file the study never
    read (a user's finding). The saved spelling is looked up where collect ran."""
    root = tmp_path
    for d in ("proj/studies", "proj/data", "other", "data"):
        (root / d).mkdir(parents=True)
    _write_items(root / "proj/data/items.jsonl", _items())
    rows = _items()
    rows[0]["quality"] = 5 if rows[0]["quality"] != 5 else 1
    _write_items(root / "data/items.jsonl", rows)  # another export beside `other/`
    monkeypatch.chdir(root / "other")
    _, out = _collected(tmp_path, _generic("../proj/data/items.jsonl"))
    monkeypatch.chdir(root / "proj/studies")
    cfg = parse_config({**_generic("../data/items.jsonl"), "study": {"output": str(out)}}, "c.toml", runtime=False)
    StudyRunner(cfg).check_collectable()
    StudyRunner(cfg).check_identity(write=False)


def test_the_saved_spelling_is_looked_up_only_for_the_same_file(tmp_path, monkeypatch):
    """A config naming another file (v2 where v1 was collected) is no spelling of the collected
    one: its own path is looked up where collect ran, as before (the saved v1 there, compared
    with v2 here, was refused as "another file": a second reader's finding)."""
    from judgecal.config import check_paths_from

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    _write_items(a / "v1.jsonl", _items())
    rows = _items()
    rows[0]["quality"] = 5 if rows[0]["quality"] != 5 else 1
    _write_items(b / "v2.jsonl", rows)
    monkeypatch.chdir(b)
    cfg = parse_config(_generic("v2.jsonl"), "c.toml", runtime=False)
    check_paths_from(cfg, str(a), "study.json", reads_data=True, saved_config={"dataset": {"path": "v1.jsonl"}})


def test_a_study_folder_with_another_output_is_refused_in_one_line(tmp_path, capfd, monkeypatch):
    """`report runs/A --output runs/B` read B's study with A's saved config and refused it as
    "another method" (a user's finding): given a folder, --output may only name that folder."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    _, out = _collected(tmp_path, _generic(p))
    monkeypatch.chdir(tmp_path)
    for stage in ("report", "fit", "collect"):
        assert cli.main([stage, str(out), "--output", str(tmp_path / "other")]) == 2
        (line,) = capfd.readouterr().err.strip().splitlines()
        assert line == (f"judgecal: error: --output (study.output): {out} is a study folder, which its stages read "
                        f"and write; to use {tmp_path / 'other'}, give it instead of {out}, or give a study config "
                        "(TOML) with --output to collect there"), line
    assert not (tmp_path / "other").exists()
    assert cli.main(["show", str(out), "--output", "out/"]) == 0  # the folder itself, spelt another way


def test_collect_says_when_the_data_changed_since_the_last_collect(tmp_path, capfd):
    """Collect re-reads edited data (labels included) as it should, and now says so, naming the
    file with its own content hashes (the refusal at fit named the study's combined hash as
    one file's content: a user's finding)."""
    p = _write_items(tmp_path / "items.jsonl", _items())
    cfg, out = _collected(tmp_path, _generic(p))
    hashes = json.loads((out / "study.json").read_text())["plan"]["data"]["file_hashes"]
    rows = _items()
    rows[2]["quality"] = 5 if rows[2]["quality"] != 5 else 1
    _write_items(p, rows)
    with pytest.raises(InputError) as e:
        StudyRunner(cfg).check_identity(write=False)
    now = StudyRunner(cfg).method.plan_spec(cfg)["data"]["file_hashes"]
    assert f"({p}: content {hashes[str(p)]} at collect, now {now[str(p)]})" in str(e.value)
    capfd.readouterr()
    StudyRunner(cfg).check_identity(write=True)
    assert (f"[collect] the data changed since the last collect ({p}: content {hashes[str(p)]} at collect, now "
            f"{now[str(p)]}): its items are read again, labels included") in capfd.readouterr().err
    StudyRunner(cfg).check_identity(write=True)  # unchanged since: nothing said
    assert "data changed" not in capfd.readouterr().err


def test_a_field_outside_any_section_is_named_as_a_field():
    """`kind = "simulated"` above every header was called an unknown section (a user's finding)."""
    line = refused({"kind": "simulated"})
    assert line.startswith("c.toml kind: a field outside any section; put it under its section's header (known "
                           "sections: study, dataset, ") and line.endswith(", engine)"), line


def test_a_missing_column_names_a_header_that_differs_only_in_case_or_spaces(tmp_path):
    from judgecal.datasets.loaders import missing_columns

    e = missing_columns("f.csv", ["human"], ["id", "text", "Human "])
    assert str(e) == "f.csv: missing column(s) human (it has: id, text, Human ); 'Human ' for 'human' differs only in " \
                     "case or spaces"
    assert str(missing_columns("f.csv", ["human"], ["id"])) == "f.csv: missing column(s) human (it has: id)"
    p = tmp_path / "items.csv"
    p.write_text("id,doc,source,text,Quality\ni0,d0,a,t,3\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"'Quality' for 'quality' differs only in case or spaces$"):
        _load_items(p)


def test_a_ray_jobs_unpacked_copy_is_no_folder_to_run_from(tmp_path, monkeypatch):
    """A Ray job runs in its upload's unpacked copy, a new one for every upload of changed
    files: a resubmitted job after a data edit was refused with "run judgecal from <the old
    copy>" (a second reader's finding). Such folders are not compared; plain ones are."""
    from judgecal.config import RAY_JOB_COPY, check_paths_from

    def two(root):
        pair = [root / "a", root / "b"]
        for d, q in zip(pair, (1, 5)):
            d.mkdir(parents=True)
            rows = _items()
            rows[0]["quality"] = q
            _write_items(d / "items.jsonl", rows)
        return pair

    cfg = parse_config(_generic("items.jsonl"), "c.toml", runtime=False)
    old, new = two(tmp_path / RAY_JOB_COPY)
    monkeypatch.chdir(new)
    check_paths_from(cfg, str(old), "study.json", reads_data=True)  # no refusal
    old, new = two(tmp_path / "plain")
    monkeypatch.chdir(new)
    with pytest.raises(InputError, match="another file"):
        check_paths_from(cfg, str(old), "study.json", reads_data=True)


def test_a_relative_model_path_naming_other_bytes_from_another_folder_is_refused_at_every_stage(tmp_path,
                                                                                                   monkeypatch):
    """The README says a relative model_path is checked at every stage as any relative path (a
    stranger's fit was refused from another folder): other bytes there are refused, the same
    bytes pass, and a model file missing there is left to the stages that load it."""
    from judgecal.config import check_paths_from

    old, new = tmp_path / "a", tmp_path / "b"
    for folder, body in ((old, b"model A"), (new, b"model B")):
        (folder / "m").mkdir(parents=True)
        (folder / "m" / "judge.gguf").write_bytes(body)
    cfg = parse_config({"engine": {"kind": "llamacpp", "model_path": "m/judge.gguf"}}, "c.toml", runtime=False)
    monkeypatch.chdir(new)
    with pytest.raises(InputError, match=r"^study.json \[engine\].model_path: 'm/judge.gguf' is read from the folder "
                                         r"judgecal runs in \(.*/b/m/judge.gguf: another file\)"):
        check_paths_from(cfg, str(old), "study.json", reads_data=False)
    (new / "m" / "judge.gguf").write_bytes(b"model A")
    check_paths_from(cfg, str(old), "study.json", reads_data=False)  # a copy with the same bytes
    (new / "m" / "judge.gguf").unlink()
    check_paths_from(cfg, str(old), "study.json", reads_data=True)  # missing here: the engine's check names it


def test_every_toml_example_in_the_readme_parses_and_the_whole_configs_load():
    """The README's URW example did not parse (an inline table over two lines: TOML 1.0 closes
    one on the line it opens), so a user copying it met 'Invalid initial character for a key
    part' (a user's finding); the parse error now says what it likely is."""
    import re
    import tomllib


    blocks = re.findall(r"```toml\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 8
    for i, block in enumerate(blocks):
        data = tomllib.loads(block)  # raises on the first that does not parse
        if "study" in data:  # a whole study config, as a user would copy it
            parse_config(data, where=f"README toml block {i}", runtime=False)


def test_an_inline_table_over_two_lines_is_named_as_the_cause(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[urw]\nevaluation_columns = {prompt = "q", response_a = "a",\n    response_b = "b"}\n')
    with pytest.raises(InputError, match=r"c.toml: does not parse \(.*\); an inline table \{ \.\.\. \} must close on "
                                         r"the line it opens: write it on one line, or as its own \[section.key\] table"):
        load_config(str(p))


def test_an_unread_setting_in_a_saved_study_folder_is_kept_with_a_warning_and_a_grid_variant_may_turn_it_off(
        tmp_path, capfd):
    """Settings nothing reads are refused where a study starts; a study folder whose collect
    took one (an earlier judgecal) stayed readable, since report reads no --set to fix it with,
    and a grid variant turning the subset curve off under [tune] mode = "ray" was refused whole
    (a second reader's findings)."""
    from judgecal.config import load_study
    from judgecal.studies.grid import check_grid

    assert "[tune].mode: set to 'ray'" in refused({"design": {"subsets": False}, "tune": {"mode": "ray"}})
    cfg, out = _collected(tmp_path, {**SIM, "dataset": {"max_groups": 4}})
    study = json.loads((out / "study.json").read_text())
    study["config"]["design"]["subsets"] = False
    study["config"]["tune"]["mode"] = "ray"
    (out / "study.json").write_text(json.dumps(study))
    capfd.readouterr()
    assert load_study(str(out)).tune.mode == "ray"
    assert capfd.readouterr().err.strip() == (
        f"judgecal: warning: {out / 'study.json'} [tune].mode: set to 'ray', but [design].subsets = false (the subset "
        "curve is the grid a PRISM study runs on Tune): nothing reads it (kept: the study folder's saved config)")
    with pytest.raises(InputError, match=r"^--set tune.storage: set to '.*', but \[design\].subsets = false"):
        load_study(str(out), [f'tune.storage="{tmp_path / "trials"}"'])  # this command's own --set: refused
    capfd.readouterr()
    toml = write_config(tmp_path / "s.toml", f'[study]\noutput = "{tmp_path / "g"}"\n[dataset]\nmax_groups = 4\n'
                        '[engine]\nkind = "simulated"\n[tune]\nmode = "ray"\n[fit]\nfolds = 2\ninner_folds = 2\n')
    check_grid(str(tmp_path / "grid.toml"), [str(toml)], [["design.subsets=true"], ["design.subsets=false"]])
    assert capfd.readouterr().err == ""  # silently: the study's own config serves every variant


def test_a_study_under_home_is_written_where_the_checks_looked(tmp_path, monkeypatch):
    """`[study] output = "~/runs/x"` was checked at ~ (check_output expands it) but written to a
    folder named "~" under the working folder (Workspace did not expand it)."""
    from judgecal.workspace import Workspace

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for given in ("~/runs/x", "file://~/runs/x"):
        ws = Workspace(given)
        assert ws.uri == str(tmp_path / "home" / "runs" / "x"), ws.uri
        ws.write_json("study.json", {"a": 1})
    assert (tmp_path / "home" / "runs" / "x" / "study.json").is_file() and not (tmp_path / "~").exists()


def test_a_folder_an_older_judgecal_wrote_stays_readable_under_tightened_rules(tmp_path, capfd):
    """Rules tightened since a folder was written (bootstrap at least 100 resamples, a target
    scale of whole numbers up to 100, fail_fast_requests at most 1000): a study folder whose
    saved config holds the old values loads with a warning each (it was unreadable: no --set
    can change a saved identity, and report takes none: a second reader's finding); a TOML or a
    --set with such a value is refused."""
    from judgecal.config import load_study

    p = _write_items(tmp_path / "items.jsonl", _items())
    _, out = _collected(tmp_path, _generic(p))
    study = json.loads((out / "study.json").read_text())
    study["config"]["fit"]["bootstrap"] = 50
    study["config"]["collect"]["fail_fast_requests"] = 5000
    study["config"]["dataset"]["target_scale"] = "0.5-5.5"
    study["config"]["engine"]["noise"] = -1.0  # the simulated judge's ranges, checked since 2026-12-07
    (out / "study.json").write_text(json.dumps(study))
    capfd.readouterr()
    cfg = load_study(str(out))
    assert (cfg.fit.bootstrap, cfg.collect.fail_fast_requests, cfg.dataset.target_scale) == (50, 5000, "0.5-5.5")
    assert cfg.engine.noise == -1.0
    err = capfd.readouterr().err
    for said in ("[engine].noise: must be >= 0, not -1.0 (kept: the study folder's saved config)","[fit].bootstrap: must be at least 100, not 50 (kept: the study folder's saved config)",
                 "[collect].fail_fast_requests: must lie in [0, 1000], not 5000 (kept: the study folder's saved "
                 "config)",
                 "[dataset].target_scale: '0.5-5.5' does not parse (write it as lo-hi: 1-5, 1-7, 0-10, 0-100) "
                 "(kept: the study folder's saved config)"):
        assert said in err, err
    with pytest.raises(InputError, match=r"^--set fit.bootstrap: must be at least 100, not 60"):
        load_study(str(out), ["fit.bootstrap=60"])
    assert "[fit].bootstrap: must be at least 100, not 50" in refused({"fit": {"bootstrap": 50}})


def test_every_toml_a_user_gives_is_read_alike(tmp_path):
    """Configs, probe banks and template files: a byte-order mark accepted (a bank saved by a
    Windows editor failed "at line 1, column 1"), a NUL ("\\u0000") refused naming its key."""
    from judgecal.probes.template_file import load_template_file

    bom = tmp_path / "bom.toml"
    bom.write_text("\ufeff" + GOOD_BANK, encoding="utf-8")
    assert load_bank(str(bom)).name == "mine"
    nul = write_config(tmp_path / "nul.toml", GOOD_BANK.replace("how long it is", "how long\\u0000 it is"))
    with pytest.raises(InputError, match=r"nul.toml: attributes\[0\].phrase: holds a NUL character \(U\+0000\) at "
                                         r"character 9; remove it$"):
        load_bank(str(nul))
    template = tmp_path / "t.toml"
    template.write_text('system = "x\\u0000"\nuser = "{{ content }}{{ clause }}"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"t.toml: system: holds a NUL character"):
        load_template_file(str(template))
    config = write_config(tmp_path / "c.toml", '[study]\nname = "a\\u0000b"\n')
    with pytest.raises(InputError, match=r"c.toml: study.name: holds a NUL character"):
        load_config(str(config))


def test_diagnostics_turned_off_on_the_command_line_take_their_fields_with_them():
    """`--set diagnostics.run=[]` on a config whose section sets other fields was refused with
    "remove the section", which a --set cannot do (a user's finding)."""
    from judgecal.config import DiagnosticsConfig

    path = demo_config_path("diagnostics_demo")
    assert load_config(path, runtime=False).diagnostics.joint_pairs == 3
    assert load_config(path, ["diagnostics.run=[]"], runtime=False).diagnostics == DiagnosticsConfig()
    # on a folder collected with diagnostics, fit sent the --set to evaluate, which refuses it
    # (its plan differs): it says where it belongs (a second reader's finding)
    from judgecal.cli import check_sets_read

    collected, now = load_config(path, runtime=False), load_config(path, ["diagnostics.run=[]"], runtime=False)
    with pytest.raises(InputError, match=r"^--set diagnostics.run: fit never reads it, and the diagnostics a study "
                                         r"runs are part of what its collect asked: give it to `judgecal collect`"):
        check_sets_read("fit", ["diagnostics.run=[]"], now, collected.to_dict(), ("diagnostics.",))


def test_a_plan_entry_left_out_at_its_default_is_shown_as_the_default():
    """"(sampling: collected {temperature 0.0, seed 5}, now none)" for a config with seed 0 (a
    user's finding): a greedy plan with seed 0 leaves the entry out, and "none" read as unset."""
    from judgecal.methods.runner import _same

    with pytest.raises(InputError) as e:
        _same({"sampling": {"temperature": 0.0, "seed": 5}}, {}, "w", "({key}: collected {old}, now {new})")
    assert str(e.value) == "w: (sampling: collected seed 5, now seed 0)"
