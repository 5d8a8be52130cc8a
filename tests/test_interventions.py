"""Editing hooks and what is built on them: ablations, direct logit attribution, patching.

Ablations are checked against transformers models whose weights were edited to do the same."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch


from helpers import PROMPT
from helpers import hf_logits
from gpt2viz.attribution import direct_logit_attribution
from gpt2viz.hooks import HookEditError
from gpt2viz.interventions import Ablation, AblationError, applied, parse_ablations
from gpt2viz.patching import PatchingError, patch_residual_stream, patched_logits, residuals

TOL = 1e-4
ROOT = Path(__file__).resolve().parents[1]


def ablated_logits(lm, ids, ablations):
    with applied(lm.hooks, ablations):
        logits, _cache = lm.model(torch.tensor([ids]))
    return logits


def max_diff(a, b) -> float:
    return float((a.float() - b.float()).abs().max())


@pytest.mark.parametrize("shape, layer, head", [("tiny", 1, 2), ("odd-heads", 0, 24)])
def test_zeroing_a_head_equals_zeroing_its_c_proj_rows_in_transformers(ckpts, shape, layer, head):
    lm, hf = ckpts.lm(shape), copy.deepcopy(ckpts.hf(shape))
    ids = lm.tokenizer.encode(PROMPT)
    hd = lm.config.head_dim
    with torch.no_grad():
        hf.transformer.h[layer].attn.c_proj.weight[head * hd : (head + 1) * hd] = 0  # Conv1D: [in, out]
    ours = ablated_logits(lm, ids, [Ablation("head", layer, head=head)])
    assert max_diff(ours, hf_logits(hf, ids)) <= TOL
    # The ablation changed something: the unedited model differs.
    assert max_diff(ours, hf_logits(ckpts.hf(shape), ids)) > 100 * TOL


def test_ablating_an_mlp_equals_zeroing_its_c_proj_in_transformers(ckpts):
    lm, hf = ckpts.lm("tiny"), copy.deepcopy(ckpts.hf("tiny"))
    ids = lm.tokenizer.encode(PROMPT)
    with torch.no_grad():
        hf.transformer.h[0].mlp.c_proj.weight.zero_()
        hf.transformer.h[0].mlp.c_proj.bias.zero_()
    assert max_diff(ablated_logits(lm, ids, parse_ablations(["L0.mlp"])), hf_logits(hf, ids)) <= TOL


def test_ablating_a_whole_block_equals_zeroing_both_its_projections(ckpts):
    lm, hf = ckpts.lm("tiny"), copy.deepcopy(ckpts.hf("tiny"))
    ids = lm.tokenizer.encode(PROMPT)
    with torch.no_grad():
        for proj in (hf.transformer.h[1].attn.c_proj, hf.transformer.h[1].mlp.c_proj):
            proj.weight.zero_()
            proj.bias.zero_()
    assert max_diff(ablated_logits(lm, ids, [Ablation.parse("L1")]), hf_logits(hf, ids)) <= TOL


def test_mean_ablation_and_neurons_change_only_what_they_name(tiny_lm):
    ids = tiny_lm.tokenizer.encode(PROMPT)
    seen = {}
    with tiny_lm.hooks.subscribe("blocks.0.attn.hook_z", lambda n, z: seen.setdefault("plain", z.clone())):
        with applied(tiny_lm.hooks, [Ablation.parse("L0H1:mean")]):
            with tiny_lm.hooks.subscribe("blocks.0.attn.hook_z", lambda n, z: seen.setdefault("edited", z.clone())):
                tiny_lm.model(torch.tensor([ids]))
    plain, edited = seen["plain"], seen["edited"]
    assert torch.equal(edited[:, 0], plain[:, 0]) and torch.equal(edited[:, 2:], plain[:, 2:])
    assert torch.allclose(edited[0, 1], plain[0, 1].mean(dim=0).expand_as(plain[0, 1]))

    posts = {}
    with applied(tiny_lm.hooks, [Ablation.parse("L1.n3,7")]):
        with tiny_lm.hooks.subscribe("blocks.1.mlp.hook_post", lambda n, h: posts.setdefault("h", h.clone())):
            tiny_lm.model(torch.tensor([ids]))
    h = posts["h"]
    assert float(h[0, -1, [3, 7]].abs().max()) == 0 and float(h[0, :-1, [3, 7]].abs().max()) > 0


def test_an_ablation_holds_for_every_decode_step_and_ends_with_the_block(tiny_lm):
    plain = tiny_lm.generate(PROMPT, 8).token_ids
    with applied(tiny_lm.hooks, [Ablation.parse("L0"), Ablation.parse("L1.heads")]):
        ablated = tiny_lm.generate(PROMPT, 8).token_ids
        naive = tiny_lm.generate(PROMPT, 8, use_cache=False).token_ids
    assert ablated == naive != plain
    assert tiny_lm.generate(PROMPT, 8).token_ids == plain and not tiny_lm.hooks.active


def _plain_mean(lm, ids: list[int], name: str) -> torch.Tensor:
    """The mean over `ids`' positions of the value at hook `name`, in a pass with nothing edited."""
    seen = {}
    with lm.hooks.subscribe(name, lambda n, v: seen.setdefault("v", v.clone())):
        lm.model(torch.tensor([ids]))
    return seen["v"].mean(dim=1, keepdim=True)


