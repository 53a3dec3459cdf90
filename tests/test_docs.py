"""The documentation does what it says: every shell block runs as written, every sample of output
is what its command prints, every JSON example parses, and every link of the README resolves.

Each page is followed as a reader would follow it, top to bottom, in a working directory of its
own that holds the files the pages call yours (a generated archive under the names they use) and
``.venv`` (this interpreter's environment), with the repository on ``PYTHONPATH`` as if run from
its top. Paths under ``/tmp/`` are moved into that directory.
A block another test runs for real, or one that cannot run here (a cluster, a prompt), says so
in the comment above it (tests/docs_blocks.py); that comment is checked too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from docs_blocks import REPO, SHELL, Block, all_blocks, blocks, pages
from judge_server import JudgeServer, Reply, completion

needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (scripts/test installs Debian's prometheus package)",
)

BIN = Path(sys.executable).parent
# the files a reader's own pipeline would hand to the commands, as the pages name them
READERS_FILES = {
    "chunks.jsonl.gz": "chunks.jsonl.gz",
    "live-chunks.jsonl.gz": "chunks.jsonl.gz",
    "staging-chunks.jsonl.gz": "chunks.jsonl.gz",
    "archive.jsonl.gz": "citations.jsonl.gz",
    "citations-archive.jsonl.gz": "citations.jsonl.gz",
}
_EXIT = re.compile(r"\bexit (\d+)\b")
_TIMINGS = (
    (re.compile(r"\d[\d,]*(\.\d+)? s\b"), "# s"),
    (re.compile(r"\d[\d,]* citations/s\b"), "# citations/s"),
)
_NUMBER = re.compile(r"\d[\d,.]*")


def _workspace(root: Path) -> Path:
    work = root / "work"
    (work / "tmp").mkdir(parents=True)
    (work / ".venv").symlink_to(Path(sys.prefix))
    archive = root / "archive"
    done = subprocess.run(
        [BIN / "citation-exporter", "simulate", "--out", archive, "--answers", "400", "--gzip"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name, generated in READERS_FILES.items():
        shutil.copy(archive / generated, work / name)
    return work


def _run(command: str, work: Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH: `python -m mixin`, which the pages run from the repository's top
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(REPO)}
    env.pop("CITATION_EXPORTER_CONFIG_FILE", None)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command.replace("/tmp/", f"{work}/tmp/")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _expected_exit(annotation: str) -> int:
    found = _EXIT.search(annotation)
    return int(found.group(1)) if found else 0


def _normalised(line: str, numbers_vary: bool) -> str:
    for pattern, replacement in _TIMINGS:
        line = pattern.sub(replacement, line)
    if numbers_vary and "clusters" not in line:
        line = _NUMBER.sub("#", line)
    return line.rstrip()


def _holds(sample: str, printed: str, numbers_vary: bool) -> str | None:
    """Why the printed text does not hold the sample (None when it does): each run of the
    sample's lines between ``...`` lines appears in the printed lines, whole and in order."""
    lines = [_normalised(line, numbers_vary) for line in printed.splitlines()]
    segments: list[list[str]] = [[]]
    for line in sample.splitlines():
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(_normalised(line, numbers_vary))
    position = 0
    for segment in (s for s in segments if s):
        width = len(segment)
        at = next(
            (i for i in range(position, len(lines) - width + 1) if lines[i : i + width] == segment),
            None,
        )
        if at is None:
            return "not printed (in this order):\n" + "\n".join(segment)
        position = at + width
    return None


def _follow(page: Path, work: Path) -> None:
    for block in blocks(page):
        if block.kind == "file":
            (work / block.annotation).write_text(block.text, encoding="utf-8")
        elif block.kind == "output":
            command, *options = (part.strip() for part in block.annotation.split(";"))
            done = _run(command, work)
            assert done.returncode == _expected_exit(";".join(options)), (
                f"{block.where}: {command} exited {done.returncode}: {done.stderr[-2000:]}"
            )
            missing = _holds(block.text, done.stdout + done.stderr, "numbers vary" in options)
            assert missing is None, f"{block.where}: the sample of `{command}` is {missing}"
        elif block.language in SHELL and (not block.kind or block.annotation.startswith("run")):
            done = _run(block.text, work)
            assert done.returncode == _expected_exit(block.annotation), (
                f"{block.where} exited {done.returncode}:\n{block.text}\n{done.stderr[-2000:]}"
            )


def _pages_that_run() -> list[Path]:
    return [page for page in pages() if any(_runs(block) for block in blocks(page))]


def _runs(block: Block) -> bool:
    if block.kind in ("output", "file"):
        return True
    return block.language in SHELL and (not block.kind or block.annotation.startswith("run"))


@pytest.mark.parametrize("page", _pages_that_run(), ids=lambda page: page.name)
def test_each_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    _follow(page, _workspace(tmp_path))


def test_every_shell_block_is_run_or_says_which_test_runs_it_or_why_not() -> None:
    for block in all_blocks():
        if block.language == "text":
            assert block.kind in ("output", "test"), f"{block.where}: a sample says who prints it"
        if block.language not in SHELL and block.kind != "test":
            continue
        note = block.annotation
        if block.kind != "test" or note.startswith("run"):
            continue
        if note.startswith("by "):
            named = REPO / note.removeprefix("by ").split()[0]
            assert named.is_file(), f"{block.where}: {named} does not exist"
        else:
            assert re.fullmatch(r"not run: .{10,}", note), f"{block.where}: {note!r}"


