"""The command line and the core in Chinese: --help, errors and notices in the chosen language,
argparse's own words included, while the trace itself stays language-neutral."""

from __future__ import annotations

import json
import re
from pathlib import Path

import trace_schema
import pytest
from rich.cells import cell_len

from fuzz_runner import shared_server

from gpt2viz.i18n import set_language
from gpt2viz.options import DEFAULT_PROMPT
from zh_words import english_words

DATA = Path(__file__).resolve().parent / "data"
FLAG = re.compile(r"--?[a-z][a-z0-9-]*")


def gpt2viz(*args: str, lang: str = "C.UTF-8") -> tuple[int, str, bytes]:
    """Runs the command line in a process of its own under the locale `lang`; (exit status,
    stderr, stdout)."""
    result = shared_server().run(  # forked from the shared server (tests/fuzz_runner.py)
        list(args), timeout=120, env={"LANG": lang, "LC_ALL": None, "LC_MESSAGES": None, "LANGUAGE": None}
    )
    stderr = result.stderr_bytes.decode("utf-8")
    assert "Traceback" not in stderr, stderr
    return result.code, stderr, result.stdout


@pytest.fixture
def cli(monkeypatch, capsys):
    """The command line's `main` in this process (faster: no new torch import), under a locale
    and a terminal width; returns (exit status, stderr, stdout)."""
    from gpt2viz.cli import main

    def run(*args: str, lang: str = "C.UTF-8", columns: int = 80) -> tuple[int, str, str]:
        monkeypatch.setenv("LANG", lang)
        monkeypatch.setenv("COLUMNS", str(columns))
        for var in ("LC_ALL", "LC_MESSAGES"):
            monkeypatch.delenv(var, raising=False)
        try:
            code = main(list(args))
        except SystemExit as exit:  # --help
            code = exit.code
        out = capsys.readouterr()
        return code, out.err, out.out

    return run


def untranslated(text: str, *values: str, words: set[str] = frozenset()) -> list[str]:
    """The English words of `text`, aside from `words`, the given values (paths, names), flags,
    and quoted code and values ('model.config', 'tiny', a value the user typed)."""
    for value in values:
        text = text.replace(value, " ")
    return english_words(re.sub(r"'[^']*'", " ", FLAG.sub(" ", text)), words)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_help_in_chinese_has_no_english_and_is_laid_out_in_cells(cli, columns):
    code, _, text = cli("--lang", "zh", "--help", columns=columns)
    assert code == 0 and text.startswith("用法：gpt2viz") and "位置参数" in text and "选项" in text
    # Values and names the help quotes: the default prompt (it may be wrapped), en/zh, LANG.
    assert untranslated(text, words={*DEFAULT_PROMPT.lower().split(), "lang", "en", "zh"}) == []
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= columns
    # Every option's help starts in one column, Chinese metavars (two cells a character) or not.
    starts = {cell_len(m.group(0)) for line in lines if (m := re.match(r"  \S.*?\s{2,}(?=\S)", line))}
    assert len(starts) == 1, starts
    # The usage's continuation lines line up under the first option, after the wide prefix.
    usage = lines[: lines.index("")]
    indents = {cell_len(line) - cell_len(line.lstrip()) for line in usage[1:]}
    assert len(usage) > 1 and indents == {cell_len("用法：gpt2viz ")}


def test_help_in_english_is_argparse_s_own_layout(cli):
    code, _, text = cli("--lang", "en", "--help", lang="zh_CN.UTF-8")
    assert code == 0 and text.startswith("usage: gpt2viz [-h] [--prompt TEXT]")
    assert "positional arguments:\n  prompt " in text and "show this help message and exit" in text


# Common mistakes, each with a value the message repeats unquoted (values quoted are skipped).
MISTAKES = [
    (["--generate", "x"], ""),
    (["--temperature", "warm"], ""),
    (["--no-cache=yes"], ""),
    (["--model"], ""),
    (["--no-such-option"], ""),
    (["--top-k", "0"], ""),
    (["--top-p", "1.5"], ""),
    (["--dtype", "int4"], ""),
    (["--device", "toaster"], ""),
    (["--sequences", "3"], ""),
    (["--batch-prompt", "", "--generate", "2"], ""),
    (["a", "--prompt", "b"], ""),
    (["--replay", "t.json", "--generate", "3"], ""),
    (["--prompt-file", "/no/such/file"], "/no/such/file"),
]


