"""Every notebook in notebooks/ runs top to bottom in a real kernel (nbclient) on a small
simulated study of the method its metadata names (``judgecal.method``), its workspace given in
``JUDGECAL_STUDY`` as a user would; the figures it draws are the HTML report's, byte for byte."""

import re

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT
import report_studies

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
REPORTS = {"prism": "report.html", "urw": "urw_report.html"}


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    return report_studies.studies(tmp_path_factory)  # shared with the other report tests


def test_there_is_a_notebook_per_method():
    methods = {nbformat.read(p, as_version=4).metadata.get("judgecal", {}).get("method") for p in NOTEBOOKS}
    assert methods == set(REPORTS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_notebook_runs_on_a_study_and_redraws_the_reports_figures(studies, path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    method = nb.metadata.get("judgecal", {}).get("method")
    assert method in studies, f"{path.name}: metadata.judgecal.method must name the study it reads ({set(studies)})"
    monkeypatch.setenv("JUDGECAL_STUDY", str(studies[method]))  # the kernel inherits this environment
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    drawn = [re.sub(r"\s", "", o.data["image/png"]) for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if "image/png" in o.get("data", {})]
    report = (studies[method] / REPORTS[method]).read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', report)
    assert embedded and set(embedded) <= set(drawn)  # the same code on the same log: the same PNGs
