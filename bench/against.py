"""Run a benchmark against an earlier revision and this tree, in the same run, same machine.

    python bench/against.py REV bench/sweep_bench.py --answers 30000 --repeat 3
    python bench/against.py REV bench/stream_bench.py --answers 20000

The earlier revision's ``exporter`` package is exported (``git archive``) into a temporary
directory, and the benchmark, this tree's script, is run twice: once with a
``citation-exporter`` on PATH that imports the revision's package, once with this tree's. Both
use this virtual environment's Python and libraries, so only the code differs. The runs
alternate (revision, tree, revision, tree) and each is printed whole; compare the best of each
side. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SHIM = """#!{python}
import sys
sys.path.insert(0, {package!r})
from exporter.cli import main
sys.exit(main())
"""


def _export(revision: str, into: Path) -> Path:
    """The revision's exporter package (with its data files), unpacked under ``into``."""
    archive = into / "exporter.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", revision, "exporter"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def _shim(package: Path, bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    command = bin_dir / "citation-exporter"
    command.write_text(_SHIM.format(python=sys.executable, package=str(package)))
    command.chmod(0o755)
    return bin_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="the earlier revision (a commit, a tag, HEAD~3)")
    parser.add_argument("bench", help="the benchmark script, e.g. bench/sweep_bench.py")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side (default 2)")
    args, rest = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="bench-against-") as scratch:
        work = Path(scratch)
        sides = {
            args.revision: _shim(_export(args.revision, work), work / "before"),
            "this tree": _shim(ROOT, work / "after"),
        }
        for round_ in range(1, args.rounds + 1):
            for name, bin_dir in sides.items():
                env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
                print(f"== {name}, round {round_}", flush=True)
                subprocess.run([sys.executable, args.bench, *rest], env=env, check=True)


if __name__ == "__main__":
    main()
