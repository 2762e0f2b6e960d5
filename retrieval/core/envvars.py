"""Settings read from the environment: a bad value is a ConfigError naming the variable."""
from __future__ import annotations

import os
from typing import Callable, Optional, TypeVar

from .errors import ConfigError

T = TypeVar("T")


def _read(var: str, parse: Callable[[str], T], what: str) -> Optional[T]:
    """The variable's value parsed, or None when it is unset or empty."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        return parse(raw)
    except ValueError:
        raise ConfigError(f"{var} must be {what}, got {raw!r}") from None


def positive_number(var: str) -> Optional[float]:
    """The variable's value as a positive number, or None when it is unset or empty."""
    value = _read(var, float, "a number")
    if value is not None and value <= 0:
        raise ConfigError(f"{var} must be positive, got {os.environ[var].strip()!r}")
    return value


def whole_number(var: str, default: int, minimum: int = 0, maximum: Optional[int] = None) -> int:
    """The variable's value as a whole number within [minimum, maximum], or `default` when it is
    unset or empty."""
    value = _read(var, int, "a whole number")
    if value is None:
        return default
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
        raise ConfigError(f"{var} must be {bounds}, got {os.environ[var].strip()!r}")
    return value
