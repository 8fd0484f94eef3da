/* The lock manager: owners, holds, waiters and the watchdog, over a backend.
 * SPDX-License-Identifier: MIT
 *
 * It takes typed requests and answers with typed replies; the session
 * turns them into protocol text. An owner may have any number of requests
 * in flight, each named by the caller's call pointer. Each request gets
 * exactly one reply: either at once, as lockmgr_request()'s return value
 * says, or later through the owner's reply callback with its call, never
 * before lockmgr_request() returns. Events (a hold lost, an observed
 * election's new leader) come through the owner's event callback at any
 * time outside lockmgr_request(). After lockmgr_owner_drop() neither
 * callback is called again for that owner. */
#ifndef DLOCK_LOCKMGR_H
#define DLOCK_LOCKMGR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/modes.h"
#include "daemon/util/histo.h"
#include "daemon/util/timers.h"

typedef struct lockmgr_s lockmgr_t;
typedef struct lock_owner_s lock_owner_t;
typedef struct backend_s backend_t;

typedef enum {
    LOCK_VERB_LOCK = 0,   /* wait for the lock */
    LOCK_VERB_TRYLOCK,    /* wait at most wait_ms (0: one try) */
    LOCK_VERB_UNLOCK,     /* one hold less */
    LOCK_VERB_RENEW,      /* reset the lease now */
    LOCK_VERB_STATUS,
    LOCK_VERB_FORCE,      /* FORCEUNLOCK, for admins */
    LOCK_VERB_WHO,        /* who holds it */
    LOCK_VERB_OWN,        /* a request only the mode's kind has (op) */
    LOCK_VERB_LEADER,     /* an election's leader now (ELECT mode) */
    LOCK_VERB_OBSERVE,    /* ... and its later leaders as events */
    LOCK_VERB_MLOCK,      /* wait for all of names[] (MULTI mode) */
    LOCK_VERB_TRYMLOCK,   /* ... at most wait_ms (0: one try) */
    LOCK_VERB_MUNLOCK     /* one hold less of each of names[] */
} lock_verb_t;

/* What kind of hold a request is about: one of daemon/modes.h's list.
 * Each mode belongs to one lock kind (daemon/lock/kind.h), which says what
 * the mode does. */
typedef enum {
#define XX(id) LOCK_MODE_##id,
    DLOCK_MODES(XX)
#undef XX
    LOCK_MODE_COUNT
} lock_mode_t;
/* The mode of a request about a name whatever its kind (STATUS, WHO,
 * FORCEUNLOCK, RENEW). */
#define LOCK_MODE_ANY LOCK_MODE_MUTEX

/* One name of a multi-name request. */
typedef struct lock_name_s {
    const char *name;
    size_t len;
} lock_name_t;

typedef struct lock_request_s {
    lock_verb_t verb;
    lock_mode_t mode;     /* LOCK, TRYLOCK, UNLOCK (SEM: ACQUIRE, TRYACQUIRE, RELEASE) */
    const char *name;     /* valid during lockmgr_request() only */
    size_t len;
    uint32_t wait_ms;     /* TRYLOCK */
    uint32_t lease_ms;    /* LOCK, TRYLOCK: 0 asks for watchdog mode; RENEW: 0 the
                             hold's own; a watchdog hold ignores it (PROTOCOL.md) */
    uint32_t count;       /* SEM: the permits to take or give back; OWN: the
                             request's number, if its op takes one (SEMINIT's
                             size) */
    uint8_t op;           /* OWN: which of its kind's own requests, in the
                             kind's numbering (semaphore.c: SEMINIT 0;
                             elect.h: RESIGN, UNOBSERVE) */
    const char *value;    /* ELECT: what observers are told, value_len bytes,
                             valid during lockmgr_request() only */
    size_t value_len;
    const lock_name_t *names; /* MULTI: nnames distinct names, valid during
                                 lockmgr_request() only */
    size_t nnames;
} lock_request_t;