@pytest.mark.parametrize("use_cache", [True, False])
def test_every_pass_of_a_generation_uses_the_prompt_s_mean(tiny_lm, use_cache):
    """Issue 35: with the cache a decode step has one position, and a mean over it did nothing;
    without it each step's full pass averaged the generated tokens in too. Every pass of the
    generation now replaces the MLP's output by the prompt's mean."""
    ids = tiny_lm.tokenizer.encode(PROMPT)
    name = "blocks.1.hook_mlp_out"
    mean = _plain_mean(tiny_lm, ids, name)
    seen = []
    with applied(tiny_lm.hooks, [Ablation.parse("L1.mlp:mean")]):
        with tiny_lm.hooks.subscribe(name, lambda n, v: seen.append(v.clone())):  # after the edit
            tiny_lm.generate(ids, 6, use_cache=use_cache)
    assert len(seen) == 6
    for value in seen:
        assert torch.equal(value, mean.expand_as(value))


@pytest.mark.parametrize("spec", ["L3.mlp:mean", "L2H5:mean", "L4.heads:mean", "L5.n12,40,300:mean", "L1:mean"])
def test_mean_ablated_generation_is_the_same_cached_or_not(bundled, spec):
    """On the bundled model (trained: its choices follow what the parts write)."""
    ablations = [Ablation.parse(spec)]
    with applied(bundled.hooks, ablations):
        cached = bundled.generate("ROMEO:", 24).token_ids
    with applied(bundled.hooks, ablations):
        naive = bundled.generate("ROMEO:", 24, use_cache=False).token_ids
    assert cached == naive


def test_a_padded_batch_under_a_mean_ablation_is_each_prompt_alone(tiny_lm):
    """Each row's mean is over its own real positions: the padding on the left is left out."""
    prompts = [PROMPT, "Hello", "ROMEO: But soft, what light through yonder window breaks"]
    ablations = [Ablation.parse("L1.mlp:mean"), Ablation.parse("L0H2:mean")]
    with applied(tiny_lm.hooks, ablations):
        together = tiny_lm.generate_prompts(prompts, 8)
    for prompt, row in zip(prompts, together.rows):
        with applied(tiny_lm.hooks, ablations):
            alone = tiny_lm.generate(prompt, 8)
        assert row.token_ids == alone.token_ids


