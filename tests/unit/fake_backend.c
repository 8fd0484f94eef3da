/* A fake backend for the lock manager's unit tests only: ops answered on demand from a model.
 * SPDX-License-Identifier: MIT */
#include "fake_backend.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/lockmgr.h"
#include "daemon/util/util.h"

#define FAKE_INJECT_MAX 16
#define FAKE_SETTLE_MAX 1000

/* Under CK_FORK every ck_assert that passes writes to Check's pipe; the
 * checks made per op call Check only on failure. */
#define EXPECT(cond, ...)                       \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

/* One owner field of a lock hash, kept in the order Redis keeps a small
 * hash's fields (insertion order: FORCEUNLOCK's marker names the first). */
typedef struct field_s {
    char *name;
    long long count;
    /* a reader's field: its read holds' timeout keys, n = 1.. at [n - 1]
     * (when each expires on the timers' clock, TMO_GONE, TMO_FOREVER) */
    uint64_t *tmo;
    size_t ntmo;
} field_t;

/* One owner field's permit ids in a semaphore's sorted set: "<field>:<k>"
 * scored score[k - 1] (when it expires on the timers' clock; SEM_NONE:
 * no such id). */
typedef struct sem_owner_s {
    char *field;
    uint64_t *score;
    size_t n;
} sem_owner_t;

#define SEM_NONE 0
/* scripts.c's acquire takes back at most this many expired ids at once */
#define SEM_RECLAIM_MAX 1000

/* One place in a fair lock's queue: redisson_lock_queue's entry (an owner
 * field) and its score in redisson_lock_timeout (when the place ends, on
 * the timers' clock). The script keeps the two together; so does this. */
typedef struct fair_place_s {
    char *field;
    uint64_t ends;
} fair_place_t;

/* A fair lock waiter's own channel (redisson_lock__channel:{K}:<field>),
 * watched for the lock manager owner whose field it is. Channels live as
 * long as the fake: an unwatch only marks one, so a callback may watch
 * and unwatch while fake_run() walks them. */
typedef struct fair_chan_s {
    struct fair_chan_s *next;
    uint64_t owner;
    int watched;
    backend_watch_cb cb;
    void *data;
    int confirm;               /* a BACKEND_WATCHING is owed */
    uint64_t confirm_seq;
} fair_chan_t;

/* Release messages a fair script published, delivered to the channel's
 * watcher once the op's own callback has returned (the message comes on
 * another connection, just after the reply). */
#define FAIR_PUB_MAX 8
#define FAIR_PUB_FIELD 64

/* Everything the fake knows of one name: the model's keys and the watch. */
typedef struct entry_s {
    struct entry_s *next;
    char *name;
    size_t len;
    /* the lock hash; a read/write lock's 'mode' is kept apart */
    backend_mode_t mode;       /* BACKEND_READ or BACKEND_WRITE: a read/write lock;
                                  BACKEND_MUTEX: a plain one (or no key) */
    field_t *fields;
    size_t nfields, cap;
    int has_expiry;
    uint64_t expires_at;       /* on the timers' clock */
    /* the fence counter: the last fence handed out */
    uint64_t fence;
    /* the FORCEUNLOCK marker */
    char *marker;
    uint64_t marker_until;
    int remote_waiters;        /* a release answers others_waiting = this */
    /* a semaphore: the key as a string, and {name}:timeout */
    int sem;                   /* the key is a string: a semaphore's */
    long long sem_avail;       /* ... its value, the permits available */
    sem_owner_t *ids;          /* the permit ids, by owner field */
    size_t nids, ids_cap;
    /* a fair lock's queue, first place first */
    fair_place_t *queue;
    size_t nqueue, queue_cap;
    /* dlock_fair:{K}: the fields whose places are dlockd's, and its expiry */
    char **dlockd;
    size_t ndlockd, dlockd_cap;
    uint64_t dlockd_until;     /* on the timers' clock (0: no key) */
    fair_chan_t *chans;        /* its waiters' channels, newest first */
    /* an election's leader record (dlock_leader:{K}): counts while the
     * hash holds its field */
    char leader_field[64];      /* FIELD_MAX */
    char leader_value[BACKEND_ANSWER_MAX + 1];
    uint64_t leader_fence;
    /* the watch */
    int watched;
    int watch_mode;            /* of the last watch; -1 never watched */
    backend_watch_cb cb;
    void *data;
    unsigned watch_calls;
    int confirm;               /* a BACKEND_WATCHING is owed */
    uint64_t confirm_seq;      /* ... asked for at this point */
} entry_t;

typedef struct inject_s {
    backend_status_t status;
    int run;                   /* run in the model, then lose the answer */
    int rewrite;               /* run in the model, then answer outcome instead */
    backend_outcome_t outcome;
    char text[128];
} inject_t;

STAILQ_HEAD(op_queue_s, backend_op_s);

struct fake_s {
    backend_t base;
    timers_t *timers;
    int up;
    int held;
    struct op_queue_s queue;
    size_t doomed;             /* the first ops of the queue: in flight when it went down */
    entry_t *entries;
    inject_t inject[FAKE_INJECT_MAX];
    size_t ninject;
    char error[160];           /* the text of the op being answered */
    uint64_t confirm_seq;
    uint32_t drift_ms;         /* what the topology takes off every lease */
    struct {
        entry_t *e;
        char field[FAIR_PUB_FIELD];
    } pubs[FAIR_PUB_MAX];      /* fair release messages not delivered yet */
    size_t npubs;
    fake_stats_t stats;
    fake_rec_t *log;
    size_t log_len, log_cap;
};

#define FB(b) container_of((b), fake_t, base)
#define FB_CONST(b) ((const fake_t *)(const void *)(b))

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (q == NULL) ck_abort_msg("fake backend: out of memory");
    return q;
}

