#!/usr/bin/env python3
"""Write the figures of the README and docs/ from the committed results files.

Every measured figure in ``README.md`` and ``docs/*.md`` sits between
``<!-- generated: NAME -->`` and ``<!-- /generated -->``, and is made here from
``benchmarks/results/*.md`` (each made by the command it names, at a commit and date it
records), with a line that says which. Prose says in words only what those show.

    python tools/render_docs.py          # rewrite the blocks, copy the charts
    python tools/render_docs.py --check  # exit 1 if a block or a chart differs

The charts the docs pages show (``![...](.../charts/NAME.png)``) are copies of the
benchmark's ``benchmarks/results/NAME.png`` in ``docs/charts/`` (MkDocs publishes only
what is under ``docs/``): this copies each one a page references, and ``--check`` fails
when a copy is missing or differs from its results file, or when a page references a
chart the results do not have.

``tests/test_docs.py`` runs the check, and fails on a measured figure outside a block.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
DOCS_DIR = ROOT / "docs"
CHARTS_DIR = DOCS_DIR / "charts"
sys.path.insert(0, str(ROOT / "benchmarks"))

from fdbench import broadcast as broadcast_part, latency as latency_part, sizes  # noqa: E402
from fdbench import fanout as fanout_part  # noqa: E402
from fdbench.report import markdown_table  # noqa: E402
from fdbench.results import Results  # noqa: E402

BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated -->)",
                   re.S)
LIBRARIES = tuple(sizes.LIBRARIES)
#: Servers and frameworks whose WebSockets run on each library.
SERVERS = {
    "websockets": "its own server and client; uvicorn `--ws websockets`",
    "aiohttp": "aiohttp.web and its client; python-socketio on aiohttp",
    "wsproto": "uvicorn `--ws wsproto`, hypercorn, simple-websocket (Flask-Sock)",
    "tornado": "tornado.websocket",
    "autobahn": "autobahn (asyncio and Twisted); daphne, opt-in (next row)",
}


#: What a figure's run must come after: the extension, the build and the integrations.
MEASURED_PATHS = ("_fastdeflate.pyx", "extension", "fastdeflate/_compress_once_policy.py",
                  "setup.py", "buildtools", "fastdeflate/integrations")
#: Results files whose figures stand although one of `MEASURED_PATHS` changed after the
#: commit they measured, each with why (said under its figures). tests/test_results_fresh.py
#: fails on a figure measured before such a change and not here, and on an entry here
#: that was measured after the last one: rerun (the command on the file's first line).
#: What changed after the runs at 50e4434 (levels-before-after.md).
_COUNTERS = (
    "since it, status()'s compress-once counters are summed into C values under each "
    "parameter set's lock (it made a list there); nothing on the message path changed.")
#: What changed after _COUNTERS (c84dd9a).
_FLOWS = (
    "Then compress once's flows around its decisions (find, follow, adopt, rejoin, a "
    "leader's compression for its group) "
    "moved into the policy: the same decisions (tools/compress_once_replay.py prints the "
    "same digests before and after, compiled and fallback), instructions per message "
    "81,929 before the policy's move and 81,973 after this one at 100 connections "
    "(+0.05%), 1,846.6 and 1,863.2 in a compress-once loop (+0.9%); and status()'s "
    "compress-once counters are added by one policy function (not on the message path).")
#: What changed after _FLOWS (d88ce58).
_AIOHTTP_INFLATE = (
    "Then aiohttp's readers copy a large message received off the loop less (once in the "
    "gate, once per frame in the worker thread; the codec adds the tail): only messages "
    "of at least the off-loop size (64 KiB) that an aiohttp peer receives take that path, "
    "and the latency results were rerun after it.")
#: What changed after the runs at d88ce58 (eaac5c4; the latency results were rerun after).
_JOINED = (
    "Then aiohttp's and wsproto's readers join a large message's frames in one helper "
    "(fastdeflate/integrations/_frames.py: joined): the same copies for aiohttp, and for "
    "wsproto one buffer of the frames' total size where it grew one; only a message of "
    "the off-loop size in several frames takes the changed step.")
#: What changed after _JOINED and the latency runs (bfff7dc).
_ALONE = (
    "Then what a compressor does around a message (a straggler's rejoin and the search "
    "before it; a message it compresses alone: counted, for its group, or extending a "
    "straggler's tail) moved from both compressors into the policy (_before_message, "
    "_compress_alone): the same decisions (tools/compress_once_replay.py prints the same "
    "digests before and after, compiled and fallback), instructions per message 83,126 "
    "before and 83,170 after at 100 connections (+0.05%), 1,880.2 and 1,891.1 in a "
    "compress-once loop (+0.6%; tools/instructions_per_message.py under callgrind, 1,000 "
    "messages less none, default builds).")
#: What changed after _ALONE (up to 49c250f, where every result not listed below was rerun).
_COMPACT = (
    "Then compress once's policy was shortened (its design told once, in the docs; the "
    "leader's state fetched by one helper; no inline hints left to the C compiler): the "
    "same decisions (tools/compress_once_replay.py prints the same digests before and "
    "after, compiled and fallback), instructions per message 83,171 before and 83,112 "
    "after at 100 connections (-0.07%), 1,890.8 and 1,881.0 in a compress-once loop "
    "(-0.5%; tools/instructions_per_message.py under callgrind, 1,000 messages less none, "
    "default builds).")
#: What changed after the runs at 49c250f.
_WORKERS = (
    "After it, a large message (the off-loop size, 64 KiB, or more) went to fastdeflate's own "
    "worker threads, nicer than the event loop on Linux, not to the loop's default "
    "executor (fastdeflate/_off_loop.py: run). None of this run's messages takes that "
    "path: 1 KB messages, or the codec called without an event loop (the full run's "
    "latency part was rerun in latency.md); importing fastdeflate loads the same modules "
    "as before (tests/test_off_loop_workers.py).")
#: The same change, for the codec CPU of large messages measured in latency-cpu.md.
_WORKERS_CPU = (
    "After it, a large message went to fastdeflate's own worker threads, nicer than the "
    "event loop on Linux, not to the loop's default executor: the same compression in "
    "another thread, whose CPU (the columns compared here) a thread's priority does not "
    "change; the p99 columns are the workers' at the loop's priority (the latency the "
    "nicer workers leave the other connections: latency.md, rerun after it).")
#: What changed after the latency runs at fd2fc3b.
_COPY = (
    "Then an output of 256 KiB or more is copied into its bytes object with the GIL "
    "released (extension/basics.pxi: _bytes_from), so that a worker thread ending a large "
    "message does not hold the event loop for the copy; the same bytes, the same copy. "
    "In these runs only the latency runs' 4 MB messages have outputs that large.")
#: The same change, for latency-cpu.md's large messages.
_COPY_CPU = (
    "Then an output of 256 KiB or more is copied into its bytes object with the GIL "
    "released (extension/basics.pxi: _bytes_from): the same copy in the same thread "
    "(the CPU compared here), and one release and re-take of the GIL more per snapshot.")
#: What changed after the latency runs at a459726.
_GATE = (
    "Then the large output's copy got a test gate inside its section without the GIL "
    "(extension/basics.pxi: _at_nogil), which the test build uses to prove the GIL is "
    "released there; in the default build, the one measured, it is an empty inline "
    "function that the C compiler drops.")
#: What changed after _GATE.
_FORK_LOCKS = (
    "Then the package's module locks that guard settings, counters and patches (one is "
    "the extension's set_inflate() lock) are made anew in a forked child "
    "(fastdeflate/_forksafe.py): a fork handler each, registered at import. No message "
    "of the compiled codec takes one; the fallback's takes its traffic counters' lock "
    "as before, the same lock object.")
#: What changed after _FORK_LOCKS (latency.md was rerun after it, at f5de35d).
_AIOHTTP_WORKERS = (
    "Then aiohttp's messages above its own threshold (16 KiB), which stock and "
    "fastdeflate compress in a thread, went to fastdeflate's worker threads instead of "
    "the loop's default executor (fastdeflate/integrations/aiohttp.py: _in_executor): "
    "the same compression and the same hand-off (loop.run_in_executor) to another pool, "
    "whose nice value changes nothing on an idle CPU; only aiohttp rows of 64 KB "
    "messages or more take that path.")
#: The same change, for latency-cpu.md's aiohttp rows.
_AIOHTTP_WORKERS_CPU = (
    "Then aiohttp's large messages went to fastdeflate's worker threads instead of the "
    "loop's default executor: the same compression in another thread, whose CPU (the "
    "columns compared here) a thread's priority does not change.")
#: Each run's changes since, newest last: a run's list is the tail of the one before it.
_SINCE_A459726 = [_GATE, _FORK_LOCKS, _AIOHTTP_WORKERS]
_SINCE_49C250F = [_WORKERS, _COPY, *_SINCE_A459726]
_SINCE_BFFF7DC = [_ALONE, _COMPACT, *_SINCE_49C250F]
_SINCE_50E4434 = [_COUNTERS, _FLOWS, _AIOHTTP_INFLATE, _JOINED, *_SINCE_BFFF7DC]
STANDS: dict[str, str] = {
    "levels-before-after.md": " ".join(_SINCE_50E4434),
    "latency-cpu.md": " ".join([_ALONE, _COMPACT, _WORKERS_CPU, _COPY_CPU, _GATE, _FORK_LOCKS,
                                _AIOHTTP_WORKERS_CPU]),
    **{name: " ".join(_SINCE_49C250F)
       for name in ("full.md", "sizes.md", "broadcast.md", "connection-costs.md",
                    "fanout.md", "fanout-1000.md", "startup.md")}}


def load(name: str) -> Results:
    return Results.load(RESULTS_DIR / name)


def machine_name(results: Results) -> str:
    """The CPU a results file was made on, as its machine row names it."""
    return results.machine["machine"].split(",")[0]


def source(results: Results, page: Path) -> str:
    """The line under a block: the command, commit, date and file of its figures."""
    rel = results.path.relative_to(ROOT).as_posix()
    where = (f"[{rel}]({Path(rel).relative_to(page.parent.relative_to(ROOT)).as_posix()})"
             if page.parent in (ROOT, ROOT / "benchmarks") else f"`{rel}`")
    stands = STANDS.get(results.path.name)
    why = (f" Measured before later changes to the extension, the build or the "
           f"integrations; it stands: {stands}" if stands else "")
    return (f"<sub>From `{results.command}` at commit {results.commit}, "
            f"{results.date} UTC, {machine_name(results)}, "
            f"{results.machine['Python']}: {where}.{why}</sub>")


def ratio_range(values: list[float], digits: int = 3) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}x" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else (
        f"{low:.{digits}f}–{high:.{digits}f}x")


def byte_ratios(rows: list[dict[str, str]]) -> list[float]:
    return [int(r["fastdeflate bytes"].replace(",", "")) / int(r["stock bytes"].replace(",", ""))
            for r in rows]


def sizes_rows(what: str, takeover: bool, window_mem: str = "") -> list[dict[str, str]]:
    found = [r for r in load("sizes.md").table("what", "window / memLevel")
             if r["what"] == what and r["context takeover"] == ("yes" if takeover else "no")
             and (not window_mem or r["window / memLevel"] == window_mem)]
    if not found:
        raise KeyError(f"sizes.md: no rows for {what!r}")
    return found


def library_sizes(library: str, takeover: bool = True) -> str:
    group = next(names for s, names in sizes.library_groups().items()
                 if library in names.split(", "))
    return ratio_range(byte_ratios(sizes_rows(group, takeover)))


def settings_label(library: str) -> str:
    s = sizes.LIBRARIES[library]
    return f"level {s.level}, window {s.window_bits}, memLevel {s.mem_level}"


def split(cell: str) -> list[str]:
    return [part.strip() for part in cell.split(" / ")]


def headline(page: Path) -> str:
    full = load("full.md")
    rows = []
    for lib in LIBRARIES:
        one = full.summary(f"{lib}, varying JSON 1 KB (µs/msg)")["ratio"]
        many = full.summary(f"{lib}, varying JSON 1 KB, 1,000 connections (µs/msg)")["ratio"]
        rss = split(full.summary(
            f"{lib} server, 10,000 connections, RSS per connection, idle / after one message "
            "each way / quiet after it (KiB)")["ratio"])
        rows.append([lib, settings_label(lib), f"{one} / {many}", library_sizes(lib),
                     f"{rss[1]} / {rss[2]}"])
    rows.append(whole_server_row(full))
    rows.append(mixed_row(full))
    table = markdown_table(["library", "runs at (its own settings)",
                            "less CPU per message: 1 / 1,000 connections",
                            "bytes: fastdeflate / stock", "less server memory per "
                            "connection: busy / quiet"], rows)
    sizes_run = load("sizes.md")
    machines = ("two machines" if machine_name(full) != machine_name(sizes_run)
                else "one kind of machine")
    legend = (f"Two runs, {machines}: the CPU and memory columns (and the mixed-stream "
              f"row's bytes) are from the full run ({machine_name(full)}, first line "
              f"below), the bytes column from `benchmarks/sizes.py` "
              f"({machine_name(sizes_run)}, second line). "
              "CPU: stock / fastdeflate, 1 KB varying JSON through the library's own "
              "sending and receiving code in one process (its frame writer and reader, "
              "no sockets), on one connection and across 1,000; the ratios vary with the "
              "CPU, so measure on yours (the short run: `python benchmarks/run.py`). "
              "Bytes: 1–64 KB varying JSON, context takeover "
              "(above 1: more bytes than stock). Memory: RSS of a real server with 10,000 "
              "clients after one message each way (busy) and once the connections are "
              "quiet. The whole-server row: a real websockets server on 127.0.0.1 sending "
              "1 KB JSON updates to 1 and to 100 client processes, each message checked "
              "by its client, the server's CPU per message delivered (the same codec as "
              "the websockets row: its bytes are that row's). The mixed-stream row: "
              "chat-like JSON with already-compressed binary messages among it (PNG, "
              "JPEG, gzip, random), stock zlib against `compress_or_skip` (compress "
              "what pays, on by default in every integration), on 1 connection and "
              "across 1,000 interleaved; its bytes are that run's own, for 1 / 1,000 "
              "connections.")
    return "\n\n".join([table, legend, source(full, page) + "<br>" + source(
        sizes_run, page)])


def whole_server_row(full: Results) -> list[str]:
    """websockets as a whole server: real server and client processes (part 4)."""
    one, many = (full.summary(f"websockets server → {n} client{'s' if n > 1 else ''}, "
                              "server CPU s per 10,000 msgs")["ratio"] for n in (1, 100))
    return ["websockets, a whole server", settings_label("websockets"),
            f"{one} / {many} (1 / 100 client processes)", "as the websockets row", "—"]


def mixed_row(results: Results) -> list[str]:
    """The mixed stream (part 8): stock against compress_or_skip."""
    ratios, sizes_ = [], []
    for label in ("one connection", "1,000 connections, interleaved"):
        what = (f"mixed stream, chat JSON with 20% already-compressed binary, {label}, "
                "compress_or_skip")
        ratios.append(results.summary(f"{what} (µs/msg)")["ratio"])
        row = results.summary(f"{what} (bytes/msg)")
        sizes_.append(float(row["fastdeflate"].replace(",", ""))
                      / float(row["stock"].replace(",", "")))
    return ["any library: a mixed stream (20% binary)", "level 6, window 15, memLevel 8",
            " / ".join(ratios), " / ".join(f"{r:.3f}x" for r in sizes_), "—"]


def mixed_stream(page: Path) -> str:
    """Part 8 of the full run: CPU and bytes per message on the mixed stream."""
    full = load("full.md")
    columns = ["side", "connections", "µs/msg", "bytes/msg", "binary: µs/msg",
               "binary: bytes/msg", "speed vs stock (all, binary, text)",
               "bytes vs stock (all, binary, text)", "sent raw (binary, text)"]
    rows = [[row[c] for c in columns] for row in full.table("side", "connections")]
    if not rows:
        raise KeyError("full.md: no mixed-stream table (part 8)")
    return "\n\n".join([markdown_table(columns, rows), source(full, page)])


def support_matrix(page: Path) -> str:
    requirement = {}
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for lib in (*LIBRARIES, "daphne"):
        found = re.search(rf'^{lib} = \[.*"{lib}(>=[^";]+)', text, re.M)
        requirement[lib] = f"{lib} {found.group(1)}" if found else "?"
    full = load("full.md")
    rows = [[lib, requirement[lib], full.machine.get(lib, "?"), SERVERS[lib],
             settings_label(lib), library_sizes(lib, True), library_sizes(lib, False)]
            for lib in LIBRARIES]
    # daphne serves with autobahn's codec at autobahn's settings (opt-in)
    rows.append(["daphne (opt-in)", requirement["daphne"], "not benchmarked",
                 "Django Channels", settings_label("autobahn"),
                 library_sizes("autobahn", True), library_sizes("autobahn", False)])
    table = markdown_table(["library", "supported", "benchmarked", "servers on it",
                            "runs at", "bytes / stock, context takeover",
                            "bytes / stock, no context takeover"], rows)
    return "\n\n".join([table, source(full, page) + "<br>" + source(load("sizes.md"), page)])


def is_bytes(measurement: str) -> bool:
    """A summary row that counts bytes on the wire (not memory, not time)."""
    return "bytes on the wire" in measurement or measurement.endswith("(bytes/msg)")


def bytes_ratio(stock: str, fast: str) -> str:
    """Bytes as every page gives them: fastdeflate / stock of the medians (above 1:
    fastdeflate sends more). The results files' own ratio is stock / fastdeflate."""
    return f"{float(fast.replace(',', '')) / float(stock.replace(',', '')):.3f}x"


