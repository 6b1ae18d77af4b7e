"""Runnable examples: ``python -m eagle.examples.<name>`` (see each module's docstring)."""
