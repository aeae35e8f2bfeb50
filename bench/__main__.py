"""`python -m bench`: run the benchmark suite (see bench/run.py)."""

import sys

from bench.run import main

if __name__ == "__main__":  # worker processes (spawn) import this module again
    sys.exit(main())
