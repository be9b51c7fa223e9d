"""What this process runs, in one place: `fastdeflate.status()`."""

from __future__ import annotations

import os
import platform
import site
import sys
from importlib.machinery import EXTENSION_SUFFIXES, PathFinder
from pathlib import Path
from typing import Any, Optional

__all__ = ["status", "startup_hook", "source_tree", "build", "STARTUP_HOOK"]

STARTUP_HOOK = "fastdeflate-enable.pth"


def _has_extension(package: Path) -> bool:
    return any((package / f"_fastdeflate{suffix}").is_file() for suffix in EXTENSION_SUFFIXES)


def _installed_copy(root: Path) -> Optional[Path]:
    """Another fastdeflate package this interpreter could import, one with the compiled
    extension, outside the source tree ``root``: on sys.path past it, or through an
    import hook (an editable install's)."""
    def outside(entry: str) -> bool:
        try:
            return Path(entry or os.getcwd()).resolve() != root
        except OSError:
            return False

    finders = [lambda: PathFinder.find_spec("fastdeflate", [e for e in sys.path if outside(e)])]
    finders += [(lambda f=f: f.find_spec("fastdeflate", None)) for f in sys.meta_path
                if f is not PathFinder and hasattr(f, "find_spec")]
    for find in finders:
        try:
            spec = find()
        except Exception:
            continue
        for location in (spec and spec.submodule_search_locations) or ():
            package = Path(location).resolve()
            if package.parent != root and _has_extension(package):
                return package
    return None


def source_tree() -> Optional[str]:
    """When this process imported fastdeflate from a source tree (a checkout or an
    unpacked sdist: ``setup.py`` and ``_fastdeflate.pyx`` beside the package) that has no
    compiled extension: what happened and what to do, in a sentence or two; else None.
    Python puts the current directory (``python -m``) or the script's first on sys.path,
    so from a checkout's root it imports the checkout rather than the installed copy."""
    from ._codec import IMPLEMENTATION

    if IMPLEMENTATION == "cython" or os.environ.get("FASTDEFLATE_PURE", "") not in ("", "0"):
        return None
    package = Path(__file__).resolve().parent
    root = package.parent
    if not ((root / "setup.py").is_file() and (root / "_fastdeflate.pyx").is_file()):
        return None
    here = " (the current directory)" if Path(os.getcwd()).resolve() == root else ""
    said = (f"fastdeflate was imported from the source tree {root}{here}, which has no "
            f"compiled extension, so the pure-Python fallback runs")
    installed = _installed_copy(root)
    if installed is not None:
        move = ("run from another directory (cd elsewhere)" if here else
                f"take {root} off sys.path (PYTHONPATH, or the script's directory)")
        return (f"{said} and not the installed copy in {installed}: {move}, or build the "
                f"extension in place (python setup.py build_ext --inplace)")
    return (f"{said}, and no installed copy has the extension either: install it "
            f"(pip install . in {root}; run from another directory afterwards), or build "
            f"it in place (python setup.py build_ext --inplace)")


def build() -> dict[str, Any]:
    """The engines this build has: ``zlib`` (the engine of every level ISA-L does not run:
    the bundled zlib-ng, the system zlib, or the fallback's stdlib zlib), ``isal`` (the
    bundled ISA-L's version, or None), ``machine`` (platform.machine()), without
    ISA-L, ``without_isal``: what that costs and how to get it (None where there is
    nothing to get: a build with ISA-L, or a CPU it has no code for), and ``test_build``:
    True if the compiled extension is the test build (``FASTDEFLATE_TEST_HOOKS=1``: its
    test hooks and fault injection compiled in; never the wheels)."""
    from ._codec import IMPLEMENTATION, codec

    isal = (codec._ISAL or None) if IMPLEMENTATION == "cython" else None
    machine = platform.machine()
    cpu = machine.lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    missing = None
    if isal is None and IMPLEMENTATION == "cython" and cpu in ("x86_64", "aarch64"):
        if codec.ENGINE.startswith("zlib "):  # the system zlib: never with ISA-L
            how = ("it comes only with the bundled zlib-ng: rebuild with "
                   "FASTDEFLATE_ZLIB=bundled FASTDEFLATE_ISAL=bundled")
        elif cpu == "x86_64":
            how = ("rebuild with nasm installed (apt-get install nasm, brew install nasm), "
                   "FASTDEFLATE_ISAL=bundled to make the build fail rather than leave it out")
        else:
            how = ("rebuild with FASTDEFLATE_ISAL=bundled, which fails with the reason "
                   "rather than leave it out")
        missing = (f"without ISA-L, level 1 (aiohttp's level) compresses and every message "
                   f"decompresses on {codec.ENGINE}: slower, with the same results "
                   f"(peers decode the same messages; level 1 sends about stock zlib's bytes); "
                   f"to get it, {how}")
    test_build = IMPLEMENTATION == "cython" and hasattr(codec, "_set_test_hook")
    return {"zlib": codec.ENGINE, "isal": isal, "machine": machine,
            "without_isal": missing, "test_build": test_build}


def startup_hook() -> Optional[Path]:
    """The start-up hook (.pth) that reads FASTDEFLATE_ENABLE, if a site-packages
    directory of this interpreter has it (an editable install or a source tree has none)."""
    directories = [*site.getsitepackages(), site.getusersitepackages()]
    for directory in directories:
        path = Path(directory) / STARTUP_HOOK
        if path.is_file():
            return path
    return None


def pending_why(library: str) -> str:
    """What ``pending`` means for ``library``: enabled, to be patched on import."""
    from fastdeflate import integrations

    return (f"enabled; patched when the application imports "
            f"{integrations._MODULES[library][0]}, before its first connection "
            f"(a bare import {library} may not load it; its server and client modules do)")


