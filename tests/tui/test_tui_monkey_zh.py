"""The key monkey in Chinese: every screen, both models (monkey_cases.py)."""

from __future__ import annotations

import pytest

from monkey_cases import bundled, cases, monkey_case  # noqa: F401 (bundled: a fixture)


@pytest.mark.parametrize("target, model", cases("zh"))
def test_the_app_survives_the_monkey(target, model, bundled, ckpts, tmp_path, monkeypatch):  # noqa: F811
    monkey_case("zh", target, model, bundled, ckpts, tmp_path, monkeypatch)
