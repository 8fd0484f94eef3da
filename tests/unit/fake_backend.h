/* A fake backend for the lock manager's unit tests only: an in-memory Redis on a manual clock.
 * SPDX-License-Identifier: MIT
 *
 * It is a backend_t with its own backend_type_t and keeps backend.h's
 * rules: every submitted op's callback fires exactly once, never inside
 * backend_submit(). Submitted ops wait in a FIFO; nothing is answered until
 * the test calls fake_run(), which answers them in order from the model, as
 * the Lua scripts in daemon/backend/scripts.c would:
 *
 *   name -> the lock hash (owner field -> hold count) with an expiry on the
 *           timers' clock (or none), a fence counter that only rises, and
 *           the FORCEUNLOCK marker (the removed owner's field).
 *
 * The lock manager's owner ids become fields "o<id>"; fake_take() and
 * fake_holds_field() use any other text as a foreign owner (another daemon,
 * a Redisson client). Watches are recorded; a watch's BACKEND_WATCHING
 * confirmation comes from fake_run(), a BACKEND_RELEASED from
 * fake_publish(). Nothing here allocates in a way a test needs to check:
 * out of memory aborts.
 *
 * Read/write locks (ops of mode BACKEND_READ or BACKEND_WRITE) follow
 * scripts.c's script_rw, LUA_RW_RENEW and script_status, in Redisson's
 * RReadWriteLock layout:
 *
 *   - the hash has a mode (READ or WRITE; BACKEND_MUTEX for a plain lock),
 *     a reader's field "o<id>" with its read holds and the writer's field
 *     "o<id>:write" with its write holds;
 *   - each read hold n of a reader has its own timeout key with the
 *     reader's lease (kept with the field: fake_timeout_pttl());
 *   - an acquire of a name held as a plain lock gets BACKEND_WRONG_KIND
 *     (held BACKEND_MUTEX), changing nothing; a read is granted unless
 *     another owner writes (the writer itself may read: a downgrade), a
 *     write only on a free name; a write grant raises the fence, a read
 *     grant (n == 1) returns the counter as it is, a further hold of the
 *     same field is BACKEND_REENTERED; an upgrade (a write asked by a
 *     reader) is BACKEND_TAKEN, as the script answers it;
 *   - grants, reentries and renewals never shorten the hash's TTL;
 *   - a reader's release (all its read holds) deletes the key when no
 *     other field is left; otherwise it keeps the TTL if some other
 *     reader's timeout key has at least 9/10 of it left, else sets it to
 *     the longest one left, else (none alive) deletes the key unless a
 *     writer's field remains; a writer's release leaves the owner's reads
 *     (mode READ) or deletes the key, and answers others_waiting either
 *     way (it publishes);
 *   - DROP takes one hold off (never the last), a read hold's timeout key
 *     with it; RENEW of a read resets the hash's TTL if shorter and every
 *     live timeout key of the reader; FORCED for the field the
 *     FORCEUNLOCK marker names (the first field, ":write" and all);
 *   - STATUS: ttl_ms, held (the mode), holders (readers, or 1 for a
 *     write) and holds: the owner's write holds for an op of mode WRITE,
 *     else its field "o<id>" (read holds, or a plain lock's holds).
 *
 * The plain-lock scripts look at the mode first, and so does the model: a
 * plain ACQUIRE of a read/write lock is BACKEND_WRONG_KIND with held = its
 * mode (even by an owner with a reader's field there, whose name is the
 * same), and a plain RELEASE or DROP of one answers -1 and changes
 * nothing.
 *
 * Semaphores (ops of mode BACKEND_SEM, and SEMINIT) follow scripts.c's
 * script_sem and LUA_SEM_RENEW, in Redisson's RPermitExpirableSemaphore
 * layout, on the timers' clock instead of Redis TIME:
 *
 *   - the name's key is a string, the permits available (absent until a
 *     SEMINIT, or until a release or a reclaim INCRBYs it), never with an
 *     expiry here; a name is a string or a lock hash, never both;
 *   - the sorted set {name}:timeout holds the permit ids "<field>:<k>"
 *     (a lock manager owner's field is "o<id>"), each scored by when it
 *     expires (FAKE_SEM_FOREVER: Redisson's ids without expiry); an id
 *     scored at or before now is expired;
 *   - ACQUIRE (permits n, permit_base b): BACKEND_HOLD_GONE, changing
 *     nothing, when any of the owner's ids 1..b is missing or expired;
 *     then up to 1000 expired ids (earliest first) are taken back into
 *     the count; with fewer than n available (or no key) BACKEND_TAKEN
 *     with the ms until the first id expires (-1: none, or FOREVER);
 *     else ids 1..b+n all get now + lease, the count goes down by the ids
 *     actually added, and BACKEND_GRANTED's fence is the permits still
 *     available after it;
 *   - RELEASE removes ids b+1..b+n and gives back the ids actually
 *     removed (INCRBY: it makes the key if there was none): holds 0 and
 *     others_waiting as for locks, or holds -1 when none was there;
 *   - SEMINIT sets the permits unless the key exists: holds 1, or 0;
 *   - RENEW (permits c) gives ids 1..c now + lease: BACKEND_RENEWED, or
 *     BACKEND_GONE changing nothing when any is missing or expired;
 *   - STATUS of a semaphore: ttl_ms -1, held BACKEND_SEM, holds 0 and
 *     holders the permits available plus the expired ids; FORCE gives
 *     every id back (removed 1; 0 when there was none) and leaves no
 *     FORCEUNLOCK marker; WHO answers ttl_ms -3;
 *   - a semaphore op on a lock hash: ACQUIRE and SEMINIT get
 *     BACKEND_WRONG_KIND with held = the lock's mode, RELEASE holds -1;
 *     a lock op on a semaphore: ACQUIRE gets BACKEND_WRONG_KIND held
 *     BACKEND_SEM, a read/write RELEASE or DROP holds -1, a plain one
 *     BACKEND_FAILED (Redis's WRONGTYPE error), RENEW BACKEND_GONE.
 *
 * Available plus the number of ids (expired ones too) stays the size
 * SEMINIT set, whatever ops ran or lost their answers; the tests check
 * it with fake_sem_available() and fake_sem_card().
 *
 * Fair locks (ops of mode BACKEND_FAIR) follow scripts.c's script_fair
 * (ACQUIRE, RELEASE, DROP, LEAVE), in Redisson's RFairLock layout, on the
 * timers' clock instead of Redis TIME:
 *
 *   - the lock hash is a plain lock's (fields, expiry, fence counter, the
 *     FORCEUNLOCK marker), and a plain lock's ops see no difference;
 *   - the queue: places in order, each an owner field ("o<id>", or any
 *     text: another daemon's, a Redisson client's) with when it ends
 *     (redisson_lock_queue and redisson_lock_timeout, kept together), and
 *     dlock_fair, the set of the fields whose places are dlockd's (an
 *     expiry on the timers' clock, taking every member with it);
 *   - every fair op first drops the places at the head that have ended
 *     (an ended place behind a live one stays until it reaches the head),
 *     taking them out of dlock_fair;
 *   - ACQUIRE: on a semaphore or a read/write lock BACKEND_WRONG_KIND
 *     (held its kind); granted when the hash is free and the queue is
 *     empty or its head is the owner (whose place goes), the fence rising
 *     as a plain grant's; BACKEND_REENTERED when the owner holds it; else
 *     BACKEND_TAKEN with the hash's PTTL or, when that is < 0, the ms
 *     until the head's place ends (-1: no one queues), the owner's place
 *     taken at the tail or kept, unless op->once ('o': no place): its end
 *     moves to now + op->queue_ms + op->queue_foreign_ms for each place
 *     ahead of it not in dlock_fair (those are not counted when the queue
 *     has over 64 places and dlock_fair at least as many members), the
 *     owner joins dlock_fair, whose expiry is made at least that long;
 *     a grant or LEAVE takes the owner out of dlock_fair;
 *   - RELEASE deletes the hash and wakes the head (others_waiting is
 *     always 0, as node.c answers a fair release); DROP takes one hold
 *     off, never the last; either of a field not there: holds -1;
 *   - LEAVE takes the owner's place out and wakes the head if the hash is
 *     free (holds 0);
 *   - RENEW, STATUS and WHO are a plain lock's (no places dropped);
 *     FORCE also wakes the head (as script_force does, dropping none);
 *   - a wake-up is a BACKEND_RELEASED on the head's own channel, given to
 *     the lock manager only if it watches that channel (backend_watch of
 *     mode BACKEND_FAIR with that owner), right after the op's callback.
 *
 * A fair watch is per owner, as node.c's channels are: watching one
 * owner's channel leaves the others as they are, an unwatch ends only the
 * owner's it names (one of a channel not watched counts as a stray
 * unwatch, fake_stats()), and each is confirmed from fake_run(). The
 * fake checks every fair op's shape: LEAVE only in mode FAIR, an acquire
 * with a lease and, unless once, a place's length.
 *
 * The fake announces BACKEND_CAP_ONE_COPY
 * (with MONOTONIC_FENCE and WAKEUPS); fake_set_caps() changes that. */