def summary(page: Path) -> str:
    full = load("full.md")
    rows = full.table("measurement", "stock", "fastdeflate", "ratio")
    table = markdown_table(["measurement", "stock", "fastdeflate", "ratio"],
                           [[r["measurement"], r["stock"], r["fastdeflate"],
                             bytes_ratio(r["stock"], r["fastdeflate"])
                             if is_bytes(r["measurement"]) and "(ratio:" not in
                             r["measurement"] else r["ratio"]]  # (a row naming its own)
                            for r in rows])
    return "\n\n".join([table, "Ratio: stock / fastdeflate (above 1: fastdeflate uses less), "
                        "except bytes on the wire: fastdeflate / stock, as on every page "
                        "(above 1: fastdeflate sends more).", source(full, page)])


def levels(page: Path) -> str:
    data = load("sizes.md")
    rows = []
    for level in range(1, 10):
        cells = [f"level {level}"]
        for wm in ("15 / 8", "12 / 5"):
            cells.append(ratio_range(byte_ratios(sizes_rows(f"level {level}", True, wm))))
        rows.append(cells)
    table = markdown_table(["level", "bytes / stock, window 15 / memLevel 8",
                            "window 12 / memLevel 5"], rows)
    engines = data.machine.get("engines (window 15, memLevel 8)", data.engine)
    return "\n\n".join([table, "1–64 KB varying JSON, context takeover; above 1: "
                        f"fastdeflate sends more than stock zlib {data.stdlib_zlib} at the "
                        f"same level. Engines at window 15 / memLevel 8: {engines}; at "
                        "window 12 / memLevel 5 ISA-L's state does not fit in stock's, and "
                        f"{data.engine} runs every level.", source(data, page)])


