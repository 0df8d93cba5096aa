"""The plugin contract: ``Provider``, ``Workload``, ``Capabilities`` and billing models,
the input map, and the kit a plugin builds with. Imports ``_transport`` and ``_base``."""
