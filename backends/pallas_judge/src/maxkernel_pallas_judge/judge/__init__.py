"""The judge: checks run inside worker processes (``*_job`` modules) and verdicts made in the parent."""
