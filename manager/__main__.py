"""`python -m manager` runs the CLI."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
