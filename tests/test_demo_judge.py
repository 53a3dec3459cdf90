"""The demo with a model judge: reworded claims for it, the thread it runs in, and the command
end to end against a real HTTP server on 127.0.0.1 (tests/judge_server.py).

Every test is bounded: the fake judges sleep at most a few seconds and are cancelled sooner,
the demos run for a few seconds, and every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from judge_server import JudgeServer, Reply, completion

from exporter.cli import main
from exporter.entailment.background import HourlyBudget
from exporter.entailment.lexical import LexicalJudge
from exporter.entailment.results import EntailmentResult, Judgement
from exporter.entailment.thread import JudgeThread
from exporter.simulate.scenario import LEAD_INS, ScenarioConfig, build_scenario

KEY = "sk-demo-test-5b1e9c07d2"
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx honours proxy variables; the local server must be reached directly."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)


# -- the scenario's reworded claims ------------------------------------------------------------


def test_reworded_claims_are_what_the_lexical_judge_leaves_to_a_model() -> None:
    config = ScenarioConfig(seed=3, answers=200)
    plain = build_scenario(config)
    reworded = build_scenario(ScenarioConfig(seed=3, answers=200, reworded_share=0.3))
    assert reworded.expected == plain.expected and reworded.misclaims == plain.misclaims
    lexical = LexicalJudge()
    changed = 0
    for before, after in zip(plain.citation_lines, reworded.citation_lines, strict=True):
        if not isinstance(after, dict) or "sentences" not in after:
            assert after == before
            continue
        assert isinstance(before, dict)
        for citation in after["citations"]:
            was = before["sentences"][citation["sentence_index"]]
            claim = after["sentences"][citation["sentence_index"]]
            if claim == was:
                continue
            changed += 1
            assert claim.startswith(LEAD_INS)
            assert lexical.judge(was, citation["quote"]).result is EntailmentResult.ENTAILED
            assert lexical.judge(claim, citation["quote"]).result is EntailmentResult.UNKNOWN
    assert changed > 50
    with pytest.raises(ValueError, match="reworded"):
        ScenarioConfig(reworded_share=1.5).validate()


# -- the thread a model judge runs in ----------------------------------------------------------


@dataclass
class FakeJudge:
    """Answers ``result`` after ``seconds`` (asyncio.sleep: cancellable); ``fail`` raises."""

    seconds: float = 0.0
    result: EntailmentResult = EntailmentResult.ENTAILED
    cost_usd: float = 0.0
    fail: bool = False
    name: str = "openai"

    async def judge(self, claim: str, evidence: str) -> Judgement:
        await asyncio.sleep(self.seconds)
        if self.fail and claim == "boom":
            raise RuntimeError("a bug")
        return Judgement(self.result, self.name, seconds=self.seconds, cost_usd=self.cost_usd)


def thread_of(judge: FakeJudge, **options: Any) -> tuple[JudgeThread, threading.Event]:
    """A started thread for ``judge``, and an event set once the judge is closed."""
    closed = threading.Event()

    @asynccontextmanager
    async def made() -> Any:
        try:
            yield judge
        finally:
            closed.set()

    def make() -> Any:
        return made()

    values: dict[str, Any] = {"queue_size": 10, "concurrency": 2, **options}
    thread = JudgeThread(make, **values)
    thread.start()
    return thread, closed


def test_the_thread_judges_what_it_is_offered_and_the_caller_takes_it() -> None:
    thread, closed = thread_of(FakeJudge(seconds=0.01, result=EntailmentResult.NOT_ENTAILED))
    assert all(thread.offer(f"claim {n}", "evidence") for n in range(8))
    assert thread.finish(5.0) == 0
    taken = thread.take()
    assert [j.result for j in taken.judgements] == [EntailmentResult.NOT_ENTAILED] * 8
    assert not taken.dropped and thread.waiting == 0
    assert closed.is_set()
    assert not thread.offer("late", "evidence"), "a finished thread takes nothing"


def test_offers_never_wait_and_a_full_queue_drops_what_it_cannot_take() -> None:
    thread, closed = thread_of(FakeJudge(seconds=5.0), queue_size=5, concurrency=2)
    started = time.monotonic()
    taken = [thread.offer(f"claim {n}", "evidence") for n in range(50)]
    assert time.monotonic() - started < 0.5
    assert sum(taken) == 7  # five waiting, two in flight
    assert thread.waiting == 7
    started = time.monotonic()
    assert thread.finish(0.2) == 7  # the judge is slower than the wait: nothing decided
    assert time.monotonic() - started < 3.0
    assert thread.take().dropped == {"queue_full": 43}
    assert closed.is_set()


def test_a_spent_budget_drops_and_a_failing_judge_decides_nothing() -> None:
    judge = FakeJudge(cost_usd=1.0, fail=True)
    thread, _ = thread_of(judge, concurrency=1, budget=HourlyBudget(2.0))
    for claim in ("boom", "a", "b"):
        assert thread.offer(claim, "evidence")
    assert thread.finish(5.0) == 0
    taken = thread.take()
    assert [(j.result, j.reason) for j in taken.judgements] == [
        (EntailmentResult.ERROR, "failed: RuntimeError"),
        (EntailmentResult.ENTAILED, None),
        (EntailmentResult.ENTAILED, None),
    ]
    assert not taken.dropped
    thread, _ = thread_of(judge, concurrency=1, budget=HourlyBudget(0.0))
    assert not thread.offer("a", "evidence")
    thread.finish(0)
    assert thread.take().dropped == {"budget": 1}


# -- the demo, end to end ----------------------------------------------------------------------

DEMO = ["--seconds-per-phase", "1", "--answers", "300", "--metrics-port", "0"]
# start-up, three one-second phases, the model's three seconds at the end, and slack for a slow
# machine: far less than one 30 s model timeout
DEMO_SECONDS = 20.0


@dataclass
class DemoRun:
    stdout: str
    stderr: str
    seconds: float
    metrics: str


def run_demo(*extra: str) -> DemoRun:
    """``citation-exporter demo --serve``: its output once it serves, and a scrape then."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "exporter.cli", "demo", *DEMO, "--serve", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    serving = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("serving http"):
                serving.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert serving.wait(60), "".join(lines)
        seconds = time.monotonic() - started
        url = lines[-1].split()[1]
        with urllib.request.urlopen(url, timeout=5) as response:
            metrics = response.read().decode()
    finally:
        process.terminate()
        try:
            _, stderr = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate(timeout=10)
        reader.join(5)
    return DemoRun("".join(lines), stderr, seconds, metrics)


