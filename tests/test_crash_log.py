"""Unexpected errors: their traceback goes to a log file, which is kept small."""

from __future__ import annotations

from gpt2viz import crash_log


def _raised() -> Exception:
    try:
        raise KeyError("x")
    except KeyError as err:
        return err


def test_the_traceback_lands_in_the_state_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    line = crash_log.unexpected_error_line(_raised())
    log = tmp_path / "gpt2viz" / "errors.log"
    assert line == f"unexpected error, a bug in gpt2viz: KeyError: 'x' (traceback in {log})"
    assert "in _raised" in log.read_text(encoding="utf-8")


def test_an_unwritable_state_directory_falls_back_to_the_temp_directory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))  # a file: no directory can be made in it
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(crash_log.tempfile, "tempdir", None)
    where = crash_log.log_traceback(_raised())
    assert where is not None and where.parent == tmp_path and "KeyError" in where.read_text(encoding="utf-8")


def test_a_full_log_starts_over_keeping_one_old_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(crash_log, "MAX_LOG_BYTES", 100)
    for _ in range(3):
        crash_log.log_traceback(_raised())
    log = tmp_path / "gpt2viz" / "errors.log"
    assert log.stat().st_size < 2000 and log.with_name("errors.log.1").is_file()
