"""Reading a framework's objects and plain dicts alike, without importing the framework.

The SDKs are optional: a response is read by attribute (a pydantic model, a dataclass) or by
key (its JSON, a dict), whichever it has, and every value is checked for its type before use,
so a hostile or half-built object is a refusal, never an exception into the caller's code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["UnreadableError", "answer_text", "field", "integer", "items", "text"]

_MISSING = object()


class UnreadableError(ValueError):
    """A value of the framework's object that is not what its API says it is."""


def field(value: object, name: str, default: Any = _MISSING) -> Any:
    """``value.name`` or ``value[name]``; ``default`` when it has neither (else UnreadableError)."""
    if isinstance(value, Mapping):
        if name in value:
            return value[name]
    else:
        try:
            return getattr(value, name)
        except AttributeError:
            pass
        except Exception as error:  # a property that raises: the object is unreadable
            raise UnreadableError(f"reading {name!r} raised {type(error).__name__}") from None
    if default is _MISSING:
        raise UnreadableError(f"{type(value).__name__} has no {name!r}")
    return default


def text(value: object, name: str) -> str:
    found = field(value, name)
    if type(found) is not str:
        raise UnreadableError(f"{name!r} must be a string, not {type(found).__name__}")
    return found


def answer_text(value: object, name: str) -> str:
    """An answer's text: a string that JSON can carry (a lone surrogate cannot be written in
    UTF-8, so no event holding it could be read back)."""
    found = text(value, name)
    try:
        found.encode("utf-8")
    except UnicodeEncodeError as error:
        raise UnreadableError(
            f"{name!r} holds a lone surrogate at character {error.start}: no JSON reader gives "
            "it back"
        ) from None
    return found


def integer(value: object, name: str) -> int:
    found = field(value, name)
    if type(found) is not int:
        raise UnreadableError(f"{name!r} must be an integer, not {type(found).__name__}")
    return found


def items(value: object, name: str, limit: int, *, required: bool = False) -> list[Any]:
    """A list field, at most ``limit`` long (a longer one is UnreadableError: bounded work);
    an absent or null one is empty unless ``required``."""
    found = field(value, name) if required else field(value, name, None)
    if found is None and not required:
        return []
    if isinstance(found, str | bytes) or not isinstance(found, Sequence):
        raise UnreadableError(f"{name!r} must be a list, not {type(found).__name__}")
    if len(found) > limit:
        raise UnreadableError(f"{name!r} holds {len(found):,} items, above {limit:,}")
    return list(found)
