"""JSON merge patch (RFC 7396), how a control plane's ``PATCH`` changes a resource (Azure
Resource Manager's updates, Kubernetes' ``application/merge-patch+json``): for an emulator
that keeps the resource as JSON and applies what the client sends."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied (RFC 7396, section 2): objects merge key by key,
    ``null`` removes a key, any other value (arrays included) replaces it. Neither argument
    is changed; the result shares nothing with ``patch``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged
