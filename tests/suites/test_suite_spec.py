"""Suite files: expansion into runs (stable names, override digests, grids), the config hash
tools/train.py records, the shipped suites, and bad files as one-line errors (through
tools/run_suite.py: tests/tools/test_tool_arguments.py)."""
import hashlib
import json

import pytest

import benchmark.components  # noqa: F401  registers what the configs name
from benchmark.engine.config_file import merge_options, read_config
from benchmark.engine.config_text import config_identity
from benchmark.engine.launch import load_config
from benchmark.suites.options import digest, option_text, parse_option
from benchmark.suites.spec import DEFAULT, SuiteError, expand_suite
from benchmark.layout import SUITE_CONFIG_DIR
from benchmark.reports.comparisons import StatsPolicy

DIGITS = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']


def write_suite(tmp_path, text: str, name: str = 'tiny'):
    path = tmp_path / f'{name}.py'
    path.write_text(text)
    return str(path)


def test_names_are_stem_digest_seed_and_stable(tmp_path):
    """A config as it is: <stem>-s<seed>; with overrides: <stem>-<8 hex of them>-s<seed>, the
    same whatever the order they are written in, and the same on every expansion."""
    plain = expand_suite(write_suite(tmp_path, f'configs = {DIGITS!r}\nseeds = [0, 3]\n'),
                         results_root=str(tmp_path / 'r'), work_root=str(tmp_path / 'w'))
    assert [r.name for r in plain.runs] == ['mocov2_r18_digits-s0', 'mocov2_r18_digits-s3',
                                            'mixco_r18_digits-s0', 'mixco_r18_digits-s3']
    assert plain.runs[1].work_dir == str(tmp_path / 'w' / 'suites' / 'tiny' / 'mocov2_r18_digits-s3')
    assert plain.results_dir == str(tmp_path / 'r' / 'suites' / 'tiny')
    text = ("configs = [dict(config='configs/mixco_r18_digits.py', "
            "grid={'model.mix_temperature': [0.1], 'model.mix_weight': [2.0]})]\nseeds = [1]\n")
    swapped = text.replace("'model.mix_temperature': [0.1], 'model.mix_weight': [2.0]",
                           "'model.mix_weight': [2.0], 'model.mix_temperature': [0.1]")
    one = expand_suite(write_suite(tmp_path, text, 'a')).runs[0]
    two = expand_suite(write_suite(tmp_path, swapped, 'b')).runs[0]
    expected = hashlib.sha256(json.dumps({'model.mix_temperature': '0.1', 'model.mix_weight': '2.0'},
                                         sort_keys=True).encode()).hexdigest()[:8]
    assert one.name == two.name == f'mixco_r18_digits-{expected}-s1'
    assert one.config_sha256 == two.config_sha256
    assert one.variant == {'model.mix_temperature': 0.1, 'model.mix_weight': 2.0}
    assert one.option_args[-1] == 'randomness.seed=1'


def test_config_hash_is_what_train_py_records(tmp_path):
    """tools/train.py hashes config_identity of load_config(config, --cfg-options, --work-dir,
    launcher, --resume): the same for a fresh start, a resume and another launcher."""
    suite = expand_suite(write_suite(tmp_path, "configs = ['configs/mixco_r18_digits.py']\n"
                                     "cfg_options = {'train_cfg.max_epochs': 2}\nseeds = [4]\n"))
    run = suite.runs[0]
    options = {a.split('=', 1)[0]: parse_option(a.split('=', 1)[1]) for a in run.option_args}
    for launcher, resume in (('pytorch', None), ('slurm', 'auto')):
        cfg = load_config('configs/mixco_r18_digits.py', options, run.work_dir, launcher, resume)
        assert hashlib.sha256(config_identity(cfg).encode()).hexdigest() == run.config_sha256
    # tools/eval.py: the config read and merged with the same --cfg-options, no work dir.
    cfg = read_config('configs/mixco_r18_digits.py')
    merge_options(cfg, options)
    assert hashlib.sha256(config_identity(cfg).encode()).hexdigest() == run.config_sha256
    assert run.info['method'] == 'mixco' and run.info['seed'] == 4 and run.max_epochs == 2
    other = expand_suite(write_suite(tmp_path, "configs = ['configs/mixco_r18_digits.py']\n"
                                     "seeds = [4]\n", 'other')).runs[0]
    assert other.config_sha256 != run.config_sha256  # max_epochs differs


@pytest.mark.slow
def test_grids_expand_as_products_and_unions(tmp_path):
    text = ("configs = [dict(config='configs/mixco_r18_digits.py', grid=["
            "{'model.mix_temperature': [0.1, 0.3], 'model.mix_weight': [0.5, 2.0]},"
            "{'model.mix_pairing': 'permutation'}])]\nseeds = [0, 1]\n")
    suite = expand_suite(write_suite(tmp_path, text))
    labels = sorted({r.variant_label for r in suite.runs})
    assert labels == ['model.mix_pairing=permutation',
                      'model.mix_temperature=0.1, model.mix_weight=0.5',
                      'model.mix_temperature=0.1, model.mix_weight=2.0',
                      'model.mix_temperature=0.3, model.mix_weight=0.5',
                      'model.mix_temperature=0.3, model.mix_weight=2.0']
    assert len(suite.runs) == 10 and len({r.name for r in suite.runs}) == 10


