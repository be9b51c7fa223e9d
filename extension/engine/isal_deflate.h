/* ISA-L's deflate (igzip), driven to zlib's contract: level 1 where it is bundled.
   (Part of the compiled extension's engines: included by seam.h, the only file the
   codec includes; see _fastdeflate.pyx for the parts.) */
#ifndef FD_ENGINE_ISAL_DEFLATE_H
#define FD_ENGINE_ISAL_DEFLATE_H
#include <stddef.h>
#include <string.h>
#include "zlib.h"

/* ISA-L (igzip), bundled beside zlib-ng, runs level 1 where it is the fastest at
   zlib's bytes (see fd_deflate_engine in seam.h: levels 2-3 went back to zlib-ng) and its state is
   no larger than stock zlib's for the parameters: a stream is a z_stream whose
   ``state`` is an fd_isal (marked in ``reserved``) and every deflate call of
   seam.h dispatches on it. ISA-L has no strategies: Z_FILTERED and the others stay on
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
static size_t fd_isal_state_size(int isal_level) {
    return isal_level ? FD_ISAL_HEAD + FD_ISAL_BUF[isal_level] : 0;
}
static int fd_isal_deflate_init(z_stream *strm, int isal_level, int window_bits) {
    fd_isal *x = (fd_isal *)strm->zalloc(strm->opaque, 1,
                                         (uInt)fd_isal_state_size(isal_level));
    if (x == NULL)
        return Z_MEM_ERROR;
    isal_deflate_init(&x->s);
    x->s.level = (uint32_t)isal_level;
    x->s.level_buf = (uint8_t *)x + FD_ISAL_HEAD;
    x->s.level_buf_size = (uint32_t)FD_ISAL_BUF[isal_level];
    x->s.hist_bits = (uint16_t)window_bits;
    x->window_bits = window_bits;
    strm->state = (struct internal_state *)(void *)x;
    strm->reserved = FD_ISAL_MAGIC;
    strm->msg = NULL;
    strm->total_in = strm->total_out = 0;
    return Z_OK;
}
/* deflate() driven to zlib's contract: it returns with all input taken or no output
   space left, and a sync flush finished unless the space ran out. */
static int fd_isal_deflate(fd_isal *x, z_stream *strm, int flush) {
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
static int fd_isal_deflate_end(fd_isal *x, z_stream *strm) {
    strm->zfree(strm->opaque, x);
    strm->state = NULL;
    strm->reserved = 0;
    return Z_OK;
}
/* Its stored-block fallback plus a block header per 16 Ki tokens. */
static uLong fd_isal_deflate_bound(uLong size) {
    return size + (size >> 3) + 1024;
}
static int fd_isal_deflate_reset(fd_isal *x, z_stream *strm) {
    isal_deflate_reset(&x->s);
    strm->total_in = strm->total_out = 0;
    strm->msg = NULL;
    return Z_OK;
}
static int fd_isal_deflate_set_dictionary(fd_isal *x, const Bytef *window, uInt size) {
    return isal_deflate_set_dict(&x->s, (uint8_t *)window, size) == COMP_OK
        ? Z_OK : Z_STREAM_ERROR;
}
/* The last 2^window_bits bytes (or fewer) a stream at rest took in: ISA-L keeps them
   at the end of what its buffer has processed. */
static int fd_isal_deflate_window(fd_isal *x, Bytef *window, uInt *size) {
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
#else
#define FD_ISAL 0
#define FD_ISAL_VERSION_STRING ""
#endif

#endif
