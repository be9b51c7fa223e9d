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
from cpython.ref cimport Py_REFCNT
from cpython.time cimport PyTime_MonotonicRaw, PyTime_t
from cpython.weakref cimport PyWeakref_NewRef
from cpython.pythread cimport (
    PyThread_get_thread_ident,
    NOWAIT_LOCK,
    WAIT_LOCK,
    PyThread_acquire_lock,
    PyThread_allocate_lock,
    PyThread_free_lock,
    PyThread_release_lock,
    PyThread_type_lock,
)
from libc.string cimport memcmp, memcpy, memmove, memset
from libc.limits cimport UINT_MAX
from libc.stdint cimport SIZE_MAX

cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX

from fastdeflate._errors import DecompressionError, DeflateError, MessageTooBig
import os
import threading

from fastdeflate._params import (
    MAX_STREAMS_PER_MESSAGE as _MAX_STREAMS,
    TOO_MANY_STREAMS_MESSAGE,
    compressor_args,
    DEFAULT_LIVE_STATES,
    DEFAULT_PARK_AFTER,
    decompressor_args,
    inflate_arg,
    live_states_arg,
    max_size_arg,
    not_a_buffer,
    park_after_arg,
    tail_arg,
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


cdef extern from *:
    """
    /* deflateGetDictionary() came with zlib 1.2.9, inflateGetDictionary() with 1.2.7.1
       (zlib-ng has both). Without them an object cannot give its window back, so it is
       never parked: each keeps its own stream, as before parking existed. */
    #if defined(ZLIBNG_VERSION) || ZLIB_VERNUM >= 0x1290
    #define FD_CAN_PARK 1
    #define fd_deflate_get_dictionary deflateGetDictionary
    #define fd_inflate_get_dictionary inflateGetDictionary
    #else
    #define FD_CAN_PARK 0
    static int fd_deflate_get_dictionary(z_stream *s, Bytef *d, uInt *n) {
        return Z_STREAM_ERROR; }
    static int fd_inflate_get_dictionary(z_stream *s, Bytef *d, uInt *n) {
        return Z_STREAM_ERROR; }
    #endif
    """
    const bint FD_CAN_PARK
    int fd_deflate_get_dictionary(z_stream *strm, Bytef *dictionary, uInt *dictLength) nogil
    int fd_inflate_get_dictionary(z_stream *strm, Bytef *dictionary, uInt *dictLength) nogil


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
    /* The level a user picks is a promise about bytes: on the bundled engine every level
       runs zlib's own strategy (fast or lazy matching) and search limits on zlib-ng's
       matchers, so that its output stays about zlib's size at that level. zlib-ng's own
       level 1 ("quick": one probe, no chain) sent 16-45% more than zlib's level 1, and
       its levels 3-6 ("medium") up to 10% more; levels 7-9 are zlib's already. Level 6
       (the default) runs zlib's level-5 limits: on zlib-ng's 4-byte hash they give
       zlib's level-6 sizes, faster, except on the smallest hash tables (memLevel 1-2),
       where zlib's level-6 limits do. deflateReset() restores the engine level's own
       limits, so they are set again after every reset. tests/test_sizes.py checks the
       sizes over every level, window and memLevel. */
    #if defined(FASTDEFLATE_BUNDLED_ZLIB_NG)
    #define FD_TUNES 1
    #else
    #define FD_TUNES 0
    #endif
    typedef struct { int engine_level, good, lazy, nice, chain; } fd_level_config;
    static const fd_level_config FD_LEVELS[10] = {
        {0, 0, 0, 0, 0},         /* 0: stored, zlib-ng's own */
        {2, 4, 4, 8, 4},         /* 1: zlib's level 1 (fast) */
        {2, 4, 5, 16, 8},        /* 2: zlib's level 2 (fast) */
        {2, 4, 6, 32, 32},       /* 3: zlib's level 3 (fast) */
        {7, 4, 4, 16, 16},       /* 4: zlib's level 4 (lazy) */
        {7, 8, 16, 32, 32},      /* 5: zlib's level 5 (lazy) */
        {7, 8, 16, 32, 32},      /* 6: zlib's level-5 limits, lazy */
        {7, 0, 0, 0, 0},         /* 7-9: zlib-ng's own, which are zlib's */
        {8, 0, 0, 0, 0},
        {9, 0, 0, 0, 0},
    };
    static fd_level_config fd_level(int level, int mem_level) {
        fd_level_config c = FD_LEVELS[level < 0 ? 6 : level];
        if ((level == 6 || level < 0) && mem_level <= 2) {
            c.nice = c.chain = 128;  /* zlib's level-6 limits on the smallest tables */
        }
        return c;
    }
    static int fd_deflate_tune(z_stream *strm, int level, int mem_level) {
        fd_level_config c = fd_level(level, mem_level);
        return FD_TUNES && c.chain ? deflateTune(strm, c.good, c.lazy, c.nice, c.chain) : Z_OK;
    }
    /* ISA-L (igzip), bundled beside zlib-ng, runs level 1 where it is the fastest at
       zlib's bytes (see fd_isal_level: levels 2-3 went back to zlib-ng) and its state is
       no larger than stock zlib's for the parameters: a stream is a z_stream whose
       ``state`` is an fd_isal (marked in ``reserved``) and every deflate call below
       dispatches on it. ISA-L has no strategies: Z_FILTERED and the others stay on
       zlib-ng. */
    #if defined(FASTDEFLATE_BUNDLED_ISAL)
    #include "igzip_lib.h"
    #define FD_ISAL 1
    #define FD_ISAL_MAGIC 0x4953414CUL
    typedef struct {
        struct isal_zstream s;
        int window_bits;
    } fd_isal;
    /* The stream, then its level buffer (hash table and a token buffer of 16 Ki tokens:
       ISA-L's "small"; its default 64 Ki only makes blocks longer, for 192 KiB more). */
    #define FD_ISAL_HEAD ((sizeof(fd_isal) + 63) & ~(size_t)63)
    static const size_t FD_ISAL_BUF[4] = {0, ISAL_DEF_LVL1_SMALL, ISAL_DEF_LVL2_SMALL,
                                          ISAL_DEF_LVL3_SMALL};
    static inline fd_isal *fd_isal_of(z_stream *strm) {
        return strm->reserved == FD_ISAL_MAGIC ? (fd_isal *)(void *)strm->state : NULL;
    }
    /* ISA-L's x86-64 code returns with the upper halves of the vector registers in use
       (no vzeroupper): every SSE instruction after it in the thread then pays for that
       (stock zlib's compression ran 8-9% slower in a process that had run it once).
       Cleared after each call, where the CPU has AVX. */
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static void fd_after_isal(void) {
        if (__builtin_cpu_supports("avx"))
            __asm__ volatile("vzeroupper" ::: "memory");
    }
    #else
    static void fd_after_isal(void) { }
    #endif
    /* Which ISA-L: its own version macros (isal_api.h, ISA-L >= 2.32), which must say
       what the build read from the same sources (FASTDEFLATE_ISAL_VERSION_NUM) and no
       older than the minimum (buildtools/isal.py, MINIMUM_VERSION); an ISA-L without
       them (< 2.32, refused by the build) is named by the build's string. */
    #if defined(__has_include)
    #if __has_include("isal_api.h")
    #include "isal_api.h"
    #endif
    #endif
    #if defined(ISAL_VERSION_STR) && defined(ISAL_VERSION)
    #if defined(FASTDEFLATE_ISAL_VERSION_NUM) && ISAL_VERSION != FASTDEFLATE_ISAL_VERSION_NUM
    #error "isal_api.h is not the ISA-L release the build read (FASTDEFLATE_ISAL_VERSION)"
    #endif
    #if defined(FASTDEFLATE_ISAL_MINIMUM) && ISAL_VERSION < FASTDEFLATE_ISAL_MINIMUM
    #error "ISA-L older than buildtools/isal.py's MINIMUM_VERSION"
    #endif
    #define FD_ISAL_VERSION_STRING "ISA-L " ISAL_VERSION_STR
    #else
    #define FD_ISAL_VERSION_STRING "ISA-L " FASTDEFLATE_ISAL_VERSION
    #endif
    /* Inflate: a whole message decoded by ISA-L after the window, which the caller puts
       right before the output (buildtools/isal.py adds the call to ISA-L). */
    int fastdeflate_isal_inflate_message(struct inflate_state *state, uint32_t hist_len,
                                         uint32_t hist_bits, int has_tail);
    #define FD_ISAL_MESSAGE_DONE 100
    /* A whole message is decoded without ISA-L's 64 KiB buffers of its own (tmp_in_buffer,
       tmp_out_buffer: its stateful inflate's, at the end of its state), so they are not
       allocated: 21 KiB instead of 85 KiB. */
    static size_t fd_isal_inflater_size(void) {
        return offsetof(struct inflate_state, tmp_in_buffer);
    }
    /* 0: the message is decoded and the stream is between messages as zlib's would be;
       1: the output room ran out; 2: anything else (corrupt data, a final block, input
       ending elsewhere than between blocks): zlib decodes the message instead. */
    static int fd_isal_inflate(void *inflater, const unsigned char *in, size_t in_size,
                               int has_tail, unsigned char *buf, size_t hist_len,
                               size_t room, int window_bits, size_t *produced) {
        struct inflate_state *s = (struct inflate_state *)inflater;
        int rc;
        s->next_in = (uint8_t *)in;
        s->avail_in = (uint32_t)in_size;
        s->next_out = buf + hist_len;
        s->avail_out = (uint32_t)room;
        rc = fastdeflate_isal_inflate_message(s, (uint32_t)hist_len, (uint32_t)window_bits,
                                              has_tail);
        fd_after_isal();
        *produced = (size_t)(s->next_out - (buf + hist_len));
        return rc == FD_ISAL_MESSAGE_DONE ? 0 : rc == ISAL_OUT_OVERFLOW ? 1 : 2;
    }
    #else
    #define FD_ISAL 0
    #define FD_ISAL_VERSION_STRING ""
    static size_t fd_isal_inflater_size(void) { return 0; }
    static int fd_isal_inflate(void *inflater, const unsigned char *in, size_t in_size,
                               int has_tail, unsigned char *buf, size_t hist_len,
                               size_t room, int window_bits, size_t *produced) {
        (void)inflater; (void)in; (void)in_size; (void)has_tail; (void)buf;
        (void)hist_len; (void)room; (void)window_bits;
        *produced = 0;
        return 2;
    }
    #endif
    /* Stock zlib's deflate state for these parameters (deflate.c: window, prev, head,
       pending buffer and the state itself). */
    static size_t fd_stock_deflate_size(int window_bits, int mem_level) {
        size_t w = (size_t)1 << window_bits;
        return 4 * w + ((size_t)2 << (mem_level + 7)) + ((size_t)4 << (mem_level + 6)) + 5952;
    }
    /* The ISA-L level that runs zlib's ``level`` with these parameters, or 0: zlib-ng.
       With 8 KiB to spare, for what a compressor holds beside its state (at window 15 /
       memLevel 6 ISA-L's level-1 state is stock's size to within 1%: zlib-ng runs).
       Level 1 only (issue 29). ISA-L's level 3 finds other matches on each kind of x86-64
       CPU (its AVX2 and AVX-512 matchers differ from each other and from the C one that
       CPUs without AVX2 run, which also sent 1.08x stock's level-3 bytes), so the same
       message gave other bytes on another machine; and on indented JSON, HTML and text
       (benchmarks/fdbench/corpus.py) ISA-L's levels 2 and 3 sent up to 1.11x and 1.13x
       stock's bytes at those levels. zlib-ng runs them, with zlib's limits (FD_LEVELS):
       the same bytes on every CPU. docs/engine.md has the figures. */
    static int fd_isal_level(int level, int window_bits, int mem_level, int strategy) {
    #if FD_ISAL
        if (level != 1 || strategy != Z_DEFAULT_STRATEGY)
            return 0;
        if (FD_ISAL_HEAD + FD_ISAL_BUF[level] + 8192
                > fd_stock_deflate_size(window_bits, mem_level))
            return 0;
        return level;
    #else
        (void)level; (void)window_bits; (void)mem_level; (void)strategy;
        return 0;
    #endif
    }
    static size_t fd_isal_state_size(int isal_level) {
    #if FD_ISAL
        return isal_level ? FD_ISAL_HEAD + FD_ISAL_BUF[isal_level] : 0;
    #else
        (void)isal_level;
        return 0;
    #endif
    }
    static int fd_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                               int strategy) {
    #if FD_ISAL
        int isal_level = fd_isal_level(level, -window_bits, mem_level, strategy);
        if (isal_level) {
            fd_isal *x = (fd_isal *)strm->zalloc(strm->opaque, 1,
                                                 (uInt)fd_isal_state_size(isal_level));
            if (x == NULL)
                return Z_MEM_ERROR;
            isal_deflate_init(&x->s);
            x->s.level = (uint32_t)isal_level;
            x->s.level_buf = (uint8_t *)x + FD_ISAL_HEAD;
            x->s.level_buf_size = (uint32_t)FD_ISAL_BUF[isal_level];
            x->s.hist_bits = (uint16_t)-window_bits;
            x->window_bits = -window_bits;
            strm->state = (struct internal_state *)(void *)x;
            strm->reserved = FD_ISAL_MAGIC;
            strm->msg = NULL;
            strm->total_in = strm->total_out = 0;
            return Z_OK;
        }
    #endif
        int rc = deflateInit2(strm, FD_TUNES ? fd_level(level, mem_level).engine_level : level,
                              Z_DEFLATED, window_bits, mem_level, strategy);
        return rc == Z_OK ? fd_deflate_tune(strm, level, mem_level) : rc;
    }
    /* deflate() on either engine. ISA-L's is driven to zlib's contract: it returns
       with all input taken or no output space left, and a sync flush finished unless
       the space ran out. */
    static int fd_deflate(z_stream *strm, int flush) {
    #if FD_ISAL
        fd_isal *x = fd_isal_of(strm);
        if (x != NULL) {
            struct isal_zstream *s = &x->s;
            uInt in_before = strm->avail_in, out_before = strm->avail_out;
            uint32_t in_was, out_was;
            s->next_in = (uint8_t *)strm->next_in;
            s->avail_in = strm->avail_in;
            s->next_out = strm->next_out;
            s->avail_out = strm->avail_out;
            s->flush = flush == Z_NO_FLUSH ? NO_FLUSH : SYNC_FLUSH;
            s->end_of_stream = 0;
            do {
                in_was = s->avail_in;
                out_was = s->avail_out;
                if (isal_deflate(s) != COMP_OK) {
                    fd_after_isal();
                    strm->msg = (char *)"ISA-L refused the deflate call";
                    return Z_STREAM_ERROR;
                }
            } while (s->avail_out > 0 && (s->avail_in > 0 || (flush != Z_NO_FLUSH
                         && s->internal_state.state != ZSTATE_NEW_HDR))
                     && (s->avail_in != in_was || s->avail_out != out_was));
            fd_after_isal();
            strm->next_in = s->next_in;
            strm->avail_in = s->avail_in;
            strm->next_out = s->next_out;
            strm->avail_out = s->avail_out;
            strm->total_in += in_before - s->avail_in;
            strm->total_out += out_before - s->avail_out;
            if (s->avail_out > 0 && s->avail_in > 0) {
                strm->msg = (char *)"ISA-L stopped before the end of its input";
                return Z_STREAM_ERROR;
            }
            return out_before == s->avail_out && in_before == s->avail_in ? Z_BUF_ERROR : Z_OK;
        }
    #endif
        return deflate(strm, flush);
    }
    static int fd_deflate_end(z_stream *strm) {
    #if FD_ISAL
        fd_isal *x = fd_isal_of(strm);
        if (x != NULL) {
            strm->zfree(strm->opaque, x);
            strm->state = NULL;
            strm->reserved = 0;
            return Z_OK;
        }
    #endif
        return deflateEnd(strm);
    }
    /* At most this much output for ``size`` more input up to a sync flush: zlib's bound,
       or for ISA-L its stored-block fallback plus a block header per 16 Ki tokens. */
    static uLong fd_deflate_bound(z_stream *strm, uLong size) {
    #if FD_ISAL
        if (fd_isal_of(strm) != NULL)
            return size + (size >> 3) + 1024;
    #endif
        return deflateBound(strm, size);
    }
    static int fd_deflate_reset(z_stream *strm, int level, int mem_level) {
    #if FD_ISAL
        fd_isal *x = fd_isal_of(strm);
        if (x != NULL) {
            isal_deflate_reset(&x->s);
            strm->total_in = strm->total_out = 0;
            strm->msg = NULL;
            return Z_OK;
        }
    #endif
        int rc = deflateReset(strm);
        return rc == Z_OK ? fd_deflate_tune(strm, level, mem_level) : rc;
    }
    static int fd_deflate_set_dictionary(z_stream *strm, const Bytef *window, uInt size) {
    #if FD_ISAL
        fd_isal *x = fd_isal_of(strm);
        if (x != NULL)
            return isal_deflate_set_dict(&x->s, (uint8_t *)window, size) == COMP_OK
                ? Z_OK : Z_STREAM_ERROR;
    #endif
        return deflateSetDictionary(strm, window, size);
    }
    /* The last 2^window_bits bytes (or fewer) a stream at rest took in: ISA-L keeps them
       at the end of what its buffer has processed. */
    static int fd_deflate_window(z_stream *strm, Bytef *window, uInt *size) {
    #if FD_ISAL
        fd_isal *x = fd_isal_of(strm);
        if (x != NULL) {
            struct isal_zstate *st = &x->s.internal_state;
            uint32_t n = st->b_bytes_processed, most = 1U << x->window_bits;
            if (st->state != ZSTATE_NEW_HDR || st->b_bytes_valid != st->b_bytes_processed)
                return Z_STREAM_ERROR;
            if (n > most)
                n = most;
            if (window != NULL)
                memcpy(window, st->buffer + st->b_bytes_processed - n, n);
            *size = n;
            return Z_OK;
        }
    #endif
        return fd_deflate_get_dictionary(strm, window, size);
    }
    static int fd_is_isal(z_stream *strm) {
    #if FD_ISAL
        return fd_isal_of(strm) != NULL;
    #else
        (void)strm;
        return 0;
    #endif
    }
    /* Another object's stream (same parameters) takes this object's window. A whole
       window makes deflateSetDictionary() clear the hash table itself, so a
       deflateResetKeep() first (deflateReset() without that clearing and without
       resetting the level's limits, which are this parameter set's already) gives the
       same state as deflateReset() and clears the table once instead of twice. */
    static int fd_deflate_restore(z_stream *strm, int level, int mem_level,
                                  const Bytef *window, uInt size, uInt window_size) {
        if (!fd_is_isal(strm) && size >= window_size && deflateResetKeep(strm) == Z_OK
                && deflateSetDictionary(strm, window, size) == Z_OK)
            return Z_OK;
        int rc = fd_deflate_reset(strm, level, mem_level);
        return rc == Z_OK ? fd_deflate_set_dictionary(strm, window, size) : rc;
    }
    """
    # deflateInit2 / deflateReset, with the bundled engine's strategy and limits per level.
    int fd_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                        int strategy) nogil
    int fd_deflate_reset(z_stream *strm, int level, int mem_level) nogil
    int fd_deflate_restore(z_stream *strm, int level, int mem_level, const Bytef *window,
                           uInt size, uInt window_size) nogil
    # The same calls on either engine (ISA-L's streams dispatch; see above).
    int fd_deflate(z_stream *strm, int flush) nogil
    int fd_deflate_end(z_stream *strm) nogil
    uLong fd_deflate_bound(z_stream *strm, uLong size) nogil
    int fd_deflate_set_dictionary(z_stream *strm, const Bytef *window, uInt size) nogil
    int fd_deflate_window(z_stream *strm, Bytef *window, uInt *size) nogil
    bint fd_is_isal(z_stream *strm) nogil
    int fd_isal_level(int level, int window_bits, int mem_level, int strategy) nogil
    const char *FD_ISAL_VERSION_STRING
    const bint FD_ISAL
    # ISA-L's inflate, a whole message after the window (see Decompressor._isal_message).
    size_t fd_isal_inflater_size() nogil
    int fd_isal_inflate(void *inflater, const unsigned char *data, size_t size,
                        bint has_tail, unsigned char *buf, size_t hist_len, size_t room,
                        int window_bits, size_t *produced) nogil


cdef extern from *:
    """
    /* The bundled zlib-ng leaves a compressor's pending buffer (pending output and the
       symbols of an open block) and a decompressor's code tables out of their states:
       fastdeflate lends them for the calls and takes them back at rest, between
       messages (buildtools/zlib_ng_patches.py, PENDING_LENT and INFLATE_TABLES_LENT).
       A system zlib keeps its own: there these do nothing. */
    #if defined(FASTDEFLATE_BUNDLED_ZLIB_NG)
    size_t fastdeflate_pending_size(z_stream *strm);
    unsigned char *fastdeflate_pending_buffer(z_stream *strm);
    void fastdeflate_lend_pending(z_stream *strm, unsigned char *buf);
    unsigned char *fastdeflate_take_pending(z_stream *strm);
    size_t fastdeflate_inflate_tables_size(z_stream *strm);
    unsigned char *fastdeflate_inflate_tables(z_stream *strm);
    void fastdeflate_lend_inflate_tables(z_stream *strm, unsigned char *buf);
    unsigned char *fastdeflate_take_inflate_tables(z_stream *strm);
    /* (ISA-L's streams keep their own: nothing to lend them) */
    static size_t fd_scratch_size(z_stream *strm, int inflating) {
        if (inflating)
            return fastdeflate_inflate_tables_size(strm);
        return fd_is_isal(strm) ? 0 : fastdeflate_pending_size(strm);
    }
    static unsigned char *fd_scratch_of(z_stream *strm, int inflating) {
        if (inflating)
            return fastdeflate_inflate_tables(strm);
        return fd_is_isal(strm) ? NULL : fastdeflate_pending_buffer(strm);
    }
    static void fd_lend_scratch(z_stream *strm, int inflating, unsigned char *buf) {
        if (inflating)
            fastdeflate_lend_inflate_tables(strm, buf);
        else if (!fd_is_isal(strm))
            fastdeflate_lend_pending(strm, buf);
    }
    static unsigned char *fd_take_scratch(z_stream *strm, int inflating) {
        if (inflating)
            return fastdeflate_take_inflate_tables(strm);
        return fd_is_isal(strm) ? NULL : fastdeflate_take_pending(strm);
    }
    unsigned fastdeflate_warm_deflate(z_stream *strm);
    static void fd_warm_deflate(z_stream *strm) {
        if (!fd_is_isal(strm))
            (void)fastdeflate_warm_deflate(strm);
    }
    #else
    static size_t fd_scratch_size(z_stream *strm, int inflating) { return 0; }
    static unsigned char *fd_scratch_of(z_stream *strm, int inflating) { return NULL; }
    static void fd_lend_scratch(z_stream *strm, int inflating, unsigned char *buf) { }
    static unsigned char *fd_take_scratch(z_stream *strm, int inflating) { return NULL; }
    static void fd_warm_deflate(z_stream *strm) { }
    #endif
    """
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
    x86-64 CPU with SSE4.2 (docs/engine.md).
    """
    cdef int level, isal_level
    _, window_bits, mem_level, strategy, _ = compressor_args(
        6, window_bits, mem_level, strategy, False)
    result = {}
    for level in range(-1, 10):
        isal_level = fd_isal_level(level, window_bits, mem_level, strategy)
        result[level] = f"{_ISAL} level {isal_level}" if isal_level else ENGINE
    return result

