"""The judge's model by content: a model file replaced under the same name is refused at collect,
not mixed with the old model's answers (request ids name the file, not its bytes)."""

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from judgecal.config import load_config
from judgecal.engines import LlamaCppEngineConfig, bundled_model_path
from judgecal.engines import model_content as mc
from judgecal.engines.vllm import VllmEngineConfig
from judgecal.errors import InputError
from judgecal.methods.runner import JUDGE_CONTENT, StudyRunner

from conftest import ROOT, judgecal_cmd, small_study


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGECAL_CACHE", str(tmp_path / "cache"))


def test_a_file_is_read_once_per_version_and_a_rewrite_is_seen_even_with_its_old_mtime(tmp_path, monkeypatch):
    f = tmp_path / "judge.gguf"
    f.write_bytes(b"weights-A" * 1000)
    first = mc.model_content(str(f))
    assert first["files"] == {"judge.gguf": first["files"]["judge.gguf"]} and len(first["hash"]) == 16

    def no_read(path):
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(mc, "_sha256", no_read)
    assert mc.model_content(str(f)) == first  # the cache answers: same size, times and inode
    monkeypatch.undo()
    monkeypatch.setenv("JUDGECAL_CACHE", str(tmp_path / "cache"))
    st = f.stat()
    f.write_bytes(b"weights-B" * 1000)  # same size, other bytes
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the old mtime: ctime still moves
    second = mc.model_content(str(f))
    assert second["hash"] != first["hash"]
    said = mc.content_change(first, second)
    assert said.startswith("judge.gguf: ") and "at collect, now" in said


def test_a_folder_is_its_weights_and_config_not_its_prose_or_hidden_files(tmp_path):
    m = tmp_path / "model"
    (m / ".cache").mkdir(parents=True)
    (m / "config.json").write_text("{}")
    (m / "model.safetensors").write_bytes(b"\0" * 64)
    (m / "README.md").write_text("v1")
    (m / "LICENSE").write_text("MIT")
    (m / ".cache" / "meta").write_text("t1")
    before = mc.model_content(str(m))
    assert sorted(before["files"]) == ["config.json", "model.safetensors"]
    (m / "README.md").write_text("v2, edited")
    (m / ".cache" / "meta").write_text("t2")
    assert mc.content_change(before, mc.model_content(str(m))) is None
    (m / "model.safetensors").write_bytes(b"\1" * 64)
    (m / "extra.safetensors").write_bytes(b"\2")
    (m / "config.json").unlink()
    said = mc.content_change(before, mc.model_content(str(m)))
    assert said.startswith("model.safetensors: ") and "config.json gone" in said and "extra.safetensors new" in said


