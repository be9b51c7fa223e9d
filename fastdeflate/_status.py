"""What this process runs, in one place: :func:`fastdeflate.status`."""

from __future__ import annotations

import os
import site
from pathlib import Path
from typing import Any, Optional

__all__ = ["status", "startup_hook", "STARTUP_HOOK"]

STARTUP_HOOK = "fastdeflate-enable.pth"


def startup_hook() -> Optional[Path]:
    """The start-up hook (.pth) that reads FASTDEFLATE_ENABLE, if a site-packages
    directory of this interpreter has it (an editable install or a source tree has none)."""
    directories = [*site.getsitepackages(), site.getusersitepackages()]
    for directory in directories:
        path = Path(directory) / STARTUP_HOOK
        if path.is_file():
            return path
    return None


def status() -> dict[str, Any]:
    """This process's fastdeflate: the codec in use, the start-up hook and variable, each
    supported library (installed version; ``enabled``, ``pending`` — patched when the
    application imports it —, ``stock`` with why, or ``not installed``), the engine that
    runs each level, what decompresses (``inflate_engine``; ``inflate``: the choice
    of :func:`fastdeflate.set_inflate`), the live streams of each parameter set (live, idle holding one),
    and the traffic of the process's codec objects since it started: messages and bytes
    sent (given to compressors, and the payloads they returned; compress-once shares:
    messages whose payload a compressor took from another's) and received (payloads
    given to decompressors, and the bytes they returned); the size under which messages
    go out uncompressed, whether incompressible ones do, and how many did, by reason
    (``sent_uncompressed``: see :func:`fastdeflate.set_min_size`). The counters are kept per
    parameter set under the locks the calls take anyway: always on. Imports no
    websocket library; cheap enough to call from a health endpoint."""
    import fastdeflate
    from fastdeflate import _choice, integrations
    from fastdeflate._autoenable import ENV

    hook = startup_hook()
    libraries = {}
    for library, (state, why) in integrations.states().items():
        version = integrations._version(library) if state != "not installed" else None
        libraries[library] = {"version": version, "state": state, "why": why}
    if fastdeflate.IMPLEMENTATION == "cython":
        from fastdeflate import _fastdeflate as codec
    else:
        from fastdeflate import _pure as codec  # type: ignore[no-redef]
    sent = {"messages": 0, "bytes": 0, "payload_bytes": 0, "compress_once_shares": 0}
    received = {"messages": 0, "payload_bytes": 0, "bytes": 0}
    for key, (messages, into, out, shared) in codec._traffic().items():
        if key[0] == "deflate":
            sent["messages"] += messages
            sent["bytes"] += into
            sent["payload_bytes"] += out
            sent["compress_once_shares"] += shared
        else:
            received["messages"] += messages
            received["payload_bytes"] += into
            received["bytes"] += out
    return {
        "version": fastdeflate.__version__,
        "implementation": fastdeflate.IMPLEMENTATION,
        "engine": fastdeflate.ENGINE,
        "zlib_version": fastdeflate.ZLIB_VERSION,
        "startup_hook": str(hook) if hook else None,
        "environment": {ENV: os.environ.get(ENV)},
        "libraries": libraries,
        "engines": fastdeflate.engines(),  # at window 15 / memLevel 8 (see engines())
        "inflate_engine": fastdeflate.inflate_engine(),  # now (set_inflate)
        "inflate": codec._inflate_choice_now(),  # "auto" or "zlib" (FASTDEFLATE_INFLATE)
        "streams": {key: {"live": live, "idle": idle}
                    for key, (live, idle) in fastdeflate.live_states().items()},
        "traffic": {"sent": sent, "received": received},
        # compress what pays (fastdeflate/_choice.py): the settings, and the messages sent
        # uncompressed by Compressor.compress_or_skip, by reason
        "min_size": _choice.settings()[0],
        "skip_incompressible": _choice.settings()[1],
        "sent_uncompressed": _choice.skipped(),
    }
