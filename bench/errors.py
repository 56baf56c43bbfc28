"""The one error type the CLI turns into a clear message and a non-zero exit."""


class BenchError(Exception):
    """A user-facing failure: bad input, an engine that will not start, a dead server.

    The message must name the file, field, request or command at fault.
    """

    exit_code = 2
