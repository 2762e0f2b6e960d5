"""Settings read from the environment: a bad value is a ConfigError naming the variable."""
from __future__ import annotations

import os
from typing import Optional

from .errors import ConfigError


def positive_number(var: str) -> Optional[float]:
    """The variable's value as a positive number, or None when it is unset or empty."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{var} must be a number, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{var} must be positive, got {raw!r}")
    return value


def whole_number(var: str, default: int, minimum: int = 0, maximum: Optional[int] = None) -> int:
    """The variable's value as a whole number within [minimum, maximum], or `default` when it is
    unset or empty."""
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{var} must be a whole number, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
        raise ConfigError(f"{var} must be {bounds}, got {raw!r}")
    return value
