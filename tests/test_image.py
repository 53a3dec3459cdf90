"""The image, built from the Dockerfile and run for real with podman (scripts/container-local).

Against the test broker over the host network it runs as uid 10001 on a read-only root
filesystem with no writable mount of any kind (podman's default tmpfs on /tmp, /var/tmp and /run
are turned off), answers /healthz and /readyz from inside, checks every answer message, and on
``podman stop`` (SIGTERM to PID 1) commits and exits 0. Skipped where podman cannot run; CI
installs it (scripts/test), so there a missing podman fails instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from kafka_support import (
    answer_messages,
    chunk_messages,
    create_topics,
    expected_verdicts,
    free_port,
    produce,
    scrape,
    total,
)

from exporter.simulate.files import write_scenario
from exporter.simulate.scenario import ScenarioConfig, build_scenario

pytestmark = [pytest.mark.kafka, pytest.mark.container]

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "container-local"
IMAGE = "citation-drift-exporter:test"
UID = "10001"
ANSWER_PARTITIONS = 2


def _script(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def podman(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """podman with the project's containers.conf and runc (never raises on exit status)."""
    return _script("podman", *args, timeout=timeout)


@pytest.fixture(scope="module")
def image() -> str:
    """Build the image once (the stand-in base first, if need be); skip where podman can't."""
    if sys.platform != "linux":
        pytest.skip("podman containers need Linux")
    check = _script("check", timeout=60)
    if check.returncode != 0:
        reason = f"cannot build the image here: {check.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must have it (scripts/test installs it as root)")
        pytest.skip(reason)
    built = _script("build", timeout=900)  # cold: ~1 min (debootstrap, PyPI); warm: seconds
    assert built.returncode == 0, f"scripts/container-local build failed:\n{built.stderr[-4000:]}"
    return IMAGE


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    config = ScenarioConfig(seed=23, answers=200)
    return write_scenario(build_scenario(config), tmp_path_factory.mktemp("image-scenario"))


@pytest.fixture
def container_name() -> Iterator[str]:
    name = f"citation-exporter-test-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        podman("rm", "--force", "--time", "0", "--ignore", name)


def _inspect(name: str, template: str) -> str:
    result = podman("inspect", "--format", template, name)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _logs(name: str) -> str:
    """The container's output (the exporter logs to stderr)."""
    result = podman("logs", name)
    return result.stdout + result.stderr


def _exec(name: str, *command: str) -> subprocess.CompletedProcess[str]:
    return podman("exec", name, *command, timeout=30)


