"""gpt2viz as a library, the way a TransformerLens user works: run with cache, subscriptions
scoped to the calling thread, batches padded on either side with a mask, ids checked, errors
from gpt2viz.errors that name the argument."""

from __future__ import annotations

import threading

import pytest
import torch

import gpt2viz
from gpt2viz.errors import InputError
from gpt2viz.hooks import TL_POSITION_FIRST, all_hook_names

PROMPTS = ["The capital of France is", "Once upon a time, in a land far away, there lived a", "Hello"]


def test_run_with_cache_keeps_what_a_subscription_sees(tiny_lm):
    seen = {}

    def keep(name, value) -> None:  # returns None: a returned tensor would stand in for the value
        if isinstance(value, torch.Tensor):
            seen[name] = value.clone()

    with tiny_lm.hooks.subscribe("*", keep):
        want, _ = tiny_lm.model(torch.tensor([tiny_lm.tokenizer.encode(PROMPTS[0])]))
    logits, cache = tiny_lm.run_with_cache(PROMPTS[0], prepend_bos=False)
    assert torch.equal(logits, want)
    n_layer = tiny_lm.config.n_layer
    tensor_hooks = [n for n in all_hook_names(n_layer) if n not in ("kv_cache", "sample")]
    assert list(cache) == tensor_hooks == list(seen)  # every hook, in the order they fired
    # hook_q/k/v/z kept in TL's layout
    assert all(torch.equal(cache[n], seen[n].transpose(1, 2) if n.endswith(TL_POSITION_FIRST) else seen[n]) for n in cache)
    # names_filter as TransformerLens takes it: a name, a pattern, a list, a function.
    assert list(tiny_lm.run_with_cache(PROMPTS[0], "hook_embed")[1]) == ["hook_embed"]
    assert list(tiny_lm.run_with_cache(PROMPTS[0], "blocks.*.attn.hook_pattern")[1]) == [
        f"blocks.{i}.attn.hook_pattern" for i in range(n_layer)
    ]
    assert list(tiny_lm.run_with_cache(PROMPTS[0], ["hook_pos_embed", "ln_final.hook_scale"])[1]) == [
        "hook_pos_embed", "ln_final.hook_scale"
    ]
    assert list(tiny_lm.run_with_cache(PROMPTS[0], lambda n: n.endswith("hook_mlp_out"))[1]) == [
        f"blocks.{i}.hook_mlp_out" for i in range(n_layer)
    ]
    assert not tiny_lm.hooks.active  # nothing left subscribed
    with pytest.raises(InputError, match="names_filter"):
        tiny_lm.run_with_cache(PROMPTS[0], 5)


