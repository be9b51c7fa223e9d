# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: auto_pickle=False, embedsignature=True
# cython: freethreading_compatible=True
"""The permessage-deflate (RFC 7692) codec over zlib's C API.

Each object owns one z_stream, created on first use and reset (never re-created)
between messages, and one output buffer reused from message to message. Input is
read in place through the buffer protocol; the GIL is released around zlib calls
on large inputs; a lock per object serialises threads sharing it.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.pythread cimport (
    NOWAIT_LOCK,
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)
from libc.string cimport memcmp, memset
from libc.stdint cimport SIZE_MAX

cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX

from fastdeflate._errors import DecompressionError, MessageTooBig
from fastdeflate._params import (
    MAX_STREAMS_PER_MESSAGE as _MAX_STREAMS,
    TOO_MANY_STREAMS_MESSAGE,
    compressor_args,
    decompressor_args,
    max_size_arg,
    not_a_buffer,
)


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


cdef extern from *:
    """
    #if defined(FASTDEFLATE_BUNDLED_ZLIB_NG) && defined(ZLIBNG_VERSION)
    #define FASTDEFLATE_BUNDLED_ENGINE "zlib-ng " ZLIBNG_VERSION " (zlib-compat)"
    #else
    #define FASTDEFLATE_BUNDLED_ENGINE ""
    #endif
    """
    # Set when setup.py linked the bundled zlib-ng (FASTDEFLATE_BUNDLED_ZLIB_NG).
    const char *FASTDEFLATE_BUNDLED_ENGINE


cdef extern from *:
    """
    /* zlib-ng runs levels 3 to 6 with its "medium" strategy, whose output on small
       messages is 2-3% larger than zlib's level 6. On the bundled engine, level 6 (the
       default) runs zlib-ng's lazy matcher instead (its level 7 strategy) with zlib's
       level-5 search limits: on zlib-ng's 4-byte hash they give zlib's level-6 sizes on
       JSON, faster than "medium". deflateReset() restores the level's own limits, so they
       are set again after every reset. Other levels are zlib-ng's own. */
    #if defined(FASTDEFLATE_BUNDLED_ZLIB_NG)
    #define FD_TUNED_LEVEL(level) ((level) == 6 || (level) == Z_DEFAULT_COMPRESSION)
    #else
    #define FD_TUNED_LEVEL(level) 0
    #endif
    static int fd_deflate_tune(z_stream *strm, int level) {
        return FD_TUNED_LEVEL(level) ? deflateTune(strm, 8, 16, 32, 32) : Z_OK;
    }
    static int fd_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                               int strategy) {
        int rc = deflateInit2(strm, FD_TUNED_LEVEL(level) ? 7 : level, Z_DEFLATED,
                              window_bits, mem_level, strategy);
        return rc == Z_OK ? fd_deflate_tune(strm, level) : rc;
    }
    static int fd_deflate_reset(z_stream *strm, int level) {
        int rc = deflateReset(strm);
        return rc == Z_OK ? fd_deflate_tune(strm, level) : rc;
    }
    """
    # deflateInit2 / deflateReset, with the bundled engine's level-6 search limits.
    int fd_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                        int strategy) nogil
    int fd_deflate_reset(z_stream *strm, int level) nogil


ZLIB_VERSION = zlibVersion().decode("ascii")
# The engine in use: "zlib-ng 2.3.3 (zlib-compat)" (bundled) or "zlib <version>" (system).
ENGINE = FASTDEFLATE_BUNDLED_ENGINE.decode("ascii") or f"zlib {ZLIB_VERSION}"

cdef enum:
    # Inputs at least this large are (de)compressed with the GIL released; below
    # that, releasing and re-taking the GIL costs more than other threads gain.
    COMPRESS_NOGIL_MIN = 8192
    DECOMPRESS_NOGIL_MIN = 2048
    # Output buffers up to this size are kept for the next message; larger ones,
    # grown for a larger message, are freed after it (an idle connection keeps at most
    # this, and a large message's malloc/free costs little next to its compression).
    KEEP_BUFFER_MAX = 16384
    FIRST_BUFFER_MIN = 1024
    # zlib counts bytes in uInt: larger inputs and outputs go in slices of this size.
    MAX_SLICE = 1073741824
    # Result codes of the nogil loops (zlib's own codes are all <= 2).
    DONE = 0
    NO_MEMORY = 100
    TOO_BIG = 101
    TOO_MANY_STREAMS = 102
    TOO_BIG_INPUT_READ = 103  # TOO_BIG with all input read and the stream still open


cdef int MAX_STREAMS_PER_MESSAGE = _MAX_STREAMS

# The slice size in use: MAX_SLICE, or less in tests (_set_max_slice), so that the slicing
# of inputs and outputs past 1 GiB can be tested with small data.
cdef size_t _max_slice = MAX_SLICE


def _set_max_slice(size_t size):
    """Test hook (private): cut inputs and outputs in slices of ``size`` bytes (1 to
    1 GiB, the default) instead of 1 GiB; returns the previous size. Affects every
    object; not to be changed while another thread is in a codec call."""
    global _max_slice
    if not 0 < size <= MAX_SLICE:
        raise ValueError(f"the slice size must be in 1..{MAX_SLICE}, got {size}")
    previous, _max_slice = _max_slice, size
    return previous

cdef const unsigned char *SYNC_TAIL = <const unsigned char *>b"\x00\x00\xff\xff"


cdef voidpf _zalloc(voidpf opaque, uInt items, uInt size) noexcept nogil:
    # PyMem_Raw* is thread-safe without the GIL and visible to tracemalloc.
    return PyMem_RawMalloc(<size_t>items * size)


cdef void _zfree(voidpf opaque, voidpf address) noexcept nogil:
    PyMem_RawFree(address)


cdef extern from *:
    """
    /* CPython's output buffer blocks for zlib (pycore_blocks_output_buffer.h,
       the same in 3.10 to 3.13): each deflate() call gets the rest of a block. */
    static const size_t CPYTHON_BLOCK_SIZES[] = {
        32 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20, 16 << 20,
        16 << 20, 32 << 20, 32 << 20, 32 << 20, 32 << 20, 64 << 20, 64 << 20,
        128 << 20, 128 << 20, 256 << 20};
    #define CPYTHON_BLOCK_COUNT 17
    """
    const size_t CPYTHON_BLOCK_SIZES[]
    int CPYTHON_BLOCK_COUNT


cdef struct OutputBlocks:
    size_t left  # room left in the current block
    int index    # the next block's index in CPYTHON_BLOCK_SIZES


cdef struct OutBuffer:
    unsigned char *data
    size_t size      # bytes written
    size_t capacity  # bytes allocated


cdef int _reserve(OutBuffer *out, size_t needed, size_t ceiling) noexcept nogil:
    """Make room for ``needed`` more bytes, doubling (so growth stays linear) but
    not past ``ceiling`` total bytes unless ``needed`` itself requires it."""
    cdef size_t capacity = out.capacity
    cdef unsigned char *data
    if out.size + needed <= capacity:
        return DONE
    if capacity < FIRST_BUFFER_MIN:
        capacity = FIRST_BUFFER_MIN
    while capacity < out.size + needed:
        capacity *= 2
    if capacity > ceiling:
        capacity = ceiling if ceiling > out.size + needed else out.size + needed
    data = <unsigned char *>PyMem_RawRealloc(out.data, capacity)
    if data == NULL:
        return NO_MEMORY
    out.data = data
    out.capacity = capacity
    return DONE


cdef void _trim(OutBuffer *out) noexcept nogil:
    """Forget the content; free the buffer if a large message grew it past the cap."""
    out.size = 0
    if out.capacity > KEEP_BUFFER_MAX:
        PyMem_RawFree(out.data)
        out.data = NULL
        out.capacity = 0


cdef inline bint _inflate_failed(int rc) noexcept nogil:
    """True if inflate() found corrupt data or failed (not progress, the end or no room)."""
    return rc != Z_OK and rc != Z_BUF_ERROR and rc != Z_STREAM_END


cdef inline void _lock(PyThread_type_lock lock):
    if not PyThread_acquire_lock(lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(lock, WAIT_LOCK)


cdef inline int _refuse_second_init(bint initialised, object obj) except -1:
    """Raise if ``__init__`` already ran: parameters never change under a live stream."""
    if initialised:
        raise RuntimeError(f"{type(obj).__name__} is already initialised; create a new one")
    return 0


cdef inline int _open_input(object data, Py_buffer *view, const unsigned char **ptr,
                            size_t *size) except -1:
    """Point ``ptr``/``size`` at ``data`` in place; returns 1 if ``view`` must be released."""
    if PyBytes_CheckExact(data):
        ptr[0] = <const unsigned char *>PyBytes_AS_STRING(data)
        size[0] = <size_t>PyBytes_GET_SIZE(data)
        return 0
    if isinstance(data, str):
        raise not_a_buffer(data)
    try:
        PyObject_GetBuffer(data, view, PyBUF_SIMPLE)
    except (TypeError, BufferError):
        raise not_a_buffer(data) from None
    ptr[0] = <const unsigned char *>view.buf
    size[0] = <size_t>view.len
    return 1


cdef str _zlib_message(int code, z_stream *strm, str action):
    """The text of an error, in the stdlib zlib module's words."""
    if strm.msg != NULL:
        detail = strm.msg.decode("latin-1")
    elif code == Z_BUF_ERROR:
        detail = "incomplete or truncated stream"
    elif code == Z_STREAM_ERROR:
        detail = "inconsistent stream state"
    elif code == Z_DATA_ERROR:
        detail = "invalid input data"
    else:
        detail = "library error"
    return f"Error {code} while {action}: {detail}"


