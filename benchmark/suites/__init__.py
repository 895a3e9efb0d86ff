"""Suites of runs: the suite file (spec), what is left to do (plan), carrying it out locally or on
SLURM (runner, claim, process, slurm), its lines while it runs (status), what happened (outcome)
and its leaderboard (report)."""
