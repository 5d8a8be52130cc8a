"""简体中文 narration templates: the same modules, keys and placeholders as ../en."""