cdef class Compressor:
    """Compresses messages (or fragments of one) into permessage-deflate payloads.

    Compressor(level=6, window_bits=15, mem_level=8, strategy=0,
               no_context_takeover=False)
    """

    cdef z_stream _strm
    cdef bint _ready  # _strm initialised
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef OutBuffer _out
    cdef PyThread_type_lock _mutex
    cdef size_t _unflushed  # input since the last sync flush
    cdef int _level, _window_bits, _mem_level, _strategy
    cdef bint _no_context_takeover

    def __cinit__(self, *args, **kwargs):
        self._mutex = PyThread_allocate_lock()
        if self._mutex == NULL:
            raise MemoryError("cannot allocate a lock")

    def __init__(self, level=6, window_bits=15, mem_level=8, strategy=0,
                 no_context_takeover=False):
        args = compressor_args(level, window_bits, mem_level, strategy, no_context_takeover)
        _lock(self._mutex)
        try:
            _refuse_second_init(self._initialised, self)
            (self._level, self._window_bits, self._mem_level, self._strategy,
             self._no_context_takeover) = args
            self._initialised = True
        finally:
            PyThread_release_lock(self._mutex)

    def __dealloc__(self):
        if self._ready:
            deflateEnd(&self._strm)
        PyMem_RawFree(self._out.data)
        if self._mutex != NULL:
            PyThread_free_lock(self._mutex)

    @property
    def level(self):
        """Compression level."""
        return self._level

    @property
    def window_bits(self):
        """LZ77 window (9..15)."""
        return self._window_bits

    @property
    def mem_level(self):
        """zlib memLevel (1..9)."""
        return self._mem_level

    @property
    def strategy(self):
        """zlib strategy."""
        return self._strategy

    @property
    def no_context_takeover(self):
        """True if every message starts with an empty window."""
        return self._no_context_takeover

    cdef int _start(self) except -1:
        if self._ready:
            return 0
        memset(&self._strm, 0, sizeof(z_stream))
        self._strm.zalloc = _zalloc
        self._strm.zfree = _zfree
        rc = fd_deflate_init(&self._strm, self._level, -self._window_bits,
                             self._mem_level, self._strategy)
        if rc == Z_MEM_ERROR:
            raise MemoryError("cannot allocate the deflate state")
        if rc != Z_OK:
            raise ValueError(_zlib_message(rc, &self._strm, "initializing compressor"))
        self._ready = True
        return 0

    cdef int _drain(self, int flush, OutputBlocks *blocks, size_t bound) noexcept nogil:
        """Call deflate() until it leaves output space unused, growing the buffer.

        Each call gets the room left in the current block of CPython's output
        buffer schedule (``blocks``): zlib's output depends on where its output
        space runs out (a sync flush that fills it is repeated; level 0 sizes its
        stored blocks by it), so this is what keeps the bytes identical to the
        stdlib's. Where all the output zlib can still produce (``bound``) fits in
        less than that block, only ``bound`` is reserved: zlib cannot run out of
        space, so the bytes are the same, and a small message keeps a small buffer.
        The buffer grows one block at a time, so its size follows the output, not
        the input (a large, very compressible message costs one block).
        """
        cdef size_t room, wanted
        cdef int rc
        while True:
            if blocks.left == 0:
                blocks.left = CPYTHON_BLOCK_SIZES[blocks.index]
                if blocks.index < CPYTHON_BLOCK_COUNT - 1:
                    blocks.index += 1
            wanted = blocks.left if blocks.left < bound else bound
            if self._out.capacity - self._out.size < wanted:
                # exactly that: blocks already grow geometrically
                rc = _reserve(&self._out, wanted, self._out.size + wanted)
                if rc != DONE:
                    return rc
            room = self._out.capacity - self._out.size
            if room > blocks.left:
                room = blocks.left
            self._strm.next_out = self._out.data + self._out.size
            self._strm.avail_out = <uInt>room
            rc = deflate(&self._strm, flush)
            room -= self._strm.avail_out
            self._out.size += room
            blocks.left -= room
            if rc != Z_OK and rc != Z_BUF_ERROR:
                return rc
            if self._strm.avail_out != 0:
                return DONE

    cdef int _deflate(self, const unsigned char *data, size_t size,
                      bint sync) noexcept nogil:
        """Compress ``data`` (then sync-flush, if asked) into the output buffer.

        Mirrors the stdlib's compress() + flush(Z_SYNC_FLUSH) call for call, so the
        bytes are the same: Z_NO_FLUSH over all input (at least one call, even for
        no input), then Z_SYNC_FLUSH, each with CPython's output block schedule.
        zlib only ever runs out of space where CPython's blocks end (see _drain).
        """
        cdef size_t part, bound = SIZE_MAX
        cdef OutputBlocks blocks = OutputBlocks(0, 0)
        cdef int rc = DONE
        self._unflushed += size
        if self._unflushed < _max_slice:  # else the output space is CPython's blocks
            # all the output still to come, up to the end of the next sync flush
            bound = deflateBound(&self._strm, self._unflushed) + 64
        while rc == DONE:
            part = size if size < _max_slice else _max_slice
            self._strm.next_in = data
            self._strm.avail_in = <uInt>part
            data += part
            size -= part
            rc = self._drain(Z_NO_FLUSH, &blocks, bound)
            if size == 0:
                break
        if rc == DONE and sync:
            blocks = OutputBlocks(0, 0)
            rc = self._drain(Z_SYNC_FLUSH, &blocks, bound)
            self._unflushed = 0
        self._strm.next_in = NULL
        self._strm.avail_in = 0
        return rc

    def compress(self, data, bint fin=True, *, bint flush=True):
        """Compress ``data``: a whole message, or one fragment when ``fin`` is False.

        A whole message (``fin=True``) ends with a sync flush whose trailing
        ``00 00 ff ff`` is removed. A fragment with ``flush=True`` (default) is
        sync-flushed so the peer can decode it at once; with ``flush=False`` zlib may
        keep its output for a later call. The outputs of all calls of one message,
        concatenated, form that message's payload.
        """
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef int rc
        cdef bint sync = fin or flush
        cdef Py_ssize_t length
        cdef bint release = _open_input(data, &view, &ptr, &size)
        try:
            _lock(self._mutex)
            try:
                self._start()
                if size >= COMPRESS_NOGIL_MIN:
                    with nogil:
                        rc = self._deflate(ptr, size, sync)
                else:
                    rc = self._deflate(ptr, size, sync)
                length = <Py_ssize_t>self._out.size
                try:
                    if rc == DONE:
                        if fin and length >= 4 and memcmp(
                                self._out.data + length - 4, SYNC_TAIL, 4) == 0:
                            length -= 4
                        result = PyBytes_FromStringAndSize(<char *>self._out.data, length)
                except MemoryError:
                    rc = NO_MEMORY  # the output is lost: as if deflate had run out
                finally:
                    _trim(&self._out)
                if (fin and self._no_context_takeover) or rc != DONE:
                    self._forget()
                if rc == NO_MEMORY or rc == Z_MEM_ERROR:
                    raise MemoryError("out of memory while compressing")
                if rc != DONE:
                    raise ValueError(_zlib_message(rc, &self._strm, "compressing data"))
                return result
            finally:
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    def reset(self):
        """Forget the window and any unfinished message: the next one starts empty."""
        _lock(self._mutex)
        try:
            self._forget()
        finally:
            PyThread_release_lock(self._mutex)

    cdef void _forget(self) noexcept:
        """Reset the stream. With input not yet sync-flushed, end it instead (it is
        re-created on next use): zlib-ng 2.3.3 at level 1 keeps its open block across
        deflateReset(), and the next message would start without a block header."""
        if self._ready and self._unflushed:
            deflateEnd(&self._strm)
            self._ready = False
        elif self._ready:
            fd_deflate_reset(&self._strm, self._level)
        self._unflushed = 0