def _wait_ready(name: str, port: int, seconds: float = 90.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _inspect(name, "{{.State.Running}}") != "true":
            logs = _logs(name)
            raise AssertionError(f"container exited early:\n{logs[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"not ready in {seconds} s:\n{_logs(name)[-3000:]}")


def _wait_for(port: int, name: str, at_least: float, seconds: float = 60.0, **labels: str) -> float:
    deadline = time.monotonic() + seconds
    value = 0.0
    while time.monotonic() < deadline:
        value = total(scrape(port), name, **labels)
        if value >= at_least:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{name}{labels} reached only {value}, wanted {at_least}")


async def _committed_and_ends(
    bootstrap: str, topic: str, partitions: int, group: str
) -> tuple[dict[int, int], dict[int, int]]:
    """The group's committed offset and the end offset of every partition of ``topic``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await admin.start()
    await consumer.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()
        await admin.close()
    committed = {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
    return committed, {tp.partition: offset for tp, offset in ends.items()}


def test_image_runs_read_only_as_non_root_and_stops_cleanly_on_sigterm(
    image: str,
    bootstrap: str,
    scenario: dict[str, Path],
    container_name: str,
    tmp_path: Path,
) -> None:
    topics = create_topics(bootstrap, answer_partitions=ANSWER_PARTITIONS)
    produce(bootstrap, topics.chunks, chunk_messages(scenario["chunks"]))
    answers = produce(bootstrap, topics.answers, answer_messages(scenario["citations"]))
    citations = len(expected_verdicts(scenario["expected"]))
    port = free_port()
    group = f"group-{topics.answers}"
    settings = {
        **topics.env(),
        "CITATION_EXPORTER_BOOTSTRAP_SERVERS": bootstrap,
        "CITATION_EXPORTER_GROUP_ID": group,
        "CITATION_EXPORTER_METRICS_PORT": str(port),
    }
    # The image's own HEALTHCHECK (kept by --format docker) follows the configured port.
    inspected = podman("image", "inspect", "--format", "{{json .HealthCheck}}", image)
    health = json.loads(inspected.stdout)
    assert health["Test"][0] == "CMD" and "CITATION_EXPORTER_METRICS_PORT" in health["Test"][-1]

    started = podman(
        "run",
        "--detach",
        "--name",
        container_name,
        "--network",
        "host",
        "--read-only",
        "--read-only-tmpfs=false",  # no /tmp, /var/tmp, /run tmpfs: nothing writable at all
        *(f"--env={key}={value}" for key, value in settings.items()),
        image,
    )
    assert started.returncode == 0, started.stderr
    log = tmp_path / "container.log"
    try:
        _wait_ready(container_name, port)

        # PID 1 is the exporter itself (so it gets podman's SIGTERM), as uid/gid 10001
        cmdline = _exec(container_name, "cat", "/proc/1/cmdline").stdout.split("\0")
        assert cmdline[1:3] == ["/opt/venv/bin/citation-exporter", "run"], cmdline
        status = _exec(container_name, "cat", "/proc/1/status").stdout.splitlines()
        ids = [line.split() for line in status if line.startswith(("Uid:", "Gid:"))]
        assert ids == [["Uid:", *[UID] * 4], ["Gid:", *[UID] * 4]], ids
        assert _exec(container_name, "id", "-u").stdout.strip() == UID

        # nothing is writable: not the root filesystem, not the venv, not /tmp
        assert _inspect(container_name, "{{.HostConfig.ReadonlyRootfs}}") == "true"
        for path in ("/opt/venv/probe", "/tmp/probe", "/probe"):
            probe = _exec(container_name, "python", "-c", f"open({path!r}, 'w')")
            assert probe.returncode != 0 and "Read-only file system" in probe.stderr, path

        # /healthz and /readyz answer 200 from inside the container
        inside = _exec(
            container_name,
            "python",
            "-c",
            "import urllib.request as u\n"
            "for p in ('/healthz', '/readyz'):\n"
            f"    print(u.urlopen('http://127.0.0.1:{port}' + p, timeout=5).status)",
        )
        assert inside.stdout.split() == ["200", "200"], inside.stderr
        healthcheck = podman("healthcheck", "run", container_name)
        assert healthcheck.returncode == 0, healthcheck.stdout + healthcheck.stderr

        # it consumed the test broker over the host network and checked every citation
        _wait_for(port, "citation_exporter_events_total", answers, topic=topics.answers)
        _wait_for(port, "citation_checks_total", citations, mode="inline")
        samples = scrape(port)
        assert total(samples, "citation_checks_total", mode="inline") == citations
        assert total(samples, "citation_exporter_ready") == 1

        # podman stop: SIGTERM to PID 1; exit 0 well within the grace time (137 = SIGKILL)
        began = time.monotonic()
        stopped = podman("stop", "--time", "30", container_name, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert time.monotonic() - began < 25
        assert _inspect(container_name, "{{.State.Status}} {{.State.ExitCode}}") == "exited 0"
    finally:
        log.write_text(_logs(container_name))

    text = log.read_text()
    assert "Traceback" not in text and "Read-only file system" not in text, text[-3000:]
    offsets = _committed_and_ends(bootstrap, topics.answers, ANSWER_PARTITIONS, group)
    committed, ends = asyncio.run(offsets)
    assert sum(ends.values()) == answers
    assert committed == ends, "the group's committed offsets cover every answer message"
