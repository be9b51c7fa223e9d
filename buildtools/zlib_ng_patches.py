"""Edits made to the bundled zlib-ng's sources before they are built.

zlib-ng sizes two buffers by constants where zlib follows the stream's parameters:

- the hash table has ``HASH_SIZE`` entries whatever memLevel asks for (zlib: 2^(memLevel+7)
  entries, 8 KiB at memLevel 5), so a websockets compressor (window 12, memLevel 5) held
  64 KiB of table, cleared on every reset and every restored window;
- inflate allocates a 32 KiB window whatever the window bits (zlib: 2^w bytes).

These edits make both follow the parameters, as zlib does:

- The hash table gets 2^(memLevel+7) entries (zlib's rule: 8 KiB at memLevel 5, 64 KiB at
  memLevel 8), cleared and copied at that size, and slid at that size by every
  architecture's ``slide_hash``.
- zlib-ng's level 9 hashes with a rolling hash that masks with 32767, so it needs 32 Ki
  entries. A stream with a smaller table never uses it: level 9 then runs the ordinary
  hash and matcher with level 9's limits (which is what zlib's level 9 is; its sizes on
  websocket JSON came out 0.1-1.2% smaller than the stdlib's). Which matcher and which
  refill step apply is decided by the hash in use, no longer by ``max_chain > 1024``
  alone. ``update_hash``, which only that rolling path should call, masks with the
  smallest table's 255 in the ordinary hash, so it can never index past a table.
- Inflate allocates 2^w bytes of window (plus zlib-ng's 64 bytes of padding; 32 KiB when
  the window bits come from a zlib header) and ``inflateReset2`` refuses a larger window
  than it allocated (``Z_STREAM_ERROR``; zlib would reallocate; fastdeflate never asks).
- A compressor's ``prev[]`` is left as allocated, as zlib leaves it (an entry is written
  when its position is inserted, before a hash chain can lead to it): zlib-ng zeroed it,
  touching every page of it (64 KiB at window 15) in every compressor at once.
- Inflate decodes literal/length codes through zlib's 9-bit root table, not zlib-ng's
  10-bit one: its table space (``ENOUGH_LENS``) is zlib's 852 entries instead of 1332,
  1.9 KiB less per decompressor, which kept zlib-ng's inflate state 2 KiB above zlib's.
- A compressor's pending buffer (pending output and the symbols of the open block,
  2^(memLevel+8) bytes: 8 KiB at memLevel 5, 64 KiB at memLevel 8) is not part of its
  state: fastdeflate lends it one for its deflate() calls and takes it back once it holds
  nothing, which is the case between messages (each ends with a sync flush). The
  compressors of a parameter set then share a few (see ``PENDING_LENT``), where zlib keeps
  one in each. zlib-ng's 76 bytes reserved for its shared library's ABI go too.
- Likewise a decompressor's code tables (decoding tables, code lengths and work area:
  6.8 KiB), in use only inside a block: lent for its inflate() calls, taken back between
  blocks (``INFLATE_TABLES_LENT``).

Three edits are for speed. Level 1 (``deflate_quick``, aiohttp's level) never follows a
hash chain, so its streams insert into the hash table alone and write no ``prev[]``
(``QUICK_HEAD_ONLY``: same bytes, less memory touched per message). With many
connections, a compressor's state is cold when its next message comes, and the match
search paid for it one dependent cache miss at a time: ``fastdeflate_warm_deflate`` reads
what that search uses in address order first (``WARM_DEFLATE``). The third: every message
ends a deflate block, and for a message of a few KiB building its three Huffman trees
with zlib's heap took a fifth of a compress+decompress cycle (perf, window 12 / memLevel 5, 1 KB JSON).
``zlib_ng_build_tree.c`` builds them by a counting sort on the frequencies and the
in-place method of Moffat and Katajainen: the same total length (every minimum-redundancy
code has it), so the same compressed size, with few unpredictable branches. A tree whose
longest code would exceed deflate's limit (15 bits, 7 for the code-length tree) is built
by zlib-ng's own heap builder, renamed ``build_tree_heap``, whose length limiting is
zlib's.

One edit is for bytes: a stream may hash 3 bytes instead of 4 (``HASH3_ON_REQUEST``), and
its fast strategy then takes matches of 3 bytes, as zlib's does; levels 1-8 ask for it at
windows 9-11, where zlib-ng's 4-byte hash missed the 3-byte matches of binary records.

Each edit replaces text that must occur exactly once in the pinned sources; the digest of
all of them is part of the build key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (found exactly once) by ``new`` in ``path``."""

    path: str
    old: str
    new: str


