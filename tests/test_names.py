"""benchmark.names: the vocabulary agrees with the registries, the configs, itself and the
docs: the docs' tables of methods, datasets and protocols list every one of them and nothing it
does not know, and docs/methods.md names the file of every method. Generated result blocks
(between ``<!-- results: ... -->`` lines) are left out of that: they are regenerated from
records, never typed."""
import re
from typing import Dict, Iterable, List, Tuple

import pytest
from mmengine.config import Config
from mmengine.registry import DATASETS, MODELS

import benchmark.data  # noqa: F401  registers the datasets
import methods  # noqa: F401  registers the models
from benchmark import names
from benchmark.layout import EVAL_CONFIG_DIR, REPO_ROOT
from benchmark.layout import config_method


def test_method_types_are_registered_models():
    for kind in names.METHODS:
        assert MODELS.get(kind) is getattr(methods, kind), kind


def test_dataset_types_are_registered_datasets():
    for kind in names.DATASETS:
        assert DATASETS.get(kind) is getattr(benchmark.data, kind), kind


@pytest.mark.parametrize('name,suffix', sorted(names.LINEAR_CONFIG_SUFFIX.items()))
def test_every_linear_suffix_has_its_config_reading_that_dataset(name, suffix):
    path = EVAL_CONFIG_DIR / f'linear_r18_{suffix}.py'
    assert path.is_file(), path
    cfg = Config.fromfile(str(path))
    assert cfg.train_dataloader.dataset.type == names.DATA_TYPES[name]


def test_linear_suffixes_and_eval_configs_correspond():
    suffixes = names.LINEAR_CONFIG_SUFFIX
    assert {'tiny-imagenet': 'tiny', 'cifar10': 'cifar10', 'cifar100': 'cifar100',
            'digits': 'digits'}.items() <= suffixes.items()
    assert names.DATASETS['ImageFolderDataset'][1] is None
    assert 'imagefolder' not in suffixes  # no linear config shipped for it
    shipped = {p.stem[len('linear_r18_'):] for p in EVAL_CONFIG_DIR.glob('linear_r18_*.py')}
    assert shipped == set(suffixes.values())


def test_derived_tables_invert_each_other():
    assert {names.DATA_TYPES[v]: v for v in names.DATA_NAMES.values()} == names.DATA_NAMES
    assert set(names.DATA_ALIASES.values()) <= set(names.DATA_NAMES.values())
    assert names.DATA_ALIASES['tiny'] == 'tiny-imagenet'
    assert names.METHOD_NAMES['MixCoMoCo'] == 'mixco'
    assert names.METHOD_LABELS['mocov2'] == 'MoCo-v2'
    # supervised, then the untrained encoder, then every method once, in the table's order
    order = names.METHOD_ORDER
    assert order[:2] == ('supervised', names.RANDOM_INIT)
    assert sorted(order[2:]) == sorted(set(names.METHOD_NAMES.values()) - {'supervised'})
    assert order.index('mocov2') < order.index('mixco') and order.index('simclr') < order.index(
        'mixco_simclr')


def test_method_labels_fall_back_to_the_record_name():
    assert names.method_label('mixco') == 'MixCo (MoCo-v2)' == names.METHOD_LABELS['mixco']
    assert names.method_label(names.RANDOM_INIT) == 'random init'
    assert names.method_label('pcl') == 'pcl'  # a method only the paper ran
    assert all(names.method_label(name) == label for name, label in names.METHODS.values())


def test_baselines_are_methods_and_match_the_papers_mixco_flag():
    methods_ = set(names.METHOD_ORDER)
    assert names.BASELINES['mixco'] == 'mocov2' and names.BASELINES['mixco_simclr'] == 'simclr'
    for variant, baseline in names.BASELINES.items():
        assert {variant, baseline} <= methods_ and baseline not in names.BASELINES
    # the paper's CSV: base method + mixco=yes -> the MixCo variant compared with that base
    for base, variant in names.PAPER_MIXCO.items():
        assert names.BASELINES[variant] == base


def test_protocol_name_canonicalises_and_rejects():
    assert names.protocol_name('tsne') == 'cluster_tsne'
    for protocol in names.PROTOCOLS:
        assert names.protocol_name(protocol) == protocol
    with pytest.raises(ValueError, match=r"^unknown protocol 'linear'; choose from \["):
        names.protocol_name('linear')


