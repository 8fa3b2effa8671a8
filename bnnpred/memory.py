"""How much memory a device has free, for checks that refuse a computation before it starts rather than after the
machine runs out: on the CPU the machine's MemAvailable (``/proc/meminfo``) or, when less, what the job's own memory
limit still allows (its cgroup's, v2 or v1: a container's, or a SLURM job's ``--mem``); on CUDA the driver's free
memory."""

from __future__ import annotations

from pathlib import Path

import torch

CGROUP = Path("/sys/fs/cgroup")
# (limit, usage) files of a cgroup v2 and of a v1 memory controller; v1 writes a number near 2^63 for "no limit"
CGROUP_FILES = (("memory.max", "memory.current"), ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"))
NO_LIMIT = 2**60


def available_bytes(device: torch.device) -> int | None:
    """Bytes free for new tensors on ``device``; None where it cannot be read (then nothing is refused)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    machine, job = machine_available(), cgroup_available()
    return min((b for b in (machine, job) if b is not None), default=None)


def cgroup_available(root: Path | None = None) -> int | None:
    """Bytes the job's cgroup (under ``root``, by default :data:`CGROUP`) still allows, its limit less its usage;
    None where it sets no limit or none can be read."""
    root = CGROUP if root is None else root
    for limit_file, usage_file in CGROUP_FILES:
        try:
            limit = (root / limit_file).read_text().strip()
            usage = int((root / usage_file).read_text())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= NO_LIMIT:
            return None
        return max(int(limit) - usage, 0)
    return None


def machine_available() -> int | None:
    """``/proc/meminfo``'s MemAvailable in bytes, or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
    except OSError:
        return None
    value = fields.get("MemAvailable")
    return None if value is None else int(value.split()[0]) * 1024


def gigabytes(n_bytes: float) -> str:
    return f"{n_bytes / 1e9:.1f} GB"