def level_tuning(page: Path) -> str:
    """Every level's worst cell and time on the wider corpus, before and after the level
    frontier's tuning (benchmarks/results/levels-before-after.md)."""
    data = load("levels-before-after.md")
    rows = data.table("level", "before: worst cell / stock")
    table = markdown_table(list(rows[0]), [list(r.values()) for r in rows])
    return "\n\n".join([table, "Worst cell: fastdeflate's bytes over stock's at that level, "
                        "the worst of the 448 cells of the wider corpus (windows 9–15, "
                        "memLevel 8); time: compressing all of them, the median of "
                        "interleaved runs in separate processes, default builds.",
                        source(data, page)])


def broadcast(page: Path) -> str:
    full = load("full.md")
    rows = []
    for n in ("100", "1,000"):
        what = f"websockets broadcast() of ~1 KB JSON to {n} clients"
        cpu = full.summary(f"{what}, server CPU per delivery (µs)")
        size = full.summary(f"{what}, bytes on the wire per delivery")
        rows.append([n, cpu["stock"], cpu["fastdeflate"], cpu["ratio"], size["stock"],
                     size["fastdeflate"], bytes_ratio(size["stock"], size["fastdeflate"])])
    table = markdown_table(["clients", "CPU µs per delivery: stock", "fastdeflate",
                            "stock / fastdeflate", "bytes per delivery: stock",
                            "fastdeflate", "fastdeflate / stock"], rows)
    return "\n\n".join([table, "A websockets server sends ~1 KB JSON updates with its own "
                        "`broadcast()`, with private messages and late joiners mixed in; "
                        "CPU: stock / fastdeflate (above 1: fastdeflate uses less); bytes: "
                        "fastdeflate / stock (above 1: fastdeflate sends more).",
                        source(full, page)])


