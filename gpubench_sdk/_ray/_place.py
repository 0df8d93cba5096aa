"""Where the workers can go: whether a placement could ever be held, and how many nodes are up."""

from __future__ import annotations

from typing import Any


def feasible(
    nodes: list[dict[str, Any]],
    bundle: dict[str, float],
    labels: dict[str, str],
    placement: str,
    n: int,
) -> bool:
    """Whether ``n`` bundles could ever be placed on the alive ``nodes`` (``ray.nodes()``:
    total resources, not what is free now) carrying ``labels``, under ``placement``."""
    per_node = []
    for node in nodes:
        have = node.get("Resources", {})
        node_labels = node.get("Labels", {}) or {}
        if not node.get("Alive") or any(node_labels.get(k) != v for k, v in labels.items()):
            continue
        per_node.append(
            min(int(have.get(r, 0.0) // amount) for r, amount in bundle.items() if amount > 0)
            if any(amount > 0 for amount in bundle.values())
            else n
        )
    if placement == "strict_spread":
        return sum(1 for k in per_node if k >= 1) >= n
    if placement == "strict_pack":
        return any(k >= n for k in per_node)
    return sum(per_node) >= n


def alive_nodes(ray: Any) -> int:
    return max(1, sum(1 for n in ray.nodes() if n.get("Alive")))
