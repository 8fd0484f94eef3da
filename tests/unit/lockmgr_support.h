/* The world of the lock manager's unit tests: conf, manual clock, fake backend, clients, requests.
 * SPDX-License-Identifier: MIT
 *
 * No Redis, no sockets, no real time: the lock manager runs on a manual
 * clock (timers_new_manual) over tests/unit/fake_backend, whose ops are
 * answered only when a test calls fake_run(). Every client records its
 * replies and !LOST events; the callbacks check that no reply comes twice,
 * none comes inside lockmgr_request(), and none reaches a dropped owner.
 * setup() and teardown() are every test case's checked fixture. */
#ifndef DLOCK_LOCKMGR_SUPPORT_H
#define DLOCK_LOCKMGR_SUPPORT_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf/conf.h"
#include "daemon/lock/lockmgr.h"
#include "daemon/util/timers.h"
#include "tests/unit/fake_backend.h"

/* conf: a short lease, so renew_every_ms = 1000 and the loss margin is 300. */
#define LEASE 3000u
#define EVERY (LEASE / 3)
#define MARGIN (LEASE / LOCKMGR_LOSS_MARGIN_DIV)
#define T0 1000000u              /* the manual clock's start */

/* Under CK_FORK every ck_assert that passes writes its place to Check's
 * pipe; the checks run at every step of the mixes call Check only on failure. */
#define EXPECT(cond, ...)                       \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define MAX_CLIENTS 64
#define MAX_LOG 256              /* replies and events kept unread, per client */
#define DETAIL_LEN 128
#define LIST_KEEP 8              /* numbers of a LIST reply kept */

/* One connection as the lock manager sees it, with what it was told. */
typedef struct client_s {
    lock_owner_t *o;
    uint64_t id;
    uid_t uid;
    int dropped;
    int drop_in_callback;        /* drops itself from its next callback, as a
                                    session does when its output overflows */
    int pending;                 /* a request without its reply yet */
    unsigned sent;               /* requests */
    unsigned answered;           /* replies, at once or later */
    /* rings: entry n at [n % MAX_LOG] */
    lock_reply_t replies[MAX_LOG];
    char details[MAX_LOG][DETAIL_LEN];
    char names[MAX_LOG][DETAIL_LEN];
    uint64_t lists[MAX_LOG][LIST_KEEP];
    uint64_t rseq[MAX_LOG];
    size_t nreplies, rhead;
    struct {
        char name[64];
        lock_loss_t why;
        uint64_t at;             /* on the manual clock */
        uint64_t seq;
    } events[MAX_LOG];
    size_t nevents, ehead;
} client_t;

/* ---- the world: conf, clock, fake backend, lock manager ---------------------- */

extern conf_t conf;
extern timers_t *tm;
extern fake_t *fb;
extern lockmgr_t *mgr;
extern int in_request;           /* inside lockmgr_request() now */
/* Where LEADER events go (an election's tests set it; NULL: none may come). */
extern void (*support_on_leader)(client_t *c, const lock_event_t *ev);
extern int done_calls;           /* lockmgr_shutdown's done */
extern uint64_t seq;             /* orders replies and events of all clients */
extern client_t clients[MAX_CLIENTS];
extern size_t nclients;

const char *reply_type_name(lock_reply_type_t k);
client_t *client_uid(uid_t uid);
client_t *client(void);          /* uid 1000 */
void drop(client_t *c);
void setup(void);
void teardown(void);

/* ---- requests and what comes back -------------------------------------------- */

/* Sends one request of mode (LOCK, TRYLOCK, UNLOCK; LOCK_MODE_MUTEX for the
 * others) with permits (a semaphore's); returns 1 when lockmgr_request()
 * answered it at once (the reply is then in the client's log like any
 * other). */
int request_permits(client_t *c, lock_verb_t verb, lock_mode_t mode, const char *name,
                    uint32_t wait_ms, uint32_t lease_ms, uint32_t permits);
int request_mode(client_t *c, lock_verb_t verb, lock_mode_t mode, const char *name,
                 uint32_t wait_ms, uint32_t lease_ms);
