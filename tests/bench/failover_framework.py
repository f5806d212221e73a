"""A framework for the failover benchmark: subscribes through the SDK (which follows a
follower's redirect and reconnects to a new leader) and writes the CLOCK_MONOTONIC time of every
offers event (``{"offers": t, "n": count}``) and subscription (``{"subscribed": t}``) to
``--log``, one JSON object a line, declining
each offer for ``--refuse`` seconds so offers keep flowing.

``python tests/bench/failover_framework.py --master a,b,c --log offers.jsonl``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

from framework_sdk import Framework
from framework_sdk.errors import FairshareError
from framework_sdk.events import OffersReceived, Subscribed
from framework_sdk.types import FrameworkInfo


async def run(args: argparse.Namespace) -> int:
    info = FrameworkInfo(name="failover-watch", failover_timeout=600.0)
    with args.log.open("a", encoding="utf-8") as log:
        async with Framework.connect(args.master, info) as framework:
            async for event in framework.events():
                if isinstance(event, Subscribed):
                    log.write(json.dumps({"subscribed": time.monotonic()}) + "\n")
                    log.flush()
                if isinstance(event, OffersReceived):
                    record = {"offers": time.monotonic(), "n": len(event.offers)}
                    log.write(json.dumps(record) + "\n")
                    log.flush()
                    with contextlib.suppress(FairshareError):  # the leader died: offers gone
                        await framework.decline(list(event.offers), refuse_seconds=args.refuse)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", required=True)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--refuse", type=float, default=0.2)
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
