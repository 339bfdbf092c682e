"""``python -m delayline``, and the file that spark-submit runs (``delayline entrypoint``)."""

import os
import sys

# Run as a file (spark-submit runs it so), Python puts this directory first on
# sys.path, where the subpackage delayline/redis would shadow redis-py.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from delayline.cli import main

main()