#ifndef DLOCK_FAKE_BACKEND_H
#define DLOCK_FAKE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"
#include "daemon/util/timers.h"

typedef struct fake_s fake_t;

/* First fence the model hands out for a name (its counter starts below). */
#define FAKE_FENCE_START 100
/* How long the FORCEUNLOCK marker outlives the lock (SCRIPTS_FORCED_MARK_MS). */
#define FAKE_FORCED_MARK_MS 60000
/* Longest name the op log keeps whole. */
#define FAKE_NAME_MAX 64

/* One submitted op, as the log keeps it. */
typedef struct fake_rec_s {
    backend_op_type_t kind;
    backend_mode_t mode;       /* the op's mode */
    char name[FAKE_NAME_MAX + 1];
    uint64_t owner;
    uint32_t lease_ms;
    uint32_t permits;          /* SEM: the op's permits (SEMINIT: the size) */
    uint32_t permit_base;      /* SEM: the ids start after this one */
    uint32_t queue_ms;         /* FAIR: an acquire's place length */
    uint32_t queue_foreign_ms; /* FAIR: ... more per Redisson place ahead */
    int once;                  /* FAIR: an acquire that takes no place */
    uint64_t at;               /* the clock when submitted */
    uint64_t round;            /* fake_run() calls before it was submitted */
} fake_rec_t;

