"""Hook points: who receives what, detaching, and values that agree with transformers."""

from __future__ import annotations

import pytest
import torch

from gpt2viz.hooks import Hooks, all_hook_names, block_hook_names

PROMPT = "The meaning of life is"  # 5 tokens


def run(lm, ids=None, cache=None):
    ids = ids if ids is not None else lm.tokenizer.encode(PROMPT)
    return lm.model(torch.tensor([ids]), cache)


def test_inactive_without_subscribers(tiny_lm):
    assert tiny_lm.hooks.active is False
    assert Hooks().active is False
    with tiny_lm.hooks.subscribe("hook_embed", lambda n, v: None):
        assert tiny_lm.hooks.active is True
    assert tiny_lm.hooks.active is False


def test_exact_name(tiny_lm):
    got = []
    with tiny_lm.hooks.subscribe("blocks.1.attn.hook_q", lambda n, v: got.append((n, tuple(v.shape)))):
        run(tiny_lm)
    cfg = tiny_lm.config
    assert got == [("blocks.1.attn.hook_q", (1, cfg.n_head, 5, cfg.head_dim))]


def test_pattern(tiny_lm):
    got = []
    with tiny_lm.hooks.subscribe("blocks.*.hook_resid_post", lambda n, v: got.append(n)):
        run(tiny_lm)
    assert got == ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]


def test_several_patterns_one_subscription(tiny_lm):
    got = []
    with tiny_lm.hooks.subscribe(["hook_embed", "unembed.*"], lambda n, v: got.append(n)):
        run(tiny_lm)
    assert got == ["hook_embed", "unembed.hook_out"]


def test_every_documented_hook_fires_in_order(tiny_lm):
    got = []
    with tiny_lm.hooks.subscribe("*", lambda n, v: got.append(n)):
        run(tiny_lm, cache=tiny_lm.model.new_cache())
        tiny_lm.generate(PROMPT, 1)
    forward = [n for n in got if n not in ("kv_cache", "sample")]
    n_layer = tiny_lm.config.n_layer
    one_pass = [n for n in all_hook_names(n_layer) if n not in ("kv_cache", "sample")]
    assert forward[: len(one_pass)] == one_pass
    assert [n for n in one_pass if n.startswith("blocks.0.")] == list(block_hook_names(0))
    assert set(got) == set(all_hook_names(n_layer))


def test_detaches_when_body_raises(tiny_lm):
    got = []
    with pytest.raises(RuntimeError, match="boom"):
        with tiny_lm.hooks.subscribe("blocks.*.attn.hook_pattern", lambda n, v: got.append(n)):
            raise RuntimeError("boom")
    assert tiny_lm.hooks.active is False
    run(tiny_lm)
    assert got == []


def test_detaches_when_subscriber_raises(tiny_lm):
    def bad(name, value):
        raise ValueError("subscriber failed")

    with pytest.raises(ValueError, match="subscriber failed"):
        with tiny_lm.hooks.subscribe("blocks.0.mlp.hook_post", bad):
            run(tiny_lm)
    assert tiny_lm.hooks.active is False
    run(tiny_lm)  # no longer raises


def test_same_function_subscribed_twice_is_removed_once_per_subscription():
    hooks = Hooks()
    got = []

    def fn(name, value):
        got.append(name)

    first = hooks.add("x", fn)
    second = hooks.add("x", fn)
    hooks.fire("x", 1)
    assert got == ["x", "x"]
    hooks.remove(first)
    hooks.remove(first)  # removing twice is harmless: the second subscription stays
    assert hooks.active is True
    got.clear()
    hooks.fire("x", 1)
    assert got == ["x"]
    hooks.remove(second)
    assert hooks.active is False


def test_nested_subscriptions_of_the_same_function():
    hooks = Hooks()
    got = []

    def fn(name, value):
        got.append(name)

    with hooks.subscribe("a", fn):
        with hooks.subscribe("b", fn):
            hooks.fire("a", 0)
            hooks.fire("b", 0)
        hooks.fire("a", 0)
        hooks.fire("b", 0)
        assert hooks.active is True
    assert got == ["a", "b", "a"]
    assert hooks.active is False


