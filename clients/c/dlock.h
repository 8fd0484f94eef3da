/* libdlock: a small blocking C client for dlockd.
 * SPDX-License-Identifier: MIT
 *
 * One dlock_t is one connection to dlockd, and one lock owner: every lock
 * it takes is released when dlock_close() is called or the process dies.
 * Calls block until dlockd answers. A dlock_t is not thread-safe, but for
 * dlock_cancel(): another thread, or a signal handler, calls it to withdraw
 * the wait of a call blocked on the dlock_t.
 *
 * Functions return 0 (or a documented non-negative value) on success and a
 * negative DLOCK_E* code on failure; dlock_strerror() names it. Loss
 * notifications (!LOST) are delivered to the callback set with
 * dlock_set_lost_cb(), while a call reads replies (also those read along
 * with its reply, before it returns: a lease of 1 ms can end that soon) or
 * from dlock_poll(); so are leader changes (!LEADER) of the names given to
 * dlock_observe(). */
#ifndef DLOCK_H
#define DLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLOCK_DEFAULT_SOCKET "/run/dlockd/dlockd.sock"
#define DLOCK_SOCKET_ENV     "DLOCK_SOCKET"
#define DLOCK_NAME_MAX       255
#define DLOCK_VALUE_MAX      255    /* bytes in a leader's value */
#define DLOCK_LINE_MAX       4096   /* longest reply line accepted */
#define DLOCK_PERMITS_MAX    10000  /* permits in one ACQUIRE or RELEASE */
#define DLOCK_MNAMES_MAX     64     /* names in one MLOCK, TRYMLOCK or MUNLOCK */

/* Every error: enum, name and message come from one table. New codes go
 * at the end, so that the values of the others never change.
 * DLOCK_EKIND: the name is another kind of lock (a plain lock, a
 * read/write lock, a semaphore and, on one dlockd, a fair lock of one name
 * exclude each other only so), or the request does not fit this
 * connection's hold of it (UNLOCK of a read or write hold, RUNLOCK/WUNLOCK
 * of a plain one, WLOCK while holding a read hold: an upgrade), or dlockd
 * offers no read/write locks, semaphores or fair locks (quorum). */
#define DLOCK_ERR_MAP(XX)                                                    \
    XX(CONNECT, "cannot connect to dlockd")                                  \
    XX(IO, "i/o error talking to dlockd")                                    \
    XX(CLOSED, "dlockd closed the connection")                               \
    XX(PROTO, "unexpected reply from dlockd")                                \
    XX(TIMEOUT, "lock not acquired within the wait")                         \
    XX(NOTHELD, "this connection does not hold that lock")                   \
    XX(BACKEND, "dlockd cannot reach redis")                                 \
    XX(LIMIT, "a dlockd limit was reached")                                  \
    XX(DENIED, "not allowed")                                                \
    XX(ARGS, "bad arguments")                                                \
    XX(NAME, "bad lock name")                                                \
    XX(UNKNOWN, "dlockd does not know the command")                          \
    XX(TOOLONG, "request line too long")                                     \
    XX(NOMEM, "out of memory")                                               \
    XX(LOST, "the lock was lost")                                            \
    XX(KIND, "not allowed for this kind of lock")                            \
    XX(CANCELLED, "the wait was cancelled")

enum {
    DLOCK_OK = 0,
    DLOCK_ERR_BASE_ = -1000,
#define XX(id, text) DLOCK_E##id,
    DLOCK_ERR_MAP(XX)
#undef XX
    DLOCK_ERR_END_
};

typedef struct dlock_s dlock_t;

/* Called for each "!LOST <name> <reason>" event. */
typedef void (*dlock_lost_cb)(dlock_t *d, const char *name, const char *reason,
                              void *data);

/* Called for each "!LEADER <name> <fence> <value>" of a name observed with
 * dlock_observe(): a new leader; value is NULL and fence 0 for "!LEADER
 * <name> NONE" (nobody leads, or dlockd cannot tell). Called from inside
 * the dlock call or dlock_poll() that read it: it must not make requests
 * on d (dlock_cancel() aside). */
