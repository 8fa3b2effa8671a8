"""bench/gpu/stages.py, the script a lent GPU runs (issue 35 item 4), at its tiny size on the CPU: every stage is
timed and the table names the device."""

import sys

import torch

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "bench" / "gpu"))
import stages  # noqa: E402


def test_the_stage_table_times_every_stage_on_the_cpu():
    text = stages.table(torch.device("cpu"), stages.TINY)
    assert text.startswith("Device: CPU, ")
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| 3c3d") or line.startswith("| MLP")]
    assert [row[0] for row in rows] == [
        "| 3c3d training step, plain PyTorch loop", "| 3c3d training step, bnnpred MAP trainer",
        "| 3c3d Kronecker fit", "| 3c3d glm predictive, 4 samples", "| 3c3d nn predictive, 2 samples",
        "| 3c3d gp conditioning on M = 8", "| 3c3d gp predictive, 4 samples", "| MLP full GGN fit (P = 4,706, N = 64)"]
    assert all(float(row[2].removesuffix(" ms")) > 0 for row in rows)
    assert "bnnpred's MAP step / the plain loop's: " in text
