"""Names that hold across the code (tables, figures, the CLI), in one torch-free place."""

from __future__ import annotations

import re

# Per-example metrics of `interp.metrics.evaluate_examples`, in table order (docs/definitions.md).
METRICS = (
    "loss",
    "loss_first",
    "loss_cand",
    "loss_cand_first",
    "shuffle_gap",
    "shuffle_gap_full",
    "acc_first",
    "acc_cand",
    "acc_exact",
)

# a held-out split's metrics (TaskSpec.holdout_fraction): the same metrics on the pairs never trained on, logged
# beside the others under this prefix ("heldout_loss_cand")
HELDOUT_PREFIX = "heldout_"
# the hierarchy's shuffle gaps (TaskSpec.hierarchy): z1 (the cluster) or z2 (within it) swapped alone, first token
HIERARCHY_GAPS = ("shuffle_gap_z1", "shuffle_gap_z2")

_HEAD = re.compile(r"^[Ll](\d+)[Hh](\d+)$")


def head_name(layer: int, head: int) -> str:
    """`L{layer}H{head}`, both 0-indexed: the one spelling of a head everywhere."""
    return f"L{layer}H{head}"


def parse_head(name: str) -> tuple[int, int] | None:
    """(layer, head) of a head name such as "L0H3" (any case), or None if it is not one."""
    match = _HEAD.match(name.strip()) if isinstance(name, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None