def test_two_texts_in_one_block_each_take_their_own_prompt_s_mean(tiny_lm):
    """The means are kept per text: a second generate, run_with_cache or run_with_hooks in the same
    `applied` block averages its own prompt (the first's mean was silently reused)."""
    prompts = [PROMPT, "ROMEO: But soft, what light through yonder window breaks"]
    ablations = [Ablation.parse("L1.mlp:mean"), Ablation.parse("L0H2:mean")]
    alone, alone_logits = [], []
    for prompt in prompts:
        with applied(tiny_lm.hooks, ablations):
            alone.append(tiny_lm.generate(prompt, 8).token_ids)
        with applied(tiny_lm.hooks, ablations):
            alone_logits.append(tiny_lm.run_with_hooks(prompt))
    with applied(tiny_lm.hooks, ablations):
        assert [tiny_lm.generate(prompt, 8).token_ids for prompt in prompts] == alone
        for prompt, logits in zip(prompts, alone_logits):
            assert torch.equal(tiny_lm.run_with_hooks(prompt), logits)
            assert torch.equal(tiny_lm.run_with_cache(prompt, "hook_embed")[0], logits)


def test_continuations_of_one_prompt_under_a_mean_ablation_use_its_mean(tiny_lm):
    """generate_batch runs the prompt once and decodes B rows: each row takes the prompt's mean
    (it refused: no mean of B rows), and greedy rows equal one generation under the same ablation."""
    ablations = [Ablation.parse("L1.mlp:mean"), Ablation.parse("L0H2:mean")]
    with applied(tiny_lm.hooks, ablations):
        rows = tiny_lm.generate_batch(PROMPT, 3, 6).rows
    with applied(tiny_lm.hooks, ablations):
        alone = tiny_lm.generate(PROMPT, 6, use_cache=False).token_ids
    assert [row.token_ids for row in rows] == [alone] * 3


def test_an_ablation_that_does_not_fit_is_also_a_value_error(tiny_lm):
    for spec in ("L99H0", "L1H99", "L1.n999999"):
        with pytest.raises(ValueError, match=spec):
            with applied(tiny_lm.hooks, [Ablation.parse(spec)]):
                tiny_lm.generate(PROMPT, 1)


def test_a_layernorm_scale_edited_in_place_is_used_as_one_returned(tiny_lm):
    """TransformerLens hooks often edit in place and return nothing: the pass goes on with the edit."""
    def in_place(scale, hook):
        scale.mul_(2.0)

    def returned(scale, hook):
        return scale * 2.0

    plain = tiny_lm.run_with_hooks(PROMPT)
    for name in ("blocks.0.ln1.hook_scale", "ln_final.hook_scale"):
        edited = tiny_lm.run_with_hooks(PROMPT, fwd_hooks=[(name, in_place)])
        assert torch.equal(edited, tiny_lm.run_with_hooks(PROMPT, fwd_hooks=[(name, returned)]))
        assert (edited - plain).abs().max() > 0.01
    # Only read, the scale changes nothing (the two-step LayerNorm a listener gets rounds apart
    # from the fused one in the last bits).
    read = tiny_lm.run_with_hooks(PROMPT, fwd_hooks=[("blocks.0.ln1.hook_scale", lambda s, h: None)])
    assert torch.allclose(read, plain, rtol=0, atol=1e-5)


def test_a_mean_needs_the_prompt_s_pass(tiny_lm):
    """A decode step through a cache filled outside the block has no prompt to average: refused."""
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPT)])
    cache = tiny_lm.model.new_cache(reserve=ids.shape[1] + 1)
    tiny_lm.model(ids, cache)
    with applied(tiny_lm.hooks, [Ablation.parse("L1.mlp:mean")]):
        with pytest.raises(AblationError, match="L1.mlp:mean: a mean ablation takes its mean from the prompt"):
            tiny_lm.model(ids[:, -1:], cache)


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("L3H5", Ablation("head", 3, head=5)),
        ("L3H5:mean", Ablation("head", 3, head=5, how="mean")),
        ("L0.heads", Ablation("heads", 0)),
        ("L2.mlp:zero", Ablation("mlp", 2)),
        ("L11", Ablation("block", 11)),
        ("L1.n12,40", Ablation("neurons", 1, neurons=(12, 40))),
    ],
)
def test_specs_parse_and_print_back(spec, expected):
    assert Ablation.parse(spec) == expected
    assert Ablation.parse(expected.spec) == expected