static char *xstrndup(const char *s, size_t n) {
    char *p = xrealloc(NULL, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ---- the model ------------------------------------------------------------ */

static entry_t *entry_find(const fake_t *fb, const char *name, size_t len) {
    for (entry_t *e = fb->entries; e != NULL; e = e->next)
        if (e->len == len && memcmp(e->name, name, len) == 0) return e;
    return NULL;
}

/* Entries live as long as the fake: callbacks may hold on to them. */
static entry_t *entry_get(fake_t *fb, const char *name, size_t len) {
    entry_t *e = entry_find(fb, name, len);
    if (e != NULL) return e;
    e = xrealloc(NULL, sizeof(*e));
    memset(e, 0, sizeof(*e));
    e->name = xstrndup(name, len);
    e->len = len;
    e->fence = FAKE_FENCE_START - 1;
    e->watch_mode = -1;
    e->next = fb->entries;
    fb->entries = e;
    return e;
}

static entry_t *entry_named(fake_t *fb, const char *name) {
    return entry_get(fb, name, strlen(name));
}

static uint64_t now_of(const fake_t *fb) {
    return timers_now(fb->timers);
}

static void key_delete(entry_t *e) {
    for (size_t i = 0; i < e->nfields; i++) {
        free(e->fields[i].name);
        free(e->fields[i].tmo);
    }
    e->nfields = 0;
    e->has_expiry = 0;
    e->mode = BACKEND_MUTEX;
}

/* HDEL (a reader's timeout keys go with it); the last field takes the key. */
static void field_del(entry_t *e, field_t *f) {
    size_t i = (size_t)(f - e->fields);
    free(f->name);
    free(f->tmo);
    memmove(&e->fields[i], &e->fields[i + 1], (e->nfields - i - 1) * sizeof(e->fields[0]));
    if (--e->nfields == 0) key_delete(e);
}

/* Redis forgets keys whose time is up. */
static void key_check(const fake_t *fb, entry_t *e) {
    uint64_t now = now_of(fb);
    if (e->nfields > 0 && e->has_expiry && e->expires_at <= now) key_delete(e);
    if (e->marker != NULL && e->marker_until <= now) {
        free(e->marker);
        e->marker = NULL;
    }
}

static field_t *field_find(entry_t *e, const char *field) {
    for (size_t i = 0; i < e->nfields; i++)
        if (strcmp(e->fields[i].name, field) == 0) return &e->fields[i];
    return NULL;
}

static field_t *field_add(entry_t *e, const char *field, long long count) {
    if (e->nfields == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 4;
        e->fields = xrealloc(e->fields, e->cap * sizeof(e->fields[0]));
    }
    field_t *f = &e->fields[e->nfields++];
    memset(f, 0, sizeof(*f));
    f->name = xstrndup(field, strlen(field));
    f->count = count;
    return f;
}

static void key_expire_in(const fake_t *fb, entry_t *e, long long ms) {
    if (ms < 0) {
        e->has_expiry = 0;
        return;
    }
    e->has_expiry = 1;
    e->expires_at = now_of(fb) + (uint64_t)ms;
}

static long long key_pttl(const fake_t *fb, entry_t *e) {
    key_check(fb, e);
    if (e->nfields == 0) return -2;
    if (!e->has_expiry) return -1;
    return (long long)(e->expires_at - now_of(fb));
}

static int sem_force(entry_t *e);

/* FORCEUNLOCK's script: marker for the first field, delete, publish; a
 * semaphore gets every permit back, and no marker. */
static int key_force(const fake_t *fb, entry_t *e) {
    if (e->sem) return sem_force(e);
    key_check(fb, e);
    if (e->nfields == 0) return 0;
    long long t = key_pttl(fb, e);
    if (t < 0) t = 0;
    free(e->marker);
    e->marker = xstrndup(e->fields[0].name, strlen(e->fields[0].name));
    e->marker_until = now_of(fb) + (uint64_t)t + FAKE_FORCED_MARK_MS;
    key_delete(e);
    return 1;
}

/* A lock manager owner's field: "o<id>", and "o<id>:write" for its write holds. */
#define FIELD_MAX 48

static void owner_field(char *out, size_t cap, uint64_t owner) {
    snprintf(out, cap, "o%" PRIu64, owner);
}

static void owner_field_mode(char *out, size_t cap, uint64_t owner, backend_mode_t mode) {
    snprintf(out, cap, "o%" PRIu64 "%s", owner, mode == BACKEND_WRITE ? ":write" : "");
}

static int is_write_field(const char *field) {
    size_t n = strlen(field);
    return n >= 6 && strcmp(field + n - 6, ":write") == 0;
}

/* ---- a reader's timeout keys ({K}:<field>:rwlock_timeout:<n>) ---------------- */

#define TMO_GONE 0               /* no such key */
#define TMO_FOREVER UINT64_MAX   /* a key without expiry */

/* PTTL of hold n's key: -2 none, -1 no expiry. */
static long long tmo_pttl(const fake_t *fb, const field_t *f, long long n) {
    if (n < 1 || (size_t)n > f->ntmo) return -2;
    uint64_t t = f->tmo[n - 1], now = now_of(fb);
    if (t == TMO_GONE || (t != TMO_FOREVER && t <= now)) return -2;
    return t == TMO_FOREVER ? -1 : (long long)(t - now);
}

/* SET <key n> 1 PX ms (ms < 0: without expiry). */
static void tmo_set(const fake_t *fb, field_t *f, long long n, long long ms) {
    if ((size_t)n > f->ntmo) {
        f->tmo = xrealloc(f->tmo, (size_t)n * sizeof(f->tmo[0]));
        for (size_t i = f->ntmo; i < (size_t)n; i++) f->tmo[i] = TMO_GONE;
        f->ntmo = (size_t)n;
    }
    f->tmo[n - 1] = ms < 0 ? TMO_FOREVER : now_of(fb) + (uint64_t)ms;
}

/* PEXPIRE <key n> ms: only a key that exists. */
static void tmo_pexpire(const fake_t *fb, field_t *f, long long n, long long ms) {
    if (tmo_pttl(fb, f, n) != -2) tmo_set(fb, f, n, ms);
}

static void tmo_del(field_t *f, long long n) {
    if (n >= 1 && (size_t)n <= f->ntmo) f->tmo[n - 1] = TMO_GONE;
}

/* ---- a semaphore's permit ids ({K}:timeout) --------------------------------- */

static sem_owner_t *sem_owner(entry_t *e, const char *field, int make) {
    for (size_t i = 0; i < e->nids; i++)
        if (strcmp(e->ids[i].field, field) == 0) return &e->ids[i];
    if (!make) return NULL;
    if (e->nids == e->ids_cap) {
        e->ids_cap = e->ids_cap ? 2 * e->ids_cap : 4;
        e->ids = xrealloc(e->ids, e->ids_cap * sizeof(e->ids[0]));
    }
    sem_owner_t *o = &e->ids[e->nids++];
    memset(o, 0, sizeof(*o));
    o->field = xstrndup(field, strlen(field));
    return o;
}

/* ZSCORE of "<field>:<k>": SEM_NONE when there is no such id. */
static uint64_t sem_score(entry_t *e, const char *field, long long k) {
    const sem_owner_t *o = sem_owner(e, field, 0);
    if (o == NULL || k < 1 || (size_t)k > o->n) return SEM_NONE;
    return o->score[k - 1];
}

/* ZADD: 1 if the id is new, 0 if only its score changed. */
static int sem_zadd(entry_t *e, const char *field, long long k, uint64_t score) {
    sem_owner_t *o = sem_owner(e, field, 1);
    EXPECT(k >= 1 && score != SEM_NONE, "fake: ZADD of id %lld, score %" PRIu64, k, score);
    if ((size_t)k > o->n) {
        o->score = xrealloc(o->score, (size_t)k * sizeof(o->score[0]));
        for (size_t i = o->n; i < (size_t)k; i++) o->score[i] = SEM_NONE;
        o->n = (size_t)k;
    }
    int added = o->score[k - 1] == SEM_NONE;
    o->score[k - 1] = score;
    return added;
}

/* ZREM: 1 if the id was there. */
static int sem_zrem(entry_t *e, const char *field, long long k) {
    sem_owner_t *o = sem_owner(e, field, 0);
    if (o == NULL || k < 1 || (size_t)k > o->n || o->score[k - 1] == SEM_NONE) return 0;
    o->score[k - 1] = SEM_NONE;
    return 1;
}

/* ZCARD of one owner's ids (NULL: of all). */
static size_t sem_count(const entry_t *e, const sem_owner_t *only) {
    size_t n = 0;
    for (size_t i = 0; i < e->nids; i++) {
        const sem_owner_t *o = &e->ids[i];
        if (only != NULL && o != only) continue;
        for (size_t k = 0; k < o->n; k++)
            if (o->score[k] != SEM_NONE) n++;
    }
    return n;
}

/* ZCOUNT 0 now: the expired ids. */
static long long sem_expired(const fake_t *fb, const entry_t *e) {
    uint64_t now = now_of(fb);
    long long n = 0;
    for (size_t i = 0; i < e->nids; i++)
        for (size_t k = 0; k < e->ids[i].n; k++)
            if (e->ids[i].score[k] != SEM_NONE && e->ids[i].score[k] <= now) n++;
    return n;
}

/* INCRBY on the key, which it makes a semaphore's string if there was none. */
static long long sem_incrby(entry_t *e, long long v) {
    EXPECT(e->nfields == 0, "fake: INCRBY of %s, a lock hash", e->name);
    if (!e->sem) {
        e->sem = 1;
        e->sem_avail = 0;
    }
    e->sem_avail += v;
    return e->sem_avail;
}

/* One expired id, for ZRANGEBYSCORE's order: by score, then by member. */
typedef struct sem_expired_s {
    uint64_t score;
    sem_owner_t *o;
    long long k;
    char member[FIELD_MAX + 24];
} sem_expired_t;

static int sem_expired_cmp(const void *a, const void *b) {
    const sem_expired_t *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return strcmp(x->member, y->member);
}

/* The acquire's take-back: ZRANGEBYSCORE 0 now LIMIT 0 1000, ZREM them,
 * INCRBY their number. Returns how many. */
static long long sem_reclaim(const fake_t *fb, entry_t *e) {
    uint64_t now = now_of(fb);
    size_t n = (size_t)sem_expired(fb, e), j = 0;
    if (n == 0) return 0;
    sem_expired_t *x = xrealloc(NULL, n * sizeof(*x));
    for (size_t i = 0; i < e->nids; i++) {
        sem_owner_t *o = &e->ids[i];
        for (size_t k = 0; k < o->n; k++) {
            if (o->score[k] == SEM_NONE || o->score[k] > now) continue;
            x[j].score = o->score[k];
            x[j].o = o;
            x[j].k = (long long)k + 1;
            snprintf(x[j].member, sizeof(x[j].member), "%s:%zu", o->field, k + 1);
            j++;
        }
    }
    if (n > SEM_RECLAIM_MAX) {
        qsort(x, n, sizeof(*x), sem_expired_cmp);
        n = SEM_RECLAIM_MAX;
    }
    for (size_t i = 0; i < n; i++) x[i].o->score[x[i].k - 1] = SEM_NONE;
    free(x);
    sem_incrby(e, (long long)n);
    return (long long)n;
}

/* The lowest score of any id (SEM_NONE: no id). */
static uint64_t sem_first(const entry_t *e) {
    uint64_t first = SEM_NONE;
    for (size_t i = 0; i < e->nids; i++)
        for (size_t k = 0; k < e->ids[i].n; k++) {
            uint64_t s = e->ids[i].score[k];
            if (s != SEM_NONE && (first == SEM_NONE || s < first)) first = s;
        }
    return first;
}

/* FORCEUNLOCK's semaphore branch: every id goes, its permit back. */
static int sem_force(entry_t *e) {
    size_t n = sem_count(e, NULL);
    if (n == 0) return 0;
    for (size_t i = 0; i < e->nids; i++)
        for (size_t k = 0; k < e->ids[i].n; k++) e->ids[i].score[k] = SEM_NONE;
    sem_incrby(e, (long long)n);
    return 1;
}

/* ---- a fair lock's queue and its waiters' channels ------------------------------ */

/* The index of field's place (LPOS), or -1. */
static long long place_pos(const entry_t *e, const char *field) {
    for (size_t i = 0; i < e->nqueue; i++)
        if (strcmp(e->queue[i].field, field) == 0) return (long long)i;
    return -1;
}

static void place_remove_at(entry_t *e, size_t i) {
    free(e->queue[i].field);
    memmove(&e->queue[i], &e->queue[i + 1], (e->nqueue - i - 1) * sizeof(e->queue[0]));
    e->nqueue--;
}

/* ZREM and LREM of field: 1 if it had a place. */
static int place_del(entry_t *e, const char *field) {
    long long i = place_pos(e, field);
    if (i < 0) return 0;
    place_remove_at(e, (size_t)i);
    return 1;
}

/* ZADD field ends, and RPUSH it when the ZADD added it (a new place at the
 * tail; a place kept moves only its end). */
static void place_set(entry_t *e, const char *field, uint64_t ends) {
    long long i = place_pos(e, field);
    if (i >= 0) {
        e->queue[i].ends = ends;
        return;
    }
    if (e->nqueue == e->queue_cap) {
        e->queue_cap = e->queue_cap ? 2 * e->queue_cap : 4;
        e->queue = xrealloc(e->queue, e->queue_cap * sizeof(e->queue[0]));
    }
    e->queue[e->nqueue].field = xstrndup(field, strlen(field));
    e->queue[e->nqueue].ends = ends;
    e->nqueue++;
}

/* ---- dlock_fair:{K}, a set with an expiry ---- */

static void dlockd_check(const fake_t *fb, entry_t *e) {
    if (e->ndlockd == 0 || e->dlockd_until > now_of(fb)) return;
    for (size_t i = 0; i < e->ndlockd; i++) free(e->dlockd[i]);
    e->ndlockd = 0;
    e->dlockd_until = 0;
}

static long long dlockd_pos(const entry_t *e, const char *field) {
    for (size_t i = 0; i < e->ndlockd; i++)
        if (strcmp(e->dlockd[i], field) == 0) return (long long)i;
    return -1;
}

static void dlockd_srem(entry_t *e, const char *field) {
    long long i = dlockd_pos(e, field);
    if (i < 0) return;
    free(e->dlockd[i]);
    e->dlockd[i] = e->dlockd[--e->ndlockd];
    if (e->ndlockd == 0) e->dlockd_until = 0;
}

static void dlockd_sadd(entry_t *e, const char *field) {
    if (dlockd_pos(e, field) >= 0) return;
    if (e->ndlockd == e->dlockd_cap) {
        e->dlockd_cap = e->dlockd_cap ? 2 * e->dlockd_cap : 4;
        e->dlockd = xrealloc(e->dlockd, e->dlockd_cap * sizeof(e->dlockd[0]));
    }
    e->dlockd[e->ndlockd++] = xstrndup(field, strlen(field));
}

/* What every fair script does first: the places at the head that have
 * ended go (and only those: an ended place behind a live one stays until
 * it reaches the head); script_fair takes them out of dlock_fair too,
 * Redisson's script (srem 0) does not know that set. */
static void fair_purge(const fake_t *fb, entry_t *e, int srem) {
    uint64_t now = now_of(fb);
    while (e->nqueue > 0 && e->queue[0].ends <= now) {
        if (srem) dlockd_srem(e, e->queue[0].field);
        place_remove_at(e, 0);
    }
}

static const char *fair_head(const entry_t *e) {
    return e->nqueue > 0 ? e->queue[0].field : NULL;
}

static fair_chan_t *chan_find(const entry_t *e, uint64_t owner) {
    for (fair_chan_t *c = e->chans; c != NULL; c = c->next)
        if (c->owner == owner) return c;
    return NULL;
}

/* The watched channel of field ("o<id>"), or NULL: nobody here listens. */
static fair_chan_t *chan_of_field(const entry_t *e, const char *field) {
    char f[FIELD_MAX];
    for (fair_chan_t *c = e->chans; c != NULL; c = c->next) {
        if (!c->watched) continue;
        owner_field(f, sizeof(f), c->owner);
        if (strcmp(f, field) == 0) return c;
    }
    return NULL;
}

/* PUBLISH on field's channel, delivered now: 1 if someone here listened. */
static int fair_publish_now(fake_t *fb, entry_t *e, const char *field) {
    fair_chan_t *c = chan_of_field(e, field);
    if (c == NULL || !fb->up) return 0;
    fb->stats.published++;
    c->cb(c->data, BACKEND_RELEASED);
    return 1;
}

/* A script's wake(): a message on the head's own channel, delivered after
 * the op's callback (fair_deliver); nothing when nobody queues. */
static void fair_wake(fake_t *fb, entry_t *e) {
    const char *h = fair_head(e);
    if (h == NULL) return;
    EXPECT(fb->npubs < FAIR_PUB_MAX, "fake: too many fair release messages at once");
    EXPECT(strlen(h) < FAIR_PUB_FIELD, "fake: field %s too long", h);
    fb->pubs[fb->npubs].e = e;
    snprintf(fb->pubs[fb->npubs].field, FAIR_PUB_FIELD, "%s", h);
    fb->npubs++;
    fb->stats.fair_wakes++;
}

static void fair_deliver(fake_t *fb) {
    for (size_t i = 0; i < fb->npubs; i++) fair_publish_now(fb, fb->pubs[i].e, fb->pubs[i].field);
    fb->npubs = 0;
}

/* ---- the scripts ---------------------------------------------------------------- */

/* The hash's PEXPIRE where its PTTL is shorter (a read/write lock's TTL
 * only grows). */
static void key_expire_at_least(const fake_t *fb, entry_t *e, long long ms) {
    if (key_pttl(fb, e) < ms) key_expire_in(fb, e, ms);
}

/* A reader's release left other fields: script_rw's TTL rule. Returns 1
 * when the key is to be deleted (no live read hold left, no writer). */
static int rw_release_rest(const fake_t *fb, entry_t *e) {
    long long cur = key_pttl(fb, e), left = -3;
    for (size_t i = 0; i < e->nfields; i++) {
        const field_t *g = &e->fields[i];
        /* a writer's field has no timeout keys: each reads -2 */
        for (long long n = g->count; n >= 1; n--) {
            long long t = is_write_field(g->name) ? -2 : tmo_pttl(fb, g, n);
            if (t > left) left = t;
            if (10 * left >= 9 * cur) return 0; /* left >= cur - cur / 10 */
        }
    }
    if (left > 0) {
        key_expire_in(fb, e, left);
        return 0;
    }
    return e->mode != BACKEND_WRITE;
}

/* A read/write lock's op, as script_rw (ACQUIRE, RELEASE, DROP) and
 * LUA_RW_RENEW (RENEW) run it. */
static void model_run_rw(fake_t *fb, backend_op_t *op, entry_t *e) {
    backend_result_t *res = &op->res;
    char rfield[FIELD_MAX], wfield[FIELD_MAX];
    int write = op->mode == BACKEND_WRITE;
    owner_field_mode(rfield, sizeof(rfield), op->owner, BACKEND_READ);
    owner_field_mode(wfield, sizeof(wfield), op->owner, BACKEND_WRITE);
    const char *fname = write ? wfield : rfield;
    /* "mode and hget(field)": a plain lock's fields do not count */
    int rw = e->nfields > 0 && e->mode != BACKEND_MUTEX;
    field_t *f = rw ? field_find(e, fname) : NULL;

    if (e->sem) {
        /* script_rw's WRONGTYPE branch: {3, 3} for an acquire, -1 else;
         * LUA_RW_RENEW takes it as gone */
        if (op->type == BACKEND_ACQUIRE) {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = BACKEND_SEM;
        } else if (op->type == BACKEND_RENEW) {
            res->renewal = e->marker != NULL && strcmp(e->marker, fname) == 0 ? BACKEND_FORCED
                                                                               : BACKEND_GONE;
        } else {
            res->holds = -1;
        }
        return;
    }
    switch (op->type) {
    case BACKEND_ACQUIRE:
        if (e->nfields > 0 && !rw) {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = BACKEND_MUTEX;
            break;
        }
        if (!write) {
            if (rw && e->mode == BACKEND_WRITE && field_find(e, wfield) == NULL) {
                res->outcome = BACKEND_TAKEN;
                res->ttl_ms = key_pttl(fb, e);
                break;
            }
            if (!rw) e->mode = BACKEND_READ;
            if (f == NULL) f = field_add(e, rfield, 0);
            long long n = ++f->count;
            tmo_set(fb, f, n, op->lease_ms);
            key_expire_at_least(fb, e, op->lease_ms);
            if (n == 1) {
                res->outcome = BACKEND_GRANTED;
                res->fence = e->fence; /* the counter as it is */
            } else {
                res->outcome = BACKEND_REENTERED;
                res->holds = n;
            }
            break;
        }
        if (!rw) {
            e->mode = BACKEND_WRITE;
            field_add(e, wfield, 1);
            key_expire_in(fb, e, op->lease_ms);
            res->outcome = BACKEND_GRANTED;
            res->fence = ++e->fence;
        } else if (e->mode == BACKEND_WRITE && f != NULL) {
            res->outcome = BACKEND_REENTERED;
            res->holds = ++f->count;
            key_expire_at_least(fb, e, op->lease_ms);
        } else { /* another's write, or reads (ours too: an upgrade) */
            res->outcome = BACKEND_TAKEN;
            res->ttl_ms = key_pttl(fb, e);
        }
        break;
    case BACKEND_RELEASE:
        if (f == NULL) {
            res->holds = -1;
            break;
        }
        res->holds = 0;
        field_del(e, f); /* and a reader's timeout keys */
        if (e->nfields == 0) { /* deleted: published */
            res->others_waiting = e->remote_waiters;
        } else if (write) { /* the owner's reads stay: published too */
            e->mode = BACKEND_READ;
            res->others_waiting = e->remote_waiters;
        } else if (rw_release_rest(fb, e)) {
            key_delete(e);
            res->others_waiting = e->remote_waiters;
        }
        break;
    case BACKEND_DROP:
        if (f == NULL) {
            res->holds = -1;
        } else if (f->count <= 1) {
            res->holds = f->count;
        } else {
            if (!write) tmo_del(f, f->count);
            res->holds = --f->count;
        }
        break;
    case BACKEND_RENEW:
        if (f != NULL) {
            key_expire_at_least(fb, e, op->lease_ms);
            if (!write)
                for (long long n = 1; n <= f->count; n++) tmo_pexpire(fb, f, n, op->lease_ms);
            res->renewal = BACKEND_RENEWED;
        } else if (e->marker != NULL && strcmp(e->marker, fname) == 0) {
            res->renewal = BACKEND_FORCED;
        } else {
            res->renewal = BACKEND_GONE;
        }
        break;
    default:
        ck_abort_msg("fake backend: read/write op of kind %d", (int)op->type);
    }
}

/* script_status, as scripts_decode() reads it. */
static void model_status(fake_t *fb, backend_op_t *op, entry_t *e) {
    backend_result_t *res = &op->res;
    char field[FIELD_MAX];
    if (e->sem) { /* {pttl, 0, 3, available + expired ids, 0} */
        res->ttl_ms = -1;
        res->holds = 0;
        res->held = BACKEND_SEM;
        res->holders = e->sem_avail + sem_expired(fb, e);
        return;
    }
    owner_field(field, sizeof(field), op->owner);
    const field_t *f = field_find(e, field);
    res->ttl_ms = key_pttl(fb, e);
    res->holds = f ? f->count : 0;
    if (e->nfields == 0 || e->mode == BACKEND_MUTEX) {
        /* {t, n, 0, 0, 0}: a WRITE op reads the last one */
        if (op->mode == BACKEND_WRITE) res->holds = 0;
        return;
    }
    res->held = e->mode;
    for (size_t i = 0; i < e->nfields; i++)
        if (!is_write_field(e->fields[i].name)) res->holders++;
    if (op->mode == BACKEND_WRITE) {
        owner_field_mode(field, sizeof(field), op->owner, BACKEND_WRITE);
        f = field_find(e, field);
        res->holds = f ? f->count : 0;
    }
    if (e->mode == BACKEND_WRITE) res->holders = 1;
}

/* A semaphore's op, as script_sem (ACQUIRE, RELEASE, SEMINIT) and
 * LUA_SEM_RENEW (RENEW) run it. */
static void model_run_sem(fake_t *fb, backend_op_t *op, entry_t *e) {
    backend_result_t *res = &op->res;
    char field[FIELD_MAX];
    uint64_t now = now_of(fb);
    long long n = op->permits, b = op->permit_base;
    owner_field(field, sizeof(field), op->owner);

    if (op->type == BACKEND_RENEW) { /* the ids only, whatever the key is */
        for (long long i = 1; i <= n; i++) {
            uint64_t sc = sem_score(e, field, i);
            if (sc == SEM_NONE || sc <= now) {
                res->renewal = BACKEND_GONE;
                return;
            }
        }
        for (long long i = 1; i <= n; i++) sem_zadd(e, field, i, now + op->lease_ms);
        res->renewal = BACKEND_RENEWED;
        return;
    }
    if (e->nfields > 0) { /* a lock hash: {3, its kind}, a release -1 */
        if (op->type == BACKEND_RELEASE) {
            res->holds = -1;
        } else {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = e->mode;
        }
        return;
    }
    switch (op->type) {
    case BACKEND_INIT:
        if (e->sem) {
            res->holds = 0;
            break;
        }
        e->sem = 1;
        e->sem_avail = n;
        res->holds = 1;
        break;
    case BACKEND_RELEASE: {
        long long removed = 0;
        for (long long i = b + 1; i <= b + n; i++) removed += sem_zrem(e, field, i);
        if (removed == 0) {
            res->holds = -1;
            break;
        }
        sem_incrby(e, removed);
        res->holds = 0;
        res->others_waiting = e->remote_waiters;
        break;
    }
    case BACKEND_ACQUIRE: {
        for (long long i = 1; i <= b; i++) {
            uint64_t sc = sem_score(e, field, i);
            if (sc == SEM_NONE || sc <= now) {
                res->outcome = BACKEND_HOLD_GONE;
                return;
            }
        }
        sem_reclaim(fb, e);
        if (!e->sem || e->sem_avail < n) {
            uint64_t first = sem_first(e);
            res->outcome = BACKEND_TAKEN;
            res->ttl_ms = first != SEM_NONE && first < FAKE_SEM_FOREVER
                              ? (first > now ? (long long)(first - now) : 0)
                              : -1;
            break;
        }
        long long added = 0;
        for (long long i = 1; i <= b + n; i++) added += sem_zadd(e, field, i, now + op->lease_ms);
        e->sem_avail -= added;
        res->outcome = BACKEND_GRANTED;
        res->fence = (uint64_t)e->sem_avail; /* {0, permits still available} */
        break;
    }
    default:
        ck_abort_msg("fake backend: semaphore op of kind %d", (int)op->type);
    }
}

/* script_fair's long-queue bound: a queue longer than this is only read
 * when it has more places than dlock_fair has members. */
#define FAIR_SCAN_MAX 64

/* script_fair for field: op 'a' acquire (or queue, the place lasting
 * queue_ms more, plus foreign_ms for each place ahead that is not a
 * dlockd's), 'o' acquire without queueing, 'r' release, 'd' one hold
 * less, 'l' leave the queue; lease_ms < 0: no expiry (a foreign holder). */
static void fair_script(fake_t *fb, entry_t *e, char op, const char *field, long long lease_ms,
                        long long queue_ms, long long foreign_ms, backend_result_t *res) {
    uint64_t now = now_of(fb);
    key_check(fb, e);
    dlockd_check(fb, e);
    fair_purge(fb, e, 1);
    if (op == 'l') {
        place_del(e, field);
        dlockd_srem(e, field);
        if (!e->sem && e->nfields == 0) fair_wake(fb, e);
        res->holds = 0;
        return;
    }
    /* a semaphore's string, or a read/write lock's hash: {3, its kind}, -1 */
    if (e->sem || (e->nfields > 0 && e->mode != BACKEND_MUTEX)) {
        if (op == 'a' || op == 'o') {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = e->sem ? BACKEND_SEM : e->mode;
        } else {
            res->holds = -1;
        }
        return;
    }
    field_t *f = field_find(e, field);
    if (op == 'd') { /* one hold less, never the last */
        res->holds = f == NULL ? -1 : f->count > 1 ? --f->count : f->count;
        return;
    }
    if (op == 'r') {
        res->holds = -1;
        if (f == NULL) return;
        key_delete(e);
        fair_wake(fb, e);
        res->holds = 0;
        res->others_waiting = 0; /* node.c: a fair release never counts */
        return;
    }
    const char *h = fair_head(e);
    if (e->nfields == 0 && (h == NULL || strcmp(h, field) == 0)) {
        place_del(e, field); /* LPOP of the head, ZREM */
        dlockd_srem(e, field);
        field_add(e, field, 1);
        key_expire_in(fb, e, lease_ms);
        if (h != NULL) fair_wake(fb, e); /* the next place learns the lease */
        res->outcome = BACKEND_GRANTED;
        res->fence = ++e->fence;
        return;
    }
    if (f != NULL) {
        res->outcome = BACKEND_REENTERED;
        res->holds = ++f->count;
        key_expire_in(fb, e, lease_ms);
        return;
    }
    long long ttl = key_pttl(fb, e);
    if (ttl < 0) /* free, or held without expiry: when the head's place ends */
        ttl = h == NULL ? -1 : e->queue[0].ends > now ? (long long)(e->queue[0].ends - now) : 0;
    if (op == 'a') {
        /* Redisson's places ahead (not in dlock_fair), read unless the
         * queue is long and dlock_fair has as many members */
        long long ahead = 0;
        size_t n = e->nqueue;
        if (n > 0 && (n <= FAIR_SCAN_MAX || n > e->ndlockd))
            for (size_t i = 0; i < n && strcmp(e->queue[i].field, field) != 0; i++)
                if (dlockd_pos(e, e->queue[i].field) < 0) ahead++;
        dlockd_sadd(e, field);
        uint64_t len = (uint64_t)queue_ms + (uint64_t)ahead * (uint64_t)foreign_ms;
        place_set(e, field, now + len);
        if (e->dlockd_until < now + len) e->dlockd_until = now + len; /* PEXPIRE if shorter */
    }
    res->outcome = BACKEND_TAKEN;
    res->ttl_ms = ttl;
}

/* Redisson's RFairLock tryLock script for field, as far as the lock
 * manager can tell: the ended places at the head go (dlock_fair is not
 * touched); granted when free and the queue is empty or field is its
 * head, which then takes wait_ms off every other place; reentered; else
 * a place at the tail ending place_ms from now, or the place it has
 * (Redisson chains the ends; the test gives one). */
static int redisson_script(fake_t *fb, entry_t *e, const char *field, long long lease_ms,
                           long long place_ms, long long wait_ms) {
    uint64_t now = now_of(fb);
    key_check(fb, e);
    dlockd_check(fb, e);
    fair_purge(fb, e, 0);
    EXPECT(!e->sem && (e->nfields == 0 || e->mode == BACKEND_MUTEX),
           "fake: Redisson's fair lock on %s, another kind", e->name);
    const char *h = fair_head(e);
    if (e->nfields == 0 && (h == NULL || strcmp(h, field) == 0)) {
        place_del(e, field);
        for (size_t i = 0; i < e->nqueue; i++) e->queue[i].ends -= (uint64_t)wait_ms;
        field_add(e, field, 1); /* Redisson knows no fence counter */
        key_expire_in(fb, e, lease_ms);
        return BACKEND_GRANTED;
    }
    field_t *f = field_find(e, field);
    if (f != NULL) {
        f->count++;
        key_expire_in(fb, e, lease_ms);
        return BACKEND_REENTERED;
    }
    if (place_pos(e, field) < 0) place_set(e, field, now + (uint64_t)place_ms);
    return BACKEND_TAKEN;
}

/* A fair lock's op, as script_fair runs it (ACQUIRE 'a', or 'o' with
 * op->once; RELEASE 'r', DROP 'd', LEAVE 'l'); its renewals, STATUS, WHO
 * and FORCE are a plain lock's (model_run). */
static void model_run_fair(fake_t *fb, backend_op_t *op, entry_t *e) {
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), op->owner);
    char c = op->type == BACKEND_ACQUIRE ? (op->once ? 'o' : 'a')
             : op->type == BACKEND_RELEASE ? 'r'
             : op->type == BACKEND_DROP    ? 'd'
                                           : 'l';
    fair_script(fb, e, c, field, op->lease_ms, op->queue_ms, op->queue_foreign_ms, &op->res);
}

