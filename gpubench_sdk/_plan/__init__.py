"""The plan: the TOML model (``RunConfig``), the thresholds grammar, regions fan-out, and
``build_run`` that turns a plan into a runner. Imports the runner and everything below."""