typedef struct fake_stats_s {
    uint64_t submitted[BACKEND_OP_COUNT];   /* ops submitted, by kind */
    uint64_t answered;                      /* callbacks called */
    size_t inflight;                        /* submitted, not answered yet */
    size_t inflight_kind[BACKEND_OP_COUNT];
    size_t max_inflight;
    size_t max_inflight_kind[BACKEND_OP_COUNT];
    uint64_t watch_calls;                   /* backend_watch() calls */
    uint64_t unwatch_calls;
    uint64_t confirms;                      /* BACKEND_WATCHING delivered */
    uint64_t published;                     /* BACKEND_RELEASED delivered */
    uint64_t fair_wakes;                    /* fair scripts' messages to a head */
    uint64_t stray_unwatches;               /* fair: of a channel not watched */
    uint64_t rounds;                        /* fake_run() calls */
} fake_stats_t;

/* The fake starts up (available), with an empty model; timers is the
 * manual clock it reads. */
fake_t *fake_new(timers_t *timers);
backend_t *fake_backend(fake_t *fb);
/* What backend_close() does for a topology: pending ops (and ops their
 * callbacks submit) get BACKEND_DOWN inside this call, then everything is
 * freed. No callback fires afterwards. */
void fake_close(fake_t *fb);

/* A clock drift allowance, as a quorum has: taken off every lease. */
void fake_set_drift(fake_t *fb, uint32_t drift_ms);
/* What the topology promises (backend_t.caps, BACKEND_CAP_*); the fake
 * starts with MONOTONIC_FENCE | WAKEUPS | RW | SEM | FAIR. */