/* An election's op, as elect.lua runs it: a fair lock's queue and hash
 * (fair_script) with the leader's record beside it, set by a grant and
 * cleared by a release; LEADER reads it ({fence, value, pttl} into
 * op->answer; fence 0 when nobody leads; WRONG_KIND when the hash is
 * another kind's, a plain lock's included). The release's message on the
 * name's channel is the test's to deliver (fake_publish). */
static void model_run_elect(fake_t *fb, backend_op_t *op, entry_t *e) {
    backend_result_t *res = &op->res;
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), op->owner);
    key_check(fb, e);
    int other = e->sem || (e->nfields > 0 && e->mode != BACKEND_MUTEX) ||
                (e->nfields > 0 && field_find(e, e->leader_field) == NULL);
    if (op->type == BACKEND_LEADER) {
        EXPECT(op->answer != NULL, "LEADER of %.*s without room for its value", (int)op->len,
               op->name);
        if (other) {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = e->sem ? BACKEND_SEM : e->mode;
        } else if (e->nfields > 0) {
            size_t n = strlen(e->leader_value);
            memcpy(op->answer, e->leader_value, n + 1);
            res->value = op->answer;
            res->value_len = n;
            res->fence = e->leader_fence;
            res->ttl_ms = key_pttl(fb, e);
        } else {
            op->answer[0] = '\0';
            res->value = op->answer;
            res->ttl_ms = -2;
        }
        return;
    }
    if (other && op->type == BACKEND_ACQUIRE) {
        res->outcome = BACKEND_WRONG_KIND;
        res->held = e->sem ? BACKEND_SEM : e->mode;
        return;
    }
    char c = op->type == BACKEND_ACQUIRE ? (op->once ? 'o' : 'a')
             : op->type == BACKEND_RELEASE ? 'r'
             : op->type == BACKEND_DROP    ? 'd'
                                           : 'l';
    size_t pubs = fb->npubs; /* no waiter's own channel: the name's one (fake_publish) */
    fair_script(fb, e, c, field, op->lease_ms, op->queue_ms, 0, res);
    fb->npubs = pubs;
    if (op->type == BACKEND_ACQUIRE && res->outcome == BACKEND_GRANTED) {
        EXPECT(op->value != NULL && op->value_len <= BACKEND_ANSWER_MAX,
               "ELECT of %.*s without a value", (int)op->len, op->name);
        snprintf(e->leader_field, sizeof(e->leader_field), "%s", field);
        snprintf(e->leader_value, sizeof(e->leader_value), "%.*s", (int)op->value_len,
                 op->value);
        e->leader_fence = res->fence;
    }
    if (op->type == BACKEND_RELEASE && res->holds == 0) {
        e->leader_field[0] = '\0';
        e->leader_value[0] = '\0';
    }
}

