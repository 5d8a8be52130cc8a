"""How whole sentences follow each other in one paragraph (`gpt2viz.i18n.sentences`)."""

TEXT = {
    # What goes between two sentences of a paragraph: English puts a space after the full stop.
    "sentences.gap": " ",
}
