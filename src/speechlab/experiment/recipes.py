"""Finding and loading a reproduction's recipe: ``speechlab/recipes/<paper>/<scale>.yaml``.

Recipes ship inside the package (see :mod:`speechlab.recipes`), so they are found through
``importlib.resources`` from an editable checkout and from a plain ``pip install .`` alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TypeVar

from speechlab.config import load_config
from speechlab.errors import ConfigError

T = TypeVar("T")


def recipe_dir(paper: str) -> Path:
    """The folder of ``paper``'s recipes inside the installed package."""
    root = resources.files("speechlab.recipes") / paper
    return Path(str(root))


def scales_on_disk(paper: str) -> list[str]:
    """The scales ``paper`` has a recipe for."""
    d = recipe_dir(paper)
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def recipe_path(paper: str, scale: str) -> Path:
    """``<paper>/<scale>.yaml``; a ConfigError naming the scales there are if it is missing."""
    path = recipe_dir(paper) / f"{scale}.yaml"
    if not path.is_file():
        raise ConfigError(f"no recipe config {path}; scales of {paper}: "
                          f"{', '.join(scales_on_disk(paper)) or 'none'}")
    return path


def load_recipe(cls: type[T], paper: str, scale: str, config: Path | None = None,
                overrides: Sequence[str] = ()) -> T:
    """The config of ``paper`` at ``scale`` (or from the file ``config``), with ``key=value``
    overrides applied, as the recipe dataclass ``cls``."""
    if config is not None:
        if Path(config).is_dir():
            raise ConfigError(f"{config} is a directory; give --config a recipe YAML file")
        if not Path(config).is_file():
            raise ConfigError(f"recipe config {config} does not exist")
        path = Path(config)
    else:
        path = recipe_path(paper, scale)
    return load_config(cls, path, list(overrides))
