"""``python -m crawldedup``: the command line."""

import sys

from crawldedup.cli import main

if __name__ == "__main__":
    sys.exit(main())