@pytest.mark.parametrize("args, values", MISTAKES)
def test_errors_in_chinese_are_one_line_with_no_english(cli, args, values):
    code, stderr, _ = cli("--lang", "zh", *args, "--json", "-")
    assert code == 2
    (line,) = stderr.splitlines()
    assert line.startswith("gpt2viz: 错误：")
    assert untranslated(line, values) == [], line


def test_the_locale_chooses_chinese_and_lang_en_overrides_it(cli):
    code, stderr, _ = gpt2viz("--generate", "x", "--json", "-", lang="zh_CN.UTF-8")
    assert code == 2 and stderr == "gpt2viz: 错误：参数 --generate：'x' 不是整数（见 gpt2viz --help）\n"
    _, stderr, _ = cli("--generate", "x", "--json", "-", "--lang", "en", lang="zh_CN.UTF-8")
    assert stderr == "gpt2viz: error: argument --generate: invalid int value: 'x' (see gpt2viz --help)\n"


def test_an_unknown_language_is_a_one_line_error_in_the_locale_s_language(cli):
    code, stderr, _ = cli("--lang", "fr", "--help")
    assert code == 2 and stderr == "gpt2viz: error: --lang 'fr': choose en or zh\n"
    code, stderr, _ = cli("--lang=fr", lang="zh_CN.UTF-8")
    assert code == 2 and stderr == "gpt2viz: 错误：--lang 'fr'：请选择 en 或 zh\n"


def test_argparse_is_left_as_it_was():
    """Our catalog speaks for argparse only while our parser runs."""
    import argparse
    import gettext

    from gpt2viz.cli import parse_args

    set_language("zh")
    parse_args(["--lang", "zh", "hello"])
    assert argparse._ is gettext.gettext and argparse.ngettext is gettext.ngettext


def test_argparse_texts_keep_their_placeholders():
    from gpt2viz.cli import ARGPARSE_TEXTS
    from gpt2viz.i18n import _

    set_language("zh")
    for msgid in ARGPARSE_TEXTS:
        assert re.findall(r"%\(?\w*\)?[sr]", _(msgid)) == re.findall(r"%\(?\w*\)?[sr]", msgid), msgid


def test_core_errors_are_said_in_the_language_and_only_the_cli_names_flags(cli):
    from gpt2viz.errors import SettingError
    from gpt2viz.generate import SamplingSettings

    set_language("zh")
    with pytest.raises(SettingError) as err:
        SamplingSettings(top_k=0)
    assert err.value.setting == "top_k" and str(err.value) == "top_k 必须是 >= 1 的整数，实际为 0"
    assert err.value.naming("top-k") == "top-k 必须是 >= 1 的整数，实际为 0"  # said when shown, by any name
    set_language("en")
    assert err.value.naming("--top-k") == "--top-k must be an integer >= 1, got 0"
    set_language("zh")
    code, stderr, _ = cli("--lang", "zh", "--top-k", "0", "--json", "-")
    assert code == 2 and stderr == "gpt2viz: 错误：--top-k 必须是 >= 1 的整数，实际为 0\n"


def test_a_bad_checkpoint_and_a_bad_trace_file_in_chinese(tmp_path):
    from gpt2viz import load_model
    from gpt2viz.errors import ModelSourceError
    from gpt2viz.trace import TraceFileError, load

    set_language("zh")
    with pytest.raises(ModelSourceError) as err:
        load_model(str(tmp_path / "nope"))
    assert str(err.value) == f"{tmp_path / 'nope'}：没有这个目录"
    doc = json.loads((DATA / "tiny-trace.json").read_text(encoding="utf-8"))
    doc["model"]["config"]["layer_norm_epsilon"] = 0
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TraceFileError) as err:
        load(path)
    assert untranslated(str(err.value), str(path)) == [], str(err.value)
    assert "layer_norm_epsilon 必须是一个很小的正数" in str(err.value)


def _without_timings(out: bytes) -> bytes:
    return re.sub(rb'"timings":\{[^}]*\}', b'"timings":{}', out)


