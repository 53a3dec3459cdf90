"""Write (or, with --check, verify) every generated file: rules/, grafana/, deploy/kubernetes/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mixin.config import DEFAULT, ConfigError, load_config
from mixin.files import generated_files

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mixin", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    parser.add_argument(
        "--config",
        type=Path,
        help="a .toml or .yaml file of settings (mixin/config.py lists them); default: the "
        "shipped settings",
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT, help="directory to write into (default: the repository)"
    )
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config) if args.config else DEFAULT
    except (ConfigError, OSError) as error:
        print(f"python -m mixin: {error}", file=sys.stderr)
        return 2
    stale = []
    for relative, content in generated_files(config).items():
        path = args.out / relative
        if args.check:
            if not path.exists() or path.read_text() != content:
                stale.append(relative)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            print(f"wrote {path}")
    if stale:
        print("out of date (run `python -m mixin`): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
