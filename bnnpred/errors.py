"""The one exception type a user sees: a one-line message naming the problem and the fix."""


class BnnpredError(Exception):
    """A user-facing error; the CLI prints ``error: <message>`` on one line and exits with status 2."""


def unknown_choice(kind: str, name: str, choices) -> BnnpredError:
    """Error for a name that is not one of ``choices``, listing the valid ones."""
    return BnnpredError(f"unknown {kind} '{name}'; valid choices: {', '.join(sorted(choices))}")
