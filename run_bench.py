#!/usr/bin/env python3
"""Entry point: the same CLI as the ``saltbench`` console script."""

import sys

from bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
