"""What gpt2viz tells the user on purpose: errors, each with a one-line message, and notices.

The core says what is wrong in its own words ("temperature must be a number >= 0"); only the
command line knows its flags, and it names them when it reports an error (see `SettingError`).
Messages are translated where they are raised (`_()` with named placeholders), so an error is
read in the language that was current then.
"""

from .i18n import _


class Gpt2VizError(Exception):
    """A problem the user can fix (bad file, bad option); the CLI prints it on one line."""

    exit_code = 1


class UsageError(Gpt2VizError):
    """A bad command-line option or argument (exit status 2)."""

    exit_code = 2


class SettingError(UsageError):
    """A setting the core cannot use. `setting` names it the way the core does ("temperature",
    "top_k", "dtype"), and `problem` says what is wrong with its value, so each front end can
    name the setting its own way: the CLI by its flag, the settings form by its field."""

    def __init__(self, setting: str, problem: str) -> None:
        self.setting = setting
        self.problem = problem
        super().__init__(setting_message(setting, problem))


def setting_message(name: str, problem: str) -> str:
    """A setting's problem as one sentence: `name` (the core's name, a flag, a field) first."""
    return _("{setting} {problem}").format(setting=name, problem=problem)


class ModelSourceError(Gpt2VizError):
    """A model directory, file or hub id that cannot be loaded."""


class HubUnreachable(ModelSourceError):
    """The Hugging Face hub did not answer in time."""


class ConfigError(ModelSourceError):
    """A config.json this core cannot run: missing, malformed or unsupported settings. `problem`
    says what is wrong and `where` in which file, so a trace's reader can name its own field."""

    def __init__(self, problem: str, where: str = "config.json") -> None:
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class WeightsError(ModelSourceError):
    """A weights file that is missing, broken, or disagrees with the config."""


class OutputError(Gpt2VizError):
    """A file that cannot be written (the trace, a log)."""


def notice(code: str, **params: object) -> dict:
    """Something the user should know that is not an error (an empty prompt, a prompt cut to the
    context), as language-neutral data for the trace: `notice("prompt_empty", eos_id=50256)`.
    `gpt2viz.trace.notices.notice_text` says it in the reader's language. It lives here, beside
    the errors, because the core makes notices too and imports nothing above itself."""
    return {"code": code, "params": params}