/* One op, as its script would run it. */
/* A multi-name acquire, as mlock.lua: every name looked at first (kind,
 * a reentry's field still there, someone else's hold), then all taken. */
static void model_run_multi(fake_t *fb, backend_op_t *op) {
    backend_result_t *res = &op->res;
    char field[FIELD_MAX];
    long long pttl = -2;
    size_t taken = 0;
    owner_field(field, sizeof(field), op->owner);
    res->status = BACKEND_OK;
    for (size_t i = 0; i < op->nnames; i++) {
        entry_t *e = entry_get(fb, op->names[i].name, op->names[i].len);
        key_check(fb, e);
        field_t *f = field_find(e, field);
        if (op->reentry[i] == 'r') {
            if (f == NULL || e->sem || e->mode != BACKEND_MUTEX) {
                res->outcome = BACKEND_HOLD_GONE;
                res->which = i;
                return;
            }
            continue;
        }
        if (e->sem || (e->nfields > 0 && e->mode != BACKEND_MUTEX)) {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = e->sem ? BACKEND_SEM : e->mode;
            res->which = i;
            return;
        }
        if (f != NULL) {
            res->outcome = BACKEND_REENTERED;
            res->holds = f->count;
            res->which = i;
            return;
        }
        if (e->nfields > 0) {
            long long t = key_pttl(fb, e);
            if (taken++ == 0) res->which = i;
            if (t < 0) pttl = -1;
            else if (pttl != -1 && t > pttl) pttl = t;
        }
    }
    if (taken > 0) {
        res->outcome = BACKEND_TAKEN;
        res->ttl_ms = pttl;
        return;
    }
    for (size_t i = 0; i < op->nnames; i++) {
        entry_t *e = entry_get(fb, op->names[i].name, op->names[i].len);
        field_t *f = field_find(e, field);
        if (op->reentry[i] == 'r') {
            op->values[i] = (uint64_t)++f->count;
            if (key_pttl(fb, e) < (long long)op->lease_ms) key_expire_in(fb, e, op->lease_ms);
        } else {
            field_add(e, field, 1);
            key_expire_in(fb, e, op->lease_ms);
            op->values[i] = ++e->fence;
        }
    }
    res->outcome = BACKEND_GRANTED;
}