def test_protocol_tables_agree():
    assert sorted(names.PROTOCOL_ORDER) == sorted(names.PROTOCOLS)
    assert len(set(names.PROTOCOL_ORDER)) == len(names.PROTOCOL_ORDER)
    assert set(names.FEATURE_PROTOCOLS) <= set(names.PROTOCOLS)
    assert set(names.PAPER_PROTOCOLS.values()) <= set(names.PROTOCOLS)
    assert set(names.PROTOCOL_ALIASES.values()) <= set(names.PROTOCOLS)
    assert [names.protocol_family(p) for p in names.PROTOCOL_ORDER] == [
        'classification'] * 5 + ['cluster'] * 2
    # Online protocols (measured during pretraining) are protocols with their own label.
    assert set(names.ONLINE_PROTOCOLS) <= set(names.PROTOCOLS) - set(names.FEATURE_PROTOCOLS)
    assert all('online' in names.PROTOCOLS[p] for p in names.ONLINE_PROTOCOLS)


def test_metric_tables_agree():
    assert names.METRICS == names.ACCURACY + names.CLUSTER
    assert set(names.METRIC_FORMATS) == set(names.METRICS)
    assert format(12.3456, names.METRIC_FORMATS['top1']) == '12.35'
    assert names.STATUSES == ('ok', 'diverged', 'failed')


# The docs

DOCS = REPO_ROOT / 'docs'
CODE = re.compile(r'`([^`]+)`')
RESULTS = re.compile(r'^<!-- results: (\S+) -->$.*?^<!-- /results: \1 -->$', re.M | re.S)
HEADING = re.compile(r'^(#+) (.*)$')
# The MoCo-v2 family of docs/methods.md: every method compared with MoCo-v2.
MOCO_FAMILY = sorted(m for m, base in names.BASELINES.items() if base == 'mocov2')


def page_text(page: str) -> str:
    """docs/<page> without its generated result blocks."""
    return RESULTS.sub('', (DOCS / page).read_text(encoding='utf-8'))


def split_row(line: str) -> List[str]:
    return [cell.strip() for cell in re.split(r'(?<!\\)\|', line.strip()[1:-1])]


def parse_table(text: str, heading: str) -> List[Dict[str, str]]:
    """The rows ({header: cell}) of the first table in the section `heading` of a page's text
    (up to the next heading of its level or above, code blocks skipped); [] where none is."""
    level, lines, fenced = None, [], False
    for line in text.splitlines():
        if line.startswith(('```', '~~~')):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if level is None:
            level = len(match.group(1)) if match and match.group(2).strip() == heading else None
            continue
        if match and len(match.group(1)) <= level:
            break
        if line.startswith('|') and not fenced:
            lines.append(line)
        elif lines:
            break
    if len(lines) < 2:
        return []
    header = split_row(lines[0])
    return [dict(zip(header, split_row(line))) for line in lines[2:]]


def table(page: str, heading: str) -> List[Dict[str, str]]:
    rows = parse_table(page_text(page), heading)
    if not rows:
        pytest.fail(f'docs/{page}: no table under the heading {heading!r}')
    return rows


def compare(found: Iterable[str], vocabulary: Iterable[str], where: str, what: str) -> List[str]:
    """A line for each name of `vocabulary` that `found` lacks and each name of `found` that is
    not in it."""
    found, vocabulary = list(dict.fromkeys(found)), list(vocabulary)
    return ([f'{where}: no row for {n!r}, a {what}' for n in vocabulary if n not in found]
            + [f'{where}: a row names {n!r}, which is no {what}' for n in found
               if n not in vocabulary])


def method_rows(rows: List[Dict[str, str]]) -> List[Tuple[List[str], List[str]]]:
    """(the record names in the method column, the model types) of each row that names methods;
    rows whose method cell names no code (fast variants, the linear protocol, suites) are
    other configs."""
    return [(CODE.findall(row['method']), CODE.findall(row['model'])) for row in rows
            if CODE.findall(row['method'])]


def module_file(kind: str) -> str:
    model = getattr(methods, kind, None)
    return model.__module__.replace('.', '/') + '.py' if model else f'methods/<{kind}>.py'


