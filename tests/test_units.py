"""One unit per quantity: a share of rows is a percent in every view that people
read (terminal, Markdown, report, findings, figure) and a fraction in the data files."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from sdpa_cli.framework.common import percent
from sdpa_cli.framework.result import Column
from sdpa_cli.report.formatting import number

_PCT = re.compile(r"^(\d+(?:\.\d+)?)%$")


@pytest.mark.parametrize("share", [0.0, 3e-4, 0.0219, 0.63062, 0.998, 1.0])
def test_a_share_reads_back_within_half_a_unit_of_its_last_digit(share):
    shown = number(share, "pct")
    assert shown == percent(share)  # the table cell and the sentences: one formatter
    m = _PCT.match(shown)
    assert m, shown
    digits = m.group(1)
    unit = 10.0 ** -len(digits.split(".")[1]) if "." in digits else 1.0
    assert abs(float(digits) - 100 * share) <= unit / 2 + 1e-12, (share, shown)


def _all_columns() -> list[Column]:
    """Every Column declared at module level in a study module."""
    import importlib
    import pkgutil

    import sdpa_cli.studies as studies

    out = []
    for info in pkgutil.walk_packages(studies.__path__, "sdpa_cli.studies."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, tuple):
                out += [c for c in value if isinstance(c, Column)]
    return out


def test_every_share_column_is_shown_in_percent():
    columns = _all_columns()
    shares = [c for c in columns if c.key.endswith(("_share", "_fraction"))]
    assert {c.key for c in shares} == {"frozen_share", "saturated_fraction", "first_token_share",
                                       "starved_share", "between_share"}
    assert all(c.fmt == "pct" for c in shares), [(c.key, c.fmt) for c in shares]
    assert all(c.key.endswith(("_share", "_fraction")) for c in columns if c.fmt == "pct")


def test_gradients_show_the_frozen_share_in_one_unit(sdpa, workdir: Path):
    r = sdpa("gradients", "--dims", "4", "16", "--trials", "20", "--d-model", "16",
             "--keys", "8", "--seed", "1", "--no-plots", "-q", "--out", "g")
    assert r.code == 0, r.err
    table = (workdir / "g" / "table.md").read_text(encoding="utf-8")
    head = next(line for line in table.splitlines() if "frozen rows" in line)
    col = [c.strip() for c in head.split("|")].index("frozen rows")
    lines = table.splitlines()
    body = []
    for line in lines[lines.index(head) + 2:]:  # the header's table only: to its end
        if not line.startswith("|"):
            break
        body.append(line)
    cells = [[c.strip() for c in line.split("|")][col] for line in body]
    assert cells and all(_PCT.match(c) for c in cells), cells
    # the findings sentence quotes the same cells (first and last d_k), in the same unit
    said = re.findall(r"frozen rows (\S+) → (\S+?)\.(?!\d)", r.err + table +
                      (workdir / "g" / "results.json").read_text(encoding="utf-8"))
    assert said and all(_PCT.match(a) and _PCT.match(b) for a, b in said), said
    assert {x for pair in said for x in pair} <= set(cells)
    # the data file keeps the fraction, for machines
    rows = list(csv.DictReader(io.StringIO((workdir / "g" / "table.csv").read_text())))
    assert all(0.0 <= float(row["frozen_share"]) <= 1.0 for row in rows)
