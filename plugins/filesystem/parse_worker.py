"""The parse worker's entry: ``python -m plugins.filesystem.parse_worker MEMORY_BYTES`` (see isolation.py)."""

import sys

from plugins.filesystem.isolation import serve

if __name__ == "__main__":
    serve(int(sys.argv[1]))
