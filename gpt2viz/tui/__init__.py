"""The Textual app: a step-through of one GPT-2 forward pass, rendered from a recorded Trace."""
