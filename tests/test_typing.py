"""The documented examples type-check under `mypy --strict`, as a user's script would: the
package ships py.typed, `gpt2viz`'s lazily loaded names are seen by type checkers, `generate`'s
return depends on its prompt's type, and sequences of prompts are accepted covariantly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def example(path: Path, after: str | None = None) -> str:
    text = path.read_text("utf-8")
    if after is not None:
        text = text.split(after, 1)[1]
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.slow  # mypy reads torch's type information: 10-20 CPU-s without a cache
def test_the_documented_examples_pass_mypy_strict(tmp_path):
    pytest.importorskip("mypy")
    files = []
    for name, code in (("readme_example.py", example(ROOT / "README.md", "## As a library")),
                       ("api_example.py", example(ROOT / "docs" / "api.md")),
                       ("typed_use.py", TYPED_USE)):
        (tmp_path / name).write_text(code)
        files.append(str(tmp_path / name))
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), *files],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


# What a user's script does with the results, checked for the types the docs promise.
TYPED_USE = '''
from typing import assert_type

import gpt2viz
from gpt2viz import BatchResult
from gpt2viz.generate import GenerationResult

lm = gpt2viz.load_model("tiny")
assert_type(lm, gpt2viz.LanguageModel)
assert_type(lm.generate("Hello", 3), GenerationResult)
assert_type(lm.generate([1, 2, 3], 3), GenerationResult)
assert_type(lm.generate(["Hello", "Hi"], 3), list[GenerationResult])
prompts = ["a", "b"]
assert_type(lm.generate_prompts(prompts, 3), BatchResult)
assert_type(lm.generate_prompts(("a", [1, 2]), 3), BatchResult)
ids, mask = lm.pad(prompts)
'''
