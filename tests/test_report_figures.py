"""The HTML reports' figures: matplotlib, from the results log alone. A made-up section with
Metric cells gets the generic interval plot with no renderer edit; the PRISM and URW reports
of real simulated studies open in headless Chromium with every figure decoded and shown, no
console error, no request beyond the file and its inline images, and a screenshot each."""

import html
import json
import re

import numpy as np
import pytest

from chromium import Chromium
import report_studies

from judgecal.report.figures import FIGURES, figures, interval_plot, section_figure, section_html
from judgecal.report.plot import png
from judgecal.report.sections import Metric, Section, html_sections

PNG = b"\x89PNG\r\n\x1a\n"


def made_up() -> dict:
    """A section no renderer knows: two Metric columns among plain ones, an undefined interval,
    a NaN estimate and an empty cell."""
    return Section("made_up_ratio", "A made-up ratio by unit", ["unit", "ratio [95% CI]", "count", "shift [95% CI]"],
                   [["a", Metric(1.2, 0.9, 1.6, 14), 3, Metric(0.1, -0.2, 0.3, 14)],
                    ["b", Metric(0.8, None, None, 14, "all groups equal"), 2, None],
                    ["c", Metric(float("nan")), 1, Metric(0.2, 0.1, 0.3, 9)]],
                   "made up for this test").to_dict()


def test_a_new_section_with_metric_cells_gets_the_interval_plot():
    s = made_up()
    assert s["name"] not in FIGURES
    fig = section_figure(s)
    left, right = fig.axes  # one panel per Metric column; the plain count column has none
    assert (left.get_xlabel(), right.get_xlabel()) == ("ratio [95% CI]", "shift [95% CI]")
    assert [t.get_text() for t in left.get_yticklabels()] == ["a", "b", "c"]  # rows labelled by their first cell
    assert [t.get_text() for t in left.texts] == ["n=14", "n=14"]  # c's NaN estimate is not drawn
    assert [t.get_text() for t in right.texts] == ["n=14", "n=9"]  # b's empty cell is not drawn
    assert len(left.collections) == 1 and len(left.collections[0].get_segments()) == 1  # b has no interval bar
    assert png(fig).startswith(PNG)
    frag = section_html(s, {})
    assert re.search(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}" alt="A made-up ratio by unit"', frag)
    assert f"<figcaption>{html.escape(' '.join(interval_plot.__doc__.split()))}</figcaption>" in frag
    # the HTML renderers walk sections: the new one is drawn next to its table, with no edit
    page = html_sections({"results": {"sections": [s]}})
    assert page.index("<table>") < page.index("<img") and page.count("<img") == 1


def test_an_interval_open_at_one_end_is_drawn_to_the_edge_and_a_difference_keeps_its_0_line():
    """An interval with an infinite end drew no bar, hiding the finite bound that screening
    reads; a "diff vs" panel left 0 off its axis (a user's finding)."""
    s = Section("made_up", "Made up", ["unit", "ratio [95% CI]", "diff vs Vanilla [95% CI]"],
                [["a", Metric(4.8, 2.9, float("inf"), 4), Metric(0.3, 0.1, 0.5, 4)],
                 ["b", Metric(1.5, 1.1, 1.9, 4), Metric(0.4, 0.2, 0.6, 4)]]).to_dict()
    left, right = section_figure(s).axes
    bars = [seg for c in left.collections for seg in c.get_segments()]
    assert len(bars) == 2  # a's bar too, from its finite end
    a = next(seg for seg in bars if seg[0][1] == 0)
    assert a[0][0] == 2.9 and a[1][0] == left.get_xlim()[1]  # to the panel's right edge
    assert right.get_xlim()[0] <= 0 and any(ln.get_xdata()[0] == 0 for ln in right.lines if ln.get_linestyle() == "--")
    # a shift is a difference too: the injection's panels started at 0.3 (a user's finding)
    shift = Section("injection", "Injection", ["injected text", "mean shift [95% CI]"],
                    [["x", Metric(0.6, 0.3, 0.9, 8)]]).to_dict()
    ax, = section_figure(shift).axes
    assert ax.get_xlim()[0] <= 0 and [ln.get_xdata()[0] for ln in ax.lines if ln.get_linestyle() == "--"] == [0]


