r"""Kronecker-factored GGN per layer (KFLR: the exact GGN's factors, Botev et al. 2017; notes-004 eq. 8 and §2.3).

For a linear layer ``s = W a + b`` with ``W`` ``[out, in]`` flattened row-major, the GGN block of ``W`` is ``Σ_n G_n
⊗ a_n a_nᵀ`` with ``G_n = J_{s,n}ᵀ Λ_n J_{s,n}`` ``[out, out]``; KFLR approximates it by ``B ⊗ A`` with ``A = Σ_n
a_n aₙᵀ`` and ``B = (1/N) Σ_n G_n`` (one factor carries the 1/N, so the product estimates the sum; exact for one
example). ``G_n`` is accumulated without Jacobians: back-propagating each row ``k`` of the factor ``L_n`` (``L_nᵀ
L_n = Λ_n``) from the outputs gives ``g⁽ᵏ⁾ = J_sᵀ L_n[k]ᵀ`` and ``Σ_k g⁽ᵏ⁾ g⁽ᵏ⁾ᵀ = G_n``: one backward pass per
row per batch (the rows of ``L_n`` as :func:`back_propagated`'s seeds, each row's gradients summed into ``B`` as its
pass ends; ``L_n`` with as many rows as ``Λ_n`` has rank, ``C − 1`` for the softmax). Both factors are symmetric
products accumulated into one triangle (:mod:`bnnpred.curvature.syrk`). A convolution is the same with every output
position ``t`` as an example ("expand" KFAC, Grosse & Martens 2016): ``A = Σ_{n,t} a_{nt} a_{nt}ᵀ`` of the input
patches (:func:`patch_rows`), ``B = Σ_{n,t} G_{nt} / (N T)``. Bias blocks are exact and dense: ``Σ_n Σ_k (Σ_t
g⁽ᵏ⁾_{nt})(Σ_t g⁽ᵏ⁾_{nt})ᵀ``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bnnpred.curvature.chunks import DEFAULT_CHUNK_ELEMS
from bnnpred.curvature.functional import FlatModel
from bnnpred.curvature.syrk import gram_lower_, mirror_lower_, syrk_lower_
from bnnpred.errors import BnnpredError
from bnnpred.likelihoods import Likelihood
from bnnpred.progress import progress


class Resumable(Protocol):
    """Where a long accumulation saves and finds its partial state (``inference.checkpoint.Checkpoints``)."""

    def load(self) -> dict[str, Any] | None: ...

    def due(self, at_boundary: bool, last_step: bool) -> bool: ...

    def save(self, state: dict[str, Any]) -> None: ...


@dataclass
class KronBlock:
    """The GGN block of ``θ[start:stop]``: ``B ⊗ A`` (a weight) or a dense matrix (a bias)."""

    start: int
    stop: int
    B: Tensor | None = None  # [out, out]
    A: Tensor | None = None  # [in·k·k, in·k·k]
    dense: Tensor | None = None  # [size, size]


@dataclass
class Layer:
    module: nn.Linear | nn.Conv2d
    weight: KronBlock
    bias: KronBlock | None


def is_uniform(values: Tensor) -> bool:
    """Whether every entry of ``values`` equals the first (a per-tensor prior, which factorises); empty is uniform."""
    return values.numel() == 0 or bool((values == values[0]).all())


def supported_layers(model: FlatModel) -> list[Layer]:
    """One entry per ``nn.Linear`` / ``nn.Conv2d`` whose weight is among ``θ``'s parameters (all of them, or a
    :class:`~bnnpred.curvature.functional.SubsetModel`'s) with its blocks' θ slices; other parameters are an
    error."""
    offsets, start = {}, 0
    for name, size in zip(model.names, model.sizes, strict=True):
        offsets[name] = (start, start + size)
        start += size
    layers, covered = [], set()
    for prefix, module in model.module.named_modules():
        if not isinstance(module, (nn.Linear, nn.Conv2d)):
            continue
        if isinstance(module, nn.Conv2d) and module.groups != 1:
            raise BnnpredError(f"structure=kron supports ungrouped convolutions; {prefix} has groups={module.groups}")
        if isinstance(module, nn.Conv2d) and (module.padding_mode != "zeros" or isinstance(module.padding, str)):
            raise BnnpredError(f"structure=kron supports convolutions with numeric zero padding; {prefix} has "
                               f"padding={module.padding!r}, padding_mode={module.padding_mode!r}")
        name = f"{prefix}.weight" if prefix else "weight"
        bias = f"{prefix}.bias" if prefix else "bias"
        if name not in offsets:
            continue  # held fixed
        covered |= {name, bias}
        layers.append(Layer(module, KronBlock(*offsets[name]), KronBlock(*offsets[bias]) if bias in offsets else None))
    others = [n for n in model.names if n not in covered]
    if others:
        raise BnnpredError(f"structure=kron covers Linear and Conv2d layers only, not {', '.join(others[:3])}; "
                           "use inference.structure=diag")
    return layers


def kron_ggn(model: FlatModel, likelihood: Likelihood, theta: Tensor, X: Tensor, y: Tensor,
             batch_size: int | None = None, resume: Resumable | None = None,
             show_progress: bool = True) -> tuple[list[KronBlock], Tensor]:
    """KFLR blocks of the GGN of the negative log-likelihood at ``θ`` over ``X`` (in θ order) and
    ``Σ log p(y | f(x; θ))``, ``batch_size`` inputs per batch of backward passes (None: :func:`kron_batch_size`);
    with ``resume``, the partial sums are saved between batches and a killed accumulation goes on from the last save
    (the same sums in the same order: bit for bit)."""
    layers = supported_layers(model)
    if batch_size is None:
        batch_size = kron_batch_size(model, likelihood, theta, X, layers)
    N = len(X)
    saved = None if resume is None else resume.load()
    for i, layer in enumerate(layers):
        out_dim = layer.module.out_features if isinstance(layer.module, nn.Linear) else layer.module.out_channels
        in_dim = (layer.module.in_features if isinstance(layer.module, nn.Linear)
                  else layer.module.in_channels * layer.module.kernel_size[0] * layer.module.kernel_size[1])
        layer.weight.B, layer.weight.A = theta.new_zeros(out_dim, out_dim), theta.new_zeros(in_dim, in_dim)
        if layer.bias is not None:
            layer.bias.dense = theta.new_zeros(out_dim, out_dim)
        if saved is not None:
            for name, sums in _partial_sums(layer).items():
                sums.copy_(saved["layers"][i][name])
    loglik = theta.new_zeros(()) if saved is None else saved["loglik"].to(theta)
    positions = [0] * len(layers) if saved is None else saved["positions"]  # output positions T per layer
    done = 0 if saved is None else saved["step"]
    starts = range(done * batch_size, N, batch_size)
    examples: list[Tensor | None] = [None] * len(layers)  # each layer's patch rows, reused by the next batch
    for start in progress(starts, len(starts), "Kronecker factors (batches)", enabled=show_progress):
        rows = slice(start, min(start + batch_size, N))
        # the rows of R J_s (RᵀR = Λ, r = rank Λ rows), back-propagated directly: Σ_k g⁽ᵏ⁾g⁽ᵏ⁾ᵀ = J_sᵀ Λ J_s, each
        # row's gradients summed into B as its pass ends (no [B, K, out, T] stack of them)
        passes = back_propagated(model, theta, X[rows], layers, seeds=likelihood.hessian_root)
        loglik += likelihood.log_prob(passes.f, y[rows]).sum()
        for grads in passes.rows():
            for layer, g in zip(layers, grads, strict=True):  # g [B, out, T]
                gram_lower_(layer.weight.B, g)  # Σ_{b,t} g_bt g_btᵀ
                if layer.bias is not None:
                    summed = g.sum(-1)  # [B, out]
                    layer.bias.dense += summed.T @ summed
        for i, (layer, a) in enumerate(zip(layers, passes.layer_inputs, strict=True)):
            examples[i] = patch_rows(layer.module, a, into=examples[i])  # [B·T, I], a convolution's (kh, kw, in)
            positions[i] = len(examples[i]) // len(a)
            syrk_lower_(layer.weight.A, examples[i])  # Σ_{b,t} a_bt a_btᵀ
        done += 1
        if resume is not None and resume.due(at_boundary=True, last_step=False):
            resume.save({"step": done, "loglik": loglik, "positions": positions,
                         "layers": [_partial_sums(layer) for layer in layers]})
    blocks = []
    for layer, T in zip(layers, positions, strict=True):
        layer.weight.A = in_weight_order(layer.module, mirror_lower_(layer.weight.A))
        mirror_lower_(layer.weight.B).div_(N * T)
        blocks += [layer.weight] + ([layer.bias] if layer.bias is not None else [])
    return blocks, loglik


KRON_MIN_BATCH = 128  # the fixed batch before kron_batch_size: a GPU's passes want at least this many inputs


def kron_batch_size(model: FlatModel, likelihood: Likelihood, theta: Tensor, X: Tensor, layers: list[Layer],
                    max_elems: int = DEFAULT_CHUNK_ELEMS, min_inputs: int = KRON_MIN_BATCH) -> int:
    """Inputs per batch of :func:`kron_ggn`: as many as keep a batch's layer inputs and back-propagated rows within
    ``max_elems`` numbers (measured on the first input of ``X``), and at least ``min_inputs``. The 2x50 MLP of
    bench/laplace_torch.py takes all 4,500 inputs at once (fewer passes: 1.9x faster on the CPU than batches of
    128); 3c3d's images (550k numbers each) stay at 128 (on the CPU as fast per image as 32, bench/README.md)."""
    if not len(X):
        return 1
    _, factors = layer_output_gradients(model, theta, X[:1], layers, seeds=likelihood.hessian_root)
    return max(1, min_inputs, max_elems // sum(u.a.numel() + u.g.numel() for u in factors))


def _partial_sums(layer: Layer) -> dict[str, Tensor]:
    """A layer's accumulators (the tensors themselves), by ``block.field``."""
    sums = {"weight.A": layer.weight.A, "weight.B": layer.weight.B}
    return sums if layer.bias is None else {**sums, "bias.dense": layer.bias.dense}


def _forward_capturing(model: FlatModel, layers: list[Layer], theta: Tensor,
                       X: Tensor) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
    """Outputs ``f`` and each layer's (input, output) of one forward pass with a graph to the outputs."""
    captured: dict[int, list[tuple[Tensor, Tensor]]] = {id(layer.module): [] for layer in layers}

    def keep(module: nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
        captured[id(module)].append((inputs[0].detach(), output))

    hooks = [layer.module.register_forward_hook(keep) for layer in layers]
    try:
        f = model(theta.detach().requires_grad_(True), X)
    finally:
        for hook in hooks:
            hook.remove()
    if any(len(calls) != 1 for calls in captured.values()):
        raise BnnpredError("structure=kron needs every Linear / Conv2d layer called once per forward pass")
    return f, [captured[id(layer.module)][0] for layer in layers]


def _patches(module: nn.Linear | nn.Conv2d, a: Tensor) -> Tensor:
    """Layer inputs as ``[B, I, T]``: ``[B, in, 1]`` for a linear layer, unfolded patches for a convolution."""
    if isinstance(module, nn.Linear):
        return a.reshape(a.shape[0], -1, 1)
    return F.unfold(a, module.kernel_size, dilation=module.dilation, padding=module.padding, stride=module.stride)


def patch_rows(module: nn.Linear | nn.Conv2d, a: Tensor, into: Tensor | None = None) -> Tensor:
    """Layer inputs as one row per example and output position, ``[B·T, I]``: ``a`` ``[B, in]`` itself for a linear
    layer; a convolution's input patches in ``(kh, kw, in)`` order (:func:`in_weight_order` takes their Gram matrix
    to the weight's ``(in, kh, kw)``), gathered from a channels-last copy of ``a`` ``[B, in, H, W]``, whose patches
    are ``kh`` runs of ``kw·in`` adjacent numbers, and written into the memory of ``into`` (an earlier call's rows)
    when it is large enough. No ``[B, I, T]`` unfold and no transposed copy of it, and the rows take no fresh pages
    per batch (a padded or channels-first input is still copied once): 3c3d's input factors 0.9 against 1.5 ms per
    image (bench/README.md)."""
    if isinstance(module, nn.Linear):
        return a.reshape(a.shape[0], -1)
    (kh, kw), (ph, pw), (sh, sw), (dh, dw) = module.kernel_size, module.padding, module.stride, module.dilation
    x = (F.pad(a, (pw, pw, ph, ph)) if ph or pw else a).contiguous(memory_format=torch.channels_last)
    B, C, H, W = x.shape
    Ho, Wo = (H - dh * (kh - 1) - 1) // sh + 1, (W - dw * (kw - 1) - 1) // sw + 1
    sB, sC, sH, sW = x.stride()
    patches = x.as_strided((B, Ho, Wo, kh, kw, C), (sB, sh * sH, sw * sW, dh * sH, dw * sW, sC))
    size = patches.numel()
    memory = into.view(-1)[:size] if into is not None and into.numel() >= size else x.new_empty(size)
    memory.view(patches.shape).copy_(patches)
    return memory.view(B * Ho * Wo, kh * kw * C)


def in_weight_order(module: nn.Linear | nn.Conv2d, gram: Tensor) -> Tensor:
    """A Gram matrix ``[I, I]`` of :func:`patch_rows`' columns in the order of the layer's flattened weight:
    ``(kh, kw, in)`` → ``(in, kh, kw)`` for a convolution; a linear layer's as it is."""
    if isinstance(module, nn.Linear):
        return gram
    kernel = module.kernel_size[0] * module.kernel_size[1]
    order = torch.arange(gram.shape[0], device=gram.device).reshape(kernel, -1).T.reshape(-1)
    return gram[order][:, order]


@dataclass
class LayerJacobian:
    """The factors of one layer's per-example Jacobian: ``∂f_c/∂W = Σ_t g_{c,t} a_tᵀ``, ``∂f_c/∂b = Σ_t g_{c,t}``."""

    a: Tensor  # input patches [B, I, T]
    g: Tensor  # gradients of every output with respect to the layer's outputs [B, C, out, T]
    has_bias: bool
    start: int  # where the layer's weight starts in θ (its bias follows it)


def iter_layer_gradients(model: FlatModel, theta: Tensor, X: Tensor, layers: list[Layer] | None = None,
                         max_elems: int = DEFAULT_CHUNK_ELEMS, seeds: Callable[[Tensor], Tensor] | None = None
                         ) -> Iterator[tuple[slice, Tensor, list[LayerJacobian]]]:
    """``(rows, f, factors)`` of :func:`layer_output_gradients` (with ``seeds``) over chunks of ``X`` sized so that
    the factors and each convolution's formed Jacobian (``K·out·in·k·k`` numbers for ``K`` seed rows) hold about
    ``max_elems`` numbers (measured on the first input)."""
    if len(X) == 0:
        return
    layers = supported_layers(model) if layers is None else layers
    f, factors = layer_output_gradients(model, theta, X[:1], layers, seeds)
    yield slice(0, 1), f, factors
    per_input = sum(u.a.numel() + u.g.numel() + (u.g.shape[1] * u.g.shape[2] * u.a.shape[1] if u.a.shape[-1] > 1
                                                 else 0) for u in factors)
    step = max(1, max_elems // per_input)
    for start in range(1, len(X), step):
        rows = slice(start, min(start + step, len(X)))
        yield (rows, *layer_output_gradients(model, theta, X[rows], layers, seeds))


@dataclass
class BackPropagated:
    """One forward pass over a batch, whose seeds' rows are back-propagated one at a time by :meth:`rows`."""

    f: Tensor  # outputs [B, C], detached
    layer_inputs: list[Tensor]  # each layer's input, [B, in] or [B, in, H, W]
    outputs: list[Tensor]  # each layer's outputs, in the graph to f
    graph: Tensor  # f with its graph
    seeds: Tensor  # [B, K, C]

    def rows(self) -> Iterator[tuple[Tensor, ...]]:
        """For each seed row ``k``: the gradient of ``Σ_c seeds[b, k, c] f_c`` at every layer's outputs, each ``[B,
        out, T]`` (one backward pass; the graph is freed after the last, so the rows can be gone through once)."""
        K = self.seeds.shape[1]
        for k in range(K):
            grads = torch.autograd.grad(self.graph, self.outputs, grad_outputs=self.seeds[:, k], retain_graph=k < K - 1)
            yield tuple(g.reshape(*g.shape[:2], -1) for g in grads)


def back_propagated(model: FlatModel, theta: Tensor, X: Tensor, layers: list[Layer],
                    seeds: Callable[[Tensor], Tensor] | None = None) -> BackPropagated:
    """The forward pass of :func:`layer_output_gradients` with its seeds (``seeds(f)`` ``[B, K, C]``, or the ``C``
    outputs themselves), the backward passes left to :meth:`BackPropagated.rows`."""
    with torch.enable_grad():  # back-propagation is the computation, also inside a caller's torch.no_grad()
        f, captured = _forward_capturing(model, layers, theta, X)
    rows = torch.eye(f.shape[1], dtype=f.dtype, device=f.device).expand(len(f), -1, -1) if seeds is None \
        else seeds(f.detach())
    return BackPropagated(f.detach(), [a for a, _ in captured], [s for _, s in captured], f, rows)


def layer_output_gradients(model: FlatModel, theta: Tensor, X: Tensor, layers: list[Layer] | None = None,
                           seeds: Callable[[Tensor], Tensor] | None = None) -> tuple[Tensor, list[LayerJacobian]]:
    """Outputs ``f`` ``[B, C]`` and the Jacobian factors of every supported layer (one forward and C backward
    passes over the batch).

    ``seeds(f)`` ``[B, K, C]`` back-propagates ``K`` combinations of the outputs instead of the ``C`` outputs, so
    that ``g`` holds ``Σ_c seeds[b, k, c] ∂f_c/∂s`` (``[B, K, out, T]``; e.g. the rows of ``Λ``'s square root).
    """
    layers = supported_layers(model) if layers is None else layers
    passes = back_propagated(model, theta, X, layers, seeds)
    per_row = list(passes.rows())
    return passes.f, [LayerJacobian(_patches(layer.module, a), torch.stack([grads[i] for grads in per_row], dim=1),
                                    layer.bias is not None, layer.weight.start)
                      for i, (layer, a) in enumerate(zip(layers, passes.layer_inputs, strict=True))]


def jacobian_layers(model: FlatModel) -> list[Layer] | None:
    """The layers whose factors give the whole Jacobian (:func:`layer_jacobians`): every parameter in an ungrouped
    ``Linear`` / zero-padded ``Conv2d`` and the module in eval mode (each example's outputs its own); else ``None``."""
    if model.module.training:
        return None
    try:
        return supported_layers(model)
    except BnnpredError:
        return None


def _per_example(layer: Layer, factor: LayerJacobian, batch: int) -> bool:
    """Whether the layer saw one row per example (a linear layer's inputs ``[B, in]``, not a sequence's positions
    folded into the rows or kept as a dimension), so that its factors separate the examples."""
    if factor.a.shape[0] != batch:
        return False
    return not isinstance(layer.module, nn.Linear) or factor.a.shape[1] == layer.module.in_features


def layer_jacobians(model: FlatModel, theta: Tensor, X: Tensor, layers: list[Layer]) -> tuple[Tensor, Tensor] | None:
    """Outputs ``f`` ``[B, C]`` and per-example Jacobians ``J`` ``[B, C, P]`` formed from the layers' factors of
    :func:`layer_output_gradients` (one forward and ``C`` backward passes over the batch, where ``vmap(jacrev)``
    makes one reverse pass per example and output): ``∂f_c/∂W = Σ_t g_{c,t} a_tᵀ``, ``∂f_c/∂b = Σ_t g_{c,t}``.

    ``None`` when the factors do not describe the network: a layer called more than once, or a linear layer whose
    inputs are not ``[B, in]`` (e.g. a sequence, whose positions share the weight).
    """
    with torch.enable_grad():
        try:
            f, factors = layer_output_gradients(model, theta, X, layers)
        except BnnpredError:
            return None
    B, C = f.shape
    J = f.new_empty(B, C, theta.numel())
    for layer, u in zip(layers, factors, strict=True):
        out = u.g.shape[2]
        if not _per_example(layer, u, B):
            return None
        weight = J[:, :, layer.weight.start : layer.weight.stop].view(B, C, out, u.a.shape[1])
        weight.copy_(u.g @ u.a.mT.unsqueeze(1))  # [B, C, out, T] @ [B, 1, T, I]
        if layer.bias is not None:
            J[:, :, layer.bias.start : layer.bias.stop] = u.g.sum(-1)
    return f, J


def layer_diag_ggn(model: FlatModel, likelihood: Likelihood, theta: Tensor, X: Tensor, y: Tensor,
                   layers: list[Layer], max_elems: int = DEFAULT_CHUNK_ELEMS) -> tuple[Tensor, Tensor] | None:
    """The GGN's diagonal ``Σ_n Σ_k (R_n J_n)²_k`` ``[P]`` and ``Σ log p(y | f)`` from the layers' factors, without
    per-example Jacobians for linear layers: with the rows ``g⁽ᵏ⁾`` of ``R_n J_s`` back-propagated (``RᵀR = Λ``),
    a weight's diagonal is ``Σ_n (Σ_k g⁽ᵏ⁾²)_o a²_i`` (one ``[out, B] x [B, in]`` product); a convolution's
    ``Σ_{n,k} (Σ_t g⁽ᵏ⁾_t a_tᵀ)²``. ``None`` where :func:`layer_jacobians` would be (the factors do not describe
    the network). The inputs go in the chunks :func:`iter_layer_gradients` sizes for ``max_elems``: the factors and a
    convolution's per-example gradients are all it forms (8 images a chunk on 3c3d, thousands on an MLP)."""
    diag, loglik = theta.new_zeros(theta.numel()), theta.new_zeros(())
    chunks = iter_layer_gradients(model, theta, X, layers, max_elems, seeds=likelihood.hessian_root)
    while True:
        try:
            rows, f, factors = next(chunks)
        except StopIteration:
            break
        except BnnpredError:  # a layer the factors cannot describe (called twice)
            return None
        loglik += likelihood.log_prob(f, y[rows]).sum()
        for layer, u in zip(layers, factors, strict=True):
            if not _per_example(layer, u, len(f)):
                return None
            weight = diag[layer.weight.start : layer.weight.stop].view(u.g.shape[2], u.a.shape[1])
            if isinstance(layer.module, nn.Linear):
                weight += u.g[..., 0].square().sum(1).T @ u.a[..., 0].square()
            else:
                weight += (u.g @ u.a.mT.unsqueeze(1)).square().sum((0, 1))
            if layer.bias is not None:
                diag[layer.bias.start : layer.bias.stop] += u.g.sum(-1).square().sum((0, 1))
    return diag, loglik
