"""Speed measurements: training steps, the input pipeline, views and evaluation, timed in turns."""
import os

# Before torch is imported (tools/benchmark_speed.py imports torch through this package only):
# silence the profiler's log lines.
os.environ.setdefault('KINETO_LOG_LEVEL', '5')
