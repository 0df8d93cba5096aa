"""The one place gpubench's version is written: the package metadata (pyproject.toml's
``[tool.hatch.version]``), ``gpubench_sdk.__version__``, the stored runs and the telemetry
scope all read it from here."""

__version__ = "0.1.0"
