"""TransformerLens's token helpers and hook lifetime on a LanguageModel (`to_tokens`,
`to_str_tokens`, `to_string`, `to_single_token`, `add_hook` / `reset_hooks`), and the inputs the
library refuses: each in one line, naming what is wrong, where they used to be run on quietly (a
3-D tensor flattened into one text) or failed in a library's own words."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.errors import InputError, TokenIdError


@pytest.fixture(scope="module")
def lm(ckpts):
    return ckpts.lm("tiny")


def test_tokens_as_transformer_lens_gives_them(lm):
    eos = lm.eos_id
    ids = lm.encode_prompt("The capital")
    assert lm.to_tokens("The capital").tolist() == [[eos, *ids]]  # <|endoftext|> first, as TL's default
    assert lm.to_tokens("The capital", prepend_bos=False).tolist() == [ids]
    two = lm.to_tokens(["The capital", "Hi"])
    assert two.shape == (2, len(ids) + 1) and two[1].tolist()[:2] == [eos, *lm.encode_prompt("Hi")]
    left = lm.to_tokens(["The capital", "Hi"], padding_side="left")  # TL's keyword
    assert left[0].tolist() == two[0].tolist() and left[1].tolist()[-2:] == [eos, *lm.encode_prompt("Hi")]
    assert left[1, 0] == lm.pad_id
    assert lm.to_str_tokens("The capital") == ["<|endoftext|>", "The", " capital"]
    assert lm.to_str_tokens(torch.tensor(ids)) == ["The", " capital"]
    assert lm.to_string(torch.tensor(ids)) == "The capital"
    assert lm.to_string(torch.tensor([ids, ids])) == ["The capital", "The capital"]
    # Several texts, each its own list (unpadded), and one id as a 0-d tensor, as TL's take them.
    assert lm.to_str_tokens(["The capital", "Hi"]) == [["<|endoftext|>", "The", " capital"], ["<|endoftext|>", "Hi"]]
    assert lm.to_string(torch.tensor(ids[0])) == "The"
    assert lm.to_single_token(" Paris") == lm.encode_prompt(" Paris")[0]
    with pytest.raises(InputError, match=r"text must be a text of one token, got ' Parisian dog' \(3 tokens\)"):
        lm.to_single_token(" Parisian dog")


def test_a_text_past_the_context_is_cut_to_it_as_transformer_lens_cuts_it(lm):
    # TL's tokenizer cuts at n_ctx (truncate=True): `lm("Hi " * 300)` ran there and failed here.
    n_ctx, long = lm.config.n_ctx, "Hi " * 300
    whole = lm.encode_prompt(long, prepend_bos=True)
    assert len(whole) > n_ctx
    assert lm.to_tokens(long).tolist() == [whole[:n_ctx]]
    assert lm.to_tokens(long, truncate=False).shape == (1, len(whole))
    left = lm.to_tokens([long, "Hi"], padding_side="left")
    assert left.shape == (2, n_ctx) and left[0].tolist() == whole[:n_ctx] and left[1, -1] == lm.encode_prompt("Hi")[0]
    assert lm(long).shape == (1, n_ctx, lm.config.vocab_size)
    assert torch.equal(lm(long), lm(lm.to_tokens(long)))
    assert lm.to_tokens("Hi", move_to_device=False).device.type == "cpu"


def test_reset_hooks_removes_what_add_hook_added(lm):
    seen = []
    kept = lm.hooks.add("blocks.0.hook_resid_pre", lambda name, value: seen.append("add"))
    lm.add_hook("blocks.0.hook_resid_pre", lambda activation, hook: seen.append(hook.name))
    lm.add_hook(lambda name: name.endswith("ln_final.hook_scale"), lambda activation, hook: seen.append(hook.name))
    lm.model(torch.tensor([[1, 2]]))
    assert seen == ["add", "blocks.0.hook_resid_pre", "ln_final.hook_scale"]
    lm.reset_hooks()
    seen.clear()
    lm.model(torch.tensor([[1, 2]]))
    assert seen == ["add"]  # hooks.add's own stays until hooks.remove
    lm.hooks.remove(kept)
    assert not lm.hooks.active


@pytest.mark.parametrize("call, error, message", [
    (lambda lm: lm.run_with_cache(torch.arange(6).reshape(1, 2, 3)), InputError,
     r"prompt: a tensor of ids must be \[positions\] or \[1, positions\], got a tensor of shape \[1, 2, 3\] \(int64\)"),
    (lambda lm: lm.generate(torch.zeros(2, 2, 2, dtype=torch.long), 3), InputError, r"got a tensor of shape \[2, 2, 2\]"),
    (lambda lm: lm.run_with_cache("", prepend_bos=False), InputError, r"prompt has no tokens \(prepend_bos=True starts a text with <\|endoftext\|>\)"),
    (lambda lm: lm.run_with_hooks("Hi", ("blocks.0.hook_resid_pre", lambda a, h: None)), InputError,
     r"fwd_hooks must be a list of \(hook name, function\) pairs"),
    (lambda lm: lm.tokenizer.decode([-1]), TokenIdError, r"ids: id -1 is outside the vocabulary \(0 to 50256\)"),
    (lambda lm: lm.tokenizer.decode([50300]), TokenIdError, "id 50300 is outside"),
    (lambda lm: lm.run_with_cache([], prepend_bos=True), InputError, "^prompt has no token ids$"),
    (lambda lm: lm.to_single_token(5), InputError, "^text must be a text, got 5$"),
    (lambda lm: lm.to_string([[1, 2], [3, 10**6]]), TokenIdError, "^tokens: id 1000000 is outside"),
])
def test_inputs_the_library_refuses_in_one_line(lm, call, error, message):
    with pytest.raises(error, match=message) as caught:
        call(lm)
    assert "\n" not in str(caught.value)


def test_a_model_with_more_rows_than_its_tokenizer_has_ids_decodes_them(tmp_path):
    """A vocabulary padded past the tokenizer's (50,304 rows for 50,257 ids) may generate an id the
    tokenizer lacks: it decodes to nothing, as the tokenizers library has it, and the trace of such
    a generation is recorded (the review of an id check that refused it crashed there); an id past
    the model's rows is still refused."""
    from checkpoints import write_checkpoint

    import gpt2viz
    from gpt2viz.trace import trace_prompt

    write_checkpoint(tmp_path, "tiny", vocab_size=50304)
    lm = gpt2viz.load_model(str(tmp_path))
    assert lm.tokenizer.decode([464, 50270]) == "The" and lm.to_string([50270]) == ""
    with pytest.raises(TokenIdError, match="id 50304 is outside the vocabulary"):
        lm.tokenizer.decode([50304])

    def favour_a_padding_row(name, logits):
        logits[..., 50270] = 1e4
        return logits

    with lm.hooks.subscribe("unembed.hook_out", favour_a_padding_row):
        trace = trace_prompt(lm, "Hello", generate_tokens=2)
    assert trace.generation["ids"] == [50270, 50270]


