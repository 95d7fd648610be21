"""The example notebook (tests/data/sdpa-from-python.ipynb) runs headless, and shows what
the Python API promises: the HTML table, the found: lines, a figure inline, and the user's
own pyplot plot after it (sdpa changes no backend; slow tier)."""

from __future__ import annotations

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).parent / "data" / "sdpa-from-python.ipynb"


@pytest.mark.slow
def test_the_example_notebook_runs_and_shows_the_result(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.output_type == "error" for o in c.outputs) for c in code)
    html = code[0].outputs[0]["data"]["text/html"]  # the Result's _repr_html_
    assert "<table>" in html and "found:" in html and "checks:</b> 6/6 passed" in html
    rows = code[1].outputs[0]["data"]["text/plain"]
    assert "(3, 'none'," in rows and "(1000, 'sqrt'," in rows
    assert "grows like d" in code[2].outputs[0]["data"]["text/plain"]
    assert code[3].outputs[0]["data"]["text/plain"] == "2"
    # the figure a cell returns is shown as an image, not as "<Figure size …>"
    shown = [o for o in code[4].outputs if "image/png" in o.get("data", {})]
    assert len(shown) == 1 and shown[0]["data"]["image/png"].startswith("iVBORw0KGgo")
    # all of them, returned as a list: shown as the figures, not as the list's text
    every = code[5].outputs[0]["data"]
    assert every["text/html"].count('<img src="data:image/png;base64,iVBORw0KGgo') == 2
    # and the user's own plt plot after it still shows inline (one image, no text stand-in)
    theirs = [o for o in code[6].outputs if "image/png" in o.get("data", {})]
    assert len(theirs) == 1 and shown[0]["data"]["image/png"] != theirs[0]["data"]["image/png"]
    assert not any("<Figure size" in str(o.get("data", {}).get("text/plain", ""))
                   and "image/png" not in o.get("data", {}) for c in code for o in c.outputs)
    assert "sqrt" in code[7].outputs[0]["data"]["text/plain"]
