"""Small files someone else wrote, read without trusting them: bounded, never blocking.

The web configuration file, the OAUTHBEARER token file, the settings' TOML file and the mixin's
configuration are each a few kilobytes. Named by a setting, any of them may turn out to be a
gigabyte, a directory, a FIFO or ``/dev/stdin`` (an ``open`` that waits forever for a writer), a
symlink loop, or not UTF-8; and a YAML file may be an alias bomb or nested ten thousand deep.
Each of those is one :class:`UnusableFile` here, whose message says what is wrong in a few words
(the caller names the file and the setting), never a hang, a traceback or a gigabyte in memory.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "UnusableFile",
    "described",
    "load_toml",
    "load_yaml",
    "read_small_file",
    "shown",
    "small_file_problem",
]

# Nesting deeper than this is refused before the parser recurses: no configuration needs it.
MAX_YAML_DEPTH = 32
# Nodes of a YAML document with every alias expanded: an alias bomb (a billion laughs) is a
# few hundred bytes whose expansion would not fit in memory.
MAX_YAML_NODES = 100_000
# How much of a value an error message quotes.
_SHOWN_CHARS = 100


class UnusableFile(ValueError):  # noqa: N818 - the condition, as the callers read it
    """A file that cannot be read as asked; the message says why, without naming the file."""


def shown(value: str | os.PathLike[str] | BaseException, limit: int = _SHOWN_CHARS) -> str:
    """``value`` as one short line for an error message: control characters escaped, long
    values cut (a setting, a key or a path can be a megabyte, or hold a newline)."""
    text = value if isinstance(value, str) else str(value)
    cut = text[:limit]
    escaped = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in cut)
    return escaped + (f"... ({len(text)} characters)" if len(text) > limit else "")


def described(value: object) -> str:
    """What a configuration value is, for an error message, without printing it whole: a
    string quoted and cut, a small number as it is, anything else by its type (the repr of a
    list built from aliases can be exponential, and of an integer of 10,000 digits an error)."""
    if isinstance(value, str):
        return f"'{shown(value)}'"
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if value.bit_length() <= 64 else "a very large integer"
    return f"a {type(value).__name__}"


def read_small_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Opened without blocking (a FIFO, ``/dev/stdin`` or a terminal is refused at once rather
    than waited on) and read no further than ``limit + 1`` bytes, whatever the file's size says.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UnusableFile("does not exist") from None
    except OSError as exc:
        raise UnusableFile(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    except ValueError:  # an embedded NUL
        raise UnusableFile("is not a usable file name") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise UnusableFile(f"is not a regular file but {_kind(mode)}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(descriptor, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnusableFile(f"is larger than {limit} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise UnusableFile(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(descriptor)


def small_file_problem(path: Path, limit: int) -> str | None:
    """Why ``path`` is not a regular file of at most ``limit`` bytes that can be opened; None
    when it is. For files another library reads (certificates, keys, CA bundles)."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or type(exc).__name__}"
    except ValueError:
        return "is not a usable file name"
    if not stat.S_ISREG(status.st_mode):
        return f"is not a regular file but {_kind(status.st_mode)}"
    if status.st_size > limit:
        return f"is larger than {limit} bytes"
    if not os.access(path, os.R_OK):
        return "is not readable"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "something else"


def load_yaml(data: bytes) -> Any:
    """One YAML document from ``data`` (UTF-8), as ``yaml.safe_load`` reads it, but bounded.

    Any problem is an UnusableFile with one line: a YAML error (with its line and column), a
    nesting deeper than MAX_YAML_DEPTH, more than MAX_YAML_NODES nodes once aliases are
    expanded, a recursive alias, or a number too long to convert.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnusableFile(f"is not UTF-8 (byte {exc.start})") from None
    loader = None
    try:
        loader = _BoundedLoader(text)  # the reader checks the first characters already
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise UnusableFile(f"is not valid YAML: {shown(' '.join(str(exc).split()), 300)}") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # a constructor that chokes on a value: an integer of 5,000 digits, say
        raise UnusableFile(f"holds a value YAML cannot convert: {shown(exc, 200)}") from None
    finally:
        if loader is not None:
            loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting while composing and alias bombs before building."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_YAML_DEPTH} levels",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return self.construct_document(node)


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph whose expansion (aliases repeated) exceeds MAX_YAML_NODES nodes, or
    that contains itself. Sizes are counted once per node, so the check is linear in the file."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    # an explicit stack: the graph is at most MAX_YAML_DEPTH deep, but no recursion anyway
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            visiting.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_YAML_NODES:
                raise yaml.YAMLError(
                    f"more than {MAX_YAML_NODES} values once its aliases are expanded "
                    f"(line {node.start_mark.line + 1})"
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in visiting:
            raise yaml.YAMLError(f"an alias refers to itself (line {node.start_mark.line + 1})")
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_toml(data: bytes) -> dict[str, Any]:
    """The table of a TOML document; UnusableFile for anything that is not one (not UTF-8,
    not TOML, nested too deeply, an integer of thousands of digits)."""
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise UnusableFile(f"is not UTF-8 (byte {error.start})") from None
    except tomllib.TOMLDecodeError as error:
        raise UnusableFile(f"is not valid TOML: {shown(error, 200)}") from None
    except RecursionError:
        raise UnusableFile("is not valid TOML: nested too deeply") from None
    except ValueError as error:  # an integer of 5,000 digits
        raise UnusableFile(f"holds a value TOML cannot convert: {shown(error, 200)}") from None