cdef enum:
    # Inputs at least this large are (de)compressed with the GIL released; below
    # that, releasing and re-taking the GIL costs more than other threads gain.
    COMPRESS_NOGIL_MIN = 8192
    DECOMPRESS_NOGIL_MIN = 2048
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
    ISAL_DECLINED = 104  # ISA-L did not decode the message: zlib does
    # ISA-L counts bytes in 32 bits: messages whose input or output pass this go to zlib.
    ISAL_MAX_ROOM = 1073741824


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

include "_testing.pxi"

# The slice size in use: MAX_SLICE, or less in tests (_set_max_slice), so that the slicing
# of inputs and outputs past 1 GiB can be tested with small data.
cdef size_t _max_slice = MAX_SLICE


def _set_release_gil_always(bint always):
    """Test hook (private): with True every compress and decompress call releases the
    GIL around its engine calls (not only those of large inputs), so that threads
    interleave inside the codec as they do on large messages; returns the previous
    setting."""
    global _compress_nogil_min, _decompress_nogil_min
    previous = _compress_nogil_min == 0
    _compress_nogil_min = 0 if always else COMPRESS_NOGIL_MIN
    _decompress_nogil_min = 0 if always else DECOMPRESS_NOGIL_MIN
    return previous


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


cdef void _trim(OutBuffer *out, size_t keep=KEEP_BUFFER_MAX) noexcept nogil:
    """Forget the content; free the buffer if a large message grew it past ``keep``."""
    out.size = 0
    if out.capacity > keep:
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



