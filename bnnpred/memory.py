"""How much memory a device has free, for checks that refuse a computation before it starts rather than after the
machine runs out (``/proc/meminfo``'s MemAvailable on the CPU, the driver's free memory on CUDA)."""

from __future__ import annotations

import torch


def available_bytes(device: torch.device) -> int | None:
    """Bytes free for new tensors on ``device``; None where it cannot be read (then nothing is refused)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
    except OSError:
        return None
    value = fields.get("MemAvailable")
    return None if value is None else int(value.split()[0]) * 1024


def gigabytes(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB"