/* One protocol word of a kind's, a row of its table (kind.h): the request
 * it makes and what the session needs to know of it. The session matches
 * the word with proto/'s command table by its text; the lock manager
 * knows nothing else of the protocol. */
typedef struct lock_word_s {
    const char *word;     /* the command word, as PROTO_CMD_MAP spells it */
    lock_verb_t verb;
    lock_mode_t mode;
    uint8_t op;           /* LOCK_VERB_OWN: which of the kind's own requests */
    unsigned flags;       /* LOCK_WORD_* */
} lock_word_t;

/* It changes its names' locks: it waits for the connection's earlier such
 * requests on any of them to be answered. */
#define LOCK_WORD_TURNS    0x01u
/* It changes what the connection observes of its name: it takes turns
 * with the connection's other such requests, apart from TURNS. */
#define LOCK_WORD_OBSERVES 0x02u
/* It gives back what the connection holds: it does not wait behind the
 * connection's own request of the name that waits for a holder. */
#define LOCK_WORD_RELEASES 0x04u
/* It may wait for a holder (CANCEL withdraws it) ... */
#define LOCK_WORD_WAITS    0x08u
/* ... at most wait_ms: with 0 it only tries. */
#define LOCK_WORD_TRY      0x10u
/* Its grant is answered with its fence alone: OK <fence> (a leader holds
 * once). */
#define LOCK_WORD_FENCE    0x20u
/* The flags of words that behave as LOCK, TRYLOCK and UNLOCK do. */
#define LOCK_WORD_AS_LOCK    (LOCK_WORD_TURNS | LOCK_WORD_WAITS)
#define LOCK_WORD_AS_TRYLOCK (LOCK_WORD_AS_LOCK | LOCK_WORD_TRY)
#define LOCK_WORD_AS_UNLOCK  (LOCK_WORD_TURNS | LOCK_WORD_RELEASES)

/* Every kind's words, kind after kind: the i-th, NULL past the last. */
const lock_word_t *lockmgr_word(size_t i);

/* What a kind is called in ERR KIND's text: what a name of it is (held
 * as), what gives a hold of it back, its plural. */
typedef struct lock_kind_text_s {
    const char *held_as;
    const char *release;
    const char *plural;
} lock_kind_text_t;

typedef enum {
    LOCK_REPLY_GRANTED = 0,  /* fence, holds */
    LOCK_REPLY_VALUE,        /* value: UNLOCK holds left, RENEW lease ms, FORCE removed;
                                a semaphore's grant and RELEASE: the permits held,
                                SEMINIT 1 or 0 */
    LOCK_REPLY_TIMEOUT,      /* ttl_ms: the holder's, -1 unknown */
    LOCK_REPLY_FREE,         /* STATUS */
    LOCK_REPLY_TAKEN,        /* STATUS: ttl_ms */
    LOCK_REPLY_MINE,         /* STATUS: holds, ttl_ms, fence */
    LOCK_REPLY_RW,           /* STATUS of a read/write lock: mode (READ or WRITE),
                                holders (readers, or 1 writer), holds (this
                                owner's of that mode), ttl_ms */
    LOCK_REPLY_SEM,          /* STATUS of a semaphore: holders (permits available),
                                holds (this owner's) */
    LOCK_REPLY_HELD,         /* WHO: ttl_ms and holder_* */
    LOCK_REPLY_LEADER,       /* LEADER, OBSERVE: fence and leader, fence 0: none */
    LOCK_REPLY_LIST,         /* MLOCK's fences, MUNLOCK's holds left: list,
                                count of them, in the request's order */
    LOCK_REPLY_ERROR         /* err, detail */
} lock_reply_type_t;

