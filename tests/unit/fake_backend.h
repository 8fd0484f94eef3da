/* A fake backend for the lock manager's unit tests: the real scripts on an in-memory Redis.
 * SPDX-License-Identifier: MIT
 *
 * It is a backend_t with its own backend_type_t and keeps backend.h's
 * rules: every submitted op's callback fires exactly once, never inside
 * backend_submit(). Submitted ops wait in a FIFO; nothing is answered until
 * the test calls fake_run(), which answers them in order, each as a
 * topology would: scripts_choose() picks the script, scripts_format()
 * writes its call, the script of daemon/backend/lua runs on the model
 * (redis_model.c: Redis's commands and Lua 5.1, its TIME the timers'
 * clock), scripts_decode() reads the reply, and a release's subscriber
 * count becomes others_waiting as node_watch_others_waiting() makes it.
 * So every kind's behaviour here is its script's: a new kind needs no
 * model of its own. Each op is its own call (the fake batches nothing).
 *
 * The daemon's uuid is FAKE_UUID: the lock manager owner id's field is
 * "<uuid>:<id>", which every call below that takes or gives a field writes
 * "o<id>"; any other text is a foreign owner (another daemon, a Redisson
 * client). Fences are the scripts': TIME in microseconds when a grant
 * happens, or one more than the last (fake_fence_us()).
 *
 * Watches are recorded; a watch's BACKEND_WATCHING confirmation comes
 * from fake_run(). A script's message on a waiter's own channel (a fair
 * lock's wake-up) is delivered as BACKEND_RELEASED right after the op's
 * callback, to the owner watching that channel; a message on a name's
 * channel is the test's to deliver (fake_publish): the lock manager hands
 * its own releases to its own waiters. A name's channel counts as one
 * subscriber while watched, and one more with fake_set_remote_waiters().
 * Nothing here allocates in a way a test needs to check: out of memory
 * aborts.
 *
 * The fake checks each op's shape as it is submitted: an op kind that its
 * mode's scripts run (scripts.c's row), a semaphore's permits and lease,
 * a MULTI op's names, a fair acquire's lease and place.
 *
 * The fake announces BACKEND_CAP_ONE_COPY and BACKEND_CAP_MULTI (with
 * MONOTONIC_FENCE and WAKEUPS); fake_set_caps() changes that. */
#ifndef DLOCK_FAKE_BACKEND_H
#define DLOCK_FAKE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"
#include "daemon/util/timers.h"

typedef struct fake_s fake_t;

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
/* Another daemon's FORCEUNLOCK (force.lua): deletes the key and leaves the
 * marker; a fair lock's next waiter is woken. */
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
/* The last fence handed out for name (its counter; 0: none yet). */
uint64_t fake_fence(fake_t *fb, const char *name);
/* A grant's fence now, when the counter is below it: TIME in microseconds. */
uint64_t fake_fence_us(const fake_t *fb);

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

/* ---- count-down latches ------------------------------------------------------ */

/* Another daemon's LATCHSET (latch.lua's 'i': the count and dlockd's mark
 * dlock_latch:{key}, '1' published): 1 if it was set, 0 if the latch was
 * there. */
int fake_latch_set(fake_t *fb, const char *name, long long count);
/* Another daemon's COUNTDOWN (latch.lua's 'r'): the count left (0: none,
 * or it reached 0 and the latch and its mark went, '0' published). */
long long fake_latch_countdown(fake_t *fb, const char *name);
/* Redisson's trySetCount and countDown (RedissonCountDownLatch's scripts):
 * the count without dlockd's mark, set unless the key exists ('1'
 * published): 1 or 0; one less, the key deleted at 0 or below and '0'
 * published at 0, a mark left behind: DECR's answer. */
int fake_latch_redisson_set(fake_t *fb, const char *name, long long count);
long long fake_latch_redisson_countdown(fake_t *fb, const char *name);
/* The latch deleted by hand (DEL): nothing is published. */
void fake_latch_del(fake_t *fb, const char *name);
/* The count in Redis, -1 when there is no key. */
long long fake_latch_count(fake_t *fb, const char *name);
/* 1 if dlockd's mark of a latch it set is there. */
int fake_latch_marked(fake_t *fb, const char *name);
/* Messages published on the latch's channel (Redisson's, whoever sent
 * them), and the last one ('0' or '1'; 0 before any). They are not
 * delivered: fake_publish does that. */
unsigned fake_latch_messages(const fake_t *fb, const char *name);
int fake_latch_last_message(const fake_t *fb, const char *name);

/* ---- fair locks -------------------------------------------------------------- */

/* Places in name's queue (ended ones not dropped yet too), and the whole
 * queue as "f1 f2 ..." (in one of four buffers the fake keeps); an
 * election's queue when the name has no fair lock's. The place calls
 * below read the same queue. */
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
/* Another daemon's acquire, as fair.lua runs it for field: a lease of
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
 * fair.lua runs them: the head is woken at once. */
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
