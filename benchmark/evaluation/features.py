"""Feature extraction: a frozen backbone in eval mode over a dataset, in one or several processes."""
import sys
from typing import Optional, Tuple

import torch
from mmengine.dist import all_gather_object, get_dist_info
from mmengine.utils import ProgressBar
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset, Subset

from benchmark import dist


@torch.no_grad()
def extract_features(backbone: nn.Module,
                     dataset: Dataset,
                     batch_size: int = 256,
                     num_workers: int = 0,
                     device: Optional[torch.device] = None,
                     progress: bool = True) -> Tuple[Tensor, Tensor]:
    """Pooled backbone features and labels of every sample of `dataset`, in dataset order.

    With several processes each extracts the shard rank, rank + world, ... and the shards are
    gathered back into dataset order on every process. The backbone is switched to eval mode
    (BN running statistics, no dropout) for the pass and put back in its previous mode after.

    Args:
        backbone: Maps (N, 3, H, W) to (N, C).
        dataset: Yields dict(inputs=(3, H, W) tensor, data_samples=int label).
        batch_size: Images per forward pass.
        num_workers: DataLoader workers.
        device: Where the batches go, the backbone's device (its default); the caller puts
            the backbone there.
        progress: Show a progress bar on rank 0.

    Returns:
        (features (N, C) float32 on CPU, labels (N,) int64 on CPU).
    """
    rank, world = get_dist_info()
    device = torch.device(device) if device is not None else next(backbone.parameters()).device
    shard = Subset(dataset, range(rank, len(dataset), world))
    # Pinned batches let the copy to a GPU overlap the next forward pass (non_blocking below).
    loader = DataLoader(shard, batch_size=batch_size, shuffle=False, num_workers=num_workers,
                        pin_memory=device.type == 'cuda')
    was_training = backbone.training
    backbone.eval()
    # A bar redrawn with carriage returns: on a terminal only (a log file would keep every
    # redraw on one line), and ended with its own newline (mmengine's bar leaves the line open).
    bar = (ProgressBar(len(shard), file=sys.stdout)
           if progress and dist.is_main() and sys.stdout.isatty() else None)
    feats, labels = [], []
    try:
        for batch in loader:
            feats.append(backbone(batch['inputs'].to(device, non_blocking=True)).float().cpu())
            labels.append(batch['data_samples'].long())
            if bar is not None:
                bar.update(feats[-1].shape[0])
    finally:
        backbone.train(was_training)
        if bar is not None:
            bar.file.write('\n')
            bar.file.flush()
    if not feats:
        raise ValueError('feature extraction got an empty dataset')
    features, targets = torch.cat(feats), torch.cat(labels)  # (n_rank, C), (n_rank,)
    if world > 1:  # shard r holds samples r, r + world, ...: put every shard back in place
        parts = all_gather_object((features, targets))
        features = features.new_empty(len(dataset), features.shape[1])
        targets = targets.new_empty(len(dataset))
        for r, (part_feats, part_targets) in enumerate(parts):
            features[r::world], targets[r::world] = part_feats, part_targets
    return features, targets
