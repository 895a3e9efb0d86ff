"""The exit codes are defined once, in benchmark/exit_codes.py, and each means one thing."""
import ast

from benchmark import exit_codes
from benchmark.layout import REPO_ROOT


def test_each_code_is_one_value_defined_in_one_place():
    codes = {name: value for name, value in vars(exit_codes).items() if name.endswith('_CODE')}
    assert codes == {'BAD_INPUT_EXIT_CODE': 2, 'DIVERGED_EXIT_CODE': 3, 'DISK_FULL_EXIT_CODE': 74,
                     'WORK_DIR_BUSY_EXIT_CODE': 75, 'PREEMPTED_EXIT_CODE': 128 + 15}
    elsewhere = []
    for folder in ('benchmark', 'methods', 'tools'):
        for path in (REPO_ROOT / folder).rglob('*.py'):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id in codes for t in node.targets):
                    elsewhere.append(str(path.relative_to(REPO_ROOT)))
    assert elsewhere == ['benchmark/exit_codes.py'] * len(codes)