typedef void (*dlock_leader_cb)(dlock_t *d, const char *name, uint64_t fence,
                                const char *value, void *data);

typedef enum {
    DLOCK_FREE = 0,   /* nobody holds it */
    DLOCK_MINE,       /* this connection holds it (a plain or a fair lock) */
    DLOCK_TAKEN,      /* someone else holds it (a plain or a fair lock) */
    DLOCK_READ,       /* a read/write lock with read holds */
    DLOCK_WRITE,      /* a read/write lock with a write hold */
    DLOCK_SEM         /* a semaphore (permits set, held or not) */
} dlock_state_t;

/* A semaphore's numbers in dlock_status_t ("OK SEM <available> <mine>"). */
typedef struct dlock_sem_s {
    uint32_t available;   /* permits free now */
    uint32_t mine;        /* permits this connection holds */
} dlock_sem_t;

/* The layout and size stay as they were before read/write locks
 * (libdlock.so.0): the number of readers of a DLOCK_READ lock is in the
 * raw reply, "OK READ <readers> <mine> <ttl_ms>" (dlock_request "STATUS
 * <name>"), and a semaphore's numbers share fence's place, which only
 * DLOCK_MINE uses. */
typedef struct dlock_status_s {
    dlock_state_t state;
    uint32_t holds;       /* DLOCK_MINE; DLOCK_READ, DLOCK_WRITE: this
                             connection's holds of that kind (0: others');
                             DLOCK_SEM: the permits it holds (= sem.mine) */
    long long ttl_ms;     /* DLOCK_MINE, DLOCK_TAKEN, DLOCK_READ,
                             DLOCK_WRITE; -1 when unknown, and for
                             DLOCK_FREE and DLOCK_SEM */
    union {
        uint64_t fence;   /* DLOCK_MINE; 0 for the others but DLOCK_SEM */
        dlock_sem_t sem;  /* DLOCK_SEM only */
    };
} dlock_status_t;

/* Connects to path; NULL means $DLOCK_SOCKET, else DLOCK_DEFAULT_SOCKET.
 * Returns NULL with *err set on failure (err may be NULL): DLOCK_ENOMEM, or
 * DLOCK_ECONNECT with errno telling why; dlock_strerror(DLOCK_ECONNECT)
 * then names the socket and the reason, e.g. "cannot connect to dlockd at
 * /run/dlockd/dlockd.sock: No such file or directory (is dlockd running?)". */
dlock_t *dlock_connect(const char *path, int *err);
/* Sends QUIT if possible and closes: every held lock is released. */
void dlock_close(dlock_t *d);

/* Waits as long as it takes. lease_ms 0: held while connected (watchdog).
 * Every lease_ms is whole milliseconds: round a lease computed from a time
 * left up, never down to 0 (no lease), as the other clients round a
 * fraction (a lease below 1 ms is 1 ms). */
int dlock_lock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
               uint32_t *holds);
/* Waits at most wait_ms; DLOCK_ETIMEOUT if not acquired, with the holder's
 * remaining lease in *ttl_ms (-1 unknown) when ttl_ms is not NULL. */
int dlock_trylock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                  uint64_t *fence, uint32_t *holds, long long *ttl_ms);
/* Drops one hold (of a plain or a fair lock); *holds_left tells how many
 * remain. */
int dlock_unlock(dlock_t *d, const char *name, uint32_t *holds_left);
/* Resets the lease (0: the lock's own); *ttl_ms is the new lease. Also
 * for the permits this connection holds of a semaphore. */
