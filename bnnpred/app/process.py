"""The CPU settings a command makes for its own process (``bnnpred train``, ``bnnpred eval`` and each job of a
sweep): subnormals read and written as zero, and the memory a step frees kept for the next one. Neither changes a
number; both only change how fast the same arithmetic runs. The library leaves both alone: they belong to the
caller's process."""

from __future__ import annotations

import ctypes
import sys

import torch

# glibc's mallopt parameters (malloc.h) and the values set
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
HEAP_SETTINGS = {
    M_MMAP_THRESHOLD: 32 * 2**20,  # glibc's largest on 64 bits: blocks up to 32 MiB come from the heap, not mmap
    M_TRIM_THRESHOLD: 2**30,  # up to 1 GiB free at the heap's top stays mapped
    M_TOP_PAD: 64 * 2**20,  # the heap grows by 64 MiB more than asked
}


def prepare_process() -> None:
    """Both settings below, before the command's first parallel operation (see :func:`flush_subnormals`)."""
    flush_subnormals()
    keep_freed_memory()


def flush_subnormals() -> None:
    """Subnormal numbers (float32: ``|x| < 1.2e-38``) read and written as zero by this process's CPU arithmetic (the
    FTZ and DAZ flags). The prior's decay drives the weights and Adam moments that get no gradient (dead units) into
    them, and on Intel processors each product with a subnormal operand takes a microcode assist: 3c3d's training
    step ran 6x slower by epoch 15 of notes004_table2 (bench/README.md). The flags are per thread and the intra-op
    threads copy them when they start, so a command sets them before its first parallel operation (its data)."""
    torch.set_flush_denormal(True)


def keep_freed_memory() -> bool:
    """glibc's heap keeps the memory a training step frees for the next step's tensors (``HEAP_SETTINGS``); returns
    whether it was set (False off glibc).

    By default glibc maps a block above its threshold (128 KiB, raised as such blocks are freed) fresh from the
    kernel and unmaps it when freed, and it gives the heap's free top back: every step then faults its activations'
    pages in again, one kernel entry per 4 KiB page: up to a quarter of 3c3d's training step and of a banana run's
    time went to it (bench/README.md)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None)  # the process's own C library
    if not hasattr(libc, "gnu_get_libc_version"):  # musl and the others: no such parameters
        return False
    return all(libc.mallopt(parameter, value) == 1 for parameter, value in HEAP_SETTINGS.items())
