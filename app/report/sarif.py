"""SARIF 2.1.0, the format GitHub code scanning accepts."""

from __future__ import annotations

import json

from app import __version__
from app.checks.model import Severity
from app.checks.rules import RULES
from app.scan import ScanResult

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}


def render_sarif(result: ScanResult) -> str:
    index = {rule.id: i for i, rule in enumerate(RULES)}
    rules = [
        {
            "id": rule.id,
            "name": "".join(part.title() for part in rule.id.split("-")),
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.section("What it does")},
            "help": {"text": rule.section("Why is this bad?"), "markdown": rule.docs},
            "defaultConfiguration": {"level": _LEVEL[rule.severity]},
            "properties": {"tags": ["gpu", "rust"], "spec": rule.spec},
        }
        for rule in RULES
    ]
    results = [
        {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.path, "uriBaseId": "%SRCROOT%"},
                        "region": {"startLine": f.line, "endLine": f.end_line},
                    },
                    "logicalLocations": (
                        [{"fullyQualifiedName": f.function, "kind": "function"}] if f.function else []
                    ),
                }
            ],
            "partialFingerprints": {"gpuproofFingerprint/v1": f.fingerprint},
        }
        for f in result.analysis.findings
    ]
    notifications = [
        {"level": "note", "message": {"text": f"{n.path}: {n.message}"}} for n in result.analysis.notes
    ]
    return json.dumps(
        {
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "gpuproof",
                            "version": __version__,
                            "rules": rules,
                        }
                    },
                    "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "scanned root"}}},
                    "invocations": [
                        {"executionSuccessful": True, "toolExecutionNotifications": notifications}
                    ],
                    "results": results,
                }
            ],
        },
        indent=2,
    )
