"""The fenced blocks of the documentation, with what the comment above each says about testing it.

A shell block is run by tests/test_docs.py unless the line above it says otherwise:
``<!-- test: run, exit 1 -->`` (run, and expect that status), ``<!-- test: by tests/x.py (why) -->``
(another test runs it for real) or ``<!-- test: not run: why -->``. A sample of output says
which command printed it: ``<!-- output: COMMAND[; exit N][; numbers vary] -->``; a file the
reader is to write is ``<!-- file: NAME -->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHELL = frozenset({"sh", "bash", "shell", "console"})
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_COMMENT = re.compile(r"^\s*<!--\s*(test|output|file):\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its test annotation."""

    page: Path
    line: int
    language: str
    text: str
    kind: str  # "test", "output", "file" or "" (no annotation)
    annotation: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, in order (indented fences, as in a list item, included)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        indent, language = fence.group(1), fence.group(2)
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        text = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
        comment = _COMMENT.match(lines[index - 1]) if index else None
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=language,
                text=text + "\n",
                kind=comment.group(1) if comment else "",
                annotation=comment.group(2) if comment else "",
            )
        )
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]
