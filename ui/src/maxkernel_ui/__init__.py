"""maxkernel ui: a local web app over the run store (docs/ui.md)."""