typedef enum {
    LOCK_ERR_NOTHELD = 0,
    LOCK_ERR_BACKEND,
    LOCK_ERR_LIMIT,
    LOCK_ERR_DENIED,
    LOCK_ERR_ARGS,        /* a lease longer than the backend grants */
    LOCK_ERR_KIND,        /* the name is another kind of lock, or an upgrade */
    LOCK_ERR_CANCELLED    /* the wait was withdrawn (lockmgr_cancel) */
} lock_err_t;

/* Why an error, typed: the session words it. The reply's fields each one
 * uses are named. */
typedef enum {
    LOCK_WHY_NONE = 0,        /* nothing more to say */
    LOCK_WHY_BACKEND,         /* detail: the backend's own text */
    LOCK_WHY_SHUTDOWN,        /* the daemon is stopping */
    LOCK_WHY_NOMEM,           /* out of memory */
    LOCK_WHY_MAX_LOCKS,       /* max_locks_per_client reached */
    LOCK_WHY_MAX_WAITERS,     /* max_waiters reached */
    LOCK_WHY_MAX_LOCKS_UID,   /* max_locks_per_uid reached */
    LOCK_WHY_MAX_WAITERS_UID, /* max_waiters_per_uid reached */
    LOCK_WHY_LEASE_MAX,       /* limit: the longest lease the backend grants */
    LOCK_WHY_PERMITS_RANGE,   /* limit: permits are 1 to this */
    LOCK_WHY_PERMITS_MAX,     /* limit: a connection's permits of one semaphore */
    LOCK_WHY_PERMITS_HELD,    /* limit: the permits this connection holds */
    LOCK_WHY_HELD_AS,         /* name is held as held's kind */
    LOCK_WHY_RELEASE_AS,      /* this connection holds it as held's kind: that
                                 kind's verb releases it */
    LOCK_WHY_UPGRADE,         /* a write lock asked while holding a read lock */
    LOCK_WHY_UNSUPPORTED,     /* held's kind is not offered by the topology
                                 named in detail */
    LOCK_WHY_NO_HOLDER,       /* WHO of a name held as held's kind, which has
                                 no one holder */
    LOCK_WHY_MAX_OBSERVES     /* limit: max_observes_per_client reached */
} lock_why_t;

typedef struct lock_reply_s {
    lock_reply_type_t type;
    uint64_t fence;
    long long holds;
    long long ttl_ms;
    long long value;
    lock_err_t err;
    lock_why_t why;       /* ERROR: why, typed */
    lock_mode_t mode;     /* RW; ERROR: the mode held (HELD_AS, RELEASE_AS,
                             UNSUPPORTED, NO_HOLDER) */
    long long holders;    /* RW */
    long long limit;      /* ERROR: the number the why names */
    const char *detail;   /* ERROR: NULL, the backend's text (BACKEND) or the
                             topology's name (UNSUPPORTED), valid during the
                             callback */
    const char *name;     /* ERROR HELD_AS: the name, len bytes */
    size_t len;
    /* WHO (HELD): its dlockd's host ("" unknown: not a dlockd's holder)
     * and pid, and the holding client's pid and uid when that dlockd is
     * this one; -1 for what is not known. */
    const char *holder_host;
    long long holder_dlockd_pid;
    long long holder_pid;
    long long holder_uid;
    /* LEADER: the leader's value, leader_len bytes, valid during the callback */
    const char *leader;
    size_t leader_len;
    /* LIST: count numbers, valid during the callback (an answer at once:
     * until the next call into the lock manager) */
    const uint64_t *list;
    size_t count;
} lock_reply_t;

typedef enum {
    LOCK_LOST_EXPIRED = 0,
    LOCK_LOST_FORCED,
    LOCK_LOST_BACKEND
} lock_loss_t;

/* Something an owner is told unasked, about a name. */
typedef enum {
    LOCK_EVENT_LOST = 0,  /* a hold is gone: why */
    LOCK_EVENT_LEADER     /* an election the owner observes (OBSERVE) has a new
                             leader: fence and value, fence 0: none */
} lock_event_type_t;

