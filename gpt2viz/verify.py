"""Parity, checked on the user's own checkpoint: gpt2viz's model against transformers'.

The same safetensors run through `transformers.GPT2LMHeadModel` (a LLaMA-family model's through
`LlamaForCausalLM`; only when transformers is installed: gpt2viz never needs it to run), both in
float32 on the CPU: the largest logit difference over every position, how many positions agree
on their top token, and whether 20 greedy tokens come out the same. A `.gguf` file (`smollm2`)
is given to transformers as the weights gpt2viz read from it (transformers' own GGUF reader needs
the gguf and accelerate packages): that checks the forward pass, not the file's reading, which
tests/test_gguf.py checks against files written as llama.cpp writes them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from .errors import ArchitectureError, Gpt2VizError
from .i18n import _
from .model.config import GPT2Config

BOUND = 1e-4  # the largest |Δlogit| that counts as the same model
GREEDY_TOKENS = 20


class VerifyUnavailable(Gpt2VizError):
    """transformers is not installed, so there is nothing to compare with."""


@dataclass(frozen=True)
class Verification:
    transformers_version: str
    positions: int
    max_abs_diff: float  # over every position and every vocabulary entry
    top1_agree: int  # positions whose top token is the same
    ours: list[int]  # greedy continuation ids
    theirs: list[int]
    read_by_transformers: bool = True  # False: transformers ran on the weights gpt2viz read (a GGUF file)

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= BOUND and self.ours == self.theirs


def reference_model(lm, twin):
    """transformers' model of `lm`'s checkpoint, float32, CPU, eval mode: `(version, model, read)`,
    `read` False where transformers runs on the weights gpt2viz read (a GGUF file: `twin`, lm in
    float32, holds them)."""
    try:
        import transformers
    except ImportError:
        raise VerifyUnavailable(
            _("checking against transformers needs it installed: pip install transformers")
        ) from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # its "Loading weights" bar, on stderr
    path = str(lm.source.path)
    if isinstance(lm.config, GPT2Config):
        return transformers.__version__, transformers.GPT2LMHeadModel.from_pretrained(path, dtype=torch.float32).eval(), True
    if not lm.source.path.is_file():  # a checkpoint directory; a file is a GGUF one (a .gguf, smollm2)
        return transformers.__version__, transformers.LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), True
    return transformers.__version__, _llama_of(transformers, twin.model), False


def _llama_of(transformers, ours) -> torch.nn.Module:
    """transformers' LlamaForCausalLM with the weights of gpt2viz's `Llama` (the names are the same)."""
    c = ours.config
    config = transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.n_embd, intermediate_size=c.d_mlp, num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head, num_key_value_heads=c.n_kv_head, max_position_embeddings=c.n_ctx,
        rms_norm_eps=c.rms_norm_eps, rope_theta=c.rope_theta, tie_word_embeddings=c.tie_word_embeddings,
        bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id)
    model = transformers.LlamaForCausalLM(config)
    weights = {name: tensor.float() for name, tensor in ours.state_dict().items()}
    missing, _unexpected = model.load_state_dict(weights, strict=False)
    missing = [name for name in missing if not (c.tie_word_embeddings and name == "lm_head.weight")]
    if missing:  # a name that differs: say so rather than compare against a model half made
        raise ArchitectureError(_("transformers' LLaMA model has weights gpt2viz's does not: {names}").format(
            names=", ".join(missing[:3])))
    return model.eval()


@torch.inference_mode()
def verify(lm, ids: list[int], n_tokens: int = GREEDY_TOKENS) -> Verification:
    """Compares `lm`'s checkpoint, in float32, with transformers' model of it over `ids`."""
    ours_lm = lm.float32_twin()
    version, hf, read = reference_model(lm, ours_lm)
    ours_logits, _cache = ours_lm.model(torch.tensor([ids]).to(ours_lm.model.device))
    theirs_logits = hf(torch.tensor([ids])).logits
    ours_logits = ours_logits.cpu()
    diff = float((ours_logits - theirs_logits).abs().max())
    top1 = int((ours_logits.argmax(-1) == theirs_logits.argmax(-1)).sum())
    n = min(n_tokens, ours_lm.config.n_ctx - len(ids))
    # Both go on past an end-of-text token, so that each makes all n: ours told so, theirs a greedy
    # loop over the model's own cache (generate's min_new_tokens would forbid that token instead).
    ours = ours_lm.generate(ids, n, stop_at_eos=False).token_ids if n > 0 else []
    return Verification(version, len(ids), diff, top1, ours, _greedy(hf, ids, n), read)


def _greedy(hf, ids: list[int], n: int) -> list[int]:
    """transformers' model's `n` greedy tokens after `ids`, through its KV cache, none stopping it."""
    # transformers 5 calls the cache `cache`; 4.x `past_key_values`.
    keyword = "cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values"
    chosen: list[int] = []
    out = hf(torch.tensor([ids]), use_cache=True)
    while len(chosen) < n:
        chosen.append(int(out.logits[0, -1].argmax()))
        if len(chosen) < n:
            cache = getattr(out, "cache", None) or out.past_key_values
            out = hf(torch.tensor([chosen[-1:]]), use_cache=True, **{keyword: cache})
    return chosen
