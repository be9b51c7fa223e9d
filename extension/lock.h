/* fastdeflate's locks: one per codec object and one per ring (parameter set).

   (Part of the compiled extension: basics.pxi declares it, _lock() and _unlock() use it.)

   CPython's PyThread locks are semaphores, and on CPython 3.11 and 3.12 every acquire,
   even a non-blocking one, reads the monotonic clock (it computes a deadline first): a
   compress-once follower takes five locks a message, and the clock was a fifth of its
   time. Where pthreads exist the locks are pthread mutexes, which do not. Windows keeps
   PyThread locks; a build with FD_LOCKS_PYTHREAD (FASTDEFLATE_LOCKS=pythread) does
   too, so that branch runs here (CI's engines step).

   A codec object keeps its lock inside itself (an fd_lock_cell: fd_lock_in() sets it
   up, fd_lock_out() ends it), one allocation and one cache line fewer per connection;
   a ring's lock is allocated (fd_lock_new(), fd_lock_free()).

   Both kinds are taken without the GIL only by fd_lock_wait(), after fd_lock_try()
   failed; a lock is released by the thread that took it (fork: the forking thread
   takes every ring lock before fork() and releases them in parent and child). */
#ifndef FASTDEFLATE_LOCK_H
#define FASTDEFLATE_LOCK_H

#include "Python.h"
#include "pythread.h"

#if defined(_WIN32) || defined(FD_LOCKS_PYTHREAD)

#define FD_LOCKS "pythread"
typedef PyThread_type_lock fd_lock_t;
typedef struct { char unused; } fd_lock_cell;
#define fd_lock_new() PyThread_allocate_lock()
#define fd_lock_free(l) PyThread_free_lock(l)
#define fd_lock_in(cell) PyThread_allocate_lock()
#define fd_lock_out(l) PyThread_free_lock(l)
#define fd_lock_try(l) PyThread_acquire_lock((l), NOWAIT_LOCK)
#define fd_lock_wait(l) ((void)PyThread_acquire_lock((l), WAIT_LOCK))
#define fd_unlock(l) PyThread_release_lock(l)

#else

#include <pthread.h>

#define FD_LOCKS "pthread"
typedef pthread_mutex_t *fd_lock_t;
typedef struct { pthread_mutex_t mutex; } fd_lock_cell;

/* The lock kept in ``cell`` (inside its owner), or NULL if it cannot be made. */
static fd_lock_t fd_lock_in(fd_lock_cell *cell)
{
    return pthread_mutex_init(&cell->mutex, NULL) == 0 ? &cell->mutex : NULL;
}

static void fd_lock_out(fd_lock_t lock)
{
    pthread_mutex_destroy(lock);
}

/* A new unlocked lock, or NULL (out of memory: the caller raises MemoryError). */
static fd_lock_t fd_lock_new(void)
{
    fd_lock_t lock = (fd_lock_t)PyMem_RawMalloc(sizeof(pthread_mutex_t));
    if (lock != NULL && pthread_mutex_init(lock, NULL) != 0) {
        PyMem_RawFree(lock);
        lock = NULL;
    }
    return lock;
}

static void fd_lock_free(fd_lock_t lock)
{
    pthread_mutex_destroy(lock);
    PyMem_RawFree(lock);
}

/* 1 if taken, 0 if another thread holds it. */
static int fd_lock_try(fd_lock_t lock)
{
    return pthread_mutex_trylock(lock) == 0;
}

static void fd_lock_wait(fd_lock_t lock)
{
    pthread_mutex_lock(lock);
}

static void fd_unlock(fd_lock_t lock)
{
    pthread_mutex_unlock(lock);
}

#endif

/* A pointer that other threads write under a lock this thread does not hold, read as
   a hint (whether a ring has orphans: rings.pxi), and its writes: atomic where the
   compiler has the builtins (GCC, Clang), a volatile access elsewhere (MSVC, whose
   volatile loads and stores are atomic for a pointer). A stale hint only delays the
   work until the next holder of the ring lock looks. */
#if defined(__GNUC__) || defined(__clang__)
#define fd_peek(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define fd_poke(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#else
#define fd_peek(p) (*(void *volatile *)(p))
#define fd_poke(p, v) (*(void *volatile *)(p) = (v))
#endif

#endif
