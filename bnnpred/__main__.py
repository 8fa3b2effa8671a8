"""``python -m bnnpred``: the same command line as ``bnnpred``."""

from bnnpred.cli import main

main()