def test_a_log_scale_panel_under_a_decade_labels_few_plain_ticks():
    """matplotlib labelled every minor tick of a range under a decade (2x10^0, 3x10^0, ...), which
    overlapped in the reliability panels (a user's finding)."""
    s = Section("reliability", "Probe reliability", ["unit", "family", "probe RMS", "probe / neutral RMS [95% CI]",
                                                     "probe / repeat RMS [95% CI]"],
                [["length", "property", 0.3, Metric(1.4, 0.9, 2.7, 8), Metric(1.2, 0.8, 3.1, 8)],
                 ["hedging", "property", 0.2, Metric(1.1, 0.85, 1.9, 8), Metric(0.95, 0.8, 1.6, 8)]]).to_dict()
    fig = section_figure(s)
    fig.canvas.draw()
    for ax in fig.axes:
        assert ax.get_xscale() == "log"
        lo, hi = ax.get_xlim()
        major = [t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi]
        minor = [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]
        assert minor == [] and 2 <= len(major) <= 4 and "1" in major
        assert all(re.fullmatch(r"[0-9.]+", t) for t in major), major  # plain numbers, no 10^k
    # a narrow range had a lone "1", a wide one 12 crowded labels (a second reader's findings)
    for lo, hi in ((0.97, 1.85), (0.05, 200.0)):
        wide = Section("reliability", "t", s["columns"], [["a", "p", 0.3, Metric(1.2, lo, hi, 8),
                                                              Metric(1.2, lo, hi, 8)]]).to_dict()
        fig = section_figure(wide)
        fig.canvas.draw()
        ax = fig.axes[0]
        x0, x1 = ax.get_xlim()
        shown = [t.get_text() for t in ax.get_xticklabels() if x0 <= t.get_position()[0] <= x1 and t.get_text()]
        assert 2 <= len(shown) <= 5, (lo, hi, shown)


