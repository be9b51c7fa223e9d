/* zlib's API as fastdeflate drives it: a system zlib, or the bundled zlib-ng with its
   levels tuned to zlib's bytes and its scratch (pending buffer, code tables) lent by
   the caller between messages.
   (Part of the compiled extension's engines: included by seam.h, the only file the
   codec includes; see _fastdeflate.pyx for the parts.) */
#ifndef FD_ENGINE_ZLIB_H
#define FD_ENGINE_ZLIB_H
#include "zlib.h"

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

#if defined(FASTDEFLATE_BUNDLED_ZLIB_NG) && defined(ZLIBNG_VERSION)
#define FASTDEFLATE_BUNDLED_ENGINE "zlib-ng " ZLIBNG_VERSION " (zlib-compat)"
#else
#define FASTDEFLATE_BUNDLED_ENGINE ""
#endif

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
/* deflateInit2() / deflateReset() at the level's strategy and limits (FD_LEVELS). */
static int fd_zlib_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                                int strategy) {
    int rc = deflateInit2(strm, FD_TUNES ? fd_level(level, mem_level).engine_level : level,
                          Z_DEFLATED, window_bits, mem_level, strategy);
    return rc == Z_OK ? fd_deflate_tune(strm, level, mem_level) : rc;
}
static int fd_zlib_deflate_reset(z_stream *strm, int level, int mem_level) {
    int rc = deflateReset(strm);
    return rc == Z_OK ? fd_deflate_tune(strm, level, mem_level) : rc;
}
/* Another object's stream (same parameters) takes this object's window. A whole
   window makes deflateSetDictionary() clear the hash table itself, so a
   deflateResetKeep() first (deflateReset() without that clearing and without
   resetting the level's limits, which are this parameter set's already) gives the
   same state as deflateReset() and clears the table once instead of twice. */
static int fd_zlib_deflate_restore(z_stream *strm, int level, int mem_level,
                                   const Bytef *window, uInt size, uInt window_size) {
    int rc;
    if (size >= window_size && deflateResetKeep(strm) == Z_OK
            && deflateSetDictionary(strm, window, size) == Z_OK)
        return Z_OK;
    rc = fd_zlib_deflate_reset(strm, level, mem_level);
    return rc == Z_OK ? deflateSetDictionary(strm, window, size) : rc;
}
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
static size_t fd_zlib_scratch_size(z_stream *strm, int inflating) {
    if (inflating)
        return fastdeflate_inflate_tables_size(strm);
    return fastdeflate_pending_size(strm);
}
static unsigned char *fd_zlib_scratch_of(z_stream *strm, int inflating) {
    if (inflating)
        return fastdeflate_inflate_tables(strm);
    return fastdeflate_pending_buffer(strm);
}
static void fd_zlib_lend_scratch(z_stream *strm, int inflating, unsigned char *buf) {
    if (inflating)
        fastdeflate_lend_inflate_tables(strm, buf);
    else
        fastdeflate_lend_pending(strm, buf);
}
static unsigned char *fd_zlib_take_scratch(z_stream *strm, int inflating) {
    if (inflating)
        return fastdeflate_take_inflate_tables(strm);
    return fastdeflate_take_pending(strm);
}
unsigned fastdeflate_warm_deflate(z_stream *strm);
static void fd_zlib_warm_deflate(z_stream *strm) {
    (void)fastdeflate_warm_deflate(strm);
}
#else
static size_t fd_zlib_scratch_size(z_stream *strm, int inflating) { return 0; }
static unsigned char *fd_zlib_scratch_of(z_stream *strm, int inflating) { return NULL; }
static void fd_zlib_lend_scratch(z_stream *strm, int inflating, unsigned char *buf) { }
static unsigned char *fd_zlib_take_scratch(z_stream *strm, int inflating) { return NULL; }
static void fd_zlib_warm_deflate(z_stream *strm) { }
#endif

#endif
