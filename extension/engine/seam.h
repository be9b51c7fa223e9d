/* The engine seam: the one place that decides which engine compresses a level and which
   decodes a message, and the calls the codec makes on a stream whatever its engine
   (fd_deflate_init, fd_deflate, ..., fd_inflate_whole). A third engine, or a platform
   without ISA-L, changes this file and the engine's own header, nothing else.
   Engines: zlib_ng.h (zlib's API, the bundled zlib-ng's tuning and lent scratch),
   isal_deflate.h and isal_inflate.h (ISA-L, where it is bundled).
   (Part of the compiled extension: declared in extension/engines.pxi.) */
#ifndef FD_ENGINE_SEAM_H
#define FD_ENGINE_SEAM_H
#include "zlib_ng.h"
#include "isal_deflate.h"
#include "isal_inflate.h"

/* --- which engine ------------------------------------------------------------------- */
/* Stock zlib's deflate state for these parameters (deflate.c: window, prev, head,
   pending buffer and the state itself). */
static size_t fd_stock_deflate_size(int window_bits, int mem_level) {
    size_t w = (size_t)1 << window_bits;
    return 4 * w + ((size_t)2 << (mem_level + 7)) + ((size_t)4 << (mem_level + 6)) + 5952;
}
/* Which engine runs zlib's ``level`` with these parameters: the ISA-L level that runs
   it, or 0: zlib (the bundled zlib-ng, or the system zlib).
   With 8 KiB to spare, for what a compressor holds beside its state (at window 15 /
   memLevel 6 ISA-L's level-1 state is stock's size to within 1%: zlib-ng runs).
   Level 1 only (issue 29). ISA-L's level 3 finds other matches on each kind of x86-64
   CPU (its AVX2 and AVX-512 matchers differ from each other and from the C one that
   CPUs without AVX2 run, which also sent 1.08x stock's level-3 bytes), so the same
   message gave other bytes on another machine; and on indented JSON, HTML and text
   (benchmarks/fdbench/corpus.py) ISA-L's levels 2 and 3 sent up to 1.11x and 1.13x
   stock's bytes at those levels. zlib-ng runs them, tuned by FD_LEVELS (zlib_ng.h):
   the same bytes on every CPU. docs/engine.md has the figures. */