static void model_run(fake_t *fb, backend_op_t *op) {
    backend_result_t *res = &op->res;
    if (op->mode == BACKEND_MULTI) {
        model_run_multi(fb, op);
        return;
    }
    entry_t *e = entry_get(fb, op->name, op->len);
    char field[FIELD_MAX];
    field_t *f;

    owner_field(field, sizeof(field), op->owner);
    key_check(fb, e);
    f = field_find(e, field);
    res->status = BACKEND_OK;
    if (op->type == BACKEND_INIT ||
        (op->mode == BACKEND_SEM && (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RELEASE ||
                                     op->type == BACKEND_DROP || op->type == BACKEND_RENEW))) {
        model_run_sem(fb, op, e);
        return;
    }
    if (op->mode == BACKEND_ELECT &&
        (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RELEASE || op->type == BACKEND_DROP ||
         op->type == BACKEND_LEAVE || op->type == BACKEND_LEADER)) {
        model_run_elect(fb, op, e);
        return;
    }
    if (op->mode == BACKEND_FAIR &&
        (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RELEASE ||
         op->type == BACKEND_DROP || op->type == BACKEND_LEAVE)) {
        model_run_fair(fb, op, e);
        return;
    }
    /* A fair lock's renewal is a plain one (the batch script's 'n'). */
    if (e->sem && op->type != BACKEND_STATUS && op->type != BACKEND_FORCE &&
        op->type != BACKEND_WHO &&
        (op->mode == BACKEND_MUTEX || op->mode == BACKEND_FAIR || op->mode == BACKEND_ELECT)) {
        /* The plain-lock scripts on a string: LUA_ACQUIRE answers {3, 3},
         * LUA_RELEASE's HGET raises WRONGTYPE, LUA_RENEW counts it gone. */
        if (op->type == BACKEND_ACQUIRE) {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = BACKEND_SEM;
        } else if (op->type == BACKEND_RENEW) {
            res->renewal = e->marker != NULL && strcmp(e->marker, field) == 0 ? BACKEND_FORCED
                                                                              : BACKEND_GONE;
        } else {
            snprintf(fb->error, sizeof(fb->error),
                     "WRONGTYPE Operation against a key holding the wrong kind of value");
            res->status = BACKEND_FAILED;
            res->error = fb->error;
        }
        return;
    }
    if ((op->mode == BACKEND_READ || op->mode == BACKEND_WRITE) &&
        (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RELEASE ||
         op->type == BACKEND_DROP || op->type == BACKEND_RENEW)) {
        model_run_rw(fb, op, e);
        return;
    }
    /* The plain-lock scripts: an acquire, release or drop of a name held
     * as a read/write lock changes nothing, whatever fields the owner has
     * there (see fake_backend.h). */
    switch (op->type) {
    case BACKEND_ACQUIRE:
        if (e->nfields == 0) {
            field_add(e, field, 1);
            key_expire_in(fb, e, op->lease_ms);
            res->outcome = BACKEND_GRANTED;
            res->fence = ++e->fence;
        } else if (e->mode != BACKEND_MUTEX) {
            res->outcome = BACKEND_WRONG_KIND;
            res->held = e->mode;
        } else if (f != NULL) {
            res->outcome = BACKEND_REENTERED;
            res->holds = ++f->count;
            key_expire_in(fb, e, op->lease_ms);
        } else {
            res->outcome = BACKEND_TAKEN;
            res->ttl_ms = key_pttl(fb, e);
        }
        break;
    case BACKEND_RELEASE:
        if (f == NULL || e->mode != BACKEND_MUTEX) {
            res->holds = -1;
        } else {
            key_delete(e);
            res->holds = 0;
            res->others_waiting = e->remote_waiters;
        }
        break;
    case BACKEND_DROP:
        if (f == NULL || e->mode != BACKEND_MUTEX) res->holds = -1;
        else if (f->count > 1) res->holds = --f->count;
        else res->holds = f->count;
        break;
    case BACKEND_RENEW:
        if (f != NULL) {
            key_expire_in(fb, e, op->lease_ms);
            res->renewal = BACKEND_RENEWED;
        } else if (e->marker != NULL && strcmp(e->marker, field) == 0) {
            res->renewal = BACKEND_FORCED;
        } else {
            res->renewal = BACKEND_GONE;
        }
        break;
    case BACKEND_STATUS:
        model_status(fb, op, e);
        break;
    case BACKEND_FORCE: /* a lock hash removed: its queue's first waiter is woken */
        res->removed = key_force(fb, e);
        if (res->removed && !e->sem) fair_wake(fb, e);
        break;
    case BACKEND_WHO: /* the holder's field (":write" cut); no daemon registers here */
        res->ttl_ms = e->sem ? -3 : key_pttl(fb, e);
        if (e->sem) res->held = BACKEND_SEM;
        if (op->who != NULL && e->sem) {
            op->who->owner[0] = '\0';
            op->who->daemon[0] = '\0';
        } else if (op->who != NULL) {
            const char *who = e->nfields > 0 ? e->fields[0].name : "";
            size_t n = strlen(who);
            if (is_write_field(who)) n -= 6;
            snprintf(op->who->owner, sizeof(op->who->owner), "%.*s", (int)n, who);
            op->who->daemon[0] = '\0';
        }
        break;
    default:
        ck_abort_msg("fake backend: op of unknown kind %d", (int)op->type);
    }
}

/* ---- answering --------------------------------------------------------------- */