void fake_set_caps(fake_t *fb, unsigned caps);

/* ---- answering --------------------------------------------------------- */

/* Answers every op queued when called, in order (ops their callbacks
 * submit wait for the next call), then delivers the watch confirmations
 * asked for before the call. While down, ops get BACKEND_DOWN and
 * confirmations wait for the backend to be up. Returns the ops answered;
 * does nothing while held. */
size_t fake_run(fake_t *fb);
/* Answers only the next op queued, as fake_run() would (no watch
 * confirmations); returns 1, or 0 when nothing is queued or it is held.
 * A test changes the model between two ops of one batch with it. */
size_t fake_run_one(fake_t *fb);
/* fake_run() until nothing is queued and no confirmation is pending;
 * fails the test if that takes more than 1000 rounds. */
void fake_settle(fake_t *fb);
/* The next op fake_run() answers while up gets status and text instead of
 * running (stacks up to 16). */
void fake_fail_next(fake_t *fb, backend_status_t status, const char *text);
/* The next op fake_run() answers while up runs in the model, but its answer
 * is lost: the op gets BACKEND_DOWN (a reply that did not come in time). */
void fake_lose_next(fake_t *fb, const char *text);
/* The next op fake_run() answers while up runs in the model; if it was a
 * new grant or a renewal, it gets BACKEND_UNACKED and text (its WAIT saw
 * too few replicas), as node.c answers it. */
void fake_unack_next(fake_t *fb, const char *text);
/* The next op fake_run() answers while up runs in the model, and its
 * outcome is then outcome, whatever the model said (a reply rewritten by
 * a proxy: HOLD_GONE where a grant was). */
void fake_rewrite_next(fake_t *fb, backend_outcome_t outcome);
/* 1: fake_run() answers nothing; ops stay in flight. */
void fake_hold(fake_t *fb, int hold);
/* Availability: available() says it; a change calls backend_notify_state().
 * Going down dooms the ops in flight: fake_run() answers them BACKEND_DOWN
 * (without running them) even if it is up again by then, as a broken
 * connection would. Coming up again confirms every watch anew (a
 * resubscription). */
void fake_set_up(fake_t *fb, int up);
/* Ops queued now, and the op at position i of the queue (0: the next). */
size_t fake_queued(const fake_t *fb);
const backend_op_t *fake_queued_op(const fake_t *fb, size_t i);

/* ---- the op log and counters ------------------------------------------- */

const fake_stats_t *fake_stats(const fake_t *fb);
size_t fake_log_len(const fake_t *fb);
const fake_rec_t *fake_log(const fake_t *fb, size_t i);
/* Ops of kind in the log (all of it, or from position from on). */
size_t fake_log_count(const fake_t *fb, size_t from, backend_op_type_t kind);
/* The same, of kind and mode. */
size_t fake_log_count_mode(const fake_t *fb, size_t from, backend_op_type_t kind,
                           backend_mode_t mode);

/* ---- watches ------------------------------------------------------------- */

/* 1 while name is watched (of a fair lock: any owner's channel). */
int fake_watched(const fake_t *fb, const char *name);
/* backend_watch() calls for name. */
unsigned fake_watch_calls(const fake_t *fb, const char *name);
/* The mode (channel) of name's last backend_watch(); -1 if never watched. */
int fake_watch_mode(const fake_t *fb, const char *name);
/* Delivers BACKEND_RELEASED to name's watcher now, as a release message
 * would; returns 1 if it was watched (and the backend up), else 0. */
int fake_publish(fake_t *fb, const char *name);
/* A RELEASE that deletes name answers others_waiting = on (waiters of
 * other daemons got the message). */