# --- who owns what: the rule for everything that outlives a call -------------------------
#
# Whatever a call leaves behind that another connection could take is listed here, with
# who owns it, what proves that a later call is its owner's (a token that never repeats,
# never an address: a freed object's memory is the next one's), and what clears it.
# Tokens are Ring.histories, a 64-bit counter per ring, only ever incremented under the
# ring lock (_new_history, _give_isal_work): a value is handed out once per process.
#
# - A live stream (Holder.strm): its holder's, by the pointer in the holder itself; the
#   ring lock owns it while the holder is idle (linked). Taken by another object only
#   through _claim (parked first: its window saved) or the free list, and reset then
#   (STOLEN: inflateReset/deflateReset) before the window of the taker is restored. A
#   stream whose state is more than its window (a decompressor left inside a block by a
#   peer's message: Holder.pinned) is never linked, so never parked nor taken. Cleared:
#   reset() resets it; after an error the object refuses data until reset(); freed in
#   _release_holder; a forked child keeps only its own objects' streams.
# - A parked window (Holder.window): the object's own memory, never shared. Cleared by
#   reset(), freed with the object.
# - Spare output buffers and scratch (Ring.spare, Ring.scratch): nobody's. Only empty
#   buffers and scratch at rest (no pending output, no open block's code tables:
#   fd_take_scratch) are taken back, and every engine writes them before it reads them.
# - ISA-L's work buffers (Ring.isal, IsalWork): hold the window of the decompressor whose
#   message was decoded there last, proved by IsalWork.token == Decompressor._window_token
#   (given by _give_isal_work; any other use of the work, a zlib-decoded message,
#   reset(), an error, no context takeover or a large buffer freed sets one side to 0).
#   A work whose token is not the caller's is written before it is read: the caller's
#   window is copied in from its stream, and ISA-L refuses a back-reference before it.
#   A forked child frees the spares (_after_fork_in_child).
# - Kept messages for compress once (_RingBox.recent, _Led): trusted by a compressor only
#   when its history token equals the message's (Compressor._history, from
#   _new_history); the leader is a weak reference (a freed leader is nobody). Cleared:
#   reset() and an error give the compressor history 0 (an empty window: it never
#   matches a message compressed from another history); _forget_recent() and a forked
#   child drop them all.
#
# - Heuristics only: Ring.last (the holder of the ring's last call) is compared, never
#   followed; a freed holder's address taken by a new one only makes that one's first
#   call look warm (Holder.cold), which decides nothing about bytes.
#
# The fallback (fastdeflate/_pure.py) shares only kept messages, under the same rule.

# --- live streams: kept by the busy objects, the idle ones parked ------------------------
#
# A codec object holds a live z_stream only while it needs one. Between messages it stays
# linked, idle, in its parameter set's ring (most recently used first). A ring keeps up
# to ``_live_limit`` streams whatever happens; beyond that, an object that has been idle
# for ``_park_after`` is parked: its window (the last 2^w bytes of history, all the peer
# may refer to) is copied out and its stream ended, or handed over, reset, to an object
# that needs one. Objects used more often than that are busy and keep their streams, so
# a busy server runs every connection on a live stream. When a parked object is used
# again it gets a stream the same way and its window back (deflateSetDictionary /
# inflateSetDictionary). The peer never notices: a compressor's next message refers to
# the same history (or less), a decompressor's window holds the same bytes. So an idle
# connection costs its window, not a whole zlib state. Idle objects are parked when the
# ring is used (at most two per call) and by a daemon thread (the sweeper, started the
# first time a ring goes over its limit) when nothing is.
# While an object is linked, its ring's lock owns its stream, window and buffer.

cdef struct Holder
cdef class Compressor
cdef class _Led


cdef enum:
    SPARE_BUFFERS = 4  # output buffers a ring keeps for the objects it serves
    # Traffic counters (Ring.counts, added to under the ring lock the calls take anyway):
    # whole messages; bytes given to the calls; bytes they returned; messages a
    # compressor took from a leader (compress once)
    COUNT_MESSAGES = 0
    COUNT_IN = 1
    COUNT_OUT = 2
    COUNT_SHARED = 3
    COUNTS = 4


cdef struct IsalWork:
    # What ISA-L's inflate needs for one message (Decompressor._isal_message): its state
    # and a buffer for the window followed by the output. Lent by a ring to one call at a
    # time, like the spare output buffers: O(threads), not per object.
    void *inflater
    unsigned char *buf
    size_t capacity
    # Whose window ends at buf + history: the token (Ring.histories, never repeated) the
    # ring gave the decompressor whose message was the last one decoded here with
    # context takeover; 0: nobody's. A decompressor trusts these bytes only while its
    # own _window_token is this one (see "Who owns what" above).
    unsigned long long token
    size_t history


cdef struct FreeStream:
    z_stream *strm
    bint clean           # already reset: whoever takes it needs no reset
    bint inflating       # an inflate stream (else deflate)
    OutBuffer out        # the output buffer that came with a clean stream, or empty
    FreeStream *next


cdef struct Ring:
    PyThread_type_lock mutex
    Holder *head         # most recently used idle object
    Holder *tail         # least recently used: parked first
    FreeStream *free     # streams nobody holds, newest (warmest) first: given back
                         # by broadcast followers and by objects between messages
                         # that keep no window (no context takeover)
    Py_ssize_t live      # streams of this parameter set that exist (or are being made)
    unsigned long long histories  # the last history id handed out (see Compressor)
    OutBuffer spare[SPARE_BUFFERS]  # empty output buffers of objects between messages,
    int spares           # taken by the next call of any object: O(threads), not per object
    unsigned char *scratch[SPARE_BUFFERS]  # streams' scratch (pending buffers or code
    int scratches        # tables) taken back at rest, lent to the next call (bundled
                         # zlib-ng); like spare
    Holder *last         # the object of the last call (compared, never followed)
    unsigned long long counts[COUNTS]  # traffic of its objects so far (see COUNT_*)
    IsalWork *isal[SPARE_BUFFERS]  # ISA-L's inflate work, taken by a call (inflate rings)
    int isals
    unsigned long long isal_messages  # messages ISA-L inflated (the rest: zlib)


cdef struct Holder:
    z_stream *strm       # the live stream, or NULL
    Ring *ring           # set by __init__
    Holder *prev
    Holder *next
    bint linked          # idle, in ring's list
    bint inflating       # an inflate stream (else deflate)
    bint cold            # another object of its ring was called after this one's last
                         # call (set by _claim): its state is likely out of cache
    unsigned char *window  # the history kept while parked, or NULL
    uInt window_size
    OutBuffer out
    PyTime_t used        # when it was last linked (PyTime_MonotonicRaw, ns)
    bint pinned          # its stream holds more than its window (a decompressor that
                         # ended a message inside a block): kept out of the idle list,
                         # as in a message, so never parked nor lent


cdef struct Traffic:  # one call's, for its ring's counters (see COUNT_*)
    size_t into
    size_t out
    bint message
    bint shared


cdef inline void _add_traffic(Ring *ring, Traffic *t) noexcept nogil:
    """Add a call's traffic to its ring's counters (ring lock held)."""
    if t == NULL:
        return
    ring.counts[COUNT_MESSAGES] += t.message
    ring.counts[COUNT_IN] += t.into
    ring.counts[COUNT_OUT] += t.out
    ring.counts[COUNT_SHARED] += t.shared


cdef class _RingBox:
    """Owns one Ring (rings live as long as the module), and for compressors the
    whole messages compressed last (see Compressor.compress: compress once)."""
    cdef Ring ring
    cdef list recent      # _Led entries, newest first, or None (guarded by ring.mutex)
    cdef bint stragglers  # a compressor met a recent message from another history
    # (heuristics, updated without the lock: a race only keeps a message more or less)
    cdef Py_ssize_t unfollowed  # messages kept since a follower last found one
    cdef Py_ssize_t skipped     # messages not kept since the last one kept, while quiet
    # when a group starts over (see _reform_due; guarded by ring.mutex)
    cdef Py_ssize_t since_reform  # group messages since a group last started over
    cdef double average_payload   # their payload / message size (a moving average)
    cdef double reform_extra      # what starting over cost the last time, in the same units
    cdef Py_ssize_t alone_since   # since then: stragglers' own compressions of a message
    cdef Py_ssize_t shared_since  # and deliveries that took a shared one (heuristics)

    def __cinit__(self):
        self.ring.mutex = PyThread_allocate_lock()
        if self.ring.mutex == NULL:
            raise MemoryError("cannot allocate a lock")


cdef dict _rings = {}
_rings_lock = threading.Lock()
cdef Py_ssize_t _live_limit = DEFAULT_LIVE_STATES
cdef PyTime_t _park_after = <PyTime_t>(DEFAULT_PARK_AFTER * 1e9)  # ns; 0: at once
cdef double _park_after_seconds = DEFAULT_PARK_AFTER
cdef bint _sweeper_started = False
_sweeper_lock = threading.Lock()
_sweeper_wake = threading.Event()
cdef bint _can_park = FD_CAN_PARK
# Whole messages inflated by ISA-L (Decompressor), where it is bundled and zlib can give
# a stream's window to it (inflateGetDictionary: every zlib since 1.2.7.1).
cdef bint _isal_inflating = FD_ISAL and FD_CAN_PARK
cdef bint _pool_clean = True  # see _settle(); off only through _set_pooling() (tests)


def _set_parking(bint enabled):
    """Test hook (private): with False, objects are never parked, as on a zlib older
    than 1.2.9; returns the previous setting. True only where the zlib allows it."""
    global _can_park
    previous, _can_park = _can_park, enabled and FD_CAN_PARK
    return previous


def set_inflate(engine):
    """Choose what decompresses, for the whole process: ``"auto"`` (the default: the
    bundled ISA-L decodes whole messages where it decodes them as zlib does, zlib the
    rest) or ``"zlib"`` (zlib decodes every message: an operator's way to rule ISA-L
    out). Returns the previous choice. It is read at each whole message.
    ``FASTDEFLATE_INFLATE`` sets it at import."""
    inflate_arg(engine)
    previous = _inflate_choice
    _set_inflate_choice(engine)
    return previous


def inflate_engine():
    """What decompresses now (after ``set_inflate()``): ``INFLATE_ENGINE`` with
    ``"auto"``, ``ENGINE`` with ``"zlib"`` or in a build without ISA-L."""
    return INFLATE_ENGINE if _isal_inflating else ENGINE


cdef str _inflate_choice = "auto"


def _inflate_choice_now():
    """set_inflate()'s choice now: "auto" or "zlib" (for status())."""
    return _inflate_choice


cdef void _set_inflate_choice(str engine) noexcept:
    global _inflate_choice, _isal_inflating
    _inflate_choice = engine
    _isal_inflating = engine == "auto" and FD_ISAL and FD_CAN_PARK


def _set_isal_inflate(bint enabled):
    """Test hook (private): let ISA-L inflate whole messages (where bundled), or leave
    every message to zlib, as set_inflate() does; returns the previous setting."""
    previous = _isal_inflating
    _set_inflate_choice("auto" if enabled else "zlib")
    return previous


def _isal_work_held():
    """Test hook (private): bytes the rings keep for ISA-L's inflate between messages
    (decoder state and window + output buffer; one per thread at most, per window)."""
    cdef Ring *ring
    cdef size_t total = 0
    cdef int i
    for box in list(_rings.values()):
        ring = &(<_RingBox>box).ring
        _lock(ring.mutex)
        for i in range(ring.isals):
            total += fd_isal_inflater_size() + ring.isal[i].capacity + sizeof(IsalWork)
        PyThread_release_lock(ring.mutex)
    return total


def _spare_output_held():
    """Test hook (private): bytes of the empty output buffers the rings keep for their
    next calls, whichever connection they are for (at most SPARE_BUFFERS per parameter
    set: O(threads), not per connection)."""
    cdef Ring *ring
    cdef size_t total = 0
    cdef int i
    for box in list(_rings.values()):
        ring = &(<_RingBox>box).ring
        _lock(ring.mutex)
        for i in range(ring.spares):
            total += ring.spare[i].capacity
        PyThread_release_lock(ring.mutex)
    return total


def _isal_inflated():
    """Test hook (private): messages ISA-L inflated so far, all rings together."""
    cdef unsigned long long total = 0
    for box in list(_rings.values()):
        total += (<_RingBox>box).ring.isal_messages
    return total


def _set_pooling(bint enabled):
    """Test hook (private): with False, an object that keeps no window (no context
    takeover) stays linked to its stream between messages, like any other; returns the
    previous setting."""
    global _pool_clean
    previous, _pool_clean = _pool_clean, enabled
    return previous


def set_live_states(limit):
    """Set how many live zlib streams each parameter set keeps at most (default 16);
    returns the previous limit. Idle objects beyond it keep only their window."""
    global _live_limit
    live_states_arg(limit)
    previous, _live_limit = _live_limit, limit
    return previous


def set_park_after(seconds):
    """Set how long (seconds, default 10) an idle object keeps its stream once its
    parameter set has more than ``set_live_states()`` streams; returns the previous value.
    0 parks it as soon as it goes idle; ``math.inf`` never parks (every object keeps
    its stream, as stock zlib objects do)."""
    global _park_after, _park_after_seconds
    seconds = park_after_arg(seconds)
    previous = _park_after_seconds
    _park_after_seconds = seconds
    _park_after = <PyTime_t>(seconds * 1e9) if seconds < 1e9 else <PyTime_t>(1e18)
    _sweeper_wake.set()
    return previous


cdef inline bint _idle_long(Holder *h, PyTime_t now) noexcept nogil:
    """Whether linked ``h`` has been idle long enough to be parked."""
    return now - h.used >= _park_after


