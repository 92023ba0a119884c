"""export-batch / import-batch by hand over a study of several request sets, as a user
following the README does it: what each command says, and the results files it refuses."""

import json

import pytest

from judgecal.pipeline import PartStore
from judgecal.workspace import Workspace

from conftest import small_study

ENGINE = 'kind = "openai-batch"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\nlogprobs = false'  # never called
TWO_SETS = '[diagnostics]\nrun = ["resolution"]\nscales = ["1-5", "1-10"]'  # probes, then scales


@pytest.fixture
def no_ray(monkeypatch):
    import importlib

    c = importlib.import_module("judgecal.pipeline.collect")

    def refuse():
        raise AssertionError("export-batch / import-batch started Ray")

    monkeypatch.setattr(c, "init_ray", refuse)


def answer(custom_id: str, score: str = "3") -> str:
    return json.dumps({"custom_id": custom_id, "response": {"status_code": 200, "body": {
        "choices": [{"message": {"content": score}}], "usage": {"prompt_tokens": 90, "completion_tokens": 1}}}}) + "\n"


def export(main, study, path) -> list[str]:
    assert main(["export-batch", str(study), str(path)]) == 0
    return [json.loads(x)["custom_id"] for x in path.read_text().splitlines()]


@pytest.fixture
def study(tmp_path, no_ray):
    out = tmp_path / "out"
    small_study(tmp_path, out, ENGINE, extra=TWO_SETS)
    return out


def test_export_names_its_request_set_and_the_sets_that_follow(tmp_path, study, capsys):
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    said, err = capsys.readouterr()
    assert f"{study}/responses (probes, request set 1 of 2): wrote {len(ids):,} pending requests" in said
    # the plan's lines name the stage that ran (they said "[collect] 8 items ...": no collect ran)
    assert "[export] 8 items in 4 groups" in err and "[collect]" not in err
    assert said.rstrip().endswith(f"after that, `judgecal export-batch {study} PATH` again for the next request set "
                                  "(scales)")


def test_an_import_says_what_it_committed_and_that_the_next_set_is_to_export(tmp_path, study, capsys):
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    res = tmp_path / "probes_results.jsonl"
    res.write_text("".join(answer(i) for i in ids))
    capsys.readouterr()
    assert main(["import-batch", str(study), str(res)]) == 3  # the study is not complete: as collect, exit 3
    said = capsys.readouterr()
    assert "[import] 8 items in 4 groups" in said.err and "[collect]" not in said.err
    assert said.out.startswith(f"imported {len(ids):,} lines into responses (probes); next to export: "
                               f"{study}/scales_responses (scales, request set 2 of 2), ")
    assert "requests to send: `judgecal export-batch" in said.out and "have no response" not in said.out
    assert "not pending" not in said.err and "left out" not in said.err  # every line was committed
    assert not (study / "scales_responses" / "batches.json").exists()  # recorded where it committed lines only
    assert main(["import-batch", str(study), str(res)]) == 3  # the same file again: nothing new, said so
    said = capsys.readouterr()
    assert "already imported" in said.err and said.out.startswith("nothing new imported; next to export: ")
    assert main(["show", str(study)]) == 0  # exported requests are not "not yet asked" (a user's finding)
    assert "not yet imported (export-batch writes them, import-batch commits the provider's answers)" in \
        capsys.readouterr().out
    scales = export(main, study, tmp_path / "scales.jsonl")
    assert "(scales, request set 2 of 2): wrote" in capsys.readouterr().out and not set(scales) & set(ids)


def test_evaluate_refuses_an_unanswered_later_set_before_its_main_analysis(tmp_path, study, capsys):
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    res = tmp_path / "probes_results.jsonl"
    res.write_text("".join(answer(i, str(1 + n % 5)) for n, i in enumerate(ids)))
    assert main(["import-batch", str(study), str(res)]) == 3
    capsys.readouterr()
    assert main(["evaluate", str(study)]) == 2
    err = capsys.readouterr().err
    assert f"{study}/scales_responses" in err.splitlines()[-1]
    assert "cross-fitting" not in err and not (study / "results.json").exists()  # refused before the cross-fit