void fake_set_remote_waiters(fake_t *fb, const char *name, int on);

/* ---- the model ------------------------------------------------------------- */

/* The key expires now (and publishes nothing, like Redis). */
void fake_expire(fake_t *fb, const char *name);
/* Another owner (field) takes name, replacing whoever held it, for ttl_ms
 * (<0: no expiry); a new grant, so the fence rises. */
void fake_take(fake_t *fb, const char *name, const char *field, long long ttl_ms);
/* A foreign read/write hold, as another daemon's or Redisson's script
 * would leave it, for ttl_ms (<0: no expiry). BACKEND_WRITE: field takes
 * the write lock (its field "<field>:write"), replacing whoever held the
 * name; a new grant, so the fence rises. BACKEND_READ: field adds one read
 * hold (and its timeout key) to a read lock; a name held otherwise is
 * replaced; the hash's TTL only grows (ttl_ms < 0 takes its expiry
 * away) and the fence stays. */
void fake_take_rw(fake_t *fb, const char *name, const char *field, backend_mode_t mode,
                  long long ttl_ms);
/* Another daemon's FORCEUNLOCK: deletes the key and leaves the marker. */
void fake_force(fake_t *fb, const char *name);
/* The lock manager owner's holds on name in the model (0: none). */
long long fake_holds(fake_t *fb, uint64_t owner, const char *name);
/* The same for any field. */
long long fake_holds_field(fake_t *fb, const char *field, const char *name);
/* The lock manager owner's holds of mode on name: BACKEND_WRITE its field
 * "o<id>:write", else its field "o<id>" (read holds, or plain). */
long long fake_holds_mode(fake_t *fb, uint64_t owner, const char *name, backend_mode_t mode);
/* What name holds: -1 nothing (no key), else BACKEND_MUTEX, BACKEND_READ
 * or BACKEND_WRITE (a downgraded writer's reads keep it WRITE until the
 * write hold goes), or BACKEND_SEM (a semaphore's key). */
int fake_mode(fake_t *fb, const char *name);
/* Owners with read holds on name (its fields other than "...:write"). */
long long fake_readers(fake_t *fb, const char *name);
/* PTTL of read hold n's timeout key of field on name: -2 none, -1 no expiry. */
long long fake_timeout_pttl(fake_t *fb, const char *field, const char *name, long long n);
/* PTTL: -2 no key, -1 no expiry, else ms left. */
long long fake_pttl(fake_t *fb, const char *name);
/* The last fence handed out for name (FAKE_FENCE_START - 1: none yet). */
uint64_t fake_fence(const fake_t *fb, const char *name);

/* ---- semaphores -------------------------------------------------------------- */

/* The score Redisson gives a permit id that never expires. */
#define FAKE_SEM_FOREVER 922337203685477ull

/* Redisson's trySetPermits from elsewhere: the key is set to permits
 * unless it exists; 1 if it was set, 0 if not. Publishes nothing. */
int fake_seminit(fake_t *fb, const char *name, long long permits);
/* The permits available (the key's value), -1 when there is no key. */
long long fake_sem_available(fake_t *fb, const char *name);
/* Permit ids in name's sorted set, of every owner, expired ones too. */
size_t fake_sem_card(fake_t *fb, const char *name);
/* The lock manager owner's ids (expired ones too), and any field's. */
size_t fake_sem_ids(fake_t *fb, const char *name, uint64_t owner);
size_t fake_sem_ids_field(fake_t *fb, const char *name, const char *field);
/* 1 if the owner's ids are exactly 1..n, all unexpired. */
int fake_sem_ids_are(fake_t *fb, const char *name, uint64_t owner, long long n);
/* How long the owner's id k has: -2 no such id, -1 FAKE_SEM_FOREVER, else
 * its score less now (0 or less: expired, not yet taken back). */
