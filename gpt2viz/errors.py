"""The errors gpt2viz raises on purpose: each carries a one-line message meant for the user."""


class Gpt2VizError(Exception):
    """A problem the user can fix (bad file, bad option); the CLI prints it on one line."""

    exit_code = 1


class UsageError(Gpt2VizError):
    """A bad command-line option or argument (exit status 2)."""

    exit_code = 2


class ModelSourceError(Gpt2VizError):
    """A model directory, file or hub id that cannot be loaded."""


class ConfigError(ModelSourceError):
    """A config.json this core cannot run: missing, malformed or unsupported settings."""


class WeightsError(ModelSourceError):
    """A weights file that is missing, broken, or disagrees with the config."""
