"""The runner: targets, the load a scenario drives, the send path, deadlines, telemetry,
resources and multi-process runs. Imports scenarios, cost, the registry and everything below."""
