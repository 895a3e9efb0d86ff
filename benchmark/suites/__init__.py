"""Suites of runs: the suite file (spec), what is left to do (plan), carrying it out locally or on
SLURM (runner, process, slurm), what happened (outcome) and its leaderboard (report)."""
