"""``python -m gplace``: the Hydra CLI (``python -m gplace bench`` for the bench)."""

from gplace.cli import main

if __name__ == "__main__":
    main()
