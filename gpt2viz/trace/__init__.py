"""Traces: the plain-data record of a run, shared by the TUI, `--json` and `--replay`."""

from .jsonio import TraceFileError, dump, dumps, load, validate
from .document import SCHEMA, Trace
from .recorder import Recorder, record_forward, record_generation, trace_decode_step, trace_prompt

__all__ = [
    "SCHEMA",
    "Recorder",
    "Trace",
    "TraceFileError",
    "dump",
    "dumps",
    "load",
    "record_forward",
    "record_generation",
    "trace_decode_step",
    "trace_prompt",
    "validate",
]
