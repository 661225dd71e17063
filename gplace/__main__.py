"""``python -m gplace`` and the ``gplace`` command: the Hydra CLI (``python -m gplace bench`` for the bench)."""

import sys


def main() -> None:
    """Import the CLI, then run it (:func:`gplace.cli.main`): a Ctrl-C while ``gplace.cli`` imports (about a third of
    a second) ends in one line and status 130 as one later does, not a 20-line traceback; one while the ``gplace``
    package itself imports, before this runs, still prints Python's."""
    try:
        from gplace.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("gplace: interrupted; no run was in progress: nothing to resume\n")
        raise SystemExit(130) from None
    cli_main()


if __name__ == "__main__":
    main()