def test_two_threads_each_receive_only_their_own_passes(tiny_lm):
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPTS[1])])
    per_pass = len(all_hook_names(tiny_lm.config.n_layer)) - 2  # no cache, no sampling
    passes, start = 6, threading.Barrier(2)
    got = {"a": [], "b": []}

    def worker(key: str) -> None:
        mine = got[key]
        with tiny_lm.hooks.subscribe("*", lambda n, v: mine.append(threading.get_ident())):
            start.wait()
            for _ in range(passes):
                tiny_lm.model(ids)

    threads = [threading.Thread(target=worker, args=(k,)) for k in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for key in got:
        assert len(got[key]) == passes * per_pass and len(set(got[key])) == 1
    assert got["a"][0] != got["b"][0]
    # `add` listens to every thread's passes, until removed.
    heard = []
    sub = tiny_lm.hooks.add("hook_embed", lambda n, v: heard.append(threading.get_ident()))
    try:
        t = threading.Thread(target=lambda: tiny_lm.model(ids))
        t.start()
        t.join()
        tiny_lm.model(ids)
    finally:
        tiny_lm.hooks.remove(sub)
    assert len(heard) == 2 and len(set(heard)) == 2 and not tiny_lm.hooks.active


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_padded_batch_equals_each_prompt_alone_and_transformers(ckpts, side):
    lm, hf = ckpts.lm("tiny"), ckpts.hf("tiny")
    ids, mask = lm.pad(PROMPTS, side=side)
    assert ids.shape[0] == 3 and torch.equal(mask.sum(1), torch.tensor([len(lm.tokenizer.encode(p)) for p in PROMPTS]))
    logits, _ = lm.model(ids, attention_mask=mask)
    positions = (mask.cumsum(1) - 1).clamp_min(0)  # as transformers' generation computes them for GPT-2
    with torch.no_grad():
        theirs = hf(ids, attention_mask=mask, position_ids=positions).logits
    for r, prompt in enumerate(PROMPTS):
        real = mask[r].bool()
        alone, _ = lm.model(torch.tensor([lm.tokenizer.encode(prompt)]))
        assert float((logits[r, real] - alone[0]).abs().max()) <= 1e-5
        assert float((logits[r, real] - theirs[r, real]).abs().max()) <= 1e-4
    # run_with_cache takes a list of texts the same way (padded on the right).
    batched, cache = lm.run_with_cache(PROMPTS, "hook_embed", prepend_bos=False)
    assert batched.shape[:2] == ids.shape and cache["hook_embed"].shape[:2] == ids.shape


def test_generate_on_a_list_of_prompts_gives_one_result_per_prompt(tiny_lm):
    rows = tiny_lm.generate(PROMPTS, 6)
    assert [r.token_ids for r in rows] == [tiny_lm.generate(p, 6).token_ids for p in PROMPTS]
    assert tiny_lm.tokenizer.encode_batch(PROMPTS) == [tiny_lm.tokenizer.encode(p) for p in PROMPTS]
    assert tiny_lm.tokenizer.decode_batch([r.token_ids for r in rows]) == [tiny_lm.tokenizer.decode(r.token_ids) for r in rows]
    with pytest.raises(InputError, match="use_cache"):
        tiny_lm.generate(PROMPTS, 2, use_cache=False)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda lm: lm.model(torch.tensor([[-1, 5]])), "input_ids"),
        (lambda lm: lm.model(torch.tensor([[lm.config.vocab_size]])), "input_ids"),
        (lambda lm: lm.model(torch.tensor([[1.0, 2.0]])), "input_ids"),
        (lambda lm: lm.model([[1, 2]]), "input_ids"),
        (lambda lm: lm.model(torch.zeros(1, lm.config.n_ctx + 1, dtype=torch.long)), "input_ids"),
        (lambda lm: lm.model(torch.tensor([[1]]), lm.model.new_cache(2)), "cache"),
        (lambda lm: lm.model(torch.tensor([[1, 2, 3]]), lm.model.new_cache(1, capacity=2)), "cache"),
        (lambda lm: lm.model(torch.tensor([[1, 2]]), attention_mask=torch.ones(1, 3)), "attention_mask"),
        (lambda lm: lm.generate([-3, 5], 2), "prompt"),
        (lambda lm: lm.generate([1.5], 2), "prompt"),
        (lambda lm: lm.pad(["a"], side="middle"), "side"),
    ],
)
def test_bad_arguments_raise_input_error_naming_the_argument(tiny_lm, call, argument):
    with pytest.raises(InputError) as caught:
        call(tiny_lm)
    assert caught.value.setting == argument and str(caught.value).startswith(argument)
    assert isinstance(caught.value, (ValueError, gpt2viz.Gpt2VizError))


@pytest.mark.parametrize(
    "call",
    [
        lambda lm: lm.model(torch.tensor([[-1, 5]])),
        lambda lm: lm.model(torch.tensor([[lm.config.vocab_size]])),
        lambda lm: lm.encode_prompt([1, lm.config.vocab_size]),
        lambda lm: lm.check_token_id(-1, "token_id"),
        lambda lm: lm.check_token_id(lm.config.vocab_size, "token_id"),
    ],
)
def test_a_token_id_outside_the_vocabulary_is_an_index_error_too(tiny_lm, call):
    """What a user catches for an id out of range, as torch's embedding reports one: -1 included."""
    with pytest.raises(IndexError) as caught:
        call(tiny_lm)
    assert isinstance(caught.value, InputError) and isinstance(caught.value, ValueError)


def test_the_package_exports_what_its_docs_name():
    for name in gpt2viz.__all__:
        assert getattr(gpt2viz, name) is not None
    import types

    assert isinstance(gpt2viz.generate, types.ModuleType)  # the function works on a bare GPT2: lm.generate


