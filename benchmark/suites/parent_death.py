"""A child that gets SIGTERM when its parent (the suite, a SLURM task) dies: Linux's
PR_SET_PDEATHSIG, set between fork and exec (`benchmark.stop.die_with_parent`, with the
standard library only: a SLURM task loads it)."""
from benchmark.stop import die_with_parent  # noqa: F401  (the children's preexec_fn)
