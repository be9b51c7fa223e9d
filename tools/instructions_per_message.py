"""Instructions per message on three shared-state paths, for callgrind (deterministic:
the same count whatever else the machine runs). Run it twice, with M messages and with
0, and divide the difference by M:

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect='*Compressor_*compress' --toggle-collect='*Decompressor_*decompress' \
        python tools/instructions_per_message.py MODE M

The toggles count the codec's calls only (``conns`` and ``loop``). Without them the whole
process is counted, broadcast()'s Python code included, and two builds differ by up to
~3% for nothing they do: dict lookups keyed by a ring's address (the groups of
broadcast()) probe more or less by where the allocator put it.

MODE: ``conns`` (100 connections at 15/8, message i through connection i mod 100,
compress + decompress), ``loop`` (one message to 100 compressors at 12/5 in a loop:
compress once), ``broadcast`` (the same through fastdeflate.broadcast()).
"""
import json, sys
import fastdeflate

mode, measured = sys.argv[1], int(sys.argv[2])
N = 100
# Every object keeps its stream: no ring goes over its limit, so no sweeper thread starts
# (its wake-ups would make the count depend on the time the run takes).
fastdeflate.set_live_states(4 * N)
msgs = [json.dumps({"seq": i, "px": i * 37 % 1009, "book": [[i * j % 97, j] for j in range(30)]}).encode()
        for i in range(4000)]
if mode == "conns":  # 100 connections, message i through connection i mod 100, 15/8
    pairs = [(fastdeflate.Compressor(6, 15, 8), fastdeflate.Decompressor(15)) for _ in range(N)]
    for i in range(N * 3):
        c, d = pairs[i % N]
        d.decompress(c.compress(msgs[i]))
    for i in range(N * 3, N * 3 + measured):
        c, d = pairs[i % N]
        d.decompress(c.compress(msgs[i]))
elif mode == "loop":  # the same message to 100 compressors in a loop (compress once)
    comps = [fastdeflate.Compressor(6, 12, 5) for _ in range(N)]
    for k in range(3):
        for c in comps:
            c.compress(msgs[k])
    for k in range(3, 3 + measured // N):
        m = msgs[k]
        for c in comps:
            c.compress(m)
elif mode == "broadcast":
    comps = [fastdeflate.Compressor(6, 12, 5) for _ in range(N)]
    for k in range(3):
        fastdeflate.broadcast(msgs[k], comps)
    for k in range(3, 3 + measured // N):
        fastdeflate.broadcast(msgs[k], comps)