cdef class Decompressor:
    """Decompresses permessage-deflate payloads (whole messages or fragments).

    Decompressor(window_bits=15, no_context_takeover=False)
    """

    cdef z_stream _strm
    cdef bint _ready  # _strm initialised
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef OutBuffer _out
    cdef PyThread_type_lock _mutex
    cdef int _window_bits
    cdef bint _no_context_takeover
    cdef size_t _message_size  # output of the current message so far
    cdef int _streams          # deflate streams ended (BFINAL) in the current message
    cdef object _error         # None, or why the decompressor is unusable

    def __cinit__(self, *args, **kwargs):
        self._mutex = PyThread_allocate_lock()
        if self._mutex == NULL:
            raise MemoryError("cannot allocate a lock")

    def __init__(self, window_bits=15, no_context_takeover=False):
        args = decompressor_args(window_bits, no_context_takeover)
        _lock(self._mutex)
        try:
            _refuse_second_init(self._initialised, self)
            self._window_bits, self._no_context_takeover = args
            self._initialised = True
        finally:
            PyThread_release_lock(self._mutex)

    def __dealloc__(self):
        if self._ready:
            inflateEnd(&self._strm)
        PyMem_RawFree(self._out.data)
        if self._mutex != NULL:
            PyThread_free_lock(self._mutex)

    @property
    def window_bits(self):
        """LZ77 window (8..15)."""
        return self._window_bits

    @property
    def no_context_takeover(self):
        """True if the peer starts every message with an empty window."""
        return self._no_context_takeover

    cdef int _start(self) except -1:
        if self._ready:
            return 0
        memset(&self._strm, 0, sizeof(z_stream))
        self._strm.zalloc = _zalloc
        self._strm.zfree = _zfree
        rc = inflateInit2(&self._strm, -self._window_bits)
        if rc == Z_MEM_ERROR:
            raise MemoryError("cannot allocate the inflate state")
        if rc != Z_OK:
            raise ValueError(_zlib_message(rc, &self._strm, "initializing decompressor"))
        self._ready = True
        return 0

    cdef int _restart(self) noexcept nogil:
        """After a block with BFINAL set: a new stream over the same window.

        inflateResetKeep() keeps the window in place (O(1)); the number of streams in
        one message is bounded all the same, as the fallback must copy its window.
        """
        self._streams += 1
        if self._streams > MAX_STREAMS_PER_MESSAGE:
            return TOO_MANY_STREAMS
        rc = inflateResetKeep(&self._strm)
        return DONE if rc == Z_OK else rc

    cdef int _inflate(self, const unsigned char *data, size_t size,
                      Py_ssize_t limit) noexcept nogil:
        """Inflate ``data`` into the output buffer; ``limit`` < 0 means no limit.

        Output never grows past what the limit allows plus one byte: that byte is
        how an oversized message is detected without inflating it further.
        """
        cdef z_stream *strm = &self._strm
        cdef size_t slice_size, room, allowed, produced
        cdef int rc
        if limit >= 0 and self._message_size > <size_t>limit:
            return TOO_BIG  # an earlier fragment already passed this (tighter) limit
        while True:
            slice_size = size if size < _max_slice else _max_slice
            strm.next_in = data
            strm.avail_in = <uInt>slice_size
            data += slice_size
            size -= slice_size
            while True:
                allowed = SIZE_MAX
                if limit >= 0:
                    allowed = <size_t>limit - self._message_size + 1
                if self._out.size == self._out.capacity:
                    room = self._out.capacity if self._out.capacity else 4 * slice_size + 64
                    if room > allowed:
                        room = allowed
                    rc = _reserve(&self._out, room,
                                  SIZE_MAX if limit < 0 else self._out.size + allowed)
                    if rc != DONE:
                        return rc
                room = self._out.capacity - self._out.size
                if room > allowed:
                    room = allowed
                if room > _max_slice:
                    room = _max_slice
                strm.next_out = self._out.data + self._out.size
                strm.avail_out = <uInt>room
                rc = inflate(strm, Z_SYNC_FLUSH)
                produced = room - strm.avail_out
                self._out.size += produced
                self._message_size += produced
                if _inflate_failed(rc):
                    return rc  # corrupt data found in the same call wins, as in stdlib zlib
                if limit >= 0 and self._message_size > <size_t>limit:
                    if rc != Z_STREAM_END and strm.avail_in == 0:
                        return self._read_on_without_output(data, size)
                    return TOO_BIG
                if rc == Z_STREAM_END:
                    rc = self._restart()
                    if rc != DONE:
                        return rc
                    if strm.avail_in == 0:
                        break
                    continue
                if rc == Z_BUF_ERROR and strm.avail_in == 0:
                    break  # all input consumed, nothing more to write
                if strm.avail_in == 0 and strm.avail_out != 0:
                    break
            if size == 0:
                break
        strm.next_in = NULL
        strm.avail_in = 0
        return DONE

    cdef int _inflate_input(self, const unsigned char *data, size_t size, bint fin,
                            Py_ssize_t limit) noexcept nogil:
        """Inflate one call's input, then the sync tail if ``fin`` (never copied)."""
        cdef int rc = self._inflate(data, size, limit)
        if fin and rc == DONE:
            rc = self._inflate(SYNC_TAIL, 4, limit)
        elif fin and rc == TOO_BIG_INPUT_READ:
            rc = self._read_on_without_output(SYNC_TAIL, 4)
        return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc

    cdef int _read_on_without_output(self, const unsigned char *data,
                                     size_t size) noexcept nogil:
        """The message passed max_size as zlib's input ran out: read the rest of the
        input (the next slices, or the tail) with no room for output. After its output
        is full zlib parses on until it would write, so this finds what one pass over
        payload + tail finds (the fallback's way, and the stock libraries'): a corrupt
        block header there is DecompressionError. TOO_BIG_INPUT_READ if all was read.
        """
        cdef z_stream *strm = &self._strm
        cdef unsigned char nowhere
        cdef size_t part
        cdef int rc = TOO_BIG_INPUT_READ
        while size != 0:
            part = size if size < _max_slice else _max_slice
            strm.next_in = data
            strm.avail_in = <uInt>part
            strm.next_out = &nowhere
            strm.avail_out = 0
            rc = inflate(strm, Z_SYNC_FLUSH)
            if _inflate_failed(rc):
                break
            if rc == Z_STREAM_END or strm.avail_in != 0:
                rc = TOO_BIG  # zlib stopped where it would write (or at a stream's end)
                break
            rc = TOO_BIG_INPUT_READ
            data += part
            size -= part
        strm.next_in = NULL
        strm.avail_in = 0
        strm.next_out = NULL
        return rc

    def decompress(self, data, bint fin=True, max_size=None):
        """Decompress a whole message's payload, or one fragment when ``fin`` is False.

        ``max_size`` bounds the size of the whole message across its fragments:
        decompression stops as soon as it would be passed, with MessageTooBig.
        Corrupt data raises DecompressionError. After either (or a MemoryError) the
        decompressor refuses data until reset().
        """
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef int rc
        cdef Py_ssize_t limit = -1
        cdef bint release
        if max_size is not None:
            if type(max_size) is not int or max_size < 0:
                max_size_arg(max_size)  # raises the documented TypeError / ValueError
            limit = min(max_size, PY_SSIZE_T_MAX // 2)
        release = _open_input(data, &view, &ptr, &size)
        try:
            _lock(self._mutex)
            try:
                if self._error is not None:
                    raise DecompressionError(
                        f"decompressor unusable after an earlier error ({self._error}); "
                        "call reset()")
                self._start()
                if size >= DECOMPRESS_NOGIL_MIN:
                    with nogil:
                        rc = self._inflate_input(ptr, size, fin, limit)
                else:
                    rc = self._inflate_input(ptr, size, fin, limit)
                try:
                    if rc == DONE:
                        result = PyBytes_FromStringAndSize(
                            <char *>self._out.data, <Py_ssize_t>self._out.size)
                except MemoryError:
                    rc = NO_MEMORY  # the output is lost: refused until reset() below
                finally:
                    _trim(&self._out)
                if rc == DONE:
                    if fin:
                        self._message_size = 0
                        self._streams = 0
                        if self._no_context_takeover:
                            inflateReset(&self._strm)
                    return result
                if rc == NO_MEMORY or rc == Z_MEM_ERROR:
                    self._error = "out of memory"
                    raise MemoryError("out of memory while decompressing")
                if rc == TOO_BIG:
                    self._error = f"message exceeds max_size={max_size}"
                    raise MessageTooBig(self._error)
                if rc == TOO_MANY_STREAMS:
                    self._error = TOO_MANY_STREAMS_MESSAGE
                    raise DecompressionError(self._error)
                self._error = "invalid compressed data: " + _zlib_message(
                    rc, &self._strm, "decompressing data")
                raise DecompressionError(self._error)
            finally:
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    def reset(self):
        """Forget the window, any unfinished message and any earlier error."""
        _lock(self._mutex)
        try:
            if self._ready:
                inflateReset(&self._strm)
            self._message_size = 0
            self._streams = 0
            self._error = None
        finally:
            PyThread_release_lock(self._mutex)