int dlock_renew(dlock_t *d, const char *name, uint32_t lease_ms, long long *ttl_ms);
/* Multi-name locks: all n names (1..DLOCK_MNAMES_MAX, no name twice;
 * otherwise DLOCK_EARGS) at once, or none. The wait holds none of them, so
 * two callers taking overlapping sets in any order cannot deadlock. Each
 * name granted is an ordinary plain-lock hold of this connection, as
 * dlock_lock()'s: dlock_unlock() releases it, dlock_status() shows it, and a
 * name already held counts as a reentry (its fence is the hold's). The
 * names share lease_ms (0: the watchdog); a name lost reaches the lost
 * callback alone and leaves the others held. The request must fit one
 * line (DLOCK_LINE_MAX; dlockd's max_line): else DLOCK_ETOOLONG.
 *
 * Waits as long as it takes; fences[i] (n of them; may be NULL) is
 * names[i]'s fence. dlock_cancel() withdraws the wait as on dlock_lock():
 * DLOCK_ECANCELLED, holding none of the names. */
int dlock_mlock(dlock_t *d, size_t n, const char *const *names, uint32_t lease_ms,
                uint64_t *fences);
/* Waits at most wait_ms; DLOCK_ETIMEOUT if not all acquired (none is then
 * held), with the longest remaining lease it saw in *ttl_ms (-1 unknown)
 * when ttl_ms is not NULL. */
int dlock_trymlock(dlock_t *d, size_t n, const char *const *names, uint32_t wait_ms,
                   uint32_t lease_ms, uint64_t *fences, long long *ttl_ms);
/* Drops one hold of each name; holds_left[i] (may be NULL) is what remains
 * of names[i]. DLOCK_ENOTHELD, releasing nothing, if this connection does
 * not hold one of them: after the loss of one name of a set, release each
 * other with dlock_unlock() (DLOCK_ENOTHELD for the lost one). */
int dlock_munlock(dlock_t *d, size_t n, const char *const *names, uint32_t *holds_left);
/* Read/write locks: any number of owners may hold read holds at once, a
 * write hold excludes every other hold. They take, wait and time out as
 * dlock_lock(), dlock_trylock() and dlock_unlock() do, and are released
 * by their own unlock, one hold at a time. A read grant's fence is the
 * name's fence counter as it is (0 if never written; two readers may get
 * the same one); a write grant raises it. A writer may take read holds too
 * (a downgrade); WLOCK while holding a read hold (an upgrade) is
 * DLOCK_EKIND, as is any of these on a name held as a plain lock, and
 * dlock_lock() or dlock_unlock() on a read/write lock. */
int dlock_rlock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
                uint32_t *holds);
int dlock_wlock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
                uint32_t *holds);
int dlock_tryrlock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                   uint64_t *fence, uint32_t *holds, long long *ttl_ms);
int dlock_trywlock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                   uint64_t *fence, uint32_t *holds, long long *ttl_ms);
/* Drops one read (write) hold; *holds_left tells how many of that kind
 * remain. */
int dlock_runlock(dlock_t *d, const char *name, uint32_t *holds_left);
int dlock_wunlock(dlock_t *d, const char *name, uint32_t *holds_left);
/* Fair locks (Redisson's RFairLock layout): waiters queue in Redis and are
 * granted in the order they came, across every dlockd and Redisson client
 * of the name. They take, wait, time out and are renewed as dlock_lock()
 * and dlock_trylock() do (reentrant, fenced, leased or kept by the
 * watchdog, !LOST when lost), dlock_unlock() releases them, and
 * dlock_status() shows them as a plain lock (MINE, TAKEN or FREE). A
 * waiter's place in the queue is kept while it waits and given up at once
 * when its connection closes or its wait ends. On one dlockd a name is one
 * kind at a time: the other lock calls on a name it holds or waits for as
 * a fair lock, or these on a name it holds as another kind, are
 * DLOCK_EKIND (and so are these on a dlockd in quorum mode). Across
 * dlockds a fair and a plain lock of one name exclude each other, but a
 * dlock_lock() waiter takes no place in the queue.
 *
 * Waits for its turn, as long as it takes. */
int dlock_fairlock(dlock_t *d, const char *name, uint32_t lease_ms, uint64_t *fence,
                   uint32_t *holds);