static void answer(fake_t *fb, backend_op_t *op, const char *down_text) {
    fb->stats.inflight--;
    fb->stats.inflight_kind[op->type]--;
    memset(&op->res, 0, sizeof(op->res));
    if (down_text != NULL) {
        snprintf(fb->error, sizeof(fb->error), "%s", down_text);
        op->res.status = BACKEND_DOWN;
        op->res.error = fb->error;
    } else if (!fb->up) {
        snprintf(fb->error, sizeof(fb->error), "fake: redis not connected");
        op->res.status = BACKEND_DOWN;
        op->res.error = fb->error;
    } else if (fb->ninject > 0) {
        inject_t in = fb->inject[0];
        memmove(&fb->inject[0], &fb->inject[1], (fb->ninject - 1) * sizeof(fb->inject[0]));
        fb->ninject--;
        if (in.run) model_run(fb, op);
        snprintf(fb->error, sizeof(fb->error), "%s", in.text);
        if (in.rewrite) {
            /* A reply rewritten on its way: whatever ran, this is what
             * the lock manager hears. */
            op->res.outcome = in.outcome;
        } else if (in.status == BACKEND_UNACKED) {
            /* As node.c does after a short WAIT: only a new grant or a
             * renewal is refused; anything else stands. */
            if ((op->type == BACKEND_ACQUIRE && op->res.outcome == BACKEND_GRANTED) ||
                (op->type == BACKEND_RENEW && op->res.renewal == BACKEND_RENEWED)) {
                op->res.status = BACKEND_UNACKED;
                op->res.error = fb->error;
            }
        } else {
            memset(&op->res, 0, sizeof(op->res));
            op->res.status = in.status;
            op->res.error = fb->error;
        }
    } else {
        model_run(fb, op);
    }
    fb->stats.answered++;
    op->cb(op);
    fair_deliver(fb);
}

size_t fake_run(fake_t *fb) {
    struct op_queue_s q = STAILQ_HEAD_INITIALIZER(q);
    backend_op_t *op;
    size_t n = 0;
    uint64_t seq = fb->confirm_seq;

    if (fb->held) return 0;
    fb->stats.rounds++;
    STAILQ_CONCAT(&q, &fb->queue);
    size_t doomed = fb->doomed;
    fb->doomed = 0;
    while ((op = STAILQ_FIRST(&q)) != NULL) {
        STAILQ_REMOVE_HEAD(&q, link);
        answer(fb, op, n < doomed ? "fake: connection lost" : NULL);
        n++;
    }
    if (!fb->up) return n;
    /* New entries go in at the head: the ones from before are all after it. */
    for (entry_t *e = fb->entries; e != NULL; e = e->next) {
        if (e->confirm && e->confirm_seq <= seq) {
            e->confirm = 0;
            if (e->watched && fb->up) {
                fb->stats.confirms++;
                e->cb(e->data, BACKEND_WATCHING);
            }
        }
        for (fair_chan_t *c = e->chans; c != NULL; c = c->next) {
            if (!c->confirm || c->confirm_seq > seq) continue;
            c->confirm = 0;
            if (c->watched && fb->up) {
                fb->stats.confirms++;
                c->cb(c->data, BACKEND_WATCHING);
            }
        }
    }
    return n;
}

size_t fake_run_one(fake_t *fb) {
    backend_op_t *op = STAILQ_FIRST(&fb->queue);
    if (fb->held || op == NULL) return 0;
    STAILQ_REMOVE_HEAD(&fb->queue, link);
    int doomed = fb->doomed > 0;
    if (doomed) fb->doomed--;
    answer(fb, op, doomed ? "fake: connection lost" : NULL);
    return 1;
}

static int confirms_owed(const fake_t *fb) {
    if (!fb->up) return 0;
    for (const entry_t *e = fb->entries; e != NULL; e = e->next) {
        if (e->confirm && e->watched) return 1;
        for (const fair_chan_t *c = e->chans; c != NULL; c = c->next)
            if (c->confirm && c->watched) return 1;
    }
    return 0;
}

void fake_settle(fake_t *fb) {
    int rounds = 0;
    EXPECT(!fb->held, "fake_settle while held");
    while (!STAILQ_EMPTY(&fb->queue) || confirms_owed(fb)) {
        EXPECT(++rounds <= FAKE_SETTLE_MAX, "fake_settle: still busy after %d rounds",
               FAKE_SETTLE_MAX);
        fake_run(fb);
    }
}

static void inject(fake_t *fb, backend_status_t status, int run, const char *text) {
    EXPECT(fb->ninject < FAKE_INJECT_MAX, "fake: too many injected failures");
    inject_t *in = &fb->inject[fb->ninject++];
    in->status = status;
    in->run = run;
    in->rewrite = 0;
    snprintf(in->text, sizeof(in->text), "%s", text ? text : "");
}

void fake_fail_next(fake_t *fb, backend_status_t status, const char *text) {
    inject(fb, status, 0, text);
}

void fake_lose_next(fake_t *fb, const char *text) {
    inject(fb, BACKEND_DOWN, 1, text);
}

void fake_unack_next(fake_t *fb, const char *text) {
    inject(fb, BACKEND_UNACKED, 1, text);
}

void fake_rewrite_next(fake_t *fb, backend_outcome_t outcome) {
    inject(fb, BACKEND_OK, 1, NULL);
    fb->inject[fb->ninject - 1].rewrite = 1;
    fb->inject[fb->ninject - 1].outcome = outcome;
}

void fake_hold(fake_t *fb, int hold) {
    fb->held = hold;
}

void fake_set_up(fake_t *fb, int up) {
    up = up != 0;
    if (fb->up == up) return;
    fb->up = up;
    if (!up) fb->doomed = fake_queued(fb); /* their connection is gone */
    if (up) {
        /* Resubscribed: every watch is confirmed again. */
        for (entry_t *e = fb->entries; e != NULL; e = e->next) {
            for (fair_chan_t *c = e->chans; c != NULL; c = c->next) {
                if (!c->watched) continue;
                c->confirm = 1;
                c->confirm_seq = ++fb->confirm_seq;
            }
            if (!e->watched) continue;
            e->confirm = 1;
            e->confirm_seq = ++fb->confirm_seq;
        }
    }
    backend_notify_state(&fb->base);
}

size_t fake_queued(const fake_t *fb) {
    size_t n = 0;
    const backend_op_t *op;
    STAILQ_FOREACH(op, &fb->queue, link) n++;
    return n;
}

const backend_op_t *fake_queued_op(const fake_t *fb, size_t i) {
    const backend_op_t *op;
    STAILQ_FOREACH(op, &fb->queue, link)
        if (i-- == 0) return op;
    return NULL;
}

/* ---- the backend_type_t ------------------------------------------------------- */

static void fk_submit(backend_t *b, backend_op_t *op) {
    fake_t *fb = FB(b);
    backend_op_t *q;

    EXPECT(op->cb != NULL, "op submitted without a callback");
    EXPECT(op->name != NULL && op->len > 0, "op submitted without a name");
    EXPECT((unsigned)op->type < BACKEND_OP_COUNT, "op of unknown kind %d", (int)op->type);
    STAILQ_FOREACH(q, &fb->queue, link)
        EXPECT(q != op, "op %p (kind %d, %.*s) submitted again while in flight", (void *)op,
               (int)op->type, (int)op->len, op->name);
    /* What scripts.c would send for a semaphore: script_sem takes SEMINIT
     * only in mode SEM; an acquire, release or renewal names one permit at
     * least, and a lease. */
    EXPECT(op->type != BACKEND_INIT || op->mode == BACKEND_SEM, "SEMINIT of mode %d",
           (int)op->mode);
    if (op->mode == BACKEND_SEM) {
        EXPECT(op->type != BACKEND_DROP, "a DROP of a semaphore (%.*s)", (int)op->len, op->name);
        if (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RELEASE ||
            op->type == BACKEND_RENEW)
            EXPECT(op->permits >= 1, "semaphore op of kind %d with no permits (%.*s)",
                   (int)op->type, (int)op->len, op->name);
        if (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RENEW)
            EXPECT(op->lease_ms > 0, "semaphore op of kind %d without a lease", (int)op->type);
    }

    /* A fair lock's: script_fair takes LEAVE in mode FAIR only; an acquire
     * has a lease, and a place's length unless it takes none ('o'). */
    EXPECT(op->type != BACKEND_LEAVE || op->mode == BACKEND_FAIR || op->mode == BACKEND_ELECT,
           "LEAVE of mode %d", (int)op->mode);
    EXPECT(op->type != BACKEND_LEADER || op->mode == BACKEND_ELECT, "LEADER of mode %d",
           (int)op->mode);
    /* A multi-name acquire: its names, distinct, the first its name. */
    EXPECT(op->mode != BACKEND_MULTI ||
               (op->type == BACKEND_ACQUIRE && op->nnames >= 1 && op->names != NULL &&
                op->reentry != NULL && op->values != NULL && op->names[0].name == op->name &&
                op->lease_ms > 0),
           "a MULTI op of kind %d with %zu names", (int)op->type, op->nnames);
    if (op->mode == BACKEND_FAIR && op->type == BACKEND_ACQUIRE) {
        EXPECT(op->lease_ms > 0, "fair acquire without a lease (%.*s)", (int)op->len, op->name);
        EXPECT(op->once == 0 || op->once == 1, "fair acquire with once %d", op->once);
        EXPECT(op->once || op->queue_ms > 0, "fair acquire taking a place of 0 ms (%.*s)",
               (int)op->len, op->name);
    }

    op->queued_at = now_of(fb);
    STAILQ_INSERT_TAIL(&fb->queue, op, link);
    fb->stats.submitted[op->type]++;
    if (++fb->stats.inflight > fb->stats.max_inflight) fb->stats.max_inflight = fb->stats.inflight;
    if (++fb->stats.inflight_kind[op->type] > fb->stats.max_inflight_kind[op->type])
        fb->stats.max_inflight_kind[op->type] = fb->stats.inflight_kind[op->type];

    if (fb->log_len == fb->log_cap) {
        fb->log_cap = fb->log_cap ? 2 * fb->log_cap : 64;
        fb->log = xrealloc(fb->log, fb->log_cap * sizeof(fb->log[0]));
    }
    fake_rec_t *r = &fb->log[fb->log_len++];
    memset(r, 0, sizeof(*r));
    r->kind = op->type;
    r->mode = op->mode;
    memcpy(r->name, op->name, op->len < FAKE_NAME_MAX ? op->len : FAKE_NAME_MAX);
    r->owner = op->owner;
    r->lease_ms = op->lease_ms;
    r->permits = op->permits;
    r->permit_base = op->permit_base;
    r->queue_ms = op->mode == BACKEND_FAIR || op->mode == BACKEND_ELECT ? op->queue_ms : 0;
    r->queue_foreign_ms = op->mode == BACKEND_FAIR ? op->queue_foreign_ms : 0;
    r->once = op->mode == BACKEND_FAIR ? op->once : 0;
    r->at = now_of(fb);
    r->round = fb->stats.rounds;
}