cdef extern from *:
    """
    /* glibc keeps the pages of freed heap chunks in the process (a zlib state at
       memLevel 5 is ~38 KiB, below its mmap threshold): malloc_trim() hands the whole
       free pages back to the system. Other C libraries' allocators give memory back by
       themselves or not at all; there, nothing to do. */
    #if defined(__GLIBC__) && !defined(FD_NO_MALLOC_TRIM)
    #include <malloc.h>
    static int fd_release_free_memory(void) { return malloc_trim(0); }
    #define FD_CAN_TRIM 1
    #else
    static int fd_release_free_memory(void) { return 0; }
    #define FD_CAN_TRIM 0
    #endif
    """
    int fd_release_free_memory() nogil
    bint FD_CAN_TRIM


cdef Py_ssize_t _parked_since_trim = 0  # streams parked since the sweeper last trimmed
cdef bint _trimming = FD_CAN_TRIM


def _set_trimming(bint enabled):
    """Test hook (private): with False the sweeper never hands freed memory back to the
    system, as on a C library other than glibc; returns the previous setting."""
    global _trimming
    previous, _trimming = _trimming, enabled and FD_CAN_TRIM
    return previous


def _release_free_memory():
    """If streams were parked since the last call: hand the freed pages back to the
    system (glibc's malloc_trim, without the GIL); returns whether it ran. The sweeper
    calls it after each round."""
    global _parked_since_trim
    if not (_trimming and _parked_since_trim):
        return False
    _parked_since_trim = 0
    with nogil:
        fd_release_free_memory()
    return True


cdef Py_ssize_t _park_idle_in(Ring *ring, PyTime_t now, Py_ssize_t most) noexcept nogil:
    """Park up to ``most`` objects idle for ``_park_after``, least recently used first,
    while ``ring`` has more streams than its limit (ring lock held); returns how many."""
    global _parked_since_trim
    cdef Holder *victim
    cdef Py_ssize_t parked = 0
    while (parked < most and ring.live > _live_limit and ring.tail != NULL
           and _idle_long(ring.tail, now) and _save_window(ring.tail)):
        victim = ring.tail
        _unlink(victim)
        _end_stream(victim)
        _free_buffer(&victim.out)
        ring.live -= 1
        parked += 1
    _parked_since_trim += parked
    return parked


def _park_idle(Py_ssize_t most=64):
    """Park the objects idle for ``set_park_after()`` beyond each ring's limit, up to
    ``most`` per ring; returns (parked, rings still over their limit). The sweeper calls
    it; tests call it to park at once."""
    cdef Ring *ring
    cdef Py_ssize_t parked = 0, over = 0
    cdef PyTime_t now = PyTime_MonotonicRaw()
    for box in list(_rings.values()):
        ring = &(<_RingBox>box).ring
        _at_quietly("park")
        _lock(ring.mutex)
        parked += _park_idle_in(ring, now, most)
        over += ring.live > _live_limit
        PyThread_release_lock(ring.mutex)
    return parked, over


def _sets_over_limit():
    """How many parameter sets hold more live streams than the limit (idle objects there
    are parked after ``set_park_after()``; busy ones keep their streams)."""
    return _park_idle(0)[1]  # parks none


def _sweep_forever():
    """The sweeper thread: park idle objects every quarter of park_after (0.05 s to
    2.5 s), in batches so that the GIL is never held for long, then give the memory
    freed back to the system."""
    while True:
        try:
            _sweeper_wake.wait(min(max(_park_after_seconds / 4, 0.05), 2.5))
            _sweeper_wake.clear()
            while _park_idle(64)[0]:
                pass
            _release_free_memory()
        except Exception:  # out of memory in a round: objects stay live until the next
            pass


cdef void _start_sweeper() noexcept:
    """Start the sweeper thread once per process (again in a forked child)."""
    global _sweeper_started
    try:
        with _sweeper_lock:
            if not _sweeper_started:
                threading.Thread(target=_sweep_forever, name="fastdeflate-sweeper",
                                 daemon=True).start()
                _sweeper_started = True
    except BaseException:  # no thread (interpreter shutting down): calls still park
        pass


cdef list _held_for_fork = []
cdef unsigned long _fork_thread = 0  # the thread holding every ring lock across fork()


def _before_fork():
    """Take every ring's lock (and the lock that makes rings) before fork(), so that
    the child never starts with a lock held by a thread it does not have, nor with a
    ring half updated. Others hold a ring lock only for a few pointer updates, and wait
    for one without the GIL. Until the locks are released after the fork, a codec object
    that this thread frees (a finalizer in another fork hook) is unlinked without them."""
    global _fork_thread
    _rings_lock.acquire()
    try:
        boxes = list(_rings.values())  # allocated before any ring lock is taken
        _held_for_fork.append(boxes)
    except BaseException:
        _rings_lock.release()
        raise
    for box in boxes:
        _lock((<_RingBox>box).ring.mutex)
    _fork_thread = PyThread_get_thread_ident()


cdef void _release_fork_locks():
    global _fork_thread
    if not _held_for_fork:  # _before_fork failed: nothing held
        return
    _fork_thread = 0
    for box in _held_for_fork.pop():
        PyThread_release_lock((<_RingBox>box).ring.mutex)
    _rings_lock.release()


def _after_fork_in_parent():
    _release_fork_locks()


def _after_fork_in_child():
    """The child starts with its rings' locks free, no sweeper yet, no message kept
    for compress once (a kept message's leader is the parent's, whose lock another
    thread of the parent may have held at the fork) and no ISA-L work buffer (they hold
    the parent's decoded messages)."""
    global _sweeper_started, _sweeper_lock, _sweeper_wake
    cdef Ring *ring
    _release_fork_locks()
    for box in list(_rings.values()):
        ring = &(<_RingBox>box).ring
        while ring.isals > 0:
            ring.isals -= 1
            _free_isal_work(ring.isal[ring.isals])
        (<_RingBox>box).recent = None
        (<_RingBox>box).stragglers = False
        (<_RingBox>box).unfollowed = 0
        (<_RingBox>box).since_reform = 0
        (<_RingBox>box).average_payload = 0
        (<_RingBox>box).reform_extra = 0
    _sweeper_started = False
    _sweeper_lock = threading.Lock()
    _sweeper_wake = threading.Event()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def _sweeper_running():
    """Test hook (private): whether this process has started its sweeper thread."""
    return _sweeper_started


def live_states():
    """``{(kind, parameters...): (live streams, idle objects holding one)}``: for tests
    and monitoring."""
    cdef Ring *ring
    cdef Holder *h
    cdef Py_ssize_t idle, live
    report = {}
    for key, box in list(_rings.items()):
        ring = &(<_RingBox>box).ring
        _at_quietly("live_states")
        # Nothing is allocated while a ring lock is held: an allocation can run a
        # collection, and a finalizer then anything (a codec object's __dealloc__ takes
        # its ring's lock: a deadlock if it were this one).
        _lock(ring.mutex)
        idle = 0
        h = ring.head
        while h != NULL:
            idle += 1
            h = h.next
        live = ring.live
        PyThread_release_lock(ring.mutex)
        report[key] = (live, idle)
    return report


def _traffic():
    """``{(kind, parameters...): (messages, bytes in, bytes out, shared)}``: what the
    objects of each parameter set have done since the process started (a call's counts
    are added when it ends, those of a message in fragments by its last call at the
    latest). For ``fastdeflate.status()``."""
    cdef Ring *ring
    cdef unsigned long long counts[COUNTS]
    report = {}
    for key, box in list(_rings.items()):
        ring = &(<_RingBox>box).ring
        _lock(ring.mutex)
        memcpy(counts, ring.counts, sizeof(counts))
        PyThread_release_lock(ring.mutex)
        report[key] = (counts[COUNT_MESSAGES], counts[COUNT_IN], counts[COUNT_OUT],
                       counts[COUNT_SHARED])
    return report


cdef _RingBox _box_for(object key):
    box = _rings.get(key)
    if box is None:
        with _rings_lock:
            box = _rings.get(key)
            if box is None:
                box = _rings[key] = _RingBox()
    return <_RingBox>box


cdef Ring *_ring_for(object key) except NULL:
    return &_box_for(key).ring


# --- compress once: one whole message sent to many compressors --------------------------
#
# A server that sends one message to many connections hands the same bytes object to each
# connection's compressor, one after the other (websockets' broadcast(), or a loop). The
# compressors of one parameter set that have sent the same messages since their window
# was last empty (the same history id) leave their peers with the same window, so the
# first one's payload is right for all: the others take it, and the state the first one
# reached (its window, fetched once; their streams go back to the pool). Each ring keeps
# the last few whole messages it compressed for that. Compressors that have diverged
# (a private message, a late joiner) compress alone. Once one is seen, the group starts
# over from an empty window at a next message when that pays (_reform_due: the first
# compressor of the message decides, so a group starts over once, never half-way through
# a broadcast), and every compressor sent that message joins it (any compressor may
# start over between messages: its peer sees a message that refers to nothing).
# Keeping a message costs a little (~0.25 us); a parameter set where the last
# QUIET_AFTER messages kept found no follower (one connection, or every message
# different) keeps only one in QUIET_SAMPLE, until a follower finds one: a broadcast
# then compresses at most QUIET_SAMPLE times before it is shared again.

cdef enum:
    JOIN_MAX = 2048  # a whole message's payload up to this is inflated with its tail in one call

cdef enum:
    SHARE_MAX = 262144  # larger messages are not kept for sharing
    SHARE_MIN = 64      # nor smaller ones: little to save, and CPython shares tiny bytes
                        # objects (b"", single bytes) between unrelated senders
    RECENT_MAX = 8      # whole messages kept per parameter set
    SYNC_EVERY = 32     # messages before a group may start over, until it has measured
    QUIET_AFTER = 64    # messages kept that nobody followed: the parameter set is quiet,
    QUIET_SAMPLE = 16   # and keeps one message in this many until someone follows one

# What starting over may cost a group's members: this fraction of their bytes.
cdef double REFORM_BUDGET = 0.02

cdef bint _sharing = True


def _set_sharing(bint enabled):
    """Test hook (private): with False, every compressor compresses every message
    itself; returns the previous setting."""
    global _sharing
    previous, _sharing = _sharing, enabled
    return previous


cdef class _Led:
    """A whole message a compressor compressed, for others with the same history."""
    cdef object data                 # the bytes object compressed
    cdef bint nct                    # no context takeover
    cdef unsigned long long before   # the history it was compressed from
    cdef bint sync                   # the leader started over for it: anyone may join
    cdef object payload
    cdef object leader               # a weak reference: the cache keeps no codec alive
    cdef unsigned long long after    # the leader's history after it
    cdef unsigned long long since
    cdef object window               # the leader's window after it (fetched once)
    cdef bint first                  # nobody had compressed its message before (a group's)
    cdef bint counted                # sent to several: a group's message (_reform_due)


cdef void _count_group_message(_RingBox box, _Led led) noexcept:
    """Another compressor was sent ``led``'s message (ring lock held): it went to
    several connections (a private message never does), so it counts towards starting
    over, and its compressed fraction towards the average."""
    cdef double size = <double>PyBytes_GET_SIZE(led.payload) / max(1, PyBytes_GET_SIZE(led.data))
    led.counted = True
    box.since_reform += 1
    if not led.sync:
        box.average_payload += ((size - box.average_payload) / 16
                                if box.average_payload else size)


cdef _Led _find_led(_RingBox box, object data, bint nct, unsigned long long history,
                    Compressor asking, bint *seen):
    """The recent compression of ``data`` from ``history``, or one that started over,
    if any (noting stragglers); ``seen``: ``data`` was compressed recently, from any
    history."""
    cdef _Led led
    cdef _Led found = None
    if box.recent is None:
        return None
    _lock(box.ring.mutex)
    try:
        for led in box.recent or ():
            if led.data is data and led.nct == nct:
                seen[0] = True
                if led.first and not led.counted:
                    _count_group_message(box, led)
                if history == led.before or led.sync:
                    found = led
                    break
                if led.leader() is not asking:  # (sent again to the same peer)
                    box.stragglers = True
                    box.unfollowed = 0  # one message to several: a group to make again
    finally:
        PyThread_release_lock(box.ring.mutex)
    return found


cdef object _led_window(_RingBox box, _Led led):
    """``led``'s window, read under its ring's lock (a reference of the caller's own)."""
    _lock(box.ring.mutex)
    window = led.window
    PyThread_release_lock(box.ring.mutex)
    return window


cdef object _store_led_window(_RingBox box, _Led led, object window):
    """Store ``window`` in ``led`` unless a follower stored one first; returns the one
    stored. Written once: a follower that read it keeps reading the same object."""
    _lock(box.ring.mutex)
    if led.window is None:
        led.window = window
    stored = led.window
    PyThread_release_lock(box.ring.mutex)
    return stored


