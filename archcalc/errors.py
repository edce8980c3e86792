"""InputError: bad input, reported as one line and exit status 2."""

from __future__ import annotations


class InputError(Exception):
    """What was wrong, where: `source: field: message`."""

    def __init__(self, source: str | None, field: str | None, message: str):
        self.source, self.field, self.message = source, field, message
        super().__init__(str(self))

    def __str__(self) -> str:
        return ": ".join(p for p in (self.source, self.field, self.message) if p)
