"""Speed measurements: training steps, the input pipeline, views and evaluation, timed in turns."""
