"""The one exception type a user sees: a one-line message naming the problem and the fix."""


class BnnpredError(Exception):
    """A user-facing error; the CLI prints ``error: <message>`` on one line and exits with ``exit_status`` (2: bad
    input or a broken result; 1: an environmental fault or a crash inside a job)."""

    def __init__(self, message: str, exit_status: int = 2):
        super().__init__(message)
        self.exit_status = exit_status


class MissingDataError(BnnpredError):
    """A data set's files (or the data root) are not there; the message names the fetch command."""


def unknown_choice(kind: str, name: str, choices) -> BnnpredError:
    """Error for a name that is not one of ``choices``, listing the valid ones."""
    return BnnpredError(f"unknown {kind} '{name}'; valid choices: {', '.join(sorted(choices))}")
