/* A fake backend for the lock manager's unit tests only: ops answered on demand by the scripts.
 * SPDX-License-Identifier: MIT */
#include "fake_backend.h"

#include <check.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/scripts.h"
#include "daemon/lock/lockmgr.h"
#include "daemon/util/buf.h"
#include "daemon/util/util.h"
#include "redis_model.h"

#define FAKE_INJECT_MAX 16
#define FAKE_SETTLE_MAX 1000
/* The daemon's uuid in the model: the lock manager owner id's field is
 * "<FAKE_UUID>:<id>", which the test-facing calls write "o<id>". */
#define FAKE_UUID "00000000-0000-4000-8000-0000000fa4e0"
#define FAKE_SHA "0000000000000000000000000000000000000000"
/* A foreign fair holder's lease "without expiry": granted with this, then
 * PERSIST. */
#define FAKE_LEASE_LONG 86400000u

/* Under CK_FORK every ck_assert that passes writes to Check's pipe; the
 * checks made per op call Check only on failure. */
#define EXPECT(cond, ...)                       \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

/* A fair lock waiter's own channel (redisson_lock__channel:{K}:<field>),
 * watched for the lock manager owner whose field it is. Channels live as
 * long as the fake: an unwatch only marks one, so a callback may watch
 * and unwatch while fake_run() walks them. */
typedef struct fair_chan_s {
    struct fair_chan_s *next;
    uint64_t owner;
    char channel[KEYS_CHANNEL_MAX];
    size_t chlen;
    int watched;
    backend_watch_cb cb;
    void *data;
    int confirm;               /* a BACKEND_WATCHING is owed */
    uint64_t confirm_seq;
} fair_chan_t;

/* Messages the scripts published on a waiter's own channel, delivered to
 * its watcher once the op's own callback has returned (the message comes
 * on another connection, just after the reply). */
#define FAIR_PUB_MAX 8

/* What the fake keeps of one name beside the model: its watches. */
typedef struct entry_s {
    struct entry_s *next;
    char *name;
    size_t len;
    int remote_waiters;        /* its release messages reach another daemon's waiter */
    fair_chan_t *chans;        /* its waiters' channels, newest first */
    /* the name's own channel's watch */
    int watched;
    int watch_mode;            /* of the last watch; -1 never watched */
    char channel[KEYS_CHANNEL_MAX];
    size_t chlen;
    backend_watch_cb cb;
    void *data;
    unsigned watch_calls;
    int confirm;               /* a BACKEND_WATCHING is owed */
    uint64_t confirm_seq;      /* ... asked for at this point */
    unsigned latch_msgs;       /* messages on its latch channel */
    int latch_last;            /* ... the last one's first byte */
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
    rmodel_t *model;
    int up;
    int held;
    struct op_queue_s queue;
    size_t doomed;             /* the first ops of the queue: in flight when it went down */
    entry_t *entries;
    inject_t inject[FAKE_INJECT_MAX];
    size_t ninject;
    char error[BACKEND_ERR_LEN]; /* the text of the op being answered */
    uint64_t confirm_seq;
    uint32_t drift_ms;         /* what the topology takes off every lease */
    const char *cur_name;      /* the name whose script runs (its fair wakes) */
    size_t cur_len;
    struct {
        char channel[KEYS_CHANNEL_MAX];
        size_t chlen;
    } pubs[FAIR_PUB_MAX];      /* waiters' messages not delivered yet */
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

static uint64_t now_of(const fake_t *fb) {
    return timers_now(fb->timers);
}

/* ---- the watches' entries ------------------------------------------------- */

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
    e->name = xrealloc(NULL, len + 1);
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->len = len;
    e->watch_mode = -1;
    e->next = fb->entries;
    fb->entries = e;
    return e;
}

static entry_t *entry_named(fake_t *fb, const char *name) {
    return entry_get(fb, name, strlen(name));
}

static fair_chan_t *chan_find(const entry_t *e, uint64_t owner) {
    for (fair_chan_t *c = e->chans; c != NULL; c = c->next)
        if (c->owner == owner) return c;
    return NULL;
}

static size_t channel_of(char *out, const char *name, size_t len, backend_mode_t mode,
                         uint64_t owner) {
    return scripts_channel(out, "", FAKE_UUID, name, len, mode, owner);
}

/* ---- owner fields ------------------------------------------------------------ */

/* A field as the model has it: the test's "o<id>" is the lock manager
 * owner's "<FAKE_UUID>:<id>"; any other text is itself. */
static void field_in(char *out, size_t cap, const char *field) {
    size_t n = strlen(field);
    if (n >= 2 && field[0] == 'o' && strspn(field + 1, "0123456789") == n - 1)
        snprintf(out, cap, "%s:%s", FAKE_UUID, field + 1);
    else
        snprintf(out, cap, "%s", field);
}

static void owner_field(char *out, size_t cap, uint64_t owner, backend_mode_t mode) {
    snprintf(out, cap, "%s:%" PRIu64 "%s", FAKE_UUID, owner, mode == BACKEND_WRITE ? ":write" : "");
}

