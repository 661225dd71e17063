"""The README's architecture table names every package and module of ``gplace`` (issue 10: the table matches
the folders)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_names_every_package_and_top_level_module() -> None:
    readme = (ROOT / "README.md").read_text()
    parts = [p for p in (ROOT / "gplace").iterdir() if not p.name.startswith(("_", "."))]
    names = [f"gplace/{p.name}/" if p.is_dir() else f"gplace/{p.name}" for p in parts
             if p.is_dir() or p.suffix == ".py"]
    missing = sorted(n for n in names if f"`{n}`" not in readme and f"`{n.rstrip('/')}`" not in readme)
    assert not missing, f"README.md's architecture table does not name {missing}"
