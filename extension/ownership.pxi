# Who owns what: the one rule for everything shared that outlives a call, and the one
# mechanism that keeps it: tokens that never repeat, and shelves of spares a ring lends.
# (Part of the compiled extension: included from _fastdeflate.pyx, which lists the parts.)

# --- who owns what: the rule for everything that outlives a call -------------------------
#
# Whatever a call leaves behind that another connection could take is listed here, with
# who owns it, what proves that a later call is its owner's (a token that never repeats,
# never an address: a freed object's memory is the next one's), and what clears it.
# Tokens are Ring.tokens, a 64-bit counter per ring, only ever incremented under the
# ring lock (_new_token): a value is handed out once per process.
#
# - A live stream (Holder.strm): its holder's, by the pointer in the holder itself; the
#   ring lock owns it while the holder is idle (linked). Taken by another object only
#   through _claim (parked first: its window saved) or the free list, and reset then
#   (STOLEN: inflateReset/deflateReset) before the window of the taker is restored. A
#   stream whose state is more than its window (a decompressor left inside a block by a
#   peer's message: Holder.pinned) is never linked, so never parked nor taken. Cleared:
#   reset() resets it; after an error the object refuses data until reset(); freed in
#   _release_holder (or, when the object dies while its ring lock is taken, by that
#   lock's next holder: the ring's orphans, rings.pxi); a forked child keeps only its
#   own objects' streams.
# - A parked window (Holder.window): the object's own memory, never shared. Cleared by
#   reset(), freed with the object.
# - Spare output buffers and scratch (shelves Ring.spare, Ring.scratch): nobody's (token
#   0). Only empty buffers and scratch at rest (no pending output, no open block's code
#   tables: fd_take_scratch) are shelved, and every engine writes them before it reads them.
# - The message engine's work buffers (ISA-L's; shelf Ring.works, WholeWork): hold the
#   window of the decompressor whose message was decoded there last, proved by the token
#   the work was shelved with == Decompressor._window_token (_give_whole_work; any other
#   use of the work, a zlib-decoded message, reset(), an error, no context takeover or a
#   large buffer freed sets one side to 0).
#   A work whose token is not the caller's is written before it is read: the caller's
#   window is copied in from its stream, and ISA-L refuses a back-reference before it.
#   A forked child frees the spares (_after_fork_in_child).
# - Kept messages for compress once (_ParameterSet.kept, _Led): trusted by a compressor only
#   when its history token equals the message's (Compressor._history, from
#   _new_token: compressors with one token hold the same window), or when its tail
#   does (Compressor._tail_history and _tail_bytes: its last window of bytes are that
#   history's, from the group's messages it compressed alone in a row; any other
#   message it compresses, a reset, an error or taking another's state sets
#   _tail_bytes to 0; a straggler takes another's state by its tail only if that one's
#   whole window, _Led.context bytes, is its own tail: _rejoin). The leader
#   is a weak reference (a freed leader is nobody).
#   Cleared: reset() and an error give the compressor history 0 (an empty window: it
#   never matches a message compressed from another history); _forget_kept() and a
#   forked child drop them all.
# - A start-over's state for the compressor it left behind (_ParameterSet.start_over_led, with
#   _Led.left_behind): set only once the start-over message is committed and kept, both
#   at once under the ring lock; taken only by the compressor whose history token is
#   left_behind (it sent that message last), under its lock. Dropped by the next
#   start-over, _forget_kept() and a forked child.
#
# - Heuristics only: Ring.last (the holder of the ring's last call) is compared, never
#   followed; a freed holder's address taken by a new one only makes that one's first
#   call look warm (Holder.cold), which decides nothing about bytes.
#
# The fallback (fastdeflate/_fallback/compress_once.py) shares only kept messages, under
# the same rule.

# The mechanism. A connection's own stream and window are claimed and settled through its
# Holder (_claim, _settle in rings.pxi). Everything a ring keeps for whichever call comes
# next is on a Shelf: taken (_unshelve) and given back (_shelve) under the ring lock,
# each item with the token of whose contents it holds (0: nobody's). A caller trusts an
# item's contents only when that token is its own (_is_own); every other item is written
# before it is read.

cdef struct Ring


cdef enum:
    SPARE_BUFFERS = 4  # items a shelf keeps for the calls of a ring's objects


cdef struct Shelf:
    void *item[SPARE_BUFFERS]
    size_t size[SPARE_BUFFERS]                # the item's capacity, where it has one
    unsigned long long token[SPARE_BUFFERS]   # whose contents it holds; 0: nobody's
    int count


cdef inline void *_unshelve(Shelf *shelf, size_t *size,
                            unsigned long long *token) noexcept nogil:
    """The newest (warmest) item, its size and token (ring lock held); NULL if none."""
    if shelf.count == 0:
        return NULL
    shelf.count -= 1
    if size != NULL:
        size[0] = shelf.size[shelf.count]
    if token != NULL:
        token[0] = shelf.token[shelf.count]
    return shelf.item[shelf.count]


cdef inline bint _shelve(Shelf *shelf, void *item, size_t size,
                         unsigned long long token) noexcept nogil:
    """Keep ``item`` for the next call (ring lock held); False if the shelf is full (the
    caller frees it): at most SPARE_BUFFERS, O(threads), not per connection."""
    if shelf.count == SPARE_BUFFERS:
        return False
    shelf.item[shelf.count] = item
    shelf.size[shelf.count] = size
    shelf.token[shelf.count] = token
    shelf.count += 1
    return True


ctypedef void (*free_item)(void *item) noexcept nogil


cdef void _empty_shelf(Shelf *shelf, free_item free) noexcept nogil:
    """Free everything on a shelf (ring lock held, or no other thread: a forked child)."""
    while shelf.count > 0:
        shelf.count -= 1
        free(shelf.item[shelf.count])


cdef size_t _shelved_bytes(Shelf *shelf) noexcept nogil:
    cdef size_t total = 0
    cdef int i
    for i in range(shelf.count):
        total += shelf.size[i]
    return total


cdef inline bint _is_own(unsigned long long held, unsigned long long mine) noexcept nogil:
    """Whether contents marked ``held`` are the caller's, who holds token ``mine``."""
    return held != 0 and held == mine


cdef void _raw_free(void *item) noexcept nogil:
    PyMem_RawFree(item)


cdef unsigned long long _new_token(Ring *ring) noexcept:
    """A token never handed out before in this ring (0 means nobody, or an empty window)."""
    cdef unsigned long long token
    _lock(ring.mutex)
    token = _new_token_locked(ring)
    _unlock(ring.mutex)
    return token


cdef inline unsigned long long _new_token_locked(Ring *ring) noexcept nogil:
    """_new_token(), the ring lock held."""
    ring.tokens += 1
    return ring.tokens
