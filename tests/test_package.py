"""`pip install gpt2viz` as a user gets it: the sdist and the wheel (`python -m build`), the wheel
holding the bundled model and the compiled translations, and running with no checkout around."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Building the sdist and the wheel (6 s) and installing one: the slow tier, which CI runs too.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return out


def test_the_wheel_holds_the_model_and_the_translations(built):
    names = set(zipfile.ZipFile(next(built.glob("*.whl"))).namelist())
    for needed in ("gpt2viz/assets/tiny/model.safetensors", "gpt2viz/assets/tiny/tokenizer.json",
                   "gpt2viz/assets/tiny/config.json", "gpt2viz/locale/zh/LC_MESSAGES/gpt2viz.mo",
                   "gpt2viz/i18n/zh/stages.py", "gpt2viz/tui/app.tcss", "gpt2viz/lessons/000.toml",
                   "gpt2viz/lessons/003.toml"):
        assert needed in names, needed
    sdist = set(tarfile.open(next(built.glob("*.tar.gz"))).getnames())
    assert any(n.endswith("gpt2viz/locale/zh/LC_MESSAGES/gpt2viz.po") for n in sdist)
    assert any(n.endswith("hatch_build.py") for n in sdist)  # so the sdist builds the catalogs too


def test_the_installed_wheel_runs_without_a_checkout(built, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(next(built.glob("*.whl")))], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"}
    where = subprocess.run([sys.executable, "-c", "import gpt2viz; print(gpt2viz.__file__)"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(target))  # the wheel's copy, not the checkout's
    out = tmp_path / "t.json"
    run = subprocess.run([sys.executable, "-m", "gpt2viz", "--model", "tiny", "--lang", "zh", "--json", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(out.read_text())["model"]["name"] == "tiny"
    assert not run.stderr.isascii()  # said in Chinese: the compiled catalog came with the wheel