@pytest.mark.parametrize("call, setting", [
    (lambda lm: lm.generate("Hi", 2, temperature=-1.0), "temperature"),
    (lambda lm: lm.generate("Hi", 2, temperature=0.8, top_k=0), "top_k"),
    (lambda lm: lm.generate("", 2), "prompt"),
    (lambda lm: gpt2viz.load_model("tiny", dtype="float8"), "dtype"),
])
def test_a_bad_setting_is_a_value_error_as_python_s_own_are(tiny_lm, call, setting):
    """TransformerLens users and Python's conventions catch a bad argument as a ValueError."""
    with pytest.raises(ValueError) as caught:
        call(tiny_lm)
    assert isinstance(caught.value, gpt2viz.SettingError) and caught.value.setting == setting


def test_prepend_bos_starts_a_text_with_end_of_text_as_transformer_lens_does(tiny_lm):
    """TransformerLens puts <|endoftext|> first for GPT-2: its run_with_cache, run_with_hooks,
    model(text) and to_tokens do by default, so the cache's positions are to_str_tokens's (a TL
    user's cache of a text was one position short of its labels). gpt2viz's own encode_prompt,
    pad and generate do so when asked; ids are taken as given."""
    text = "Hello there"
    plain = tiny_lm.encode_prompt(text)
    assert tiny_lm.encode_prompt(text, prepend_bos=True) == [tiny_lm.eos_id] + plain
    assert tiny_lm.encode_prompt(plain, prepend_bos=True) == plain
    with_bos, cache = tiny_lm.run_with_cache(text, "hook_embed")
    assert with_bos.shape[1] == len(tiny_lm.to_str_tokens(text)) == len(plain) + 1
    assert cache["hook_embed"].shape[1] == len(plain) + 1
    same, _ = tiny_lm.run_with_cache([tiny_lm.eos_id] + plain, "hook_embed")  # the same attention path
    assert torch.equal(with_bos, same) and torch.equal(tiny_lm.run_with_cache(tiny_lm.to_tokens(text), "hook_embed")[0], same)
    assert torch.equal(tiny_lm.run_with_hooks(text), same) and torch.equal(tiny_lm(text), same)
    without, _ = tiny_lm.run_with_cache(text, "hook_embed", prepend_bos=False)
    assert without.shape[1] == len(plain)
    assert torch.allclose(tiny_lm.run_with_hooks([text, "Hi"])[0], same[0], atol=1e-5)  # texts of a batch too
    ids, mask = tiny_lm.pad([text, "Hi"], prepend_bos=True)
    assert ids[0].tolist() == [tiny_lm.eos_id] + plain and int(mask[1].sum()) == 1 + len(tiny_lm.encode_prompt("Hi"))
    made = tiny_lm.generate(text, 3, prepend_bos=True)
    assert made.token_ids == tiny_lm.generate([tiny_lm.eos_id] + plain, 3).token_ids


def test_transformer_lens_s_forward_call_and_hooks_context(tiny_lm):
    """`lm(tokens)` is TL's forward pass, and `with lm.hooks(fwd_hooks=...)` TL's context manager
    for hooks: its hooks see the passes inside it, none after it (or until reset_hooks with
    reset_hooks_end=False); a filter that accepts no hook name says so."""
    from gpt2viz.hooks import HookNameError

    ids = tiny_lm.to_tokens("When Mary and John went")
    logits = tiny_lm(ids)
    assert torch.equal(logits, tiny_lm.run_with_hooks(ids))
    assert torch.equal(tiny_lm(ids, "loss"), tiny_lm.run_with_hooks(ids, return_type="loss"))
    seen: list[str] = []
    with tiny_lm.hooks(fwd_hooks=[(lambda name: name.endswith("hook_pattern"), lambda a, hook: seen.append(hook.name))]) as hooks:
        assert hooks is tiny_lm.hooks
        tiny_lm(ids)
    assert seen == [f"blocks.{layer}.attn.hook_pattern" for layer in range(tiny_lm.config.n_layer)]
    tiny_lm(ids)
    assert len(seen) == tiny_lm.config.n_layer  # removed at the block's end
    with tiny_lm.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda a, hook: seen.append(hook.name))], reset_hooks_end=False):
        pass
    tiny_lm(ids)
    tiny_lm.reset_hooks()
    tiny_lm(ids)
    assert seen.count("blocks.0.hook_resid_pre") == 1
    with pytest.raises(HookNameError, match="the filter <lambda> accepts none of the model's hook names"):
        tiny_lm.run_with_hooks(ids, [(lambda name: "xyz" in name, lambda a, hook: None)])
    with pytest.raises(InputError, match="bwd_hooks must be a list of"):  # checked as fwd_hooks are
        with tiny_lm.hooks(bwd_hooks=[("hook_embed", "not a function")]):
            pass
    with pytest.raises(InputError, match="dir must be 'fwd' or 'bwd', got 'back'"):
        tiny_lm.add_hook("hook_embed", lambda a, hook: None, dir="back")
    # An error inside the block, or in a later pair before it runs, leaves no hook behind.
    seen.clear()
    with pytest.raises(RuntimeError):
        with tiny_lm.hooks(fwd_hooks=[("hook_embed", lambda a, hook: seen.append(hook.name))]):
            raise RuntimeError("inside")
    with pytest.raises(HookNameError):
        with tiny_lm.hooks(fwd_hooks=[("hook_embed", lambda a, hook: seen.append(hook.name)),
                                      (lambda name: "xyz" in name, lambda a, hook: None)], reset_hooks_end=False):
            pass
    tiny_lm(ids)
    assert seen == [] and not tiny_lm.hooks.active