def test_values_agree_with_transformers(tiny_lm, tiny_hf):
    """Residual stream before each block == transformers' hidden_states; the pattern is causal,
    sums to 1 per row, and matches transformers' eager attention weights."""
    ids = tiny_lm.tokenizer.encode(PROMPT)
    got = {}
    with tiny_lm.hooks.subscribe(
        ["blocks.*.hook_resid_pre", "blocks.*.attn.hook_pattern", "unembed.hook_out"],
        lambda n, v: got.__setitem__(n, v.clone()),
    ):
        logits, _ = run(tiny_lm, ids)
    tiny_hf.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            ref = tiny_hf(torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    finally:
        tiny_hf.set_attn_implementation("sdpa")
    for i in range(tiny_lm.config.n_layer):
        torch.testing.assert_close(got[f"blocks.{i}.hook_resid_pre"], ref.hidden_states[i], atol=1e-5, rtol=1e-5)
        pattern = got[f"blocks.{i}.attn.hook_pattern"]
        assert pattern.shape == (1, tiny_lm.config.n_head, 5, 5)
        assert torch.all(pattern.triu(diagonal=1) == 0)
        torch.testing.assert_close(pattern.sum(-1), torch.ones(1, tiny_lm.config.n_head, 5))
        torch.testing.assert_close(pattern, ref.attentions[i], atol=1e-5, rtol=1e-5)
    assert torch.equal(got["unembed.hook_out"], logits)


def test_sample_hook_reports_each_choice(tiny_lm):
    events = []
    with tiny_lm.hooks.subscribe("sample", lambda n, v: events.append(v)):
        out = tiny_lm.generate(PROMPT, 3, temperature=1.0, top_k=5, seed=0)
    assert [e.token_id for e in events] == out.token_ids
    assert [e.step for e in events] == [0, 1, 2]
    for e in events:
        assert int((e.probs > 0).sum()) == 5
        assert float(e.probs[e.token_id]) > 0


def test_kv_cache_hook_sees_the_growing_cache(tiny_lm):
    lengths = []
    with tiny_lm.hooks.subscribe("kv_cache", lambda n, cache: lengths.append(cache.length)):
        tiny_lm.generate(PROMPT, 3)
    assert lengths == [5, 6, 7]


@pytest.mark.parametrize(
    "pattern, closest",
    [
        ("blocks.0.hook_resid_prre", "blocks.0.hook_resid_pre"),
        ("blocks.0.attn.hook_patern", "blocks.0.attn.hook_pattern"),
        ("blocks.99.*", None),  # the test checkpoint has blocks 0 and 1
        ("hook_embedding", "hook_embed"),
    ],
)
def test_a_name_that_matches_no_hook_point_is_refused(tiny_lm, pattern, closest):
    """Issue 35: a misspelt name subscribed to nothing and run_with_cache returned {}; it is a
    HookNameError now (a gpt2viz error and a KeyError), naming the closest real names."""
    from gpt2viz.errors import Gpt2VizError
    from gpt2viz.hooks import HookNameError

    for subscribe in (
        lambda: tiny_lm.hooks.subscribe(pattern, lambda n, v: None).__enter__(),
        lambda: tiny_lm.hooks.add(pattern, lambda n, v: None),
        lambda: tiny_lm.run_with_cache("Hello", names_filter=pattern),
        lambda: tiny_lm.run_with_cache("Hello", names_filter=["hook_embed", pattern]),
    ):
        with pytest.raises(HookNameError) as raised:
            subscribe()
        assert isinstance(raised.value, KeyError) and isinstance(raised.value, Gpt2VizError)
        said = str(raised.value)
        assert said.startswith(f"no hook point is named {pattern!r}")
        assert (closest in said) if closest else "hook_embed to sample" in said
    assert not tiny_lm.hooks.active  # nothing was left subscribed
    with tiny_lm.hooks.subscribe(["blocks.1.*", "hook_embed"], lambda n, v: None):  # patterns that match stay fine
        pass


def test_the_library_s_deliberate_errors_are_gpt2viz_errors_and_builtins():
    """docs/api.md: every deliberate error is a Gpt2VizError (issue 35: HookEditError and
    PatchingError were not), and also the builtin a caller would catch."""
    from gpt2viz.errors import Gpt2VizError
    from gpt2viz.hooks import HookEditError, HookNameError
    from gpt2viz.patching import PatchingError

    for error, builtin in ((HookEditError, ValueError), (PatchingError, ValueError), (HookNameError, KeyError)):
        assert issubclass(error, Gpt2VizError) and issubclass(error, builtin), error


PROMPT_TL = "Hello there world"


def test_tl_style_hooks_get_transformer_lens_s_layout_and_signature(tiny_lm):
    """TL code indexes a head as z[:, :, h]; gpt2viz fires [batch, head, position, d_head]: a
    TL-style subscriber gets TL's [batch, position, head, d_head], the same numbers."""
    names = [f"blocks.1.attn.hook_{x}" for x in "qkvz"] + ["blocks.1.attn.hook_pattern"]
    cache = {}

    def native_keep(name, value):
        cache[name] = value.clone()

    with tiny_lm.hooks.subscribe(names, native_keep):
        logits, _ = tiny_lm.model(torch.tensor([tiny_lm.tokenizer.encode(PROMPT_TL)]))
    _logits, tl_cache = tiny_lm.run_with_cache(PROMPT_TL, names, prepend_bos=False)
    seen = {}

    def look(activation, hook):
        seen[hook.name] = (activation.clone(), hook.layer())

    hooked = tiny_lm.run_with_hooks(PROMPT_TL, [(name, look) for name in names], prepend_bos=False)
    for name in names[:4]:
        native = cache[name]  # [batch, head, position, d_head]
        assert seen[name][0].shape == (1, native.size(2), native.size(1), native.size(3))
        for h in range(native.size(1)):
            assert torch.equal(seen[name][0][:, :, h], native[:, h])
        assert seen[name][1] == 1
        assert torch.equal(tl_cache[name], seen[name][0])  # run_with_cache keeps TL's layout too
    assert torch.equal(seen[names[4]][0], cache[names[4]])  # the pattern: [batch, head, query, key] in both
    assert torch.allclose(hooked, logits, atol=5e-5)  # listening at the pattern takes the explicit path


@pytest.mark.parametrize("in_place", [True, False])
def test_a_tl_style_edit_in_tl_s_layout_edits_the_pass(tiny_lm, in_place):
    """Zeroing head 2 as TL code does it, in place or by returning a tensor, is zeroing head 2."""

    def tl_zero(z, hook):
        if in_place:
            z[:, :, 2] = 0
            return None
        z = z.clone()
        z[:, :, 2] = 0
        return z

    def native_zero(name, z):
        z[:, 2] = 0

    hooked = tiny_lm.run_with_hooks(PROMPT_TL, [("blocks.1.attn.hook_z", tl_zero)], prepend_bos=False)
    with tiny_lm.hooks.subscribe("blocks.1.attn.hook_z", native_zero):
        expected, _ = tiny_lm.model(torch.tensor([tiny_lm.tokenizer.encode(PROMPT_TL)]))
    plain, _ = tiny_lm.run_with_cache(PROMPT_TL, "hook_embed", prepend_bos=False)
    assert torch.equal(hooked, expected) and not torch.equal(hooked, plain)


def test_hooks_add_tl_style_and_a_filter_function(tiny_lm):
    calls = []
    sub = tiny_lm.hooks.add("blocks.0.attn.hook_q", lambda act, hook: calls.append((hook.name, tuple(act.shape))), tl_style=True)
    try:
        tiny_lm.model(torch.tensor([tiny_lm.tokenizer.encode(PROMPT_TL)]))
    finally:
        tiny_lm.hooks.remove(sub)
    n_head = tiny_lm.config.n_head
    assert calls == [("blocks.0.attn.hook_q", (1, 3, n_head, tiny_lm.config.n_embd // n_head))]
    chosen = []
    tiny_lm.run_with_hooks(PROMPT_TL, [(lambda name: name.endswith("hook_resid_post"), lambda a, h: chosen.append(h.name))])
    assert chosen == [f"blocks.{i}.hook_resid_post" for i in range(tiny_lm.config.n_layer)]


@pytest.mark.parametrize("run", ["run_with_cache", "run_with_hooks"])
def test_a_filter_function_that_accepts_no_hook_point_is_a_key_error(tiny_lm, run):
    def nothing(name):
        return False

    with pytest.raises(KeyError, match="nothing"):
        if run == "run_with_cache":
            tiny_lm.run_with_cache(PROMPT_TL, nothing)
        else:
            tiny_lm.run_with_hooks(PROMPT_TL, [(nothing, lambda a, h: None)])
