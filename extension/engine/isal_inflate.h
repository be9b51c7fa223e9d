/* ISA-L's inflate: a whole message decoded after the window (where ISA-L is bundled;
   elsewhere it declines every message and zlib decodes them all).
   (Part of the compiled extension's engines: included by seam.h, the only file the
   codec includes; see _fastdeflate.pyx for the parts.) */
#ifndef FD_ENGINE_ISAL_INFLATE_H
#define FD_ENGINE_ISAL_INFLATE_H
#include "isal_deflate.h"

#if FD_ISAL
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

#endif