cdef inline bint _keep_next(_RingBox box) noexcept:
    """Whether to keep the next whole message for sharing (see QUIET_AFTER)."""
    if box.unfollowed < QUIET_AFTER:
        return True
    box.skipped += 1
    if box.skipped < QUIET_SAMPLE:
        return False
    box.skipped = 0
    return True


cdef int _remember(_RingBox box, list kept, bint first) except -1:
    """Keep ``kept``'s one entry (newest first), and only entries whose message someone
    else still holds (nobody can send a message again that only this cache holds).
    (Appending to a list allocates no object: no collection runs under the lock.)
    ``first``: nobody compressed its message before (a new message for the parameter
    set, not a straggler's copy); if it started over, what that cost is measured."""
    cdef _Led old
    cdef _Led led = kept[0]
    cdef double size = <double>PyBytes_GET_SIZE(led.payload)
    cdef Py_ssize_t room
    led.first = first
    _lock(box.ring.mutex)
    try:
        # A straggler's copy never pushes out its group's entry of the same message
        # (stragglers may be many; the group still has members to serve).
        room = RECENT_MAX - 1
        for old in box.recent or ():
            if old.data is led.data and old.first:
                room -= 1
        for old in box.recent or ():
            # 2: the entry's reference and the one Cython takes to read it
            if Py_REFCNT(old.data) <= 2:
                continue
            if old.data is led.data and old.first:
                kept.append(old)
            elif room > 0:
                kept.append(old)
                room -= 1
        kept, box.recent = box.recent, kept  # the evicted go after the lock is released
        box.unfollowed += 1
        if first and led.sync:  # what starting over cost: this payload and the next few
            size /= max(1, PyBytes_GET_SIZE(led.data))  # as a fraction of the message
            box.since_reform = box.alone_since = box.shared_since = 0
            box.reform_extra = (2 * max(0.0, size - box.average_payload)
                                if box.average_payload else 0.0)
    finally:
        PyThread_release_lock(box.ring.mutex)
    return 0


cdef bint _reform_due(_RingBox box) noexcept:
    """Whether a group of this parameter set should start over at its next message: once
    its messages since it last did have cost its members enough bytes that what starting
    over costs them (measured the last time, or half a message at first) is a small
    share of them: REFORM_BUDGET, up to twice that as stragglers' own compressions (CPU)
    near a quarter of the deliveries. Until then stragglers compress alone. Costs are
    fractions of a message's size (payload / message), so a few large messages among
    small ones weigh as much as the others."""
    cdef Py_ssize_t since
    cdef double average, extra, budget, alone, shared
    _lock(box.ring.mutex)
    since, average, extra = box.since_reform, box.average_payload, box.reform_extra
    alone, shared = box.alone_since, box.shared_since
    PyThread_release_lock(box.ring.mutex)
    if average == 0:
        return since >= SYNC_EVERY
    budget = REFORM_BUDGET * (1 + min(1.0, 4 * alone / (alone + shared + 1)))
    return since * average * budget >= (extra if extra > 0 else average / 2)


def _quiet_sets():
    """Test hook (private): how many parameter sets keep only one message in
    QUIET_SAMPLE (nobody followed the last QUIET_AFTER kept)."""
    return sum((<_RingBox>box).unfollowed >= QUIET_AFTER for box in list(_rings.values()))


def _kept_messages():
    """Test hook (private): how many messages are kept for sharing, all rings together."""
    return sum(len((<_RingBox>box).recent or ()) for box in list(_rings.values()))


def _forget_recent():
    """Test hook (private): forget every message kept for sharing, end the spare
    streams nobody holds and free the spare output buffers (test isolation: a test
    starts from what it makes)."""
    cdef FreeStream *free
    cdef Ring *ring
    for box in list(_rings.values()):
        ring = &(<_RingBox>box).ring
        _lock(ring.mutex)
        try:
            kept, (<_RingBox>box).recent = (<_RingBox>box).recent, None
            (<_RingBox>box).stragglers = False
            (<_RingBox>box).unfollowed = 0
            (<_RingBox>box).since_reform = 0
            (<_RingBox>box).average_payload = 0
            (<_RingBox>box).reform_extra = 0
            (<_RingBox>box).skipped = 0
            while ring.free != NULL:
                free = ring.free
                ring.free = free.next
                _end_zstream(free.strm, free.inflating)
                PyMem_RawFree(free.strm)
                _free_buffer(&free.out)
                PyMem_RawFree(free)
                ring.live -= 1
            while ring.spares > 0:
                ring.spares -= 1
                _free_buffer(&ring.spare[ring.spares])
            while ring.scratches > 0:
                ring.scratches -= 1
                PyMem_RawFree(ring.scratch[ring.scratches])
            while ring.isals > 0:
                ring.isals -= 1
                _free_isal_work(ring.isal[ring.isals])
        finally:
            PyThread_release_lock(ring.mutex)


cdef inline void _unlink(Holder *h) noexcept nogil:
    cdef Ring *ring = h.ring
    if h.prev != NULL:
        h.prev.next = h.next
    else:
        ring.head = h.next
    if h.next != NULL:
        h.next.prev = h.prev
    else:
        ring.tail = h.prev
    h.prev = NULL
    h.next = NULL
    h.linked = False


cdef inline void _link_front(Holder *h) noexcept nogil:
    cdef Ring *ring = h.ring
    h.prev = NULL
    h.next = ring.head
    if ring.head != NULL:
        ring.head.prev = h
    else:
        ring.tail = h
    ring.head = h
    h.linked = True


cdef bint _save_window(Holder *h) noexcept nogil:
    """Copy ``h``'s window out of its stream into ``h.window``; False if it can't be
    (out of memory, a zlib without GetDictionary, or a stream ``pinned`` inside a
    block, whose state is more than its window): then ``h`` keeps its stream."""
    cdef uInt size = 0
    cdef int rc
    if not _can_park or h.pinned:
        return False
    rc = (fd_inflate_get_dictionary(h.strm, NULL, &size) if h.inflating
          else fd_deflate_window(h.strm, NULL, &size))
    if rc != Z_OK:
        return False
    PyMem_RawFree(h.window)
    h.window = NULL
    h.window_size = 0
    if size == 0:
        return True
    h.window = <unsigned char *>PyMem_RawMalloc(size)
    if h.window == NULL:
        return False
    if h.inflating:
        fd_inflate_get_dictionary(h.strm, h.window, &size)
    else:
        fd_deflate_window(h.strm, h.window, &size)
    h.window_size = size
    return True


cdef void _end_stream(Holder *h) noexcept nogil:
    """End and free ``h``'s stream (the ring's count is the caller's)."""
    _end_zstream(h.strm, h.inflating)
    PyMem_RawFree(h.strm)
    h.strm = NULL


cdef inline void _end_zstream(z_stream *strm, bint inflating) noexcept nogil:
    """inflateEnd() or deflateEnd(), and free the scratch lent to the stream, if any."""
    PyMem_RawFree(fd_scratch_of(strm, inflating))
    if inflating:
        inflateEnd(strm)
    else:
        fd_deflate_end(strm)


cdef inline void _free_buffer(OutBuffer *out) noexcept nogil:
    PyMem_RawFree(out.data)
    out.data = NULL
    out.size = 0
    out.capacity = 0


cdef enum:
    HAS_STREAM = 0    # the object's own stream, as it left it
    STOLEN = 1        # another object's stream: reset it, then restore the window
    NEED_NEW = 2      # none to take: create one (already counted in ring.live)
    CLEAN = 3         # a stream given back already reset: restore the window only


cdef int _claim(Holder *h, bint want, Traffic *traffic=NULL) noexcept:
    """Start of a call: take ``h`` out of its ring's idle list, so that its stream is its
    own until _settle(), and mark it cold if another object of the ring made the last
    call. If it has none and ``want``, lend it the least recently used
    idle object's (parking that one) when the ring is at its limit. If it has its own
    and ``want``, lend that a spare scratch of the ring's now, under the same lock
    (_lend_scratch() then has nothing to do). ``traffic``: a follower's message, counted
    under the same lock."""
    cdef Ring *ring = h.ring
    cdef Holder *victim
    cdef FreeStream *free
    cdef int outcome = HAS_STREAM
    _at_quietly("claim")
    _lock(ring.mutex)
    _at_quietly("claim locked")  # (tests only: stop a thread that holds a ring lock)
    _add_traffic(ring, traffic)
    h.cold = ring.last != h
    ring.last = h
    if h.linked:
        _unlink(h)
    if h.out.data == NULL and ring.spares > 0:
        ring.spares -= 1
        h.out = ring.spare[ring.spares]
    if (h.strm != NULL and want and ring.scratches > 0
            and fd_scratch_of(h.strm, h.inflating) == NULL
            and fd_scratch_size(h.strm, h.inflating) != 0):
        ring.scratches -= 1
        fd_lend_scratch(h.strm, h.inflating, ring.scratch[ring.scratches])
    elif h.strm == NULL and want and ring.free != NULL:
        free = ring.free
        ring.free = free.next
        h.strm = free.strm
        if h.out.data == NULL:
            h.out = free.out
        else:
            _free_buffer(&free.out)
        outcome = CLEAN if free.clean else STOLEN
        PyMem_RawFree(free)
    elif h.strm == NULL and want:
        victim = ring.tail
        if (ring.live >= _live_limit and victim != NULL
                and _idle_long(victim, PyTime_MonotonicRaw()) and _save_window(victim)):
            _unlink(victim)
            h.strm = victim.strm
            victim.strm = NULL
            _free_buffer(&victim.out)
            outcome = STOLEN
        else:
            ring.live += 1
            outcome = NEED_NEW
    PyThread_release_lock(ring.mutex)
    return outcome


cdef void _settle(Holder *h, bint in_message, bint clean=False,
                  Traffic *traffic=NULL) noexcept:
    """End of a call: an object between messages goes back to its ring's idle list (most
    recently used first), and up to two objects idle for ``_park_after`` are parked if
    the ring has more streams than its limit; with ``_park_after`` 0 the object itself
    is parked at once then. One in a message, or ``pinned``, keeps its stream. A
    ``clean`` one (its stream just reset, no window to keep: no context takeover) gives
    its stream back to the ring at once, so the next caller of any object takes the warmest stream and a
    single thread needs only one, whatever the number of objects."""
    cdef Ring *ring = h.ring
    cdef bint over = False
    if ring == NULL:
        return
    if in_message or h.pinned:  # keeps its stream; a fragment's traffic is counted too
        if traffic != NULL and (traffic.into or traffic.out):
            _lock(ring.mutex)
            _add_traffic(ring, traffic)
            PyThread_release_lock(ring.mutex)
        return
    _at_quietly("settle")
    _lock(ring.mutex)
    _add_traffic(ring, traffic)
    # Read under the lock only: an object this call did not claim (refused before that)
    # is linked, or was parked or lent its stream meanwhile by the sweeper or another
    # object's _claim (then it has none).
    if h.linked or h.strm == NULL:
        PyThread_release_lock(ring.mutex)
        return
    _take_scratch(h)
    if clean and _pool_clean:
        if ring.live > _live_limit or not _push_free(h, True):
            _end_stream(h)
            ring.live -= 1
    elif ring.live > _live_limit and _park_after == 0 and _save_window(h):
        _end_stream(h)
        _free_buffer(&h.out)
        ring.live -= 1
    else:
        h.used = PyTime_MonotonicRaw()
        _link_front(h)
        _lend_buffer(h)
        if ring.live > _live_limit and _park_after > 0:
            _park_idle_in(ring, h.used, 2)
            over = ring.live > _live_limit
    PyThread_release_lock(ring.mutex)
    if over and not _sweeper_started:
        _start_sweeper()


cdef inline void _take_scratch(Holder *h) noexcept nogil:
    """Take a stream's scratch back at rest, for its ring's next call (ring lock held);
    freed if the ring has enough."""
    cdef Ring *ring = h.ring
    cdef unsigned char *buf = fd_take_scratch(h.strm, h.inflating)
    if buf == NULL:
        return
    if ring.scratches < SPARE_BUFFERS:
        ring.scratch[ring.scratches] = buf
        ring.scratches += 1
    else:
        PyMem_RawFree(buf)


cdef int _lend_scratch(Holder *h) except -1:
    """Before a zlib call: lend a claimed object's stream its scratch if it needs one
    (bundled zlib-ng), a spare of its ring's or a new one."""
    cdef Ring *ring = h.ring
    cdef unsigned char *buf = NULL
    cdef size_t size = fd_scratch_size(h.strm, h.inflating)
    if size == 0 or fd_scratch_of(h.strm, h.inflating) != NULL:
        return 0
    _lock(ring.mutex)
    if ring.scratches > 0:
        ring.scratches -= 1
        buf = ring.scratch[ring.scratches]
    PyThread_release_lock(ring.mutex)
    if buf == NULL:
        buf = <unsigned char *>PyMem_RawMalloc(size)
        if buf == NULL:
            raise MemoryError("cannot allocate the " + (
                "inflate code tables" if h.inflating else "deflate pending buffer"))
    fd_lend_scratch(h.strm, h.inflating, buf)
    return 0