def test_a_split_gguf_is_all_its_shards_and_a_long_change_names_three_files(tmp_path):
    for i in (1, 2, 3):
        (tmp_path / f"big-0000{i}-of-00003.gguf").write_bytes(bytes([i]) * 10)
    (tmp_path / "big-00001-of-00002.gguf").write_bytes(b"another split")
    (tmp_path / "bigger-00001-of-00003.gguf").write_bytes(b"another model")
    before = mc.model_content(str(tmp_path / "big-00001-of-00003.gguf"))
    assert sorted(before["files"]) == [f"big-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    (tmp_path / "big-00003-of-00003.gguf").write_bytes(b"\0" * 10)  # llama.cpp loads it from beside the first
    assert mc.content_change(before, mc.model_content(str(tmp_path / "big-00001-of-00003.gguf"))).startswith(
        "big-00003-of-00003.gguf: ")
    folder = tmp_path / "m"
    folder.mkdir()
    for i in range(5):
        (folder / f"w{i}.safetensors").write_bytes(b"a")
    old = mc.model_content(str(folder))
    for i in range(5):
        (folder / f"w{i}.safetensors").write_bytes(b"b")
    said = mc.content_change(old, mc.model_content(str(folder)))
    assert said.count(" at collect, now ") == 3 and said.endswith("; and 2 more files")


def test_which_engines_have_a_local_model(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    assert VllmEngineConfig(model_source=str(folder)).model_location() == ("model_source", str(folder))
    assert VllmEngineConfig(model_source="HuggingFaceTB/SmolLM2-135M-Instruct").model_location() is None
    assert LlamaCppEngineConfig(model_path="/x/j.gguf").model_location() == ("model_path", "/x/j.gguf")
    assert LlamaCppEngineConfig().model_location() == ("model", bundled_model_path())


def test_the_runner_refuses_a_model_whose_bytes_changed_since_collect(tmp_path, capsys):
    gguf = tmp_path / "judge.gguf"
    gguf.write_bytes(b"GGUF" + b"A" * 4092)
    cfg = load_config(small_study(tmp_path, tmp_path / "out", engine=f'kind = "llamacpp"\nmodel_path = "{gguf}"'))
    runner = StudyRunner(cfg)

    def check():
        return runner.check_judge_content(runner.ws.read_json("study.json") if runner.ws.exists("study.json") else None)

    recorded = check()  # nothing collected: nothing to compare
    runner.ws.write_json("study.json", {"identity": runner.identity(), JUDGE_CONTENT: recorded})
    assert check() == recorded
    gguf.write_bytes(b"GGUF" + b"B" * 4092)
    # a first collect that committed nothing (its model would not load): the mended file is taken
    assert check()["hash"] != recorded["hash"]
    assert "committed no answer: recorded anew" in capsys.readouterr().err
    runner.ws.write_parquet("responses/part-0.parquet", pa.table({"request_id": ["r0"], "parse_status": ["error"]}))
    recorded = check()  # an engine error is asked again: not an answer of the model
    assert "committed no answer: recorded anew" in capsys.readouterr().err
    gguf.write_bytes(b"GGUF" + b"C" * 4092)
    runner.ws.write_parquet("responses/part-1.parquet", pa.table({"request_id": ["r1", "r2"],
                                                                  "parse_status": ["ok", "ok"]}))
    with pytest.raises(InputError) as e:
        check()
    assert str(e.value).startswith(f"[engine].model_path: {gguf} is not the model this study's 2 committed answers "
                                   "came from (judge.gguf: ")
    assert str(e.value).endswith("new answers would be mixed with them; use a new output folder, or restore the model")


def test_a_collect_with_a_replaced_gguf_is_one_line_and_writes_nothing(tmp_path):
    gguf = tmp_path / "judge.gguf"
    shutil.copy(bundled_model_path(), gguf)
    out = tmp_path / "out"
    cfg = small_study(tmp_path, out, engine=f'kind = "llamacpp"\nmodel_path = "{gguf}"', groups=4, items=2)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "JUDGECAL_CACHE": str(tmp_path / "cache")}

    def collect():
        return subprocess.run(judgecal_cmd("collect", str(cfg)), cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=600)

    r = collect()
    assert r.returncode == 0, r.stderr[-3000:]
    study = json.loads((out / "study.json").read_text())
    assert study[JUDGE_CONTENT]["files"] == {"judge.gguf": mc.model_content(str(gguf))["files"]["judge.gguf"]}
    parts = sorted(p.name for p in (out / "responses").iterdir())
    parts_rows = pq.read_table(out / "responses").num_rows
    assert parts and parts_rows

    with open(gguf, "r+b") as f:  # the last byte lies in a tensor: the file still loads, as another model
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    before = (out / "study.json").read_bytes()
    r = collect()
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith(f"judgecal: error: {cfg} [engine].model_path: {gguf} is not the model this study's "
                               f"{parts_rows} committed answers came from (judge.gguf: "), lines
    assert lines[0].endswith("new answers would be mixed with them; use a new output folder, or restore the model")
    assert (out / "study.json").read_bytes() == before
    assert sorted(p.name for p in (out / "responses").iterdir()) == parts

    with open(gguf, "r+b") as f:  # restored: the answers are this model's again
        f.seek(-1, os.SEEK_END)
        f.write(last)
    del study[JUDGE_CONTENT]  # as an earlier judgecal wrote it
    (out / "study.json").write_text(json.dumps(study))
    r = collect()
    assert r.returncode == 0 and "records no content of the judge's model" in r.stderr, r.stderr[-3000:]
    assert "0 to compute" in r.stderr
    assert json.loads((out / "study.json").read_text())[JUDGE_CONTENT]["hash"] == mc.model_content(str(gguf))["hash"]


def test_a_replica_whose_node_holds_another_model_refuses_to_start_in_one_line(tmp_path):
    """On a cluster every node reads model_path from its own disk: a copy replaced on one node
    only would mix two models' answers. Each llama.cpp replica checks its copy against the
    driver's record (here a record that no copy matches); run as a program, as Ray forwards
    the workers' lines to the driver's fd 2, which pytest's capture would bypass."""
    script = tmp_path / "other_copy.py"
    script.write_text(f"""import sys
sys.path[:0] = [{str(ROOT / "tests")!r}]
from judgecal.engines import LlamaCppEngineConfig
from judgecal.pipeline import CollectSettings, PartStore, collect
from judgecal.pipeline.collect import CollectFailed
from judgecal.probes import ProbeRenderer
from judgecal.scale import ScoreScale
from judgecal.workspace import Workspace
from test_pipeline import small_plan
items, probes, plan, _ = small_plan(1, 2)
other = {{"files": {{"SmolLM2-135M-Instruct.Q4_1.gguf": "0" * 16}}, "hash": "0" * 16}}
try:
    collect(plan, ProbeRenderer(items, probes, ScoreScale(1, 5)), LlamaCppEngineConfig().with_model_content(other),
            PartStore(Workspace(sys.argv[1])), CollectSettings(block_rows=6))
except CollectFailed as e:
    print("LINE", e)
""")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "JUDGECAL_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "r")], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    said = [ln[5:] for ln in r.stdout.splitlines() if ln.startswith("LINE ")]
    assert said, (r.stdout[-2000:], r.stderr[-3000:])
    assert said[0].startswith("the judge engine failed to start on its replica, so nothing was asked"), said[0]
    assert "[engine].model: " in said[0] and "is not the model the collect's driver recorded " \
        "(SmolLM2-135M-Instruct.Q4_1.gguf: 0000000000000000 at collect, now " in said[0], said[0]
    assert "every node needs the same file" in said[0] and not (tmp_path / "r").exists()


def test_an_input_error_raised_in_a_ray_worker_reaches_the_driver_whole():
    """Ray pickles a worker's exception; InputError's (where, problem) signature made it
    "UnserializableException ... SystemException" on the driver, so the line lost its reason."""
    import pickle

    from judgecal.pipeline.store import BadPart

    e = pickle.loads(pickle.dumps(InputError("[engine].model_path", "/m/j.gguf: no such file")))
    assert (type(e), e.where, e.problem, str(e)) == (InputError, "[engine].model_path", "/m/j.gguf: no such file",
                                                     "[engine].model_path: /m/j.gguf: no such file")
    b = pickle.loads(pickle.dumps(BadPart("responses/part-1.parquet", "moved aside", "")))
    assert type(b) is BadPart and b.note == "responses/part-1.parquet: moved aside" and str(b).endswith("again")


def test_the_record_a_replica_checks_against_is_no_config_field():
    """model_content is set by the study as it runs (like the simulated judge's truth): a config
    that names it is one line, and it never reaches the config a study.json keeps."""
    from judgecal.engines.base import engine_config_from_dict

    with pytest.raises(InputError, match=r"^engine\.model_content: unknown field for engine 'llamacpp'"):
        engine_config_from_dict({"kind": "llamacpp", "model_content": {"hash": "0" * 16}})
    cfg = LlamaCppEngineConfig(model_path="/x/j.gguf").with_model_content({"hash": "0" * 16, "files": {}})
    assert cfg == LlamaCppEngineConfig(model_path="/x/j.gguf") and cfg.identity == "llamacpp:j.gguf"