def test_a_sample_that_differs_from_what_was_printed_is_caught() -> None:
    printed = "a\n  drift ratio 12.36% FAIL\n  took 0.77 s\nb\n  clusters: -892 (18%)\n"
    assert _holds("  drift ratio 12.36% FAIL\n...\nb\n", printed, False) is None
    assert _holds("  took 1.5 s\n", printed, False) is None, "timings never match"
    assert _holds("  drift ratio 11.00% FAIL\n", printed, False) is not None
    assert _holds("  drift ratio 11.00% FAIL\n", printed, True) is None
    assert _holds("  clusters: -426 (17%)\n", printed, True) is not None, "clusters are seeded"
    assert _holds("b\n  drift ratio 12.36% FAIL\n", printed, False) is not None, "order counts"


def test_every_json_example_parses() -> None:
    for block in all_blocks():
        if block.language == "json":
            try:
                json.loads(block.text)
            except json.JSONDecodeError:
                for line in block.text.splitlines():
                    json.loads(line)  # JSON Lines, one record a line


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", h).strip().lower()) for h in headings}


def test_every_link_of_the_readme_resolves() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = (REPO / path) if path else REPO / "README.md"
        assert target.exists(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in _anchors(target), f"README links to {link}: no such heading"


def test_the_readmes_record_examples_are_a_clean_sweep(tmp_path: Path) -> None:
    examples = [b.text for b in blocks(REPO / "README.md") if b.language == "json"]
    chunk, citation = (json.loads(text) for text in examples[:2])
    (tmp_path / "chunks.jsonl").write_text(json.dumps(chunk) + "\n")
    (tmp_path / "citations.jsonl").write_text(json.dumps(citation) + "\n")
    done = _run(
        "citation-exporter sweep --chunks chunks.jsonl --citations citations.jsonl --out v.jsonl",
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "v.jsonl").read_text())["status"] == "ok"


def test_the_readme_stays_short() -> None:
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_worked_entailment_example_is_what_the_sweep_prints(tmp_path: Path) -> None:
    """docs/sweep.md's worked example, against a judge that answers in 120 ms with the token
    counts and prices the example gives."""
    page = REPO / "docs" / "sweep.md"
    commands, sample = (b for b in blocks(page) if "judge server" in b.annotation)
    usage = {"prompt_tokens": 180, "completion_tokens": 2, "total_tokens": 182}
    server = JudgeServer(Reply(body=completion("entailed", usage=usage), delay=0.12)).start()
    prices = (
        "export CITATION_EXPORTER_JUDGE_PRICE_INPUT_PER_1K=0.002 "
        "CITATION_EXPORTER_JUDGE_PRICE_OUTPUT_PER_1K=0.02\n"
    )
    try:
        script = commands.text.replace("http://127.0.0.1:8000/v1", server.base_url)
        done = _run(prices + script.replace("\\\n", " ").rstrip() + " --no-progress", tmp_path)
    finally:
        server.stop()
    assert done.returncode == 1, done.stderr
    assert len(server.requests) > 50, "the model judge was asked"
    assert _holds(sample.text, done.stdout, numbers_vary=False) is None, done.stdout[-1500:]


def test_the_layout_names_only_files_that_exist() -> None:
    page = REPO / "docs" / "design.md"
    tree = next(b for b in blocks(page) if b.text.startswith("exporter/"))
    top = REPO
    named = 0
    for line in tree.text.splitlines():
        heading = re.match(r"^(\s*)([\w.]+/)", line)
        if heading:
            folder = (top if heading.group(1) else REPO) / heading.group(2)
            assert folder.is_dir(), f"the layout names {heading.group(2)}: no such folder"
            top = top if heading.group(1) else folder
        for name in re.findall(r"\b([\w/-]*[\w-]+\.(?:py|json))\b", line):
            if "/" in name:
                found = (top / name).exists() or (REPO / name).exists()
            else:
                found = next(top.rglob(name), None) is not None
            assert found, f"the layout names {name} in {top.name}/: no such file"
            named += 1
    assert named > 30


def _real_verdicts(tmp_path: Path) -> tuple[dict[str, object], dict[str, object]]:
    done = _run(
        "citation-exporter sweep --example --no-progress --out v.jsonl --coverage-out c.jsonl",
        tmp_path,
    )
    assert done.returncode == 1, done.stderr
    verdicts = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    drifted = next(v for v in verdicts if v["status"] == "drift_repaired" and v.get("evidence"))
    coverage = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    uncited = next(v for v in coverage if v["status"] == "uncited_claims")
    return drifted, uncited


def test_the_verdict_examples_have_the_fields_real_verdicts_have(tmp_path: Path) -> None:
    drifted, uncited = _real_verdicts(tmp_path)
    examples = {
        json.loads(b.text)["status"]: json.loads(b.text)
        for b in blocks(REPO / "docs" / "records.md")
        if b.language == "json" and "status" in b.text
    }
    for real in (drifted, uncited):
        example = examples[str(real["status"])]
        assert set(example) == set(real), f"{real['status']}: {set(example) ^ set(real)}"
        for field, value in real.items():
            if isinstance(value, dict):
                assert set(example[field]) == set(value), f"{real['status']}.{field}"


@needs_promtool
def test_every_promql_block_parses(tmp_path: Path) -> None:
    queries = [b for b in all_blocks() if b.language == "promql"]
    assert queries
    expressions: list[str] = []
    for block in queries:
        for line in block.text.splitlines():
            if line[:1].isspace() and expressions:
                expressions[-1] += "\n" + line  # an indented line goes on the query above
            elif line.strip():
                expressions.append(line)
    rules = [{"record": f"docs:query_{i}:example", "expr": e} for i, e in enumerate(expressions)]
    path = tmp_path / "docs-queries.yml"
    path.write_text(json.dumps({"groups": [{"name": "docs", "rules": rules}]}))
    done = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
