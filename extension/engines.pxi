# The engines: zlib's C API, zlib-ng's level tuning, ISA-L's deflate and inflate glue,
# and the seam the codec calls them through (fd_deflate, fd_deflate_init, ...; engines()).
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