/* One of mode's kind's own requests (LOCK_VERB_OWN): op in the kind's
 * numbering, count its number if it takes one. */
int request_own(client_t *c, lock_mode_t mode, unsigned op, const char *name, uint32_t count);
int request(client_t *c, lock_verb_t verb, const char *name, uint32_t wait_ms,
            uint32_t lease_ms);
int lock_req(client_t *c, const char *name, uint32_t lease_ms);
/* MLOCK, TRYMLOCK, MUNLOCK of names[0..n) (MULTI mode). */
int request_multi(client_t *c, lock_verb_t verb, const char *const *names, size_t n,
                  uint32_t wait_ms, uint32_t lease_ms);
int unlock_req(client_t *c, const char *name);

size_t replies_left(const client_t *c);
lock_reply_t next_reply(client_t *c);
void no_reply(const client_t *c);
uint64_t expect_granted(client_t *c, long long holds);
void expect_value(client_t *c, long long v);
void expect_timeout(client_t *c, long long ttl);
lock_reply_t expect_error(client_t *c, lock_err_t err);
void expect_event(client_t *c, const char *name, lock_loss_t why);
void no_event(const client_t *c);
uint64_t lock_ok(client_t *c, const char *name, uint32_t lease_ms); /* the fence */
lockmgr_stats_t stats(void);
size_t submitted(backend_op_type_t kind);
uint64_t now(void);
/* The op at position i of the fake's queue is kind on name for c. */
void queued_is(size_t i, backend_op_type_t kind, const char *name, const client_t *c);

/* ---- time, the watchdog, shutdown ------------------------------------------- */

void run_for(uint64_t ms);       /* the fake answers as it goes, in steps of 10 ms */
/* The clock on 1 ms at a time, the fake answering, until c has a reply or
 * the clock reads until. */
void run_until_reply(const client_t *c, uint64_t until);
void stays_watchdog(client_t *c, const char *name);
void shutdown_now(void);         /* lockmgr_shutdown; done counts in done_calls */

/* ---- requests of each kind, and checks more than one kind's tests make ------- */

int rlock_req(client_t *c, const char *name, uint32_t lease_ms);
int wlock_req(client_t *c, const char *name, uint32_t lease_ms);
int runlock_req(client_t *c, const char *name);
int wunlock_req(client_t *c, const char *name);
uint64_t rlock_ok(client_t *c, const char *name, uint32_t lease_ms);
uint64_t wlock_ok(client_t *c, const char *name, uint32_t lease_ms);
/* The op at position i of the fake's queue is kind of mode on name for c. */
void queued_mode_is(size_t i, backend_op_type_t kind, backend_mode_t mode, const char *name,
                    const client_t *c);
/* r's typed error is why, about mode's kind (-1: no mode). */
void why_is(const lock_reply_t *r, lock_why_t why, int mode);

int acquire_req(client_t *c, const char *name, uint32_t permits, uint32_t lease_ms);
int tryacquire_req(client_t *c, const char *name, uint32_t permits, uint32_t wait_ms,
                   uint32_t lease_ms);
int release_req(client_t *c, const char *name, uint32_t permits);
int seminit_req(client_t *c, const char *name, uint32_t size);
/* c's ids of name in Redis are exactly 1..n, all unexpired. */
void sem_ids_are(const client_t *c, const char *name, long long n);
/* ACQUIRE that the fake grants at once: c holds held permits then. */
void acquire_ok(client_t *c, const char *name, uint32_t permits, uint32_t lease_ms,
                long long held);
/* Ops of kind for c in the log from position from on. */
size_t logged_for(size_t from, backend_op_type_t kind, const client_t *c);

int fairlock_req(client_t *c, const char *name, uint32_t lease_ms);
int tryfair_req(client_t *c, const char *name, uint32_t wait_ms, uint32_t lease_ms);
uint64_t fair_ok(client_t *c, const char *name, uint32_t lease_ms); /* the fence */

/* Runs s with CK_FORK; main()'s exit status. */
int lockmgr_test_run(Suite *s);

#endif
