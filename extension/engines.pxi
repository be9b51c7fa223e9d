# The engines as the codec sees them: zlib's C API, and the seam (extension/engine/seam.h)
# through which the codec calls whichever engine runs (fd_deflate_init, fd_deflate, ...,
# fd_inflate_whole); the engines' names (ENGINE, INFLATE_ENGINE) and engines().
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef extern from "zlib.h" nogil:
    ctypedef unsigned char Bytef
    ctypedef unsigned int uInt
    ctypedef unsigned long uLong
    ctypedef void *voidpf
    ctypedef voidpf (*alloc_func)(voidpf opaque, uInt items, uInt size)
    ctypedef void (*free_func)(voidpf opaque, voidpf address)

    ctypedef struct z_stream:
        const Bytef *next_in
        uInt avail_in
        Bytef *next_out
        uInt avail_out
        char *msg
        int data_type  # inflate: bits pending + 64 last block + 128 between blocks + ...
        alloc_func zalloc
        free_func zfree
        voidpf opaque

    int Z_OK, Z_STREAM_END, Z_NEED_DICT, Z_BUF_ERROR, Z_MEM_ERROR
    int Z_DATA_ERROR, Z_STREAM_ERROR, Z_VERSION_ERROR
    int Z_NO_FLUSH, Z_SYNC_FLUSH

    const char *zlibVersion()
    int deflate(z_stream *strm, int flush)
    int deflateEnd(z_stream *strm)
    uLong deflateBound(z_stream *strm, uLong sourceLen)
    int inflateInit2(z_stream *strm, int windowBits)
    int inflate(z_stream *strm, int flush)
    int inflateReset(z_stream *strm)
    int inflateResetKeep(z_stream *strm)  # undocumented but exported: keeps the window
    int inflateEnd(z_stream *strm)
    int deflateSetDictionary(z_stream *strm, const Bytef *dictionary, uInt dictLength)
    int inflateSetDictionary(z_stream *strm, const Bytef *dictionary, uInt dictLength)


cdef extern from "extension/engine/seam.h":
    # The C side of the engines is in extension/engine/: seam.h (which engine runs, and
    # the calls below on either), zlib_ng.h, isal_deflate.h, isal_inflate.h.
    # Whether zlib can give a stream's window back (deflateGetDictionary, zlib >= 1.2.9):
    # without it an object is never parked (each keeps its own stream).
    const bint FD_CAN_PARK
    int fd_deflate_get_dictionary(z_stream *strm, Bytef *dictionary, uInt *dictLength) nogil
    int fd_inflate_get_dictionary(z_stream *strm, Bytef *dictionary, uInt *dictLength) nogil
    # Set when setup.py linked the bundled zlib-ng (FASTDEFLATE_BUNDLED_ZLIB_NG).
    const char *FASTDEFLATE_BUNDLED_ENGINE
    const char *FD_ISAL_VERSION_STRING
    const bint FD_ISAL
    # Which engine runs a level: the ISA-L level, or 0 (zlib).
    int fd_deflate_engine(int level, int window_bits, int mem_level, int strategy) nogil
    # deflateInit2 / deflateReset, with that engine's strategy and limits per level.
    int fd_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                        int strategy) nogil
    int fd_deflate_reset(z_stream *strm, int level, int window_bits, int mem_level) nogil
    int fd_deflate_restore(z_stream *strm, int level, int window_bits, int mem_level,
                           const Bytef *window, uInt size) nogil
    # The same calls on either engine (a stream's engine is known by its state).
    int fd_deflate(z_stream *strm, int flush) nogil
    int fd_deflate_end(z_stream *strm) nogil
    uLong fd_deflate_bound(z_stream *strm, uLong size) nogil
    int fd_deflate_set_dictionary(z_stream *strm, const Bytef *window, uInt size) nogil
    int fd_deflate_window(z_stream *strm, Bytef *window, uInt *size) nogil
    # A stream's scratch: a compressor's pending buffer, a decompressor's code tables.
    # The bytes it needs lent (0: it keeps its own, as on a system zlib).
    size_t fd_scratch_size(z_stream *strm, bint inflating) nogil
    # Its scratch now (lent), or NULL.
    unsigned char *fd_scratch_of(z_stream *strm, bint inflating) nogil
    void fd_lend_scratch(z_stream *strm, bint inflating, unsigned char *buf) nogil
    # Takes it back if the stream is at rest (no pending output, no open block's symbols;
    # a decompressor between blocks); NULL otherwise.
    unsigned char *fd_take_scratch(z_stream *strm, bint inflating) nogil
    # Reads, in address order, what a compressor's next match search uses (its history,
    # hash chains and table: 160 KiB at window 15 / memLevel 8), so that the search finds
    # it in cache instead of missing on each chain link (bundled zlib-ng; a system zlib's
    # state is private: nothing there).
    void fd_warm_deflate(z_stream *strm) nogil
    # Whole messages decoded after the window by the message engine (ISA-L), where one is
    # bundled (see inflate_whole.pxi): its state's size, and one message (0: done, 1: the
    # output room ran out, 2: declined: zlib decodes it).
    const bint FD_WHOLE_MESSAGES
    size_t fd_whole_inflater_size() nogil
    int fd_inflate_whole(void *inflater, const unsigned char *data, size_t size,
                         bint has_tail, unsigned char *buf, size_t hist_len, size_t room,
                         int window_bits, size_t *produced) nogil


ZLIB_VERSION = zlibVersion().decode("ascii")
# The engine in use: "zlib-ng 2.3.3 (zlib-compat)" (bundled) or "zlib <version>" (system).
ENGINE = FASTDEFLATE_BUNDLED_ENGINE.decode("ascii") or f"zlib {ZLIB_VERSION}"
# The second bundled engine, which runs level 1 (see engines()): "ISA-L 2.32.1" (from
# ISA-L's own isal_api.h) or "".
_ISAL = FD_ISAL_VERSION_STRING.decode("ascii")
#: What decompresses: ISA-L whole messages (those it decodes as zlib does), zlib the rest.
INFLATE_ENGINE = f"{_ISAL} (whole messages), {ENGINE} (the rest)" if FD_ISAL else ENGINE


def engines(window_bits=15, mem_level=8, strategy=0):
    """Which engine compresses at each level (-1..9) with these parameters.

    ``{level: "zlib-ng 2.3.3 (zlib-compat)", ...}``: the bundled ISA-L
    (``"ISA-L 2.32.1 level 1"``) runs level 1 with the default strategy where its
    state is no larger than stock zlib's (window 15 and memLevel 8, say), zlib-ng the
    rest; a system zlib runs every level. Every level gives the same bytes on every
    x86-64 CPU with SSE4.2 (docs/explanation/engine.md).
    """
    cdef int level, isal_level
    _, window_bits, mem_level, strategy, _ = compressor_args(
        6, window_bits, mem_level, strategy, False)
    result = {}
    for level in range(-1, 10):
        isal_level = fd_deflate_engine(level, window_bits, mem_level, strategy)
        result[level] = f"{_ISAL} level {isal_level}" if isal_level else ENGINE
    return result
