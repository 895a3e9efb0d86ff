"""What happened to each run of a suite invocation, and the one summary line at its end."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from benchmark.suites.spec import Run


@dataclass
class Outcome:
    """What happened to one run in this invocation."""

    run: Run
    state: str  # done, diverged, queued, resumed, started, submitted, failed, interrupted
    ok: bool = True
    log: Optional[str] = None
    failed_evals: Dict[str, str] = field(default_factory=dict)  # evaluation -> log
    job: Optional[str] = None


def summary_line(outcomes: List[Outcome], total: int, interrupted: bool) -> str:
    """'6 runs: 2 done before, 3 started, 1 failed (x); ...' for the end of the output."""
    order = ('done', 'diverged', 'queued', 'resumed', 'started', 'submitted', 'failed',
             'interrupted')
    counts = {s: [o for o in outcomes if o.state == s] for s in order}
    words = {'done': 'done before', 'diverged': 'diverged'}
    parts = [f'{len(items)} {words.get(s, s)}' for s, items in counts.items() if items]
    failed = [o.run.name for o in counts['failed']]
    evals = sum(len(o.failed_evals) for o in outcomes)
    text = f'{total} run(s): ' + ', '.join(parts)
    if failed:
        text += f" (failed: {', '.join(failed)})"
    if evals:
        text += f'; {evals} evaluation(s) failed'
    if len(outcomes) < total:
        text += f'; {total - len(outcomes)} not reached'
    return text + ('; interrupted: rerun the same command to continue' if interrupted else '')
