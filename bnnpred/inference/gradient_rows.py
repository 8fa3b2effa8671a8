r"""The per-example gradient rows ``G`` ``[K, P]`` of a SLANG step (``K = S·M``: one row per draw and example, draw
major), as an operator: SLANG needs only ``G Gᵀ``, ``G Q``, ``Gᵀ V``, ``diag(GᵀG)`` and the row sum.

- :class:`DenseRows`: ``G`` formed by ``vmap(grad)``, for any network.
- :class:`LinearFactorRows`: for a network whose parameters all sit in ``nn.Linear`` layers applied once per
  forward (MLPs), ``G`` is never formed. Example ``i``'s gradient in layer ``l`` is ``vec(δ_il a_ilᵀ)`` for the
  weight and ``δ_il`` for the bias, with ``a_il`` the layer's input and ``δ_il = ∂ log p_i / ∂ z_il`` the gradient at
  its output (Goodfellow 2015), both from one batched forward and backward (for an ``nn.Sequential`` MLP, over all
  draws at once; else per draw). Then
  ``G Gᵀ = Σ_l (D_l D_lᵀ) ⊙ (A_l A_lᵀ + 1)``, ``(G Q)_i = Σ_l δ_ilᵀ Q_l a_il``, the weight block of ``Gᵀ v`` is
  ``(v ⊙ D_l)ᵀ A_l`` and that of ``diag(GᵀG)`` is ``(D_l²)ᵀ (A_l²)``: ``O(K² (d_in + d_out))`` and ``O(K d_in d_out)``
  per layer where the formed rows cost ``O(K² d_in d_out)`` and a ``[K, P]`` array (bench/README.md, SLANG).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from bnnpred.curvature.functional import FlatModel
from bnnpred.inference.base import Problem


class GradientRows(ABC):
    """``G`` ``[K, P]``, used only through these products."""

    @property
    @abstractmethod
    def n_rows(self) -> int:
        """``K``."""

    @abstractmethod
    def gram(self) -> Tensor:
        """``G Gᵀ`` ``[K, K]``."""

    @abstractmethod
    def times(self, Q: Tensor) -> Tensor:
        """``G Q`` ``[K, r]`` for ``Q`` ``[P, r]``."""

    @abstractmethod
    def transpose_times(self, V: Tensor) -> Tensor:
        """``Gᵀ V`` ``[P, r]`` for ``V`` ``[K, r]``."""

    @abstractmethod
    def square_norms(self) -> Tensor:
        """``diag(GᵀG)`` ``[P]``: each parameter's sum of squared gradients."""

    @abstractmethod
    def scaled(self, factor: float) -> GradientRows:
        """``factor · G``."""

    @abstractmethod
    def dense(self) -> Tensor:
        """``G`` ``[K, P]`` itself."""

    def column_sums(self) -> Tensor:
        """``Gᵀ 1`` ``[P]``."""
        ones = torch.ones(self.n_rows, 1, dtype=self.dtype, device=self.device)
        return self.transpose_times(ones)[:, 0]

    @property
    @abstractmethod
    def dtype(self) -> torch.dtype: ...

    @property
    @abstractmethod
    def device(self) -> torch.device: ...


