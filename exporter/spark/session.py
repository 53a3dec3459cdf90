"""A SparkSession for the command line: a local one by default, quiet, on the loopback.

An active session (a notebook's, a test's) is used as it is and left running; one started
here is stopped when the sweep ends.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from exporter.errors import UsageError

__all__ = ["spark_session"]

# What a local master needs to stay on this machine and out of the terminal; a cluster is
# configured by its owner (--spark-conf), so none of this is set for one.
_LOCAL = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
}
_ALWAYS = {"spark.ui.showConsoleProgress": "false"}


@contextmanager
def spark_session(master: str, conf: Mapping[str, str]) -> Iterator[SparkSession]:
    """The active session, or a new one on ``master`` with ``conf`` (stopped afterwards).

    Raises UsageError, one line, when Spark cannot start (no Java, a bad master URL).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    local = master.startswith("local")
    if local:
        # the Python workers are this interpreter, with this package; a cluster has its own
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName("citation-exporter sweep")
    for key, value in {**(_LOCAL if local else {}), **_ALWAYS, **conf}.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkException as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(
            f"--engine spark: Spark did not start on {master} ({first}); it needs Java 17 or "
            "later (JAVA_HOME or java on PATH)"
        ) from None
    # off: a failed job's cause is reported in one line (sweep_spark's _spark_failures), and
    # Spark's own ERROR lines repeat it with dozens of Java frames
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield spark
    finally:
        spark.stop()
