"""Recipes ship inside the package: found from an editable checkout and from a plain
(non-editable) ``pip install .`` into a fresh virtual environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from speechlab.errors import ConfigError
from speechlab.experiment.recipes import load_recipe, recipe_path, scales_on_disk

ROOT = Path(__file__).resolve().parents[2]


def test_every_scale_of_every_paper_has_a_recipe_that_loads():
    from speechlab.papers import PAPERS

    for name, factory in PAPERS.items():
        paper = factory()
        assert sorted(paper.scales) == scales_on_disk(name)
        for scale in paper.scales:
            load_recipe(paper.config_class, name, scale)


def test_missing_recipes_name_what_exists(tmp_path):
    with pytest.raises(ConfigError, match="scales of multisoftmax: ci, converged, demo, paper-shape, shipped, small"):
        recipe_path("multisoftmax", "huge")
    with pytest.raises(ConfigError, match="does not exist"):
        load_recipe(dict, "multisoftmax", "demo", config=tmp_path / "nope.yaml")


@pytest.mark.slow
def test_a_plain_install_finds_its_recipes(tmp_path):
    # Install a copy of the project (not the checkout: pip builds in the source tree) into a
    # fresh venv that sees this environment's dependencies through a path file, not its
    # editable speechlab (a path file does not run the .pth files of the directory it adds).
    src = tmp_path / "project"
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                           "--no-deps", "--no-build-isolation", "--no-index", str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    probe = ("import speechlab; from speechlab.experiment import load_run; "
             "from speechlab.papers import get_paper; "
             "run = load_run(get_paper('multisoftmax'), 'demo', 'unused'); "
             "print(speechlab.__file__); print(run.cfg.preset)")
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    where, preset = out.stdout.split()
    assert where.startswith(str(site)) and preset == "fast"  # what demo.yaml says
