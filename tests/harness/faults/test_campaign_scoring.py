"""The fault campaign's scoring, in-process: each section turns what its runs did into the
scorecard's counts, and tools/fault_campaign.py runs the sections in order and exits 1 on any
failure. The runs are stand-ins here (their outcomes chosen); the faults themselves are injected
for real in test_resume_in_process.py and tests/e2e/test_faults.py."""
import json
import subprocess
from pathlib import Path

import pytest
import torch

from benchmark.harness.faults import campaign as fc
from tools import fault_campaign


def completed(returncode=0, stdout='', stderr=''):
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


@pytest.mark.parametrize('stderr, clean', [
    ('error: configs/mixco_r18_tiny.py: model.temperature must be > 0, got 0\n', True),
    ('Traceback (most recent call last):\nerror: boom\n', False),
])
def test_malformed_configs_count_clean_one_line_errors(monkeypatch, stderr, clean):
    calls = []
    monkeypatch.setattr(fc.subprocess, 'run',
                        lambda cmd, **kw: calls.append(cmd) or completed(2, stderr=stderr))
    card = fc.Scorecard()
    fc.section_configs(card, 'data', log=lambda *a: None)
    assert len(calls) == len(fc.MALFORMED) == card.bad_inputs_tried
    assert card.bad_inputs_rejected == (len(fc.MALFORMED) if clean else 0)
    assert [c[-len(o):] for c, (_, o) in zip(calls, fc.MALFORMED)] == [o for _, o in fc.MALFORMED]
    assert all(c[c.index('--cfg-options') + 1] == 'train_dataloader.dataset.data_root=data'
               for c in calls)


@pytest.mark.parametrize('rc, status, finite, ok', [
    (3, 'diverged', True, True), (0, 'ok', True, False), (3, 'diverged', False, False)])
def test_nan_section_needs_exit_3_a_diverged_record_and_finite_checkpoints(
        tmp_path, monkeypatch, rc, status, finite, ok):
    def fake_train(cfg, work, **kwargs):
        runs = Path(work, 'results', 'runs')
        runs.mkdir(parents=True)
        (runs / 'r.json').write_text(json.dumps({'status': status}))
        weight = torch.ones(2) if finite else torch.tensor([1.0, float('nan')])
        torch.save({'state_dict': {'w': weight}}, Path(work, 'iter_4.pth'))
        return completed(rc, stdout='stopped at iteration 5')
    monkeypatch.setattr(fc, 'train', fake_train)
    card = fc.Scorecard()
    fc.section_nan(card, str(tmp_path), 'data', log=lambda *a: None)
    assert (card.faults_injected, card.faults_survived) == (1, int(ok))
    assert (card.failures == []) == ok


def test_bad_data_section_scans_exactly_and_scores_both_policies(tmp_path, monkeypatch):
    seen = {}

    def strict_run(cmd, **kwargs):  # the strict policy's refusal names the bad files' count
        seen['strict'] = cmd
        return completed(2, stderr=f"error: {seen['bad']} bad image files; see the scan\n")

    def skip_train(cfg, work, **kwargs):
        seen['skip'] = Path(cfg).read_text()
        return completed(0, stdout=f"left out {seen['bad']} bad image files")

    from benchmark.data import scan
    real_scan = scan.scan_image_files

    def scan_and_note(files):  # the real scan; the planted count is what the runs must name
        report = real_scan(files)
        seen['bad'] = report.bad
        return report
    monkeypatch.setattr(scan, 'scan_image_files', scan_and_note)
    monkeypatch.setattr(fc.subprocess, 'run', strict_run)
    monkeypatch.setattr(fc, 'train', skip_train)
    card = fc.Scorecard()
    fc.section_bad_data(card, str(tmp_path), log=lambda *a: None)
    assert seen['bad'] > 0
    assert card.failures == [] and card.bad_inputs_tried == card.bad_inputs_rejected == 2
    assert card.faults_injected == card.faults_survived == 1
    assert "bad_data='skip'" in seen['skip'] and 'configs/mocov2_r18_tiny.py' in seen['strict']


def test_the_tool_runs_every_section_in_order_and_fails_on_a_failure(tmp_path, monkeypatch,
                                                                      run_main):
    order = []
    names = ('section_kills', 'section_save_kills', 'section_preemption', 'section_nan',
             'section_dead_rank', 'section_configs', 'section_bad_data', 'section_records')
    for name in names:
        def section(card, *args, _name=name, **kwargs):
            order.append((_name, kwargs))
            card.fault(True, _name)
        monkeypatch.setattr(fc, name, section)
    def stop_section(card, tmp, data, rng, stops, **kwargs):
        order.append(('section_stops', dict(stops=len(stops))))
        card.fault(True, 'section_stops')
    monkeypatch.setattr(fault_campaign.stops, 'section_stops', stop_section)
    monkeypatch.setattr(fc, 'remove_checkpoints', lambda path: order.append(('removed', path)))
    code, out, err, _ = run_main(fault_campaign, '--out', tmp_path / 'runs', '--quick')
    assert code == 0, err
    in_order = [*names[:3], 'section_stops', *names[3:]]
    assert [n for n, _ in order] == in_order + ['removed']
    assert order[0][1] == {'kills_per_method': 1} and order[1][1] == {'kills': 3}
    assert order[3][1] == {'stops': 8}  # --quick: 8 of the 32 stops
    assert 'faults injected / survived:     9 / 9' in out and 'FAILED' not in out
    assert (tmp_path / 'runs' / 'data' / 'tiny-imagenet-200' / 'wnids.txt').is_file()

    monkeypatch.setattr(fc, 'section_records', lambda card, tmp: card.fault(False, 'lost rows'))
    code, out, err, _ = run_main(fault_campaign, '--out', tmp_path / 'again', '--keep-checkpoints')
    assert code == 1 and 'FAILED: lost rows' in out
    assert ('section_stops', dict(stops=32)) in order  # all of them without --quick
    order.clear()
    code, out, err, _ = run_main(fault_campaign, '--out', tmp_path / 'only', '--only', 'stops',
                                 'nan')
    assert code == 0 and [n for n, _ in order] == ['section_stops', 'section_nan', 'removed']
