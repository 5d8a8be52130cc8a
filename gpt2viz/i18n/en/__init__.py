"""English narration templates, one module per area of the app (each with a TEXT dict)."""