def test_the_json_is_the_same_bytes_in_every_language_and_its_notices_are_said_in_each(tiny_dir):
    """An empty prompt and one longer than the context: both notices, said on stderr in the
    language of the run, recorded as codes."""
    runs = {}
    for lang in ("en", "zh"):
        for prompt in ("", " hello" * 300):
            code, stderr, out = gpt2viz(prompt, "--model", str(tiny_dir), "--json", "-", "--lang", lang)
            assert code == 0, stderr
            runs[lang, bool(prompt)] = stderr, out
    for long in (False, True):
        assert _without_timings(runs["en", long][1]) == _without_timings(runs["zh", long][1])
    for _, out in runs.values():
        trace_schema.validate(json.loads(out))
    n_ctx = json.loads((tiny_dir / "config.json").read_text())["n_positions"]
    doc = json.loads(runs["en", True][1])
    assert doc["schema"] == "gpt2viz.trace/2"
    assert doc["notices"] == [{"code": "prompt_cut", "params": {"tokens": 300, "n_ctx": n_ctx}}]
    assert json.loads(runs["en", False][1])["notices"] == [{"code": "prompt_empty", "params": {"eos_id": 50256}}]
    assert "gpt2viz: the prompt is empty, so the model starts from <|endoftext|> (id 50256)" in runs["en", False][0]
    assert "gpt2viz: wrote the trace of 1 token to stdout in " in runs["en", False][0]  # one token, not "tokens"
    assert "gpt2viz: 提示词为空，所以模型从 <|endoftext|>（id 50256）开始" in runs["zh", False][0]
    assert f"gpt2viz: 提示词有 300 个 token；上下文只放得下最后 {n_ctx} 个，只用这些" in runs["zh", True][0]
    assert f"gpt2viz: 已把 {n_ctx} 个 token 的 trace 写到标准输出，" in runs["zh", True][0]  # no space before a Chinese word


def test_every_notice_is_said_in_both_languages():
    from gpt2viz.errors import notice
    from gpt2viz.trace.notices import is_notice, notice_text

    notices = [
        notice("hub_unreachable"),
        notice("non_finite_weights", tensor="h.0.attn.c_proj.weight"),
        notice("prompt_empty", eos_id=50256),
        notice("prompt_cut", tokens=1300, n_ctx=1024),
        notice("generation_cut", n_ctx=1024, prompt_tokens=1020, made=4, asked=40),
    ]
    assert all(is_notice(n) for n in notices)
    english = [notice_text(n) for n in notices]
    assert english[3] == "the prompt has 1,300 tokens; only the last 1,024 fit in the context and are used"
    assert english[2].endswith("(id 50256)")  # an id, not a count
    set_language("zh")
    for n, en in zip(notices, english):
        zh = notice_text(n)
        assert untranslated(zh, "HuggingFace", "h.0.attn.c_proj.weight") == [], zh
        assert sorted(re.findall(r"\d+(?:,\d{3})*", zh)) == sorted(re.findall(r"\d+(?:,\d{3})*", en)), zh


OLD_NOTICE = "the prompt is empty, so the model starts from <|endoftext|> (id 50256)"


def _old_trace(tmp_path: Path) -> Path:
    """A trace as gpt2viz wrote it before notices had codes: schema 1, English sentences."""
    doc = json.loads((DATA / "tiny-trace.json").read_text(encoding="utf-8"))
    assert doc["schema"] == "gpt2viz.trace/1"
    doc["notices"] = [OLD_NOTICE]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_trace_of_the_old_format_is_still_read_with_its_sentences(tmp_path):
    from gpt2viz.trace import dumps, load
    from gpt2viz.trace.notices import notice_text

    path = _old_trace(tmp_path)
    trace_schema.validate(json.loads(path.read_text(encoding="utf-8")))
    trace = load(path)
    set_language("zh")
    assert [notice_text(n) for n in trace.notices] == [OLD_NOTICE]
    assert json.loads(dumps(trace))["schema"] == "gpt2viz.trace/1"  # kept as it was read