def test_token_positions_and_residual_directions_as_transformer_lens_gives_them(lm):
    text = "When Mary and John went to the store, John gave a drink to"
    labels = lm.to_str_tokens(text)
    first, last = lm.get_token_position(" John", text), lm.get_token_position(" John", text, mode="last")
    assert labels[first] == labels[last] == " John" and first < last and labels.count(" John") == 2
    assert lm.get_token_position(lm.to_single_token(" John"), lm.to_tokens(text)) == first
    assert lm.to_single_str_token(lm.to_single_token(" Mary")) == " Mary"
    with pytest.raises(InputError, match="single_token ' Paris' is not among the input's tokens"):
        lm.get_token_position(" Paris", text)
    mary = lm.tokens_to_residual_directions(" Mary")
    assert mary.shape == (lm.config.n_embd,) and torch.equal(mary, lm.W_U[:, lm.to_single_token(" Mary")])
    assert lm.tokens_to_residual_directions(torch.tensor([[1, 2], [3, 4]])).shape == (2, 2, lm.config.n_embd)
    logits, cache = lm.run_with_cache(text)
    normed = cache.apply_ln_to_stack(cache.accumulated_resid(layer=-1, pos_slice=-1), pos_slice=-1)[-1]
    token = lm.to_single_token(" Mary")
    assert abs(float(normed[0] @ mary + lm.b_U[token] - logits[0, -1, token])) < 1e-4


def test_the_module_conveniences_transformer_lens_code_reaches_for(lm):
    # hook_dict / hook_points(), parameters(), eval() and .to(device) of a notebook that picks the
    # CPU: each was an AttributeError.
    names = list(lm.hook_dict)
    assert names == [n for n in lm.hooks.names if n not in ("kv_cache", "sample")] and names[0] == "hook_embed"
    _logits, cache = lm.run_with_cache("Hi")
    assert all(name in cache for name in names)  # every key a cache holds (not a step's facts)
    assert all(point.name == name for name, point in lm.hook_dict.items())
    assert [p.name for p in lm.hook_points()] == names
    assert sum(p.numel() for p in lm.parameters()) == sum(p.numel() for p in lm.model.parameters())
    assert dict(lm.named_parameters()).keys() == lm.state_dict().keys() >= {"wte.weight"}
    assert lm.eval() is lm and lm.to("cpu") is lm and lm.to(torch.device("cpu")) is lm and lm.to(torch.float32) is lm
    assert lm.to("cpu:0") is lm and lm.to("cpu", print_details=False) is lm
    with pytest.raises(InputError, match=r"a model is placed and converted as it loads: load_model\(\.\.\., device="):
        lm.to(torch.float16)
