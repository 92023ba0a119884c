"""Bad input: one line naming the file, row or field; exit code 2; nothing half-written."""

import json
import subprocess

import pytest

from conftest import ROOT, judgecal_cmd, write_config


def run_cli(tmp_path, config_text: str, *extra: str):
    out = tmp_path / "out"
    cfg = write_config(tmp_path / "c.toml", f'[study]\noutput = "{out}"\n' + config_text)
    r = subprocess.run(judgecal_cmd("run", str(cfg), *extra), cwd=ROOT, capture_output=True, text=True, timeout=120)
    return r, out


def generic(tmp_path, rows, extra=""):
    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    return f"""
[dataset]
name = "generic"
path = "{p}"
target = ["quality"]
target_scale = "1-5"
columns = {{item_id = "id", group_id = "doc", content = "text"}}
{extra}
[engine]
kind = "simulated"
"""


def ok_rows():
    return [{"id": f"i{k}", "doc": f"d{k // 2}", "text": f"text {k}", "quality": 1 + k % 5} for k in range(8)]


CASES = {
    "missing column": (lambda rows: [{k: v for k, v in r.items() if k != "text"} for r in rows], "missing column(s) text"),
    "NaN score": (lambda rows: rows[:3] + [{**rows[3], "quality": None}] + rows[4:], "row 3 (item i3): human score"),
    "out of range": (lambda rows: rows[:5] + [{**rows[5], "quality": 7}] + rows[6:], "quality'=7 is outside the scale"),
    "duplicate ids": (lambda rows: rows[:6] + [{**rows[6], "id": "i1"}] + rows[7:], "row 6: duplicate item_id 'i1'"),
    "lonely group": (lambda rows: rows[:7] + [{**rows[7], "doc": "alone"}], "group 'alone' has one item"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_items(tmp_path, case):
    mutate, message = CASES[case]
    r, out = run_cli(tmp_path, generic(tmp_path, mutate(ok_rows())))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("judgecal: error: "), r.stderr
    assert message in lines[0] and "items.jsonl" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    "config, message",
    [
        ("[dataset\nname = 1", "does not parse"),
        ("[probes]\nbank = \"BANK\"\n", "empty bank: no attributes"),
        ("[probes]\nattributes = [\"loudness\"]\n", "unknown attribute 'loudness'"),
        ("[probes]\nscale = \"1-10\"\n[engine]\nkind = \"simulated\"\n", "judge scale 1-10 does not match"),
        ("[probes]\nscale = \"2-7\"\n", "2-7 is not a supported score scale"),
        ("[engine]\nkind = \"gpt-9\"\n", "unknown engine 'gpt-9'"),
        ("[fit]\ngamma = 1.0\n", "[fit].gamma: unknown field"),
    ],
)
def test_bad_configs(tmp_path, config, message):
    bank = tmp_path / "empty.toml"
    bank.write_text('name = "empty"\nwordings = {}\nattributes = []\n')
    r, out = run_cli(tmp_path, config.replace("BANK", str(bank)))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not out.exists()
