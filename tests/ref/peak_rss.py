#!/usr/bin/env python3
# tests/ref/peak_rss.py: runs a command and prints its peak resident set size in bytes (the child's ru_maxrss,
# which on Linux includes the processes it waited for, such as the linker), then exits with its status.
import resource
import subprocess
import sys

rc = subprocess.call(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
sys.exit(rc)
