"""An MCP server that hangs at startup: it says so on stderr, starts a child that sleeps
too (to check that the whole process group ends), and never reads its stdin."""

from __future__ import annotations

import subprocess
import sys
import time

print("warming up, this may take a while", file=sys.stderr, flush=True)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
time.sleep(600)