cdef inline void _lend_buffer(Holder *h) noexcept nogil:
    """Give an idle object's empty output buffer to its ring (ring lock held) for the
    next call of any object; freed if the ring has enough."""
    cdef Ring *ring = h.ring
    if h.out.data == NULL or h.out.size != 0:
        return
    if ring.spares < SPARE_BUFFERS:
        ring.spare[ring.spares] = h.out
        ring.spares += 1
        h.out = OutBuffer(NULL, 0, 0)
    else:
        _free_buffer(&h.out)


cdef enum:
    # ISA-L's work buffer (window and output) is kept up to this size between messages.
    KEEP_ISAL_BUFFER_MAX = 131072


cdef IsalWork *_take_isal_work(Ring *ring) noexcept:
    """A spare ISA-L inflate work of the ring's, or a new one; NULL if out of memory."""
    cdef IsalWork *work = NULL
    _lock(ring.mutex)
    if ring.isals > 0:
        ring.isals -= 1
        work = ring.isal[ring.isals]
    PyThread_release_lock(ring.mutex)
    if work != NULL:
        return work
    work = <IsalWork *>PyMem_RawMalloc(sizeof(IsalWork))
    if work == NULL:
        return NULL
    work.inflater = PyMem_RawMalloc(fd_isal_inflater_size())
    work.buf = NULL
    work.capacity = 0
    work.token = 0
    work.history = 0
    if work.inflater == NULL:
        PyMem_RawFree(work)
        return NULL
    return work


cdef unsigned long long _give_isal_work(Ring *ring, IsalWork *work, bint decoded,
                                       bint keep) noexcept:
    """Back to the ring after the call (its buffer freed if a large message grew it);
    ``decoded``: ISA-L inflated the message (counted); ``keep``: the caller's window now
    ends in it. Returns the token that proves that to the caller, 0 if nothing is kept."""
    cdef unsigned long long token = 0
    if work.capacity > KEEP_ISAL_BUFFER_MAX:
        PyMem_RawFree(work.buf)
        work.buf = NULL
        work.capacity = 0
        keep = False
    work.token = 0
    _lock(ring.mutex)
    ring.isal_messages += decoded
    if keep:
        ring.histories += 1
        token = work.token = ring.histories
    if ring.isals < SPARE_BUFFERS:
        ring.isal[ring.isals] = work
        ring.isals += 1
        work = NULL
    PyThread_release_lock(ring.mutex)
    if work != NULL:
        _free_isal_work(work)
        token = 0
    return token


cdef void _free_isal_work(IsalWork *work) noexcept nogil:
    PyMem_RawFree(work.buf)
    PyMem_RawFree(work.inflater)
    PyMem_RawFree(work)


cdef z_stream *_new_stream() noexcept nogil:
    """A zeroed z_stream on zlib's allocator hooks, or NULL if out of memory."""
    cdef z_stream *strm = <z_stream *>PyMem_RawMalloc(sizeof(z_stream))
    if strm != NULL:
        memset(strm, 0, sizeof(z_stream))
        strm.zalloc = _zalloc
        strm.zfree = _zfree
    return strm


cdef void _uncount(Ring *ring) noexcept:
    """Take back a stream counted by _claim() (NEED_NEW) that could not be made."""
    _lock(ring.mutex)
    ring.live -= 1
    PyThread_release_lock(ring.mutex)


cdef bint _push_free(Holder *h, bint clean) noexcept nogil:
    """Put a claimed object's stream (with its output buffer, if ``clean``) at the
    front of its ring's free list (ring lock held); False if out of memory."""
    cdef Ring *ring = h.ring
    cdef FreeStream *free = <FreeStream *>PyMem_RawMalloc(sizeof(FreeStream))
    if free == NULL:
        return False
    free.strm = h.strm
    free.clean = clean
    free.inflating = h.inflating
    free.out = OutBuffer(NULL, 0, 0)
    if clean:
        free.out, h.out = h.out, free.out
    free.next = ring.free
    ring.free = free
    h.strm = NULL
    return True


cdef void _give_back_stream(Holder *h) noexcept:
    """Hand a claimed object's stream to its ring for anyone (its window is not needed:
    it is reset when taken), or end it if the ring already has more than its limit."""
    cdef Ring *ring = h.ring
    _lock(ring.mutex)
    if ring.live > _live_limit or not _push_free(h, False):
        _end_stream(h)
        ring.live -= 1
    PyThread_release_lock(ring.mutex)
    _free_buffer(&h.out)


cdef unsigned long long _new_history(Ring *ring) noexcept:
    """A history id never handed out before in this ring (0 means an empty window)."""
    cdef unsigned long long history
    _lock(ring.mutex)
    ring.histories += 1
    history = ring.histories
    PyThread_release_lock(ring.mutex)
    return history


cdef void _drop_stream(Holder *h) noexcept:
    """End the stream of a claimed (unlinked) object, and count it out of its ring."""
    _end_stream(h)
    _lock(h.ring.mutex)
    h.ring.live -= 1
    PyThread_release_lock(h.ring.mutex)