static void fk_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                     uint64_t owner, backend_watch_cb cb, void *data) {
    fake_t *fb = FB(b);
    entry_t *e = entry_get(fb, name, len);
    fb->stats.watch_calls++;
    e->watch_mode = (int)mode;
    e->watch_calls++;
    if (mode == BACKEND_FAIR) { /* the waiter's own channel: one per owner */
        fair_chan_t *c = chan_find(e, owner);
        if (c == NULL) {
            c = xrealloc(NULL, sizeof(*c));
            memset(c, 0, sizeof(*c));
            c->owner = owner;
            c->next = e->chans;
            e->chans = c;
        }
        c->watched = 1;
        c->cb = cb;
        c->data = data;
        c->confirm = 1;
        c->confirm_seq = ++fb->confirm_seq;
        return;
    }
    EXPECT(owner == 0, "watch of %.*s in mode %d for owner %" PRIu64, (int)len, name,
           (int)mode, owner);
    e->watched = 1;
    e->cb = cb;
    e->data = data;
    /* Confirmed from fake_run(), never from here. */
    e->confirm = 1;
    e->confirm_seq = ++fb->confirm_seq;
}

static void fk_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                       uint64_t owner) {
    fake_t *fb = FB(b);
    entry_t *e = entry_find(fb, name, len);
    fb->stats.unwatch_calls++;
    if (mode == BACKEND_FAIR) {
        fair_chan_t *c = e ? chan_find(e, owner) : NULL;
        if (c == NULL || !c->watched) {
            fb->stats.stray_unwatches++;
            return;
        }
        c->watched = 0;
        c->confirm = 0;
        c->cb = NULL;
        c->data = NULL;
        return;
    }
    if (e == NULL) return;
    e->watched = 0;
    e->confirm = 0;
    e->cb = NULL;
    e->data = NULL;
}

static int fk_available(const backend_t *b, const char *name, size_t len) {
    (void)name;
    (void)len;
    return FB_CONST(b)->up;
}

static void fk_describe(const backend_t *b, const char *name, size_t len, char *buf,
                        size_t cap) {
    const fake_t *fb = FB_CONST(b);
    (void)len;
    if (name == NULL) snprintf(buf, cap, "fake %s", fb->up ? "up" : "down");
    else snprintf(buf, cap, "%s", fb->up ? "fake: redis connected" : "fake: redis not connected");
}

static void fk_close(backend_t *b) {
    fake_t *fb = FB(b);
    backend_op_t *op;
    /* Ops the callbacks submit are answered here too. */
    while ((op = STAILQ_FIRST(&fb->queue)) != NULL) {
        STAILQ_REMOVE_HEAD(&fb->queue, link);
        answer(fb, op, "shutting down");
    }
    entry_t *e, *next;
    for (e = fb->entries; e != NULL; e = next) {
        next = e->next;
        key_delete(e);
        for (size_t i = 0; i < e->nids; i++) {
            free(e->ids[i].field);
            free(e->ids[i].score);
        }
        free(e->ids);
        for (size_t i = 0; i < e->nqueue; i++) free(e->queue[i].field);
        free(e->queue);
        for (size_t i = 0; i < e->ndlockd; i++) free(e->dlockd[i]);
        free(e->dlockd);
        for (fair_chan_t *c = e->chans, *cn; c != NULL; c = cn) {
            cn = c->next;
            free(c);
        }
        free(e->fields);
        free(e->marker);
        free(e->name);
        free(e);
    }
    free(fb->log);
    free(fb);
}

static void fk_reconfigure(backend_t *b, const conf_t *conf) {
    (void)b;
    (void)conf;
}

/* One node, named "fake", for the metrics. */
static void fk_nodes(const backend_t *b, backend_node_cb cb, void *data) {
    static const histo_t none;
    backend_node_info_t info = {.name = "fake", .role = "primary", .up = FB_CONST(b)->up,
                                .rtt = &none};
    cb(data, &info);
}

static uint32_t fk_drift(const backend_t *b, uint32_t lease_ms) {
    (void)lease_ms;
    return FB_CONST(b)->drift_ms;
}

void fake_set_drift(fake_t *fb, uint32_t drift_ms) {
    fb->drift_ms = drift_ms;
}

void fake_set_caps(fake_t *fb, unsigned caps) {
    fb->base.caps = caps;
}

static const backend_type_t fake_type = {
    .name = "fake",
    .submit = fk_submit,
    .watch = fk_watch,
    .unwatch = fk_unwatch,
    .available = fk_available,
    .describe = fk_describe,
    .reconfigure = fk_reconfigure,
    .nodes = fk_nodes,
    .drift = fk_drift,
    .close = fk_close,
};

fake_t *fake_new(timers_t *timers) {
    fake_t *fb = xrealloc(NULL, sizeof(*fb));
    memset(fb, 0, sizeof(*fb));
    fb->base.type = &fake_type;
    fb->base.caps = BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS | BACKEND_CAP_ONE_COPY | BACKEND_CAP_MULTI;
    fb->timers = timers;
    fb->up = 1;
    STAILQ_INIT(&fb->queue);
    return fb;
}

backend_t *fake_backend(fake_t *fb) {
    return &fb->base;
}

void fake_close(fake_t *fb) {
    if (fb != NULL) fb->base.type->close(&fb->base);
}

/* ---- the op log and counters ----------------------------------------------- */

const fake_stats_t *fake_stats(const fake_t *fb) {
    return &fb->stats;
}

size_t fake_log_len(const fake_t *fb) {
    return fb->log_len;
}

const fake_rec_t *fake_log(const fake_t *fb, size_t i) {
    EXPECT(i < fb->log_len, "fake_log(%zu) of %zu ops", i, fb->log_len);
    return &fb->log[i];
}

size_t fake_log_count(const fake_t *fb, size_t from, backend_op_type_t kind) {
    size_t n = 0;
    for (size_t i = from; i < fb->log_len; i++)
        if (fb->log[i].kind == kind) n++;
    return n;
}

size_t fake_log_count_mode(const fake_t *fb, size_t from, backend_op_type_t kind,
                           backend_mode_t mode) {
    size_t n = 0;
    for (size_t i = from; i < fb->log_len; i++)
        if (fb->log[i].kind == kind && fb->log[i].mode == mode) n++;
    return n;
}

/* ---- watches ---------------------------------------------------------------- */

int fake_watched(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    if (e == NULL) return 0;
    for (const fair_chan_t *c = e->chans; c != NULL; c = c->next)
        if (c->watched) return 1;
    return e->watched;
}

unsigned fake_watch_calls(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    return e ? e->watch_calls : 0;
}

int fake_watch_mode(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    return e ? e->watch_mode : -1;
}

int fake_publish(fake_t *fb, const char *name) {
    entry_t *e = entry_find(fb, name, strlen(name));
    if (e == NULL || !e->watched || !fb->up) return 0;
    fb->stats.published++;
    e->cb(e->data, BACKEND_RELEASED);
    return 1;
}

void fake_set_remote_waiters(fake_t *fb, const char *name, int on) {
    entry_named(fb, name)->remote_waiters = on;
}

/* ---- the model, for tests ------------------------------------------------------ */

void fake_expire(fake_t *fb, const char *name) {
    key_delete(entry_named(fb, name));
}

void fake_take(fake_t *fb, const char *name, const char *field, long long ttl_ms) {
    entry_t *e = entry_named(fb, name);
    EXPECT(!e->sem, "fake_take: %s is a semaphore", name);
    key_delete(e);
    field_add(e, field, 1);
    key_expire_in(fb, e, ttl_ms);
    e->fence++;
}

void fake_take_rw(fake_t *fb, const char *name, const char *field, backend_mode_t mode,
                  long long ttl_ms) {
    entry_t *e = entry_named(fb, name);
    char wfield[128];
    EXPECT(mode == BACKEND_READ || mode == BACKEND_WRITE, "fake_take_rw: mode %d", (int)mode);
    EXPECT(!e->sem, "fake_take_rw: %s is a semaphore", name);
    key_check(fb, e);
    if (mode == BACKEND_WRITE) {
        snprintf(wfield, sizeof(wfield), "%s:write", field);
        key_delete(e);
        e->mode = BACKEND_WRITE;
        field_add(e, wfield, 1);
        key_expire_in(fb, e, ttl_ms);
        e->fence++;
        return;
    }
    if (e->nfields > 0 && e->mode != BACKEND_READ) key_delete(e);
    e->mode = BACKEND_READ;
    field_t *f = field_find(e, field);
    if (f == NULL) f = field_add(e, field, 0);
    long long n = ++f->count;
    tmo_set(fb, f, n, ttl_ms);
    if (ttl_ms < 0) key_expire_in(fb, e, -1);
    else key_expire_at_least(fb, e, ttl_ms);
}