/* s with every "<FAKE_UUID>:" written "o", as the tests name owners. */
static void fields_out(char *out, size_t cap, const char *s) {
    static const char uuid[] = FAKE_UUID ":";
    size_t n = 0;
    while (*s != '\0' && n + 1 < cap) {
        if (strncmp(s, uuid, sizeof(uuid) - 1) == 0) {
            out[n++] = 'o';
            s += sizeof(uuid) - 1;
        } else {
            out[n++] = *s++;
        }
    }
    out[n] = '\0';
}

/* ---- publishing ------------------------------------------------------------------ */

/* A message on a latch's channel (redisson_countdownlatch__channel__{key},
 * the key the name: the fake's prefix is empty) is counted on the name's
 * entry. */
static void latch_message(fake_t *fb, const char *channel, size_t clen, const char *msg,
                          size_t mlen) {
    const char *pre = scripts_mode(BACKEND_LATCH)->channel;
    size_t n = strlen(pre);
    if (clen < n + 3 || memcmp(channel, pre, n) != 0 || channel[n] != '{' ||
        channel[clen - 1] != '}')
        return;
    entry_t *e = entry_get(fb, channel + n + 1, clen - n - 2);
    e->latch_msgs++;
    e->latch_last = mlen > 0 ? msg[0] : 0;
}

/* What a PUBLISH from a script reaches: a waiter's own channel that is
 * watched (its message delivered after the op's callback, fair_deliver),
 * a name's channel that is watched (the test delivers that one:
 * fake_publish), and the other daemons' waiters a test set. A message on a
 * waiter's own channel of the name being run counts as a fair wake. */
static long long on_publish(void *data, const char *channel, size_t clen, const char *msg,
                            size_t mlen) {
    fake_t *fb = data;
    char plain[KEYS_CHANNEL_MAX];
    long long n = 0;
    latch_message(fb, channel, clen, msg, mlen);
    if (fb->cur_name != NULL) {
        size_t plen = channel_of(plain, fb->cur_name, fb->cur_len, BACKEND_MUTEX, 0);
        if (clen > plen + 1 && memcmp(channel, plain, plen) == 0 && channel[plen] == ':') {
            fb->stats.fair_wakes++;
            EXPECT(fb->npubs < FAIR_PUB_MAX, "fake: too many fair release messages at once");
            memcpy(fb->pubs[fb->npubs].channel, channel, clen);
            fb->pubs[fb->npubs].chlen = clen;
            fb->npubs++;
        }
    }
    for (const entry_t *e = fb->entries; e != NULL; e = e->next) {
        if (e->watched && e->chlen == clen && memcmp(e->channel, channel, clen) == 0) n++;
        for (const fair_chan_t *c = e->chans; c != NULL; c = c->next)
            if (c->watched && c->chlen == clen && memcmp(c->channel, channel, clen) == 0) n++;
        if (!e->remote_waiters) continue;
        for (int mode = 0; mode < BACKEND_MODE_COUNT; mode++) /* any kind's channel: once */
            if (!scripts_mode((backend_mode_t)mode)->own_channel &&
                channel_of(plain, e->name, e->len, (backend_mode_t)mode, 0) == clen &&
                memcmp(plain, channel, clen) == 0) {
                n++;
                break;
            }
    }
    return n;
}

/* A message on a waiter's own channel, delivered now: 1 if someone here listened. */
static int chan_publish_now(fake_t *fb, const char *channel, size_t clen) {
    for (entry_t *e = fb->entries; e != NULL; e = e->next)
        for (fair_chan_t *c = e->chans; c != NULL; c = c->next) {
            if (!c->watched || c->chlen != clen || memcmp(c->channel, channel, clen) != 0)
                continue;
            if (!fb->up) return 0;
            fb->stats.published++;
            c->cb(c->data, BACKEND_RELEASED);
            return 1;
        }
    return 0;
}

static void fair_deliver(fake_t *fb) {
    for (size_t i = 0; i < fb->npubs; i++)
        chan_publish_now(fb, fb->pubs[i].channel, fb->pubs[i].chlen);
    fb->npubs = 0;
}

/* ---- running an op's script ----------------------------------------------------------- */

static uint64_t model_clock(void *data) {
    return now_of(data);
}

/* The call scripts_format() made, as argv (after EVALSHA and the SHA). */
static redisReply *parse_call(const buf_t *b) {
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    EXPECT(rd != NULL, "fake: no memory for a reader");
    redisReaderFeed(rd, buf_start(b), b->len);
    EXPECT(redisReaderGetReply(rd, &r) == REDIS_OK && r != NULL, "fake: scripts_format's call "
                                                                 "does not parse");
    redisReaderFree(rd);
    const redisReply *req = r;
    EXPECT(req->type == REDIS_REPLY_ARRAY && req->elements >= 3, "fake: a call of %zu arguments",
           req->elements);
    return r;
}

/* Runs op in the model as a topology calls it: scripts_choose() picks the
 * script, scripts_format() writes the call, the script runs, and
 * scripts_decode() fills op->res; a release's subscriber count then
 * becomes others_waiting as node_watch_others_waiting() makes it. field,
 * when not NULL, stands for the op's owner field (another owner's op). */