def test_evaluate_of_a_resolution_study_on_its_own_scale_alone_reads_no_set_collect_never_wrote(tmp_path, no_ray,
                                                                                                  capsys):
    """resolution declares its own request set; on the study's scale alone it plans none (a
    second reader's finding: evaluate asked for scales.parquet)."""
    from judgecal.cli import main

    out = tmp_path / "out"
    small_study(tmp_path, out, ENGINE, extra='[diagnostics]\nrun = ["resolution"]\nscales = ["1-5"]')
    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    res = tmp_path / "probes_results.jsonl"
    res.write_text("".join(answer(i, str(1 + n % 5)) for n, i in enumerate(ids)))
    assert main(["import-batch", str(out), str(res)]) == 0
    assert main(["evaluate", str(out)]) == 0, capsys.readouterr().err[-2000:]
    assert not (out / "scales.parquet").exists()


def error_lines(err: str) -> list[str]:
    """The lines of ``err`` but the plan's ("[import] 8 items in 4 groups ...")."""
    return [x for x in err.splitlines() if not x.startswith(("[collect]", "[import]", "[export]"))]


@pytest.mark.parametrize("content, problem", [
    ("custom_id,score\nabc,4\n", "no line could be read (lines 1, 2: not a results line); a results line is a JSON "
                                  "object with a custom_id and a response with a body (an object), or an error"),
    # other shapes than OpenAI's: each had been committed as a failed line, using up the request's attempts
    (json.dumps({"custom_id": "a", "result": {"type": "succeeded", "message": {"content": "4"}}}) + "\n",
     "no line could be read (line 1: not a results line)"),
    (json.dumps({"custom_id": "a", "response": {"status_code": 200, "body": "{\"choices\": []}"}}) + "\n",
     "no line could be read (line 1: not a results line)"),
    (answer("not-this-studys-request"), "none of its 1 custom ids is a request pending in "),
    ("", "no results line in it"),
])
def test_a_file_of_which_nothing_can_be_used_is_refused_in_one_line(tmp_path, study, capsys, content, problem):
    from judgecal.cli import main

    res = tmp_path / "results.jsonl"
    res.write_text(content)
    for _ in range(2):  # refused again: the file is not recorded as imported
        assert main(["import-batch", str(tmp_path / "study.toml"), str(res)]) == 2
        (line,) = error_lines(capsys.readouterr().err)
        assert line.startswith(f"judgecal: error: {res}: {problem}") and line.endswith("; nothing imported")
    assert len(PartStore(Workspace(study / "responses"))) == 0


def test_unreadable_lines_beside_answers_are_named_by_line_number(tmp_path, study, capsys):
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    res = tmp_path / "results.jsonl"
    res.write_text(answer(ids[0]) + "{not json\n" + "".join(answer(i) for i in ids[1:]) + "id,score\n")
    unused = tmp_path / "other.jsonl"
    unused.write_text(answer("not-this-studys-request"))
    capsys.readouterr()
    assert main(["import-batch", str(study), str(res), str(unused)]) == 3
    err = capsys.readouterr().err
    assert f"[import] {res}: 2 unreadable lines (lines 2, {len(ids) + 2}) left out" in err
    assert f"[import] {unused}: none of its 1 custom ids is a request pending in {study}" in err
    assert len(PartStore(Workspace(study / "responses"))) == len(ids)


def test_two_different_answers_for_one_request_are_refused_naming_file_and_line(tmp_path, study, capsys):
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    res = tmp_path / "results.jsonl"
    failed = json.dumps({"custom_id": ids[1], "response": {"status_code": 500, "body": {"error": "busy"}}}) + "\n"
    res.write_text(answer(ids[0], "2") + failed + answer(ids[1]) + answer(ids[1]) + answer(ids[0], "5"))
    capsys.readouterr()
    assert main(["import-batch", str(study), str(res)]) == 2  # an answer over a failure, and the same twice: fine
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith(f"judgecal: error: {res} line 5: custom_id {ids[0]} has another answer on line 1")
    more = tmp_path / "more.jsonl"
    more.write_text(answer(ids[1], "4"))
    res.write_text("".join(answer(i) for i in ids))
    assert main(["import-batch", str(study), str(res), str(more)]) == 2  # across two files
    (line,) = error_lines(capsys.readouterr().err)
    assert f"{more} line 1: custom_id {ids[1]} has another answer on line 2 of {res}" in line
    assert len(PartStore(Workspace(study / "responses"))) == 0  # nothing imported
    # Once a file is imported its answers stand: a later file answering one of its requests
    # otherwise is not refused ("remove the wrong line" could no longer be followed); that
    # file's line is left out, as one for no pending request.
    assert main(["import-batch", str(study), str(res)]) == 3
    answers = PartStore(Workspace(study / "responses")).read(["request_id", "raw_text"]).to_pylist()
    capsys.readouterr()
    assert main(["import-batch", str(study), str(res), str(more)]) == 3
    err = capsys.readouterr().err
    assert (f"[import] {more}: none of its 1 custom ids is a request pending in {study}: 1 for requests answered "
            "already (the committed answer is kept)") in err
    assert PartStore(Workspace(study / "responses")).read(["request_id", "raw_text"]).to_pylist() == answers
    third = tmp_path / "third.jsonl"  # two new files that differ are still refused beside the old one
    third.write_text(answer(ids[1], "2"))
    assert main(["import-batch", str(study), str(res), str(more), str(third)]) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert f"{third} line 1: custom_id {ids[1]} has another answer on line 1 of {more}" in line


