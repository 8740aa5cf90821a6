"""Topology.doctor(): the findings of `rdmatopo doctor`, on every fixture."""

from __future__ import annotations

import json
from pathlib import Path

import rdmatopo
from conftest import run_cli


def test_doctor_is_the_cli_doctor(fixture_root: Path, cli: Path) -> None:
    report = rdmatopo.discover(fixture_root).doctor()
    text = run_cli(cli, "doctor", "--root", str(fixture_root), "--format", "json",
                   ok_codes=(0, 1, 2))
    assert report.to_json() + "\n" == text
    doc = json.loads(text)
    assert report.context == doc["context"]
    assert [(f.check, f.severity, f.summary, f.why, f.fix, f.skipped) for f in report.findings] == [
        (f["check"], f["severity"], f["summary"], f["why"], f["fix"], f.get("skipped", False))
        for f in doc["findings"]
    ]
    assert [f.evidence for f in report.findings] == [
        tuple((e["path"], e["value"]) for e in f["evidence"]) for f in doc["findings"]
    ]
    assert [(c.check, c.outcome, c.note) for c in report.checks] == [
        (c["check"], c["outcome"], c["note"]) for c in doc["checks"]
    ]
    real = [f.severity for f in report.findings if not f.skipped]
    worst = max(real, key=["info", "warning", "error"].index) if real else None
    assert report.worst == worst
    assert report.exit_code == {None: 0, "info": 0, "warning": 1, "error": 2}[worst]

