"""SLANG's products with the gradient rows of one linear layer, in both of ``LinearFactorRows``' forms: one product
with ``d_out`` rows, or ``d_out`` products with ``d_in`` rows (``gradient_rows.per_output``), for the layer shapes
and column counts ``r`` of the table in bench/README.md (SLANG). Random factors, K = 100 rows, float32, one thread,
milliseconds, best of 20; each form's results are checked against the other's first.

    python bench/layer_products.py

Results are recorded in bench/README.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

from bnnpred.inference import gradient_rows
from bnnpred.inference.gradient_rows import LinearFactorRows, LinearLayer

K = 100
CASES = [((784, 100), r) for r in (1, 8, 16, 32, 64)] + [((1000, 100), 32), ((100, 10), 32), ((100, 100), 32),
                                                          ((1000, 1000), 32)]


def layer_rows(d_in: int, d_out: int) -> LinearFactorRows:
    """``G`` ``[K, d_out·d_in]`` of one bias-free layer, as random factors."""
    gen = torch.Generator().manual_seed(0)
    layer = LinearLayer(nn.Linear(d_in, d_out, bias=False), slice(0, d_in * d_out), None)
    return LinearFactorRows([layer], [torch.randn(K, d_in, generator=gen)], [torch.randn(K, d_out, generator=gen)],
                            d_in * d_out)


@contextmanager
def form(per_output: bool) -> Iterator[None]:
    """Every layer's products in one form."""
    chosen = gradient_rows.per_output
    gradient_rows.per_output = lambda layer, columns: per_output
    try:
        yield
    finally:
        gradient_rows.per_output = chosen


def best_ms(fn: Callable[[], object], repeats: int = 20) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def main() -> None:
    torch.set_num_threads(1)
    print("| layer, r | G^T V: one product / per output | G U: one product / per output |")
    print("|---|---|---|")
    for (d_in, d_out), r in CASES:
        rows = layer_rows(d_in, d_out)
        gen = torch.Generator().manual_seed(1)
        V, U = torch.randn(K, r, generator=gen), torch.randn(d_in * d_out, r, generator=gen)
        cells = []
        for product, operand in (("transpose_times", V), ("times", U)):
            run = getattr(rows, product)
            with form(False):
                reference, one = run(operand), best_ms(lambda run=run, operand=operand: run(operand))
            with form(True):
                torch.testing.assert_close(run(operand), reference, rtol=1e-4, atol=1e-3)
                per = best_ms(lambda run=run, operand=operand: run(operand))
            cells.append(f"{one:.2f} / {per:.2f}")
        print(f"| {d_in} → {d_out}, r = {r} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
