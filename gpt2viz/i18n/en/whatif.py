"""What if: the parts of the model a learner switches off in the step-through, and what changed."""

TEXT = {
    "whatif.edited": (
        "This pass is edited: {parts} switched off. The prediction on show is not the model's own answer; "
        "{undo} undoes the last change, {clear} clears them all."
    ),
    "whatif.mean": "A part marked :mean is not zeroed: its output is replaced by its mean over the prompt's positions.",
    "whatif.dropped": "The model's own top tokens that fell out of the edited pass's top {k}:",
    "whatif.changed": (
        "Before → after: '{before}' was the top token at {before_p}; with the change '{after}' is, at {after_p}."
    ),
    "whatif.same": (
        "Before → after: '{token}' stays the top token, {before_p} before and {after_p} after."
    ),
}
