"""The translation structure: language choice, complete template tables, complete catalogs."""

from __future__ import annotations

import ast
import gettext
import re
import string
import sys
from pathlib import Path

import pytest

from gpt2viz import i18n
from gpt2viz.i18n import (
    LANGUAGES,
    MissingCatalog,
    _,
    language_from_env,
    ngettext,
    parse_language,
    placeholders,
    plural,
    say,
    sentences,
    set_language,
    table,
)
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


def fields(text: str) -> list[str]:
    """The replacement fields of a template or msgid with their conversion and format spec, sorted
    ('{value!r}' and '{value}' differ, a repeated field counts once): what a translation must keep."""
    return sorted({f"{name}!{conversion or ''}:{spec or ''}" for _, name, spec, conversion in string.Formatter().parse(text) if name is not None})


def test_every_template_exists_in_every_language_with_the_same_placeholders():
    english = table("en")
    assert english, "no templates"
    for code in LANGUAGES:
        other = table(code)
        assert set(other) == set(english), f"{code}: keys differ: {sorted(set(other) ^ set(english))[:10]}"
        for key, text in english.items():
            assert fields(other[key]) == fields(text), f"{code} {key}: placeholders differ"


def test_a_template_per_count_has_both_forms_and_sentences_join_per_language():
    """`plural` picks `key.one` or `key.other`: every such key has its pair. `sentences` joins whole
    sentences (a space in English, nothing in Chinese); the tables hold no joining templates."""
    english = table("en")
    for key in english:
        stem, _, form = key.rpartition(".")
        if form in ("one", "other"):
            assert {f"{stem}.one", f"{stem}.other"} <= english.keys(), key
        assert not key.endswith(".join"), f"{key}: join sentences with i18n.sentences"
    assert plural("stage.embed.decode", 1) == "stage.embed.decode.one"
    assert plural("stage.embed.decode", 0) == plural("stage.embed.decode", 2) == "stage.embed.decode.other"
    assert sentences("One.", "", "Two.") == "One. Two."
    set_language("zh")
    assert sentences("一。", "", "二。") == "一。二。"


def test_a_template_is_said_in_the_current_language():
    key = next(iter(table("en")))
    facts = {name: "7" for name in placeholders(table("en")[key])}
    english = say(key, **facts)
    set_language("zh")
    assert say(key, **facts) == table("zh")[key].format_map(facts) != english


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
                assert fields(compiled) == fields(plural) == fields(singular), f"{code}: {singular!r}"
            else:
                compiled = mo.gettext(msgid)
                assert compiled == message.string and compiled, f"{code}: .mo differs from .po for {msgid!r}"
                assert fields(compiled) == fields(msgid), f"{code}: placeholders of {msgid!r}"


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


def test_placeholders_are_compared_with_their_conversions():
    """'{value!r}' quotes the value, '{value}' does not: a translation that drops the !r changes
    what the user reads, so the check compares conversions and specs too."""
    assert fields("got {value!r}") != fields("得到 {value}")
    assert fields("{n} × {n}") == fields("{n} 个")  # a field written twice counts once