cdef void _release_holder(Holder *h) noexcept:
    """For __dealloc__: unlink, end the stream, free the window and buffer."""
    # (this thread may hold every ring lock already: freed in a fork hook, see _before_fork)
    cdef bint locked = h.ring != NULL and _fork_thread != PyThread_get_thread_ident()
    if locked:
        _lock(h.ring.mutex)
    if h.ring != NULL:
        if h.linked:
            _unlink(h)
        if h.strm != NULL:
            _end_stream(h)
            h.ring.live -= 1
    if locked:
        PyThread_release_lock(h.ring.mutex)
    PyMem_RawFree(h.window)
    h.window = NULL
    _free_buffer(&h.out)

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

    cdef Holder _h  # its stream (while it has one), parked window and output buffer
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef PyThread_type_lock _mutex
    cdef size_t _unflushed  # input since the last sync flush
    cdef bint _in_message  # input of an unfinished message is not flushed yet
    cdef bint _fragmenting  # the last call was a fragment (fin=False) of a message
    cdef bint _broken  # a call failed in the middle of a fragmented message: refuse
    # What the peer's window holds, for broadcast(): 0 is empty (new, reset, or no context
    # takeover); compressors of one ring with the same id have sent the same bytes since.
    cdef unsigned long long _history
    cdef unsigned long long _since_sync  # messages since the window was last empty
    cdef object _shared  # bytes: the window shared with a broadcast group (no stream)
    cdef _RingBox _box   # its ring's owner
    cdef object __weakref__
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
            self._box = _box_for(("deflate",) + args[:4])
            self._h.ring = &self._box.ring
            self._initialised = True
        finally:
            PyThread_release_lock(self._mutex)

    def __dealloc__(self):
        _release_holder(&self._h)
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
        """Claim a stream (its own, another idle object's or a new one), put this
        object's parked window, if any, back into it and lend it its scratch."""
        cdef int rc
        cdef int outcome
        if self._h.ring == NULL:
            raise ValueError("Compressor.__init__ was not called")
        outcome = _claim(&self._h, True)
        if outcome == NEED_NEW:
            self._h.strm = _new_stream()
            if self._h.strm == NULL:
                _uncount(self._h.ring)
                raise MemoryError("cannot allocate the deflate state")
            rc = fd_deflate_init(self._h.strm, self._level, -self._window_bits,
                                 self._mem_level, self._strategy)
            if rc != Z_OK:
                message = _zlib_message(rc, self._h.strm, "initializing compressor")
                PyMem_RawFree(self._h.strm)
                self._h.strm = NULL
                _uncount(self._h.ring)
                if rc == Z_MEM_ERROR:
                    raise MemoryError("cannot allocate the deflate state")
                raise ValueError(message)
        rc = Z_OK
        if outcome == STOLEN and self._h.window != NULL:
            rc = fd_deflate_restore(self._h.strm, self._level, self._mem_level,
                                    self._h.window, self._h.window_size,
                                    1U << self._window_bits)
        elif outcome == STOLEN:
            rc = fd_deflate_reset(self._h.strm, self._level, self._mem_level)
        elif self._h.window != NULL:
            rc = fd_deflate_set_dictionary(self._h.strm, self._h.window,
                                           self._h.window_size)
        elif outcome == HAS_STREAM and self._h.cold:
            fd_warm_deflate(self._h.strm)
        if rc == Z_OK and self._h.window != NULL:
            PyMem_RawFree(self._h.window)
            self._h.window = NULL
            self._h.window_size = 0
        elif rc == Z_OK and self._shared is not None:
            rc = fd_deflate_set_dictionary(
                self._h.strm, <const Bytef *>PyBytes_AS_STRING(self._shared),
                <uInt>PyBytes_GET_SIZE(self._shared))
            if rc == Z_OK:
                self._shared = None
        if rc != Z_OK:  # the window stays parked (the caller abandons the stream)
            raise ValueError(_zlib_message(rc, self._h.strm, "restoring the window"))
        return _lend_scratch(&self._h)

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
            if self._h.out.capacity - self._h.out.size < wanted:
                # exactly that: blocks already grow geometrically
                rc = _reserve(&self._h.out, wanted, self._h.out.size + wanted)
                if rc != DONE:
                    return rc
            room = self._h.out.capacity - self._h.out.size
            if room > blocks.left:
                room = blocks.left
            self._h.strm.next_out = self._h.out.data + self._h.out.size
            self._h.strm.avail_out = <uInt>room
            rc = fd_deflate(self._h.strm, flush)
            room -= self._h.strm.avail_out
            self._h.out.size += room
            blocks.left -= room
            if rc != Z_OK and rc != Z_BUF_ERROR:
                return rc
            if self._h.strm.avail_out != 0:
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
            bound = fd_deflate_bound(self._h.strm, self._unflushed) + 64
        while rc == DONE:
            part = size if size < _max_slice else _max_slice
            self._h.strm.next_in = data
            self._h.strm.avail_in = <uInt>part
            data += part
            size -= part
            rc = self._drain(Z_NO_FLUSH, &blocks, bound)
            if size == 0:
                break
        if rc == DONE and sync:
            blocks = OutputBlocks(0, 0)
            rc = self._drain(Z_SYNC_FLUSH, &blocks, bound)
            if rc == DONE:
                self._unflushed = 0
        self._h.strm.next_in = NULL
        self._h.strm.avail_in = 0
        return rc

    def compress(self, data, bint fin=True, *, bint flush=True):
        """Compress ``data``: a whole message, or one fragment when ``fin`` is False.

        A whole message (``fin=True``) ends with a sync flush whose trailing
        ``00 00 ff ff`` is removed. A fragment with ``flush=True`` (default) is
        sync-flushed so the peer can decode it at once; with ``flush=False`` zlib may
        keep its output for a later call. The outputs of all calls of one message,
        concatenated, form that message's payload.

        If a call raises (MemoryError, say), its data never reaches the peer: the next
        message starts from an empty window. After a failure in the middle of a
        fragmented message the compressor refuses data (DeflateError) until reset().
        """
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef bint release
        cdef bint mid_message
        cdef bint shareable = (fin and _sharing and type(data) is bytes
                               and SHARE_MIN <= PyBytes_GET_SIZE(data) <= SHARE_MAX
                               and self._box is not None)
        cdef _Led led = None
        cdef object window = None
        cdef Compressor leader
        cdef Traffic traffic = Traffic(0, 0, False, False)
        cdef Traffic followed
        cdef bint seen = False
        if shareable:
            led = _find_led(self._box, data, self._no_context_takeover, self._history, self,
                            &seen)
            if led is not None and not led.nct:
                window = _led_window(self._box, led)
                if window is None:
                    leader = led.leader()
                    _at("follow")
                    window = (None if leader is None or leader is self
                              else leader._give_window(led))
                    if window is None:
                        led = None
            if led is not None:
                _at("adopt")
        release = _open_input(data, &view, &ptr, &size)
        try:
            _lock(self._mutex)
            try:
                self._refuse_if_broken()
                mid_message = self._fragmenting
                try:
                    if led is not None:
                        followed = Traffic(size, <size_t>PyBytes_GET_SIZE(led.payload),
                                           True, True)
                        if self._adopt(led, window, &followed):
                            return led.payload
                    if shareable and _keep_next(self._box):
                        result = self._compress_to_share(data, ptr, size, seen)
                    else:
                        result = self._compress_locked(ptr, size, fin, fin or flush)
                    traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(result), fin, False)
                    return result
                except BaseException:
                    self._abandon(mid_message)
                    raise
            finally:
                _settle(&self._h, self._in_message, self._clean(), &traffic)
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    cdef int _refuse_if_broken(self) except -1:
        if self._broken:
            raise DeflateError("compressor unusable after an error in the middle of a "
                               "fragmented message; call reset()")
        return 0

    cdef object _compress_to_share(self, object data, const unsigned char *ptr, size_t size,
                                   bint seen):
        """Compress a whole message and keep it for others with the same history
        (starting over first if that pays, with stragglers about: only the first
        compressor of a message may, ``seen`` False). Everything that can fail is made
        before the message goes into the stream."""
        cdef _Led led = _Led()
        led.leader = PyWeakref_NewRef(self, None)
        led.data = data
        led.nct = self._no_context_takeover
        led.before = self._history
        kept = [led]
        if seen:  # a straggler's own compression of a message others share
            self._box.alone_since += 1
        if (self._box.stragglers and not seen and not self._no_context_takeover
                and not self._fragmenting and not self._in_message
                and _reform_due(self._box)):
            _claim(&self._h, False)
            self._forget()  # the peer sees a message that refers to nothing earlier
            led.before = 0
            led.sync = True
            self._box.stragglers = False
        led.payload = self._compress_locked(ptr, size, True, True)
        _at("committed")
        led.after = self._history
        led.since = self._since_sync
        _remember(self._box, kept, not seen)
        return led.payload

    cdef bint _adopt(self, _Led led, object window, Traffic *traffic) except -1:
        """Take the state ``led``'s leader reached (``window`` after it) instead of
        compressing its message (the object's lock held; ``traffic`` counted then);
        False if this object moved on meanwhile."""
        if (self._history != led.before and not led.sync) or \
                self._fragmenting or self._in_message:
            return False
        self._take_state(window, led.after, led.since, traffic)
        self._box.unfollowed = 0  # sharing pays here: keep every message again
        self._box.shared_since += 1
        return True

    cdef void _take_state(self, object window, unsigned long long history,
                          unsigned long long since_sync, Traffic *traffic=NULL) noexcept:
        """Follow a leader (the object's lock held): give this object's stream back to
        the ring and take the leader's window (None without context takeover: nothing
        to keep), history and messages since its window was empty; ``traffic``: the
        message taken, counted under the ring lock taken here."""
        _claim(&self._h, False, traffic)
        if self._h.strm != NULL:
            _give_back_stream(&self._h)
        PyMem_RawFree(self._h.window)
        self._h.window = NULL
        self._h.window_size = 0
        self._unflushed = 0
        self._shared = window
        self._history = history
        self._since_sync = since_sync

    cdef object _give_window(self, _Led led):
        """This leader's window after ``led``'s message, stored in ``led`` by the first
        follower to ask (never replaced: every follower reads the same object); None if
        the leader has moved on or this zlib cannot give it. The caller holds no codec
        lock (lock order is one object's)."""
        cdef object window = None
        _lock(self._mutex)
        try:
            if self._history != led.after:
                return None
            window = _led_window(self._box, led)
            if window is not None:  # another follower asked first
                return window
            _claim(&self._h, False)
            try:
                _at("give_window")
                if self._h.strm != NULL:
                    window = self._window_bytes()
                elif self._h.window != NULL:
                    window = PyBytes_FromStringAndSize(<char *>self._h.window,
                                                       self._h.window_size)
                elif self._shared is not None:
                    window = self._shared
                else:
                    window = b""  # nothing yet: an empty history
            finally:
                _settle(&self._h, self._in_message, self._clean())
            if window is None:
                return None
            return _store_led_window(self._box, led, window)
        finally:
            PyThread_release_lock(self._mutex)

    cdef object _compress_locked(self, const unsigned char *ptr, size_t size, bint fin,
                                 bint sync):
        """compress()'s work, with the object's lock held (the caller settles, and
        abandons the stream if this raises)."""
        cdef int rc
        cdef Py_ssize_t length
        self._start()
        if size >= _compress_nogil_min:
            with nogil:
                rc = self._deflate(ptr, size, sync)
        else:
            rc = self._deflate(ptr, size, sync)
        length = <Py_ssize_t>self._h.out.size
        try:
            if rc == DONE:
                if fin and length >= 4 and memcmp(
                        self._h.out.data + length - 4, SYNC_TAIL, 4) == 0:
                    length -= 4
                result = PyBytes_FromStringAndSize(<char *>self._h.out.data, length)
        finally:
            _trim(&self._h.out)
        if rc == NO_MEMORY or rc == Z_MEM_ERROR:
            raise MemoryError("out of memory while compressing")
        if rc != DONE:
            raise ValueError(_zlib_message(rc, self._h.strm, "compressing data"))
        # only input not yet flushed ties it to its stream: after a sync flush
        # the stream is at a block boundary, and a restored window goes on
        self._in_message = self._unflushed != 0
        if fin and self._no_context_takeover:
            self._forget()
        else:
            self._history = _new_history(self._h.ring)
            self._since_sync += fin
            self._fragmenting = not fin
        return result

    cdef object _window_bytes(self):
        """The stream's window as bytes (the object holds its stream), or None if this
        zlib can't give it (then nobody can share it)."""
        cdef uInt size = 0
        if not _can_park or fd_deflate_window(self._h.strm, NULL, &size) != Z_OK:
            return None
        window = PyBytes_FromStringAndSize(NULL, size)
        fd_deflate_window(self._h.strm, <Bytef *>PyBytes_AS_STRING(window), &size)
        return window

    def _lead(self, data, unsigned long long expected):
        """broadcast(): compress a whole message for a group whose history is
        ``expected``; returns (payload, window, history, since_sync), or None if this
        object's history is no longer ``expected`` (another thread used it). If it
        raises, the message never reaches the peer (as compress())."""
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef Traffic traffic = Traffic(0, 0, False, False)
        cdef bint release = _open_input(data, &view, &ptr, &size)
        try:
            _lock(self._mutex)
            try:
                if self._h.ring == NULL or self._history != expected or self._fragmenting:
                    return None
                self._refuse_if_broken()
                try:
                    payload = self._compress_locked(ptr, size, True, True)
                    _at("committed")
                    window = None if self._no_context_takeover else self._window_bytes()
                    result = payload, window, self._history, self._since_sync
                    traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, False)
                    return result
                except BaseException:
                    self._abandon(False)
                    raise
            finally:
                _settle(&self._h, self._in_message, self._clean(), &traffic)
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    def _follow(self, unsigned long long expected, window, unsigned long long history,
                unsigned long long since_sync, size_t size=0, bytes payload=b""):
        """broadcast(): take the state a group's leader reached (``window``, ``history``)
        instead of compressing the same message (``size`` bytes, ``payload`` the
        leader's, for the traffic counters); False if this object's history is no
        longer ``expected``. Its stream goes back to the ring; it keeps a reference to
        the shared window until it needs a stream of its own."""
        cdef Traffic traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(payload), True, True)
        _lock(self._mutex)
        try:
            if self._h.ring == NULL or self._history != expected or self._fragmenting:
                return False
            if not self._no_context_takeover and window is None:
                return False
            self._take_state(window, history, since_sync, &traffic)
            return True
        finally:
            PyThread_release_lock(self._mutex)

    def _abandon_last(self, bint refuse):
        """broadcast(), when it raises: the payload this object last returned never
        reaches its peer. Its next message starts from an empty window; with ``refuse``
        (it was in the middle of a fragmented message) it refuses data until reset()."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                self._abandon(refuse)
                _settle(&self._h, False, self._clean())
        finally:
            PyThread_release_lock(self._mutex)

    def _group(self):
        """broadcast(): (parameter set id, history, messages since the window was empty,
        in the middle of a message, holds a live stream) of this object."""
        return ((<size_t>self._h.ring, self._no_context_takeover), self._history,
                self._since_sync, self._fragmenting or self._in_message,
                self._h.strm != NULL)

    def reset(self):
        """Forget the window and any unfinished message (and any earlier error): the
        next message starts empty."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _claim(&self._h, False)
                self._forget()
                self._in_message = False
                self._broken = False
                _settle(&self._h, False, True)
        finally:
            PyThread_release_lock(self._mutex)

    cdef inline bint _clean(self) noexcept:
        """Between messages with an empty window (after a message without context
        takeover, or a reset): the stream is freshly reset and holds nothing to keep."""
        return (self._history == 0 and not self._in_message and not self._fragmenting
                and self._h.window == NULL and self._shared is None)

    cdef void _forget(self) noexcept:
        """Reset the stream (claimed) and drop any parked window. With input not yet
        sync-flushed, end the stream instead (another is made on next use): zlib-ng
        2.3.3 at level 1 keeps its open block across deflateReset(), and the next
        message would start without a block header."""
        if self._h.strm != NULL and self._unflushed:
            _drop_stream(&self._h)
        elif self._h.strm != NULL:
            fd_deflate_reset(self._h.strm, self._level, self._mem_level)
        PyMem_RawFree(self._h.window)
        self._h.window = NULL
        self._h.window_size = 0
        self._unflushed = 0
        self._shared = None
        self._history = 0
        self._since_sync = 0
        self._fragmenting = False

    cdef void _abandon(self, bint refuse) noexcept:
        """After a call that raised (the object's lock held): the stream may hold input
        whose output the peer never gets, in any state (a failed flush leaves an open
        block). End it; the next message starts from an empty window, which the peer
        decodes whatever it saw before. ``refuse``: the peer is in the middle of a
        fragmented message this object can no longer finish: refuse until reset()."""
        _claim(&self._h, False)
        if self._h.strm != NULL:
            _drop_stream(&self._h)
        self._forget()
        self._in_message = False
        self._broken = self._broken or refuse