typedef struct lock_event_s {
    lock_event_type_t type;
    const char *name;     /* len bytes, valid during the call */
    size_t len;
    lock_loss_t why;      /* LOST */
    uint64_t fence;       /* LEADER */
    const char *value;    /* LEADER: value_len bytes, valid during the call */
    size_t value_len;
} lock_event_t;

typedef void (*lock_reply_cb)(void *data, void *call, const lock_reply_t *reply);
/* Never called from inside lockmgr_request(). */
typedef void (*lock_event_cb)(void *data, const lock_event_t *ev);
typedef void (*lockmgr_done_cb)(lockmgr_t *mgr, void *data);

/* Watchdog: a lock is given up as lost (reason "backend") this long before
 * its lease could run out, counted from the last renewal Redis confirmed:
 * lease_ms / LOCKMGR_LOSS_MARGIN_DIV. */
#define LOCKMGR_LOSS_MARGIN_DIV 10
/* When a release of ours woke waiters of other daemons, the next hand-off
 * to a local waiter waits this long, so that they get their turn. */
#define LOCKMGR_YIELD_MS 2
/* A waiter whose grant was undone because too few replicas acknowledged
 * it (replicas_ack) tries again after this long. */
#define LOCKMGR_UNACKED_RETRY_MS 100
/* A waiter retries this often when the holder's key has no expiry. */
#define LOCKMGR_NO_TTL_RETRY_MS 1000
/* A fair lock's place outlives this much per Redisson place ahead of it:
 * each Redisson grant takes its wait off every place, at most this
 * (Redisson's default fairLockWaitTimeout, what lock() passes). */
#define LOCKMGR_FAIR_FOREIGN_WAIT_MS 300000
/* Watchdog batches in flight at once. */
#define LOCKMGR_RENEW_INFLIGHT 4
/* Most locks in one watchdog batch. */
#define LOCKMGR_RENEW_BATCH 500
/* Readers at the head of a queue try together, at most this many at once;
 * so do a semaphore's waiters while the permits known free cover them, and
 * a fair lock's waiters asking for their places. */
#define LOCKMGR_READS_INFLIGHT 128
/* Most permits of one semaphore a connection holds (and asks for at
 * once): each is an id in Redis that its scripts visit one by one. */
#define LOCKMGR_SEM_PERMITS_MAX 10000
/* Most permits a semaphore may have free, as a grant's reply says: sem.lua
 * counts them in Lua's numbers (doubles), exact up to 2^53; a count above
 * it (anyone may SET the key to 2^63 - 1, which comes back rounded to
 * -2^63) is a bad reply, and the sums of the free count stay far from
 * overflowing. */
#define LOCKMGR_SEM_FREE_MAX (1ULL << 53)

/* Most names in one multi-name request (MLOCK). */
#define LOCKMGR_MNAMES_MAX 64

/* Room for the names of the nodes down in INFO; more are cut at a comma. */
#define LOCKMGR_NODES_DOWN_MAX 256
/* Freed locks, queues, waiters and releases kept for reuse, of each
 * (daemon/util/pool.h); those of names up to LOCKMGR_POOL_NAME bytes. */
#define LOCKMGR_POOL_KEEP 1024
#define LOCKMGR_POOL_NAME 64