/* Waits at most wait_ms for its turn; DLOCK_ETIMEOUT if not acquired, with
 * the holder's remaining lease in *ttl_ms (-1 unknown) when ttl_ms is not
 * NULL, and its place is gone. wait_ms 0 tries once without taking a
 * place: DLOCK_ETIMEOUT when the lock is held or anyone waits for it. */
int dlock_tryfairlock(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t lease_ms,
                      uint64_t *fence, uint32_t *holds, long long *ttl_ms);
/* Counting semaphores (Redisson's RPermitExpirableSemaphore layout):
 * a name with a number of permits, set once with dlock_seminit(); each
 * owner takes and gives back any number of them at a time. Permits belong
 * to the connection that acquired them, as locks do: dlock_close() or the
 * process dying gives them back at once. A semaphore's name refuses the
 * lock calls above, and a lock's name these, with DLOCK_EKIND (so does a
 * dlockd in quorum mode). Bad numbers are DLOCK_EARGS.
 *
 * Sets the semaphore's permits (0..2147483647) if they were never set:
 * *set is 1 then, 0 if they were already set (they stay as they were). */
int dlock_seminit(dlock_t *d, const char *name, uint32_t permits, int *set);
/* Waits until permits (1..DLOCK_PERMITS_MAX) are free and takes them;
 * *held is how many of the semaphore's permits this connection holds now
 * (a holder may acquire more). A semaphore whose permits were never set
 * is waited for until someone sets them. lease_ms 0: the permits are held
 * while connected (watchdog); else they end after lease_ms unless renewed
 * with dlock_renew(), and the connection gets !LOST <name> expired. Any
 * !LOST of a semaphore means that every permit this connection held of
 * it is gone. */
int dlock_acquire(dlock_t *d, const char *name, uint32_t permits, uint32_t lease_ms,
                  uint32_t *held);
/* As dlock_acquire(), waiting at most wait_ms (0: one try): DLOCK_ETIMEOUT
 * if not enough permits were free by then (or they were never set). */
int dlock_tryacquire(dlock_t *d, const char *name, uint32_t permits, uint32_t wait_ms,
                     uint32_t lease_ms, uint32_t *held);
/* Gives permits back; *left is how many this connection still holds.
 * DLOCK_ENOTHELD, releasing none, if it holds fewer than permits. */
int dlock_release(dlock_t *d, const char *name, uint32_t permits, uint32_t *left);
/* Count-down latches (Redisson's RCountDownLatch layout): a count set
 * once with dlock_latchset() and counted down by anyone; when it reaches 0
 * the latch is gone and every waiter is released, on every dlockd of the
 * Redis (and Redisson's await()). A latch has no holder: nothing of it
 * belongs to a connection, and dlock_close() changes no count. A latch's
 * name refuses the lock calls, and a lock's name these, with DLOCK_EKIND
 * (so does a dlockd in quorum mode).
 *
 * Sets the count (1..2147483647; else DLOCK_EARGS) if no latch of the name
 * exists: *set is 1 then, 0 if one existed (its count stays as it was). */
int dlock_latchset(dlock_t *d, const char *name, uint32_t count, int *set);
/* Counts one down; *left is the count after it: 0 means the latch is gone
 * and its waiters are released. A latch that does not exist stays so (0). */
int dlock_countdown(dlock_t *d, const char *name, uint32_t *left);
/* Waits, as long as it takes, until the count is 0; at once when no latch
 * of the name exists. dlock_cancel() withdraws the wait: DLOCK_ECANCELLED
 * (also when the count reached 0 as the cancel went out). */
int dlock_await(dlock_t *d, const char *name);
/* As dlock_await(), waiting at most wait_ms (0: one look): DLOCK_ETIMEOUT
 * if the count was still above 0, with that count in *count (may be
 * NULL). */
