"""One contract over every registered study, fed by the small examples its declaration gives:
every check of tests/contract.py on every example, and every study check on the study as a
whole, reported per study and per check (a broken study fails its own checks, with its
declaration's error, and no other study's). `pytest tests/test_contract.py -k NAME` runs all
of one study's, in seconds."""

from __future__ import annotations

import contract
import pytest
from conftest import study_examples

from sdpa_cli import registry

CASES = study_examples()


@pytest.mark.parametrize("check", contract.CHECKS,
                         ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("name, i", CASES)
def test_contract(name, i, check):
    check(contract.runs(name, i))


@pytest.mark.parametrize("check", contract.STUDY_CHECKS,
                         ids=lambda c: c.__name__.removeprefix("check_"))
@pytest.mark.parametrize("name", list(registry.NAMES))
def test_study(name, check):
    check(name)