#: The results file of the broadcast part with churn (part 6 alone, full length:
#: ``python benchmarks/run.py --parts broadcast --full --stem broadcast``).
BROADCAST_RESULTS = "broadcast.md"


def broadcast_churn(page: Path) -> str:
    """Part 6's churn mix: CPU and bytes per delivery (with the worst runs), each run's
    figures, where fastdeflate's CPU goes, and the chart."""
    data = load(BROADCAST_RESULTS)
    header = broadcast_part.HEADER
    keep = [0, 3, 4, 5, 7, 8, 9, 10, 11, 13]  # not the run lengths nor the stock / fastdeflate ratios
    churn = [row for row in data.cells(*header) if "leaving" in row[0]]
    if not churn:
        raise KeyError(f"{BROADCAST_RESULTS}: no broadcast table with churn (part 6)")
    names = ["clients", "CPU µs/delivery: stock", "fastdeflate", "off", "fastdeflate / off",
             "worst run: fastdeflate / off", "bytes/delivery: stock", "fastdeflate", "off",
             "worst run: fastdeflate / stock"]
    main = markdown_table(names, [[row[i] for i in keep] for row in churn])
    runs = [[re.search(r" to ([\d,]+ clients)", r["measurement"]).group(1),  # type: ignore
             r["stock"], r["fastdeflate"], r["ratio"]]
            for r in data.table("measurement", "stock", "fastdeflate", "ratio")
            if "with churn" in r["measurement"] and "in each run: compression off" in
            r["measurement"]]
    each = markdown_table(["clients", "off: CPU µs/delivery, each run", "fastdeflate",
                           "fastdeflate / off"], runs)
    first = "fastdeflate's CPU per delivery"
    header = next(h for h, _ in data.grids if h[0] == first)  # its column names repeat
    breakdown = markdown_table(header, data.cells(first))
    chart = next(name for name in data.images if name.endswith("-broadcast-mixed.png"))
    prefix = "../" * (len(page.relative_to(DOCS_DIR).parts) - 1)
    return "\n\n".join([
        main, "A websockets server sends ~1 KB varying JSON updates with its own "
        "`broadcast()` at its defaults (window 12, memLevel 5, context takeover), with "
        "churn: after every 10th broadcast a private message to one client in 17 "
        "(rotating), 10% late joiners and 5% leavers. fastdeflate / off: the server's CPU "
        "per delivery with `fastdeflate.enable()` against compression off, the median and "
        "the worst of the runs (each run's below); bytes per delivery, and the worst "
        "run's fastdeflate / stock (above 1: fastdeflate sent more).", each,
        "Where fastdeflate's CPU per delivery goes (medians of the runs; counts from "
        "`fastdeflate.status()`, costs measured in the server process after each run; the "
        "results file says how each part is derived):", breakdown,
        f"![broadcast with churn]({prefix}charts/{chart})", source(data, page)])


