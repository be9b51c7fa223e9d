# Basics every part uses: sizes and result codes, the GIL and slice knobs, zlib's
# allocator hooks, output buffers, locks, input in place and zlib's error text.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

cdef enum:
    # Inputs at least this large are (de)compressed with the GIL released; below
    # that, releasing and re-taking the GIL costs more than other threads gain.
    COMPRESS_NOGIL_MIN = 8192
    DECOMPRESS_NOGIL_MIN = 2048
    # Outputs at least this large are copied into their bytes object with the GIL
    # released: a 4 MB copy into fresh pages takes milliseconds, which an event loop
    # waiting for the GIL would otherwise wait too (a worker thread's output).
    COPY_NOGIL_MIN = 262144
    # Output buffers up to this size are kept for the next message; larger ones,
    # grown for a larger message, are freed after it (an idle connection keeps at most
    # this, and a large message's malloc/free costs little next to its compression).
    KEEP_BUFFER_MAX = 16384
    # A decompressor's: its first output block (32 KiB, OUTPUT_BLOCKS) is kept.
    KEEP_INFLATE_BUFFER_MAX = 32768
    FIRST_BUFFER_MIN = 1024
    # zlib counts bytes in uInt: larger inputs and outputs go in slices of this size.
    MAX_SLICE = 1073741824
    # Result codes of the nogil loops (zlib's own codes are all <= 2).
    DONE = 0
    NO_MEMORY = 100
    TOO_BIG = 101
    TOO_MANY_STREAMS = 102
    TOO_BIG_INPUT_READ = 103  # TOO_BIG with all input read and the stream still open
    WHOLE_DECLINED = 104  # the message engine did not decode the message: zlib does
    # ISA-L counts bytes in 32 bits: messages whose input or output pass this go to zlib.
    WHOLE_MAX_ROOM = 1073741824


cdef int MAX_STREAMS_PER_MESSAGE = _MAX_STREAMS
# The output blocks of one call of the stdlib zlib module's decompress() (CPython's
# Include/internal/pycore_blocks_output_buffer.h, the same since 3.10): one inflate()
# call each; Decompressor._block_room.
cdef size_t[17] OUTPUT_BLOCKS = [32768, 65536, 262144, 1048576, 4194304, 8388608,
                                 16777216, 16777216, 33554432, 33554432, 33554432,
                                 33554432, 67108864, 67108864, 134217728, 134217728,
                                 268435456]
cdef int OUTPUT_BLOCKS_COUNT = 17
# Inputs at least this large are (de)compressed with the GIL released: the enum's sizes,
# or 0 for every call in tests (_set_release_gil_always), so that threads interleave
# inside the engines on small messages too.
cdef size_t _compress_nogil_min = COMPRESS_NOGIL_MIN
cdef size_t _decompress_nogil_min = DECOMPRESS_NOGIL_MIN
cdef size_t _copy_nogil_min = COPY_NOGIL_MIN


# The slice size in use: MAX_SLICE, or less in tests (_set_max_slice), so that the slicing
# of inputs and outputs past 1 GiB can be tested with small data.
cdef size_t _max_slice = MAX_SLICE


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


cdef void _trim(OutBuffer *out, size_t keep=KEEP_BUFFER_MAX) noexcept nogil:
    """Forget the content; free the buffer if a large message grew it past ``keep``."""
    out.size = 0
    if out.capacity > keep:
        PyMem_RawFree(out.data)
        out.data = NULL
        out.capacity = 0


cdef object _bytes_from(const unsigned char *data, size_t size):
    """A bytes object holding ``size`` bytes copied from ``data`` (which the caller
    owns): a large one is allocated with the GIL and filled without it."""
    cdef char *into
    if size < _copy_nogil_min:
        return PyBytes_FromStringAndSize(<const char *>data, <Py_ssize_t>size)
    result = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>size)
    into = PyBytes_AS_STRING(result)  # (nobody else holds it yet)
    with nogil:
        _at_nogil(GATE_OUTPUT_COPY)  # (tests only: prove the GIL is released here)
        memcpy(into, data, size)
    return result


cdef inline bint _inflate_failed(int rc) noexcept nogil:
    """True if inflate() found corrupt data or failed (not progress, the end or no room)."""
    return rc != Z_OK and rc != Z_BUF_ERROR and rc != Z_STREAM_END


# The locks (extension/lock.h): pthread mutexes where pthreads exist (a PyThread lock
# reads the clock at every acquire on CPython 3.11-3.12), PyThread locks on Windows and
# in a build with FASTDEFLATE_LOCKS=pythread.
cdef extern from "extension/lock.h":
    ctypedef void *fd_lock_t
    ctypedef struct fd_lock_cell:
        pass
    const char *FD_LOCKS
    fd_lock_t fd_lock_new() noexcept
    void fd_lock_free(fd_lock_t lock) noexcept
    fd_lock_t fd_lock_in(fd_lock_cell *cell) noexcept
    void fd_lock_out(fd_lock_t lock) noexcept
    bint fd_lock_try(fd_lock_t lock) noexcept
    void fd_lock_wait(fd_lock_t lock) noexcept nogil
    void fd_unlock(fd_lock_t lock) noexcept nogil
    void *fd_peek(void **p) noexcept nogil
    void fd_poke(void **p, void *v) noexcept nogil

#: Which locks this build uses: "pthread" or "pythread".
LOCKS = FD_LOCKS.decode("ascii")


cdef inline void _lock(fd_lock_t lock):
    """Take ``lock``, waiting for it without the GIL if another thread holds it."""
    if not fd_lock_try(lock):
        with nogil:
            fd_lock_wait(lock)


cdef inline void _unlock(fd_lock_t lock) noexcept nogil:
    fd_unlock(lock)


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
