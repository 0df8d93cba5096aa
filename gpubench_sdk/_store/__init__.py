"""The results store: SQLite schema, the writer that commits each request as it completes,
readers and exports. Imports only ``_base``."""