#: The fan-out benchmark's results (``python benchmarks/fanout.py``), 100 and 1,000 clients.
FANOUT_RESULTS = ("fanout.md", "fanout-1000.md")


def fanout_helper(page: Path) -> str:
    """The library's own fan-out loop with ``fastdeflate.enable()`` against the adapter's
    ``broadcast()`` helper: CPU, bytes and shared deliveries (``results/fanout*.md``)."""
    header = fanout_part.HEADER
    cpu, size = header.index("CPU µs/delivery: stock"), header.index("bytes/delivery: stock")
    shared = header.index("shared: enabled")
    rows, sources = [], []
    for name in FANOUT_RESULTS:
        data = load(name)
        found = [r for r in data.cells(*header[:3]) if len(r) == len(header)]
        if not found:
            raise KeyError(f"{name}: no fan-out table")
        rows += [[r[0], r[1], r[cpu + 1], r[cpu + 2], r[size + 1], r[size + 2],
                  r[shared], r[shared + 1]] for r in found]
        sources.append(source(data, page))
    table = markdown_table(["library", "clients", "CPU µs/delivery: own loop", "helper",
                            "bytes/delivery: own loop", "helper", "shared: own loop",
                            "helper"], rows)
    return "\n\n".join([table, "A server of each library sends ~1 KB varying JSON "
                        "updates to every client, with private messages and late joiners "
                        "mixed in, `fastdeflate.enable()` in both columns: own loop = the "
                        "library's usual fan-out loop (`for ws in room: await "
                        "ws.send_str(text)`, …), helper = "
                        "`fastdeflate.integrations.<library>.broadcast()`; medians of "
                        "interleaved runs. Shared: deliveries whose payload another "
                        "connection had compressed (the results files have stock and "
                        "compression off too).", "<br>".join(sources)])