def test_evaluate_names_export_and_import_for_a_study_answered_by_hand(tmp_path, study, capsys):
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    res = tmp_path / "results.jsonl"
    res.write_text("".join(answer(i) for i in ids))
    assert main(["import-batch", str(study), str(res)]) == 3  # the scales set is still to export
    capsys.readouterr()
    assert main(["evaluate", str(study)]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("judgecal: error:")]
    assert line.startswith(f"judgecal: error: {study}/scales_responses: ") and "judgecal collect" not in line
    assert line.endswith(f"export them with `judgecal export-batch {study} PATH`, then import the provider's "
                         f"results with `judgecal import-batch {study} RESULTS.jsonl`")
    # a changed plan (or data) is re-read by export-batch here: collect would call the batch API
    assert main(["fit", str(tmp_path / "study.toml"), "--set", "dataset.max_groups=3"]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("judgecal: error:")]
    assert line.endswith("run `judgecal export-batch` with this config (and its --set) first"), line


def test_the_request_file_imported_as_results_is_refused_and_uses_no_attempt(tmp_path, study, capsys):
    """The request file given to import-batch (and other shapes than OpenAI's output) was
    committed as 1,088 failed lines; three such tries used up every request's attempts and the
    real results were then refused as "for requests answered already" (a user's finding)."""
    from judgecal.cli import main

    requests = tmp_path / "probes.jsonl"
    ids = export(main, tmp_path / "study.toml", requests)
    capsys.readouterr()
    for _ in range(4):
        assert main(["import-batch", str(study), str(requests)]) == 2
        (line,) = error_lines(capsys.readouterr().err)
        assert line == (f"judgecal: error: {requests}: a batch request file (what export-batch writes), not the "
                        "provider's results: a results line is a JSON object with a custom_id and a response with a "
                        "body (an object), or an error (OpenAI's batch output); nothing imported"), line
    assert len(PartStore(Workspace(study / "responses"))) == 0
    res = tmp_path / "results.jsonl"
    res.write_text("".join(answer(i) for i in ids))
    assert main(["import-batch", str(study), str(res)]) == 3  # the next set is to export
    assert len(PartStore(Workspace(study / "responses"))) == len(ids)


