"""The pure-Python fallback in parts by concern, named as the compiled extension's parts
(``extension/X.pxi`` has its counterpart in ``X.py`` here); ``fastdeflate/_pure.py``
imports them in reading order and is the module the package loads.

    engines.py        the stdlib's zlib at every level; engines()
    basics.py         the sync flush's tail, the GIL knob, input as buffers, __init__'s lock
    testing.py        test hooks: named points (private); no allocation failures here
    rings.py          no rings: one stdlib zlib object per codec object; the settings
                      (set_live_states, set_park_after, set_inflate) validated and kept,
                      inflate_engine(), and the history ids
    parking.py        no parking and no sweeper: live_states() (empty) and the traffic
                      counters; fork concerns only compress once's lock
    compress_once.py  one message to many compressors: the policy, which the extension
                      compiles (../_compress_once_policy.py), run here as Python; its
                      lock, host functions and counters
    compressor.py     class Compressor
    decompressor.py   class Decompressor
    test_entries.py   compress once's switches and counts for tests (private)
"""
