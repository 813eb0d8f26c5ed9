"""The former name of :mod:`logzbench.tracking.server`, kept for its command ``python -m logzbench.tracking_server``.

Run as a script it notes the new name on stderr and starts the server as
``python -m logzbench.tracking.server`` does; importing it gives nothing (import
:mod:`logzbench.tracking.server`).
"""

import sys

if __name__ == "__main__":
    from logzbench.tracking.server import main

    print(
        "note: python -m logzbench.tracking_server is deprecated; use python -m logzbench.tracking.server",
        file=sys.stderr,
    )
    sys.exit(main())
