"""tools/calibrate_stats.py: both generated tables (the leaderboard's calibration and the
seeds-until-decided design) into a page's two blocks, and a page without them refused."""
import pytest

from tools.calibrate_stats import main


@pytest.mark.slow
def test_both_tables_go_into_their_blocks(tmp_path, capsys):
    page = tmp_path / 'page.md'
    page.write_text('# Page\n\n<!-- results: calibration -->\nold\n<!-- /results: calibration -->\n'
                    '\n<!-- results: sequential -->\n<!-- /results: sequential -->\n')
    assert main(['--reps', '10', '--publish', str(page)]) == 0
    text = page.read_text()
    assert 'old' not in text and '| paired seeds | false better/worse per family' in text
    assert '| true Δ (top-1 points) | false better/worse per family | called better |' in text
    assert 'looks at 8, 10, 12 seeds (--max-seeds 12 --round 2)' in text
    assert 'wrote' in capsys.readouterr().out


def test_a_page_without_the_blocks_is_refused_before_any_simulation(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('<!-- results: calibration -->\n<!-- /results: calibration -->\n')
    with pytest.raises(ValueError, match='sequential'):
        main(['--reps', '10', '--publish', str(page)])