cdef class Decompressor:
    """Decompresses permessage-deflate payloads (whole messages or fragments).

    Decompressor(window_bits=15, no_context_takeover=False)
    """

    cdef Holder _h  # its stream (while it has one), parked window and output buffer
    cdef bint _initialised  # __init__ has run (it runs once)
    cdef PyThread_type_lock _mutex
    cdef bint _in_message  # a fragment was decompressed, the message is not finished
    cdef int _window_bits
    cdef bint _no_context_takeover
    cdef size_t _message_size  # output of the current message so far
    # Where zlib's output blocks end in this call, as the stdlib's (see _next_block)
    cdef size_t _call_out      # output of this call (or since a stream restarted in it)
    cdef size_t _block_end     # where the current block ends in it
    cdef int _block            # the current block's index in OUTPUT_BLOCKS, -1: none yet
    cdef int _streams          # deflate streams ended (BFINAL) in the current message
    cdef object _error         # None, or why the decompressor is unusable
    cdef uInt _last_size       # the last message's size, at most 4 GiB - 1 (ISA-L's room)
    cdef unsigned char _unsettled  # the stream may not be between blocks with no bit
                                   # pending (zlib ended a message elsewhere): no ISA-L
    # The token of the ISA-L work whose buffer holds this object's window (given by the
    # ring when this object's last message was decoded there), 0 if none: the only proof
    # that those bytes are its own (an address is not: see "Who owns what").
    cdef unsigned long long _window_token

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
            self._h.inflating = True
            self._h.ring = _ring_for(("inflate", self._window_bits))
            self._initialised = True
        finally:
            PyThread_release_lock(self._mutex)

    def __dealloc__(self):
        _release_holder(&self._h)
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
        """Claim a stream (its own, another idle object's or a new one), put this
        object's parked window, if any, back into it and lend it its scratch."""
        cdef int rc
        cdef int outcome
        if self._h.ring == NULL:
            raise ValueError("Decompressor.__init__ was not called")
        outcome = _claim(&self._h, True)
        if outcome == NEED_NEW:
            self._h.strm = _new_stream()
            if self._h.strm == NULL:
                _uncount(self._h.ring)
                raise MemoryError("cannot allocate the inflate state")
            rc = inflateInit2(self._h.strm, -self._window_bits)
            if rc != Z_OK:
                message = _zlib_message(rc, self._h.strm, "initializing decompressor")
                PyMem_RawFree(self._h.strm)
                self._h.strm = NULL
                _uncount(self._h.ring)
                if rc == Z_MEM_ERROR:
                    raise MemoryError("cannot allocate the inflate state")
                raise ValueError(message)
        elif outcome == STOLEN:
            inflateReset(self._h.strm)
        if self._h.window != NULL:
            rc = inflateSetDictionary(self._h.strm, self._h.window, self._h.window_size)
            if rc == Z_MEM_ERROR:  # (zlib allocates the window here) it stays parked
                raise MemoryError("cannot allocate the inflate window")
            if rc != Z_OK:
                raise ValueError(_zlib_message(rc, self._h.strm, "restoring the window"))
            PyMem_RawFree(self._h.window)
            self._h.window = NULL
            self._h.window_size = 0
        return _lend_scratch(&self._h)

    cdef int _restart(self) noexcept nogil:
        """After a block with BFINAL set: a new stream over the same window.

        inflateResetKeep() keeps the window in place (O(1)); the number of streams in
        one message is bounded all the same, as the fallback must copy its window.
        """
        self._streams += 1
        if self._streams > MAX_STREAMS_PER_MESSAGE:
            return TOO_MANY_STREAMS
        self._new_call()  # (the fallback decodes the rest in a call of its own)
        rc = inflateResetKeep(self._h.strm)
        return DONE if rc == Z_OK else rc

    cdef inline void _new_call(self) noexcept nogil:
        self._call_out = 0
        self._block_end = 0
        self._block = -1

    cdef inline size_t _block_room(self) noexcept nogil:
        """The output room of the next inflate() call: up to the end of the current
        output block of this call, starting the next block if it is full. The blocks are
        the stdlib zlib module's (CPython's blocks output buffer: 32 KiB, 64 KiB, 256 KiB,
        ...), one inflate() call each, because zlib's verdict on a back-reference past
        2^window_bits (RFC 7692 forbids them) depends on where its calls begin: it takes
        one that stays within the output of the same call. So a peer's message that has
        one is refused or taken exactly as the stock libraries' stdlib zlib does. (With
        a window of 2^15 no distance passes it: calls may end anywhere.)"""
        if self._call_out >= self._block_end:
            if self._block < OUTPUT_BLOCKS_COUNT - 1:
                self._block += 1
            self._block_end = self._call_out + OUTPUT_BLOCKS[self._block]
        return self._block_end - self._call_out

    cdef int _inflate(self, const unsigned char *data, size_t size,
                      Py_ssize_t limit) noexcept nogil:
        """Inflate ``data`` into the output buffer; ``limit`` < 0 means no limit.

        Output never grows past what the limit allows plus one byte: that byte is
        how an oversized message is detected without inflating it further. Each inflate()
        call ends where the stdlib's would (_block_room).
        """
        cdef z_stream *strm = self._h.strm
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
                if self._window_bits < 15:  # the stdlib's output blocks (_block_room)
                    room = self._block_room()
                    if room > allowed:
                        room = allowed
                    if self._h.out.capacity - self._h.out.size < room:
                        rc = _reserve(&self._h.out, room,
                                      SIZE_MAX if limit < 0 else self._h.out.size + allowed)
                        if rc != DONE:
                            return rc
                elif self._h.out.size == self._h.out.capacity:  # no reference can pass
                    room = self._h.out.capacity if self._h.out.capacity else 4 * slice_size + 64
                    if room > allowed:
                        room = allowed
                    rc = _reserve(&self._h.out, room,
                                  SIZE_MAX if limit < 0 else self._h.out.size + allowed)
                    if rc != DONE:
                        return rc
                room = self._h.out.capacity - self._h.out.size
                if room > allowed:
                    room = allowed
                if self._window_bits < 15 and room > self._block_end - self._call_out:
                    room = self._block_end - self._call_out
                if room > _max_slice:
                    room = _max_slice
                strm.next_out = self._h.out.data + self._h.out.size
                strm.avail_out = <uInt>room
                rc = inflate(strm, Z_SYNC_FLUSH)
                produced = room - strm.avail_out
                self._h.out.size += produced
                self._message_size += produced
                self._call_out += produced
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

    cdef size_t _isal_room(self, size_t size, Py_ssize_t limit) noexcept:
        """The output room ISA-L first gets for a message of ``size`` bytes (then 4x as
        much until it is enough): 4x the input or what the last message took, whichever
        is more. 0 if that reaches ``limit``: zlib alone decodes messages that may pass
        max_size (it stops at the limit, ISA-L's buffer would take the window too)."""
        cdef size_t room = 4 * size + 1024
        cdef size_t last = self._last_size
        if room < last + (last >> 3) + 64:
            room = last + (last >> 3) + 64
        if room > ISAL_MAX_ROOM or (limit >= 0 and room >= <size_t>limit):
            return 0
        return room

    cdef int _isal_message(self, IsalWork *work, const unsigned char *data, size_t size,
                           bint has_tail, Py_ssize_t limit, size_t room,
                           size_t *start, size_t *produced) noexcept nogil:
        """A whole message decoded by ISA-L into ``work.buf``, at ``start``, right after
        the window: the stream's, copied there, or already there when this object's
        window token is the work's (its last message was ISA-L's, in this work, and
        nothing used the work since; then history moves down only when the buffer is
        full). The stream's window then takes the output, as zlib's inflate() would.
        DONE, or ISAL_DECLINED with the stream untouched, and zlib decodes the message:
        ISA-L met what it does not decode as zlib does (corrupt data, a final block, a
        message ending elsewhere than between blocks, a back-reference past
        2^window_bits), the output would pass ``limit``, or memory ran out."""
        cdef z_stream *strm = self._h.strm
        cdef uInt have = 0
        cdef size_t needed, end = 0
        cdef unsigned char *buf
        cdef int rc
        cdef bint kept = self._window_token != 0 and work.token == self._window_token
        work.token = 0  # (nobody's until _give_isal_work says whose)
        if kept:
            end = work.history
            have = <uInt>min(end, (<size_t>1) << self._window_bits)
        elif fd_inflate_get_dictionary(strm, NULL, &have) != Z_OK:
            return ISAL_DECLINED
        while True:
            if kept and end + room > work.capacity and end > have:
                memmove(work.buf, work.buf + end - have, have)  # the window, down
                end = have
            needed = (end if kept else have) + room
            # Room for the messages after this one too, where a buffer is kept that large:
            # the window then moves down once per 2^w bytes of output, not at every
            # message (a buffer first grown while the window was empty had none).
            if (needed + ((<size_t>1) << self._window_bits) <= KEEP_ISAL_BUFFER_MAX
                    and work.capacity < needed + ((<size_t>1) << self._window_bits)):
                needed += (<size_t>1) << self._window_bits
            if work.capacity < needed:
                buf = <unsigned char *>PyMem_RawRealloc(work.buf, needed)
                if buf == NULL:
                    return ISAL_DECLINED
                work.buf = buf
                work.capacity = needed
            if not kept:
                if have and fd_inflate_get_dictionary(strm, work.buf, &have) != Z_OK:
                    return ISAL_DECLINED
                end = have
                kept = True  # (a retry finds it there)
            rc = fd_isal_inflate(work.inflater, data, size, has_tail, work.buf + end - have,
                                 have, room, self._window_bits, produced)
            if rc == 0:
                break
            room *= 4
            if rc != 1 or room > ISAL_MAX_ROOM or (limit >= 0 and room >= <size_t>limit):
                return ISAL_DECLINED
        if (not self._no_context_takeover and produced[0] != 0
                and inflateSetDictionary(strm, work.buf + end, <uInt>produced[0]) != Z_OK):
            return ISAL_DECLINED
        start[0] = end
        work.history = end + produced[0]
        return DONE

    cdef int _inflate_input(self, const unsigned char *data, size_t size, bint fin,
                            bint has_tail, Py_ssize_t limit) noexcept nogil:
        """Inflate one call's input, then the sync tail if ``fin`` (unless the input
        ends with it already: ``has_tail``): a small payload and the tail joined on the
        stack (one inflate() call instead of two), a large one's tail after it (the
        payload is never copied)."""
        cdef unsigned char joined[2052]  # JOIN_MAX + 4
        cdef int rc
        if has_tail:
            rc = self._inflate(data, size, limit)
            return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc
        if fin and size <= JOIN_MAX:
            memcpy(joined, data, size)
            memcpy(joined + size, SYNC_TAIL, 4)
            rc = self._inflate(joined, size + 4, limit)
            return TOO_BIG if rc == TOO_BIG_INPUT_READ else rc
        rc = self._inflate(data, size, limit)
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
        cdef z_stream *strm = self._h.strm
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

    cdef object _decompress_isal(self, const unsigned char *data, size_t size,
                                 bint has_tail, Py_ssize_t limit, int *outcome):
        """_isal_message() with a work of the ring's: the message if ``outcome`` is
        DONE."""
        cdef size_t room = self._isal_room(size, limit)
        cdef IsalWork *work = NULL
        cdef size_t start = 0, produced = 0
        cdef int rc = ISAL_DECLINED
        result = None
        if room != 0:
            work = _take_isal_work(self._h.ring)
            _at_quietly("isal work")  # (tests only: hold a work while others decode)
        if work == NULL:
            outcome[0] = rc
            return None
        try:
            if size >= _decompress_nogil_min:
                with nogil:
                    rc = self._isal_message(work, data, size, has_tail, limit, room,
                                            &start, &produced)
            else:
                rc = self._isal_message(work, data, size, has_tail, limit, room, &start,
                                        &produced)
            if rc == DONE:
                try:
                    result = PyBytes_FromStringAndSize(
                        <char *>work.buf + start, <Py_ssize_t>produced)
                except MemoryError:
                    rc = NO_MEMORY  # the output is lost: refused until reset()
        finally:
            self._window_token = _give_isal_work(
                self._h.ring, work, rc == DONE, rc == DONE and not self._no_context_takeover)
            outcome[0] = rc
        return result

    def decompress(self, data, bint fin=True, max_size=None, *, bint has_tail=False):
        """Decompress a whole message's payload, or one fragment when ``fin`` is False.

        ``max_size`` bounds the size of the whole message across its fragments:
        decompression stops as soon as it would be passed, with MessageTooBig.
        Corrupt data raises DecompressionError. After either (or a MemoryError) the
        decompressor refuses data until reset(). ``has_tail``: ``data`` is the end of
        a message followed by ``00 00 ff ff`` already (ValueError if not, or if
        ``fin`` is False), inflated as it is. After any exception but those of bad
        arguments, the decompressor refuses data until reset().
        """
        cdef Py_buffer view
        cdef const unsigned char *ptr
        cdef size_t size
        cdef int rc
        cdef Py_ssize_t limit = -1
        cdef bint release
        cdef bint clean = False
        cdef Traffic traffic = Traffic(0, 0, False, False)
        if max_size is not None:
            if type(max_size) is not int or max_size < 0:
                max_size_arg(max_size)  # raises the documented TypeError / ValueError
            limit = min(max_size, PY_SSIZE_T_MAX // 2)
        release = _open_input(data, &view, &ptr, &size)
        try:
            if has_tail and (not fin or size < 4 or memcmp(ptr + size - 4, SYNC_TAIL, 4)):
                tail_arg(fin)  # raises the documented ValueError
            _lock(self._mutex)
            try:
                if self._error is not None:
                    raise DecompressionError(
                        f"decompressor unusable after an earlier error ({self._error}); "
                        "call reset()")
                try:
                    self._start()
                    whole = fin and not self._in_message
                    self._in_message = True  # until the message ends well
                    self._new_call()
                    rc = ISAL_DECLINED
                    if (whole and _isal_inflating and not self._unsettled
                            and size <= ISAL_MAX_ROOM and _max_slice == MAX_SLICE):
                        result = self._decompress_isal(ptr, size, has_tail, limit, &rc)
                    if rc == ISAL_DECLINED:
                        if size >= _decompress_nogil_min:
                            with nogil:
                                rc = self._inflate_input(ptr, size, fin, has_tail, limit)
                        else:
                            rc = self._inflate_input(ptr, size, fin, has_tail, limit)
                        try:
                            if rc == DONE:
                                result = PyBytes_FromStringAndSize(
                                    <char *>self._h.out.data, <Py_ssize_t>self._h.out.size)
                        except MemoryError:
                            rc = NO_MEMORY  # the output is lost: refused until reset() below
                        finally:
                            _trim(&self._h.out, KEEP_INFLATE_BUFFER_MAX)
                        # zlib stopped between blocks with no bit pending (mode TYPE):
                        # where ISA-L starts a message
                        self._unsettled = self._h.strm.data_type != 128
                        self._window_token = 0
                    self._in_message = rc == DONE and not fin
                    if rc == DONE:
                        traffic = Traffic(size, <size_t>PyBytes_GET_SIZE(result), fin, False)
                        self._last_size = <uInt>min(PyBytes_GET_SIZE(result), UINT_MAX)
                        if fin:
                            self._message_size = 0
                            self._streams = 0
                            if self._no_context_takeover:
                                inflateReset(self._h.strm)
                                self._unsettled = False
                                clean = True
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
                        rc, self._h.strm, "decompressing data")
                    raise DecompressionError(self._error)
                except BaseException as exc:  # whatever failed, the window is in doubt
                    self._in_message = False
                    self._window_token = 0
                    if self._error is None:
                        self._error = "out of memory" if isinstance(exc, MemoryError) \
                            else "interrupted"
                    raise
            finally:
                # (a refusing object's state is dropped at reset(): it may be parked)
                self._h.pinned = self._unsettled and self._error is None
                _settle(&self._h, self._in_message, clean, &traffic)
                PyThread_release_lock(self._mutex)
        finally:
            if release:
                PyBuffer_Release(&view)

    def reset(self):
        """Forget the window, any unfinished message and any earlier error."""
        _lock(self._mutex)
        try:
            if self._h.ring != NULL:
                _claim(&self._h, False)
                if self._h.strm != NULL:
                    inflateReset(self._h.strm)
                PyMem_RawFree(self._h.window)
                self._h.window = NULL
                self._h.window_size = 0
                self._in_message = False
                self._h.pinned = False
                _settle(&self._h, False, True)
            self._message_size = 0
            self._streams = 0
            self._error = None
            self._unsettled = False
            self._window_token = 0
        finally:
            PyThread_release_lock(self._mutex)
