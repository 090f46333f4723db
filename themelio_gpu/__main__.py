"""`python -m themelio_gpu <command>`: see `themelio_gpu.cli`."""

from __future__ import annotations

import sys

from themelio_gpu import interrupts
from themelio_gpu.cli import main

interrupts.leave(main(sys.argv[1:]))