def many_connections(page: Path) -> str:
    full = load("full.md")
    rows = []
    for wm in ("12 / memLevel 5", "15 / memLevel 8"):
        cells = [f"window {wm}"]
        for n in ("1 connection", "100 connections", "1,000 connections", "10,000 connections"):
            cells.append(full.summary(
                f"codec, varying JSON 1 KB, window {wm}, {n} round-robin (µs/msg)")["ratio"])
        rows.append(cells)
    table = markdown_table(["settings", "1", "100", "1,000", "10,000 connections"], rows)
    return "\n\n".join([table, "Less CPU per compress+decompress cycle than stock (stock / "
                        "fastdeflate), 1 KB varying JSON, message i through connection i "
                        "mod N.", source(full, page)])


def no_takeover_memory(page: Path) -> str:
    full = load("full.md")
    rows = []
    for lib in ("aiohttp", "autobahn", "websockets", "wsproto"):
        row = full.summary(f"{lib}, no takeover server, 10,000 connections, RSS per "
                           "connection, idle / after one message each way / quiet after it "
                           "(KiB)")
        rows.append([lib, split(row["stock"])[1] + " KiB", split(row["fastdeflate"])[1]
                     + " KiB", split(row["ratio"])[1]])
    table = markdown_table(["library", "stock", "fastdeflate", "ratio"], rows)
    return "\n\n".join([table, "Server RSS per connection after one ~1 KB message each way, "
                        "10,000 clients asking for no context takeover both ways.",
                        source(full, page)])


def aiohttp_backends(page: Path) -> str:
    full = load("full.md")
    rows = [[r["size"], r["alternative µs"], r["enabled µs"], r["fastdeflate vs alternative"]]
            for r in full.table("library", "alternative")
            if r["workload"] == "varying JSON"]
    rows += [[f"1 KB, {r['connections']} connections", r["zlib-ng backend µs"],
              r["enabled µs"], r["fastdeflate vs zlib-ng backend"]]
             for r in full.table("library", "connections")
             if r["library"] == "aiohttp" and r.get("zlib-ng backend µs")]
    table = markdown_table(["varying JSON", "zlib-ng backend µs", "fastdeflate µs",
                            "backend / fastdeflate"], rows)
    return "\n\n".join([table, "aiohttp's own path (writer and reader, no sockets), "
                        "`aiohttp.set_zlib_backend(zlib_ng.zlib_ng)` (zlib-ng's own level 1) against "
                        "`fastdeflate.enable()` (ISA-L's level 1 in the bundled build).",
                        source(full, page)])


