"""The errors gpt2viz raises on purpose: each carries a one-line message meant for the user.

The core says what is wrong in its own words ("temperature must be a number >= 0"); only the
command line knows its flags, and it names them when it reports an error (see `SettingError`).
"""


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
        super().__init__(f"{setting} {problem}")


class ModelSourceError(Gpt2VizError):
    """A model directory, file or hub id that cannot be loaded."""


class HubUnreachable(ModelSourceError):
    """The Hugging Face hub did not answer in time."""


class ConfigError(ModelSourceError):
    """A config.json this core cannot run: missing, malformed or unsupported settings."""


class WeightsError(ModelSourceError):
    """A weights file that is missing, broken, or disagrees with the config."""


class OutputError(Gpt2VizError):
    """A file that cannot be written (the trace, a log)."""