#if defined(FD_TEST_BUILD)
static int fd_isal_deflating = 1;  /* the test build's _set_isal_deflate() */
static int fd_set_isal_deflating(int on) {
    int previous = fd_isal_deflating;
    fd_isal_deflating = on;
    return previous;
}
#else
#define fd_isal_deflating 1
#endif
static int fd_deflate_engine(int level, int window_bits, int mem_level, int strategy) {
#if FD_ISAL
    if (!fd_isal_deflating || level != 1 || strategy != Z_DEFAULT_STRATEGY)
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

#if FD_ISAL
#define FD_ISAL_STREAM(strm) fd_isal_of(strm)
#else
typedef void fd_isal;
#define FD_ISAL_STREAM(strm) ((fd_isal *)NULL)
#endif

/* --- deflate, on the stream's engine ---------------------------------------------------- */
/* deflateInit2 / deflateReset, with the engine fd_deflate_engine() chooses. */
static int fd_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                           int strategy) {
#if FD_ISAL
    int isal_level = fd_deflate_engine(level, -window_bits, mem_level, strategy);
    if (isal_level)
        return fd_isal_deflate_init(strm, isal_level, -window_bits);
#endif
    return fd_zlib_deflate_init(strm, level, window_bits, mem_level, strategy);
}
static int fd_is_isal(z_stream *strm) {
    return FD_ISAL_STREAM(strm) != NULL;
}
static int fd_deflate(z_stream *strm, int flush) {
#if FD_ISAL
    fd_isal *x = fd_isal_of(strm);
    if (x != NULL)
        return fd_isal_deflate(x, strm, flush);
#endif
    return deflate(strm, flush);
}
static int fd_deflate_end(z_stream *strm) {
#if FD_ISAL
    fd_isal *x = fd_isal_of(strm);
    if (x != NULL)
        return fd_isal_deflate_end(x, strm);
#endif
    return deflateEnd(strm);
}
/* At most this much output for ``size`` more input up to a sync flush. */
static uLong fd_deflate_bound(z_stream *strm, uLong size) {
#if FD_ISAL
    if (fd_isal_of(strm) != NULL)
        return fd_isal_deflate_bound(size);
#endif
    return deflateBound(strm, size);
}
static int fd_deflate_reset(z_stream *strm, int level, int window_bits, int mem_level) {
#if FD_ISAL
    fd_isal *x = fd_isal_of(strm);
    if (x != NULL)
        return fd_isal_deflate_reset(x, strm);
#endif
    return fd_zlib_deflate_reset(strm, level, window_bits, mem_level);
}
static int fd_deflate_set_dictionary(z_stream *strm, const Bytef *window, uInt size) {
#if FD_ISAL
    fd_isal *x = fd_isal_of(strm);
    if (x != NULL)
        return fd_isal_deflate_set_dictionary(x, window, size);
#endif
    return deflateSetDictionary(strm, window, size);
}
/* The last 2^window_bits bytes (or fewer) a stream at rest took in. */
static int fd_deflate_window(z_stream *strm, Bytef *window, uInt *size) {
#if FD_ISAL
    fd_isal *x = fd_isal_of(strm);
    if (x != NULL)
        return fd_isal_deflate_window(x, window, size);
#endif
    return fd_deflate_get_dictionary(strm, window, size);
}
/* Another object's stream (same parameters) takes this object's window. */
static int fd_deflate_restore(z_stream *strm, int level, int window_bits, int mem_level,
                              const Bytef *window, uInt size) {
    int rc;
    if (!fd_is_isal(strm))
        return fd_zlib_deflate_restore(strm, level, window_bits, mem_level, window, size);
    rc = fd_deflate_reset(strm, level, window_bits, mem_level);
    return rc == Z_OK ? fd_deflate_set_dictionary(strm, window, size) : rc;
}

/* --- scratch the caller lends a stream between messages (zlib-ng's; ISA-L's streams
       keep their own: nothing to lend them) ----------------------------------------- */
static size_t fd_scratch_size(z_stream *strm, int inflating) {
    return !inflating && fd_is_isal(strm) ? 0 : fd_zlib_scratch_size(strm, inflating);
}
static unsigned char *fd_scratch_of(z_stream *strm, int inflating) {
    return !inflating && fd_is_isal(strm) ? NULL : fd_zlib_scratch_of(strm, inflating);
}
static void fd_lend_scratch(z_stream *strm, int inflating, unsigned char *buf) {
    if (inflating || !fd_is_isal(strm))
        fd_zlib_lend_scratch(strm, inflating, buf);
}
static unsigned char *fd_take_scratch(z_stream *strm, int inflating) {
    return !inflating && fd_is_isal(strm) ? NULL : fd_zlib_take_scratch(strm, inflating);
}
static void fd_warm_deflate(z_stream *strm) {
    if (!fd_is_isal(strm))
        fd_zlib_warm_deflate(strm);
}

/* --- inflate: whole messages on the message engine, zlib the rest ------------------------ */
/* 1 where an engine decodes whole messages after the window (ISA-L); its state's size;
   a message decoded at ``buf + hist_len``, after the window (0: done, 1: the output room
   ran out, 2: declined, zlib decodes it). */
#define FD_WHOLE_MESSAGES FD_ISAL
static size_t fd_whole_inflater_size(void) {
    return fd_isal_inflater_size();
}
static int fd_inflate_whole(void *inflater, const unsigned char *in, size_t in_size,
                            int has_tail, unsigned char *buf, size_t hist_len,
                            size_t room, int window_bits, size_t *produced) {
    return fd_isal_inflate(inflater, in, in_size, has_tail, buf, hist_len, room,
                           window_bits, produced);
}

#endif
