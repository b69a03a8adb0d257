"""`python -m twinscope ...`: the same as the `twinscope` command."""

import sys

from ._cli import main

sys.exit(main())