@pytest.mark.parametrize("spec", ["", "H3", "L", "L1H", "L1.attn", "L1:max", "block 1"])
def test_bad_specs_are_refused(spec):
    with pytest.raises(AblationError, match="is not an ablation"):
        Ablation.parse(spec)


def test_parts_the_model_lacks_are_refused(tiny_lm):
    """Checked by `check`, and by `applied` before anything runs (issue 35: `applied` took L99H0,
    L1H99 and L1.n999999 and had no effect, or raised a builtin IndexError mid-pass)."""
    c = tiny_lm.config
    cases = [("L2", "blocks 0 to 1"), ("L0H4", "heads 0 to 3"), ("L0.n512", "neurons 0 to 255"),
             ("L99H0", "blocks 0 to 1"), ("L1H99", "heads 0 to 3"), ("L1.n999999", "neurons 0 to 255")]
    for spec, message in cases:
        with pytest.raises(AblationError, match=message):
            Ablation.parse(spec).check(c.n_layer, c.n_head, c.d_mlp)
        with pytest.raises(AblationError, match=message):
            with applied(tiny_lm.hooks, [Ablation.parse("L0H0"), Ablation.parse(spec)]):
                pytest.fail("the block ran")
        assert not tiny_lm.hooks.active


def test_a_replacement_of_another_shape_or_dtype_is_refused(tiny_lm):
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPT)])
    T = ids.size(1)
    for bad, message in [
        (lambda n, x: x[:, :-1], rf"\[1, {T - 1}, 64\] float32 on cpu; the hook carries \[1, {T}, 64\]"),
        (lambda n, x: x.double(), "float64"),
        (lambda n, x: 0.0, "returned a float, not a tensor"),
    ]:
        with tiny_lm.hooks.subscribe("blocks.0.hook_resid_pre", bad):
            with pytest.raises(HookEditError, match=message):
                tiny_lm.model(ids)


@pytest.mark.parametrize("hook", ["hook_embed", "hook_pos_embed", "blocks.0.attn.hook_k", "blocks.0.attn.hook_v",
                                  "blocks.1.hook_resid_post", "blocks.0.mlp.hook_post"])
def test_an_in_place_write_never_changes_a_later_pass(tiny_lm, hook):
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPT)])
    before, _cache = tiny_lm.model(ids)

    def vandal(name, x) -> None:
        x.mul_(0).add_(7.0)

    with tiny_lm.hooks.subscribe(hook, vandal):
        tiny_lm.model(ids)
        cache = tiny_lm.model.new_cache()
        tiny_lm.model(ids, cache)
    after, _cache = tiny_lm.model(ids)
    assert torch.equal(before, after)


def test_the_kv_cache_hook_carries_numbers_not_the_buffers(tiny_lm):
    states = []
    with tiny_lm.hooks.subscribe("kv_cache", lambda n, state: states.append(state)):
        tiny_lm.generate(PROMPT, 3)
    n = len(tiny_lm.tokenizer.encode(PROMPT))
    assert [s.length for s in states] == [n, n + 1, n + 2]
    assert not any(isinstance(v, torch.Tensor) for v in vars(states[0]).values())


def test_direct_logit_attribution_sums_to_the_logit(ckpts):
    lm = ckpts.lm("odd-heads")
    ids = lm.tokenizer.encode(PROMPT)
    attribution = direct_logit_attribution(lm, ids)
    assert abs(attribution.total - attribution.logit) <= 1e-3
    assert len(attribution.heads) == lm.config.n_layer and len(attribution.heads[0]) == lm.config.n_head
    # Another token's logit splits too, into other terms.
    other = direct_logit_attribution(lm, ids, token_id=13)
    assert abs(other.total - other.logit) <= 1e-3 and other.heads != attribution.heads


