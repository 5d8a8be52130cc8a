"""Which tokens the bundled model's training text held, and the untrained rows it marks.

A row of wte whose token never occurred in the training text was never trained on that token
(issue 36: the key-value memory view on `tiny` listed '␣Soviet ␣MMR' without saying so)."""

from __future__ import annotations

import copy
import json

import pytest
from trace_schema import validate

from gpt2viz.errors import TraceError
from gpt2viz.model import training_tokens
from gpt2viz.model.sources import bundled_dir
from gpt2viz.trace import trace_prompt
from gpt2viz.trace.checks import check_document
from gpt2viz.trace.jsonio import dumps
from gpt2viz.tui.narration import narrate
from gpt2viz.tui.stages import Stage


def test_the_bundled_model_knows_its_training_tokens(bundled, tiny_lm):
    """19,053 distinct tokens of the 1,478,021 its model card counts, the end-of-text token
    among them; a checkpoint without the file knows none."""
    card = (bundled_dir() / "MODEL_CARD.md").read_text(encoding="utf-8")
    about = json.loads((bundled_dir() / training_tokens.FILE).read_text(encoding="utf-8"))["about"]
    assert "1,478,021" in card and "1,478,021" in about
    ids = bundled.training_tokens
    assert len(ids) == 19_053 and 50256 in ids
    encode = bundled.tokenizer.encode
    assert encode(" the")[0] in ids and encode(" Romeo")[0] in ids
    assert encode(" Soviet")[0] not in ids and encode(" MMR")[0] not in ids
    assert tiny_lm.training_tokens is None


def test_an_encoded_bitmap_reads_back(tmp_path):
    ids = {0, 7, 8, 255, 50256}
    (tmp_path / training_tokens.FILE).write_text(training_tokens.encode(ids, 50257, "test"), encoding="utf-8")
    assert training_tokens.read(tmp_path, 50257) == ids
    assert training_tokens.read(tmp_path, 50304) is None  # another vocabulary: not this file's


def test_a_trace_marks_the_untrained_tokens_a_neuron_raises(bundled, tiny_lm):
    trace = trace_prompt(bundled, bundled.tokenizer.encode("ROMEO: But soft, what light"))
    marked = unmarked = 0
    for layer in range(bundled.config.n_layer):
        for neuron in trace.event(f"blocks.{layer}.mlp.hook_post")["top_neurons"]:
            for token in neuron["promotes"]:
                trained = token["id"] in bundled.training_tokens
                assert token.get("trained", True) is trained and token.get("trained") is not True
                marked += not trained
                unmarked += trained
    assert marked and unmarked  # block 0's strongest neuron raises '␣Northwest', '657', 'Featured'
    doc = json.loads(dumps(trace))
    validate(doc)
    check_document(doc)
    bad = copy.deepcopy(doc)
    event = next(e for e in bad["events"] if e["stage"] == "blocks.0.mlp.hook_post")
    event["top_neurons"][0]["promotes"][0]["trained"] = "no"
    with pytest.raises(TraceError, match="trained"):
        check_document(bad)
    # A random checkpoint's trace has no marks (nothing is known of its training).
    other = trace_prompt(tiny_lm, tiny_lm.tokenizer.encode("The meaning of life is"))
    assert all("trained" not in t for n in other.event("blocks.0.mlp.hook_post")["top_neurons"] for t in n["promotes"])
    # The MLP stage says which of the tokens its strongest neuron raises were never trained.
    first = trace.event("blocks.0.mlp.hook_post")["top_neurons"][0]
    untrained = [t["text"] for t in first["promotes"] if t.get("trained") is False]
    text = narrate(trace, Stage("mlp", 0), generate_key="g").text
    assert untrained and "never occur in the text this model was trained on" in text
    assert all(f"'{t}'" in text.split("never occur")[0].rsplit("Of these,", 1)[1] for t in untrained)
    # The MLP picture marks them, and says what the mark means.
    from gpt2viz.tui.widgets.pictures import UNTRAINED_MARK, MLPActivity

    picture = MLPActivity()
    picture._room = 76
    drawn = str(picture.build(trace, Stage("mlp", 0), 0))
    assert all(f"{t}{UNTRAINED_MARK}" in drawn for t in untrained)
    assert drawn.count(UNTRAINED_MARK) == 1 + sum(
        t.get("trained") is False for n in trace.event("blocks.0.mlp.hook_post")["top_neurons"] for t in n["promotes"]
    )
    assert f"{UNTRAINED_MARK} never in this model's training text" in drawn
