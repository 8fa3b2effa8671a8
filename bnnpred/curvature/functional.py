"""A network as a function of one flat parameter vector ``θ`` ``[P]``, for ``torch.func`` transforms."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import torch
from torch import Tensor, nn
from torch.func import functional_call, jacrev, vmap


class FlatModel:
    """Wraps ``module`` so that ``f(θ, X)`` evaluates it at the flat parameters ``θ`` ``[P]``.

    The order of ``θ`` is ``module.named_parameters()``; buffers are taken from the module as they are. The module
    is in eval mode, a deterministic function of ``θ`` (batch-norm layers use their running statistics); trainers
    switch it to train mode with :meth:`training`, where batch norm normalises by the batch and updates them.

    With ``channels_last`` (the networks bnnpred builds, which allow it) a convolutional network runs on the CPU in
    the channels-last memory format (its 4-d weights and images restrided per call, ``θ``'s layout unchanged): the
    same function, whose convolutions and poolings take vectorised kernels there (3c3d, bench/README.md: a forward
    pass 1.7x, a training step 1.3x faster). Off by default: a network written with ``.view`` on a convolution's
    output cannot run so.
    """

    def __init__(self, module: nn.Module, channels_last: bool = False):
        self.module = module.eval()
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.names = [n for n, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.buffers = dict(module.named_buffers())
        self.channels_last = channels_last and any(isinstance(m, nn.Conv2d) for m in module.modules())

    @property
    def n_params(self) -> int:
        return sum(self.sizes)

    def theta(self) -> Tensor:
        """The module's current parameters as a detached flat vector ``[P]``."""
        params = dict(self.module.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names])

    def unflatten(self, theta: Tensor) -> dict[str, Tensor]:
        """``[P]`` -> ``{name: tensor}`` (differentiable views)."""
        chunks = torch.split(theta, self.sizes)
        return {n: c.view(s) for n, c, s in zip(self.names, chunks, self.shapes, strict=True)}

    @contextmanager
    def training(self) -> Iterator[None]:
        """Train mode for the duration of a ``with`` block."""
        self.module.train()
        try:
            yield
        finally:
            self.module.eval()

    def buffer_state(self) -> dict[str, Tensor]:
        """Copies of the module's buffers (batch-norm running statistics), which training changes."""
        return {name: buffer.detach().clone() for name, buffer in self.buffers.items()}

    def load_buffers(self, state: dict[str, Tensor]) -> None:
        with torch.no_grad():
            for name, value in state.items():
                self.buffers[name].copy_(value)

    def load(self, theta: Tensor) -> None:
        """Copy ``θ`` into the module's parameters."""
        with torch.no_grad():
            params = dict(self.module.named_parameters())
            for n, value in self.unflatten(theta).items():
                params[n].copy_(value)

    def __call__(self, theta: Tensor, X: Tensor) -> Tensor:
        """Outputs ``f(X; θ)`` ``[B, C]`` for inputs ``X`` ``[B, ...]``."""
        return self._call(self.unflatten(theta), X)

    def _call(self, params: dict[str, Tensor], X: Tensor) -> Tensor:
        """The module at ``params`` (and its buffers) on ``X``, channels last where asked and faster (see the class
        docstring; not under a ``torch.func`` transform, whose wrapped tensors keep the default layout)."""
        if self.channels_last and X.dim() == 4 and X.device.type == "cpu" and not _transformed():
            params = {n: p.to(memory_format=torch.channels_last) if p.dim() == 4 else p for n, p in params.items()}
            X = X.to(memory_format=torch.channels_last)  # restrided even with one channel, where both layouts agree
        return functional_call(self.module, {**params, **self.buffers}, (X,))

    def outputs_and_jacobians(self, theta: Tensor, X: Tensor) -> tuple[Tensor, Tensor]:
        """``f`` ``[B, C]`` and per-example Jacobians ``J`` ``[B, C, P]`` at ``θ``.

        Each example's Jacobian is one reverse pass per output over that example alone (``vmap`` over examples
        of ``jacrev``), so the cost is ``O(B·C·P)``, not the ``O(B²·C·P)`` of ``jacrev`` on a batch.
        """

        def f_single(th: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
            out = self(th, x.unsqueeze(0)).squeeze(0)
            return out, out

        J, f = vmap(jacrev(f_single, has_aux=True), in_dims=(None, 0))(theta, X)
        return f, J


def _transformed() -> bool:
    """Whether a ``torch.func`` transform (``vmap``, ``grad``, ``jacrev``) is running: its wrapped tensors keep the
    default memory format."""
    return torch._C._functorch.peek_interpreter_stack() is not None


class SubsetModel(FlatModel):
    """The network as a function of some of its parameters ``θ_S`` ``[P_S]`` (those called ``names``, contiguous in
    ``θ`` order), the others held at their values in ``θ*`` (the last-layer Laplace's model: notes-003 GLM-GGN-Full
    on the last layer). Every estimator that takes a :class:`FlatModel` works on it; Jacobians and layer factors
    reach only the chosen parameters."""

    def __init__(self, model: FlatModel, theta_star: Tensor, names: list[str]):
        self.module, self.buffers, self.channels_last = model.module, model.buffers, model.channels_last
        positions = [model.names.index(n) for n in names]
        if positions != list(range(positions[0], positions[0] + len(positions))):
            raise ValueError(f"the parameters {names} are not contiguous in θ order")
        self.names = list(names)
        self.shapes = [model.shapes[i] for i in positions]
        self.sizes = [model.sizes[i] for i in positions]
        self.start = sum(model.sizes[: positions[0]])
        self.stop = self.start + sum(self.sizes)
        self.fixed = {n: v for n, v in model.unflatten(theta_star).items() if n not in self.names}

    def __call__(self, theta: Tensor, X: Tensor) -> Tensor:
        return self._call({**self.fixed, **self.unflatten(theta)}, X)

    def theta(self) -> Tensor:
        raise TypeError("a SubsetModel's parameters are θ*[start:stop]; it does not read the module's")


class LinearizedModel:
    """A network's linearisation at ``θ*`` on its ``N`` training inputs, addressed by row index:
    ``f_lin(θ, i) = f(x_i; θ*) + J(x_i; θ*)(θ − θ*)`` (the GLM of notes-004 eq. 5; notes-000 §3).

    Built from ``f*`` ``[N, C]`` and ``J*`` ``[N, C, P]``; it quacks like :class:`FlatModel` with inputs
    ``idx`` ``[B]`` (int64 row numbers), so every estimator that linearises a network works on it unchanged. ``J*``
    may be held in a lower precision than ``θ*`` (float32 in a float64 run: half the memory; ``J*(θ − θ*)`` is
    then formed in that precision and returned in ``θ``'s).
    """

    def __init__(self, f_star: Tensor, J_star: Tensor, theta_star: Tensor):
        self.f_star, self.J_star, self.theta_star = f_star, J_star, theta_star

    @property
    def n_params(self) -> int:
        return self.theta_star.numel()

    def __repr__(self) -> str:
        """Stable across processes (digests key checkpoints by it): the shapes and a checksum of ``f*``."""
        fingerprint = hashlib.sha256(self.f_star.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
        return (f"LinearizedModel(N={len(self.f_star)}, C={self.f_star.shape[-1]}, P={self.n_params}, "
                f"J={self.J_star.dtype}, f*={fingerprint})")

    def training(self) -> AbstractContextManager[None]:
        """A linear model has no train mode."""
        return nullcontext()

    def buffer_state(self) -> dict[str, Tensor]:
        """A linear model has no buffers."""
        return {}

    def load_buffers(self, state: dict[str, Tensor]) -> None:
        """Nothing to load: a linear model has no buffers."""

    def __call__(self, theta: Tensor, idx: Tensor) -> Tensor:
        """``f_lin(θ, idx)`` ``[B, C]``."""
        return self.outputs_and_jacobians(theta, idx)[0]

    def outputs_and_jacobians(self, theta: Tensor, idx: Tensor) -> tuple[Tensor, Tensor]:
        """``f_lin(θ, idx)`` ``[B, C]`` and its Jacobians, the stored ``J*[idx]`` ``[B, C, P]`` (no autodiff; a view,
        not a copy, when ``idx`` is a run of consecutive rows, as in full-batch chunks)."""
        J, f_star = self._rows(self.J_star, idx), self._rows(self.f_star, idx)
        return f_star + (J @ (theta - self.theta_star).to(J.dtype)).to(f_star.dtype), J

    @staticmethod
    def _rows(stored: Tensor, idx: Tensor) -> Tensor:
        first = int(idx[0]) if len(idx) else 0
        if len(idx) and int(idx[-1]) - first + 1 == len(idx) and bool((idx.diff() == 1).all()):
            return stored[first : first + len(idx)]
        return torch.index_select(stored, 0, idx)
