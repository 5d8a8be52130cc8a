"""The widgets of the step-through: navigator, side panel, stage view and its pictures."""
