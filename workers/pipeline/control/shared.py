"""What the control stage's declarations share (no torch here): the check of a fixed-mean allocation's bounds."""

from __future__ import annotations


def check_mean_within_bounds(cfg, keeper: str) -> None:
    """rollout.group_size, the mean a fixed-total allocation keeps, must lie within control.min_group/max_group.

    A ValueError that names the bound crossed, so that the config's errors file it under that field."""
    c, size = cfg.control, cfg.rollout.group_size
    if not c.min_group <= size <= c.max_group:
        bound = "control.min_group" if size < c.min_group else "control.max_group"
        raise ValueError(
            f"{bound}: rollout.group_size {size} must lie within control.min_group {c.min_group} "
            f"and control.max_group {c.max_group}, the mean {keeper} keeps"
        )