typedef struct lockmgr_stats_s {
    uint64_t locks_held;      /* holds this daemon has now */
    uint64_t waiters;         /* requests queued for a lock */
    int backend_up;           /* 1 while Redis answers */
    const char *backend;      /* the topology's name */
    unsigned nodes;           /* Redis nodes the topology uses now */
    unsigned nodes_up;        /* ... with their command connection up */
    char nodes_down[LOCKMGR_NODES_DOWN_MAX]; /* the others' names, comma-
                                                separated, "-" for none */
    uint64_t grants;          /* new grants (fences issued) */
    uint64_t reentries;       /* reentrant grants */
    uint64_t releases;
    uint64_t timeouts;        /* TRYLOCKs that timed out */
    uint64_t cancelled;       /* waits withdrawn by CANCEL */
    uint64_t lost;            /* !LOST events sent */
    uint64_t lost_by[3];      /* ... by lock_loss_t */
    uint64_t renewals;        /* locks renewed by the watchdog */
    uint64_t backend_errors;  /* requests answered ERR BACKEND */
    const histo_t *wait_time; /* LOCK/TRYLOCK to a new grant, µs */
    const histo_t *hold_time; /* a new grant to the hold's end, µs */
} lockmgr_stats_t;

/* What elections and observers amount to now (the metrics). */
typedef struct lockmgr_elect_stats_s {
    uint64_t observers;       /* OBSERVEs in force, all connections */
    uint64_t observed;        /* names observed: one watch each */
    uint64_t candidates;      /* ELECTs waiting here */
    uint64_t leader_events;   /* !LEADER events sent */
    uint64_t rereads;         /* leader reads for observers */
} lockmgr_elect_stats_t;

/* backend and timers stay the caller's; the lock manager takes the
 * backend's state callback. */
lockmgr_t *lockmgr_new(const conf_t *conf, timers_t *timers, backend_t *backend);
/* Releases every lock still held, then calls done (from a timer, never
 * from inside this call). After done, only lockmgr_free() may be called. */
void lockmgr_shutdown(lockmgr_t *mgr, lockmgr_done_cb done, void *data);
/* Frees the manager; close the backend first, so that its pending
 * callbacks still find the manager. */
void lockmgr_free(lockmgr_t *mgr);

/* A new owner (a connection). NULL on no memory. */
lock_owner_t *lockmgr_owner_new(lockmgr_t *mgr, uint64_t id, uid_t uid, lock_reply_cb on_reply,
                                lock_event_cb on_event, void *data);
/* The owner is gone: ends its observations, cancels its wait, releases
 * all its locks, frees it. Called from inside one of the owner's
 * callbacks, it finishes from a timer once the callback has returned (run
 * the timers before lockmgr_free()); the owner hears nothing more either
 * way, and gains no observation meanwhile. */
void lockmgr_owner_drop(lockmgr_t *mgr, lock_owner_t *owner);
/* The peer's pid, for WHO (0: unknown). */
void lockmgr_owner_set_pid(lock_owner_t *owner, pid_t pid);
size_t lockmgr_owner_held(const lock_owner_t *owner);
/* 1 if the owner holds name now, as any kind. */
int lockmgr_owner_holds(const lock_owner_t *owner, const char *name, size_t len);
/* Its requests in flight. */
size_t lockmgr_owner_waiting(const lock_owner_t *owner);

/* Handles one request. Returns 1 with *now filled when it is answered at
 * once, 0 when the reply will come through the owner's reply callback,
 * with call. call is the caller's name for the request (not NULL, and no
 * other request of the owner's in flight has it). An owner may have many
 * requests in flight, but the caller keeps two that change the same name
 * (lock, release, renew) from being in flight together: they are taken
 * in order. Who may ask what (FORCE is for admins) is the caller's to
 * check first (conf/access.h). The reply callback may be called for the
 * owner's other calls from inside this call. */
int lockmgr_request(lockmgr_t *mgr, lock_owner_t *owner, const lock_request_t *req,
                    void *call, lock_reply_t *now);

/* Withdraws the owner's request call if it is a wait (LOCK, TRYLOCK with
 * a wait, and the other kinds' alike): it is answered ERR CANCELLED
 * through the reply callback, from inside this call, and nothing it may
 * have been granted stays held. Returns 1, or 0 when it was no wait in
 * flight (not in flight, or a request that does not wait: its answer
 * comes). */
int lockmgr_cancel(lockmgr_t *mgr, lock_owner_t *owner, void *call);

