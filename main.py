"""Themelio GPU stacks: synthesize one Terraform stack per cluster into cdktf.out/stacks/<cluster>/.

Run by the CDKTF CLI (`npx cdktf synth`, see cdktf.json) or directly:
    .venv/bin/python main.py [--catalog FILE] [--stacks-dir DIR] [--outdir DIR]   (after `make setup`)
Other commands (catalog validate/show, match, check, preflight): .venv/bin/python -m themelio_gpu --help
"""

from __future__ import annotations

import sys

from themelio_gpu import interrupts
from themelio_gpu.cli import synth_main

if __name__ == "__main__":
    interrupts.leave(synth_main(sys.argv[1:]))
