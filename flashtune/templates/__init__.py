"""Jinja templates of Triton source (``*.py.jinja``), loaded with importlib.resources."""