#: Each architecture's slide_hash: over head[] alone, or over head[] and prev[] at once.
_SLIDE_HEAD = (
    "arch/generic/slide_hash_c.c", "arch/x86/slide_hash_avx2.c", "arch/arm/slide_hash_neon.c",
    "arch/arm/slide_hash_armv6.c", "arch/power/slide_ppc_tpl.h", "arch/riscv/slide_hash_rvv.c",
    "arch/loongarch/slide_hash_lasx.c",
)
_SLIDE_HEAD_AND_PREV = ("arch/x86/slide_hash_sse2.c", "arch/loongarch/slide_hash_lsx.c")

HASH_PER_MEMLEVEL = (
    Edit("deflate.h",
         "    unsigned int  w_mask;            /* w_size - 1 */\n",
         "    unsigned int  w_mask;            /* w_size - 1 */\n"
         "    unsigned int  hash_size;         /* fastdeflate: entries in head[] */\n"
         "    unsigned int  hash_mask;         /* fastdeflate: hash_size - 1 */\n"),
    Edit("deflate.c",
         "memset((unsigned char *)s->head, 0, HASH_SIZE * sizeof(*s->head));",
         "memset((unsigned char *)s->head, 0, s->hash_size * sizeof(*s->head));"),
    Edit("deflate.c",
         "alloc_deflate(PREFIX3(stream) *strm, int windowBits, int lit_bufsize)",
         "alloc_deflate(PREFIX3(stream) *strm, int windowBits, int lit_bufsize, int hash_size)"),
    Edit("deflate.c",
         "    int head_size = HASH_SIZE * sizeof(Pos);",
         "    int head_size = hash_size * (int)sizeof(Pos);"),
    Edit("deflate.c",
         "    int lit_bufsize = 1 << (memLevel + 6);\n"
         "    deflate_allocs *alloc_bufs = alloc_deflate(strm, windowBits, lit_bufsize);\n",
         "    int lit_bufsize = 1 << (memLevel + 6);\n"
         "    /* fastdeflate: zlib's 2^(memLevel+7) entries */\n"
         "    int hash_size = 1 << (memLevel + 7);\n"
         "    deflate_allocs *alloc_bufs = alloc_deflate(strm, windowBits, lit_bufsize, hash_size);\n"),
    Edit("deflate.c",
         "    s->head = alloc_bufs->head;\n",
         "    s->head = alloc_bufs->head;\n"
         "    s->hash_size = (unsigned int)hash_size;\n"
         "    s->hash_mask = (unsigned int)hash_size - 1u;\n"),
    Edit("deflate.c",
         "alloc_deflate(dest, ss->w_bits, ss->lit_bufsize);",
         "alloc_deflate(dest, ss->w_bits, ss->lit_bufsize, ss->hash_size);"),
    Edit("deflate.c",
         "memcpy((void *)ds->head, (void *)ss->head, HASH_SIZE * sizeof(Pos));",
         "memcpy((void *)ds->head, (void *)ss->head, ss->hash_size * sizeof(Pos));"),
    Edit("deflate.c",
         "    if (s->max_chain_length > 1024) {\n        s->update_hash = &update_hash_roll;",
         "    if (s->max_chain_length > 1024 && s->hash_size >= 32768u) {\n"
         "        s->update_hash = &update_hash_roll;"),
    # what uses the rolling hash is the stream's own choice, not max_chain alone
    Edit("deflate.c",
         "            if (UNLIKELY(s->max_chain_length > 1024)) {",
         "            if (UNLIKELY(s->update_hash == &update_hash_roll)) {"),
    Edit("deflate_slow.c",
         "    if (s->max_chain_length <= 1024)",
         "    if (s->max_chain_length <= 1024 || s->update_hash != &update_hash_roll)"),
    Edit("insert_string_tpl.h",
         "    return h & HASH_CALC_MASK;",
         "    return h & HASH_UPDATE_MASK;"),
    Edit("insert_string_tpl.h",
         "#ifndef HASH_CALC_MASK\n#  define HASH_CALC_MASK HASH_MASK\n#endif\n",
         "#ifndef HASH_CALC_MASK\n#  define HASH_CALC_MASK HASH_MASK\n#endif\n"
         "#ifndef HASH_UPDATE_MASK\n#  define HASH_UPDATE_MASK HASH_CALC_MASK\n#endif\n"),
    Edit("insert_string.c",
         "#define HASH_CALC_VAR        h\n",
         "#define HASH_CALC_VAR        h\n"
         "#define HASH_CALC_MASK       (s->hash_mask)\n"
         "#define HASH_UPDATE_MASK     255u  /* fastdeflate: the smallest table's */\n"),
) + tuple(
    Edit(path, "(s->head, HASH_SIZE,", "(s->head, s->hash_size,") for path in _SLIDE_HEAD
) + tuple(
    Edit(path, "(s->head, s->prev, HASH_SIZE,", "(s->head, s->prev, s->hash_size,")
    for path in _SLIDE_HEAD_AND_PREV
)