def parameter_set(key: tuple) -> str:
    """A key of `fastdeflate.live_states()`, as ``status()`` names it (a string, so
    that ``json.dumps(status())`` works): ``"deflate level 6 window 15 memLevel 8
    strategy 0"``, ``"inflate window 15"``."""
    names = {"deflate": ("level", "window", "memLevel", "strategy"), "inflate": ("window",)}
    kind, *values = key
    return " ".join([str(kind), *(f"{name} {value}"
                                  for name, value in zip(names.get(kind, ()), values))])


def status() -> dict[str, Any]:
    """This process's fastdeflate: the codec in use, the engines of this build
    (``build``: see `build()`), whether it was imported from a source tree without
    the compiled extension (``source_tree``: what to do, or None), the start-up hook and
    variable, each supported library (installed version; ``enabled``, ``pending`` with
    why — enabled, and patched when the application imports the library's module that
    compresses, which a bare ``import websockets`` does not load —, ``stock`` with why, or
    ``not installed``; and ``connections``: how many of its open connections use
    fastdeflate's codec, which those opened while enabled keep after `disable()` —
    None for daphne, whose connections are autobahn's), the engine that
    runs each level, what decompresses (``inflate_engine``; ``inflate``: the choice
    of `fastdeflate.set_inflate()`), the live streams of each parameter set (live, idle holding one),
    and the traffic of the process's codec objects since it started: messages and bytes
    sent (given to compressors, and the payloads they returned; compress-once shares:
    messages whose payload a compressor took from another's) and received (payloads
    given to decompressors, and the bytes they returned); the size under which messages
    go out uncompressed, whether incompressible ones do, and how many did, by reason,
    with their bytes and the CPU and bytes that saved, estimated from their sizes
    (``sent_uncompressed``: see `fastdeflate.set_min_size()`; the estimates are measured
    on the first call that needs them, a few milliseconds). The counters are kept per
    parameter set under the locks the calls take anyway: always on. Imports no
    websocket library; cheap enough to call from a health endpoint, and JSON as it is
    (``json.dumps(status())``)."""
    from . import _what_pays, _savings, integrations
    from ._autoenable import ENV
    from ._codec import IMPLEMENTATION, codec
    from ._version import __version__
    from .integrations import _open

    hook = startup_hook()
    libraries = {}
    for library, (state, why) in integrations.states().items():
        version = integrations._version(library) if state != "not installed" else None
        if state == "pending":
            why = pending_why(library)
        libraries[library] = {"version": version, "state": state, "why": why,
                              # open connections still on fastdeflate's codec, whatever
                              # the state (see fastdeflate.integrations._open)
                              "connections": _open.connections(library)}
    skipped = _savings.skipped()  # first: its estimates may measure (see below)
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
    # the estimates' own measurements are not the application's traffic
    for name, measured in zip(("messages", "bytes", "payload_bytes"),
                              _savings.measured_traffic):
        sent[name] -= measured
    return {
        "version": __version__,
        "implementation": IMPLEMENTATION,
        "engine": codec.ENGINE,
        "zlib_version": codec.ZLIB_VERSION,
        "build": build(),
        "source_tree": source_tree(),  # None, or a source tree without the extension
        "startup_hook": str(hook) if hook else None,
        "environment": {ENV: os.environ.get(ENV)},
        "libraries": libraries,
        "engines": codec.engines(),  # at window 15 / memLevel 8 (see engines())
        "inflate_engine": codec.inflate_engine(),  # now (set_inflate)
        "inflate": codec._inflate_choice_now(),  # "auto" or "zlib" (FASTDEFLATE_INFLATE)
        "streams": {parameter_set(key): {"live": live, "idle": idle}
                    for key, (live, idle) in codec.live_states().items()},
        "traffic": {"sent": sent, "received": received},
        # compress what pays (fastdeflate/_what_pays.py): the settings, and the messages sent
        # uncompressed by Compressor.compress_or_skip, by reason
        "min_size": _what_pays.settings()[0],
        "skip_incompressible": _what_pays.settings()[1],
        "sent_uncompressed": skipped,
        "compress_once": compress_once(codec),
        "off_loop": off_loop(),
    }


def off_loop() -> dict[str, int]:
    """Large messages off the event loop: the size from which they are
    (`fastdeflate.set_off_loop_size()`), how much nicer their worker threads run
    (`fastdeflate.set_off_loop_nice()`), and how many were compressed and decompressed
    in a worker thread while the loop went on."""
    from fastdeflate import _off_loop

    compressed, decompressed = _off_loop.counts()
    return {"size": _off_loop.off_loop_size(), "nice": _off_loop.off_loop_nice(),
            "compressed": compressed, "decompressed": decompressed}


def compress_once(codec: Any) -> dict[str, Any]:
    """Compress once's counters (one message to many compressors): deliveries that took
    another compressor's payload, group messages compressed once for others, a
    straggler's own compressions of a message its group shared, by why it was out of
    the group, stragglers that rejoined by their window, group start-overs, stragglers'
    cohorts started, and the start-over budget (fastdeflate.set_start_over_budget)."""
    (led, (joined, diverged, left), rejoined, start_overs,
     cohorts) = codec._compress_once_counts()
    shared = sum(counts[3] for key, counts in codec._traffic().items() if key[0] == "deflate")
    budget = codec._start_over_budget()
    return {"shared": shared, "led": led,
            "alone": {"joined": joined, "diverged": diverged, "start_over": left},
            "rejoined": rejoined, "start_overs": start_overs, "cohorts": cohorts,
            "start_over_budget": budget}
