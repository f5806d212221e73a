"""``python -m master.io_workers``: one I/O worker process (``master.io_workers.worker``)."""

import sys

from master.io_workers.worker import main

sys.exit(main())