def backend_bytes(page: Path) -> str:
    data = load("sizes.md")
    rows = data.table("backend", "level")
    found = {}
    for r in rows:
        found.setdefault((r["backend"], r["level"]), []).append(
            int(r["backend bytes"].replace(",", "")) / int(r["stock bytes"].replace(",", "")))
    fast = byte_ratios(sizes_rows("aiohttp", True))
    table = markdown_table(["aiohttp runs on", "level", "bytes / stock's level 1"],
                           [["fastdeflate", "1", ratio_range(fast)]]
                           + [[backend, level, ratio_range(ratios)]
                              for (backend, level), ratios in found.items()])
    return "\n\n".join([table, "1–64 KB varying JSON, window 15, context takeover; above "
                        "1: more bytes than stock aiohttp sends.", source(data, page)])


def connection_costs(page: Path) -> str:
    data = load("connection-costs.md")
    rows = data.table("window / memLevel")
    table = markdown_table(list(rows[0]), [list(r.values()) for r in rows])
    return "\n\n".join([table, "Traced memory per connection (a compressor and a "
                        "decompressor) after one ~1 KB message each way, level 6.",
                        source(data, page)])


def startup(page: Path) -> str:
    data = load("startup.md")
    rows = data.table("interpreter")
    table = markdown_table(list(rows[0]), [list(r.values()) for r in rows])
    return "\n\n".join([table, source(data, page)])


def json_shrinks(page: Path) -> str:
    """How much varying JSON shrinks on the wire, at each library's own settings."""
    data = load("sizes.md")
    groups = list(sizes.library_groups().items())
    header = ["JSON messages"]
    columns = []
    for settings, names in groups:
        header.append(f"{names} ({settings_label(names.split(', ')[0])})")
        columns.append((names, True))
    first = groups[-1][1]
    header.append(f"{first}, no context takeover")
    columns.append((first, False))
    by_size: dict[str, list[str]] = {}
    for names, takeover in columns:
        for r in sizes_rows(names, takeover):
            share = (int(r["stock bytes"].replace(",", ""))
                     / int(r["message bytes"].replace(",", "")))
            by_size.setdefault(r["size"], []).append(f"{share:.0%}")
    table = markdown_table(header, [[f"~{size}", *cells] for size, cells in by_size.items()])
    return "\n\n".join([table, "Bytes on the wire as a share of the JSON sent (payloads "
                        "of stock zlib, as each library's server compresses by default; "
                        "fastdeflate's are within the support matrix's ratios of these), "
                        "a run of varying JSON messages of each size through one "
                        "connection; with context takeover (every library's default) "
                        "each message may refer to the ones before it.",
                        source(data, page)])


def connection_memory(page: Path) -> str:
    """A real server's memory per connection, stock and fastdeflate (10,000 clients)."""
    full = load("full.md")
    rows = []
    for lib in LIBRARIES:
        row = full.summary(f"{lib} server, 10,000 connections, RSS per connection, idle / "
                           "after one message each way / quiet after it (KiB)")
        stock, fast = split(row["stock"]), split(row["fastdeflate"])
        rows.append([lib, stock[0] + " KiB", stock[1] + " KiB", fast[1] + " KiB",
                     fast[2] + " KiB"])
    table = markdown_table(["library", "stock: after the handshake",
                            "stock: after one message each way", "fastdeflate: busy",
                            "fastdeflate: quiet"], rows)
    return "\n\n".join([table, "Server RSS per connection with 10,000 clients, each "
                        "sending one ~1 KB JSON message that the server echoes; busy: "
                        "right after it; quiet: once the connections have been idle "
                        "past the park-after delay. Stock keeps what it reached after "
                        "one message for as long as the connection is open.",
                        source(full, page)])


def latency(page: Path) -> str:
    """The latency of the other connections (``python benchmarks/latency.py``)."""
    data = load("latency.md")
    table, legend = latency_part.docs_block(data)
    return "\n\n".join([table, legend, source(data, page)])


def latency_cpu(page: Path) -> str:
    """Server CPU of compressing large messages off the loop and on it, one small client
    (the same work in both modes): ``results/latency-cpu.md``."""
    data = load("latency-cpu.md")
    rows = data.table("library", "direction", "mode", "p50 ms")  # (the medians)
    by = {(r["library"], r["direction"], r["mode"]): r for r in rows}
    columns = ["library", "direction", "p99 ms off the loop", "p99 ms on it",
               "server CPU s off the loop", "server CPU s on it", "CPU off / on",
               "codec CPU per snapshot off / on", "small clients' CPU off / on"]
    # off / on of the server's CPU, the codec's (the compression itself, wherever it
    # ran) and the small clients' (a control: the same code in both modes)
    ratios = ("server CPU s", "codec CPU ms per snapshot", "small clients' CPU s")
    table = []
    for (library, direction, mode), off in by.items():
        on = by.get((library, direction, "fastdeflate-on-loop"))
        if mode != "fastdeflate" or on is None:
            continue
        table.append([library, direction, off["p99 ms"], on["p99 ms"], off["server CPU s"],
                      on["server CPU s"],
                      *(f"{float(off[c]) / float(on[c]):.2f}x" for c in ratios)])
    return "\n\n".join([markdown_table(columns, table), source(data, page)])