def test_a_variant_equal_to_the_default_runs_once_with_a_note(tmp_path):
    text = ("configs = ['configs/mixco_r18_digits.py', dict(config='configs/mixco_r18_digits.py',"
            " grid={'model.mix_temperature': [0.2, 0.5]})]\n")  # 0.2 is the digits default
    suite = expand_suite(write_suite(tmp_path, text))
    assert [r.variant_label for r in suite.runs] == ['', 'model.mix_temperature=0.5']
    assert len(suite.notes) == 1 and 'same config as mixco_r18_digits-s0' in suite.notes[0]


def test_option_text_round_trips_through_cfg_options():
    for value in (3, 0.05, 1e-4, True, None, 'beta', [1, 2], (0.2, 1.0), ['a', [1, 2]]):
        assert parse_option(option_text(value)) == value
    for bad in ({'a': 1}, '1', 'two words', 'true', ''):
        with pytest.raises(SuiteError):
            option_text(bad)
    assert digest({'b': 1, 'a': 'x'}) == digest({'a': 'x', 'b': 1}) != digest({'a': 'y', 'b': 1})


# FLOPs per image of one step of each paper config at its shipped sizes (224 px, 64 a process),
# as budget.count_epoch_cost counts them on Tiny-ImageNet (tests/suites/test_budget.py counts
# that suite's steps on a fake one), and its images an epoch: 2 x 781 batches of 64.
PAPER_STEPS = {'MoCo': 14308638720.0, 'MixCoMoCo': 19649085440.0, 'SimCLR': 21294841856.0,
               'MixCoSimCLR': 31942197248.0}


@pytest.mark.slow
def test_shipped_suites_expand_and_validate(monkeypatch, tmp_path):
    """Every suite file builds and checks every run's config; the ablation keeps its variants."""
    from benchmark.suites import budget
    names = {p.stem: p for p in SUITE_CONFIG_DIR.glob('*.py')}
    assert {'demo_digits', 'paper_table1_r18', 'mixco_ablation_r18', 'mix_family_r18',
            'mix_family_digits', 'compute_paper_table1_r18'} <= set(names)
    suites = {name: expand_suite(str(path)) for name, path in names.items()
              if name != 'compute_paper_table1_r18'}
    monkeypatch.setattr(budget, 'count_epoch_cost', lambda cfg, procs: dict(
        flops_per_image=PAPER_STEPS[cfg.model.type], images_per_epoch=2 * 781 * 64))
    paper = expand_suite(str(names['compute_paper_table1_r18']), results_root=str(tmp_path))
    matched = {r.info['method']: r.max_epochs for r in paper.runs if r.budget}
    assert matched == {'mocov2': 100, 'mixco': 73, 'simclr': 67, 'mixco_simclr': 45}
    assert len(paper.runs) == 7 * 3 and paper.procs == 2 and [
        e.name for e in paper.evaluations] == ['default', 'linear_paper', 'linear_paper@cifar10',
                                                'linear_paper@cifar100']
    demo = suites['demo_digits']
    assert (len(demo.runs), demo.procs, demo.evaluations) == (6, 1, (DEFAULT,))
    assert demo.cfg_options == {"train_dataloader.batch_size": 64,  # the configs' total batch
                                'model.backbone.width': 0.25}
    assert {r.info['backbone'] for r in demo.runs} == {'resnet18-w0.25'}
    assert suites['demo_digits_full'].cfg_options == {"train_dataloader.batch_size": 64}
    table1 = suites['paper_table1_r18']
    assert {r.info['method'] for r in table1.runs} == {'supervised', 'mocov2', 'mixco', 'simclr',
                                                        'mixco_simclr'}
    assert [e.name for e in table1.evaluations] == ['default', 'linear_paper',
                                                     'linear_paper@cifar10', 'linear_paper@cifar100']
    ablation = suites['mixco_ablation_r18']
    variants = {r.variant_label for r in ablation.runs if r.info['method'] == 'mixco'}
    assert len(variants) == 11 and '' in variants and 'model.mix_joint_forward=False' in variants
    assert {'model.mix_temperature=0.5', 'model.mix_weight=2.0', 'model.mix_pairing=permutation',
            'model.mix_lambda=beta, model.mix_alpha=0.2'} <= variants
    assert len(ablation.runs) == 12 * 3
    family = suites['mix_family_digits']
    assert [r.info['method'] for r in family.runs[::2]] == ['mocov2', 'mixco', 'imix', 'unmix', 'mochi']
    assert family.seeds == [0, 1]
    assert {r.info['method'] for r in suites['mix_family_r18'].runs} == {
        'mocov2', 'mixco', 'imix', 'unmix', 'mochi'}
    compute = suites['compute_digits']  # MixCo's step costs more: fewer epochs at equal FLOPs
    matched = {r.info['method']: r.max_epochs for r in compute.runs if r.budget}
    assert matched['mocov2'] == 30 and 18 <= matched['mixco'] < 30 and len(compute.runs) == 21