def test_ablating_the_last_mlp_removes_exactly_its_direct_term(ckpts):
    """The last block's MLP reaches the logits only directly: switching it off moves the logit by
    its attribution term, with the final LayerNorm's scale held as it was."""
    lm = ckpts.lm("tiny")
    ids = lm.tokenizer.encode(PROMPT)
    attribution = direct_logit_attribution(lm, ids)
    last = lm.config.n_layer - 1
    term = attribution.mlp[last]
    assert abs(term) > 1e-2
    scale = {}
    with lm.hooks.subscribe("ln_final.hook_scale", lambda n, s: scale.setdefault("s", s)):
        lm.model(torch.tensor([ids]))
    with applied(lm.hooks, [Ablation("mlp", last)]):
        with lm.hooks.subscribe("ln_final.hook_scale", lambda n, s: scale["s"]):  # frozen
            ablated, _cache = lm.model(torch.tensor([ids]))
    assert abs((attribution.logit - float(ablated[0, -1, attribution.token_id])) - term) <= 1e-4


def test_patching_every_position_at_block_0_restores_the_clean_logits(tiny_lm):
    clean_ids = tiny_lm.tokenizer.encode("The capital of France is")
    corrupted_ids = tiny_lm.tokenizer.encode("The capital of Germany is")
    assert len(clean_ids) == len(corrupted_ids)
    clean, clean_logits = residuals(tiny_lm, clean_ids)
    restored = patched_logits(tiny_lm, corrupted_ids, 0, list(range(len(clean_ids))), clean)
    assert torch.equal(restored, clean_logits)


def test_patching_heatmap_is_one_where_the_prompts_differ_at_block_0(tiny_lm):
    clean_ids = tiny_lm.tokenizer.encode("The capital of France is")
    corrupted_ids = tiny_lm.tokenizer.encode("The capital of Germany is")
    differ = [i for i, (a, b) in enumerate(zip(clean_ids, corrupted_ids)) if a != b]
    # A random-weight model may predict the same token for both: measure against its runner-up.
    _residual, clean_logits = residuals(tiny_lm, clean_ids)
    rival = int(torch.topk(clean_logits, 2).indices[1])
    calls = []
    result = patch_residual_stream(tiny_lm, clean_ids, corrupted_ids, rival=rival, progress=lambda d, t: calls.append((d, t)))
    assert result.corrupted_answer == rival and result.clean_diff != result.corrupted_diff
    n = tiny_lm.config.n_layer * len(clean_ids)
    assert calls[-1] == (n, n) and len(calls) == n
    # At block 0 only the differing position carries the difference: patching it is the whole story.
    row = result.restored[0]
    assert all(abs(row[p] - 1) < 1e-4 for p in differ)
    assert all(abs(row[p]) < 1e-4 for p in range(len(row)) if p not in differ)


def test_patching_refuses_prompts_of_different_lengths(tiny_lm):
    with pytest.raises(PatchingError, match="same number of tokens"):
        patch_residual_stream(tiny_lm, [1, 2, 3], [1, 2])


@pytest.mark.parametrize("bad", [-1, 50257, 2.0, "3", True, torch.tensor([1, 2])])
def test_a_token_id_outside_the_vocabulary_is_refused_not_read_from_the_end(tiny_lm, bad):
    """-1 would silently be the last token through indexing, 50257 a builtin IndexError."""
    from gpt2viz.errors import InputError

    ids = tiny_lm.encode_prompt(PROMPT)
    with pytest.raises(InputError, match=r"token_id must be a token id from 0 to 50256, got") as refused:
        direct_logit_attribution(tiny_lm, ids, bad)
    assert isinstance(refused.value, ValueError)
    with pytest.raises(InputError, match=r"rival must be a token id from 0 to 50256"):
        patch_residual_stream(tiny_lm, ids, ids, rival=bad)
    with pytest.raises(InputError, match="id 99999 is outside the vocabulary"):
        direct_logit_attribution(tiny_lm, [1, 99999])
    with pytest.raises(InputError, match="id -1 is outside the vocabulary"):
        patch_residual_stream(tiny_lm, ids, [*ids[:-1], -1])


