"""What selects the offline synthesizer: its provider's name and aliases (a module of its own, so that loading the
plugin imports no jax)."""

#: ``--provider synthesizer`` (``offline``, its first name, still does)
NAME = "synthesizer"
ALIASES = ("offline",)
