"""``python -m gplace``: the Hydra CLI."""

from gplace.cli import main

if __name__ == "__main__":
    main()
