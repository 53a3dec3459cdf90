"""Every error the exporter raises on purpose, in one hierarchy.

::

    ExporterError                 the base: catch it to handle anything the exporter meant
    ├── RecordError (ValueError)  a record breaks the contract; the message names the field
    │   └── InvalidJson           the bytes are not JSON at all (reason ``invalid_json``)
    ├── InputError (OSError)      an input file cannot be read to its end; names the file
    ├── OutputError (OSError)     an output must not (it is an input) or cannot be written
    ├── SettingsError (ValueError) an invalid setting; start-up exits 2 naming it
    ├── UsageError                a problem with the command line or its files: exit 2
    ├── RestartRequired           the Kafka runtime must start over (a topic is missing, a
    │                             background loop stopped): retried with backoff, not fatal
    └── SourceUnavailable         the chunk store a service looks chunks up in cannot answer
                                  now (the database is away): checking pauses and is retried

What a message holds never escapes as an exception: the pipeline turns it into that message's
dead letter. ``OutOfBudgetError`` and ``TooManyPlacesError`` in :mod:`exporter.checks.relocate`
are signals inside the relocator and never leave it.
"""

from __future__ import annotations

__all__ = [
    "ExporterError",
    "InputError",
    "InvalidJson",
    "OutputError",
    "RecordError",
    "RestartRequired",
    "SettingsError",
    "SourceUnavailable",
    "UsageError",
]


class ExporterError(Exception):
    """Base of every error the exporter raises on purpose."""


class RecordError(ExporterError, ValueError):
    """A record that breaks the contract; the message names the field and the problem."""


class InvalidJson(RecordError):  # noqa: N818 - named for the condition, as reasons are
    """Bytes that are not one JSON value."""


class InputError(ExporterError, OSError):
    """An input that cannot be read (to its end); the message says which and why."""


class OutputError(ExporterError, OSError):
    """An output that must not or cannot be written; the message says which and why."""


class SettingsError(ExporterError, ValueError):
    """An invalid setting; the message names it and says what is expected."""


class UsageError(ExporterError):
    """A problem with the command line or its files: exit 2 with a one-line message."""


class RestartRequired(ExporterError):  # noqa: N818 - a signal to start over, not a fault
    """The Kafka runtime cannot go on as it is and starts over with backoff; says why."""


class SourceUnavailable(ExporterError):  # noqa: N818 - a condition that passes, not a fault
    """The chunk store looked up per batch cannot answer now; says where and why. Nothing is
    checked meanwhile (a missing answer is no verdict): the batch is fetched again, with
    backoff."""