_WINDOW_32K = "INFLATE_ADJUST_WINDOW_SIZE((1 << MAX_WBITS) + 64)"

INFLATE_WINDOW_PER_WBITS = (
    Edit("inflate.h",
         "alloc_inflate(PREFIX3(stream) *strm);",
         "alloc_inflate(PREFIX3(stream) *strm, int window_size);"),
    Edit("inflate.c",
         "alloc_inflate(PREFIX3(stream) *strm) {",
         "alloc_inflate(PREFIX3(stream) *strm, int window_size) {"),
    Edit("inflate.c",
         f"    int window_size = {_WINDOW_32K}; /* 64B padding for chunksize */\n",
         ""),
    Edit("inflate.c",
         "    inflate_allocs *alloc_bufs = alloc_inflate(strm);\n"
         "    if (alloc_bufs == NULL)\n"
         "        return Z_MEM_ERROR;\n\n"
         "    state = alloc_bufs->state;\n"
         "    state->window = alloc_bufs->window;\n"
         "    state->alloc_bufs = alloc_bufs;\n"
         f"    state->wbufsize = {_WINDOW_32K};\n",
         "    /* fastdeflate: a window of 2^w bytes (+64 of padding), 32 KiB if w is unknown */\n"
         "    int window_bits = windowBits < 0 ? -windowBits : windowBits & MAX_WBITS;\n"
         "    if (window_bits < MIN_WBITS)\n"
         "        window_bits = MAX_WBITS;\n"
         "    int window_size = INFLATE_ADJUST_WINDOW_SIZE((1 << window_bits) + 64);\n"
         "    inflate_allocs *alloc_bufs = alloc_inflate(strm, window_size);\n"
         "    if (alloc_bufs == NULL)\n"
         "        return Z_MEM_ERROR;\n\n"
         "    state = alloc_bufs->state;\n"
         "    state->window = alloc_bufs->window;\n"
         "    state->alloc_bufs = alloc_bufs;\n"
         "    state->wbufsize = (uint32_t)window_size;\n"),
    Edit("inflate.c",
         "    /* update state and reset the rest of it */\n"
         "    state->wrap = wrap;\n",
         "    /* fastdeflate: the window was allocated for at most this many bits */\n"
         "    if (INFLATE_ADJUST_WINDOW_SIZE((1u << (windowBits ? windowBits : MAX_WBITS)) + 64)\n"
         "            > state->wbufsize)\n"
         "        return Z_STREAM_ERROR;\n\n"
         "    /* update state and reset the rest of it */\n"
         "    state->wrap = wrap;\n"),
    Edit("inflate.c",
         "alloc_inflate(dest);",
         "alloc_inflate(dest, (int)state->wbufsize);"),
    Edit("infback.c",
         "alloc_inflate(strm);",
         f"alloc_inflate(strm, {_WINDOW_32K});"),
)

#: The C of the faster tree builder (see the module docstring).
_BUILD_TREE_C = (Path(__file__).resolve().parent / "zlib_ng_build_tree.c").read_text(
    encoding="utf-8")
_GEN_BITLEN_DOC = ("/* ===========================================================================\n"
                   " * Compute the optimal bit lengths for a tree")

TREE_BUILDER = (
    Edit("trees.c",
         "static void build_tree(deflate_state *s, tree_desc *desc) {\n"
         "    /* desc: the tree descriptor */",
         "static void build_tree_heap(deflate_state *s, tree_desc *desc) {\n"
         "    /* desc: the tree descriptor */"),
    Edit("trees.c", _GEN_BITLEN_DOC, _BUILD_TREE_C + _GEN_BITLEN_DOC),
)

