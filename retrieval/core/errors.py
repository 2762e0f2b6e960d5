"""Errors that name the problem. The CLI prints their message and exits non-zero."""


class HopTraceError(Exception):
    """Base class: anything a user can cause and fix."""

    exit_code = 2


class InputError(HopTraceError):
    """A question, corpus or questions file that cannot be used as given."""


class KBError(HopTraceError):
    """A knowledge base that is missing, incomplete or built for something else."""


class ConfigError(HopTraceError):
    """An unknown method, model or backend name, or an out-of-range setting."""
