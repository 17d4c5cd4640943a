"""The one place where errors become what the command line prints.

The user's errors (``InputError``, ``OutputError``, an unknown job) print
one line, ``Error: ...``, and exit with status 2; a job whose workers died
(``WorkerLost``) or that was cancelled (``JobCancelled``, from any client)
prints one line and exits with status 1; anything else is a bug and keeps
its traceback.
"""
from __future__ import annotations

import click

from ..errors import InputError, JobCancelled, WorkerLost

#: exit status for errors in what the user gave us (as click's usage errors)
EXIT_INPUT = 2


class UserError(click.ClickException):
    """A one-line ``Error: ...`` for the user, exit status 2."""

    exit_code = EXIT_INPUT


class Main(click.Group):
    """The ``emst-dask`` group: every command's errors are turned into
    ``Error:`` lines here."""

    def invoke(self, ctx):
        """Run the command: ``InputError`` and ``LookupError`` become a ``UserError``
        (exit status 2), ``WorkerLost`` and ``JobCancelled`` a
        ``click.ClickException`` (exit status 1).
        """
        try:
            return super().invoke(ctx)
        except (InputError, LookupError) as exc:
            raise UserError(_message(exc)) from None
        except (WorkerLost, JobCancelled) as exc:
            raise click.ClickException(str(exc)) from None


def _message(exc) -> str:
    msg = str(exc)
    if isinstance(exc, KeyError) and msg.startswith(("'", '"')):
        msg = msg[1:-1]
    return msg
