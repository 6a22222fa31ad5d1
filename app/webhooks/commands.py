"""Slash commands in PR comments: `/gpuproof <command> [args]` on a line of its own,
outside code blocks and quotes (where people show commands rather than give them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMMAND = re.compile(r"^\s*/gpuproof(?:\s+(?P<name>[a-z][a-z-]*))?(?P<args>(?:\s+\S+)*)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Command:
    name: str  # "help" when none is given
    args: tuple[str, ...]


def parse_commands(body: str) -> list[Command]:
    commands: list[Command] = []
    in_fence = False
    for line in body.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or line.lstrip().startswith(">"):
            continue
        found = _COMMAND.match(line)
        if found:
            commands.append(Command(found.group("name") or "help", tuple(found.group("args").split())))
    return commands
