"""Notices (gpt2viz/trace/notices.py): what a run tells its reader besides its numbers.

Each is one clause without a final full stop; the command line prints it after "gpt2viz: ",
the app in a "Note" paragraph. Counts come with thousands separators, ids as they are.
"""

TEXT = {
    "notice.hub_unreachable": (
        "the Hugging Face hub is unreachable, so this runs the small bundled model 'tiny' (trained by "
        "gpt2viz, not GPT-2's weights); to get real GPT-2, load the model 'gpt2' once while connected "
        "to the internet (a 548 MB download)"
    ),
    "notice.non_finite_weights": "warning: tensor {tensor} contains NaN or infinite values; outputs will be garbage",
    "notice.prompt_empty": "the prompt is empty, so the model starts from <|endoftext|> (id {eos_id})",
    "notice.prompt_cut": "the prompt has {tokens} tokens; only the last {n_ctx} fit in the context and are used",
    "notice.generation_cut": (
        "the context holds {n_ctx} tokens and the prompt has {prompt_tokens}, so generation stopped "
        "after {made} of {asked} new tokens"
    ),
}
