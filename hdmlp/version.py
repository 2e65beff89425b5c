"""hdmlp's version (the one pyproject.toml states), where modules below the package can read it."""
__version__ = "0.1.0"
