"""Every JSON document sdpa prints carries schema_version and sdpa_version and fits the JSON
Schema shipped in sdpa_cli/schemas; a study's results fit its own schema too, shipped
in its package (tests/test_study_schemas.py)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from conftest import EXPERIMENTS, REPRESENTATIVE, write_spec

from sdpa_cli import __version__, registry, schemas
from sdpa_cli.framework import schema
from sdpa_cli.framework.context import RunContext
from sdpa_cli.runner import loader as spec

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

# Small sizes keep every shipped spec fast; what is checked is the shape, not the numbers.
SHIPPED = sorted(EXPERIMENTS.glob("*/*.yaml"))


def _validator(name: str):
    resources = []
    for n in schemas.NAMES:
        doc = schemas.load(n)
        resources.append((doc["$id"], referencing.Resource.from_contents(doc)))
    registry_ = referencing.Registry().with_resources(resources)
    schema = schemas.load(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=registry_)


def _small(path: Path):
    # the quick tier runs each study's cheapest shipped spec (conftest.REPRESENTATIVE); every
    # study's own examples are checked against the schema in tests/test_contract.py
    return spec.load(path, study=None)


@pytest.mark.parametrize("path", [p for p in SHIPPED if p.stem in REPRESENTATIVE],
                         ids=lambda p: p.stem)
def test_each_studys_cheapest_shipped_spec_fits_the_result_schema(path):
    s = _small(path)
    result = registry.get(s.study).run(s, RunContext(workers=1, figures=False))
    doc = result.to_json()
    assert (doc["schema_version"], doc["sdpa_version"]) == (1, __version__)
    assert doc["study"] in registry.NAMES
    _validator("result").validate(doc)
    own = json.loads(schema.shipped(registry.get(s.study)).read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(own)(own).validate(doc)  # its rows typed exactly


# The full-size run of every shipped spec is .ci/run's batch; this reads what that batch wrote
# instead of running every spec a second time.
BATCH = os.environ.get("SDPA_CHECK_BATCH")


@pytest.mark.skipif(not BATCH, reason="SDPA_CHECK_BATCH names no batch folder (.ci/run sets it)")
def test_every_results_json_of_a_whole_batch_fits_the_result_schema():
    files = sorted(Path(str(BATCH)).glob("*/results.json"))
    assert len(files) >= len(SHIPPED) - 1  # the MiniLM spec is skipped without its model
    validator = _validator("result")
    for f in files:
        doc = json.loads(f.read_text(encoding="utf-8"))
        assert (doc["schema_version"], doc["sdpa_version"]) == (1, __version__), f
        validator.validate(doc)
        own = json.loads(schema.shipped(registry.get(doc["study"])).read_text(encoding="utf-8"))
        jsonschema.validators.validator_for(own)(own).validate(doc)


def test_the_schema_rejects_a_document_without_its_version():
    s = _small(EXPERIMENTS / "variance" / "why-sqrt.yaml")
    doc = registry.get(s.study).run(s, RunContext(workers=1, figures=False)).to_json()
    broken = copy.deepcopy(doc)
    del broken["schema_version"]
    assert not _validator("result").is_valid(broken)
    broken = copy.deepcopy(doc)
    broken["checks"][0]["passed"] = "yes"
    assert not _validator("result").is_valid(broken)


def test_batch_examples_and_compare_documents_fit_their_schemas(sdpa, workdir):
    specs = workdir / "specs"
    specs.mkdir()
    write_spec(specs, "ok.yaml", "study: variance\ndims: [4]\npairs: 100\nseed: 1\n")
    write_spec(specs, "bad.yaml",
               "study: variance\ndims: [4]\npairs: 100\nseed: 1\nse_tolerance: 0.001\n")
    r = sdpa("run", str(specs), "--no-plots", "-q", "--format", "json")
    batch = r.json()
    _validator("batch").validate(batch)
    assert batch["counts"]["failed"] == 1 and batch["seconds"] >= 0
    failed = next(e for e in batch["experiments"] if e["status"] == "failed")
    assert failed["failures"] and all(f["detail"] for f in failed["failures"])
    again = sdpa("run", str(specs), "--no-plots", "-q", "--format", "json").json()
    _validator("batch").validate(again)
    assert again["counts"]["kept"] == 2 and again["experiments"] == [
        {**e, "kept": True, "seconds": e2["seconds"]}
        for e, e2 in zip(batch["experiments"], again["experiments"], strict=True)]
    listing = sdpa("worked-example", "--list", "--format", "json").json()
    _validator("examples").validate(listing)
    every = sdpa("worked-example", "--all", "--no-write", "-q", "--format", "json").json()
    _validator("examples").validate(every)
    assert every["schema_version"] == 1 and len(every["examples"]) == len(listing["examples"])
    r = sdpa("compare", "outputs", "outputs", "--format", "json")
    _validator("compare").validate(r.json())
    r = sdpa("compare", "outputs", "outputs", "--exact", "--format", "json")
    _validator("compare").validate(r.json())