@pytest.mark.parametrize('text, message', [
    ("configs = ['configs/nope.py']\n", 'config configs/nope.py not found'),
    ("configs = ['configs/mocov2_r18_digits.py']\nseed = [0]\n", "unknown key 'seed' (did you mean 'seeds'?)"),
    ("configs = [dict(config='configs/mixco_r18_digits.py', grid={'model.mix_temprature': [0.1]})]\n",
     "run mixco_r18_digits-"),
    ("configs = [dict(config='configs/mocov2_r18_digits.py', cfg_options={'train_cfg.max_epochs': 0})]\n",
     'train_cfg.max_epochs'),
    ("configs = ['configs/mocov2_r18_digits.py']\nseeds = [0, 0]\n", 'lists a value twice'),
    ("configs = ['configs/mocov2_r18_digits.py']\nevaluations = ['linear']\n", 'unknown protocol'),
    ("configs = ['configs/mocov2_r18_digits.py']\nevaluations = [dict(protocols='knn', "
     "eval_data='cifar10')]\n", 'needs data_root'),
    ("configs = ['configs/mocov2_r18_digits.py']\nprocs = 0\n", 'procs must be an integer >= 1'),
    ("configs = []\n", 'configs is missing or empty'),
    # the queue must hold every process's batch: known from procs before anything starts
    ("configs = ['configs/mocov2_r18_digits.py']\nprocs = 64\n",
     'model.queue_size (1024) must be >= the total batch, 64 process(es)'),
])
def test_bad_suites_are_one_line_errors(tmp_path, text, message):
    with pytest.raises(SuiteError, match=None) as info:
        expand_suite(write_suite(tmp_path, text))
    assert message in str(info.value) and '\n' not in str(info.value)
    if 'temprature' in text:
        assert "unknown key 'model.mix_temprature'" in str(info.value)



# The statistics keys: how the suite's comparisons are judged (benchmark/suites/policy.py; each
# bad value of read_policy: tests/suites/test_suite_policy.py). Here: through a suite file.

@pytest.mark.slow
def test_statistics_keys_are_read_into_the_suites_policy(tmp_path):
    plain = expand_suite(write_suite(tmp_path, f'configs = {DIGITS!r}\n', 'plain'))
    assert plain.policy == StatsPolicy()
    assert plain.policy.min_seeds == 5 and plain.policy.equivalence_margin is None
    text = (f'configs = {DIGITS!r}\nmin_seeds = 6\nmin_effect = 1\nequivalence_margin = 0.5\n'
            "primary = dict(protocols=['knn', 'tsne'], eval_data='digits', methods=['mixco'])\n")
    policy = expand_suite(write_suite(tmp_path, text, 'declared')).policy
    assert policy == StatsPolicy(min_seeds=6, min_effect=1.0, equivalence_margin=0.5,
                                 primary_protocols=('knn', 'cluster_tsne'),
                                 primary_eval_data=('digits',), primary_methods=('mixco',))
    assert isinstance(policy.min_effect, float)
    # one part of `primary` replaces that part only
    only = expand_suite(write_suite(tmp_path, f"configs = {DIGITS!r}\n"
                                    "primary = dict(protocols=['linear_fast'])\n", 'only'))
    assert only.policy == StatsPolicy(primary_protocols=('linear_fast',))


@pytest.mark.parametrize('keys, message', [
    ('min_seeds = 1', 'min_seeds must be an integer >= 2, got 1'),
    ('min_effect = 0', 'min_effect must be a number > 0 (metric points), got 0'),
    ('equivalence_margin = -0.5', 'equivalence_margin must be a number > 0'),
    ("primary = dict(protocol=['knn'])",
     "primary: unknown key 'protocol' (did you mean 'protocols'?)"),
    ("primary = dict(protocols=['linaer'])", "primary.protocols: unknown protocol 'linaer'"),
    ("primary = dict(methods=['mocov2'])", "primary.methods: ['mocov2'] have no baseline"),
    ("primary = ['knn']", "primary must be a dict like dict(protocols=['knn'])"),
    ('min_seed = 5', "unknown key 'min_seed' (did you mean 'min_seeds'?)"),
])
def test_bad_statistics_keys_are_one_line_errors_naming_the_key(tmp_path, keys, message):
    path = write_suite(tmp_path, f"configs = ['configs/mocov2_r18_digits.py']\n{keys}\n")
    with pytest.raises(SuiteError) as info:
        expand_suite(path)
    assert str(info.value).startswith(f'suite {path}: ')
    assert message in str(info.value) and '\n' not in str(info.value)
