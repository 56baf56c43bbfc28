"""The one error type the CLI turns into a clear message and a non-zero exit, and the
exit codes of every command (README "Exit codes")."""

#: Success; a check failed (a leak, a failed request, a regression); bad input or an
#: environment that cannot run (a BenchError); the run stopped early (server gone,
#: deadline), its partial results written. A signal exits with 128 + its number.
EXIT_OK, EXIT_FAILED, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2, 3


class BenchError(Exception):
    """A user-facing failure: bad input, an engine that will not start, a dead server.

    The message must name the file, field, request or command at fault.
    """

    exit_code = EXIT_ERROR