static void model_run(fake_t *fb, backend_op_t *op, const char *field) {
    backend_op_t *ops[1] = {op};
    script_id_t id = scripts_choose(ops, 1, 0);
    buf_t b;
    char own[KEYS_FIELD_MAX], err[BACKEND_ERR_LEN];
    memset(&b, 0, sizeof(b));
    memset(&op->res, 0, sizeof(op->res));
    EXPECT(scripts_format(&b, id, FAKE_SHA, ops, 1, "", FAKE_UUID, 0) == 0,
           "fake: scripts_format failed");
    redisReply *req = parse_call(&b);
    size_t argc = req->elements - 2, ownlen = keys_owner_field(own, FAKE_UUID, op->owner);
    const char **argv = xrealloc(NULL, argc * sizeof(*argv));
    size_t *lens = xrealloc(NULL, argc * sizeof(*lens));
    for (size_t i = 0; i < argc; i++) {
        const redisReply *a = req->element[i + 2];
        argv[i] = a->str;
        lens[i] = a->len;
        if (field != NULL && a->len == ownlen && memcmp(a->str, own, ownlen) == 0) {
            argv[i] = field;
            lens[i] = strlen(field);
        }
    }
    fb->cur_name = op->name;
    fb->cur_len = op->len;
    redisReply *r = rmodel_eval(fb->model, scripts_text(id), argc, argv, lens);
    fb->cur_name = NULL;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(fb->error, sizeof(fb->error), "%s", r->str);
        op->res.status = BACKEND_FAILED;
        op->res.error = fb->error;
    } else if (scripts_decode(id, ops, 1, r, err, sizeof(err)) != 0) {
        memset(&op->res, 0, sizeof(op->res));
        snprintf(fb->error, sizeof(fb->error), "%s", err);
        op->res.status = BACKEND_FAILED;
        op->res.error = fb->error;
    } else if (op->res.status != BACKEND_OK && op->res.error != NULL) {
        snprintf(fb->error, sizeof(fb->error), "%s", op->res.error); /* it pointed into r */
        op->res.error = fb->error;
    } else if (op->type == BACKEND_RELEASE) {
        /* less our own subscription; a release that wakes one waiter on
         * its own channel (a fair lock's) wakes whoever's: never a reason
         * to hold ours back */
        char ch[KEYS_CHANNEL_MAX];
        size_t clen = channel_of(ch, op->name, op->len, op->mode, 0);
        const entry_t *e = entry_find(fb, op->name, op->len);
        int mine = e != NULL && e->watched && e->chlen == clen && memcmp(e->channel, ch, clen) == 0;
        op->res.others_waiting =
            scripts_mode(op->mode)->own_channel ? 0 : op->res.others_waiting > mine;
    }
    freeReplyObject(r);
    free(lens);
    free(argv);
    freeReplyObject(req);
    buf_free(&b);
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
        if (in.run) model_run(fb, op, NULL);
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
        model_run(fb, op, NULL);
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
    /* An op kind its mode's scripts run (scripts.c's row: its own script's
     * kinds and the batch's), or one every name has (STATUS, FORCE, WHO). */
    const scripts_mode_t *row = scripts_mode(op->mode);
    unsigned any = SCRIPTS_KIND(BACKEND_STATUS) | SCRIPTS_KIND(BACKEND_FORCE) |
                   SCRIPTS_KIND(BACKEND_WHO);
    EXPECT(((row->own | row->batch | any) & SCRIPTS_KIND(op->type)) != 0,
           "an op of kind %d in mode %d, which no script of that mode runs (%.*s)", (int)op->type,
           (int)op->mode, (int)op->len, op->name);
    /* A semaphore's acquire, release or renewal names one permit at least,
     * and a lease. */
    if (op->mode == BACKEND_SEM) {
        if (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RELEASE ||
            op->type == BACKEND_RENEW)
            EXPECT(op->count >= 1, "semaphore op of kind %d with no permits (%.*s)",
                   (int)op->type, (int)op->len, op->name);
        if (op->type == BACKEND_ACQUIRE || op->type == BACKEND_RENEW)
            EXPECT(op->lease_ms > 0, "semaphore op of kind %d without a lease", (int)op->type);
    }

    /* A fair lock's acquire has a lease, and a place's length unless it
     * takes none ('o'). */
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
    r->permits = op->count;
    r->permit_base = op->base;
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
    if (scripts_mode(mode)->own_channel) { /* the waiter's own channel: one per owner */
        fair_chan_t *c = chan_find(e, owner);
        if (c == NULL) {
            c = xrealloc(NULL, sizeof(*c));
            memset(c, 0, sizeof(*c));
            c->owner = owner;
            c->chlen = channel_of(c->channel, name, len, mode, owner);
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
    e->chlen = channel_of(e->channel, name, len, mode, 0);
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
    if (scripts_mode(mode)->own_channel) {
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
        for (fair_chan_t *c = e->chans, *cn; c != NULL; c = cn) {
            cn = c->next;
            free(c);
        }
        free(e->name);
        free(e);
    }
    rmodel_free(fb->model);
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
    fb->base.caps = BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS | BACKEND_CAP_ONE_COPY |
                    BACKEND_CAP_MULTI;
    fb->timers = timers;
    fb->model = rmodel_new(model_clock, on_publish, fb);
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

/* The helpers below are small scripts on one name: KEYS are its key and
 * companions (as scripts.c's rows name them), ARGV a field and numbers. */
#define HELPER(body)                                                                          \
    "local K, TOKEN, SEMT, Q, QT, OWN, EQ, ET, TAG = unpack(KEYS)\n"                          \
    "local F, A, B, C = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])\n"   \
    "local t = redis.call('time')\n"                                                          \
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"                 \
    "local us = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"                                  \
    "local function queue()\n"                                                                \
    "  if redis.call('exists', Q) == 0 and redis.call('exists', EQ) == 1 then return EQ, ET end\n" \
    "  return Q, QT\n"                                                                        \
    "end\n" body

#define HELPER_KEYS 9

/* A companion of name's key k: "kind:{k}" (suffix: "{k}:kind"; tag: "{k}"),
 * the braces only when k has none. */
static size_t companion(char *out, const char *kind, const char *k, size_t klen, int suffix) {
    int braces = memchr(k, '{', klen) == NULL;
    if (!suffix) return keys_companion(out, kind, k, klen);
    int n = snprintf(out, KEYS_COMPANION_MAX, "%s%.*s%s%s%s", braces ? "{" : "", (int)klen, k,
                     braces ? "}" : "", *kind ? ":" : "", kind);
    return (size_t)n;
}

/* Runs lua on name with field (test-facing, field_in) and numbers a, b, c;
 * its reply, which the caller frees. A script's error fails the test. */
static redisReply *helper(fake_t *fb, const char *lua, const char *name, const char *field,
                          long long a, long long b, long long c) {
    static const struct {
        const char *kind;
        int suffix;
    } keys[HELPER_KEYS - 1] = {
        {KEYS_TOKEN, 0}, {KEYS_SEM_TIMEOUT, 1}, {KEYS_QUEUE, 0}, {KEYS_QUEUE_TIMEOUT, 0},
        {KEYS_FAIR_OWNERS, 0}, {"dlock_elect_queue", 0}, {"dlock_elect_timeout", 0}, {"", 1},
    };
    char kbuf[HELPER_KEYS][KEYS_COMPANION_MAX], nums[3][24], f[KEYS_CHANNEL_MAX];
    const char *argv[1 + HELPER_KEYS + 4];
    size_t lens[1 + HELPER_KEYS + 4], klen = strlen(name), n = 0;
    argv[n] = "9";
    lens[n++] = 1;
    snprintf(kbuf[0], sizeof(kbuf[0]), "%s", name);
    argv[n] = kbuf[0];
    lens[n++] = klen;
    for (size_t i = 0; i < HELPER_KEYS - 1; i++) {
        lens[n] = companion(kbuf[i + 1], keys[i].kind, name, klen, keys[i].suffix);
        argv[n++] = kbuf[i + 1];
    }
    field_in(f, sizeof(f), field ? field : "");
    argv[n] = f;
    lens[n++] = strlen(f);
    long long v[3] = {a, b, c};
    for (size_t i = 0; i < 3; i++) {
        lens[n] = (size_t)snprintf(nums[i], sizeof(nums[i]), "%lld", v[i]);
        argv[n++] = nums[i];
    }
    fb->cur_name = name;
    fb->cur_len = klen;
    redisReply *r = rmodel_eval(fb->model, lua, n, argv, lens);
    fb->cur_name = NULL;
    EXPECT(r->type != REDIS_REPLY_ERROR, "fake on %s: %s", name, r->str);
    return r;
}

static long long helper_int(fake_t *fb, const char *lua, const char *name, const char *field,
                            long long a, long long b, long long c) {
    redisReply *r = helper(fb, lua, name, field, a, b, c);
    EXPECT(r->type == REDIS_REPLY_INTEGER, "fake on %s: a reply of type %d", name, r->type);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static const char lua_expire[] = HELPER("if redis.call('type', K).ok == 'hash' then\n"
                                        "  redis.call('del', K)\n"
                                        "end\n"
                                        "return 0\n");

void fake_expire(fake_t *fb, const char *name) {
    helper_int(fb, lua_expire, name, NULL, 0, 0, 0);
}

/* A grant's fence, as the scripts raise it: TIME in microseconds, or one
 * more than the last. */
#define LUA_RAISE                                                                  \
    "local f = math.max(tonumber(redis.call('get', TOKEN) or '0') + 1, us)\n"      \
    "redis.call('set', TOKEN, string.format('%d', f))\n"

static const char lua_take[] = HELPER(
    "if redis.call('type', K).ok == 'string' then return redis.error_reply('a semaphore') end\n"
    "redis.call('del', K)\n"
    "if C == 1 then redis.call('hset', K, 'mode', 'write', F .. ':write', 1)\n"
    "else redis.call('hset', K, F, 1) end\n"
    "if A >= 0 then redis.call('pexpire', K, A) end\n" LUA_RAISE "return 0\n");

void fake_take(fake_t *fb, const char *name, const char *field, long long ttl_ms) {
    helper_int(fb, lua_take, name, field, ttl_ms, 0, 0);
}

/* A foreign read hold: rw.lua's, with ttl A (< 0: no expiry). */
static const char lua_take_read[] = HELPER(
    "if redis.call('type', K).ok == 'string' then return redis.error_reply('a semaphore') end\n"
    "if redis.call('hget', K, 'mode') ~= 'read' then redis.call('del', K) end\n"
    "redis.call('hset', K, 'mode', 'read')\n"
    "local n = redis.call('hincrby', K, F, 1)\n"
    "local tk = TAG .. ':' .. F .. ':rwlock_timeout:' .. n\n"
    "if A < 0 then\n"
    "  redis.call('set', tk, 1)\n"
    "  redis.call('persist', K)\n"
    "else\n"
    "  redis.call('set', tk, 1, 'px', A)\n"
    "  if redis.call('pttl', K) < A then redis.call('pexpire', K, A) end\n"
    "end\n"
    "return 0\n");

void fake_take_rw(fake_t *fb, const char *name, const char *field, backend_mode_t mode,
                  long long ttl_ms) {
    EXPECT(mode == BACKEND_READ || mode == BACKEND_WRITE, "fake_take_rw: mode %d", (int)mode);
    helper_int(fb, mode == BACKEND_WRITE ? lua_take : lua_take_read, name, field, ttl_ms, 0,
               mode == BACKEND_WRITE);
}

/* An op of another owner (field: test-facing) or of nobody, run now as the
 * lock manager's would be; the messages it publishes are delivered. */
static backend_result_t run_other(fake_t *fb, backend_op_t *op, const char *field) {
    char f[KEYS_CHANNEL_MAX];
    op->name = op->name ? op->name : "";
    op->len = strlen(op->name);
    if (field != NULL) field_in(f, sizeof(f), field);
    model_run(fb, op, field ? f : NULL);
    EXPECT(op->res.status == BACKEND_OK, "fake on %s: %s", op->name, op->res.error);
    fair_deliver(fb);
    return op->res;
}

void fake_force(fake_t *fb, const char *name) {
    backend_op_t op;
    memset(&op, 0, sizeof(op));
    op.type = BACKEND_FORCE;
    op.name = name;
    run_other(fb, &op, NULL);
}

static const char lua_holds[] = HELPER("local ok, v = pcall(redis.call, 'hget', K, F)\n"
                                       "return ok and tonumber(v) or 0\n");

long long fake_holds_field(fake_t *fb, const char *field, const char *name) {
    return helper_int(fb, lua_holds, name, field, 0, 0, 0);
}

long long fake_holds(fake_t *fb, uint64_t owner, const char *name) {
    return fake_holds_mode(fb, owner, name, BACKEND_MUTEX);
}

long long fake_holds_mode(fake_t *fb, uint64_t owner, const char *name, backend_mode_t mode) {
    char field[KEYS_FIELD_MAX + 8];
    owner_field(field, sizeof(field), owner, mode);
    return fake_holds_field(fb, field, name);
}

static const char lua_mode[] = HELPER("local ty = redis.call('type', K).ok\n"
                                      "if ty == 'none' then return -1 end\n"
                                      "if ty ~= 'hash' then return A end\n"
                                      "local m = redis.call('hget', K, 'mode')\n"
                                      "return m == 'read' and B or m == 'write' and C or 0\n");

int fake_mode(fake_t *fb, const char *name) {
    return (int)helper_int(fb, lua_mode, name, NULL, BACKEND_SEM, BACKEND_READ, BACKEND_WRITE);
}

static const char lua_readers[] = HELPER(
    "if redis.call('type', K).ok ~= 'hash' or not redis.call('hget', K, 'mode') then return 0 end\n"
    "local n = 0\n"
    "for _, f in ipairs(redis.call('hkeys', K)) do\n"
    "  if f ~= 'mode' and not string.find(f, ':write$') then n = n + 1 end\n"
    "end\n"
    "return n\n");

long long fake_readers(fake_t *fb, const char *name) {
    return helper_int(fb, lua_readers, name, NULL, 0, 0, 0);
}

static const char lua_timeout_pttl[] = HELPER(
    "if redis.pcall('hexists', K, F) ~= 1 then return -2 end\n"
    "return redis.call('pttl', TAG .. ':' .. F .. ':rwlock_timeout:' .. A)\n");

long long fake_timeout_pttl(fake_t *fb, const char *field, const char *name, long long n) {
    return helper_int(fb, lua_timeout_pttl, name, field, n, 0, 0);
}

static const char lua_pttl[] = HELPER("return redis.call('pttl', K)\n");

long long fake_pttl(fake_t *fb, const char *name) {
    return helper_int(fb, lua_pttl, name, NULL, 0, 0, 0);
}

static const char lua_fence[] = HELPER("return tonumber(redis.call('get', TOKEN) or '0')\n");

uint64_t fake_fence(fake_t *fb, const char *name) {
    return (uint64_t)helper_int(fb, lua_fence, name, NULL, 0, 0, 0);
}

uint64_t fake_fence_us(const fake_t *fb) {
    return now_of(fb) * 1000;
}

/* ---- semaphores, for tests -------------------------------------------------------- */

static const char lua_seminit[] = HELPER(
    "local ty = redis.call('type', K).ok\n"
    "if ty == 'hash' then return redis.error_reply('fake_seminit: a lock') end\n"
    "if ty ~= 'none' then return 0 end\n"
    "redis.call('set', K, A)\n"
    "return 1\n");

int fake_seminit(fake_t *fb, const char *name, long long permits) {
    return (int)helper_int(fb, lua_seminit, name, NULL, permits, 0, 0);
}

static const char lua_sem_available[] = HELPER(
    "if redis.call('type', K).ok ~= 'string' then return -1 end\n"
    "return tonumber(redis.call('get', K))\n");

long long fake_sem_available(fake_t *fb, const char *name) {
    return helper_int(fb, lua_sem_available, name, NULL, 0, 0, 0);
}

static const char lua_sem_card[] = HELPER("return redis.call('zcard', SEMT)\n");

size_t fake_sem_card(fake_t *fb, const char *name) {
    return (size_t)helper_int(fb, lua_sem_card, name, NULL, 0, 0, 0);
}

/* The field's ids "<F>:<k>": with A = 1 they all go, their permits given back. */
static const char lua_sem_ids[] = HELPER(
    "local n = 0\n"
    "for _, id in ipairs(redis.call('zrange', SEMT, 0, -1)) do\n"
    "  if string.sub(id, 1, #F + 1) == F .. ':' and string.find(id, '^%d+$', #F + 2) then\n"
    "    n = n + 1\n"
    "    if A == 1 then redis.call('zrem', SEMT, id) end\n"
    "  end\n"
    "end\n"
    "if A == 1 and n > 0 then redis.call('incrby', K, n) end\n"
    "return n\n");

size_t fake_sem_ids_field(fake_t *fb, const char *name, const char *field) {
    return (size_t)helper_int(fb, lua_sem_ids, name, field, 0, 0, 0);
}

size_t fake_sem_ids(fake_t *fb, const char *name, uint64_t owner) {
    char field[KEYS_FIELD_MAX];
    owner_field(field, sizeof(field), owner, BACKEND_SEM);
    return fake_sem_ids_field(fb, name, field);
}

/* Id "<F>:<A>": B 0 its time left (-2 none, -1 forever: score C), 1 it
 * expires now, 2 it goes and its permit comes back. */
static const char lua_sem_id[] = HELPER(
    "local id = F .. ':' .. A\n"
    "local s = redis.call('zscore', SEMT, id)\n"
    "if not s then return B == 0 and -2 or redis.error_reply('no id ' .. id) end\n"
    "if B == 1 then return redis.call('zadd', SEMT, now, id) end\n"
    "if B == 2 then\n"
    "  redis.call('zrem', SEMT, id)\n"
    "  return redis.call('incrby', K, 1)\n"
    "end\n"
    "if tonumber(s) == C then return -1 end\n"
    "return tonumber(s) - now\n");

static long long sem_id(fake_t *fb, const char *name, uint64_t owner, long long k, int what) {
    char field[KEYS_FIELD_MAX];
    owner_field(field, sizeof(field), owner, BACKEND_SEM);
    return helper_int(fb, lua_sem_id, name, field, k, what, (long long)FAKE_SEM_FOREVER);
}

long long fake_sem_id_pttl(fake_t *fb, const char *name, uint64_t owner, long long k) {
    return sem_id(fb, name, owner, k, 0);
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
    sem_id(fb, name, owner, k, 1);
}

void fake_sem_del_id(fake_t *fb, const char *name, uint64_t owner, long long k) {
    sem_id(fb, name, owner, k, 2);
}

static const char lua_sem_take[] = HELPER(
    "local avail = redis.call('type', K).ok == 'string' and tonumber(redis.call('get', K)) or -1\n"
    "if avail < A then return redis.error_reply('fake_sem_take: permits not available') end\n"
    "local till, added = B < 0 and C or now + B, 0\n"
    "for i = 1, A do added = added + redis.call('zadd', SEMT, till, F .. ':' .. i) end\n"
    "return redis.call('decrby', K, added)\n");

void fake_sem_take(fake_t *fb, const char *name, const char *field, long long permits,
                   long long ttl_ms) {
    helper_int(fb, lua_sem_take, name, field, permits, ttl_ms, (long long)FAKE_SEM_FOREVER);
}

void fake_sem_release_field(fake_t *fb, const char *name, const char *field) {
    helper_int(fb, lua_sem_ids, name, field, 1, 0, 0);
}

/* ---- count-down latches, for tests ------------------------------------------------ */

/* The latch's channel and dlockd's mark, as scripts.c's row names them. */
#define LUA_LATCH_KEYS                                                                   \
    "local CH = 'redisson_countdownlatch__channel__{' .. K .. '}'\n"                      \
    "local MARK = string.find(K, '{', 1, true) and 'dlock_latch:' .. K\n"                 \
    "  or 'dlock_latch:{' .. K .. '}'\n"

static long long latch_op(fake_t *fb, const char *name, backend_op_type_t type,
                          long long count) {
    backend_op_t op;
    char answer[BACKEND_ANSWER_MAX + 1]; /* COUNTDOWN's value reply */
    memset(&op, 0, sizeof(op));
    op.type = type;
    op.mode = BACKEND_LATCH;
    op.name = name;
    op.count = (uint32_t)count;
    op.answer = answer;
    backend_result_t res = run_other(fb, &op, NULL);
    EXPECT(res.outcome != BACKEND_WRONG_KIND, "fake latch op on %s: another kind", name);
    return type == BACKEND_INIT ? res.holds : (long long)res.fence;
}

int fake_latch_set(fake_t *fb, const char *name, long long count) {
    return (int)latch_op(fb, name, BACKEND_INIT, count);
}

long long fake_latch_countdown(fake_t *fb, const char *name) {
    return latch_op(fb, name, BACKEND_RELEASE, 0);
}

/* RedissonCountDownLatch's trySetCount and countDown, as Redisson sends them. */
static const char lua_latch_redisson_set[] = HELPER(
    LUA_LATCH_KEYS
    "if redis.call('exists', K) == 0 then\n"
    "  redis.call('set', K, A)\n"
    "  redis.call('publish', CH, '1')\n"
    "  return 1\n"
    "end\n"
    "return 0\n");

static const char lua_latch_redisson_countdown[] = HELPER(
    LUA_LATCH_KEYS
    "local v = redis.call('decr', K)\n"
    "if v <= 0 then redis.call('del', K) end\n"
    "if v == 0 then redis.call('publish', CH, '0') end\n"
    "return v\n");

int fake_latch_redisson_set(fake_t *fb, const char *name, long long count) {
    return (int)helper_int(fb, lua_latch_redisson_set, name, NULL, count, 0, 0);
}

long long fake_latch_redisson_countdown(fake_t *fb, const char *name) {
    return helper_int(fb, lua_latch_redisson_countdown, name, NULL, 0, 0, 0);
}

static const char lua_latch_del[] = HELPER("return redis.call('del', K)\n");

void fake_latch_del(fake_t *fb, const char *name) {
    helper_int(fb, lua_latch_del, name, NULL, 0, 0, 0);
}

static const char lua_latch_count[] = HELPER(
    "if redis.call('type', K).ok ~= 'string' then return -1 end\n"
    "return tonumber(redis.call('get', K))\n");

long long fake_latch_count(fake_t *fb, const char *name) {
    return helper_int(fb, lua_latch_count, name, NULL, 0, 0, 0);
}

static const char lua_latch_marked[] = HELPER(LUA_LATCH_KEYS
                                              "return redis.call('exists', MARK)\n");

int fake_latch_marked(fake_t *fb, const char *name) {
    return (int)helper_int(fb, lua_latch_marked, name, NULL, 0, 0, 0);
}

unsigned fake_latch_messages(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    return e ? e->latch_msgs : 0;
}

int fake_latch_last_message(const fake_t *fb, const char *name) {
    const entry_t *e = entry_find(fb, name, strlen(name));
    return e ? e->latch_last : 0;
}

/* ---- fair locks, for tests ------------------------------------------------------ */

static const char lua_queue[] = HELPER(
    "return table.concat(redis.call('lrange', queue(), 0, -1), ' ')\n");

size_t fake_fair_queue_len(fake_t *fb, const char *name) {
    const char *q = fake_fair_queue(fb, name);
    size_t n = 0;
    for (const char *p = q; *p != '\0'; p++) n += *p == ' ';
    return *q ? n + 1 : 0;
}

const char *fake_fair_queue(fake_t *fb, const char *name) {
    static char buf[4][512];
    static unsigned k;
    char *out = buf[k++ % 4];
    redisReply *r = helper(fb, lua_queue, name, NULL, 0, 0, 0);
    EXPECT(r->type == REDIS_REPLY_STRING, "fake: queue of %s", name);
    fields_out(out, sizeof(buf[0]), r->str);
    freeReplyObject(r);
    return out;
}

/* F's place: A = 0 its index (-1 none), 1 its time left (-2 none), 2 it ends now. */
static const char lua_place[] = HELPER(
    "local q, qt = queue()\n"
    "if A == 0 then\n"
    "  for i, f in ipairs(redis.call('lrange', q, 0, -1)) do\n"
    "    if f == F then return i - 1 end\n"
    "  end\n"
    "  return -1\n"
    "end\n"
    "local s = redis.call('zscore', qt, F)\n"
    "if not s then return A == 1 and -2 or redis.error_reply('no place of ' .. F) end\n"
    "if A == 2 then return redis.call('zadd', qt, now, F) end\n"
    "return tonumber(s) - now\n");

long long fake_fair_pos_field(fake_t *fb, const char *name, const char *field) {
    return helper_int(fb, lua_place, name, field, 0, 0, 0);
}

long long fake_fair_pos(fake_t *fb, const char *name, uint64_t owner) {
    char field[KEYS_FIELD_MAX];
    owner_field(field, sizeof(field), owner, BACKEND_FAIR);
    return fake_fair_pos_field(fb, name, field);
}

long long fake_fair_place_pttl_field(fake_t *fb, const char *name, const char *field) {
    return helper_int(fb, lua_place, name, field, 1, 0, 0);
}

long long fake_fair_place_pttl(fake_t *fb, const char *name, uint64_t owner) {
    char field[KEYS_FIELD_MAX];
    owner_field(field, sizeof(field), owner, BACKEND_FAIR);
    return fake_fair_place_pttl_field(fb, name, field);
}

void fake_fair_expire_place(fake_t *fb, const char *name, const char *field) {
    helper_int(fb, lua_place, name, field, 2, 0, 0);
}

static const char lua_persist[] = HELPER("return redis.call('persist', K)\n");

int fake_fair_acquire_field(fake_t *fb, const char *name, const char *field, long long lease_ms,
                            long long queue_ms) {
    backend_op_t op;
    memset(&op, 0, sizeof(op));
    op.type = BACKEND_ACQUIRE;
    op.mode = BACKEND_FAIR;
    op.name = name;
    op.lease_ms = lease_ms < 0 ? FAKE_LEASE_LONG : (uint32_t)lease_ms;
    op.once = queue_ms < 0;
    op.queue_ms = queue_ms < 0 ? 0 : (uint32_t)queue_ms;
    op.queue_foreign_ms = LOCKMGR_FAIR_FOREIGN_WAIT_MS;
    backend_result_t res = run_other(fb, &op, field);
    if (lease_ms < 0 && (res.outcome == BACKEND_GRANTED || res.outcome == BACKEND_REENTERED))
        helper_int(fb, lua_persist, name, NULL, 0, 0, 0);
    return (int)res.outcome;
}

/* Redisson's RFairLock tryLock for F, as far as the lock manager can tell:
 * the ended places at the head go (dlock_fair is not touched); granted
 * when free and no one queues or F is the head, which then takes C (its
 * wait) off every other place; reentered; else a place at the tail
 * ending B from now, or the place it has. Lease A (< 0: no expiry). */
static const char lua_redisson[] = HELPER(
    "while true do\n"
    "  local h = redis.call('lindex', Q, 0)\n"
    "  if not h then break end\n"
    "  local s = redis.call('zscore', QT, h)\n"
    "  if not s or tonumber(s) > now then break end\n"
    "  redis.call('zrem', QT, h)\n"
    "  redis.call('lpop', Q)\n"
    "end\n"
    "local ty = redis.call('type', K).ok\n"
    "if ty == 'string' or (ty == 'hash' and redis.call('hget', K, 'mode')) then\n"
    "  return redis.error_reply('Redisson fair lock on another kind')\n"
    "end\n"
    "local h = redis.call('lindex', Q, 0)\n"
    "if ty == 'none' and (not h or h == F) then\n"
    "  redis.call('lrem', Q, 0, F)\n"
    "  redis.call('zrem', QT, F)\n"
    "  for _, f in ipairs(redis.call('lrange', Q, 0, -1)) do\n"
    "    local s = redis.call('zscore', QT, f)\n"
    "    if s then redis.call('zadd', QT, tonumber(s) - C, f) end\n"
    "  end\n"
    "  redis.call('hset', K, F, 1)\n"
    "  if A >= 0 then redis.call('pexpire', K, A) end\n"
    "  return 0\n"
    "end\n"
    "if redis.call('hexists', K, F) == 1 then\n"
    "  redis.call('hincrby', K, F, 1)\n"
    "  if A >= 0 then redis.call('pexpire', K, A) else redis.call('persist', K) end\n"
    "  return 1\n"
    "end\n"
    "if not redis.call('zscore', QT, F) then\n"
    "  redis.call('rpush', Q, F)\n"
    "  redis.call('zadd', QT, now + B, F)\n"
    "end\n"
    "return 2\n");

int fake_fair_redisson_acquire(fake_t *fb, const char *name, const char *field,
                               long long lease_ms, long long place_ms, long long wait_ms) {
    return (int)helper_int(fb, lua_redisson, name, field, lease_ms, place_ms, wait_ms);
}

static const char lua_is_dlockd[] = HELPER("return redis.call('sismember', OWN, F)\n");

int fake_fair_is_dlockd(fake_t *fb, const char *name, const char *field) {
    return (int)helper_int(fb, lua_is_dlockd, name, field, 0, 0, 0);
}

long long fake_fair_release_field(fake_t *fb, const char *name, const char *field) {
    backend_op_t op;
    memset(&op, 0, sizeof(op));
    op.type = BACKEND_RELEASE;
    op.mode = BACKEND_FAIR;
    op.name = name;
    return run_other(fb, &op, field).holds;
}

void fake_fair_leave_field(fake_t *fb, const char *name, const char *field) {
    backend_op_t op;
    memset(&op, 0, sizeof(op));
    op.type = BACKEND_LEAVE;
    op.mode = BACKEND_FAIR;
    op.name = name;
    run_other(fb, &op, field);
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
    char ch[KEYS_CHANNEL_MAX];
    size_t clen = channel_of(ch, name, strlen(name), BACKEND_FAIR, owner);
    return chan_publish_now(fb, ch, clen);
}
