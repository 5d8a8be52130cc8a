"""The screens: loading, step-through, prompt editing and help."""
