"""What gpt2viz tells the user on purpose: errors, each with a one-line message, and notices.

The core says what is wrong in its own words ("temperature must be a number >= 0"); only the
command line knows its flags, and it names them when it reports an error (see `SettingError`).
Messages are translated where they are raised (`_()` with named placeholders), so an error is
read in the language that was current then; an error that a front end words again (a setting, a
file) keeps its msgid and parameters, as a notice does, and is translated where it is shown.
"""

from .i18n import _

__all__ = [
    "ArchitectureError", "ConfigError", "DownloadCancelled", "GenerationError", "Gpt2VizError", "HubUnreachable", "InputError",
    "ModelSourceError", "OutputError", "SettingError", "TokenIdError", "TraceError", "UsageError", "WeightsError", "notice",
]


class Gpt2VizError(Exception):
    """A problem the user can fix (bad file, bad option); the CLI prints it on one line."""

    exit_code = 1


class UsageError(Gpt2VizError):
    """A bad command-line option or argument (exit status 2)."""

    exit_code = 2


class SettingError(UsageError, ValueError):
    """A setting the core cannot use; a ValueError too, as Python reports a bad argument. `setting`
    names it the way the core does ("temperature", "top_k", "dtype"); `message` is the msgid of
    the whole sentence (marked with N_), `{setting}` where the setting's name goes, and `params`
    fill its other placeholders:
    `SettingError("top_k", N_("{setting} must be an integer >= 1, got {value!r}"), value=0)`.
    Each front end names the setting its own way with `naming`: the CLI by its flag, the
    settings form by its field; `str()` names it as the core does."""

    def __init__(self, setting: str, message: str, **params: object) -> None:
        self.setting = setting
        self.message = message
        self.params = params
        super().__init__(self.naming(setting))

    def naming(self, name: str) -> str:
        """The sentence in the current language, the setting called `name`."""
        return _(self.message).format(setting=name, **self.params)


class InputError(SettingError):
    """An argument the model cannot run on: token ids outside the vocabulary or not a
    `[batch, positions]` integer tensor, more positions than the context or the cache holds, an
    attention mask or a cache of the wrong shape. `setting` names the argument ("input_ids",
    "attention_mask", "cache"); a ValueError, as torch and numpy report such arguments."""


class TokenIdError(InputError, IndexError):
    """A token id outside the model's vocabulary (-1 too: it is refused, not read from the end):
    an InputError, and an IndexError, as an embedding lookup reports such an id."""


class ModelSourceError(Gpt2VizError):
    """A model directory, file or hub id that cannot be loaded."""


class HubUnreachable(ModelSourceError):
    """The Hugging Face hub did not answer in time."""


class DownloadCancelled(Gpt2VizError):
    """The user stopped a hub download (a cancel key, Ctrl-C). What was fetched stays in the cache,
    and the next run goes on from there; exit status 130, as for any interruption."""

    exit_code = 130

    def __init__(self) -> None:
        super().__init__(_("the download was cancelled; the next run goes on from where it stopped"))


class ConfigError(ModelSourceError):
    """A config.json this core cannot run: missing, malformed or unsupported settings. `problem`
    says what is wrong and `where` in which file, so a trace's reader can name its own field."""

    def __init__(self, problem: str, where: str = "config.json") -> None:
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class WeightsError(ModelSourceError):
    """A weights file that is missing, broken, or disagrees with the config."""


class ArchitectureError(Gpt2VizError):
    """A model that this part of gpt2viz does not cover (a LLaMA-family model that differs from
    transformers' LlamaForCausalLM in its weights' names, found by the check against it)."""


class GenerationError(Gpt2VizError):
    """Generation cannot go on: the model's next-token scores are not finite numbers (NaN or
    infinity), so no token can be chosen from them. Generation stops with this error rather than
    draw from, or take the argmax of, numbers that mean nothing."""


class OutputError(Gpt2VizError):
    """A file that cannot be written (the trace, a log). `message` is the msgid of the whole
    sentence (marked with N_), `{path}` where the file goes, `params` its other placeholders; the
    CLI names the flag that chose the file with `naming`: '--json out.json: is a directory'."""

    def __init__(self, message: str, path: object, **params: object) -> None:
        self.message = message
        self.path = str(path)
        self.params = params
        super().__init__(self.naming(self.path))

    def naming(self, where: str) -> str:
        """The sentence in the current language, the file called `where`."""
        return _(self.message).format(path=where, **self.params)


class TraceError(Gpt2VizError):
    """A trace file that cannot be read or is not a gpt2viz trace (`gpt2viz.trace.load`). `field`
    is the path of the part at fault inside the document (`events[27] (blocks.1.attn.hook_pattern)
    .heads[2]`, `model.config.n_layer`), '' for the file as a whole; the message names it too."""

    def __init__(self, message: str, field: str = "") -> None:
        self.field = field
        super().__init__(message)


def notice(code: str, **params: object) -> dict:
    """Something the user should know that is not an error (an empty prompt, a prompt cut to the
    context), as language-neutral data for the trace: `notice("prompt_empty", eos_id=50256)`.
    `gpt2viz.trace.notices.notice_text` says it in the reader's language. It lives here, beside
    the errors, because the core makes notices too and imports nothing above itself."""
    return {"code": code, "params": params}
