"""DVC reads a run folder without sdpa: params.yaml (the resolved spec, flat) and metrics.json
(every number of every row, flat), so `dvc params diff` and `dvc metrics diff` work."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from sdpa_cli.framework.causes import counts
from sdpa_cli.framework.result import Result, clean


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}, 'c': [{'d': 2}]} → {'a.b': 1, 'c.0.d': 2}; lists of plain values
    (dims: [3, 100]) and of lists (a matrix) stay whole, as DVC shows them."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}.{i}"))
        return out
    return {prefix: value}


def params_yaml(spec: Mapping[str, Any]) -> str:
    """The resolved spec, flat; `documented:` (the printed numbers the audit checks) is
    left out: those are the document's claims, not parameters of the run."""
    params = {k: v for k, v in clean(dict(spec)).items() if k != "documented"}
    return yaml.safe_dump(flatten(params), sort_keys=False, allow_unicode=True, width=100,
                          default_flow_style=None)


def _numeric(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def metrics(result: Result) -> dict[str, float | int]:
    """Headline numbers: whether it passed, check and audit counts, then each row's numbers
    keyed `<table>.<row>.<field>` (`rows` is the main table)."""
    unaccepted = sum(a.unaccepted for a in result.audit)
    out: dict[str, float | int] = {
        "passed": int(result.passed),
        "checks_passed": sum(c.passed for c in result.checks),
        "checks_total": len(result.checks),
        "audit_total": sum(a.kind == "number" for a in result.audit),
        "audit_unaccepted": unaccepted,
    }
    if result.audit:  # root errors first, and the claims' verdicts
        out.update({f"audit_{k}": v for k, v in counts(result.audit).items()})
    tables = [("rows", result.table.rows), *((t.name, t.rows) for t in result.tables)]
    for name, rows in tables:
        for i, row in enumerate(rows):
            for key, value in clean(dict(row)).items():
                if _numeric(value):
                    out[f"{name}.{i}.{key}"] = value
    return out


def metrics_json(result: Result) -> str:
    return json.dumps(metrics(result), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