def sample(metrics: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition, 0 when absent."""
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def checks(metrics: str, judge: str, result: str) -> float:
    """citation_entailment_checks_total of the demo (mode inline) for a judge and result."""
    return sample(
        metrics, "citation_entailment_checks_total", mode="inline", judge=judge, result=result
    )


def asked(request_body: Any) -> tuple[str, str]:
    """The claim and the evidence a request to the model judge carries."""
    user = request_body["messages"][1]["content"]
    claim = re.search(r"<claim>\n(.*)\n</claim>", user, re.DOTALL)
    evidence = re.search(r"<evidence>\n(.*)\n</evidence>", user, re.DOTALL)
    assert claim and evidence, user
    return claim[1], evidence[1]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    usage = {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}
    running = JudgeServer(Reply(body=completion("not_entailed", usage=usage))).start()
    try:
        yield running
    finally:
        running.stop()


def test_the_demo_asks_a_judge_server_what_the_lexical_judge_cannot_settle(
    server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_PRICE_INPUT_PER_1K", "0.5")
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_MODEL", "env-model")  # the flag wins
    done = run_demo(
        "--judge", "openai", "--judge-base-url", server.base_url, "--judge-model", "test-model"
    )
    requests = list(server.requests)
    assert requests, done.stdout + done.stderr
    lexical = LexicalJudge()
    for request in requests:
        assert request.path == "/v1/chat/completions"
        assert request.headers.get("authorization") == f"Bearer {KEY}"
        assert request.body["model"] == "test-model"
        claim, evidence = asked(request.body)
        assert claim.startswith(LEAD_INS)  # a reworded claim ...
        assert lexical.judge(claim, evidence).result is EntailmentResult.UNKNOWN  # ... unsettled
    n = len(requests)
    # every claim the lexical judge could not settle went to the model, and it flagged them all
    model = f"model (test-model at {server.base_url}) {n} of {n} asked not entailed, 0 errors"
    final = re.search(
        r"entailment: lexical ([\d,]+) of ([\d,]+) claims not entailed; (.*)", done.stdout
    )
    assert final, done.stdout
    assert final[3].startswith(model + f", ${n * 0.05:.4f}, "), final[3]
    assert "left unjudged" not in final[3] and "dropped" not in final[3]
    live = re.findall(
        r"entailment  lexical [\d,]+ of [\d,]+ claims not entailed, (\d+) it", done.stdout
    )
    assert live and int(live[-1]) == n
    # the metrics count each citation once, by the judge that decided
    assert checks(done.metrics, "openai", "not_entailed") == n
    lexical_total = sum(
        checks(done.metrics, "lexical", result)
        for result in ("entailed", "not_entailed", "unknown")
    )
    assert lexical_total == int(final[2].replace(",", "")) - n
    cost = sample(done.metrics, "citation_entailment_cost_dollars_total", mode="inline")
    assert cost == pytest.approx(n * 0.05)
    assert sample(done.metrics, "citation_entailment_duration_seconds_count", judge="openai") == n
    assert KEY not in done.stdout + done.stderr + done.metrics


@pytest.mark.parametrize("failure", ["slow", "closed port"])
def test_a_judge_server_that_never_answers_does_not_stall_the_demo(
    failure: str, server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_API_KEY", KEY)
    monkeypatch.setenv("CITATION_EXPORTER_JUDGE_TIMEOUT_SECONDS", "0.5")
    if failure == "slow":
        server.default = Reply(delay=30.0)
        base_url = server.base_url
    else:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        base_url = f"http://127.0.0.1:{port}/v1"
    done = run_demo("--judge", "openai", "--judge-base-url", base_url, "--judge-model", "m")
    assert done.seconds < DEMO_SECONDS
    final = re.search(
        r"entailment: lexical .*; model \(m at .*\) 0 of (\d+) asked not entailed, "
        r"(\d+) errors \((.*?)\)",
        done.stdout,
    )
    assert final, done.stdout
    assert int(final[1]) == int(final[2]) > 0
    assert ("timeout" if failure == "slow" else "connection refused") in final[3]
    assert checks(done.metrics, "openai", "error") == int(final[2])
    assert KEY not in done.stdout + done.stderr


def test_a_model_still_busy_when_the_demo_ends_is_left_behind_in_bounded_time(
    server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.default = Reply(delay=30.0)  # within the default 30 s timeout: never an answer
    done = run_demo("--judge", "openai", "--judge-base-url", server.base_url, "--judge-model", "m")
    assert done.seconds < DEMO_SECONDS
    assert re.search(r"waiting up to 3 s for the model judge's \d+ claims?\n", done.stdout)
    final = re.search(r"entailment: .*0 of 0 asked.*; (\d+) left unjudged", done.stdout)
    assert final and int(final[1]) > 0, done.stdout
    assert server.requests and "authorization" not in server.requests[0].headers  # no key set


def test_without_a_model_the_demo_shows_the_lexical_judge_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CITATION_EXPORTER_JUDGE", raising=False)
    done = run_demo()
    assert re.search(
        r"  entailment  [\d,]+ of [\d,]+ claims not entailed \(lexical judge", done.stdout
    )
    assert "model (" not in done.stdout
    assert re.search(r"entailment: lexical [\d,]+ of [\d,]+ claims not entailed \(", done.stdout)
    assert checks(done.metrics, "lexical", "unknown") > 0
    assert checks(done.metrics, "openai", "error") == 0


# -- flags and their errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--judge", "openai"], {}, "judge openai needs judge_base_url and judge_model"),
        (
            ["--judge", "openai", "--judge-base-url", "ftp://127.0.0.1/v1", "--judge-model", "m"],
            {},
            "judge_base_url (--judge-base-url): must be an http:// or https:// URL",
        ),
        (
            ["--judge-model", "m"],
            {"CITATION_EXPORTER_JUDGE": "openai"},
            "judge openai needs judge_base_url",
        ),
        (
            [],
            {"CITATION_EXPORTER_JUDGE_TIMEOUT_SECOND": "5"},
            "unknown variable CITATION_EXPORTER_JUDGE_TIMEOUT_SECOND",
        ),
    ],
)
def test_a_judge_that_cannot_be_configured_is_one_line_naming_it(
    argv: list[str],
    env: dict[str, str],
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exited:
        main(["demo", *DEMO, *argv])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert expected in captured.err and len(captured.err.strip().splitlines()) == 1


def test_the_key_is_no_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = capsys.readouterr().out
    assert "--judge-api-key" not in text and "CITATION_EXPORTER_JUDGE_API_KEY" in text
