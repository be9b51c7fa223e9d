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

/* The level a user picks is a promise about bytes: on the bundled engine each level
   runs zlib's own strategy (fast or lazy matching, zlib-ng's levels 2 and 7) with limits
   chosen so that, on the wider corpus of benchmarks/fdbench/corpus.py, its bytes stay
   within 1.02x of zlib's at that level in every cell, at the least time
   (benchmarks/levels.py measured the candidates: benchmarks/results/levels.md).
   zlib-ng's own level 1 ("quick": one probe, no chain) sent 16-45% more than zlib's
   level 1, and its levels 3-6 ("medium") up to 10% more.
   Per window class: at windows 9-11 binary records (varints, tags) need zlib's matches
   of 3 bytes, which zlib-ng's 4-byte hash finds only by chance (2.8% over zlib's bytes
   at levels 2-8): those windows hash 3 bytes (hash3); at windows 12-15 the 4-byte hash
   with shorter searches than zlib's holds the bound, faster. deflateReset() restores the
   engine level's own limits, so they are set again after every reset; the hash lasts.
   tests/test_sizes.py checks the sizes over every level, window and memLevel. */
#if defined(FASTDEFLATE_BUNDLED_ZLIB_NG)
#define FD_TUNES 1
#else
#define FD_TUNES 0
#endif
typedef struct { int engine_level, good, lazy, nice, chain, hash3; } fd_level_config;
#if defined(FD_TEST_BUILD)
#define FD_LEVELS_TABLE static fd_level_config  /* the test build's frontier tries others */
#else
#define FD_LEVELS_TABLE static const fd_level_config
#endif
#define FD_SMALL_WINDOWS 11   /* windows 9-11: class 0 */
#define FD_LARGE_TABLES 8      /* windows 12-15 from memLevel 8 (32 Ki hash entries): class 1 */
#define FD_CLASSES 3           /* windows 12-15 with smaller tables: class 2 */
FD_LEVELS_TABLE FD_LEVELS[10][FD_CLASSES] = {
    /* {engine level (2: fast, 7: lazy), good, lazy, nice, chain, 3-byte hash} */
    {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}},  /* 0: stored */
    {{2, 4, 4, 8, 4, 1}, {2, 4, 4, 8, 2, 0},                      /* 1 (ISA-L's where */
     {2, 4, 4, 8, 4, 0}},                                         /*    it runs) */
    {{2, 4, 6, 32, 4, 1}, {2, 4, 4, 16, 4, 0}, {2, 4, 5, 16, 8, 0}},         /* 2 */
    {{2, 4, 6, 32, 8, 1}, {2, 4, 6, 32, 8, 0}, {2, 4, 6, 32, 32, 0}},        /* 3 */
    {{7, 4, 4, 16, 16, 1}, {7, 4, 4, 32, 8, 0}, {7, 4, 4, 16, 16, 0}},       /* 4 */
    {{7, 8, 16, 32, 16, 1}, {7, 8, 16, 64, 16, 0}, {7, 8, 16, 32, 32, 0}},   /* 5 */
    {{7, 4, 32, 64, 48, 1}, {7, 4, 16, 128, 64, 0}, {7, 8, 16, 32, 32, 0}},  /* 6 */
    {{7, 8, 32, 258, 64, 1}, {7, 8, 32, 258, 128, 0},                        /* 7 */
     {7, 8, 32, 128, 256, 0}},
    {{7, 32, 128, 258, 128, 1}, {7, 32, 128, 258, 128, 0},                   /* 8 */
     {7, 32, 128, 258, 1024, 0}},
    {{9, 0, 0, 0, 0, 0}, {9, 0, 0, 0, 0, 0}, {9, 0, 0, 0, 0, 0}},  /* 9: zlib-ng's own */
};
static int fd_level_class(int window_bits, int mem_level) {
    if (window_bits < 0)
        window_bits = -window_bits;
    return window_bits <= FD_SMALL_WINDOWS ? 0 : mem_level >= FD_LARGE_TABLES ? 1 : 2;
}
static fd_level_config fd_level(int level, int window_bits, int mem_level) {
    fd_level_config c = FD_LEVELS[level < 0 ? 6 : level][fd_level_class(window_bits, mem_level)];
    if ((level == 6 || level < 0) && mem_level <= 2 && !c.hash3) {
        c.nice = c.chain = 128;  /* zlib's level-6 limits on the smallest tables */
    }
    return c;
}
#if defined(FASTDEFLATE_BUNDLED_ZLIB_NG)
int32_t fastdeflate_deflate_hash3(z_stream *strm, int32_t on);
#define fd_hash3(strm, on) fastdeflate_deflate_hash3(strm, on)
#else
#define fd_hash3(strm, on) 0
#endif
static int fd_deflate_tune(z_stream *strm, int level, int window_bits, int mem_level) {
    fd_level_config c = fd_level(level, window_bits, mem_level);
    return FD_TUNES && c.chain ? deflateTune(strm, c.good, c.lazy, c.nice, c.chain) : Z_OK;
}
/* deflateInit2() / deflateReset() at the level's strategy, hash and limits (FD_LEVELS);
   the hash lasts through resets. */
static int fd_zlib_deflate_init(z_stream *strm, int level, int window_bits, int mem_level,
                                int strategy) {
    fd_level_config c = fd_level(level, window_bits, mem_level);
    int rc = deflateInit2(strm, FD_TUNES ? c.engine_level : level,
                          Z_DEFLATED, window_bits, mem_level, strategy);
    if (rc == Z_OK && FD_TUNES && c.hash3)
        (void)fd_hash3(strm, 1);
    return rc == Z_OK ? fd_deflate_tune(strm, level, window_bits, mem_level) : rc;
}
static int fd_zlib_deflate_reset(z_stream *strm, int level, int window_bits, int mem_level) {
    int rc = deflateReset(strm);
    return rc == Z_OK ? fd_deflate_tune(strm, level, window_bits, mem_level) : rc;
}
/* Another object's stream (same parameters) takes this object's window. A whole
   window makes deflateSetDictionary() clear the hash table itself, so a
   deflateResetKeep() first (deflateReset() without that clearing and without
   resetting the level's limits, which are this parameter set's already) gives the
   same state as deflateReset() and clears the table once instead of twice. */
static int fd_zlib_deflate_restore(z_stream *strm, int level, int window_bits,
                                   int mem_level, const Bytef *window, uInt size) {
    int rc;
    if (size >= (1u << (window_bits < 0 ? -window_bits : window_bits))
            && deflateResetKeep(strm) == Z_OK
            && deflateSetDictionary(strm, window, size) == Z_OK)
        return Z_OK;
    rc = fd_zlib_deflate_reset(strm, level, window_bits, mem_level);
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