def test_the_configs_table_lists_every_method_with_its_model():
    where = "docs/configuration.md, table 'The configs'"
    rows = method_rows(table('configuration.md', 'The configs'))
    problems = compare([n for listed, _ in rows for n in listed], names.METHOD_NAMES.values(),
                       where, 'method of benchmark/names.py METHODS')
    for listed, kinds in rows:
        methods_of_kinds = [names.METHOD_NAMES.get(kind, kind) for kind in kinds]
        if sorted(methods_of_kinds) != sorted(listed):
            problems.append(f'{where}: the row of {listed} names the model types {kinds}, '
                            f'which benchmark/names.py METHODS gives to {methods_of_kinds}')
    assert not problems, '\n'.join(problems)


def row_method(cell: str) -> str:
    """The method of the config a cell names (by its file name), else the cell as it is."""
    config = next(iter(CODE.findall(cell)), cell)
    return config_method(config) or re.sub(r'_r\d+_.*', '', config)


def test_the_mix_up_family_table_lists_every_variant_of_mocov2():
    where = "docs/methods.md, table 'The mix-up family'"
    rows = {row_method(row['config']): row for row in table('methods.md', 'The mix-up family')}
    problems = compare(rows, MOCO_FAMILY, where,
                       "method of benchmark/names.py BASELINES compared with 'mocov2'")
    kinds = {name: kind for kind, name in names.METHOD_NAMES.items()}
    for name, row in rows.items():
        if name not in kinds:
            continue
        stem = names.METHOD_LABELS[name].split(' (')[0]  # 'i-Mix' of 'i-Mix (MoCo-v2)'
        if not row['method'].startswith(stem):
            problems.append(f"{where}: the row of {name!r} is {row['method']!r}; its label in "
                            f'benchmark/names.py METHODS starts {stem!r}')
        if f'`{module_file(kinds[name])}`' not in row['file']:
            problems.append(f"{where}: the row of {name!r} names the file {row['file']}, not "
                            f'`{module_file(kinds[name])}`')
    assert not problems, '\n'.join(problems)


def test_methods_md_names_the_file_of_every_method():
    text = page_text('methods.md')
    missing = [f'docs/methods.md: {name!r} ({label}) is described nowhere: its file '
               f'`{module_file(kind)}` is not named'
               for kind, (name, label) in names.METHODS.items()
               if f'`{module_file(kind)}`' not in text]
    assert not missing, '\n'.join(missing)


def test_the_data_formats_table_lists_every_dataset():
    rows = table('data.md', 'Formats')
    column = next((h for h in rows[0] if h.startswith('name')), None)
    assert column, "docs/data.md, table 'Formats': no column 'name' of the datasets' names"
    problems = compare([n for row in rows for n in CODE.findall(row[column])],
                       names.DATA_NAMES.values(), "docs/data.md, table 'Formats'",
                       'dataset of benchmark/names.py DATASETS')
    assert not problems, '\n'.join(problems)


def test_the_protocol_table_lists_every_protocol():
    where = "docs/evaluation.md, table 'After training'"
    found, problems = [], []
    for row in table('evaluation.md', 'After training'):
        # the protocol, then other names it is asked for by (commands are no names)
        protocol, *aliases = [c for c in CODE.findall(row['protocol']) if re.fullmatch(r'\w+', c)
                              ] or [row['protocol']]
        found.append(protocol)
        problems += [f'{where}: the row of {protocol!r} names {a!r}, which is no alias of it in '
                     'benchmark/names.py PROTOCOL_ALIASES' for a in aliases
                     if names.PROTOCOL_ALIASES.get(a) != protocol]
    problems += compare(found, names.PROTOCOLS, where,
                        'protocol of benchmark/names.py PROTOCOLS')
    assert not problems, '\n'.join(problems)


def test_tables_are_read_as_written():
    """The parser finds the table of its section only, cell by cell, code blocks skipped."""
    text = ('# Page\n## A\n```\n# not a heading\n```\n\n| x | y |\n| --- | --- |\n'
            '| `a` | b \\| c |\n\nafter\n| z |\n|---|\n| 1 |\n## B\n| w |\n|---|\n| 2 |\n')
    assert parse_table(text, 'A') == [{'x': '`a`', 'y': 'b \\| c'}]
    assert parse_table(text, 'B') == [{'w': '2'}]
    assert parse_table(text, 'C') == []
    assert compare(['a', 'c'], ['a', 'b'], 'p', 'thing') == [
        "p: no row for 'b', a thing", "p: a row names 'c', which is no thing"]
