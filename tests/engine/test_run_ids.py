"""The wandb run id of a run: kept for --resume, new otherwise, following the checkpoint."""
import torch

from benchmark.engine.tracking import wandb_run_id


def test_wandb_run_id_is_kept_for_resume_and_new_otherwise(tmp_path):
    first = wandb_run_id(str(tmp_path), resume=False)
    assert wandb_run_id(str(tmp_path), resume=True) == first
    assert wandb_run_id(str(tmp_path), resume=False) != first


def test_wandb_run_id_follows_the_checkpoint_a_run_resumes_from(tmp_path):
    """A fresh run into the same work dir rewrote the stored id; the checkpoint still knows."""
    ckpt = tmp_path / 'epoch_1.pth'
    torch.save({'state_dict': {}, 'meta': {'wandb_run_id': 'abc123'}}, ckpt)
    wandb_run_id(str(tmp_path), resume=False)  # the newer run's id, stored in the work dir
    assert wandb_run_id(str(tmp_path), resume=True, checkpoint=str(ckpt)) == 'abc123'
