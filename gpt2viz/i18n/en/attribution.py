"""What "which parts wrote the answer" says: direct logit attribution and activation patching
(gpt2viz/tui/attribution_narration.py decides which sentences apply and formats every number)."""

TEXT = {
    "attribution.edited": (
        "This pass is edited: {parts} switched off (what-if). Every number on this screen is the edited "
        "pass's, not the model's own: the logits split here, and both prompts' runs when patching."
    ),
    "attribution.edited_heads": (
        "This pass is edited: {parts} switched off (what-if). The heads are scored with those parts off, "
        "so the grids are the edited model's, not the model's own."
    ),
    # -- direct logit attribution
    "attribution.dla.what": (
        "The logit of {token} at the last position ({position}, {last}) is {logit}: the model's candidate "
        "number {rank}, with probability {prob}. It splits into one term per part of the network: what that "
        "part wrote into the residual stream at this position, through the final LayerNorm (its scale "
        "frozen at this pass's value) and dotted with the row of wte for {token}, which the LM head reads."
    ),
    # -- heads at work ----------------------------------------------------------------------------
    "attribution.heads.intro": (
        "Some heads do a job with a name. To find them the model reads {n} random tokens twice over ({T} "
        "positions with the end-of-text token in front), and each head is scored as TransformerLens's head "
        "detector scores it: the share of its attention that lands where the job looks. Previous token: "
        "the position just before. Duplicate token: an earlier copy of the same token. Induction: the token "
        "that came after that copy, which is how a model continues a sequence it has seen. A head that did "
        "the induction job perfectly would score {best} here; one spreading its attention evenly, {chance}. "
        "Heads are named as TransformerLens names them: {name} is head {head} of block {layer}. {key} shows "
        "the next grid."
    ),
    "attribution.heads.found": "{job}: {heads} (a perfect head: {best}; spread evenly: {chance}).",
    "attribution.heads.none": (
        "{job}: no head does it here. The best, {head}, scores {score}, against {best} for a perfect head and "
        "{chance} for one spreading its attention evenly."
    ),
    "attribution.heads.sink": (
        "Attention sink, in this pass: the last position ({token}) gives more than half of its attention to "
        "position 0 ({first}) in {n} of the {total} heads, {share} in {head}. A head with nothing useful to "
        "read puts its weight there, where it changes little."
    ),
    "attribution.heads.sink_none": (
        "Attention sink, in this pass: no head gives more than half of the last position's ({token}) "
        "attention to position 0 ({first}); the most is {share}, in {head}."
    ),
    "attribution.heads.sink_single": (
        "Attention sink: with one position, every head gives it all of its attention; a longer prompt shows "
        "where the weight goes."
    ),
    "attribution.dla.what_llama": (
        "The logit of {token} at the last position ({position}, {last}) is {logit}: the model's candidate "
        "number {rank}, with probability {prob}. It splits into one term per part of the network: what that "
        "part wrote into the residual stream at this position, through the final RMSNorm (its scale "
        "frozen at this pass's value) and dotted with the LM head's row for {token}."
    ),
    "attribution.dla.grid_llama": (
        "In the grid each row is a block: columns 0 to {last_head} are its heads (each through its slice of "
        "o_proj), column {mlp} its MLP. This model has no biases, no position table and no β in its norms, "
        "so nothing else writes. Orange adds to the logit, blue takes away; the colours run to ±{scale}."
    ),
    "attribution.dla.groups_llama": (
        "All heads together wrote {heads}, all MLPs {mlps} and the token embedding {embedding}."
    ),
    "attribution.dla.grid": (
        "In the grid each row is a block: columns 0 to {last_head} are its heads, column {mlp} its MLP and "
        "column {bias} the bias of its attention output (c_proj), added whatever the heads do. Orange adds to "
        "the logit, blue takes away; the colours run to ±{scale}."
    ),
    "attribution.dla.sum": (
        "The terms add up to {total}; the logit the model computed is {logit}. They differ by {diff}, "
        "within {tolerance}: with the scale frozen the split is exact, up to rounding."
    ),
    "attribution.dla.sum_off": (
        "The terms add up to {total}; the logit the model computed is {logit}. They differ by {diff}, more "
        "than {tolerance}: the rounding of this number format ({dtype}) adds up over the terms."
    ),
    "attribution.dla.largest": (
        "The largest terms: {first} ({first_value}), {second} ({second_value}) and {third} "
        "({third_value}). The most negative: {lowest} ({lowest_value})."
    ),
    "attribution.dla.groups": (
        "All heads together wrote {heads}, all MLPs {mlps}, the token and position embeddings {embeddings}, "
        "the attention biases {biases} and the final LayerNorm's β {ln_bias}."
    ),
    "attribution.dla.direct": (
        "These are direct effects only: what a part writes and a later block reads and rewrites is "
        "credited to that later block. A small term does not mean the part does not matter."
    ),
    "attribution.dla.choose": "{key} attributes the model's next candidate instead (the top {n} take turns).",
    # -- activation patching
    "attribution.patch.idle": (
        "Activation patching asks where the difference between two prompts lives. The clean prompt is "
        "this pass's: {clean} ({tokens}). Type a corrupted prompt with the same number of tokens in the "
        "box, changing a word the answer depends on, and press {enter}. The model then runs the corrupted "
        "prompt once for every block and position, each time with the residual stream entering that block "
        "at that position taken from the clean run."
    ),
    "attribution.patch.answers": (
        "The clean prompt predicts {clean}, the corrupted one {corrupted}. The clean answer's lead (its "
        "logit minus that of {corrupted}) is {clean_diff} in the clean run and {corrupted_diff} in the "
        "corrupted run."
    ),
    "attribution.patch.cells": (
        "Each cell is the share of that change one patch brings back: 1 means the clean answer's lead is "
        "fully restored, 0 that nothing changed (a share can fall below 0 or rise above 1). Rows are the "
        "block the patch enters, columns the positions."
    ),
    "attribution.patch.strongest": "The strongest cell is block {block} at position {position} ({token}): {restored}.",
    "attribution.patch.moves": (
        "Entering block 0, patching position {position} ({token}), where the prompts differ, brings back "
        "{first}; entering the last block ({last_block}), patching the last position ({last_token}) brings "
        "back {last}."
    ),
}
