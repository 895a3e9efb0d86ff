"""The repository speaks to its users: no file tracked by git mentions how the suite is developed
(another design document than docs/design.md, a private issue number, a machine's absolute paths,
folders outside the checkout); upstream bug reports are named unambiguously (`owner/repo#N` or a
link). The README stays short with its layout early, and every relative link in README.md and
docs/*.md leads to an existing file (and heading)."""
import re
import subprocess
from pathlib import Path

import pytest

from benchmark.layout import REPO_ROOT

# What must not be written, with the reason a reader would give. Case matters where it says so.
FORBIDDEN = {
    'a design document other than docs/design.md': re.compile(r'DESIGN\.md'),
    'a folder outside the checkout': re.compile(r'\.\./shared|(?<![\w-])shared/'),
    'an issue number of our own (upstream ones are owner/repo#N or a link)':
        re.compile(r'\b[Ii]ssues? (?:#\s*)?[0-9]+|\([Ii]ssue\b'),
    'the name of a development tool':
        re.compile(r'\b[Dd]evice (?:calls?|tool)\b'),
    "a development tool's output folder": re.compile(r'\$O' r'UT\b'),
    "a machine's absolute path": re.compile(r'(?<![\w.~-])/(?:work|root|home|opt|tmp|Users)/'),
}
# `#N` is only an upstream reference when an owner/repo precedes it (open-mmlab/mmengine#1655).
HASH_REFERENCE = re.compile(r'([\w./-]*)#([0-9]+)\b')
OWNER_REPO = re.compile(r'[\w.-]+/[\w.-]+')
# This file has to spell every pattern above, and the samples below, so it cannot pass its own
# scan; everything else tracked by git is scanned.
THIS_FILE = Path(__file__).resolve().relative_to(REPO_ROOT).as_posix()
# Generated numbers (records, speed tables as JSON, the paper's CSV) are data, not prose.
DATA_SUFFIXES = ('.json', '.csv')


def development_words(text: str):
    """(line number, what, the matched text) of every forbidden word in text."""
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            hits += [(number, what, m.group(0)) for m in pattern.finditer(line)]
        for m in HASH_REFERENCE.finditer(line):
            if not OWNER_REPO.fullmatch(m.group(1)):
                hits.append((number, 'an issue reference without its owner/repo', m.group(0)))
    return hits


