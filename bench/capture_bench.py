"""Benchmark: what exporter.capture costs the caller per answer.

Prints figures; asserts nothing. The 870 labelled support answers of tests/data/coverage are
sent as Anthropic responses (one text block a sentence; each cited sentence cites a chunk of
about 1,000 characters that holds it, by char_location), and as LangChain QuotedAnswers (the
same citations, by a model-written quote in another case), and as LlamaIndex responses of a
CitationQueryEngine (each cited sentence marked [N], its source node a piece with a fresh id,
found in the nodes of its document), then captured over and over:

    python bench/capture_bench.py [--rounds 3]

Figures: microseconds per answer for from_anthropic, from_langchain and from_llamaindex, for
cutting the answer into sentences alone (the share the splitter takes), and for
AnswerSender.submit (what the caller's path pays to send: encoding and queueing; the sending is
on the sender's own thread).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.capture import Chunk, from_anthropic, from_langchain, from_llamaindex  # noqa: E402
from exporter.capture.sender import AnswerSender  # noqa: E402
from exporter.capture.sentences import sentence_spans  # noqa: E402
from exporter.config.kafka import KafkaConnection  # noqa: E402

FILLER = "The policy applies to every plan and region listed in the annex below. " * 7


Case = tuple[dict[str, Any], list[Chunk], dict[str, Any], list[dict[str, Any]], dict[str, Any]]


def _cases() -> list[Case]:
    cases = []
    for path in sorted((ROOT / "tests" / "data" / "coverage").glob("answers*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            answer = json.loads(line)
            blocks: list[dict[str, Any]] = []
            chunks: list[Chunk] = []
            documents: list[dict[str, Any]] = []
            quoted: list[dict[str, Any]] = []
            marked: list[str] = []
            sources: list[dict[str, Any]] = []
            for sentence in answer["sentences"]:
                block: dict[str, Any] = {"type": "text", "text": sentence["text"] + " "}
                if sentence["cited"]:
                    text = FILLER + sentence["text"] + " " + FILLER
                    start = len(FILLER)
                    end = start + len(sentence["text"]) + 1
                    block["citations"] = [
                        {"type": "char_location", "document_index": len(chunks),
                         "start_char_index": start, "end_char_index": end,
                         "cited_text": sentence["text"] + " "}
                    ]  # fmt: skip
                    quoted.append({"source_id": len(chunks), "quote": sentence["text"].lower()})
                    chunk_id = f"{answer['id']}#{len(chunks)}"
                    chunks.append(
                        Chunk(doc_id=chunk_id, doc_version="v1", chunk_id=chunk_id, text=text)
                    )
                    documents.append(
                        {"id": chunk_id, "page_content": text,
                         "metadata": {"source": chunk_id, "doc_version": "v1"}}
                    )  # fmt: skip
                    sources.append(
                        {"node": {"text": f"Source {len(chunks)}:\n{text}\n",
                                  "relationships": {"1": {"node_id": chunk_id}}}}
                    )  # fmt: skip
                    marked.append(f"{sentence['text']} [{len(chunks)}]")
                else:
                    marked.append(sentence["text"])
                blocks.append(block)
            answer_text = " ".join(s["text"] for s in answer["sentences"])
            cases.append(
                (
                    {"content": blocks},
                    chunks,
                    {"answer": answer_text, "citations": quoted},
                    documents,
                    {"response": " ".join(marked), "source_nodes": sources},
                )
            )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cases = _cases()
    citations = sum(len(case[1]) for case in cases)
    print(f"{len(cases)} answers, {citations} citations, {args.rounds} rounds")
    refused = 0
    timings = {}
    for name, run in (
        ("sentences alone", lambda c: sentence_spans(" ".join(b["text"] for b in c[0]["content"]))),
        ("from_anthropic", lambda c: from_anthropic(c[0], c[1], answer_id="a")),
        ("from_langchain", lambda c: from_langchain(c[2], c[3], answer_id="a")),
        ("from_llamaindex", lambda c: from_llamaindex(c[4], c[1], answer_id="a")),
    ):
        started = time.perf_counter()
        for _ in range(args.rounds):
            for case in cases:
                result = run(case)
                if name != "sentences alone":
                    refused += len(result.refusals)
        elapsed = time.perf_counter() - started
        timings[name] = elapsed / (args.rounds * len(cases))
        print(f"{name}: {timings[name] * 1e6:,.0f} us per answer")
    share = timings["sentences alone"] / timings["from_anthropic"]
    print(f"the splitter's share of from_anthropic: {share:.0%}; refusals: {refused}")
    events = [from_anthropic(case[0], case[1], answer_id=f"a-{n}").event for n, case in
              enumerate(cases)]  # fmt: skip
    # a broker that is away and a queue that never fills: what submit costs, nothing sent
    sender = AnswerSender(
        KafkaConnection(bootstrap_servers="127.0.0.1:9"), max_queued=10**9, close_timeout=0.1
    ).start()
    started = time.perf_counter()
    for _ in range(args.rounds):
        for event in events:
            sender.submit(event)
    elapsed = time.perf_counter() - started
    stats = sender.close()
    print(
        f"AnswerSender.submit: {elapsed / (args.rounds * len(events)) * 1e6:,.1f} us per answer "
        f"({stats.submitted:,} submitted, {stats.dropped.get('queue_full', 0)} dropped as full)"
    )


if __name__ == "__main__":
    main()
