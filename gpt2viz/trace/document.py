"""The Trace: everything one run showed, as plain data (the JSON document's shape)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.config import LIMITS
from .events import is_deferred, resolve, rounded

SCHEMA = "gpt2viz.trace/2"
# The format before notices had codes: the same but for `notices`, which held English sentences.
# Still read (a replay shows those sentences as they are); a trace read in it keeps it.
SCHEMA_V1 = "gpt2viz.trace/1"

# What a trace may hold at most (docs/trace.md, "Limits"); a file beyond them is refused when it is
# read. Chosen from real traces: GPT-2 xl (48 blocks, 25 heads, n_embd 1600) over 128 positions,
# the longest prompt whose attention maps are kept whole, is a 296 MB file (with 1,000 candidates
# per position and step, at most ~360 MB); GPT-2's vocabulary is 50,257 tokens and its context
# 1,024 positions.
MAX_FILE_BYTES = 384 * 1024**2
# Lists and objects ('[' and '{'), and strings ('"' counted, two a string), counted in the file
# before it is parsed: an empty object costs 24 times its 3 bytes once parsed, a short string 12
# times, a float at most 8. Real traces hold at most ~1 million lists and objects and ~4 million
# strings.
MAX_CONTAINERS = 4_000_000
MAX_QUOTES = 16_000_000
CONFIG_LIMITS = {key: LIMITS[key] for key in ("n_layer", "n_head", "n_embd", "n_ctx", "vocab_size")}  # config.json's
MAX_TOPK = 1000  # entries of a top-k list (--topk-logits), of top neurons and of the tokens they promote
# Top-k entries a generation's steps record in all (steps × top-k; each step keeps the raw and the
# sampled distribution's top k): 1,024 steps of 1,000 candidates write a ~56 MB trace with a peak of
# ~1 GB; any run up to GPT-2's 1,024-token context with the default top-k fits many times over.
MAX_GENERATION_TOPK = 2**20
MAX_GRID = 256  # rows or columns of a long prompt's averaged attention map
# Rows of a batch, and batch sizes the cost lab tried: gpt2viz.batch.MAX_BATCH.
MAX_NOTICES = 1000
MAX_INTERVENTIONS = 1000
# Every number's magnitude: a count, a time, a norm, a logit. Far beyond any real run, and small
# enough that sums and products of such numbers stay finite and print in a few characters.
MAX_MAGNITUDE = 1e15


@dataclass(eq=False)  # a trace is one run: compared by identity, and usable as a dictionary key
class Trace:
    """A recorded forward pass (and generation, if any) over one prompt."""

    model: dict
    prompt: str
    tokens: list[dict]
    events: list[dict]
    generation: dict | None = None
    # Language-neutral notices (gpt2viz.trace.notices); English sentences in a SCHEMA_V1 trace.
    notices: list[dict | str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    quality: dict | None = None  # a non-float32 run against float32 on the same checkpoint
    batch: dict | None = None  # several continuations decoded together (gpt2viz.batch)
    cost_lab: dict | None = None  # the cost lab's measurements on this model (gpt2viz.cost_lab)
    # Parts of the model switched off for every pass of this run (gpt2viz.interventions specs,
    # "L3H5"): [] for the model's own computation.
    interventions: list[str] = field(default_factory=list)
    # A decode step's pass: the positions already in the KV cache (same fields as `tokens`), which
    # the recorded pass did not compute; `tokens` holds the new position(s). [] for a full pass.
    context: list[dict] = field(default_factory=list)
    # What the checkpoint's files held, as the loader saw them (gpt2viz.model.files.ModelFiles);
    # None in a trace recorded before gpt2viz kept it.
    model_files: dict | None = None
    schema: str = SCHEMA

    def __post_init__(self) -> None:
        self._by_stage = {e["stage"]: e for e in self.events}

    def event(self, stage: str) -> dict | None:
        """The event recorded at hook `stage` (e.g. 'blocks.0.attn.hook_pattern'), if any."""
        event = self._by_stage.get(stage)
        return None if event is None else resolve(event)

    def resolve_all(self) -> "Trace":
        """Works out every deferred part now, in the calling thread: a worker calls this before it
        hands the trace to a screen, so that reading it later only looks data up."""
        for event in self.events:
            resolve(event)
        return self

    @property
    def resolved(self) -> bool:
        """Whether every part is plain data (nothing left to work out)."""
        return not any(is_deferred(event) for event in self.events)

    @property
    def n_layer(self) -> int:
        return int(self.model["config"]["n_layer"])

    @property
    def architecture(self) -> str:
        """'gpt2', or 'llama' for a LLaMA-family model (traces written before 2026-12-05: gpt2)."""
        return str(self.model.get("architecture", "gpt2"))

    @property
    def token_ids(self) -> list[int]:
        """The ids of the positions this pass computed."""
        return [t["id"] for t in self.tokens]

    @property
    def past(self) -> int:
        """Positions already in the KV cache before this pass (0: a full pass from the start)."""
        return len(self.context)

    @property
    def all_token_ids(self) -> list[int]:
        """Every position's id: the cached ones, then the computed ones."""
        return [t["id"] for t in self.context + self.tokens]

    @property
    def ablations(self) -> tuple:
        """`interventions` parsed (gpt2viz.interventions.Ablation): the parts this pass switched off,
        which a screen running the model again keeps off and a stage's sentences speak of."""
        from ..interventions import parse_ablations  # the model's side: not loaded to read a trace

        return tuple(parse_ablations(self.interventions))

    def to_dict(self) -> dict:
        self.resolve_all()
        return {
            "schema": self.schema,
            "model": self.model,
            "prompt": self.prompt,
            "tokens": self.tokens,
            "notices": self.notices,
            "timings": self.timings,
            "quality": self.quality,
            "batch": self.batch,
            "cost_lab": rounded(self.cost_lab),  # measured outside the recorder: rounded here
            "interventions": self.interventions,
            "context": self.context,
            "model_files": self.model_files,
            "events": self.events,
            "generation": self.generation,
        }

    @classmethod
    def from_dict(cls, doc: dict) -> "Trace":
        return cls(
            model=doc["model"],
            prompt=doc["prompt"],
            tokens=doc["tokens"],
            events=doc["events"],
            generation=doc.get("generation"),
            notices=doc.get("notices", []),
            timings=doc.get("timings", {}),
            quality=doc.get("quality"),
            batch=doc.get("batch"),
            interventions=doc.get("interventions") or [],
            cost_lab=doc.get("cost_lab"),
            context=doc.get("context") or [],
            model_files=doc.get("model_files"),
            schema=doc["schema"],
        )