def tracked_text_files():
    """Paths (relative to the checkout) of the text files git tracks, but data and this file."""
    try:
        out = subprocess.run(['git', 'ls-files', '-z'], cwd=REPO_ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip('not a git checkout: no list of tracked files')
    files = []
    for name in out.decode().split('\0'):
        path = REPO_ROOT / name
        if (not name or name == THIS_FILE or not path.is_file()
                or (name.startswith('results/') and name.endswith(DATA_SUFFIXES))):
            continue
        data = path.read_bytes()
        if b'\0' in data[:8192]:
            continue  # binary (images)
        try:
            files.append((name, data.decode('utf-8')))
        except UnicodeDecodeError:
            continue
    return files


def test_no_tracked_file_speaks_of_development():
    files = tracked_text_files()
    assert any(name == 'README.md' for name, _ in files)
    hits = [f'{name}:{number}: {found!r} ({what})'
            for name, text in files for number, what, found in development_words(text)]
    assert not hits, 'words for developers, not users:\n' + '\n'.join(hits)


# Each sample is written with a '|' inside its word, so that this file itself does not hold it.
@pytest.mark.parametrize('sample', [
    'see DES|IGN.md for the contract',
    'bash ../sha|red/gpu/fetch.sh',
    'copied from sha|red/paper_results.csv',
    'the five classes of iss|ue 11',
    'Iss|ue 14 compares them',
    'as iss|ues 5, 12, 14 asked',
    'split into packages (iss|ue 10)',
    'in as few dev|ice calls as possible',
    'one dev|ice call',
    "the dev|ice tool's folder",
    'outputs go to $O|UT',
    'read /wo|rk/sha|red/paper_results.csv',
    "work_dir='/t|mp/w'",
    'PYTHONPATH=/o|pt/site',
    'cd /ho|me/me/mixco',
    '/ro|ot/.cache/torch',
    'a bug of mmengine (mmengine#|1655)',
    'fixed in #|12',
])
def test_the_scan_catches_each_kind(sample):
    sample = sample.replace('|', '')
    assert development_words(sample), sample


@pytest.mark.parametrize('sample', [
    'a bug of mmengine (open-mmlab/mmengine#1655)',
    'pytorch/pytorch#47163 says it is harmless',
    '[reported](https://github.com/open-mmlab/mmengine/issues/1655)',
    'the design document (docs/design.md, "Public contracts")',
    'python tools/leaderboard.py --results-dir results/other',
    'examples_of(os.path.join("data", "root"), paths)',
    'shared-memory tensors; the workers_shared/ folder',
    'STEPS="env" bash tools/gpu_proof.sh OUTPUT_DIR',
    '~/wo|rk/data and ./t|mp/scratch are relative',
    'mixes of pairs, a tis|sue 3 layers thick',
])
def test_the_scan_lets_users_words_through(sample):
    sample = sample.replace('|', '')  # written as the samples above are
    assert development_words(sample) == [], sample


README = REPO_ROOT / 'README.md'
DOCS = sorted((REPO_ROOT / 'docs').glob('*.md'))


def test_readme_is_short_and_shows_the_layout_early():
    data = README.read_bytes()
    assert len(data) <= 15_000, f'README.md is {len(data):,} bytes; move detail to docs/'
    text = data.decode('utf-8')
    layout = re.search(r'^##+ Layout\b', text, re.MULTILINE)
    assert layout, 'README.md has no "Layout" section'
    assert layout.start() <= len(text) / 3, 'the "Layout" section starts after the first third'


FENCE = re.compile(r'^(```|~~~).*?^\1', re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r'`[^`\n]*`')
LINK = re.compile(r'!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REFERENCE = re.compile(r'^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$', re.MULTILINE)
HEADING = re.compile(r'^#{1,6}\s+(.*?)\s*#*\s*$', re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped (letters, digits,
    `_`, `-` and spaces kept), spaces to hyphens."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading).lower()  # a link: its text
    return ''.join(c for c in text if c.isalnum() or c in '_- ').replace(' ', '-')


def anchors(text: str) -> set:
    seen, out = {}, set()
    for heading in HEADING.findall(FENCE.sub('', text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f'{base}-{count}')
    return out


def relative_links(text: str):
    prose = INLINE_CODE.sub('', FENCE.sub('', text))
    return LINK.findall(prose) + REFERENCE.findall(prose)


def test_slug_and_links_parse_as_github_does():
    assert slug("On a GPU: `tools/gpu_proof.sh`") == 'on-a-gpu-toolsgpu_proofsh'
    assert slug("The paper's hyperparameters and their sources") == \
        'the-papers-hyperparameters-and-their-sources'
    assert anchors('# A\n## A\n```\n# not a heading\n```\n') == {'a', 'a-1'}
    text = ('[x](docs/a.md#b) ![img](p.png "title") [web](https://example.org) `[c](d.md)`\n'
            '```\n[e](f.md)\n```\n[ref]: g.md\n')
    assert relative_links(text) == ['docs/a.md#b', 'p.png', 'https://example.org', 'g.md']


@pytest.mark.parametrize('page', [README] + DOCS, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_relative_links_lead_to_existing_files_and_headings(page):
    text = page.read_text(encoding='utf-8')
    broken = []
    for target in relative_links(text):
        if re.match(r'[a-z][a-z0-9+.-]*:', target):  # https:, mailto:: not a file of ours
            continue
        path, _, anchor = target.partition('#')
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f'{target}: no such file')
        elif anchor and file.suffix == '.md' and anchor not in anchors(
                file.read_text(encoding='utf-8')):
            broken.append(f'{target}: no such heading in {file.relative_to(REPO_ROOT)}')
    assert not broken, f'{page.relative_to(REPO_ROOT)}: ' + '; '.join(broken)


def test_a_whole_run_of_the_tests_is_recorded_in_one_form():
    """`make test` writes its counts, time and CPU (tests/conftest.py: `last_run_text`)."""
    from tests.conftest import last_run_text
    text = last_run_text({'passed': 1994, 'skipped': 26}, 589.4, 3, 2,
                         'AMD EPYC (family 25, model 17, AVX-512)', 'd6cbee0' * 6,
                         '2026-11-29 21:25 UTC')
    assert '| 1,994 | 0 | 26 | 0 | 9 min 49 s |' in text and 'commit d6cbee0d6cbe,' in text
    assert 'on 2 core(s) of AMD EPYC (family 25, model 17, AVX-512)' in text


def test_readme_cites_the_tests_last_run_a_passing_run_of_the_whole_suite():
    """README cites the file a whole run of the tests writes, and the committed one is a
    passing run of the whole suite, in the form `last_run_text` writes."""
    from tests.conftest import LAST_RUN, last_run_text
    assert LAST_RUN.relative_to(REPO_ROOT).as_posix() in (REPO_ROOT / 'README.md').read_text()
    committed = LAST_RUN.read_text()
    found = re.search(r'in (\d+) process\(es\)\) on (.+?), at commit (\w+), on (\d+) core\(s\) '
                      r'of (.+?); .*\n\| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \| '
                      r'(\d+) min (\d+) s \|', committed, re.S)
    assert found, committed
    workers, when, commit, cores, cpu = found.group(1, 2, 3, 4, 5)
    passed, failed, skipped, errors = (int(n.replace(',', '')) for n in found.group(6, 7, 8, 9))
    assert failed == errors == 0 and passed > 1000
    assert last_run_text(dict(passed=passed, failed=0, skipped=skipped, error=0),
                         60 * int(found[10]) + int(found[11]), int(workers), int(cores), cpu,
                         commit, when) == committed
