"""Benchmark: what the quote check costs per citation, before and after ``span_shifted``.

Prints figures; asserts nothing (performance targets live here, not in timed tests).

    python bench/quote_check_bench.py [--baseline-rev 72f8a12] [--citations 20000] [--repeat 5]

The check of issue 22 looks for the folded quote near a span that does not hold it verbatim.
Its promise: the ok path costs what it cost before, and only spans that are not the quote
verbatim pay for the search. So one run times ``check_citation`` of this tree and of the engine
at ``--baseline-rev`` (read from git, loaded beside this one: the same store, the same
citations, the same process) on four kinds of citation, each against real sentences of a
generated scenario:

- ``verbatim``: the span holds the quote byte for byte (nearly every citation of a healthy
  store);
- ``typography``: a same-length typography change at the span (no-break spaces, U+2010);
- ``edited``: one letter of the text at the span changed (the similarity line decides);
- ``shifted``: one character put before the chunk's text (drift after this change, ok before).

Each figure is the best of ``--repeat`` runs, in microseconds per citation, with the ratio of
this tree to the baseline.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.checks.engine import Policy, check_citation  # noqa: E402
from exporter.checks.store import ChunkStore  # noqa: E402
from exporter.checks.verdict import Verdict  # noqa: E402
from exporter.records.decode import decode_chunk  # noqa: E402
from exporter.records.schema import Citation  # noqa: E402
from exporter.simulate.scenario import ScenarioConfig, build_scenario  # noqa: E402

Check = Callable[[Citation, ChunkStore, Policy], Verdict]
KINDS = ("verbatim", "typography", "edited", "shifted")


def _baseline(rev: str) -> ModuleType | None:
    """The engine module as it was at ``rev``, importable beside this tree's (None when git
    cannot show it: a shallow clone, an archive)."""
    shown = subprocess.run(
        ["git", "show", f"{rev}:exporter/checks/engine.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        print(f"no baseline: git cannot show {rev} here ({shown.stderr.strip()[:120]})")
        return None
    source = shown.stdout
    path = Path(tempfile.mkdtemp()) / "engine_baseline.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("engine_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def _typeset(text: str) -> str:
    return text.replace(" ", "\u00a0").replace("-", "\u2010")


def _edited(text: str) -> str:
    """One letter in the middle changed: a typo fixed in place."""
    middle = len(text) // 2
    for at in range(middle, len(text)):
        if text[at].isalpha():
            return text[:at] + ("x" if text[at] != "x" else "y") + text[at + 1 :]
    return text


def _cases(citations: int) -> dict[str, tuple[ChunkStore, list[Citation]]]:
    """For each kind, a store with one document per citation (its chunk changed that way) and
    the citations of them. One citation per document makes the drifted kind pessimistic: a
    sweep folds each document once for all of its citations, here once for each."""
    scenario = build_scenario(ScenarioConfig(answers=max(50, citations // 2), seed=5))
    chunks = {r["chunk_id"]: r for r in scenario.chunks_before}
    records = []
    for line in scenario.citation_lines:
        if isinstance(line, dict):  # an answer event carries its citations; a record is one
            records += line.get("citations", [line])
    records = [r for r in records if isinstance(r, dict) and r.get("chunk_id") in chunks]
    records = [r for r in records if _holds(chunks[r["chunk_id"]]["text"], r)][:citations]
    cases: dict[str, tuple[ChunkStore, list[Citation]]] = {}
    for kind in KINDS:
        store = ChunkStore()
        cited = []
        for number, record in enumerate(records):
            start, end = record["chunk_span"]
            text = chunks[record["chunk_id"]]["text"]
            if kind == "typography":
                text = _typeset(text)
            elif kind == "edited":
                text = text[:start] + _edited(text[start:end]) + text[end:]
            elif kind == "shifted":
                text = "\ufeff" + text
            doc_id = f"doc-{number}"
            chunk = {"doc_id": doc_id, "doc_version": "v1", "chunk_id": f"{doc_id}#0", "text": text}
            store.apply(decode_chunk(chunk | {"ordinal": 0, "doc_offset": 0}))
            cited.append(_citation(record, doc_id))
        cases[kind] = (store, cited)
    return cases


def _holds(text: str, record: dict[str, object]) -> bool:
    span = record["chunk_span"]
    assert isinstance(span, list)
    return text[span[0] : span[1]] == record["quote"]


def _citation(record: dict[str, object], doc_id: str) -> Citation:
    span = record["chunk_span"]
    assert isinstance(span, list)
    return Citation(
        citation_id=str(record["citation_id"]),
        answer_id=str(record.get("answer_id")),
        doc_id=doc_id,
        doc_version="v1",
        chunk_id=f"{doc_id}#0",
        start=int(span[0]),
        end=int(span[1]),
        quote=str(record["quote"]),
    )


def _time(check: Check, store: ChunkStore, citations: list[Citation], repeat: int) -> float:
    """Best of ``repeat`` passes, in microseconds per citation."""
    policy = Policy()
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for citation in citations:
            check(citation, store, policy)
        best = min(best, time.perf_counter() - started)
    return best / max(1, len(citations)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline-rev",
        default="72f8a12",
        help="the commit whose engine is the baseline (default: %(default)s, the last one "
        "before span_shifted)",
    )
    parser.add_argument("--citations", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    baseline = _baseline(args.baseline_rev)
    cases = _cases(args.citations)
    print(f"check_citation, microseconds per citation, best of {args.repeat}")
    print(f"{'kind':<11} {'citations':>9} {'baseline':>9} {'this tree':>9} {'ratio':>6}  statuses")
    for kind in KINDS:
        store, citations = cases[kind]
        after = _time(check_citation, store, citations, args.repeat)
        before = (
            after
            if baseline is None
            else _time(baseline.check_citation, store, citations, args.repeat)
        )
        statuses: dict[str, int] = {}
        for citation in citations:
            status = check_citation(citation, store, Policy()).status.value
            statuses[status] = statuses.get(status, 0) + 1
        print(
            f"{kind:<11} {len(citations):>9,} {before:>9.2f} {after:>9.2f} "
            f"{after / before:>6.2f}  {statuses}"
        )


if __name__ == "__main__":
    main()