void lockmgr_stats(const lockmgr_t *mgr, lockmgr_stats_t *out);

/* The ERR KIND words of mode's kind. */
const lock_kind_text_t *lockmgr_mode_text(lock_mode_t mode);

/* Elections (daemon/lock/elect.c, observe.c): their counters. */
void lockmgr_elect_stats(const lockmgr_t *mgr, lockmgr_elect_stats_t *out);

/* One counter of a kind's own, as INFO shows it: key=value. */
typedef struct lock_stat_s {
    const char *key;
    uint64_t value;
} lock_stat_t;
/* Most counters of every kind together. */
#define LOCKMGR_KIND_STATS_MAX 32
/* Every kind's own counters (its table's stats), kind after kind, each
 * kind's in its own order, into out (cap of them): how many. */
size_t lockmgr_kind_stats(const lockmgr_t *mgr, lock_stat_t *out, size_t cap);

/* The configuration's lease_ms or renew_every_ms changed (a reload wrote
 * the new ones into the conf given to lockmgr_new): new grants, RENEW of
 * watchdog holds and the watchdog's renewals from now on use them. Each
 * hold keeps counting from the lease Redis has for it; watchdog holds
 * leased with the old lease_ms are renewed at once with the new one. */
void lockmgr_reconfigure(lockmgr_t *mgr);

/* LIST (listing.c): fills in what this daemon knows of a listed name: its
 * own holders' pid, uid and age, and its waiters (a fair lock's and an
 * election's from Redis's queue, named where they are ours). */
struct list_entry_s;
void lockmgr_list_fill(lockmgr_t *mgr, struct list_entry_s *e);
/* The backend the manager was made with. */
backend_t *lockmgr_backend(const lockmgr_t *mgr);

/* Live restore (daemon/lock/handover.c): the state one process hands to
 * the next, as records (daemon/util/statefmt.h). Waits are not in it: the
 * caller asks for them again, in the order they came, once the new
 * process serves (their places in Redis are their owners', whose ids it
 * keeps). */
struct statew_s;
struct stater_s;
/* NULL when nothing is in flight that a hand-over could not carry, else
 * what is (for the log): Redis requests, releases waiting for Redis. */
const char *lockmgr_busy(const lockmgr_t *mgr);
/* Frozen, no waiter tries (a hand-over waits for what is in flight to
 * end, and hands the waits over as they are); unfrozen, every queue tries
 * again as when Redis comes back. */
void lockmgr_freeze(lockmgr_t *mgr, int frozen);
/* 1 if every request of owner's in the lock manager is a wait (LOCK and
 * the like, whose answer waits for a holder), which a hand-over carries by
 * asking again; 0 if one is anything else (an answer on its way). */
int lockmgr_owner_waits_only(const lock_owner_t *owner);
/* What owner holds (hold records: name, mode, count, fence, lease, when
 * Redis last confirmed it) and what its kinds keep of it (observations). */
void lockmgr_owner_save(const lockmgr_t *mgr, const lock_owner_t *owner, struct statew_s *w);
/* The counters INFO and the metrics show, and the kinds' own. */
void lockmgr_save(const lockmgr_t *mgr, struct statew_s *w);
/* Reads one record either wrote, its word read already (owner: the
 * owner's records' owner, NULL for lockmgr_save's): a hold is made as
 * it was, with its watchdog or lease timer, and nothing goes to Redis.
 * 1 if the word was the lock manager's, 0 if not; errors go into r. */
int lockmgr_load(lockmgr_t *mgr, lock_owner_t *owner, const char *word, struct stater_s *r);
/* Room for n holds to come (the state's count), made at once. */
void lockmgr_load_start(lockmgr_t *mgr, size_t n);
/* Every record is read: the watchdog's lists are put in order and its
 * timers set. 0, or -1 on no memory. */
int lockmgr_load_done(lockmgr_t *mgr);

#endif