def test_used_up_attempts_are_named_by_export_and_import(tmp_path, study, capsys):
    """Failed lines imported max_attempts times: export said "nothing to export; ... export what
    is pending with export-batch", and an import of their answers "for requests answered
    already" (a user's finding). Both now say the attempts are used up and how to raise them."""
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    for k in range(3):  # [collect] max_attempts = 3 (the default)
        errors = tmp_path / f"errors{k}.jsonl"
        errors.write_text(json.dumps({"custom_id": ids[0], "error": {"code": "server_error", "message": f"busy {k}"}})
                          + "\n" + "".join(answer(i) for i in ids[1:] if k == 0))
        assert main(["import-batch", str(study), str(errors)]) == 3
    capsys.readouterr()
    assert main(["export-batch", str(study), str(tmp_path / "again.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "nothing to export; 1 of " in out and "1 of them failed every allowed attempt: fix the cause, then raise " \
        "[collect] max_attempts (the study's config, or `--set collect.max_attempts=N` on export-batch and " \
        f"import-batch) and export them with `judgecal export-batch {study} PATH`" in out, out
    assert not (tmp_path / "again.jsonl").exists()
    late = tmp_path / "late.jsonl"
    late.write_text(answer(ids[0]))
    assert main(["import-batch", str(study), str(late)]) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert "1 for requests that failed every allowed attempt ([collect] max_attempts = 3: import again with " \
           "`--set collect.max_attempts=N`, N larger, to take these answers); nothing imported" in line, line
    assert main(["import-batch", str(study), str(late), "--set", "collect.max_attempts=4"]) == 3  # the scales set
    assert "1 answers and 0 failed lines committed" in capsys.readouterr().err


def test_export_replaces_an_empty_file(tmp_path, study):
    """An empty file (from touch or mktemp) holds nothing to lose: export writes into it."""
    from judgecal.cli import main

    empty = tmp_path / "requests.jsonl"
    empty.touch()
    assert export(main, tmp_path / "study.toml", empty)


@pytest.mark.parametrize("name", ["data.jsonl", "out/study.json", "study.toml"])
def test_export_never_replaces_a_file_that_is_not_its_own(tmp_path, study, capsys, name):
    """`export-batch runs/s data.jsonl` replaced the study's data with its requests (mode 0600),
    and study.json or the config alike, exit 0 (a user's finding): refused, nothing written; an
    earlier export is replaced, and the file is made as any new file."""
    from judgecal.cli import main

    requests = tmp_path / "probes.jsonl"
    ids = export(main, tmp_path / "study.toml", requests)  # study.json written
    target = tmp_path / name
    if not target.exists():
        target.write_text('{"id": "a", "text": "mine"}\n')
    before = target.read_bytes()
    capsys.readouterr()
    assert main(["export-batch", str(tmp_path / "study.toml"), str(target)]) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert line == (f"judgecal: error: {target}: exists and is not a batch request file (export-batch replaces only a "
                    "file of requests it wrote); give another path, nothing was written"), line
    assert target.read_bytes() == before
    assert export(main, tmp_path / "study.toml", requests) == ids  # its own file: replaced
    import os
    mask = os.umask(0)
    os.umask(mask)
    assert requests.stat().st_mode & 0o777 == 0o666 & ~mask


def test_answers_naming_another_model_are_said_at_import(tmp_path, study, capsys):
    """Every answer of a results file named "totally-other-model": imported without a word, the
    report naming the configured judge (a user's finding). A dated snapshot of the configured
    model (OpenAI's "gpt-4o-mini-2024-07-18" for "gpt-4o-mini") is the same model."""
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")

    def named(i, model):
        line = json.loads(answer(i))
        line["response"]["body"]["model"] = model
        return json.dumps(line) + "\n"

    res = tmp_path / "results.jsonl"
    # a longer name is another model ("gpt-4o" and "gpt-4o-mini"): a second reader's finding
    res.write_text("".join(named(i, "m-2024-07-18") for i in ids[:5]) + "".join(named(i, "m-mini") for i in ids[5:7])
                   + "".join(named(i, "other") for i in ids[7:]))
    capsys.readouterr()
    assert main(["import-batch", str(study), str(res)]) == 3
    err = capsys.readouterr().err
    assert (f"[import] warning: {len(ids) - 5:,} of the answers committed name another model than [engine].model "
            "'m' ('other' the commonest): they are kept as 'm''s answers") in err, err
    assert len(PartStore(Workspace(study / "responses"))) == len(ids)


def test_an_import_with_another_judge_leaves_the_study_as_exported(tmp_path, study, capsys):
    """`import-batch ... --set engine.model=m2` on a study exported for m, nothing imported yet:
    the study started anew as m2's (study.json rewritten), then the results were refused as
    another study's, and so were they without the --set (a user's finding)."""
    from judgecal.cli import main

    ids = export(main, tmp_path / "study.toml", tmp_path / "probes.jsonl")
    saved = (study / "study.json").read_bytes()
    res = tmp_path / "results.jsonl"
    res.write_text("".join(answer(i) for i in ids))
    capsys.readouterr()
    assert main(["import-batch", str(tmp_path / "study.toml"), str(res), "--set", 'engine.model="m2"']) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith(f"judgecal: error: {study / 'study.json'}: this folder holds a study with another "), line
    assert line.endswith("; import with the config its requests were exported with, or export-batch again with this "
                         "one"), line
    assert (study / "study.json").read_bytes() == saved
    assert main(["import-batch", str(tmp_path / "study.toml"), str(res)]) == 3  # the next set is to export
    assert len(PartStore(Workspace(study / "responses"))) == len(ids)
