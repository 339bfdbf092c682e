"""``python -m bench <command>``: delayline's benchmarks. See docs/benchmarks.md."""

from __future__ import annotations

import sys

from bench.cli import main

sys.exit(main())
