"""The stages of the walk through one forward pass, and how keys move between them.

A stage is a place in the pipeline (`tokenize`, block 3's `pattern`, `lm_head`, ...). Stepping is
moving an index over `build_stages(n_layer)`; nothing is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..i18n import N_, _

# Sub-stages of one transformer block, in forward order.
BLOCK_KINDS = ("ln1", "qkv", "scores", "pattern", "heads", "attn_out", "ln2", "mlp", "mlp_out")
BEFORE_BLOCKS = ("model_files", "tokenize", "embed")
AFTER_BLOCKS = ("ln_final", "lm_head", "logit_lens", "next_token")
ATTENTION_KINDS = ("scores", "pattern", "heads")

# kind -> (title in the stage view, short label in the navigator), translated where shown
TITLES = {
    "model_files": (N_("Model files: config, weights, tokenizer"), N_("Model files")),
    "tokenize": (N_("Tokenize"), N_("Tokenize")),
    "embed": (N_("Embed: token + position"), N_("Embed")),
    "ln1": (N_("LayerNorm before attention (ln_1)"), "ln_1"),
    "qkv": (N_("Q, K, V projection and heads"), "Q K V"),
    "scores": (N_("Attention scores"), N_("Scores")),
    "pattern": (N_("Attention pattern"), N_("Pattern")),
    "heads": (N_("All heads of the layer"), N_("All heads")),
    "attn_out": (N_("Attention output + residual add"), N_("Attn out + add")),
    "ln2": (N_("LayerNorm before the MLP (ln_2)"), "ln_2"),
    "mlp": (N_("MLP: c_fc → GELU → c_proj"), "MLP"),
    "mlp_out": (N_("MLP output + residual add"), N_("MLP out + add")),
    "ln_final": (N_("Final LayerNorm (ln_f)"), N_("Final ln_f")),
    "lm_head": (N_("LM head: logits"), "LM head"),
    "logit_lens": (N_("Logit lens"), N_("Logit lens")),
    "next_token": (N_("Next token"), N_("Next token")),
}
# A LLaMA-family model's stages where they differ from GPT-2's (the same kinds, in the same order:
# its norms are RMSNorms, positions are rotated into q and k, the MLP is SwiGLU).
LLAMA_TITLES = {
    "embed": (N_("Embed: token only (positions are rotated in later)"), N_("Embed")),
    "ln1": (N_("RMSNorm before attention (input_layernorm)"), "norm_1"),
    "qkv": (N_("Q, K, V, rotary positions, grouped heads"), "Q K V"),
    "ln2": (N_("RMSNorm before the MLP (post_attention_layernorm)"), "norm_2"),
    "mlp": (N_("MLP: SwiGLU, silu(gate) × up → down"), "MLP"),
    "ln_final": (N_("Final RMSNorm (norm)"), N_("Final norm")),
}
FAMILY_TITLES = {"gpt2": TITLES, "llama": {**TITLES, **LLAMA_TITLES}}


@dataclass(frozen=True)
class Stage:
    """One stop of the step-through: a kind of step, and the block it belongs to (if any)."""

    kind: str
    layer: int | None = None
    family: str = field(default="gpt2", compare=False)  # the model's architecture: which titles

    @property
    def _titles(self) -> tuple[str, str]:
        return FAMILY_TITLES[self.family][self.kind]

    @property
    def key(self) -> str:
        """A stable name, e.g. 'tokenize' or 'blocks.3.pattern'."""
        return self.kind if self.layer is None else f"blocks.{self.layer}.{self.kind}"

    @property
    def label(self) -> str:
        """The short name shown in the navigator, in the current language."""
        return _(self._titles[1])

    @property
    def english_title(self) -> str:
        """The full title in English whatever the language (the palette finds stages by it too)."""
        title = self._titles[0]
        return title if self.layer is None else f"Block {self.layer} · {title}"

    @property
    def title(self) -> str:
        """The full title, with the block for block stages, in the current language."""
        title = _(self._titles[0])
        return title if self.layer is None else _("Block {layer} · {title}").format(layer=self.layer, title=title)

    @property
    def in_block(self) -> bool:
        return self.layer is not None

    @property
    def is_attention(self) -> bool:
        """Whether a head can be chosen at this stage."""
        return self.kind in ATTENTION_KINDS


def build_stages(n_layer: int, family: str = "gpt2") -> list[Stage]:
    """Every stage of an `n_layer` model of `family` ('gpt2' or 'llama'), in forward order."""
    stages = [Stage(kind, family=family) for kind in BEFORE_BLOCKS]
    for layer in range(n_layer):
        stages.extend(Stage(kind, layer, family) for kind in BLOCK_KINDS)
    stages.extend(Stage(kind, family=family) for kind in AFTER_BLOCKS)
    return stages


def index_of(stages: list[Stage], kind: str, layer: int | None = None) -> int:
    """The index of a stage in `stages`; ValueError if there is none."""
    return stages.index(Stage(kind, layer))


def index_by_key(stages: list[Stage], key: str) -> int | None:
    """The index of the stage whose key is `key`, if any."""
    for i, stage in enumerate(stages):
        if stage.key == key:
            return i
    return None


def block_jump(stages: list[Stage], index: int, delta: int, n_layer: int) -> int:
    """The same sub-stage `delta` blocks away; from outside the blocks, the nearest block's ln_1.

    Returns `index` itself when there is nowhere to go.
    """
    stage = stages[index]
    if stage.layer is None:
        before = stage.kind in BEFORE_BLOCKS
        if n_layer == 0 or (before and delta < 0) or (not before and delta > 0):
            return index
        return index_of(stages, BLOCK_KINDS[0], 0 if before else n_layer - 1)
    layer = stage.layer + delta
    if not 0 <= layer < n_layer:
        return index
    return index_of(stages, stage.kind, layer)
