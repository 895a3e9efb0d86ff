"""The exit codes a training ends with besides 0 and 1, in one place that imports nothing: the
suite's runner and its SLURM tasks read them without loading torch."""

BAD_INPUT_EXIT_CODE = 2  # a bad argument or config, refused before anything starts
DIVERGED_EXIT_CODE = 3  # tools/train.py exits with this after recording the diverged run
DISK_FULL_EXIT_CODE = 74  # EX_IOERR of sysexits.h: free space, then rerun with --resume
WORK_DIR_BUSY_EXIT_CODE = 75  # EX_TEMPFAIL of sysexits.h: the work dir is busy now; later works
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM: what schedulers expect from a terminated job
