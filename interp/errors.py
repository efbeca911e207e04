"""The one exception type users see for bad input, so the CLI can turn it into exit status 2."""


class InterpError(ValueError):
    """Bad input or an unusable run: the message says what was wrong and what is allowed."""