_LENS_ROOT = ("            state->lenbits = 10;\n"
              "            ret = zng_inflate_table(LENS, ")

#: zlib's 9-bit root table for literal/length codes (zlib-ng's is 10 bits): 852 table
#: entries ("enough 286 9 15") instead of 1332, 1,920 bytes less in every inflate state.
INFLATE_LENS_ROOT_9 = (
    Edit("inftrees.h", "#define ENOUGH_LENS 1332\n", "#define ENOUGH_LENS 852  /* fastdeflate: "
         "zlib's root of 9 bits, \"enough 286 9 15\" */\n"),
    Edit("inflate.c", _LENS_ROOT, _LENS_ROOT.replace("= 10;", "= 9;  /* fastdeflate */")),
    Edit("infback.c", _LENS_ROOT, _LENS_ROOT.replace("= 10;", "= 9;  /* fastdeflate */")),
)

#: zlib-ng zeroes prev[] (64 KiB at window 15) when it allocates a compressor, which
#: touches every page of it at once; zlib leaves it as allocated: an entry is written
#: when its position is inserted, before any hash chain can lead to it.
PREV_AS_ALLOCATED = (
    Edit("deflate.c",
         "    memset((char *)alloc_bufs->prev, 0, prev_size);\n",
         "    /* fastdeflate: prev[] is written as positions are inserted, as in zlib */\n"),
)

#: The pending buffer (pending output, and the symbols of the open block: lit_bufsize x
#: LIT_BUFS bytes, 8 KiB at memLevel 5, 64 KiB at memLevel 8) holds nothing between two
#: messages, each ended by a sync flush. It is left out of the compressor's allocation and
#: lent to it for its deflate() calls (``fastdeflate_lend_pending``), then taken back once
#: it holds nothing (``fastdeflate_take_pending``), so that the compressors of a parameter
#: set share a few instead of each keeping one. ``deflateCopy`` then refuses
#: (Z_MEM_ERROR; fastdeflate never copies a stream); nothing else but deflate() (and
#: ``deflateParams``/``deflatePrime``, which fastdeflate never calls) uses the buffer.
_SYMBOL_POINTERS = (
    "#ifdef LIT_MEM\n"
    "    s->d_buf = (uint16_t *)(s->pending_buf + (s->lit_bufsize << 1));\n"
    "    s->l_buf = s->pending_buf + (s->lit_bufsize << 2);\n"
    "    s->sym_end = s->lit_bufsize - 1;\n"
    "#else\n"
    "    s->sym_buf = s->pending_buf + s->lit_bufsize;\n"
    "    s->sym_end = (s->lit_bufsize - 1) * 3;\n"
    "#endif\n")
_LEND_PENDING_C = """\
/* fastdeflate: the pending buffer is lent to a stream for its deflate() calls. */
size_t fastdeflate_pending_size(PREFIX3(stream) *strm) {
    deflate_state *s = (deflate_state *)strm->state;
    return (size_t)s->lit_bufsize * LIT_BUFS;
}

/* The stream's pending buffer, or NULL if it has none. */
unsigned char *fastdeflate_pending_buffer(PREFIX3(stream) *strm) {
    return ((deflate_state *)strm->state)->pending_buf;
}

/* Lend ``buf`` (fastdeflate_pending_size() bytes) to a stream that has none. */
void fastdeflate_lend_pending(PREFIX3(stream) *strm, unsigned char *buf) {
    deflate_state *s = (deflate_state *)strm->state;
    s->pending_buf = buf;
    s->pending_out = buf;
#ifdef LIT_MEM
    s->d_buf = (uint16_t *)(buf + (s->lit_bufsize << 1));
    s->l_buf = buf + (s->lit_bufsize << 2);
#else
    s->sym_buf = buf + s->lit_bufsize;
#endif
}

/* Take a stream's pending buffer back if it holds nothing (no pending output, no symbol
   of an open block); NULL if it has none or must keep it. */
unsigned char *fastdeflate_take_pending(PREFIX3(stream) *strm) {
    deflate_state *s = (deflate_state *)strm->state;
    unsigned char *buf = s->pending_buf;
    if (buf == NULL || s->pending != 0 || s->sym_next != 0)
        return NULL;
    s->pending_buf = NULL;
    s->pending_out = NULL;
#ifdef LIT_MEM
    s->d_buf = NULL;
    s->l_buf = NULL;
#else
    s->sym_buf = NULL;
#endif
    return buf;
}

"""
_FREE_DEFLATE_DOC = ("/* ===========================================================================\n"
                     " * Free all allocated deflate buffers")