RENDERERS: dict[str, Callable[[Path], str]] = {
    "headline": headline, "support-matrix": support_matrix, "summary": summary,
    "levels": levels, "level-tuning": level_tuning, "broadcast": broadcast,
    "many-connections": many_connections,
    "no-takeover-memory": no_takeover_memory, "aiohttp-backends": aiohttp_backends,
    "connection-costs": connection_costs, "startup": startup,
    "backend-bytes": backend_bytes, "json-shrinks": json_shrinks,
    "connection-memory": connection_memory, "mixed-stream": mixed_stream,
    "broadcast-churn": broadcast_churn, "latency": latency, "latency-cpu": latency_cpu,
    "fanout-helper": fanout_helper,
}

#: A chart on a docs page: an image whose file is in docs/charts/.
CHART = re.compile(r"!\[[^\]]*\]\((?P<path>(?:\.\./)*charts/(?P<name>[\w.-]+\.png))\)")


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *docs_pages()]


def docs_pages() -> list[Path]:
    """Every page of the site (docs/ and its folders)."""
    return sorted(DOCS_DIR.rglob("*.md"))


def charts_referenced(docs: list[Path] | None = None) -> dict[str, list[str]]:
    """Chart file name -> the docs pages that show it (as ``charts/NAME.png``)."""
    found: dict[str, list[str]] = {}
    for page in docs_pages() if docs is None else docs:
        for m in CHART.finditer(page.read_text(encoding="utf-8")):
            if (page.parent / m.group("path")).resolve().parent != CHARTS_DIR.resolve():
                raise ValueError(f"{page.name}: {m.group('path')} is not in docs/charts/")
            found.setdefault(m.group("name"), []).append(
                page.relative_to(DOCS_DIR).as_posix())
    return found


def chart_problems(referenced: dict[str, list[str]], results: Path = RESULTS_DIR,
                   charts: Path = CHARTS_DIR) -> list[str]:
    """What is wrong with the charts of the docs: a chart a page shows that the results
    do not have, a copy missing or not byte for byte its results file, a copy no page
    shows."""
    problems = []
    for name, where in sorted(referenced.items()):
        original, copy = results / name, charts / name
        if not original.is_file():
            problems.append(f"{', '.join(where)}: {name} is not in benchmarks/results/")
        elif not copy.is_file():
            problems.append(f"docs/charts/{name} is missing")
        elif copy.read_bytes() != original.read_bytes():
            problems.append(f"docs/charts/{name} differs from benchmarks/results/{name}")
    for copy in sorted(charts.glob("*")) if charts.is_dir() else []:
        if copy.name not in referenced:
            problems.append(f"docs/charts/{copy.name} is shown by no page")
    return problems


def copy_charts(referenced: dict[str, list[str]]) -> list[str]:
    """Copy each chart a page shows from benchmarks/results/ into docs/charts/, and
    remove the copies no page shows; the names changed."""
    changed = []
    CHARTS_DIR.mkdir(exist_ok=True)
    for name in sorted(referenced):
        original, copy = RESULTS_DIR / name, CHARTS_DIR / name
        if original.is_file() and (not copy.is_file()
                                   or copy.read_bytes() != original.read_bytes()):
            copy.write_bytes(original.read_bytes())
            changed.append(name)
    for copy in sorted(CHARTS_DIR.glob("*")):
        if copy.name not in referenced:
            copy.unlink()
            changed.append(copy.name)
    return changed


def render(page: Path, text: str) -> str:
    def block(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in RENDERERS:
            raise KeyError(f"{page.name}: unknown generated block {name!r}")
        return f"{match.group(1)}{RENDERERS[name](page)}\n{match.group(4)}"

    return BLOCK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a block is not what its results give")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(page, text)
        if new != text:
            stale.append(page.relative_to(ROOT).as_posix())
            if not args.check:
                page.write_text(new, encoding="utf-8")
    referenced = charts_referenced()
    if not args.check:
        stale += [f"docs/charts/{name}" for name in copy_charts(referenced)]
    problems = chart_problems(referenced)
    if stale:
        verb = "out of date" if args.check else "rewritten"
        print(f"{verb}: {', '.join(stale)}" + (" (python tools/render_docs.py)"
                                               if args.check else ""))
    for problem in problems:
        print(f"charts: {problem}")
    return 1 if (stale and args.check) or problems else 0


if __name__ == "__main__":
    sys.exit(main())
