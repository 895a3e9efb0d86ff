"""Suites of runs: the suite file (spec), what is left to do (plan), carrying it out locally or on
SLURM (runner, claim, process, slurm, slurm_task, slurm_queue, slurm_ranks, snapshot), its lines
while it runs (status), what happened (outcome) and its leaderboard (report)."""
