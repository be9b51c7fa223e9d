"""Serve the test site with daphne's ``Server`` in code:

    python -m channels_site.serve PORT ENABLE

ENABLE is "-" (fastdeflate not enabled), "default" (``fastdeflate.enable()``) or the
comma-separated libraries for ``fastdeflate.enable(libraries=...)``; it runs before
daphne is imported (so daphne is patched as it loads). The fallback is accepted.
"""

from __future__ import annotations

import sys

import fastdeflate


def main(port: str, enable: str) -> None:
    if enable == "default":
        fastdeflate.enable(fallback=True)
    elif enable != "-":
        fastdeflate.enable(fallback=True, libraries=enable.split(","))
    from daphne.server import Server

    from .asgi import application

    Server(application, endpoints=[f"tcp:port={port}:interface=127.0.0.1"]).run()


if __name__ == "__main__":
    main(*sys.argv[1:])
