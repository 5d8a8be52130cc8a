"""What if: the parts of the model a learner switches off in the step-through, and what changed."""

TEXT = {
    "whatif.edited": (
        "This pass is edited: {parts} switched off. The prediction below is not the model's own answer; "
        "{undo} undoes the last change, {clear} clears them all."
    ),
    "whatif.changed": (
        "Before → after: '{before}' was the top token at {before_p}; with the change '{after}' is, at {after_p}."
    ),
    "whatif.same": (
        "Before → after: '{token}' stays the top token, {before_p} before and {after_p} after."
    ),
}
