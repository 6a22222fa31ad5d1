"""Findings rendered for people (terminal), for programs (JSON) and for GitHub code
scanning (SARIF)."""