PENDING_LENT = (
    Edit("deflate.c",
         "    int pending_size = lit_bufsize * LIT_BUFS;\n",
         "    int pending_size = 0;  /* fastdeflate: lent per call (fastdeflate_lend_pending) */\n"),
    Edit("deflate.c",
         "    alloc_bufs->pending_buf = (unsigned char *)HINT_ALIGNED_64(buff + pending_pos);\n",
         "    alloc_bufs->pending_buf = NULL;  /* fastdeflate: lent per call */\n"),
    Edit("deflate.c", _SYMBOL_POINTERS,
         "    /* fastdeflate: the symbol buffer is set when a pending buffer is lent */\n"
         "    s->pending_out = NULL;\n"
         "#ifdef LIT_MEM\n"
         "    s->d_buf = NULL;\n"
         "    s->l_buf = NULL;\n"
         "    s->sym_end = s->lit_bufsize - 1;\n"
         "#else\n"
         "    s->sym_buf = NULL;\n"
         "    s->sym_end = (s->lit_bufsize - 1) * 3;\n"
         "#endif\n"),
    Edit("deflate.c", _FREE_DEFLATE_DOC, _LEND_PENDING_C + _FREE_DEFLATE_DOC),
    # and 76 bytes zlib-ng reserves for its shared library's ABI (this build is static)
    Edit("deflate.h",
         "    /* Reserved for future use and alignment purposes */\n    int32_t reserved[19];\n",
         "    /* fastdeflate: zlib-ng's reserved[19] left out (a static build: no ABI) */\n"),
)

_INFLATE_TABLES_C = """
/* fastdeflate: inflate()'s code tables (code lengths, work area, decoding tables) are
   lent to a stream for its calls and taken back between blocks. */
size_t fastdeflate_inflate_tables_size(PREFIX3(stream) *strm) {
    (void)strm;
    return sizeof(code) * ENOUGH + sizeof(uint16_t) * (320 + 288);
}

/* The stream's table space, or NULL if it has none. */
unsigned char *fastdeflate_inflate_tables(PREFIX3(stream) *strm) {
    return (unsigned char *)((struct inflate_state *)strm->state)->codes;
}

/* Lend ``buf`` (fastdeflate_inflate_tables_size() bytes, aligned as malloc aligns) to a
   stream that has none. */
void fastdeflate_lend_inflate_tables(PREFIX3(stream) *strm, unsigned char *buf) {
    struct inflate_state *state = (struct inflate_state *)strm->state;
    state->codes = (code *)buf;
    state->lens = (uint16_t *)(buf + sizeof(code) * ENOUGH);
    state->work = state->lens + 320;
}

/* Take a stream's table space back if it is between blocks (the next block builds its
   own tables, or uses the fixed ones) or done; NULL if it has none or must keep it. */
unsigned char *fastdeflate_take_inflate_tables(PREFIX3(stream) *strm) {
    struct inflate_state *state = (struct inflate_state *)strm->state;
    unsigned char *buf = (unsigned char *)state->codes;
    if (buf == NULL || (state->mode != HEAD && state->mode != TYPE && state->mode != TYPEDO
                        && state->mode != DONE))
        return NULL;
    state->codes = NULL;
    state->lens = NULL;
    state->work = NULL;
    state->lencode = state->distcode = state->next = NULL;
    return buf;
}
"""
_CODES_USED = "    return (unsigned long)(state->next - state->codes);\n}\n"
_REFUSED = "    return Z_STREAM_ERROR;  /* fastdeflate: the code tables are lent to inflate() only */\n"

