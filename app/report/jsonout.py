"""The JSON contract of ``gpuproof check --format json`` (DESIGN.md)."""

from __future__ import annotations

import json

from app.scan import ScanResult


def render_json(result: ScanResult, seconds: float) -> str:
    analysis = result.analysis
    return json.dumps(
        {
            "findings": [f.to_json() for f in analysis.findings],
            "notes": [n.to_json() for n in analysis.notes],
            "stats": {
                "files": result.files,
                "lines": result.lines,
                "functions": analysis.functions,
                "suppressed": analysis.suppressed,
                "baselined": analysis.baselined,
                "seconds": round(seconds, 3),
                "cached_files": result.cached_files,
            },
        },
        indent=2,
    )
