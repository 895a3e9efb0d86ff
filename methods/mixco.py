"""MixCo math: mixing, mixing ratios, soft targets and the semi-positive loss.

Paper (Kim et al., "MixCo: Mix-up Contrastive Learning for Visual Representation") eq. 3 and
Algorithm 1. Everything here is a pure function of its inputs except `MixCoLoss`, a thin module
that holds the temperature, `Mixer`, which draws the ratios and pairs, and `MixCoMixin`, the
arguments MixCo adds to a method (one constructor for `MixCoMoCo` and `MixCoSimCLR`). Defaults
are the paper's; the variants other codes use are options.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .precision import at_least_float32, float32_region

LAMBDA_DISTRIBUTIONS = ('uniform', 'beta')
LAMBDA_SCOPES = ('pair', 'batch')
TARGET_MODES = ('soft', 'weighted_hard')


def mix_pairs(x: Tensor, lam: Tensor) -> Tensor:
    """Mix the first half of a batch with the second half.

    Args:
        x: Batch of shape (B, ...), B even.
        lam: Mixing ratios of shape (B // 2,).

    Returns:
        Shape (B // 2, ...): lam[i] * x[i] + (1 - lam[i]) * x[B // 2 + i].
    """
    if x.shape[0] % 2:
        raise ValueError(f'mix_pairs needs an even batch, got {x.shape[0]}')
    m = x.shape[0] // 2
    if lam.shape != (m,):
        raise ValueError(f'lam must have shape ({m},), got {tuple(lam.shape)}')
    lam = lam.to(x.dtype).view(m, *([1] * (x.dim() - 1)))  # (M, 1, ..., 1)
    return lam * x[:m] + (1 - lam) * x[m:]  # (M, ...)


def sample_lambda(num_pairs: int,
                  device: torch.device,
                  distribution: str = 'uniform',
                  alpha: float = 1.0,
                  scope: str = 'pair') -> Tensor:
    """Draw mixing ratios from torch's global generator (seeded by the runner).

    Args:
        num_pairs: M, the number of mixed samples.
        device: Where to create the ratios.
        distribution: 'uniform' (paper: U(0, 1)) or 'beta' (Beta(alpha, alpha), mixup style).
        alpha: Beta concentration; unused for 'uniform'.
        scope: 'pair' (paper: one ratio per pair) or 'batch' (one ratio shared by the batch).

    Returns:
        Shape (M,), values in [0, 1].
    """
    if distribution not in LAMBDA_DISTRIBUTIONS:
        raise ValueError(f'lambda distribution {distribution!r} not in {LAMBDA_DISTRIBUTIONS}')
    if scope not in LAMBDA_SCOPES:
        raise ValueError(f'lambda scope {scope!r} not in {LAMBDA_SCOPES}')
    n = num_pairs if scope == 'pair' else 1
    if distribution == 'uniform':
        lam = torch.rand(n, device=device)  # (n,)
    else:
        if not alpha > 0:
            raise ValueError(f'Beta concentration must be > 0, got {alpha}')
        conc = torch.full((n,), float(alpha), device=device)
        # Checked above: torch's own argument check would read the device every step.
        lam = torch.distributions.Beta(conc, conc, validate_args=False).sample()  # (n,)
    return lam.expand(num_pairs).contiguous()  # (M,)


def mix_targets(lam: Tensor, num_columns: int) -> Tensor:
    """Soft targets of paper eq. 3: lam at column i, 1 - lam at column M + i, 0 elsewhere.

    Args:
        lam: Shape (M,).
        num_columns: Total logit columns, at least 2M (keys first, then negatives).

    Returns:
        Shape (M, num_columns); every row sums to 1.
    """
    m = lam.shape[0]
    rows = torch.arange(m, device=lam.device)
    targets = lam.new_zeros(m, num_columns)  # (M, C)
    targets[rows, rows] = lam
    targets[rows, rows + m] = 1 - lam
    return targets


def mixco_loss(q_mix: Tensor,
               keys: Tensor,
               lam: Tensor,
               negatives: Optional[Tensor] = None,
               temperature: float = 0.05,
               in_batch_negatives: bool = True,
               target_mode: str = 'soft') -> Tensor:
    """L_mix of paper eq. 3, averaged over the mixed samples.

    Args:
        q_mix: Mixed queries (M, D), L2-normalised.
        keys: Keys of the unmixed samples (2M, D), L2-normalised; row i and M + i are the
            semi-positives of q_mix[i].
        lam: Mixing ratios (M,).
        negatives: Extra negatives (K, D), e.g. the MoCo queue, or None.
        temperature: tau_mix.
        in_batch_negatives: If False, only the two semi-positive keys of each row (plus the
            negatives) enter its softmax; the paper (True) uses all 2M local keys.
        target_mode: 'soft' (paper: cross-entropy with soft targets) or 'weighted_hard'
            (i-Mix style: lam * CE(., i) + (1 - lam) * CE(., M + i)); both give the same value.

    Returns:
        Scalar loss, float32 also under autocast (logits and targets are computed in float32).
    """
    m = q_mix.shape[0]
    if keys.shape[0] != 2 * m or lam.shape != (m,):
        raise ValueError(f'need keys (2M, D) and lam (M,) for M={m}, '
                         f'got keys {tuple(keys.shape)} and lam {tuple(lam.shape)}')
    with float32_region(q_mix):
        return _mixco_loss_float32(*map(at_least_float32, (q_mix, keys, lam)),
                                   None if negatives is None else at_least_float32(negatives),
                                   temperature, in_batch_negatives, target_mode)


def _mixco_loss_float32(q_mix: Tensor, keys: Tensor, lam: Tensor, negatives: Optional[Tensor],
                        temperature: float, in_batch_negatives: bool, target_mode: str) -> Tensor:
    """Body of `mixco_loss`, on inputs of float32 or float64 with autocast off."""
    m = q_mix.shape[0]
    if in_batch_negatives:
        logits = q_mix @ keys.t()  # (M, 2M)
        first, second = torch.arange(m, device=q_mix.device), torch.arange(m, 2 * m, device=q_mix.device)
    else:
        logits = torch.stack([(q_mix * keys[:m]).sum(1), (q_mix * keys[m:]).sum(1)], 1)  # (M, 2)
        first = torch.zeros(m, dtype=torch.long, device=q_mix.device)
        second = torch.ones(m, dtype=torch.long, device=q_mix.device)
    if negatives is not None:
        logits = torch.cat([logits, q_mix @ negatives.t()], 1)  # (M, 2M + K) or (M, 2 + K)
    logits = logits / temperature
    if target_mode == 'soft':
        if in_batch_negatives:
            targets = mix_targets(lam.to(logits.dtype), logits.shape[1])  # (M, C)
        else:
            targets = logits.new_zeros(logits.shape)
            targets[:, 0], targets[:, 1] = lam, 1 - lam
        return -(targets * F.log_softmax(logits, dim=1)).sum(1).mean()
    if target_mode == 'weighted_hard':
        ce_first = F.cross_entropy(logits, first, reduction='none')  # (M,)
        ce_second = F.cross_entropy(logits, second, reduction='none')  # (M,)
        return (lam * ce_first + (1 - lam) * ce_second).mean()
    raise ValueError(f'target_mode {target_mode!r} not in {TARGET_MODES}')


class MixCoLoss(nn.Module):
    """Module form of `mixco_loss` (a public contract: docs/design.md, "Public contracts").

    Args:
        temperature: tau_mix (paper: 0.05 on MoCo-v2, 0.5 on SimCLR, 1.0 on ImageNet).
        in_batch_negatives: See `mixco_loss`.
        target_mode: See `mixco_loss`.
    """

    def __init__(self,
                 temperature: float = 0.05,
                 in_batch_negatives: bool = True,
                 target_mode: str = 'soft') -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f'MixCoLoss temperature must be > 0, got {temperature}')
        if target_mode not in TARGET_MODES:
            raise ValueError(f'target_mode {target_mode!r} not in {TARGET_MODES}')
        self.temperature = temperature
        self.in_batch_negatives = in_batch_negatives
        self.target_mode = target_mode

    def forward(self,
                q_mix: Tensor,
                keys: Tensor,
                lam: Tensor,
                negatives: Optional[Tensor] = None) -> Tensor:
        """Return the unweighted L_mix; all inputs already L2-normalised."""
        return mixco_loss(q_mix, keys, lam, negatives, self.temperature,
                          self.in_batch_negatives, self.target_mode)


PAIRINGS = ('halves', 'permutation')


class Mixer:
    """Draws mixing ratios and pairs, and mixes a batch (the 'MixCo' box of Algorithm 1).

    Args:
        distribution: Lambda distribution, see `sample_lambda`.
        alpha: Beta concentration for distribution='beta'.
        scope: 'pair' or 'batch', see `sample_lambda`.
        pairing: 'halves' (paper: sample i with sample M + i; the loader's shuffle is the only
            pairing randomness) or 'permutation' (pairs drawn from a fresh random permutation).
    """

    def __init__(self,
                 distribution: str = 'uniform',
                 alpha: float = 1.0,
                 scope: str = 'pair',
                 pairing: str = 'halves') -> None:
        if distribution not in LAMBDA_DISTRIBUTIONS:
            raise ValueError(f'mix_lambda {distribution!r} not in {LAMBDA_DISTRIBUTIONS}')
        if scope not in LAMBDA_SCOPES:
            raise ValueError(f'mix_lambda_scope {scope!r} not in {LAMBDA_SCOPES}')
        if pairing not in PAIRINGS:
            raise ValueError(f'mix_pairing {pairing!r} not in {PAIRINGS}')
        if alpha <= 0:
            raise ValueError(f'mix_alpha must be > 0, got {alpha}')
        self.distribution, self.alpha, self.scope, self.pairing = distribution, alpha, scope, pairing

    def __call__(self, x: Tensor) -> tuple:
        """Mix a batch.

        Args:
            x: Batch (B, ...), B even.

        Returns:
            (x_mix (B/2, ...), lam (B/2,), order): `order` is None for halves pairing, else the
            permutation (B,) applied before halving; reorder the keys with it the same way.
        """
        if x.shape[0] % 2:
            raise ValueError(f'MixCo needs an even per-process batch, got {x.shape[0]}')
        order = None
        if self.pairing == 'permutation':
            order = torch.randperm(x.shape[0], device=x.device)  # (B,)
            x = x[order]
        lam = sample_lambda(x.shape[0] // 2, x.device, self.distribution, self.alpha, self.scope)
        return mix_pairs(x, lam), lam, order


class MixCoMixin:
    """MixCo's arguments, added to a contrastive method: the `Mixer`, the `MixCoLoss` and β.

    The first base of a MixCo model (``class MixCoMoCo(MixCoMixin, MoCo)``), which then only
    overrides its method's loss computation. The defaults are the paper's on MoCo-v2.

    Args:
        mix_temperature: tau_mix (paper: 0.05; 1.0 on ImageNet; 0.5 in the authors' SimCLR).
        mix_weight: beta, the weight of L_mix in the total loss (paper: 1).
        mix_lambda: 'uniform' (paper) or 'beta'.
        mix_alpha: Beta concentration for mix_lambda='beta'.
        mix_lambda_scope: 'pair' (paper) or 'batch'.
        mix_pairing: 'halves' (paper) or 'permutation'.
        mix_joint_forward: Whether the mixed images join an encoder pass of the unmixed ones
            (each model says which); False: passes of their own.
        mix_in_batch_negatives: All 2M local keys in the mixed softmax (paper) or only each
            row's two semi-positives (plus the queue, if any).
        mix_target: 'soft' (paper) or 'weighted_hard' (i-Mix style, same value).
        **kwargs: Arguments of the method MixCo is added to.
    """

    def __init__(self,
                 mix_temperature: float = 0.05,
                 mix_weight: float = 1.0,
                 mix_lambda: str = 'uniform',
                 mix_alpha: float = 1.0,
                 mix_lambda_scope: str = 'pair',
                 mix_pairing: str = 'halves',
                 mix_joint_forward: bool = True,
                 mix_in_batch_negatives: bool = True,
                 mix_target: str = 'soft',
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if mix_weight < 0:
            raise ValueError(f'model.mix_weight must be >= 0, got {mix_weight}')
        if not mix_temperature > 0:  # MixCoLoss refuses it too, naming its own argument
            raise ValueError(f'model.mix_temperature must be > 0, got {mix_temperature}')
        self.mixer = Mixer(mix_lambda, mix_alpha, mix_lambda_scope, mix_pairing)
        self.mix_loss = MixCoLoss(mix_temperature, mix_in_batch_negatives, mix_target)
        self.mix_weight = mix_weight
        self.mix_joint_forward = mix_joint_forward