#: inflate()'s code tables (5.6 KiB of decoding tables and 1.2 KiB of code lengths and work
#: area, part of every inflate state) are only in use inside a block. They are left out of
#: the state, lent to a stream for its inflate() calls and taken back between blocks, which
#: is where every message ends: the decompressors of a parameter set share a few.
#: ``inflateCopy`` and ``inflateBackInit`` refuse (Z_STREAM_ERROR; fastdeflate calls
#: neither).
INFLATE_TABLES_LENT = (
    Edit("inflate.h",
         "    uint16_t lens[320];         /* temporary storage for code lengths */\n"
         "    uint16_t work[288];         /* work area for code table building */\n"
         "    code codes[ENOUGH];         /* space for code tables */\n",
         "    /* fastdeflate: lent for inflate() calls (fastdeflate_lend_inflate_tables) */\n"
         "    uint16_t *lens;             /* temporary storage for code lengths: 320 */\n"
         "    uint16_t *work;             /* work area for code table building: 288 */\n"
         "    code *codes;                /* space for code tables: ENOUGH */\n"),
    Edit("inflate.c",
         "    state->mode = HEAD;     /* to pass state test in inflateReset2() */\n",
         "    state->codes = NULL;  /* fastdeflate: lent per call */\n"
         "    state->lens = NULL;\n"
         "    state->work = NULL;\n"
         "    state->mode = HEAD;     /* to pass state test in inflateReset2() */\n"),
    Edit("inflate.c", _CODES_USED, _CODES_USED + _INFLATE_TABLES_C),
    Edit("inflate.c",
         "    /* check input */\n"
         "    if (inflateStateCheck(source) || dest == NULL)\n",
         _REFUSED + "    /* check input */\n"
         "    if (inflateStateCheck(source) || dest == NULL)\n"),
    Edit("infback.c",
         "    struct inflate_state *state;\n\n"
         "    if (strm == NULL || window == NULL || windowBits < MIN_WBITS",
         "    struct inflate_state *state;\n\n" + _REFUSED +
         "    if (strm == NULL || window == NULL || windowBits < MIN_WBITS"),
)

#: With many connections a compressor's state is cold when its next message comes: the
#: match search then follows each hash chain one dependent cache miss at a time (prev[],
#: then the window), some 2,000 per 1 KB message at window 15. ``fastdeflate_warm_deflate``
#: reads the parts that search uses, one byte per cache line in address order, before the
#: call: the same bytes come in far faster as a stream than as a chain of misses. It
#: changes nothing and reads only inside the stream's arrays, up to where the stream has
#: reached: prev[] of the positions in the window (at levels that skip inserting some
#: positions, an entry never written is read and ignored), the hash table (cleared at
#: reset) and the window's history.
_WARM_DEFLATE_C = """\
/* fastdeflate: read what the next deflate() call's match search uses, one byte per cache
   line, so that it finds it in cache. Returns the bytes' sum, which means nothing. */
unsigned fastdeflate_warm_deflate(PREFIX3(stream) *strm) {
    const deflate_state *s = (const deflate_state *)strm->state;
    const size_t start = s->strstart > s->w_size ? s->strstart - s->w_size : 0;
    const volatile unsigned char *prev = (const volatile unsigned char *)s->prev;
    const volatile unsigned char *head = (const volatile unsigned char *)s->head;
    const volatile unsigned char *history = s->window + start;
    const size_t prev_bytes = (size_t)MIN(s->strstart, s->w_size) * sizeof(Pos);
    const size_t head_bytes = (size_t)s->hash_size * sizeof(Pos);
    const size_t history_bytes = s->strstart - start;
    unsigned sum = 0;
    size_t i;
    if (s->level == 0 || s->strategy == Z_HUFFMAN_ONLY || s->strategy == Z_RLE)
        return 0;  /* no hash chains searched */
    if (configuration_table[s->level].func != deflate_quick)  /* it writes no prev[] */
        for (i = 0; i < prev_bytes; i += 64)
            sum += prev[i];
    for (i = 0; i < head_bytes; i += 64)
        sum += head[i];
    for (i = 0; i < history_bytes; i += 64)
        sum += history[i];
    return sum;
}

"""
#: Level 1 is zlib-ng's ``deflate_quick``: at each position it tries only the newest earlier
#: position with the same hash (the hash table's entry), and never follows a chain, so
#: ``prev[]`` is never read there. ``quick_insert_head``, made from the same template and
#: hash as ``quick_insert_string``, inserts into the hash table alone: a level-1 stream
#: writes no ``prev[]`` (2 bytes per position, cold with many connections) and warming
#: does not read it. Same matches, same bytes. A stream's level never changes
#: (fastdeflate never calls ``deflateParams``), and a later reset inserts the window anew.
_QUICK_HEAD_C = """\
#ifdef QUICK_INSERT_HEAD
/* fastdeflate: quick_insert_string without the hash chain: the hash table's entry only
   (deflate_quick, which never follows a chain). */
Z_INTERNAL Pos QUICK_INSERT_HEAD(deflate_state *const s, uint32_t str) {
    uint8_t *strstart = s->window + str + HASH_CALC_OFFSET;
    uint32_t val, hm;
    Pos head;

    HASH_CALC_VAR_INIT;
    HASH_CALC_READ;
    HASH_CALC(HASH_CALC_VAR, val);
    HASH_CALC_VAR &= HASH_CALC_MASK;
    hm = HASH_CALC_VAR;

    head = s->head[hm];
    s->head[hm] = (Pos)str;
    return head;
}
#endif

"""
_INSERT_STRING_DOC = ("/* ===========================================================================\n"
                      " * Insert string str in the dictionary")