void fake_force(fake_t *fb, const char *name) {
    entry_t *e = entry_named(fb, name);
    if (key_force(fb, e) && !e->sem) {
        fair_wake(fb, e);
        fair_deliver(fb);
    }
}

long long fake_holds_field(fake_t *fb, const char *field, const char *name) {
    entry_t *e = entry_named(fb, name);
    key_check(fb, e);
    field_t *f = field_find(e, field);
    return f ? f->count : 0;
}

long long fake_holds(fake_t *fb, uint64_t owner, const char *name) {
    char field[32];
    owner_field(field, sizeof(field), owner);
    return fake_holds_field(fb, field, name);
}

long long fake_holds_mode(fake_t *fb, uint64_t owner, const char *name, backend_mode_t mode) {
    char field[FIELD_MAX];
    owner_field_mode(field, sizeof(field), owner, mode);
    return fake_holds_field(fb, field, name);
}

int fake_mode(fake_t *fb, const char *name) {
    entry_t *e = entry_named(fb, name);
    if (e->sem) return BACKEND_SEM;
    key_check(fb, e);
    return e->nfields > 0 ? (int)e->mode : -1;
}

long long fake_readers(fake_t *fb, const char *name) {
    entry_t *e = entry_named(fb, name);
    long long n = 0;
    key_check(fb, e);
    if (e->mode == BACKEND_MUTEX) return 0;
    for (size_t i = 0; i < e->nfields; i++)
        if (!is_write_field(e->fields[i].name)) n++;
    return n;
}

long long fake_timeout_pttl(fake_t *fb, const char *field, const char *name, long long n) {
    entry_t *e = entry_named(fb, name);
    key_check(fb, e);
    const field_t *f = field_find(e, field);
    return f ? tmo_pttl(fb, f, n) : -2;
}

long long fake_pttl(fake_t *fb, const char *name) {
    entry_t *e = entry_named(fb, name);
    return e->sem ? -1 : key_pttl(fb, e); /* a semaphore's string: no expiry */
}

uint64_t fake_fence(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    return e ? e->fence : FAKE_FENCE_START - 1;
}

/* ---- semaphores, for tests -------------------------------------------------------- */

int fake_seminit(fake_t *fb, const char *name, long long permits) {
    entry_t *e = entry_named(fb, name);
    key_check(fb, e);
    EXPECT(e->nfields == 0, "fake_seminit: %s is a lock", name);
    if (e->sem) return 0;
    e->sem = 1;
    e->sem_avail = permits;
    return 1;
}

long long fake_sem_available(fake_t *fb, const char *name) {
    const entry_t *e = entry_named(fb, name);
    return e->sem ? e->sem_avail : -1;
}

size_t fake_sem_card(fake_t *fb, const char *name) {
    return sem_count(entry_named(fb, name), NULL);
}

size_t fake_sem_ids_field(fake_t *fb, const char *name, const char *field) {
    entry_t *e = entry_named(fb, name);
    const sem_owner_t *o = sem_owner(e, field, 0);
    return o ? sem_count(e, o) : 0;
}

size_t fake_sem_ids(fake_t *fb, const char *name, uint64_t owner) {
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), owner);
    return fake_sem_ids_field(fb, name, field);
}

long long fake_sem_id_pttl(fake_t *fb, const char *name, uint64_t owner, long long k) {
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), owner);
    uint64_t sc = sem_score(entry_named(fb, name), field, k), now = now_of(fb);
    if (sc == SEM_NONE) return -2;
    if (sc == FAKE_SEM_FOREVER) return -1;
    return sc > now ? (long long)(sc - now) : -(long long)(now - sc);
}

int fake_sem_ids_are(fake_t *fb, const char *name, uint64_t owner, long long n) {
    if ((long long)fake_sem_ids(fb, name, owner) != n) return 0;
    for (long long k = 1; k <= n; k++) {
        long long t = fake_sem_id_pttl(fb, name, owner, k);
        if (t != -1 && t <= 0) return 0;
    }
    return 1;
}

void fake_sem_expire_id(fake_t *fb, const char *name, uint64_t owner, long long k) {
    char field[FIELD_MAX];
    entry_t *e = entry_named(fb, name);
    owner_field(field, sizeof(field), owner);
    EXPECT(sem_score(e, field, k) != SEM_NONE, "fake_sem_expire_id: no id %s:%lld of %s", field,
           k, name);
    sem_zadd(e, field, k, now_of(fb));
}

void fake_sem_del_id(fake_t *fb, const char *name, uint64_t owner, long long k) {
    char field[FIELD_MAX];
    entry_t *e = entry_named(fb, name);
    owner_field(field, sizeof(field), owner);
    EXPECT(sem_zrem(e, field, k) == 1, "fake_sem_del_id: no id %s:%lld of %s", field, k, name);
    sem_incrby(e, 1);
}

void fake_sem_take(fake_t *fb, const char *name, const char *field, long long permits,
                   long long ttl_ms) {
    entry_t *e = entry_named(fb, name);
    key_check(fb, e);
    EXPECT(e->nfields == 0 && e->sem && e->sem_avail >= permits,
           "fake_sem_take: %lld permits of %s not available", permits, name);
    uint64_t till = ttl_ms < 0 ? FAKE_SEM_FOREVER : now_of(fb) + (uint64_t)ttl_ms;
    long long added = 0;
    for (long long k = 1; k <= permits; k++) added += sem_zadd(e, field, k, till);
    e->sem_avail -= added;
}

void fake_sem_release_field(fake_t *fb, const char *name, const char *field) {
    entry_t *e = entry_named(fb, name);
    sem_owner_t *o = sem_owner(e, field, 0);
    long long removed = 0;
    for (size_t k = 0; o != NULL && k < o->n; k++)
        if (o->score[k] != SEM_NONE) {
            o->score[k] = SEM_NONE;
            removed++;
        }
    if (removed > 0) sem_incrby(e, removed);
}

/* ---- fair locks, for tests ------------------------------------------------------ */

size_t fake_fair_queue_len(fake_t *fb, const char *name) {
    return entry_named(fb, name)->nqueue;
}

const char *fake_fair_queue(fake_t *fb, const char *name) {
    static char buf[4][512];
    static unsigned k;
    char *out = buf[k++ % 4];
    const entry_t *e = entry_named(fb, name);
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < e->nqueue && n < sizeof(buf[0]); i++)
        n += (size_t)snprintf(out + n, sizeof(buf[0]) - n, "%s%s", i ? " " : "",
                              e->queue[i].field);
    return out;
}

long long fake_fair_pos_field(fake_t *fb, const char *name, const char *field) {
    return place_pos(entry_named(fb, name), field);
}

long long fake_fair_pos(fake_t *fb, const char *name, uint64_t owner) {
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), owner);
    return fake_fair_pos_field(fb, name, field);
}

long long fake_fair_place_pttl_field(fake_t *fb, const char *name, const char *field) {
    const entry_t *e = entry_named(fb, name);
    long long i = place_pos(e, field);
    if (i < 0) return -2;
    uint64_t ends = e->queue[i].ends, now = now_of(fb);
    return ends > now ? (long long)(ends - now) : -(long long)(now - ends);
}

long long fake_fair_place_pttl(fake_t *fb, const char *name, uint64_t owner) {
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), owner);
    return fake_fair_place_pttl_field(fb, name, field);
}

void fake_fair_expire_place(fake_t *fb, const char *name, const char *field) {
    entry_t *e = entry_named(fb, name);
    long long i = place_pos(e, field);
    EXPECT(i >= 0, "fake_fair_expire_place: %s has no place in %s's queue", field, name);
    e->queue[i].ends = now_of(fb);
}

int fake_fair_acquire_field(fake_t *fb, const char *name, const char *field, long long lease_ms,
                            long long queue_ms) {
    backend_result_t res;
    memset(&res, 0, sizeof(res));
    fair_script(fb, entry_named(fb, name), queue_ms < 0 ? 'o' : 'a', field, lease_ms, queue_ms,
                LOCKMGR_FAIR_FOREIGN_WAIT_MS, &res);
    fair_deliver(fb);
    return (int)res.outcome;
}

int fake_fair_redisson_acquire(fake_t *fb, const char *name, const char *field,
                               long long lease_ms, long long place_ms, long long wait_ms) {
    return redisson_script(fb, entry_named(fb, name), field, lease_ms, place_ms, wait_ms);
}

int fake_fair_is_dlockd(fake_t *fb, const char *name, const char *field) {
    entry_t *e = entry_named(fb, name);
    dlockd_check(fb, e);
    return dlockd_pos(e, field) >= 0;
}

long long fake_fair_release_field(fake_t *fb, const char *name, const char *field) {
    backend_result_t res;
    memset(&res, 0, sizeof(res));
    fair_script(fb, entry_named(fb, name), 'r', field, 0, 0, 0, &res);
    fair_deliver(fb);
    return res.holds;
}

void fake_fair_leave_field(fake_t *fb, const char *name, const char *field) {
    backend_result_t res;
    memset(&res, 0, sizeof(res));
    fair_script(fb, entry_named(fb, name), 'l', field, 0, 0, 0, &res);
    fair_deliver(fb);
}

int fake_fair_watching(const fake_t *fb, const char *name, uint64_t owner) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    const fair_chan_t *c = e ? chan_find(e, owner) : NULL;
    return c != NULL && c->watched;
}

size_t fake_fair_channels(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    size_t n = 0;
    for (const fair_chan_t *c = e ? e->chans : NULL; c != NULL; c = c->next)
        if (c->watched) n++;
    return n;
}

int fake_fair_publish(fake_t *fb, const char *name, uint64_t owner) {
    char field[FIELD_MAX];
    owner_field(field, sizeof(field), owner);
    return fair_publish_now(fb, entry_named(fb, name), field);
}
