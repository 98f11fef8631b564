"""``python -m ffu_cvx``: the ``ffu-cvx`` command line.

Interfaces layer: imports ``cli`` only.
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