def test_notices_that_do_not_fit_the_format_are_refused_by_gpt2viz_and_the_schema(tmp_path):
    from gpt2viz.trace import TraceFileError, load

    doc = json.loads((DATA / "tiny-trace.json").read_text(encoding="utf-8"))
    cases = {
        "a sentence in a new trace": ("gpt2viz.trace/2", ["the prompt is empty"]),
        "an unknown code": ("gpt2viz.trace/2", [{"code": "no_such_notice", "params": {}}]),
        "a parameter missing": ("gpt2viz.trace/2", [{"code": "prompt_cut", "params": {"tokens": 3}}]),
        "a code in an old trace": ("gpt2viz.trace/1", [{"code": "prompt_empty", "params": {"eos_id": 1}}]),
    }
    for name, (version, notices) in cases.items():
        bad = {**doc, "schema": version, "notices": notices}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad), encoding="utf-8")
        with pytest.raises(TraceFileError, match=r"notices\[0\]"):
            load(path)
        with pytest.raises(trace_schema.SchemaError):
            trace_schema.validate(bad)



def test_an_unwritable_trace_is_one_sentence_naming_the_flag(tmp_path):
    """The writer says '{path}: is a directory'; the command line puts its flag where the path
    goes, in either language, without gluing words around the message."""
    from gpt2viz.errors import OutputError
    from gpt2viz.trace.jsonio import write_atomic

    with pytest.raises(OutputError) as err:
        write_atomic(tmp_path, "{}")
    assert str(err.value) == f"{tmp_path}: is a directory"
    set_language("zh")
    assert err.value.naming(f"--json {tmp_path}") == f"--json {tmp_path}：这是一个目录"


CORE_ERRORS = {"SettingError": "{setting}", "OutputError": "{path}"}


def test_errors_a_front_end_words_again_carry_a_whole_msgid():
    """Every SettingError and OutputError is raised with a msgid (N_) of the whole sentence, with
    the placeholder where the front end puts the setting's or the file's name: never with text
    translated and formatted already, which the CLI could only glue its flag to."""
    import ast

    root = Path(__file__).resolve().parents[1] / "gpt2viz"
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        # Module constants holding a msgid: UNSUPPORTED = N_("...")
        constants = {t.id: a.value for a in tree.body if isinstance(a, ast.Assign) for t in a.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            name = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
            if name not in CORE_ERRORS or not node.args or (name == "OutputError" and path.name == "cli.py"):
                continue
            message = node.args[1] if name == "SettingError" else node.args[0]
            message = constants.get(message.id, message) if isinstance(message, ast.Name) else message
            found.append(path.name)
            is_msgid = isinstance(message, ast.Call) and getattr(message.func, "id", None) == "N_"
            assert is_msgid and CORE_ERRORS[name] in message.args[0].value, f"{path.name}:{node.lineno}"
    assert {"generate.py", "batch.py", "precision.py", "placement.py", "jsonio.py"} <= set(found)


def test_chinese_help_headings_end_with_a_full_width_colon(capsys):
    import re

    from gpt2viz.cli import main

    try:
        main(["--lang", "zh", "--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    assert "位置参数：" in out and "选项：" in out
    assert not re.search(r"[^\x00-\x7f]:$", out, re.M)


def test_the_last_line_counts_the_generated_tokens_apart():
    """'wrote the trace of 2 tokens' after --generate 8 read as if the trace held 2 tokens in all."""
    from types import SimpleNamespace

    from gpt2viz.cli import wrote_line
    from gpt2viz.i18n import set_language

    tokens = [{}, {}]
    alone = SimpleNamespace(tokens=tokens, generation=None, batch=None)
    generated = SimpleNamespace(tokens=tokens, generation={"ids": [1] * 8}, batch=None)
    rows = SimpleNamespace(tokens=tokens, generation=None, batch={"rows": [{"ids": [1, 2, 3]}, {"ids": [4, 5, 6]}]})
    assert wrote_line(alone, "t.json", 0.42) == "wrote the trace of 2 tokens to t.json in 0.4 s"
    assert wrote_line(generated, "t.json", 0.42) == "wrote the trace to t.json in 0.4 s: the prompt's 2 tokens and 8 tokens generated"
    assert wrote_line(rows, "-", 1.0) == "wrote the trace to stdout in 1.0 s: the prompt's 2 tokens and 6 tokens generated"
    set_language("zh")
    try:
        assert wrote_line(generated, "t.json", 0.42) == "已把 trace 写入 t.json，用时 0.4 s：提示词的 2 个 token，以及生成的 8 个 token"
    finally:
        set_language("en")