QUICK_HEAD_ONLY = (
    Edit("insert_string_tpl.h", _INSERT_STRING_DOC, _QUICK_HEAD_C + _INSERT_STRING_DOC),
    Edit("insert_string.c",
         "#define QUICK_INSERT_STRING  quick_insert_string\n",
         "#define QUICK_INSERT_STRING  quick_insert_string\n"
         "#define QUICK_INSERT_HEAD    quick_insert_head\n"),
    Edit("deflate.h",
         "Pos      quick_insert_string     (deflate_state *const s, uint32_t str);\n",
         "Pos      quick_insert_string     (deflate_state *const s, uint32_t str);\n"
         "Pos      quick_insert_head       (deflate_state *const s, uint32_t str);\n"),
    Edit("deflate_quick.c",
         "hash_head = quick_insert_string(s, s->strstart);",
         "hash_head = quick_insert_head(s, s->strstart);  /* fastdeflate: no prev[] */"),
)

_DEFLATE_TUNE = ("/* ========================================================================= */\n"
                 "int32_t Z_EXPORT PREFIX(deflateTune)(")
WARM_DEFLATE = (
    Edit("deflate.c", _DEFLATE_TUNE, _WARM_DEFLATE_C + _DEFLATE_TUNE),
)

#: zlib hashes 3 bytes, zlib-ng 4 (and takes no match shorter than 4 at its fast levels):
#: on zlib-ng's hash a match of 3 bytes is found only by chance, which cost up to 2.8% of
#: bytes over zlib's on binary records (varints, tags) at windows 9-11, at every level
#: from 2 to 8. A stream may ask for a hash of 3 bytes (``fastdeflate_deflate_hash3``,
#: called at rest, lasting through resets): zlib-ng's multiplicative hash on the first 3
#: bytes instead of 4, a second instance of its insert_string template, at every memLevel
#: (zlib-ng's rolling hash of level 9 needs 32 Ki entries and inserts byte by byte).
#: deflate_fast then inserts with the stream's hash functions, as deflate_slow does, and
#: takes matches of 3 bytes, as zlib's deflate_fast does.
_HASH3_C = """\
/* fastdeflate: with ``on``, the stream hashes the first 3 bytes of each position instead
   of 4 (deflate_fast then takes matches of 3); call at rest (before any input, or after a
   reset), then set the level's limits (deflateTune). Level 9's rolling hash, where it
   runs, stays. */
int32_t fastdeflate_deflate_hash3(PREFIX3(stream) *strm, int32_t on) {
    deflate_state *s = (deflate_state *)strm->state;
    s->hash3 = on ? 1u : 0u;
    lm_set_level(s, s->level);
    return s->update_hash == &update_hash3;
}

"""
_HASH3_INSTANCE = """
/* fastdeflate: the same functions on the first 3 bytes of a position (zlib's shortest
   match), for streams that ask for them (fastdeflate_deflate_hash3) */
#undef INSERT_STRING_H_
#undef HASH_CALC_READ
#undef UPDATE_HASH
#undef INSERT_STRING
#undef QUICK_INSERT_STRING
#undef QUICK_INSERT_HEAD
#if BYTE_ORDER == LITTLE_ENDIAN
#  define HASH_CALC_READ val = zng_memread_4(strstart) & 0xFFFFFFu;
#else
#  define HASH_CALC_READ val = ZSWAP32(zng_memread_4(strstart)) & 0xFFFFFFu;
#endif
#define UPDATE_HASH          update_hash3
#define INSERT_STRING        insert_string3
#define QUICK_INSERT_STRING  quick_insert_string3

#include "insert_string_tpl.h"
"""
_DEFLATE_PRIME = ("/* ========================================================================= */\n"
                  "int32_t Z_EXPORT PREFIX(deflatePrime)(")
