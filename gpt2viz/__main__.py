"""`python -m gpt2viz`."""

import sys

from .startup import main

sys.exit(main())
