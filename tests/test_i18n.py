"""The translation structure: language choice, complete template tables, complete catalogs."""

from __future__ import annotations

import gettext
import re
import sys
from pathlib import Path

import pytest

from gpt2viz import i18n
from gpt2viz.i18n import LANGUAGES, _, language_from_env, ngettext, parse_language, placeholders, say, set_language, table
from gpt2viz.i18n.catalog import DOMAIN, LOCALE_DIR

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import catalog as catalog_tool  # noqa: E402  (tools/catalog.py)


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "zh_TW.UTF-8"}, "zh"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": "de_DE.UTF-8"}, "en"),
        ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),  # LC_ALL wins
        ({"LC_MESSAGES": "zh_CN", "LANG": "en_US"}, "zh"),  # then LC_MESSAGES
        ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),  # the first one set decides
        ({"LANGUAGE": "zh_CN", "LANG": "en_US.UTF-8"}, "en"),  # a fallback list, not a choice
    ],
)
def test_the_locale_chooses_the_language(environ, expected):
    assert language_from_env(environ) == expected


def test_language_names_are_parsed_and_unknown_ones_refused():
    assert parse_language("zh-Hans") == "zh" and parse_language("EN") == "en"
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        parse_language("fr")


def test_every_template_exists_in_every_language_with_the_same_placeholders():
    english = table("en")
    assert english, "no templates"
    for code in LANGUAGES:
        other = table(code)
        assert set(other) == set(english), f"{code}: keys differ: {sorted(set(other) ^ set(english))[:10]}"
        for key, text in english.items():
            assert placeholders(other[key]) == placeholders(text), f"{code} {key}: placeholders differ"


def test_a_template_is_said_in_the_current_language():
    key = next(iter(table("en")))
    facts = {name: "7" for name in placeholders(table("en")[key])}
    english = say(key, **facts)
    set_language("zh")
    assert say(key, **facts) == table("zh")[key].format_map(facts) != english


def _msg_placeholders(text: str) -> set[str]:
    return set(re.findall(r"\{(\w+)\}", text))


def test_every_msgid_of_the_code_is_translated_with_the_same_placeholders():
    """Extracted from the code as Babel does, compared with each catalog as compiled (the .mo the
    app loads): nothing untranslated, nothing fuzzy, no placeholder lost or invented."""
    template = catalog_tool.extract()
    msgids = [m.id for m in template if m.id]
    assert len(msgids) > 50
    for code in LANGUAGES:
        if code == "en":
            continue
        po = catalog_tool.read(LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po")
        mo = gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[code])
        for msgid in msgids:
            message = po.get(msgid)
            assert message is not None and not message.fuzzy, f"{code}: not in the catalog: {msgid!r}"
            if isinstance(msgid, tuple):
                singular, plural = msgid
                compiled = mo.ngettext(singular, plural, 2)
                assert compiled and compiled != plural, f"{code}: untranslated plural {singular!r}"
                assert _msg_placeholders(compiled) == _msg_placeholders(plural), f"{code}: {singular!r}"
            else:
                compiled = mo.gettext(msgid)
                assert compiled == message.string and compiled, f"{code}: .mo differs from .po for {msgid!r}"
                assert _msg_placeholders(compiled) == _msg_placeholders(msgid), f"{code}: placeholders of {msgid!r}"


def test_english_plurals_come_from_the_catalog_rules():
    assert ngettext("{n} token", "{n} tokens", 1).format(n=1) == "1 token"
    assert ngettext("{n} token", "{n} tokens", 2).format(n=2) == "2 tokens"


def test_lookups_follow_the_language_switch_at_call_time():
    assert _("Keys") == "Keys"
    set_language("zh")
    assert i18n.language() == "zh" and _("Keys") != "Keys"
    set_language("en")
    assert _("Keys") == "Keys"


def test_no_function_shadows_the_gettext_underscore():
    """`logits, _ = ...` or `for _ in ...` in a function makes `_` local to all of it, so a `_("...")`
    in that function fails at run time (UnboundLocalError), only on the path that reaches it."""
    import ast

    offenders = []
    for path in sorted((ROOT / "gpt2viz").rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            stored = any(isinstance(n, ast.Name) and n.id == "_" and isinstance(n.ctx, ast.Store) for n in ast.walk(func))
            called = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_" for n in ast.walk(func))
            if stored and called:
                offenders.append(f"{path.relative_to(ROOT)}:{func.lineno} {func.name}")
    assert offenders == []