def test_omission_has_its_figure_and_a_two_unit_subset_curve_has_whole_unit_ticks():
    """Single-unit omission's rows hold no Metric, so the report drew no figure beside it, and
    the subset curve of 2 units read 1.2, 1.4, ... on its unit axis (a user's findings)."""
    omission = Section("omission", "Single-unit omission: gain without each unit",
                       ["omitted unit", "gain", "change vs all units"],
                       [["length", 0.01, -0.04], ["hedging", 0.06, 0.01]], "", {"all_units_gain": 0.05}).to_dict()
    ax, = section_figure(omission).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["length", "hedging"]
    assert list(ax.lines[0].get_xdata()) == [-0.04, 0.01] and "(all units: +0.050)" in ax.get_xlabel()
    subsets = Section("subsets", "Subset curve", ["units", "subsets", "median gain", "25%", "75%", "min", "max"],
                      [[1, 2, 0.01, 0.0, 0.02, 0.0, 0.02], [2, 1, 0.05, 0.05, 0.05, 0.05, 0.05]], "",
                      {"gains_by_size": {"1": [0.0, 0.02], "2": [0.05]}}).to_dict()
    fig = section_figure(subsets)
    fig.canvas.draw()
    ticks = [t.get_position()[0] for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_a_difference_past_what_a_correlation_reaches_is_marked_in_the_figure():
    """A difference's bootstrap-t bound past 1 - mean(Vanilla) said so in the table, but its bar
    was drawn to +0.86 with no mark of the +0.48 a correlation can reach (a user's finding)."""
    from judgecal.evaluate.metrics import GroupCorrelation, paired_difference
    from judgecal.report.figures_prism import methods_figure

    b = [0.9, 0.2, 0.95, 0.9, 0.9, 1.0]
    a = [x + d for x, d in zip(b, [0.066, 0.707, -0.055, 0.081, -0.010, 0.0])]
    d = paired_difference(*[GroupCorrelation({str(i): v for i, v in enumerate(x)}, 0) for x in (a, b)])
    assert d.edge == pytest.approx(1 - np.mean(b))
    row = {"method": "PRISM", "spearman": 0.9, "spearman_low": 0.8, "spearman_high": 1.0, "groups": 6,
           "diff": d.estimate, "diff_low": d.low, "diff_high": d.high, "diff_note": d.note, "diff_edge": d.edge}
    fig = methods_figure({"results": {"methods": [row]}})
    diff = fig.axes[1]
    assert [ln.get_xdata()[0] for ln in diff.lines if ln.get_marker() == "|"] == [d.edge]
    assert "as far as a correlation of 1 (or -1) reaches" in diff.get_xlabel().replace("\n", " ")
    assert not any(ln.get_marker() == "|" for ln in fig.axes[0].lines)


def test_a_one_size_subset_curve_and_the_screening_threshold_are_drawn():
    """A design of one unit drew its subset curve on an axis from 1.0000 to 1.0036 without the
    bands its legend listed; the screening figure drew its line at 1 under another threshold, and
    kept units looked like dropped ones (a user's findings)."""
    subsets = Section("subsets", "Subset curve", ["units", "subsets", "median gain", "25%", "75%", "min", "max"],
                      [[1, 1, 0.02, 0.01, 0.03, 0.0, 0.04]], "", {"gains_by_size": {"1": [0.02]}}).to_dict()
    ax, = section_figure(subsets).axes
    assert ax.get_xlim() == (0.0, 2.0) and len(ax.collections) == 2  # the two bands, as vertical bars
    screening = Section("screening", "Screening", ["unit", "columns", "RMS ratio to neutral [95% CI]", "passes"],
                        [["sentiment", 2, Metric(9.0, 6.0, 12.0, 8), True],
                         ["slang", 2, Metric(5.0, 3.0, 7.0, 8), False]], "",
                        {"threshold": 4.5, "rule": "lower_bound"}).to_dict()
    fig = section_figure(screening)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["sentiment (kept)", "slang"]
    assert [ln.get_xdata()[0] for ln in ax.lines if ln.get_linestyle() == "--"] == [4.5]
    assert "dashed: the threshold 4.5 its lower bound must pass" in fig.texts[0].get_text()


def test_a_section_without_metric_cells_and_no_registered_figure_draws_nothing():
    plain = Section("plain", "Plain numbers", ["unit", "gain"], [["a", 0.1], ["b", -0.2]]).to_dict()
    assert section_figure(plain) is None and section_html(plain, {}) == ""
    assert "<img" not in html_sections({"results": {"sections": [plain]}})


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    return report_studies.studies(tmp_path_factory)  # shared with the other report tests


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    where = tmp_path_factory.mktemp("chromium")
    chromium = Chromium(where / "profile", where / "chromium.log")
    yield chromium
    chromium.close()


def test_the_browser_check_catches_a_broken_image_a_console_error_and_a_request_out(browser, tmp_path):
    """The checks below would fail on a bad report: shown here on a page built to be bad."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!doctype html><img src="data:image/png;base64,AAAA" alt="broken">'
                   '<img src="http://example.invalid/x.png" alt="remote"><script>console.error("boom")</script>')
    page = browser.load(bad.as_uri())
    assert [(i["alt"], i["width"]) for i in page.images] == [("broken", 0), ("remote", 0)]
    assert "console: boom" in page.errors
    assert "http://example.invalid/x.png" in page.requests


@pytest.mark.parametrize("method, log_name, report, names", [
    ("prism", "results.json", "report.html", {"methods", "screening", "confirmation", "subsets", "penalty", "profile",
                                              "reliability", "probe_components", "joint_probes", "injection", "order",
                                              "order_agreement", "resolution"}),
    ("urw", "urw_results.json", "urw_report.html", {"methods", "coverage", "template_count"}),
])
def test_the_html_report_shows_every_figure_in_headless_chromium(studies, browser, tmp_path, method, log_name,
                                                                  report, names):
    folder = studies[method]
    log = json.loads((folder / log_name).read_text())
    drawn = figures(log)
    assert names <= set(drawn), set(drawn)  # the registered figures and the interval plots of Metric sections
    url = (folder / report).as_uri()
    page = browser.load(url)
    assert page.errors == []
    assert len(page.images) == len(drawn)
    bad = [i for i in page.images if not (i["complete"] and i["width"] > 0 and i["height"] > 0 and i["shown"] > 0)]
    assert bad == [], bad  # every PNG decoded and laid out on the page
    alts = {i["alt"] for i in page.images}
    assert {s["title"] for s in log["results"]["sections"] if s["name"] in drawn} <= alts
    assert all(u == url or u.startswith("data:image/png;base64,") for u in page.requests), page.requests
    shot = tmp_path / f"{method}_report.png"
    shot.write_bytes(page.screenshot)
    assert page.screenshot.startswith(PNG) and shot.stat().st_size > 50_000
    assert page.size[1] > 2000  # the whole page, tables and figures, not one screen of it


def test_the_urw_report_says_how_pairs_were_drawn_and_which_repeat_with_opposite_labels(studies):
    """The demo's pairs are its first ones (``pair_draw = "first"``), said in the footer and on
    the page; pairs given both ways with opposite labels (none in LLMBar) get the collect's
    warning line in both reports when a results log counts them."""
    from judgecal.report.urw import format_urw_table, render_urw_html

    log = json.loads((studies["urw"] / "urw_results.json").read_text())
    res = log["results"]
    assert res["opposite_label_pairs"] == {}
    assert res["pair_sample"] == "at most 4 pairs of each dataset, the first in file order"
    text = format_urw_table(log)
    assert "evaluation: 20 pairs (at most 4 pairs of each dataset, the first in file order)" in text
    assert "opposite label" not in text
    res["opposite_label_pairs"] = {"llmbar-Natural": 2}
    warn = ("warning: llmbar-Natural: 2 pairs repeat the same two responses to one prompt with the opposite label "
            "(preferred both ways); kept, so a method gets one of each right: check the labels")
    assert warn in format_urw_table(log).splitlines()
    assert f"<p><b>{html.escape(warn)}</b></p>" in render_urw_html(log)
    # pairs repeating another's prompt, responses and label: recorded by evaluate (none here), said in both
    assert res["repeated_pairs"] == {}
    res["repeated_pairs"] = {"llmbar-Natural": 3}
    again = ("warning: llmbar-Natural: 3 pairs repeat another pair's prompt, two responses and label (labels of two "
             "rounds, or two exports, as rows of their own?); each counts as a pair: keep one row per pair")
    assert again in format_urw_table(log).splitlines()
    assert f"<p><b>{html.escape(again)}</b></p>" in render_urw_html(log)
    # calibration labels of one value: said at fit only, while the coverage table showed its breach (a user's)
    res["calibration_labels"] = {"met": 22, "not met": 0}
    one = ("warning: every calibration label is 1 (met, 22 criteria): the weights are calibrated on met criteria "
           "only; add labelled unmet ones")
    assert one in format_urw_table(log).splitlines()
    page = render_urw_html(log)
    assert f"<p><b>{html.escape(one)}</b></p>" in page and page.count(html.escape(one)) == 1


def test_urw_refuses_verdicts_missing_above_max_missing_and_states_the_policy(studies, tmp_path, monkeypatch):
    """A sixth of the verifier's answers made unusable where the response store is read: above
    ``[urw] max_missing`` (0.1) fit and evaluate refuse in one line; raised, the report states
    what was met and the rule (a missing verdict is no vote)."""
    import shutil

    import pyarrow as pa
    import pyarrow.compute as pc

    from judgecal.config import load_study
    from judgecal.errors import InputError
    from judgecal.methods.runner import StudyRun, StudyRunner
    from judgecal.report.urw import format_urw_table, render_urw_html

    folder = tmp_path / "urw"
    shutil.copytree(studies["urw"], folder)
    read = StudyRun.answered

    def some_unparsed(self, store, plan_name, columns=None):
        t = read(self, store, plan_name, columns)
        if "parse_status" not in t.column_names:
            return t
        every6 = pa.array([k % 6 == 0 for k in range(t.num_rows)])
        status = pc.if_else(every6, pa.scalar("unparsed"), t["parse_status"])
        return t.set_column(t.schema.get_field_index("parse_status"), "parse_status", status)

    monkeypatch.setattr(StudyRun, "answered", some_unparsed)
    for stage in ("fit", "evaluate"):
        with pytest.raises(InputError) as e:
            getattr(StudyRunner(load_study(str(folder))), stage)()
        assert "above [urw].max_missing = 0.1" in str(e.value) and "unparsed" in str(e.value)
        assert "\n" not in str(e.value)
    log = StudyRunner(load_study(str(folder), ["urw.max_missing=0.2"])).evaluate()
    m = log["results"]["missing_verdicts"]
    assert m["policy"] == "drop" and m["max_missing"] == 0.2
    assert m["without_score"] == m["by_status"]["unparsed"] == (m["requests"] + 5) // 6
    line = (f"missing scores: {m['without_score']:,} of {m['requests']:,} requests have no usable score "
            f"(unparsed {m['without_score']}); policy drop: an answer without a usable verdict is no vote; a "
            "criterion left with none is dropped (listed); refused above 20% ([urw] max_missing)")
    assert line in format_urw_table(log).splitlines()
    assert html.escape(line) in render_urw_html(log)


def test_the_html_report_holds_every_line_of_the_text_tables_foot(studies):
    """The HTML report left out the text table's "screened: ... lean optimistic" and sampling
    lines, and its figure called the screened table held-out (a user's finding): every foot
    line is under the HTML table, the screening one above it too."""
    import html

    from judgecal.report.html import render_html
    from judgecal.report.table import foot_lines, screened_line

    log = json.loads((studies["prism"] / "results.json").read_text())
    page = render_html(log)
    lines = foot_lines(log)
    assert screened_line(log["results"]) in lines and any(x.startswith("target: ") for x in lines)
    assert all(html.escape(x) in page for x in lines), [x for x in lines if html.escape(x) not in page]
    screened = html.escape(screened_line(log["results"]))
    assert page.count(screened) == 1 and page.index(screened) < page.index("<table>")  # once, above the table
    assert "Held-out mean within-group" not in page and "fitted on the groups screening read" in \
        figures(log)["methods"].texts[0].get_text()


def test_the_urw_report_names_its_ablations_and_holds_the_text_tables_foot(studies):
    """URW† and URW‡ were explained nowhere, the abstention count had no denominator, and the
    HTML report left out foot lines of the text table (a user's findings)."""
    import html

    from judgecal.report.urw import format_urw_table, render_urw_html, urw_foot_lines

    log = json.loads((studies["urw"] / "urw_results.json").read_text())
    text, page = format_urw_table(log), render_urw_html(log)
    lines = urw_foot_lines(log)
    assert ("URW†: URW's template votes with uniform weights (ablation: URW without its weights); URW‡: the base "
            "template's one vote weighted by its p-value under a two-template score (ablation)") in lines
    # every row defined; Uniform reads the base template's vote (it was given URW†'s definition: a reader's finding)
    baselines = next(x for x in lines if x.startswith("Uniform: "))
    assert baselines.startswith("Uniform: the base template's one vote per criterion, weights 1/K; Beta-Binomial: ")
    assert all(x in text for x in lines) and all(html.escape(x) in page for x in lines)
    assert not re.search(r"\d of the evaluation responses", text), text


def test_a_percentile_fallback_is_drawn_apart_from_a_bootstrap_t_interval():
    """The table said "(percentile; bootstrap-t unbounded)" beside an interval; its figure drew the
    bar like every other (a reader's finding): dashed, and the axis says what dashed means."""
    rows = [["neutral", Metric(0.4, 0.3, 0.5, 8)],
            ["length", Metric(0.2, 0.0, 0.6, 8, "percentile; bootstrap-t unbounded")]]
    section = Section("x", "A section", ["probe", "shift"], rows).to_dict()
    ax, = section_figure(section).axes
    styles = [c.get_linestyle()[0] for c in ax.collections]
    assert len(styles) == 2 and styles[0][1] is None and styles[1][1] is not None  # solid, then dashed
    assert "dashed bar: percentile interval" in ax.get_xlabel().replace("\n", " ")
    solid = Section("x", "A section", ["probe", "shift"], rows[:1]).to_dict()
    assert "dashed" not in section_figure(solid).axes[0].get_xlabel()


def test_the_template_count_figure_draws_a_percentile_fallback_dashed():
    """The template-count figure drew every interval solid, the table's "(percentile; ...)" too
    (carried from a reader's finding): dashed there as in every interval figure, and said so."""
    rows = [[1, 3, Metric(0.6, 0.5, 0.7, 10), 0.55, 0.65],
            [2, 3, Metric(0.7, 0.4, 0.9, 10, "percentile; bootstrap-t unbounded"), 0.6, 0.8]]
    columns = ["N", "subsets", "accuracy, mean over subsets [95% CI]", "min subset", "max subset"]
    section = Section("template_count", "URW accuracy against N", columns, rows).to_dict()
    ax, = section_figure(section).axes
    styles = [c.get_linestyle()[0] for c in ax.collections]
    assert len(styles) == 2 and styles[0][1] is None and styles[1][1] is not None  # solid, then dashed
    assert "dashed bar: percentile interval" in ax.get_xlabel()
    solid = Section("template_count", "URW accuracy against N", columns, rows[:1]).to_dict()
    assert "dashed" not in section_figure(solid).axes[0].get_xlabel()


def test_rows_without_an_interval_are_counted_in_the_figures_title():
    """The order section's parsed share (a plain number) and a statistic undefined in every
    document were left out of its figure unsaid (carried finding): the title counts them."""
    rows = [["parsed share of batched scores", 0.97, "share"],
            ["Kendall τ, reversed order", Metric(0.5, 0.3, 0.7, 12), "τ"],
            ["first-position shift", "n/a, undefined in every document: one candidate", "score units"]]
    fig = section_figure(Section("order", "Order", ["statistic", "estimate [95% CI]", "unit"], rows).to_dict())
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["Kendall τ, reversed order [τ]"]
    assert "2 rows without an interval in the table only" in fig.texts[0].get_text().replace("\n", " ")
    every = section_figure(Section("order", "Order", ["statistic", "estimate [95% CI]", "unit"], rows[1:2]).to_dict())
    assert "without an interval" not in every.texts[0].get_text()
    simulated = Section("order", "Order (SIMULATED judge)", ["statistic", "estimate [95% CI]", "unit"], rows).to_dict()
    assert section_figure(simulated).texts[0].get_text().replace("\n", " ").endswith(
        "in the table only (SIMULATED judge)")  # the mark stays the title's last words


def test_the_simulated_mark_ends_the_titles_figures_add_to_and_an_unused_column_is_no_flipped_sign():
    """Screening and profile figures added their words after " (SIMULATED judge)", and a profile
    column 0 in every fold was drawn as "the sign flipped in some fold" (a second reader's findings)."""
    log = {"simulated_judge": True, "method": "prism"}
    rows = [["length", 2, Metric(1.4, 1.1, 1.8, 10), "0.90", True]]
    screening = Section("screening", "Screening", ["unit", "columns", "RMS ratio to neutral [95% CI]",
                                                   "share within groups", "passes"], rows, "",
                        {"threshold": 1.0, "rule": "lower_bound"}).to_dict()
    title = section_figure(screening, log).texts[0].get_text().replace("\n", " ")
    assert title.endswith("must pass (SIMULATED judge)") and title.count("SIMULATED") == 1, title
    profile = Section("profile", "Correction profile", ["column", "mean", "min", "max", "sign held"], [], "",
                      {"columns": ["length:more", "role:x"], "mean": [0.6, 0.0], "min": [0.5, 0.0], "max": [0.7, 0.0],
                       "sign_held": [5, None], "folds": 5}).to_dict()
    fig = section_figure(profile, log)
    assert fig._suptitle.get_text().replace("\n", " ").endswith("(SIMULATED judge)")
    assert "x: 0 in every fold" in fig.axes[0].get_xlabel()
    assert [ln.get_marker() for ln in fig.axes[0].lines if ln.get_marker() in ("o", "x")] == ["o", "x"]
