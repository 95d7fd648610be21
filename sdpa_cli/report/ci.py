"""After a run: the CI reports the flags ask for (JUnit XML, annotations, step summary)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from sdpa_cli.errors import Problem, RunError, one_line
from sdpa_cli.report import annotate as ann
from sdpa_cli.report.ci_files import write_report
from sdpa_cli.report.junit import write_junit
from sdpa_cli.report.outcomes import Outcome


def finish(outcomes: Sequence[Outcome], *, junit_xml: Path | None, annotate: str | None,
           codequality: Path | None, started: float | None = None) -> None:
    """Write and print what CI reads; annotations go to stderr (stdout keeps --format's
    document, and the GitHub runner reads workflow commands from both streams)."""
    if junit_xml is not None:
        write_junit(junit_xml, outcomes, started=started)
    findings = None
    if ann.github_mode(annotate) == "github":
        findings = ann.outcome_findings(outcomes)
        _to_github(findings, ann.step_summary(outcomes))
    if codequality is not None:
        findings = findings if findings is not None else ann.outcome_findings(outcomes)
        write_report(codequality, ann.codequality(findings), "--codequality")


def bad_input(problems: Iterable[Problem], *, annotate: str | None,
              codequality: Path | None = None) -> None:
    """Bad specs (exit 2) flagged at their file, line and column: ::error lines and the step
    summary under GitHub, and GitLab's code-quality report when --codequality names one (the
    one file a bad spec writes, since it is the report that shows it)."""
    findings = ann.problem_findings(problems)
    if ann.github_mode(annotate) == "github":
        _to_github(findings, ann.bad_input_summary(findings))
    if codequality is not None:
        write_report(codequality, ann.codequality(findings), "--codequality")


def _to_github(findings: Sequence[ann.Finding], summary: str) -> None:
    """Under GitHub Actions: an ::error line a finding on stderr, and the step summary, whose
    failure names GITHUB_STEP_SUMMARY (the variable the user set)."""
    for f in findings:
        print(one_line(ann.github_line(f)), file=sys.stderr)
    try:
        ann.append_step_summary(summary)
    except RunError as e:
        raise RunError(f"GITHUB_STEP_SUMMARY: {e}") from None