HASH3_ON_REQUEST = (
    Edit("deflate.h",  # beside hash_size and hash_mask (HASH_PER_MEMLEVEL)
         "    unsigned int  lookahead;         /* number of valid bytes ahead in window */\n",
         "    unsigned int  hash3;             /* fastdeflate: 1: hash 3 bytes, not 4 */\n"
         "    unsigned int  lookahead;         /* number of valid bytes ahead in window */\n"),
    Edit("deflate.h",
         "Pos      quick_insert_string_roll(deflate_state *const s, uint32_t str);\n",
         "Pos      quick_insert_string_roll(deflate_state *const s, uint32_t str);\n\n"
         "uint32_t update_hash3            (uint32_t h, uint32_t val);  /* fastdeflate */\n"
         "void     insert_string3          (deflate_state *const s, uint32_t str, uint32_t count);\n"
         "Pos      quick_insert_string3    (deflate_state *const s, uint32_t str);\n"),
    Edit("insert_string.c", "#include \"insert_string_tpl.h\"\n",
         "#include \"insert_string_tpl.h\"\n" + _HASH3_INSTANCE),
    Edit("deflate.c",
         "    s->prev = alloc_bufs->prev;\n",
         "    s->prev = alloc_bufs->prev;\n"
         "    s->hash3 = 0u;  /* fastdeflate */\n"),
    Edit("deflate.c",
         "    } else {\n"
         "        s->update_hash = update_hash;\n"
         "        s->insert_string = insert_string;\n"
         "        s->quick_insert_string = quick_insert_string;\n"
         "    }\n",
         "    } else if (s->hash3) {  /* fastdeflate */\n"
         "        s->update_hash = update_hash3;\n"
         "        s->insert_string = insert_string3;\n"
         "        s->quick_insert_string = quick_insert_string3;\n"
         "    } else {\n"
         "        s->update_hash = update_hash;\n"
         "        s->insert_string = insert_string;\n"
         "        s->quick_insert_string = quick_insert_string;\n"
         "    }\n"),
    Edit("deflate.c", _DEFLATE_PRIME, _HASH3_C + _DEFLATE_PRIME),
    Edit("deflate_fast.c",
         "            hash_head = quick_insert_string(s, s->strstart);\n",
         "            hash_head = s->quick_insert_string(s, s->strstart);  /* fastdeflate */\n"),
    Edit("deflate_fast.c",
         "        if (match_len >= WANT_MIN_MATCH) {\n",
         "        if (match_len >= (s->hash3 ? STD_MIN_MATCH : WANT_MIN_MATCH)) {  /* fastdeflate */\n"),
    Edit("deflate_fast.c",
         "                insert_string(s, s->strstart, match_len);\n",
         "                s->insert_string(s, s->strstart, match_len);  /* fastdeflate */\n"),
    Edit("deflate_fast.c",
         "                quick_insert_string(s, s->strstart + 2 - STD_MIN_MATCH);\n",
         "                s->quick_insert_string(s, s->strstart + 2 - STD_MIN_MATCH);  /* fastdeflate */\n"),
)

EDITS = (HASH_PER_MEMLEVEL + INFLATE_WINDOW_PER_WBITS + TREE_BUILDER + INFLATE_LENS_ROOT_9
         + PREV_AS_ALLOCATED + PENDING_LENT + INFLATE_TABLES_LENT + WARM_DEFLATE
         + QUICK_HEAD_ONLY + HASH3_ON_REQUEST)


class PatchFailed(RuntimeError):
    """An edit's text is not found exactly once in the sources (other sources?)."""


def digest() -> str:
    """Names this set of edits (part of the build key and of the source directory)."""
    text = "\0".join(f"{e.path}\0{e.old}\0{e.new}" for e in EDITS)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def apply(root: Path) -> None:
    """Make every edit under ``root``, or raise ``PatchFailed`` and change no file."""
    texts: dict[str, str] = {}
    for edit in EDITS:
        if edit.path not in texts:
            with open(root / edit.path, encoding="utf-8", newline="") as file:
                texts[edit.path] = file.read()
        found = texts[edit.path].count(edit.old)
        if found != 1:
            raise PatchFailed(f"{edit.path}: expected the text once, found it {found} "
                              f"times: {edit.old[:60]!r}")
        texts[edit.path] = texts[edit.path].replace(edit.old, edit.new)
    for path, text in texts.items():
        with open(root / path, "w", encoding="utf-8", newline="") as file:
            file.write(text)