def test_stop_at_layer_returns_the_stream_before_that_block_as_transformer_lens_does(tiny_lm):
    """TL's `stop_at_layer=k` runs blocks[:k] and returns the residual stream there (negative k
    from the end, n_layer before the final norm); hooks at that point run (resid_post of the last
    block run), later ones do not; the cache holds what ran. A k outside -n..n names the argument."""
    lm, n = tiny_lm, tiny_lm.config.n_layer
    ids = lm.to_tokens("When Mary and John went")
    streams: dict[str, torch.Tensor] = {}

    def record(activation, hook):
        streams[hook.name] = activation.clone()

    lm.run_with_hooks(ids, [(lambda name: "hook_resid_p" in name, record)])
    for k in (0, 1, n, -1, -n):
        blocks = k if k >= 0 else n + k
        expected = streams["blocks.0.hook_resid_pre"] if blocks == 0 else streams[f"blocks.{blocks - 1}.hook_resid_post"]
        assert torch.allclose(lm(ids, stop_at_layer=k), expected, atol=1e-5), k
    later: list[str] = []
    stream = lm.run_with_hooks(ids, [("blocks.0.hook_resid_post", lambda a, hook: a * 2),
                                     ("blocks.1.hook_resid_pre", lambda a, hook: later.append(hook.name))],
                               stop_at_layer=1)
    assert torch.allclose(stream, 2 * streams["blocks.0.hook_resid_post"], atol=1e-5) and later == []
    # A hook added for every pass at blocks.0.hook_resid_pre does not run either (a review: it did).
    with lm.hooks(fwd_hooks=[("blocks.0.hook_resid_pre", lambda a, hook: a * 0)]):
        assert torch.allclose(lm(ids, stop_at_layer=0), streams["blocks.0.hook_resid_pre"], atol=1e-5)
    stream, cache = lm.run_with_cache(ids, stop_at_layer=1)
    assert torch.equal(stream, cache["resid_post", 0])
    assert "blocks.1.hook_resid_pre" not in cache and "ln_final.hook_normalized" not in cache
    for bad in (n + 1, -n - 1, 1.5, True):
        with pytest.raises(InputError, match=f"stop_at_layer must be a number of blocks from -{n} to {n}"):
            lm(ids, stop_at_layer=bad)
    assert not lm.hooks.active


def test_what_a_pass_returns_may_be_edited_and_used_in_a_graph(tiny_lm):
    """The logits and the cache are ordinary tensors, as TL's: edited in place (zeroing a head's
    z), and multiplied with a tensor that requires a gradient (a probe on cached activations);
    an edit of a cached embedding changes no weight."""
    ids = tiny_lm.to_tokens("When Mary and John went")
    logits, cache = tiny_lm.run_with_cache(ids)
    assert not logits.is_inference() and not cache["z", 0].is_inference()
    cache["z", 0][:, :, 1] = 0
    logits[0, -1, 0] = 0
    probe = torch.zeros(tiny_lm.config.n_embd, requires_grad=True)
    (cache["resid_post", 0] @ probe).sum().backward()
    assert probe.grad is not None and probe.grad.abs().sum() > 0
    positions = ids.size(1)
    cache["pos_embed"] += 1
    assert torch.equal(tiny_lm.run_with_cache(ids)[1]["pos_embed"][0], tiny_lm.W_pos[:positions])


