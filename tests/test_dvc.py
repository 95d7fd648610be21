"""params.yaml and metrics.json in every run folder, read as DVC reads them."""

from __future__ import annotations

import json
import math

import yaml
from conftest import write_spec

SPEC = "study: variance\ndims: [4, 16]\npairs: 200\nseed: 7\n"


def _flat_values(doc: dict) -> bool:
    """DVC compares leaves; a flat file has no mapping below the top level."""
    return all(not isinstance(v, dict) for v in doc.values())


def test_params_are_the_flat_resolved_spec(sdpa, workdir):
    spec = write_spec(workdir, "v.yaml", SPEC)
    assert sdpa("variance", str(spec), "--no-plots", "-q", "--out", "run").code == 0
    params = yaml.safe_load((workdir / "run" / "params.yaml").read_text())
    resolved = yaml.safe_load((workdir / "run" / "spec.yaml").read_text())
    assert _flat_values(params)
    assert params["dims"] == [4, 16] and params["pairs"] == 200 and params["seed"] == 7
    assert params["study"] == "variance"
    flat_resolved = {k: v for k, v in resolved.items() if k != "documented" and (
        not isinstance(v, list) or not any(isinstance(x, dict) for x in v))}
    assert {k: params[k] for k in flat_resolved} == flat_resolved


def test_metrics_are_flat_numbers_matching_results(sdpa, workdir):
    spec = write_spec(workdir, "v.yaml", SPEC)
    assert sdpa("variance", str(spec), "--no-plots", "-q", "--out", "run").code == 0
    metrics = json.loads((workdir / "run" / "metrics.json").read_text())
    results = json.loads((workdir / "run" / "results.json").read_text())
    assert _flat_values(metrics)
    assert all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
               for v in metrics.values())
    assert metrics["passed"] == int(results["passed"])
    assert metrics["checks_total"] == len(results["checks"])
    for i, row in enumerate(results["rows"]):
        assert metrics[f"rows.{i}.variance"] == row["variance"]
        assert metrics[f"rows.{i}.se"] == row["se"]
        assert f"rows.{i}.scaling" not in metrics  # words are not metrics


def test_worked_example_parts_flatten_and_the_audit_is_not_a_parameter(sdpa, workdir):
    assert sdpa("worked-example", "i-am-happy", "--no-plots", "-q", "--out", "w").code == 0
    params = yaml.safe_load((workdir / "w" / "params.yaml").read_text())
    assert _flat_values(params)
    assert params["parts.0.tokens"] == ["I", "am", "happy"]
    assert not any(k.startswith("documented") for k in params)
    metrics = json.loads((workdir / "w" / "metrics.json").read_text())
    assert metrics["audit_total"] > 0 and metrics["audit_unaccepted"] == 0