def test_a_token_id_may_be_any_integer_kind(tiny_lm):
    import numpy as np

    ids = tiny_lm.encode_prompt(PROMPT)
    want = direct_logit_attribution(tiny_lm, ids, 5).logit
    for same in (np.int64(5), torch.tensor(5), torch.tensor([5])):
        assert direct_logit_attribution(tiny_lm, ids, same).logit == want


def test_ablate_on_the_command_line_is_recorded_and_replays(tmp_path, capsys):
    import json

    import trace_schema
    from gpt2viz.cli import main
    from gpt2viz.trace import load

    plain, edited = tmp_path / "plain.json", tmp_path / "edited.json"
    assert main(["Hello there", "--model", "tiny", "--json", str(plain), "--generate", "6"]) == 0
    assert main(["Hello there", "--model", "tiny", "--json", str(edited), "--generate", "6",
                 "--ablate", "L0H1", "--ablate", "L0.mlp:mean"]) == 0
    doc = json.loads(edited.read_text())
    trace_schema.validate(doc)
    assert doc["interventions"] == ["L0H1", "L0.mlp:mean"] and json.loads(plain.read_text())["interventions"] == []
    assert load(edited).interventions == ["L0H1", "L0.mlp:mean"]
    # The edited run is the bundled model's own run with those parts off, not the plain one.
    assert doc["generation"]["ids"] != json.loads(plain.read_text())["generation"]["ids"]
    doc["interventions"] = ["L99"]
    edited.write_text(json.dumps(doc))
    from gpt2viz.trace import TraceFileError

    with pytest.raises(TraceFileError, match="blocks 0 to 6"):
        load(edited)
    capsys.readouterr()
    for args, message in [(["--ablate", "L9"], "--ablate L9: the model has blocks 0 to 6"),
                          (["--ablate", "Q"], "--ablate 'Q' is not an ablation")]:
        assert main(["--model", "tiny", "--json", str(tmp_path / "x.json"), *args]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_the_mlp_stage_records_each_top_neuron_as_a_key_value_memory(tiny_lm):
    """pre: the key's match (c_fc row · input + bias); value: GELU of it; promotes: the tokens
    its c_proj row, scaled by the value, raises most through ln_f (centred, times γ: the stream's
    scale aside, as direct logit attribution takes it) and the tied unembedding."""
    from gpt2viz.trace import trace_prompt

    trace = trace_prompt(tiny_lm, PROMPT)
    event = trace.event("blocks.1.mlp.hook_post")
    ids = torch.tensor([tiny_lm.tokenizer.encode(PROMPT)])
    seen = {}
    with tiny_lm.hooks.subscribe("blocks.1.mlp.hook_pre", lambda n, h: seen.setdefault("pre", h.clone())):
        tiny_lm.model(ids)
    mlp = tiny_lm.model.h[1].mlp
    wte = tiny_lm.model.wte.weight
    for neuron in event["top_neurons"][:3]:
        n = neuron["index"]
        pre = float(seen["pre"][0, -1, n])
        assert neuron["pre"] == pytest.approx(pre, abs=1e-4)
        assert neuron["value"] == pytest.approx(float(torch.nn.functional.gelu(torch.tensor(pre), approximate="tanh")), abs=1e-4)
        row = mlp.c_proj.weight[n]
        writes = neuron["value"] * (((row - row.mean()) * tiny_lm.model.ln_f.weight) @ wte.T)
        assert [t["id"] for t in neuron["promotes"]] == torch.topk(writes, 3).indices.tolist()


def test_prediction_changes_cover_both_runs_top_tokens(tiny_lm):
    from gpt2viz.interventions import prediction_changes

    ids = tiny_lm.tokenizer.encode(PROMPT)
    ablations = [Ablation("block", 0)]
    changes = prediction_changes(tiny_lm, ids, ablations, k=3)
    plain, _cache = tiny_lm.model(torch.tensor([ids]))
    edited = ablated_logits(tiny_lm, ids, ablations)
    p_before, p_after = torch.softmax(plain[0, -1].double(), -1), torch.softmax(edited[0, -1].double(), -1)
    assert [c.token_id for c in changes[:3]] == torch.topk(p_after, 3).indices.tolist()
    assert [c.rank for c in changes] == [1, 2, 3] + [None] * (len(changes) - 3)  # the rest: the model's own top
    assert set(torch.topk(p_before, 3).indices.tolist()) <= {c.token_id for c in changes}
    for c in changes:
        assert c.before == pytest.approx(float(p_before[c.token_id]), abs=1e-9)
        assert c.after == pytest.approx(float(p_after[c.token_id]), abs=1e-9)


@pytest.mark.parametrize("decode", [True, False])
def test_a_generation_step_s_pass_uses_the_mean_the_generation_used(bundled, decode):
    """The TUI opens a generated step's forward pass (gpt2viz.tui.session.record_pass): under a
    mean ablation its pass must average the generation's prompt, as the step itself did, not the
    prompt and the tokens generated before the step. Its prediction is then the step's choice."""
    from gpt2viz.tui.facts import final_choice
    from gpt2viz.tui.session import record_pass

    prompt = bundled.tokenizer.encode("ROMEO:")
    ablations = [Ablation.parse("L3.mlp:mean"), Ablation.parse("L2H5:mean")]
    with applied(bundled.hooks, ablations):
        made = bundled.generate(prompt, 24, use_cache=decode).token_ids
    mismatched = []
    # Averaging the prompt and the tokens made before the step (the bug this guards) changes the
    # choice at steps 7 and 13 of both generations; step 1 has made one token only.
    for step in (1, 7, 13):
        ids = prompt + made[:step]
        trace = record_pass(bundled, ids, 5, decode=decode, ablations=ablations, prompt_length=len(prompt))
        if final_choice(trace)[0] != made[step]:
            mismatched.append(step)
    assert mismatched == [] and trace.interventions == ["L3.mlp:mean", "L2H5:mean"]


def test_the_before_after_table_numbers_only_the_edited_pass_s_ranks():
    """A learner's walk: rows 6 to 8 (the model's own top tokens that fell out of the edited top 5)
    were numbered on as if ranks, a change that rounds to nothing read '−0.0 pp', 'L3H0:mean
    switched off' did not say the head kept its mean, and 'the prediction below' stood under it."""
    from gpt2viz.tui.widgets.before_after import before_after_lines, change_text

    changes = [{"text": "␣a", "before": 0.10, "after": 0.30, "rank": 1}, {"text": "␣b", "before": 0.0352, "after": 0.03519, "rank": 2},
               {"text": ",", "before": 0.0301, "after": 0.0051, "rank": None}]
    text = str(before_after_lines(["L3H0:mean"], changes, "u", "U", 100))
    lines = text.splitlines()
    assert "The prediction on show is not the model's own answer" in text and "below" not in text
    assert "A part marked :mean is not zeroed: its output is replaced by its mean over the prompt's positions." in text
    assert lines[-4].startswith(" 1 ␣a") and lines[-3].startswith(" 2 ␣b") and lines[-3].endswith(" 0.0 pp")
    assert lines[-2] == "The model's own top tokens that fell out of the edited pass's top 2:"
    assert lines[-1].startswith("   ,") and lines[-1].endswith("−2.5 pp")
    assert change_text(0.0352, 0.03519) == "0.0 pp" and change_text(0.1, 0.1004) == "0.0 pp"
