"""The one error raised for a bad experiment config."""

from __future__ import annotations

from collections.abc import Sequence

from determined.common.errors import InvalidArgument


class InvalidConfig(InvalidArgument):
    """A config that failed validation, carrying every problem found rather than the first.

    Each entry of ``errors`` reads ``"<path>: <problem>"`` so that the CLI can print them as
    they are and a user can fix the whole file in one pass.
    """

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors: list[str] = list(errors)
        super().__init__("\n".join(self.errors))

    def __reduce__(self) -> tuple[type[InvalidConfig], tuple[list[str]]]:
        # The default reduce would rebuild from the joined message and split it into characters.
        return (type(self), (self.errors,))