long long fake_sem_id_pttl(fake_t *fb, const char *name, uint64_t owner, long long k);
/* The owner's id k expires now (its score becomes now); it stays in the
 * set until an acquire takes it back. */
void fake_sem_expire_id(fake_t *fb, const char *name, uint64_t owner, long long k);
/* The owner's id k is removed and its permit given back (as a release of
 * that one id would); nothing is published. */
void fake_sem_del_id(fake_t *fb, const char *name, uint64_t owner, long long k);
/* Another owner (field) takes permits ids "<field>:1.." for ttl_ms (<0:
 * FAKE_SEM_FOREVER), as its acquire with base 0 would; the permits must
 * be available. */
void fake_sem_take(fake_t *fb, const char *name, const char *field, long long permits,
                   long long ttl_ms);
/* That field's ids all go, their permits given back; nothing is published. */
void fake_sem_release_field(fake_t *fb, const char *name, const char *field);

/* ---- fair locks -------------------------------------------------------------- */

/* Places in name's queue (ended ones not dropped yet too), and the whole
 * queue as "f1 f2 ..." (in one of four buffers the fake keeps). */
size_t fake_fair_queue_len(fake_t *fb, const char *name);
const char *fake_fair_queue(fake_t *fb, const char *name);
/* Where the lock manager owner's (any field's) place is: 0 the head, -1 none. */
long long fake_fair_pos(fake_t *fb, const char *name, uint64_t owner);
long long fake_fair_pos_field(fake_t *fb, const char *name, const char *field);
/* How long the place has: -2 no place, else its end less now (0 or less:
 * ended, not dropped yet). */
long long fake_fair_place_pttl(fake_t *fb, const char *name, uint64_t owner);
long long fake_fair_place_pttl_field(fake_t *fb, const char *name, const char *field);
/* The field's place ends now (as when Redis lost time, or Redisson's grants
 * shortened it); the next fair op drops it once it is at the head. */
void fake_fair_expire_place(fake_t *fb, const char *name, const char *field);
/* Another daemon's acquire, as script_fair runs it for field: a lease of
 * lease_ms (<0: no expiry), a place of queue_ms (<0: 'o', no place) plus
 * LOCKMGR_FAIR_FOREIGN_WAIT_MS per Redisson place ahead. Returns its
 * outcome (BACKEND_GRANTED, _REENTERED, _TAKEN, _WRONG_KIND). */
int fake_fair_acquire_field(fake_t *fb, const char *name, const char *field, long long lease_ms,
                            long long queue_ms);
/* A Redisson client's RFairLock tryLock for field: the ended places at the
 * head go (dlock_fair untouched: Redisson does not know it); granted when
 * free and no one queues or field is the head, taking wait_ms (Redisson's
 * fairLockWaitTimeout) off every other place; reentered; else TAKEN,
 * with a place at the tail ending place_ms from now (Redisson chains
 * them: the test says where), or the one it has, unchanged. Publishes
 * nothing; returns the outcome. */
int fake_fair_redisson_acquire(fake_t *fb, const char *name, const char *field,
                               long long lease_ms, long long place_ms, long long wait_ms);
/* 1 if field is in name's dlock_fair set (its place is a dlockd's). */
int fake_fair_is_dlockd(fake_t *fb, const char *name, const char *field);
/* That field's release ('r': -1 not held, else 0) and leaving ('l'), as
 * script_fair runs them: the head is woken at once. */
long long fake_fair_release_field(fake_t *fb, const char *name, const char *field);
void fake_fair_leave_field(fake_t *fb, const char *name, const char *field);
/* 1 while the lock manager owner's channel of name is watched. */
int fake_fair_watching(const fake_t *fb, const char *name, uint64_t owner);
/* Fair channels of name watched now (of any owner). */
size_t fake_fair_channels(const fake_t *fb, const char *name);
/* A BACKEND_RELEASED on owner's channel now: 1 if it was watched (and the
 * backend up). */
int fake_fair_publish(fake_t *fb, const char *name, uint64_t owner);

#endif