def test_a_language_without_its_compiled_catalog_is_an_error(tmp_path, monkeypatch, capsys):
    """No silent fallback to English: the translations of a language whose .mo is missing raise
    MissingCatalog, and the command line says so in one line before anything else."""
    from gpt2viz import cli
    from gpt2viz.i18n import catalog

    monkeypatch.setattr(catalog, "LOCALE_DIR", tmp_path)
    catalog.translations.cache_clear()
    try:
        with pytest.raises(MissingCatalog, match=r"no compiled catalog for 中文 \(zh\): .*gpt2viz\.mo is missing"):
            catalog.translations("zh")
        assert catalog.translations("en").gettext("Keys") == "Keys"  # English needs none
        assert cli.main(["--help"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("gpt2viz: error: no compiled catalog for 中文 (zh)") and err.count("\n") == 1
    finally:
        catalog.translations.cache_clear()


def test_the_documented_example_fills_the_template_s_own_placeholders():
    """docs/translating.md shows `say(key, name=...)`: the names it passes are the template's."""
    doc = (ROOT / "docs" / "translating.md").read_text("utf-8")
    examples = re.findall(r'say\("([\w.]+)", (.*)\)\n', doc)
    assert examples
    for key, args in examples:
        passed = {kw.arg for kw in ast.parse(f"f({args})").body[0].value.keywords}
        assert passed == placeholders(table("en")[key]), key


TRANSLATING = {"_", "ngettext", "say"}


def _translated(node: ast.AST) -> bool:
    """A call that returns translated text: _(...), ngettext(...), say(...), or one of them .format()ed."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Name):
        return node.func.id in TRANSLATING
    return isinstance(node.func, ast.Attribute) and node.func.attr == "format" and _translated(node.func.value)


def _added(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _added(node.left) + _added(node.right)
    return [node]


def test_no_sentence_is_glued_from_translated_pieces():
    """A translated text is never concatenated with words or marks ('■ ' + _("stopped"), ' · ' +
    _("..."), header += ...), nor with another translated text by a space: a sentence is one msgid
    or template, styled with tui/styled_text.py, and sentences are joined with i18n.sentences.
    (Line and paragraph breaks between whole texts are fine.)"""
    offenders = []
    for path in sorted((ROOT / "gpt2viz").rglob("*.py")):
        done: set[int] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if id(node) in done or not isinstance(node, (ast.BinOp, ast.AugAssign)) or not isinstance(node.op, ast.Add):
                continue
            pieces = _added(node) if isinstance(node, ast.BinOp) else [node.target, *_added(node.value)]
            done.update(id(n) for n in ast.walk(node))
            if not any(map(_translated, pieces)):
                continue
            literals = [p.value for p in pieces if isinstance(p, ast.Constant) and isinstance(p.value, str)]
            marks = any(text.strip(" \n") for text in literals)
            spaced = sum(map(_translated, pieces)) > 1 and any(" " in text for text in literals)
            if marks or spaced:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)[:80]}")
    assert offenders == []


# Chinese words chosen once (reviewed), and the variants they replaced.
TERMINOLOGY = {
    r"decode 步骤": "decode 步",
    r"完整前向(?!传播)": "完整前向传播",
    r"固定工作|分派": "固定开销 / 调度运算",
    r"被遮住|遮挡|遮住": "被掩码",
    r"所有头|全部注意力头": "所有注意力头",
    r"HuggingFace(?!TB/)": "Hugging Face",  # (a hub id such as HuggingFaceTB/SmolLM2-135M is a name)
    r"(?<![-/\w])checkpoint": "检查点",  # (a path such as ./my-checkpoint is no word)
    r"个块|块编号|一块之后|第 \S+ 块": "层 (block)",
    r"记录(?:里|文件)": "trace",
    r"\{params\} 参数": "{params} 个参数",
    r"成本实验(?!室)": "成本实验室",
}


def _chinese_texts() -> list[str]:
    po = catalog_tool.read(LOCALE_DIR / "zh" / "LC_MESSAGES" / f"{DOMAIN}.po")
    texts = [s for m in po if m.id for s in (m.string if isinstance(m.string, tuple) else (m.string,))]
    return texts + list(table("zh").values()) + [(ROOT / "README.zh-CN.md").read_text("utf-8")]


def test_chinese_says_each_term_one_way():
    texts = _chinese_texts()
    for variant, chosen in TERMINOLOGY.items():
        found = [text[:60] for text in texts if re.search(variant, text)]
        assert found == [], f"{variant!r}: say {chosen!r}"


def test_lines_narrower_than_a_character_still_end():
    """A width of 1 cannot hold a Chinese character and 0 holds nothing: each line then takes one
    character (the layout is cut, but it ends and never raises)."""
    from gpt2viz.i18n.layout import wrap_lines, wrap_wide

    assert wrap_lines("中文 ab", 1) == ["中", "文", "a", "b"]
    assert wrap_lines("ab cd", 0) == ["a", "b", "c", "d"]
    assert wrap_lines("", 1) == [""] and wrap_wide("中文", 0) == "中文"
    assert wrap_lines("中文，中文。", 6) == ["中文，", "中文。"]  # the comma stays with its line


def test_counts_are_written_one_way_in_the_app_and_in_the_trace_s_notices():
    from gpt2viz.trace.notices import notice, notice_text
    from gpt2viz.tui import formatting

    assert formatting.count is i18n.count
    said = notice_text(notice("prompt_cut", tokens=1300, n_ctx=1024))
    assert "1,300 tokens" in said and "last 1,024" in said


def test_a_notice_is_read_as_strictly_as_the_schema():
    """docs/trace.schema.json: exactly `code` and `params`, parameters strings, numbers or booleans."""
    from gpt2viz.trace.notices import is_notice

    assert is_notice({"code": "prompt_empty", "params": {"eos_id": 50256}})
    assert not is_notice({"code": "prompt_empty", "params": {"eos_id": 50256}, "text": "the prompt is empty"})
    assert not is_notice({"code": "prompt_empty", "params": {"eos_id": [50256]}})
    assert not is_notice({"code": "prompt_empty", "params": {"eos_id": None}})
    assert not is_notice({"code": "prompt_empty"}) and not is_notice({"code": "nope", "params": {}})


def test_a_change_of_probability_is_said_in_the_reader_s_language():
    """The what-if table's change column: percentage points, 'pp' in English, 百分点 in Chinese
    (a learner walk found 'pp' left in the Chinese table), the column as wide as its widest cell."""
    from rich.cells import cell_len

    from gpt2viz.tui.widgets.before_after import before_after_lines, change_text
    from zh_words import english_words

    changes = [{"text": " the", "before": 0.2, "after": 0.9, "rank": 1}, {"text": " a", "before": 0.99, "after": 0.0, "rank": 2}]
    assert change_text(0.5, 0.308) == "−19.2 pp"
    en = str(before_after_lines(["L0H1"], changes, "u", "U", 80))
    set_language("zh")
    assert change_text(0.5, 0.531) == "+3.1 百分点"
    zh = str(before_after_lines(["L0H1"], changes, "u", "U", 80))
    assert "−99.0 百分点" in zh and english_words(zh, {"the", "a"}) == []
    assert "−99.0 pp" in en
    for text in (en, zh):
        widths = {cell_len(line) for line in text.splitlines()[-3:]}
        assert len(widths) == 1, text  # header and rows end in one column
