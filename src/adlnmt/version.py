"""The package version (the one written into pyproject.toml, results and the HTTP API)."""

__version__ = "0.1.0"
