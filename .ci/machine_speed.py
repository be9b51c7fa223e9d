"""CI: how fast this machine is right now, in one number: the stdlib zlib's cycle on a
1 KB JSON message (compress with a sync flush, strip, append, decompress), median µs of
9 batches. The same figure in every CI run, so that step times can be compared across
runs on a machine whose speed varies 2x within a day."""

import json
import statistics
import time
import zlib

messages = [json.dumps({"seq": i, "price": i * 37 % 1009, "side": "buy",
                        "book": [[i * j % 97, j] for j in range(40)]}).encode()[:1024]
            for i in range(1000)]
batches = []
for _ in range(9):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    d = zlib.decompressobj(-15)
    start = time.perf_counter()
    for message in messages:
        payload = (c.compress(message) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]
        assert d.decompress(payload + b"\x00\x00\xff\xff") == message
    batches.append((time.perf_counter() - start) / len(messages) * 1e6)
print(f"machine speed: stdlib zlib 1 KB cycle {statistics.median(batches):.1f} us "
      f"(median of 9 x 1,000 messages)")
