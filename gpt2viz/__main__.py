"""`python -m gpt2viz`."""

import sys

from .cli import main

sys.exit(main())