int dlock_tryawait(dlock_t *d, const char *name, uint32_t wait_ms, uint32_t *count);
/* The count now in *count: 0 when no latch of the name exists. */
int dlock_latchcount(dlock_t *d, const char *name, uint32_t *count);
/* Any lock's state: a plain or a fair lock is FREE, MINE or TAKEN, a
 * read/write lock READ or WRITE (FREE once nobody holds it), a semaphore
 * SEM with its numbers in sem, a count-down latch FREE (nobody holds one:
 * dlock_latchcount() tells its count). */
int dlock_status(dlock_t *d, const char *name, dlock_status_t *out);
/* *removed is 1 if a lock was removed, 0 if there was none. On a
 * semaphore it gives back every permit, whoever holds them (1), or finds
 * none held (0); the holders get !LOST <name> forced. */
int dlock_force_unlock(dlock_t *d, const char *name, int *removed);
int dlock_ping(dlock_t *d);
/* Copies INFO's key=value line (without "OK ") into buf. */
int dlock_info(dlock_t *d, char *buf, size_t len);

/* Leader election: a name's leader is one connection at a time. Its value
 * (1..DLOCK_VALUE_MAX bytes of 0x21-0x7E, as a name; otherwise
 * DLOCK_EARGS) is what observers and dlock_leader() are told, e.g.
 * "10.0.0.5:8080"; its fence rises from leadership to leadership. An
 * election's name is its own kind: the lock calls on it, and dlock_elect()
 * on a lock's name, are DLOCK_EKIND.
 *
 * Campaigns for name and waits, as long as it takes, until this
 * connection leads it; *fence is the leadership's fence. Candidates are
 * served in the order they came. dlock_cancel() withdraws the campaign as
 * it does a lock's wait (DLOCK_ECANCELLED, leading nothing: a leadership
 * won as the cancel raced it is resigned). lease_ms 0: it leads while
 * connected (watchdog); else until lease_ms runs out without dlock_renew().
 * Losing the leadership (expired, forced, backend) reaches the lost
 * callback as a lock's loss does. Campaigning again for a name it leads
 * answers at once with the same fence. */
int dlock_elect(dlock_t *d, const char *name, const char *value, uint32_t lease_ms,
                uint64_t *fence);
/* Gives up leading name (the next candidate leads at once) or campaigning
 * for it: *was is 1 then, 0 if this connection did neither. */
int dlock_resign(dlock_t *d, const char *name, int *was);
/* The leader of name now, seen from any dlockd: returns 1 with its fence
 * and its value (copied into value, cut to cap - 1 bytes; cap
 * DLOCK_VALUE_MAX + 1 holds every value; value may be NULL), or 0 when
 * nobody leads (*fence 0, value ""). */
int dlock_leader(dlock_t *d, const char *name, uint64_t *fence, char *value, size_t cap);
/* Observes name: returns as dlock_leader() (the leader now), and from then
 * on calls cb with data for every leader change dlockd tells, through the
 * event path (while a call reads replies, or from dlock_poll(); poll
 * dlock_fd() to learn when one waits). The fences told never go down; one
 * is told again only after a "none" came between. Observing a name again
 * replaces its callback. Above dlockd's limit of observed names per
 * connection, DLOCK_ELIMIT. */
int dlock_observe(dlock_t *d, const char *name, dlock_leader_cb cb, void *data,
                  uint64_t *fence, char *value, size_t cap);
/* Stops observing name: no callback for it after this returns. *was is 1
 * if it was observed, 0 if not (was may be NULL). */
int dlock_unobserve(dlock_t *d, const char *name, int *was);

/* LIST: the locks whose names match a glob (Redis's: * ? [..] \), across
 * every dlockd and Redisson client of the Redis, at most limit (1 to
 * DLOCK_LIST_MAX; 0: dlockd's default, 100), sorted by name. cb gets each
 * entry (valid during the call; a non-zero return stops the calls, the
 * reply is still read); *more (may be NULL) is 1 when more names match.
 * Returns the entries told, or a negative code. Unknown numbers are -1;
 * host "" when no dlockd registered the holder (a Redisson client). */
