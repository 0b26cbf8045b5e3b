"""Execute every notebook in notebooks/ end to end (small sizes: DOPPLER_NOTEBOOK_SMALL=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow  # runs every notebook end to end

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOPPLER_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("DOPPLER_NOTEBOOK_OUT", str(tmp_path))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert os.listdir(tmp_path), "the notebook should write its figures to DOPPLER_NOTEBOOK_OUT"
