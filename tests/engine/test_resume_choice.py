"""--resume picks the newest checkpoint that loads, or says it starts from scratch."""
import os

import torch

from benchmark.engine.checkpoints import choose_resume_checkpoint


def _checkpoint(path, iteration):
    torch.save({'state_dict': {'w': torch.ones(3)}, 'meta': {'iter': iteration}}, path)
    return str(path)


def test_resume_skips_an_unreadable_newest_checkpoint(tmp_path):
    good = _checkpoint(tmp_path / 'epoch_1.pth', 4)
    newest = _checkpoint(tmp_path / 'iter_6.pth', 6)
    data = open(newest, 'rb').read()
    open(newest, 'wb').write(data[:len(data) // 2])  # killed mid-write by a foreign tool
    os.utime(good, (1, 1))
    (tmp_path / 'last_checkpoint').write_text(newest)
    path, messages = choose_resume_checkpoint(str(tmp_path))
    assert path == good
    assert len(messages) == 2 and 'skipping unreadable checkpoint' in messages[0]
    assert newest in messages[0] and messages[1] == f'resuming from {good}'


def test_resume_without_checkpoints_says_it_starts_from_scratch(tmp_path):
    path, messages = choose_resume_checkpoint(str(tmp_path))
    assert path is None and messages == [
        f'--resume: no loadable checkpoint in {tmp_path}; starting from scratch']
