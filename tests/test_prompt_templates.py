"""Your own prompt (issue 17.2): a template file with named slots, checked when the config
loads, part of the study's identity, rendered sandboxed, and keeping the shared part first so
the CPU judge still reuses the prefix; the shipped templates for seven tasks."""

import json

import pytest

from judgecal.datasets import load_dataset, subset_items
from judgecal.errors import InputError
from judgecal.probes import ProbeRenderer, build_plan, load_bank
from judgecal.probes.template_file import load_template_file
from judgecal.probes.templates import TEMPLATES, register_templates
from judgecal.scale import ScoreScale

from conftest import write_config

GOOD = '''system = "You grade answers to exam questions."
user = """Grade the answer from {{ lo }} (wrong) to {{ hi }} (complete and correct).

<question>
{{ source }}
</question>

<answer>
{{ content }}
</answer>{{ clause }}"""
answer_prefix = "Grade: "
'''


def template(tmp_path, text=GOOD, name="exam.toml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_a_template_file_renders_its_slots_and_puts_the_clause_last(tmp_path):
    t = load_template_file(str(template(tmp_path)))
    assert t.task.startswith("custom:") and t.answer_prefix == "Grade: "
    system, user = t.render("What is 2+2?", "4", "Give more weight to length.", ScoreScale(1, 5))
    assert system == "You grade answers to exam questions."
    assert user.startswith("Grade the answer from 1 (wrong) to 5 (complete and correct).")
    assert "<answer>\n4\n</answer>\n\nGive more weight to length." in user
    assert user.endswith("Give more weight to length.")
    assert load_template_file(str(template(tmp_path, name="copy.toml"))).task == t.task  # the text names it


@pytest.mark.parametrize("edit,says", [
    (lambda s: s.replace("{{ source }}", "{{ sauce }}"), "exam.toml: user: unknown slot {{ sauce }}"),
    (lambda s: s.replace("{{ content }}", "content"), "exam.toml: user: has no {{ content }} slot"),
    (lambda s: s.replace("{{ lo }} (wrong)", "one"), "exam.toml: user: has no {{ lo }} slot"),
    (lambda s: s.replace("</answer>{{ clause }}", "{{ clause }}</answer>"),
     "exam.toml: user: {{ clause }} must be the last thing in it"),
    (lambda s: s.replace("<question>", "{% if source %}<question>{% endif %}"), "exam.toml: user: holds a {% statement"),
    (lambda s: s.replace("{{ source }}", "{{ source"), "exam.toml: user line 5: not a valid template"),
    (lambda s: s + "temperature = 0.3\n", "exam.toml: temperature: unknown field"),
    (lambda s: s.replace('system = "You grade answers to exam questions."', 'system = ""'),
     "exam.toml: system: missing or empty"),
    (lambda s: s.replace('user = """', 'user = """{{ content.__class__.__mro__ }}'),
     "exam.toml: user: cannot be rendered"),
    (lambda s: s.replace('"""', "'''", 1), "exam.toml: does not parse"),
])
def test_every_mistake_in_a_template_file_is_one_line(tmp_path, edit, says):
    with pytest.raises(InputError) as e:
        load_template_file(str(template(tmp_path, edit(GOOD))))
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_shipped_templates_cover_seven_tasks_and_keep_the_clause_last():
    assert list(TEMPLATES) == ["summary", "story", "dialogue", "conversation", "reasoning", "qa", "instruction"]
    for t in TEMPLATES.values():
        assert t.user.endswith("{content}{clause}")
        head = t.render_head("SOURCE", "CONTENT", ScoreScale(1, 5))
        assert head.index("SOURCE") < head.index("CONTENT") and "from 1 to 5" in head


def test_a_template_file_keeps_prefix_reuse_on_the_cpu_judge(tmp_path):
    """Probes of one item share the rendered head; the CPU judge computes only their tails."""
    from judgecal.engines import LlamaCppEngineConfig
    from judgecal.pipeline.render import judge_prompts

    t = load_template_file(str(template(tmp_path)))
    register_templates({t.task: t})
    items = subset_items(load_dataset("summeval"), 1, 2)
    items = items.set_column(items.schema.get_field_index("task"), "task", [[t.task] * items.num_rows])
    probes = load_bank("style").probes(["length", "hedging"])
    scale = ScoreScale(1, 5)
    ps = judge_prompts(ProbeRenderer(items, probes, scale), build_plan(items, probes, 1, scale, "test"))
    assert all("<answer>" in p.user and p.answer_prefix == "Grade: " for p in ps)
    eng = LlamaCppEngineConfig().build()
    try:
        outs = eng.score(ps, scale)
    finally:
        eng.close()
    assert outs[0].computed_tokens == outs[0].prompt_tokens
    share = sum(o.computed_tokens for o in outs[1:5]) / sum(o.prompt_tokens for o in outs[1:5])
    assert share < 0.2, share  # the probe tails of one item, not its article again


def test_a_study_with_a_template_file_runs_and_a_changed_file_is_refused(ray_local, tmp_path):
    from judgecal.config import load_config
    from judgecal.methods.runner import StudyRunner

    tpl = template(tmp_path)
    p = tmp_path / "items.jsonl"
    p.write_text("\n".join(json.dumps({"id": f"a{k}", "q": f"question {k // 4}", "text": "word " * (3 + k),
                                       "score": 1 + k % 5}) for k in range(24)), encoding="utf-8")
    out = tmp_path / "out"
    cfg_path = write_config(tmp_path / "c.toml", f"""[study]
output = "{out}"
[dataset]
name = "generic"
path = "{p}"
target = ["score"]
target_scale = "1-5"
template = "{tpl}"
columns = {{item_id = "id", group_id = "q", source = "q", content = "text"}}
[pool]
attributes = ["length"]
[engine]
kind = "simulated"
[design]
subsets = false
[fit]
folds = 2
inner_folds = 2
bootstrap = 100
fold_seeds = 1
""")
    log = StudyRunner(load_config(str(cfg_path))).run_all()
    identity = json.loads((out / "study.json").read_text())["identity"]
    assert identity["dataset"]["task"].startswith("custom:") and log["results"]["items"] == 24
    tpl.write_text(GOOD.replace("(wrong)", "(entirely wrong)"), encoding="utf-8")
    with pytest.raises(InputError, match="use a new output folder"):
        StudyRunner(load_config(str(cfg_path))).evaluate()