@dataclass
class DenseRows(GradientRows):
    G: Tensor  # [K, P]

    @property
    def n_rows(self) -> int:
        return self.G.shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.G.dtype

    @property
    def device(self) -> torch.device:
        return self.G.device

    def gram(self) -> Tensor:
        return self.G @ self.G.T

    def times(self, Q: Tensor) -> Tensor:
        return self.G @ Q

    def transpose_times(self, V: Tensor) -> Tensor:
        return (V.T @ self.G).T

    def square_norms(self) -> Tensor:
        norms = self.G.new_zeros(self.G.shape[1])
        for rows in self.G.split(max(1, 2**20 // self.G.shape[1])):  # no [K, P] temporary
            norms += rows.square().sum(0)
        return norms

    def scaled(self, factor: float) -> DenseRows:
        return DenseRows(self.G.mul_(factor))  # in place: G is the largest array of a step

    def dense(self) -> Tensor:
        return self.G

    def column_sums(self) -> Tensor:
        return self.G.sum(0)


@dataclass
class LinearLayer:
    """Where one ``nn.Linear``'s weight ``[d_out, d_in]`` and bias ``[d_out]`` sit in ``θ``."""

    module: nn.Linear
    weight: slice
    bias: slice | None


@dataclass
class LinearFactorRows(GradientRows):
    layers: list[LinearLayer]
    inputs: list[Tensor]  # A_l [K, d_in]
    output_grads: list[Tensor]  # D_l [K, d_out]
    n_params: int

    @property
    def n_rows(self) -> int:
        return self.inputs[0].shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.inputs[0].dtype

    @property
    def device(self) -> torch.device:
        return self.inputs[0].device

    def gram(self) -> Tensor:
        gram = 0
        for layer, A, D in self._blocks():
            gram = gram + (D @ D.T) * (A @ A.T + (layer.bias is not None))
        return gram

    def times(self, Q: Tensor) -> Tensor:
        r = Q.shape[1]
        out = Q.new_zeros(self.n_rows, r)
        for layer, A, D in self._blocks():
            d_out, d_in = layer.module.weight.shape
            # (G Q)_{kr} = Σ_o δ_ko Σ_i a_ki Q_{oir}, θ's row-major (o, i) block with r innermost
            if per_output(layer, r):  # d_out products [K, d_in] x [d_in, r], then the sum over d_out
                out += (torch.matmul(A, Q[layer.weight].reshape(d_out, d_in, r)) * D.T.unsqueeze(2)).sum(0)
            else:  # one [K, d_out] x [d_out, d_in·r] product, then the sum over d_in
                weight = Q[layer.weight].reshape(d_out, d_in * r)  # a copy where Q is column-major (a QR's)
                out += torch.bmm(A.unsqueeze(1), (D @ weight).view(len(A), d_in, r)).squeeze(1)
            if layer.bias is not None:
                out += D @ Q[layer.bias]
        return out

    def transpose_times(self, V: Tensor) -> Tensor:
        K, r = V.shape
        out = V.new_empty(self.n_params, r)
        for layer, A, D in self._blocks():
            d_out, d_in = layer.module.weight.shape
            # weight block Σ_k δ_ko a_ki v_kr, written in θ's (o, i) order
            if per_output(layer, r):  # d_out products [d_in, K] x [K, r]
                torch.matmul(A.T, D.T.unsqueeze(2) * V, out=out[layer.weight].view(d_out, d_in, r))
            else:  # one [d_out, K] x [K, d_in·r] product
                torch.mm(D.T, (A.unsqueeze(2) * V.unsqueeze(1)).view(K, d_in * r),
                         out=out[layer.weight].view(d_out, -1))
            if layer.bias is not None:
                torch.mm(D.T, V, out=out[layer.bias])
        return out

    def column_sums(self) -> Tensor:
        sums = self.inputs[0].new_empty(self.n_params)
        for layer, A, D in self._blocks():
            torch.mm(D.T, A, out=sums[layer.weight].view(D.shape[1], A.shape[1]))  # Σ_k δ_k a_kᵀ
            if layer.bias is not None:
                torch.sum(D, 0, out=sums[layer.bias])
        return sums

    def square_norms(self) -> Tensor:
        norms = self.inputs[0].new_empty(self.n_params)
        for layer, A, D in self._blocks():
            norms[layer.weight] = (D.square().T @ A.square()).reshape(-1)
            if layer.bias is not None:
                norms[layer.bias] = D.square().sum(0)
        return norms

    def scaled(self, factor: float) -> LinearFactorRows:
        return LinearFactorRows(self.layers, self.inputs, [D * factor for D in self.output_grads], self.n_params)

    def dense(self) -> Tensor:
        G = self.inputs[0].new_empty(self.n_rows, self.n_params)
        for layer, A, D in self._blocks():
            G[:, layer.weight] = (D[:, :, None] * A[:, None, :]).reshape(self.n_rows, -1)  # vec(δ aᵀ), row major
            if layer.bias is not None:
                G[:, layer.bias] = D
        return G

    def _blocks(self):
        return zip(self.layers, self.inputs, self.output_grads, strict=True)


PER_OUTPUT_MIN_COLUMNS = 16  # with fewer columns, d_out small products run far below the GEMM rate


def per_output(layer: LinearLayer, columns: int) -> bool:
    """Whether the layer's products with ``G`` and ``columns`` vectors go one output unit at a time (``d_out``
    products ``[d_in, K] x [K, columns]`` for ``Gᵀ V``, ``[K, d_in] x [d_in, columns]`` for ``G Q``) rather than as
    one product with ``d_out`` rows: when the inputs outnumber the outputs and the vectors are many
    (bench/layer_products.py, the MNIST MLP's 784 → 100 layer: ``Gᵀ V`` at 32 columns 5.9 ms against 15.2 ms, at 16
    columns 3.3 against 7.7 ms, at 8 columns 9.7 against 3.8 ms)."""
    d_out, d_in = layer.module.weight.shape
    return d_in > d_out and columns >= PER_OUTPUT_MIN_COLUMNS


def linear_layers(model: FlatModel) -> list[LinearLayer] | None:
    """The network's ``nn.Linear`` layers with their places in ``θ``, or None when some parameter sits elsewhere (a
    convolution, a normalisation layer) or the layers' parameters are not laid out weight then bias."""
    modules = dict(model.module.named_modules())
    offsets, start = {}, 0
    for name, size in zip(model.names, model.sizes, strict=True):
        offsets[name] = slice(start, start + size)
        start += size
    layers = []
    for name, module in modules.items():
        own = [n for n, _ in module.named_parameters(recurse=False)]
        if not own:
            continue
        if not isinstance(module, nn.Linear) or not module.weight.requires_grad:
            return None
        prefix = f"{name}." if name else ""
        bias = offsets.get(f"{prefix}bias") if module.bias is not None else None
        layers.append(LinearLayer(module, offsets[f"{prefix}weight"], bias))
    covered = sum(_size(layer.weight) + (0 if layer.bias is None else _size(layer.bias)) for layer in layers)
    return layers if layers and covered == model.n_params else None


def _size(part: slice) -> int:
    return part.stop - part.start


def per_example_rows(problem: Problem, thetas: Tensor, X: Tensor, y: Tensor) -> GradientRows:
    """The rows ``∇_θ log p(y_i | f(x_i; θ_s))`` ``[S·M, P]``, draw major: as layer factors when the network is made of
    linear layers applied once each, else formed."""
    layers = linear_layers(problem.model) if type(problem.model) is FlatModel else None
    if layers is not None and (batched := _sequential_factors(problem, layers, thetas, X, y)) is not None:
        return LinearFactorRows(layers, *batched, thetas.shape[1])
    if layers is not None:
        factors = [_layer_factors(problem, layers, theta, X, y) for theta in thetas]
        if all(f is not None for f in factors):
            inputs = [torch.cat(per_draw) for per_draw in zip(*(f[0] for f in factors), strict=True)]
            grads = [torch.cat(per_draw) for per_draw in zip(*(f[1] for f in factors), strict=True)]
            return LinearFactorRows(layers, inputs, grads, thetas.shape[1])
    return DenseRows(_formed_rows(problem, thetas, X, y))


ELEMENTWISE = (nn.Tanh, nn.ReLU, nn.Softplus, nn.Sigmoid, nn.GELU, nn.ELU, nn.LeakyReLU, nn.SiLU, nn.Identity)


def _sequential_factors(problem: Problem, layers: list[LinearLayer], thetas: Tensor, X: Tensor,
                        y: Tensor) -> tuple[list[Tensor], list[Tensor]] | None:
    """Each layer's inputs ``[S·M, d_in]`` and output gradients ``[S·M, d_out]`` (draw major) for all ``S`` draws
    ``[S, P]`` in one batched forward and backward, for an ``nn.Sequential`` of leading ``Flatten``s, then ``Linear``
    and elementwise layers (the MLPs); None for other networks. One backward from the summed log-likelihood gives
    ``∂ log p / ∂z`` at every layer's outputs ``z`` ``[S, M, d_out]`` for every draw at once (the per-draw path costs a
    forward and backward each: S = 100 on a 31-parameter MLP, 100 small passes a step)."""
    module = problem.model.module
    if not isinstance(module, nn.Sequential):
        return None
    children = list(module)
    lead = next((i for i, m in enumerate(children) if not isinstance(m, nn.Flatten)), len(children))
    if not all(isinstance(m, (nn.Linear, *ELEMENTWISE)) for m in children[lead:]):
        return None
    by_module = {id(layer.module): layer for layer in layers}
    S, thetas = len(thetas), thetas.detach()
    h = X
    for flatten in children[:lead]:
        h = flatten(h)
    if h.dim() != 2:
        return None
    h = h.expand(S, *h.shape)  # [S, M, d]
    inputs, outputs = [], []
    with torch.enable_grad():
        for m in children[lead:]:
            if isinstance(m, nn.Linear):
                layer = by_module[id(m)]
                z = h @ thetas[:, layer.weight].reshape(S, m.out_features, m.in_features).mT
                if layer.bias is not None:
                    z = z + thetas[:, layer.bias].unsqueeze(1)
                inputs.append(h.detach().reshape(-1, m.in_features))
                h = z if z.requires_grad else z.requires_grad_()  # the first layer's outputs: a leaf
                outputs.append(h)
            else:
                h = m(h)
        f = h.reshape(-1, h.shape[-1])  # [S·M, C], draw major
        loglik = problem.likelihood.log_prob(f, y.repeat(S, *[1] * (y.dim() - 1))).sum()
        grads = torch.autograd.grad(loglik, outputs)
    return inputs, [g.reshape(-1, g.shape[-1]) for g in grads]


def _layer_factors(problem: Problem, layers: list[LinearLayer], theta: Tensor, X: Tensor,
                   y: Tensor) -> tuple[list[Tensor], list[Tensor]] | None:
    """Each layer's inputs ``[M, d_in]`` and output gradients ``[M, d_out]`` at ``θ``, from one forward and backward;
    None when a layer ran other than once on ``[M, d_in]`` inputs (weight sharing, sequence inputs)."""
    model: FlatModel = problem.model
    seen: dict[int, list[tuple[Tensor, Tensor]]] = {id(layer.module): [] for layer in layers}

    def record(module: nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
        seen[id(module)].append((inputs[0].detach(), output))

    hooks = [layer.module.register_forward_hook(record) for layer in layers]
    try:
        params = model.unflatten(theta.detach().requires_grad_())  # the outputs z_l join the graph through θ
        f = functional_call(model.module, {**params, **model.buffers}, (X,))
        loglik = problem.likelihood.log_prob(f, y).sum()
    finally:
        for hook in hooks:
            hook.remove()
    runs = [seen[id(layer.module)] for layer in layers]
    if any(len(run) != 1 or run[0][0].dim() != 2 for run in runs):
        return None
    outputs = [run[0][1] for run in runs]
    return [run[0][0] for run in runs], [g.detach() for g in torch.autograd.grad(loglik, outputs)]


def _formed_rows(problem: Problem, thetas: Tensor, X: Tensor, y: Tensor) -> Tensor:
    def loglik(theta: Tensor, x: Tensor, target: Tensor) -> Tensor:
        return problem.likelihood.log_prob(problem.model(theta, x.unsqueeze(0)), target.unsqueeze(0)).sum()

    per_draw = vmap(vmap(grad(loglik), in_dims=(None, 0, 0)), in_dims=(0, None, None))
    return per_draw(thetas, X, y).reshape(-1, thetas.shape[1])
