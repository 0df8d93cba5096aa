"""HTTP as gpubench measures it: the measuring client on aiohttp, prepared calls, streams
and SSE, spans, and the mapping of statuses and transport failures to the error tree.
Imports only ``_base``."""