def test_generate_takes_transformer_lens_s_keywords(tiny_lm):
    """TL's generate calls pass verbose=False, do_sample=..., use_past_kv_cache and stop_at_eos;
    each was a TypeError (a TL-user walk: 'nearly every TL generate call')."""
    greedy = tiny_lm.generate("Hello", 5)
    plain = tiny_lm.generate("Hello", max_new_tokens=5, verbose=False, do_sample=False, use_past_kv_cache=False)
    assert plain.token_ids == greedy.token_ids and not plain.used_cache
    sampled = tiny_lm.generate("Hello", 5, do_sample=True, seed=3)
    assert sampled.token_ids == tiny_lm.generate("Hello", 5, temperature=1.0, seed=3).token_ids
    assert sampled.settings.temperature == 1.0
    assert tiny_lm.generate("Hello", 5, do_sample=True, temperature=0.0).token_ids == greedy.token_ids  # TL: greedy
    # With no seed, sampling draws its seed from torch's global state, as TL's: manual_seed repeats it.
    torch.manual_seed(0)
    first = tiny_lm.generate("Hello", 8, do_sample=True)
    torch.manual_seed(0)
    again = tiny_lm.generate("Hello", 8, do_sample=True)
    assert again.token_ids == first.token_ids and again.settings.seed == first.settings.seed is not None
    assert tiny_lm.generate("Hello", 8, temperature=1.0, seed=first.settings.seed).token_ids == first.token_ids
    torch.manual_seed(1)
    assert tiny_lm.generate("Hello", 8, do_sample=True).settings.seed != first.settings.seed
    eos = tiny_lm.stop_id

    def end_now(logits, hook):
        logits[..., eos] = 1e4

    # TL's return types: the prompt and the new tokens, as text or as ids; TL's default length, 10.
    prompt = "The king hath sent"
    result = tiny_lm.generate(prompt, 8, prepend_bos=True)
    ids = [tiny_lm.bos_id, *tiny_lm.encode_prompt(prompt), *result.token_ids]
    assert tiny_lm.generate(prompt, 8, prepend_bos=True, return_type="tokens").tolist() == [ids]
    text = tiny_lm.generate(prompt, 8, prepend_bos=True, return_type="str")
    assert text == prompt + tiny_lm.to_string(result.token_ids)  # <|endoftext|> left out, as TL's
    assert tiny_lm.generate(prompt, 8, prepend_bos=True, return_type="input") == text
    assert tiny_lm.generate(tiny_lm.to_tokens(prompt), 8, return_type="input").tolist() == [ids]
    assert len(tiny_lm.generate(prompt).token_ids) == 10
    two = tiny_lm.generate(torch.tensor([ids[:3], ids[1:4]]), 3, return_type="tokens")
    assert two.shape == (2, 6) and two[:, :3].tolist() == [ids[:3], ids[1:4]]
    with pytest.raises(InputError, match="return_type must be 'str', 'tokens', 'input' or None, got 'text'"):
        tiny_lm.generate(prompt, 2, return_type="text")
    # eos_token_id: that id ends the text instead of <|endoftext|>.
    first = result.token_ids[0]
    assert tiny_lm.generate(prompt, 8, prepend_bos=True, eos_token_id=first).token_ids == [first]
    stop = tiny_lm.generate(["Hi", prompt], 4)[0].token_ids[0]
    rows = tiny_lm.generate(["Hi", prompt], 4, return_type="tokens", eos_token_id=stop)
    assert rows[0].tolist()[-4:] == [stop] * 4  # stopped at once: padded with the id it stopped at
    with tiny_lm.hooks(fwd_hooks=[("unembed.hook_out", end_now)]):
        assert tiny_lm.generate("Hello", 4).token_ids == [eos]
        assert tiny_lm.generate("Hello", 4, stop_at_eos=False).token_ids == [eos] * 4
        rows = tiny_lm.generate(["Hello", "Hi there"], 3, stop_at_eos=False)
        assert [r.token_ids for r in rows] == [[eos] * 3, [eos] * 3]
