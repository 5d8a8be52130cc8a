"""The key monkey in Chinese: every screen, both models (monkey_cases.py)."""

from __future__ import annotations

import pytest

from monkey_cases import bundled, cases, llama_small, monkey_case  # noqa: F401 (fixtures)


@pytest.mark.parametrize("target, model", cases("zh"))
def test_the_app_survives_the_monkey(target, model, bundled, ckpts, tmp_path, monkeypatch, request):  # noqa: F811
    monkey_case("zh", target, model, bundled, ckpts, tmp_path, monkeypatch, request)
