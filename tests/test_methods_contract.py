"""``check_method``: one contract every registered study method meets (as scikit-learn's
``check_estimator`` for estimators), run on each method the registry loads, plus the
registry's own rules."""

import json

import pytest

from judgecal.config import SECTIONS, demo_config_path, load_config, parse_config
from judgecal.errors import InputError
from judgecal.methods import METHODS, get_method, load_methods, register
from judgecal.methods.base import BUILTIN_METHODS, COMMON_SECTIONS, PlanEstimate

def check_method(method) -> None:
    """The protocol, exercised on the method's demo config (no Ray, no judge)."""
    for attr in ("name", "results_name", "report_name", "sections", "data_section", "data_hint", "demo",
                 "simulated_truth"):
        assert hasattr(method, attr), f"{method!r} has no {attr}"
    assert method.results_name.endswith(".json") and method.report_name.endswith(".html")
    assert set(method.sections) <= set(SECTIONS) and not set(method.sections) & set(COMMON_SECTIONS)
    assert method.data_section in method.sections  # a config file must give it (checked at load)
    cfg = load_config(demo_config_path(method.demo), runtime=False)
    json.dumps(method.identity(cfg))  # what study.json pins is plain JSON
    json.dumps(method.plan_spec(cfg))
    estimates = method.estimate(cfg)
    assert estimates and all(isinstance(e, PlanEstimate) and e.requests > 0 for e in estimates)
    assert [(e.name, e.plan_file, e.store) for e in estimates] == method.request_sets(cfg)
    assert isinstance(method.needs(cfg), set)
    for stage in ("collect", "fit", "evaluate", "format_text", "render_html", "check_config", "request_sets",
                  "fitted_settings"):
        assert callable(getattr(method, stage)), stage
    from judgecal.workspace import Workspace

    import tempfile

    with tempfile.TemporaryDirectory() as empty:  # nothing fitted yet: no settings, never an error
        name, settings = method.fitted_settings(Workspace(empty))
        assert isinstance(name, str) and settings is None
    # its config round-trips through study.json, holding only the sections it reads
    d = cfg.to_dict()
    assert {k for k, v in d.items() if isinstance(v, dict)} <= {*method.sections, *COMMON_SECTIONS}
    from judgecal.config import config_to_toml_dict

    assert parse_config(config_to_toml_dict(d), "study.json", runtime=False) == cfg
    # a section of another method is refused in one line
    others = [s for s in SECTIONS if s not in method.sections and s not in COMMON_SECTIONS]
    for other in others:
        data = config_to_toml_dict(d)
        data[other] = {}
        with pytest.raises(InputError, match=rf"\[{other}\]: not read by a {method.name} study"):
            parse_config(data, "c.toml", runtime=False)


@pytest.mark.parametrize("name", sorted(load_methods()))
def test_every_registered_method_meets_the_contract(name):
    check_method(get_method(name))


def test_the_builtin_methods_are_listed_in_one_place():
    assert set(load_methods()) >= {"prism", "urw"} and len(BUILTIN_METHODS) == 2


def test_registering_a_name_twice_is_refused():
    class Impostor:
        name = "prism"

    with pytest.raises(ValueError, match="already registered"):
        register(Impostor())
    assert type(METHODS["prism"]).__name__ == "PrismMethod"
    register(METHODS["prism"])  # the same method again is not a conflict (a module imported twice)


def test_the_request_sets_of_a_study_with_diagnostics_are_what_it_estimates():
    """A diagnostic's own plan is a request set too (export-batch names it, the interrupt line
    counts it), known from the config alone, in the order estimate sizes them."""
    method = get_method("prism")
    cfg = load_config(demo_config_path("diagnostics_demo"), ["diagnostics.run=[\"order\", \"resolution\"]"],
                      runtime=False)
    sets = method.request_sets(cfg)
    assert [n for n, _, _ in sets] == ["probes", "orders", "scales"]
    estimates = method.estimate(cfg)
    assert [(e.name, e.plan_file, e.store) for e in estimates] == sets
    # the CPU judge reads one token per score answer, on every scale (8 had been guessed)
    scales = estimates[-1]
    assert cfg.engine.kind == "llamacpp" and scales.completion_tokens == scales.requests > 0