#define DLOCK_LIST_MAX      1000
#define DLOCK_LIST_WHO_MAX  8
typedef struct dlock_who_s {
    char host[64];
    long long dlockd_pid, pid, uid;
    long long count;                /* holds, permits; a waiter: permits asked or -1 */
    long long age_ms;               /* held or waited for (clients of the dlockd asked) */
} dlock_who_t;
typedef struct dlock_list_entry_s {
    char name[DLOCK_NAME_MAX + 1];
    char kind[8];                   /* lock, read, write, fair, elect, sem, latch */
    long long ttl_ms;               /* -1: no expiry */
    uint64_t fence;                 /* 0: none */
    size_t holders_total, nholders;
    dlock_who_t holders[DLOCK_LIST_WHO_MAX];
    size_t waiters_total, nwaiters;
    dlock_who_t waiters[DLOCK_LIST_WHO_MAX];
    char value[DLOCK_VALUE_MAX + 1]; /* elect: the leader's value; sem: permits free;
                                        latch: its count */
} dlock_list_entry_t;
typedef int (*dlock_list_cb)(void *data, const dlock_list_entry_t *e);
int dlock_list(dlock_t *d, const char *pattern, uint32_t limit, dlock_list_cb cb, void *data,
               int *more);

/* Sends one raw request line (without LF) and copies the reply line into
 * buf. Events met on the way go to the lost callback. */
int dlock_request(dlock_t *d, const char *line, char *buf, size_t len);

/* Withdraws the wait of the waiting call blocked on d now: dlock_lock(),
 * dlock_rlock(), dlock_wlock(), dlock_fairlock(), dlock_acquire(),
 * dlock_elect(), dlock_mlock(), dlock_await(), or a dlock_try*() with a
 * wait_ms above 0.
 * That call then returns DLOCK_ECANCELLED holding nothing: when the grant
 * raced the cancel, it gives back what it got (one hold, its permits, the
 * leadership, or one hold of each name) before returning. d
 * stays usable. Safe to call from another thread, and from a signal
 * handler (it sets an atomic flag and writes "CANCEL" with one send(2)).
 * Returns 1 if a wait was being cancelled, 0 if no waiting call was in
 * progress: then nothing is done (a cancel is not kept for a later call),
 * and dlock_cancel() after the call returned changes nothing. A waiting
 * call keeps d's other requests from being sent until it returns. */
int dlock_cancel(dlock_t *d);

/* Loss notifications. */
void dlock_set_lost_cb(dlock_t *d, dlock_lost_cb cb, void *data);
/* The socket, to poll for POLLIN: readable means an event (or EOF) waits;
 * then call dlock_poll(). */
int dlock_fd(const dlock_t *d);
/* Reads whatever events have arrived, waiting at most timeout_ms (0: do
 * not wait, -1: forever) for the first. Returns the number of events
 * handled, or DLOCK_ECLOSED if dlockd closed the connection. */
int dlock_poll(dlock_t *d, int timeout_ms);

/* A message for people: a constant string for every code, except
 * DLOCK_ECONNECT right after dlock_connect() failed with it in the same
 * thread, when it is the full reason with the socket's path and a hint
 * (in thread-local storage, valid until that thread's next dlock_connect();
 * elsewhere DLOCK_ECONNECT gives "cannot connect to dlockd"), and
 * DLOCK_ENAME after a call in the same thread refused a name itself, when
 * it shows the name quoted (bytes outside 0x20-0x7E as \xHH, cut after 40
 * bytes) and why, as the other clients do: 'bad lock name "a b": only
 * printable ASCII without spaces is allowed', 'bad lock name "": must be 1
 * to 255 bytes' (thread-local too, until that thread's next refused name;
 * "bad lock name" when dlockd answered ERR NAME). */
const char *dlock_strerror(int err);
/* The code's name: "NOTHELD", "DENIED", ... ("OK" for 0, "?" if unknown). */
const char *dlock_err_name(int err);

#ifdef __cplusplus
}
#endif

#endif
