"""tools/gpu_proof.sh on CPU: its arguments, output folder, scratch folders and failure
accounting (on a CPU the env step fails for want of CUDA, which the table must say), and the kill
step's plumbing with a stand-in interpreter."""
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / 'tools' / 'gpu_proof.sh'
USAGE = 'usage: tools/gpu_proof.sh [OUTPUT_DIR]'
no_cuda = pytest.mark.skipif(__import__('torch').cuda.is_available(),
                             reason='checks the CPU outcome')


def proof(tmp_path, env, steps, *args, script=SCRIPT, cwd=ROOT, **extra):
    """Run the script with STEPS=steps and the given arguments; scratch folders under tmp/."""
    (tmp_path / 'tmp').mkdir(exist_ok=True)
    env = dict(env, STEPS=steps, PYTHON=sys.executable, WHEELS=str(tmp_path / 'no-wheels'),
               TMPDIR=str(tmp_path / 'tmp'))
    env.update(extra)
    return subprocess.run(['bash', str(script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_help_prints_the_usage(tmp_path, subprocess_env):
    proc = proof(tmp_path, subprocess_env, 'env', '-h')
    assert proc.returncode == 0 and proc.stdout.startswith(USAGE) and proc.stderr == ''
    assert len(proc.stdout.splitlines()) == 1


@pytest.mark.parametrize('args,message', [
    (('a', 'b'), "error: 2 arguments given, at most one (OUTPUT_DIR) expected; "),
    (('--out',), "error: OUTPUT_DIR '--out': not a folder name; "),
    (('',), "error: OUTPUT_DIR '': not a folder name; "),
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path, subprocess_env, args, message):
    proc = proof(tmp_path, subprocess_env, 'env', *args)
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr.startswith(message + USAGE) and len(proc.stderr.splitlines()) == 1


def test_an_output_dir_that_cannot_be_made_is_exit_2(tmp_path, subprocess_env):
    (tmp_path / 'a_file').write_text('')
    proc = proof(tmp_path, subprocess_env, 'env', str(tmp_path / 'a_file' / 'out'))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"error: OUTPUT_DIR '{tmp_path / 'a_file' / 'out'}': cannot ")


def test_unknown_step_is_exit_2_before_any_folder_is_made(tmp_path, subprocess_env):
    proc = proof(tmp_path, subprocess_env, 'env bogus', str(tmp_path / 'out'))
    assert proc.returncode == 2 and "unknown step 'bogus'" in proc.stderr
    assert not (tmp_path / 'out').exists()


@pytest.mark.slow
@no_cuda
def test_env_step_writes_to_a_relative_output_dir_and_fails_without_cuda(tmp_path,
                                                                         subprocess_env):
    """OUTPUT_DIR is relative to the caller's folder; the scratch folder (under TMPDIR) is gone
    at the end."""
    proc = proof(tmp_path, subprocess_env, 'env', 'out', cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    log = (tmp_path / 'out' / 'env.log').read_text()
    assert '| mmengine 0.10.7 |' in log and 'no CUDA device' in log
    assert 'env          FAIL (rc 1)' in proc.stdout
    assert f'gpu_proof: outputs in {tmp_path / "out"}' in proc.stdout
    assert not list((tmp_path / 'tmp').glob('gpu-proof.*'))


@pytest.mark.slow
@no_cuda
def test_without_an_argument_the_outputs_go_to_results_gpu_proof(tmp_path, subprocess_env):
    """A copy of the script in a folder of its own, so that the checkout's results/ is left as
    it is; its interpreter `false` (the step's log is what this checks: the step above runs
    the real one)."""
    (tmp_path / 'tools').mkdir()
    shutil.copy(SCRIPT, tmp_path / 'tools' / 'gpu_proof.sh')
    proc = proof(tmp_path, subprocess_env, 'env', script=tmp_path / 'tools' / 'gpu_proof.sh',
                 PYTHON='false')
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (tmp_path / 'results' / 'gpu_proof' / 'env.log').is_file()
    assert f'gpu_proof: outputs in {tmp_path / "results" / "gpu_proof"}' in proc.stdout


STUB = '''#!/usr/bin/env bash
# Stands in for the interpreter: records its arguments, writes what tools/kill_resume.py writes
# (its result JSON at --out, a run log in --work-dir, the closing lines) and exits with $STUB_RC.
printf '%s\\n' "$*" > "$STUB_ARGS"
while [ $# -gt 0 ]; do
  case $1 in --out) out=$2; shift;; --work-dir) work=$2; shift;; esac; shift
done
printf '{"passed": %s}\\n' "$([ "$STUB_RC" = 0 ] && echo true || echo false)" > "$out"
printf 'iteration log line\\n' > "$work/killed.log"
echo "gloo x1 on cpu: killed after iteration 5 (rc -9), resumed from 4 (rc 0), ended at 8"
[ "$STUB_RC" = 0 ] && echo "kill-resume: passed (logs in $work)" || echo "kill-resume: FAILED"
exit "$STUB_RC"
'''


@pytest.mark.parametrize('rc', [0, 1])
def test_kill_step_passes_its_options_keeps_the_logs_and_counts_a_failure(tmp_path,
                                                                            subprocess_env, rc):
    """The kill step's plumbing, with a stand-in interpreter: tools/kill_resume.py gets one
    process, the step's defaults then KILL_ARGS, the result JSON and the runs' log tails land in
    OUTPUT_DIR, the scratch folder goes, and a failed run fails the script. (A real kill and
    resume through tools/kill_resume.py runs in tests/e2e/test_faults.py.)"""
    stub = tmp_path / 'python'
    stub.write_text(STUB)
    stub.chmod(0o755)
    out, args = tmp_path / 'out', tmp_path / 'args.txt'
    proc = proof(tmp_path, subprocess_env, 'kill', str(out), KILL_ARGS='--kill-at 5 --epochs 1',
                 PYTHON=str(stub), STUB_ARGS=str(args), STUB_RC=str(rc))
    proc_args = args.read_text().split()
    assert proc_args[:4] == ['tools/kill_resume.py', 'configs/mixco_r18_tiny_fast.py', '--nproc', '1']
    assert proc_args[-4:] == ['--kill-at', '5', '--epochs', '1']  # KILL_ARGS last: they win
    assert proc_args[proc_args.index('--out') + 1] == f'{out}/kill_resume.json'
    assert (out / 'kill_resume.json').read_text() == '{"passed": %s}\n' % ('true' if rc == 0 else 'false')
    log = (out / 'kill_resume.log').read_text()
    assert '--- tail of killed.log\niteration log line' in log
    assert not list((tmp_path / 'tmp').glob('gpu-proof.*'))  # the scratch folder is removed
    lines = proc.stdout.splitlines()
    assert proc.returncode == rc, proc.stdout[-3000:] + proc.stderr[-3000:]
    status = next(line.strip() for line in lines if line.strip().startswith('kill_resume '))
    assert status.startswith('kill_resume  pass in' if rc == 0 else 'kill_resume  FAIL (rc 1)')
    assert lines[-1].startswith('kill-resume: passed' if rc == 0 else 'kill-resume: FAILED')
