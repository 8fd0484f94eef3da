/* The quorum topology: Redlock over N independent Redis primaries, with fences that keep rising.
 * SPDX-License-Identifier: MIT
 *
 * Every op goes to all N nodes (node.c, one each, batched per node as
 * everywhere), and its answer is what a majority M = N/2 + 1 says:
 * - acquire: granted when M nodes granted, and the lease left after the
 *   time it took and the clock drift allowance is still positive. The
 *   fence is the greatest of the granting nodes' fences, F; nodes that
 *   returned less get F written to their counter (BACKEND_FENCE), only
 *   while this owner still holds the lock there, and the grant stands
 *   once M nodes hold both the lock and a counter >= F. Any later grant
 *   needs M nodes too, so it meets one of those, after this holder let go
 *   there: its fence is greater than F, with no clock assumption, as long
 *   as the nodes keep their data. Nodes whose counters agree (the steady
 *   state) need no such round. Otherwise the attempt is undone everywhere
 *   it may have run, and the waiter waits for a wake-up or the holders'
 *   leases on a majority;
 * - a multi-name acquire (MLOCK): one mlock.lua call per node, and the
 *   vote above for the whole set: a node's yes is a grant of every name.
 *   Each new name's fence is the greatest of the granting nodes' for it,
 *   raised on those that returned less (one BACKEND_FENCE per name); the
 *   grant stands once M nodes hold the set with counters >= the fences. A
 *   failed set is undone on every node where it may have run: its new
 *   names released there, a reentry's hold dropped where it was granted;
 * - renew: renewed when M counting nodes renewed; gone or forced when
 *   counting nodes say it is gone on more than N - M; else not known
 *   (BACKEND_DOWN), which the watchdog counts against the lease;
 * - release and drop: answered once M nodes did it; a node that did not
 *   answer gets it again when it is back, until any lease has run out;
 * - status, force and who: all nodes are asked; a majority must answer.
 * Only nodes that count vote: connected, with INFO read since, and not
 * rejoining. A node that (re)started less than rejoin_delay_ms ago (its
 * run_id changed, or its uptime is shorter) may have lost its locks, so it
 * sits out until it has been up that long: Redlock's delayed restart, done
 * here so that operators need not. It still gets every op meanwhile, so
 * that it holds what the others hold when it counts again.
 *
 * The rules above are pure functions in quorum_vote.c; this file sends the
 * children, keeps the nodes and the ops' timers, and does what those
 * decide. Which nodes count (INFO server, the rejoin delay, TIME against
 * our clock) is quorum_clock.c's; the releases a node missed wait for it
 * in quorum_park.c. They share quorum_t through quorum_internal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/node.h"
#include "daemon/backend/quorum_internal.h"
#include "daemon/backend/quorum_vote.h"
#include "daemon/backend/scripts.h"
#include "daemon/log.h"
#include "daemon/util/hmap.h"
#include "daemon/util/util.h"

/* A grant that found no majority with the lock free and not taken
 * either (a split between contenders, or nodes silent) tries again after
 * a random delay up to this, so that contenders do not meet again. */
#define QUORUM_SPLIT_RETRY_MS 20
/* An acquire that others hold on some nodes waits this long at most for
 * nodes that have not answered, then counts them out: a paused node must
 * not hold up every attempt (it is waited for, up to command_timeout_ms,
 * only when its answer alone decides, no one else holding anything). */
#define QUORUM_STRAGGLER_MS 50

/* One op of the lock manager, spread over the nodes. It lives until every
 * child has answered, which may be after the op itself was. */
struct qop_s {
    quorum_t *q;
    LIST_ENTRY(qop_s) link;
    backend_op_t *parent;     /* NULL once answered */
    uint64_t started;         /* before the first send */
    unsigned left;            /* children (every phase) not answered */
    unsigned raising;         /* raise children not answered */
    int granted;              /* answered GRANTED, with fence */
    int failed;               /* answered otherwise after grants: undo late grants */
    int reentry;              /* an acquire that found holds of its owner */
    uint64_t fence;           /* F, during and after the raise round */
    timers_entry_t straggle;  /* QUORUM_STRAGGLER_MS after an acquire's send */
    unsigned char undone[CONF_QUORUM_MAX]; /* a set's: the quorum_vote_mundo_t sent */
    unsigned char raise_sent[CONF_QUORUM_MAX];
    unsigned char raised[CONF_QUORUM_MAX]; /* QUORUM_VOTE_RAISE*: raised, no longer
                                              held there, no answer */
    /* a multi-name acquire's (mnames NULL otherwise): copies, for children
       that outlive the op */
    size_t nnames;
    backend_name_t *mnames;
    char *mreentry;           /* a letter per name, as the op's */
    uint64_t *mvalues;        /* nnames per node: each node's answer */
    uint64_t *mfence;         /* nnames: each name's F (fence is 1 meanwhile) */
    unsigned short mraising[CONF_QUORUM_MAX]; /* a node's raises not answered */
    char err[BACKEND_ERR_LEN];
    backend_who_t *who;       /* WHO: one per node, after the children */
    size_t len;
    char *name;
    qchild_t ch[];            /* one per node */
};

typedef struct qsub_s {
    struct qwatch_s *w;
    int seen;                 /* confirmed at least once */
} qsub_t;

typedef struct qwatch_s {
    hmap_node_t node;
    unsigned majority;
    backend_watch_cb cb;
    void *data;
    backend_mode_t mode;      /* its channel */
    uint64_t owner;           /* ... a fair lock waiter's own */
    unsigned in_force;        /* nodes that confirmed it */
    int announced;            /* told the lock manager it is in force */
    qsub_t sub[CONF_QUORUM_MAX];
    size_t len;
    char name[];
} qwatch_t;

#define QB(b) container_of((b), quorum_t, base)
#define QB_CONST(b) ((const quorum_t *)(const void *)(b))

/* ---- which nodes count -------------------------------------------------------- */

static unsigned counting(const quorum_t *q) {
    unsigned k = 0;
    for (unsigned i = 0; i < q->n; i++) k += quorum_clock_counts(&q->nodes[i]) != 0;
    return k;
}

static void on_node_state(void *data) {
    qnode_t *qn = data;
    quorum_t *q = qn->q;
    if (q->closed) return;
    quorum_clock_check(qn);
    if (node_up(qn->nd)) quorum_park_resend(qn);
    backend_notify_state(&q->base);
}

/* ---- children -------------------------------------------------------------------- */

static void child_send(qnode_t *qn, qchild_t *c) {
    c->counts = quorum_clock_counts(qn) != 0;
    node_submit(qn->nd, &c->op);
}

static void child_init(qchild_t *c, qop_t *qo, unsigned idx, unsigned phase,
                       backend_op_type_t kind) {
    backend_op_t *p = &c->op;
    memset(c, 0, sizeof(*c));
    c->qo = qo;
    c->idx = (unsigned char)idx;
    c->phase = (unsigned char)phase;
    p->type = kind;
    p->name = qo->name;
    p->len = qo->len;
    p->owner = qo->ch[0].op.owner;
    p->lease_ms = qo->ch[0].op.lease_ms;
}

/* An extra child (a raise to raise_to, an undo, a release again) of the
 * name j on node idx (a plain lock's op; j is 0 but for a set's). */
static void extra_send_name(qop_t *qo, unsigned idx, unsigned phase, backend_op_type_t kind,
                            size_t j, uint64_t raise_to) {
    quorum_t *q = qo->q;
    if (q->closed) return;
    qchild_t *c = malloc(sizeof(*c));
    if (c == NULL) return; /* the lease ends it; a raise not sent counts as not done */
    child_init(c, qo, idx, phase, kind);
    if (qo->mnames != NULL) {
        c->op.name = qo->mnames[j].name;
        c->op.len = qo->mnames[j].len;
        if (kind == BACKEND_FENCE) qo->mraising[idx]++;
    }
    c->op.raise_to = raise_to;
    qo->left++;
    if (phase == PH_RAISE) qo->raising++;
    child_send(&q->nodes[idx], c);
}

static void extra_send(qop_t *qo, unsigned idx, unsigned phase, backend_op_type_t kind) {
    extra_send_name(qo, idx, phase, kind, 0, qo->fence);
}

/* ---- answering -------------------------------------------------------------------- */

static void answer(qop_t *qo, backend_status_t status) {
    backend_op_t *p = qo->parent;
    qo->parent = NULL;
    timers_stop(qo->q->timers, &qo->straggle);
    p->res.status = status;
    p->res.error = status == BACKEND_OK ? NULL : qo->err;
    p->cb(p);
}

/* "no quorum (k of N up)", and the first silent node's why. */
static void say_no_quorum(qop_t *qo) {
    quorum_t *q = qo->q;
    size_t k = (size_t)snprintf(qo->err, sizeof(qo->err), "no quorum (%u of %u up)",
                                counting(q), q->n);
    for (unsigned i = 0; i < q->n && k < sizeof(qo->err); i++) {
        const qchild_t *c = &qo->ch[i];
        if (!c->done || c->op.res.status == BACKEND_OK) continue;
        snprintf(qo->err + k, sizeof(qo->err) - k, ": %s: %s", q->nodes[i].label,
                 c->op.res.error ? c->op.res.error : "no answer");
        break;
    }
}

/* The children of the first phase as the vote sees them; v has room for
 * CONF_QUORUM_MAX. */
static unsigned votes(const qop_t *qo, quorum_vote_t *v) {
    for (unsigned i = 0; i < qo->q->n; i++) {
        const qchild_t *c = &qo->ch[i];
        v[i].kind = c->op.type;
        v[i].counts = c->counts;
        v[i].done = c->done;
        v[i].multi = qo->mnames != NULL;
        v[i].res = c->op.res;
        /* A set's fence round runs the single one's with F = 1: a node's
         * answer "has F" when every new name there has its own F. */
        if (v[i].multi && qo->fence != 0)
            v[i].res.fence = (uint64_t)quorum_vote_multi_agrees(
                &qo->mvalues[i * qo->nnames], qo->mreentry, qo->nnames, qo->mfence);
    }
    return qo->q->n;
}

/* Undo an acquire on node i, where it ran or may have: a release, or for a
 * hold that was there before (a reentry), one hold less. */
static void undo(qop_t *qo, const quorum_vote_t *v, unsigned i) {
    if (qo->mnames != NULL) {
        /* undone[i]: the undo sent there so far (a mundo): the new names'
         * releases go once, a reentry's drops once its grant is known */
        quorum_vote_mundo_t mu = quorum_vote_multi_undo(&v[i]), was = qo->undone[i];
        if (mu <= was) return;
        qo->undone[i] = (unsigned char)mu;
        for (size_t j = 0; j < qo->nnames; j++) {
            if (qo->mreentry[j] == 'n' && was == QUORUM_VOTE_MUNDO_NONE)
                extra_send_name(qo, i, PH_BACK, BACKEND_RELEASE, j, 0);
            else if (qo->mreentry[j] != 'n' && mu == QUORUM_VOTE_MUNDO_ALL)
                extra_send_name(qo, i, PH_BACK, BACKEND_DROP, j, 0);
        }
        return;
    }
    if (qo->undone[i]) return;
    quorum_vote_undo_t u = quorum_vote_undo(&v[i], qo->reentry);
    if (u == QUORUM_VOTE_UNDO_NONE) return;
    qo->undone[i] = 1;
    extra_send(qo, i, PH_BACK, u == QUORUM_VOTE_UNDO_DROP ? BACKEND_DROP : BACKEND_RELEASE);
}

static void undo_all(qop_t *qo) {
    quorum_vote_t v[CONF_QUORUM_MAX];
    unsigned n = votes(qo, v);
    for (unsigned i = 0; i < n; i++) undo(qo, v, i);
}

static void acquire_fail(qop_t *qo) {
    quorum_t *q = qo->q;
    quorum_vote_t v[CONF_QUORUM_MAX];
    unsigned n = votes(qo, v);
    quorum_vote_tally_t t = quorum_vote_tally(v, n);
    backend_op_t *p = qo->parent;
    qo->failed = 1;
    for (unsigned i = 0; i < n; i++) undo(qo, v, i);
    memset(&p->res, 0, sizeof(p->res));
    if (t.no == 0) {
        /* Nobody else holds it: too few nodes answered in time. */
        say_no_quorum(qo);
        answer(qo, BACKEND_DOWN);
        return;
    }
    if (qo->mnames != NULL) {
        quorum_vote_mfail_t f = quorum_vote_multi_fail(v, n, q->majority);
        if (f.down) { /* only a stale field's or a kind's few refusals: none counted */
            say_no_quorum(qo);
            answer(qo, BACKEND_DOWN);
            return;
        }
        p->res.which = f.which;
        if (f.outcome != BACKEND_TAKEN) {
            p->res.outcome = f.outcome;
            p->res.held = f.held;
            p->res.holds = f.holds;
            answer(qo, BACKEND_OK);
            return;
        }
    }
    long long ttl = quorum_vote_free_in(v, n, q->majority);
    if (ttl == QUORUM_VOTE_SPLIT) /* a split, or silent nodes: soon, at a random moment */
        ttl = 1 + (long long)(rand_r(&q->seed) % QUORUM_SPLIT_RETRY_MS);
    p->res.outcome = BACKEND_TAKEN;
    p->res.ttl_ms = ttl;
    answer(qo, BACKEND_OK);
}

/* The grant, once a majority holds the lock and a counter >= F, and the
 * lease still has time left. */
static void acquire_grant(qop_t *qo) {
    quorum_t *q = qo->q;
    backend_op_t *p = qo->parent;
    uint64_t elapsed = timers_now(q->timers) - qo->started;
    uint32_t lease = p->lease_ms, drift = backend_drift(&q->base, lease);
    if (!quorum_vote_lease_left(elapsed, lease, drift)) {
        /* Nothing would be left of it: undone, and said as it is. */
        snprintf(qo->err, sizeof(qo->err), "quorum: the grant took %llu ms of its %u ms lease "
                 "(clock_drift_ms %u): undone", (unsigned long long)elapsed, lease, drift);
        log_warn("%s (%.*s)", qo->err, (int)qo->len, qo->name);
        qo->failed = 1;
        undo_all(qo);
        memset(&p->res, 0, sizeof(p->res));
        answer(qo, BACKEND_FAILED);
        return;
    }
    qo->granted = 1;
    memset(&p->res, 0, sizeof(p->res));
    p->res.outcome = BACKEND_GRANTED;
    if (qo->mnames != NULL) {
        for (size_t j = 0; j < qo->nnames; j++) {
            quorum_park_forget(q, qo->mnames[j].name, qo->mnames[j].len, p->owner);
            p->values[j] = qo->mfence[j];
        }
        answer(qo, BACKEND_OK);
        return;
    }
    quorum_park_forget(q, qo->name, qo->len, p->owner);
    p->res.fence = qo->fence;
    answer(qo, BACKEND_OK);
}

/* The raise round, or its end: grants once a majority holds the lock with
 * a counter >= F, fails once none still may. */
static void fence_check(qop_t *qo) {
    quorum_vote_t v[CONF_QUORUM_MAX];
    unsigned n = votes(qo, v);
    switch (quorum_vote_fence_check(v, n, qo->q->majority, qo->fence, qo->raise_sent, qo->raised,
                                    qo->raising)) {
    case QUORUM_VOTE_GRANT: acquire_grant(qo); break;
    case QUORUM_VOTE_FAIL: acquire_fail(qo); break;
    default: break;
    }
}

/* Raises every granting node below F; phase PH_RAISE when the grant waits
 * for them, PH_BACK when enough agree already (so that the counters agree
 * next time). */
static void raise_below(qop_t *qo, unsigned phase) {
    quorum_vote_t v[CONF_QUORUM_MAX];
    unsigned n = votes(qo, v);
    for (unsigned i = 0; i < n; i++) {
        if (!quorum_vote_needs_raise(&v[i], qo->fence, qo->raise_sent[i])) continue;
        qo->raise_sent[i] = 1;
        if (qo->mnames == NULL) {
            extra_send(qo, i, phase, BACKEND_FENCE);
            continue;
        }
        /* a set's: each new name below its F */
        const uint64_t *got = &qo->mvalues[i * qo->nnames];
        for (size_t j = 0; j < qo->nnames; j++)
            if (qo->mreentry[j] == 'n' && got[j] < qo->mfence[j])
                extra_send_name(qo, i, phase, BACKEND_FENCE, j, qo->mfence[j]);
    }
}

/* A set's fence round begins: each name's F, then the round with F = 1
 * (votes()). */
static void multi_fence(qop_t *qo, const quorum_vote_t *v) {
    const uint64_t *values[CONF_QUORUM_MAX];
    unsigned n = qo->q->n, agree = 0;
    for (unsigned i = 0; i < n; i++) values[i] = &qo->mvalues[i * qo->nnames];
    quorum_vote_multi_fences(v, values, n, qo->mreentry, qo->nnames, qo->mfence);
    for (unsigned i = 0; i < n; i++)
        agree += v[i].counts && v[i].done && v[i].res.status == BACKEND_OK &&
                 v[i].res.outcome == BACKEND_GRANTED &&
                 quorum_vote_multi_agrees(values[i], qo->mreentry, qo->nnames, qo->mfence);
    qo->fence = 1;
    raise_below(qo, agree >= qo->q->majority ? PH_BACK : PH_RAISE);
    fence_check(qo);
}

static void acquire_decide(qop_t *qo) {
    quorum_vote_t v[CONF_QUORUM_MAX];
    if (qo->fence != 0) { /* the raise round is on: late grants join it */
        raise_below(qo, PH_RAISE);
        fence_check(qo);
        return;
    }
    quorum_vote_acquire_t a = quorum_vote_acquire(v, votes(qo, v), qo->q->majority);
    switch (a.what) {
    case QUORUM_VOTE_REENTERED: {
        /* The owner held it already (a reentry, or a hold its release
         * has not cleared): the lock manager knows which. */
        backend_op_t *p = qo->parent;
        qo->reentry = 1;
        memset(&p->res, 0, sizeof(p->res));
        p->res.outcome = BACKEND_REENTERED;
        p->res.holds = a.holds;
        answer(qo, BACKEND_OK);
        break;
    }
    case QUORUM_VOTE_FENCE:
        if (qo->mnames != NULL) {
            multi_fence(qo, v);
            break;
        }
        qo->fence = a.fence;
        raise_below(qo, a.agree ? PH_BACK : PH_RAISE);
        fence_check(qo);
        break;
    case QUORUM_VOTE_FAIL: acquire_fail(qo); break;
    default: break;
    }
}

/* An acquire's child answered after the op was. */
static void acquire_late(qop_t *qo, unsigned i) {
    quorum_vote_t v[CONF_QUORUM_MAX];
    votes(qo, v);
    if (v[i].res.status == BACKEND_FAILED) return;
    if (qo->failed) {
        undo(qo, v, i);
        return;
    }
    if (qo->granted) raise_below(qo, PH_BACK);
}

static void renew_decide(qop_t *qo) {
    quorum_vote_t v[CONF_QUORUM_MAX];
    backend_op_t *p = qo->parent;
    quorum_vote_decision_t d = quorum_vote_renew(v, votes(qo, v), qo->q->majority);
    if (d == QUORUM_VOTE_WAIT) return;
    memset(&p->res, 0, sizeof(p->res));
    if (d == QUORUM_VOTE_DOWN) {
        say_no_quorum(qo);
        answer(qo, BACKEND_DOWN);
        return;
    }
    p->res.renewal = d == QUORUM_VOTE_RENEWED ? BACKEND_RENEWED
                     : d == QUORUM_VOTE_FORCED ? BACKEND_FORCED
                                               : BACKEND_GONE;
    answer(qo, BACKEND_OK);
}

static void release_decide(qop_t *qo) {
    quorum_t *q = qo->q;
    quorum_vote_t v[CONF_QUORUM_MAX];
    backend_op_t *p = qo->parent;
    long long holds;
    int others;
    quorum_vote_decision_t d = quorum_vote_release(v, votes(qo, v), q->majority, &holds, &others);
    if (d == QUORUM_VOTE_WAIT) return;
    memset(&p->res, 0, sizeof(p->res));
    if (d == QUORUM_VOTE_DOWN) {
        say_no_quorum(qo);
        answer(qo, BACKEND_DOWN); /* the lock manager sends it again */
        return;
    }
    /* A node that already failed it gets it when it is back; those still
     * out park it when they fail (on_child). */
    for (unsigned i = 0; i < q->n; i++) {
        const qchild_t *c = &qo->ch[i];
        if (c->done && c->op.res.status == BACKEND_DOWN) quorum_park_add(&q->nodes[i], &c->op);
    }
    p->res.holds = holds;
    p->res.others_waiting = others;
    answer(qo, BACKEND_OK);
}

/* STATUS, FORCE and WHO wait for every node. */
static void ask_all_decide(qop_t *qo) {
    quorum_t *q = qo->q;
    quorum_vote_t v[CONF_QUORUM_MAX];
    backend_op_t *p = qo->parent;
    unsigned n = votes(qo, v);
    quorum_vote_decision_t d = quorum_vote_ask_all(v, n, q->majority);
    if (d == QUORUM_VOTE_WAIT) return;
    memset(&p->res, 0, sizeof(p->res));
    if (d == QUORUM_VOTE_DOWN) {
        say_no_quorum(qo);
        answer(qo, BACKEND_DOWN);
        return;
    }
    switch (p->type) {
    case BACKEND_FORCE: p->res.removed = quorum_vote_removed(v, n); break;
    case BACKEND_STATUS: quorum_vote_status(v, n, q->majority, &p->res.ttl_ms, &p->res.holds); break;
    case BACKEND_WHO:
        quorum_vote_who(v, qo->who, n, p->who, &p->res.ttl_ms);
        if (p->res.ttl_ms == -3) p->res.held = BACKEND_SEM; /* no one holder */
        break;
    default: break;
    }
    answer(qo, BACKEND_OK);
}

static void decide(qop_t *qo) {
    switch (qo->parent->type) {
    case BACKEND_ACQUIRE: acquire_decide(qo); break;
    case BACKEND_RENEW: renew_decide(qo); break;
    case BACKEND_RELEASE:
    case BACKEND_DROP: release_decide(qo); break;
    default: ask_all_decide(qo); break;
    }
}

static void qop_maybe_free(qop_t *qo) {
    if (qo->left > 0 || qo->parent != NULL) return;
    LIST_REMOVE(qo, link);
    free(qo);
}

static void on_child(void *data, backend_op_t *op) {
    qnode_t *qn = data;
    qchild_t *c = container_of(op, qchild_t, op);
    qop_t *qo = c->qo;
    int is_release = op->type == BACKEND_RELEASE || op->type == BACKEND_DROP;

    if (qo == NULL) { /* a parked release, sent again */
        quorum_park_answered(qn, c);
        return;
    }
    c->done = 1;
    qo->left--;
    if (c->phase == PH_MAIN) {
        if (op->res.status == BACKEND_DOWN && is_release && qo->parent == NULL)
            quorum_park_add(qn, op);
        /* A release that fails before the op is answered is the lock
         * manager's to send again, if the op fails; after, the node's. */
        if (qo->parent != NULL) decide(qo);
        else if (op->type == BACKEND_ACQUIRE) acquire_late(qo, c->idx);
    } else {
        unsigned idx = c->idx;
        int raise = c->phase == PH_RAISE;
        if (op->res.status == BACKEND_DOWN && is_release) quorum_park_add(qn, op);
        if (raise) {
            qo->raising--;
            unsigned char r = quorum_vote_raised(op->res.status, op->res.holds);
            if (qo->mnames == NULL) qo->raised[idx] = r;
            else if (r != QUORUM_VOTE_RAISED) qo->raised[idx] = r; /* a set's node: any name */
            else if (qo->mraising[idx] == 1 && qo->raised[idx] == QUORUM_VOTE_RAISE_OUT)
                qo->raised[idx] = r; /* ... or its last */
        }
        if (qo->mnames != NULL && op->type == BACKEND_FENCE) qo->mraising[idx]--;
        free(c);
        if (raise && qo->parent != NULL) fence_check(qo);
    }
    qop_maybe_free(qo);
}

/* ---- the table ---------------------------------------------------------------------- */

/* Others hold it on some nodes and the rest have been silent for
 * QUORUM_STRAGGLER_MS: give up this attempt rather than wait for them (the
 * holders' releases wake the waiter). */
static void on_straggle(timers_entry_t *t) {
    qop_t *qo = container_of(t, qop_t, straggle);
    quorum_vote_t v[CONF_QUORUM_MAX];
    if (qo->parent == NULL || qo->fence != 0) return;
    if (quorum_vote_straggle(v, votes(qo, v), qo->q->majority)) acquire_fail(qo);
}

static void fail_orphans(quorum_t *q, const char *why) {
    backend_op_t *op;
    while ((op = STAILQ_FIRST(&q->orphans)) != NULL) {
        STAILQ_REMOVE_HEAD(&q->orphans, link);
        memset(&op->res, 0, sizeof(op->res));
        op->res.status = BACKEND_DOWN;
        op->res.error = why;
        op->cb(op);
    }
}

static void on_orphans(timers_entry_t *t) {
    fail_orphans(container_of(t, quorum_t, orphan_timer), "out of memory");
}

static void q_submit(backend_t *b, backend_op_t *op) {
    quorum_t *q = QB(b);
    if (q->closed) {
        STAILQ_INSERT_TAIL(&q->orphans, op, link);
        return;
    }
    size_t whos = op->type == BACKEND_WHO ? q->n * sizeof(backend_who_t) : 0;
    size_t nn = op->type == BACKEND_ACQUIRE && op->mode == BACKEND_MULTI ? op->nnames : 0;
    size_t multi = 0; /* a set's copies: values, fences, names, letters, bytes */
    for (size_t j = 0; j < nn; j++) multi += op->names[j].len + 1;
    if (nn > 0)
        multi += (q->n + 1) * nn * sizeof(uint64_t) + nn * sizeof(backend_name_t) + nn + 1;
    qop_t *qo = calloc(1, sizeof(*qo) + q->n * sizeof(qchild_t) + whos + multi + op->len + 1);
    if (qo == NULL) { /* fails from the loop, never inside this call */
        STAILQ_INSERT_TAIL(&q->orphans, op, link);
        timers_start(q->timers, &q->orphan_timer, 0, on_orphans);
        return;
    }
    qo->q = q;
    qo->parent = op;
    qo->started = timers_now(q->timers);
    qo->who = whos ? (backend_who_t *)(void *)&qo->ch[q->n] : NULL;
    qo->name = (char *)&qo->ch[q->n] + whos;
    if (nn > 0) {
        qo->nnames = nn;
        qo->mvalues = (uint64_t *)(void *)&qo->ch[q->n];
        qo->mfence = qo->mvalues + q->n * nn;
        qo->mnames = (backend_name_t *)(void *)(qo->mfence + nn);
        qo->mreentry = (char *)(qo->mnames + nn);
        memcpy(qo->mreentry, op->reentry, nn);
        char *at = qo->mreentry + nn + 1;
        for (size_t j = 0; j < nn; j++) {
            memcpy(at, op->names[j].name, op->names[j].len);
            qo->mnames[j].name = at;
            qo->mnames[j].len = op->names[j].len;
            at += op->names[j].len + 1;
        }
        qo->name = at;
    }
    memcpy(qo->name, op->name, op->len);
    qo->name[op->len] = '\0';
    qo->len = op->len;
    LIST_INSERT_HEAD(&q->live, qo, link);
    for (unsigned i = 0; i < q->n; i++) {
        qchild_t *c = &qo->ch[i];
        c->qo = qo;
        c->idx = (unsigned char)i;
        c->phase = PH_MAIN;
        c->op.type = op->type;
        c->op.name = qo->name;
        c->op.len = qo->len;
        c->op.owner = op->owner;
        c->op.lease_ms = op->lease_ms;
        c->op.who = qo->who ? &qo->who[i] : NULL;
        if (nn > 0) { /* a set: the same call on every node */
            c->op.mode = BACKEND_MULTI;
            c->op.names = qo->mnames;
            c->op.nnames = nn;
            c->op.reentry = qo->mreentry;
            c->op.values = &qo->mvalues[i * nn];
        }
    }
    qo->left = q->n;
    if (op->type == BACKEND_ACQUIRE)
        timers_start(q->timers, &qo->straggle, QUORUM_STRAGGLER_MS, on_straggle);
    for (unsigned i = 0; i < q->n; i++) child_send(&q->nodes[i], &qo->ch[i]);
}

static void on_sub_event(void *data, backend_event_t ev) {
    qsub_t *s = data;
    qwatch_t *w = s->w;
    if (ev != BACKEND_WATCHING) { /* a release, ours to try on or not */
        w->cb(w->data, ev);
        return;
    }
    if (s->seen) { /* again, after a reconnect: a release may have been missed there */
        if (w->announced) w->cb(w->data, ev);
        return;
    }
    s->seen = 1;
    /* In force once a majority has it: a release that needs no majority
     * of ours to free the lock cannot pass unseen. */
    if (++w->in_force == w->majority) {
        w->announced = 1;
        w->cb(w->data, ev);
    }
}

static void q_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                    uint64_t owner, backend_watch_cb cb, void *data) {
    quorum_t *q = QB(b);
    hmap_node_t *h = hmap_get(&q->watches, name, len);
    qwatch_t *w = h ? container_of(h, qwatch_t, node) : NULL;
    if (w == NULL) {
        if ((w = calloc(1, sizeof(*w) + len + 1)) == NULL) return; /* TTL retries */
        memcpy(w->name, name, len);
        w->len = len;
        w->majority = q->majority;
        w->node.key = w->name;
        w->node.len = len;
        for (unsigned i = 0; i < q->n; i++) w->sub[i].w = w;
        w->mode = mode;
        w->owner = owner;
        hmap_put(&q->watches, &w->node);
    } else {
        if (w->mode != mode || w->owner != owner) /* one watch per name: the new
                                                     channel replaces it */
            for (unsigned i = 0; i < q->n; i++)
                node_unwatch(q->nodes[i].nd, name, len, w->mode, w->owner);
        w->mode = mode;
        w->owner = owner;
        /* Asked again: confirm again once a majority confirms. */
        w->in_force = 0;
        w->announced = 0;
        for (unsigned i = 0; i < q->n; i++) w->sub[i].seen = 0;
    }
    w->cb = cb;
    w->data = data;
    for (unsigned i = 0; i < q->n; i++)
        node_watch(q->nodes[i].nd, name, len, mode, owner, on_sub_event, &w->sub[i]);
}

static void q_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                      uint64_t owner) {
    quorum_t *q = QB(b);
    hmap_node_t *h = hmap_get(&q->watches, name, len);
    if (h == NULL) return;
    (void)mode;
    (void)owner;
    const qwatch_t *was = container_of(h, qwatch_t, node);
    for (unsigned i = 0; i < q->n; i++)
        node_unwatch(q->nodes[i].nd, name, len, was->mode, was->owner);
    hmap_del(&q->watches, h);
    free(container_of(h, qwatch_t, node));
}

static int q_available(const backend_t *b, const char *name, size_t len) {
    const quorum_t *q = QB_CONST(b);
    (void)name;
    (void)len;
    return counting(q) >= q->majority;
}

static void q_describe(const backend_t *b, const char *name, size_t len, char *buf,
                       size_t cap) {
    const quorum_t *q = QB_CONST(b);
    unsigned up = counting(q);
    size_t k;
    (void)len;
    if (name != NULL) {
        char why[BACKEND_ERR_LEN];
        k = (size_t)snprintf(buf, cap, "no quorum (%u of %u up)", up, q->n);
        for (unsigned i = 0; i < q->n && k < cap; i++) {
            const qnode_t *qn = &q->nodes[i];
            if (quorum_clock_counts(qn)) continue;
            uint64_t now = timers_now(q->timers);
            if (!node_up(qn->nd)) node_why_down(qn->nd, why, sizeof(why));
            else if (qn->checked && qn->counts_at > now)
                snprintf(why, sizeof(why), "restarted lately: counts in %llu ms (rejoin_delay_ms)",
                         (unsigned long long)(qn->counts_at - now));
            else snprintf(why, sizeof(why), "%s", quorum_clock_state(qn));
            snprintf(buf + k, cap - k, ": %s: %s", qn->label, why);
            break;
        }
        return;
    }
    k = (size_t)snprintf(buf, cap, "quorum %u of %u up (majority %u)", up, q->n, q->majority);
    for (unsigned i = 0; i < q->n && k < cap; i++) {
        const qnode_t *qn = &q->nodes[i];
        if (!quorum_clock_counts(qn))
            k += (size_t)snprintf(buf + k, cap - k, " %s:%s", quorum_clock_state(qn), qn->label);
    }
}

static void q_reconfigure(backend_t *b, const conf_t *conf) {
    quorum_t *q = QB(b);
    for (unsigned i = 0; i < q->n; i++)
        node_set_timeouts(q->nodes[i].nd, conf->connect_timeout_ms, conf->command_timeout_ms,
                          conf->replicas_timeout_ms);
}

/* Each node as the metrics and INFO see it: up means it counts. */
typedef struct qinfo_s {
    backend_node_cb cb;
    void *data;
    int counts;
} qinfo_t;

static void node_seen(void *data, const backend_node_info_t *node) {
    qinfo_t *qi = data;
    backend_node_info_t copy = *node;
    copy.up = qi->counts;
    qi->cb(qi->data, &copy);
}

static size_t q_scan_nodes(const backend_t *b, struct node_s **out, size_t cap,
                           unsigned *need) {
    const quorum_t *q = QB_CONST(b);
    size_t k = 0;
    *need = q->n / 2 + 1;
    for (unsigned i = 0; i < q->n && k < cap; i++) out[k++] = q->nodes[i].nd;
    return k;
}

static void q_nodes(const backend_t *b, backend_node_cb cb, void *data) {
    const quorum_t *q = QB_CONST(b);
    for (unsigned i = 0; i < q->n; i++) {
        const qnode_t *qn = &q->nodes[i];
        qinfo_t qi = {.cb = cb, .data = data, .counts = quorum_clock_counts(qn)};
        node_info(qn->nd,
                  node_up(qn->nd) && !quorum_clock_counts(qn) ? quorum_clock_state(qn) : "primary",
                  node_seen, &qi);
    }
}

static uint32_t q_drift(const backend_t *b, uint32_t lease_ms) {
    const quorum_t *q = QB_CONST(b);
    return quorum_vote_drift(q->drift_ms, lease_ms);
}

static void q_close(backend_t *b) {
    quorum_t *q = QB(b);
    q->closed = 1;
    timers_stop(q->timers, &q->orphan_timer);
    /* Children fail inside node_free, which answers their ops; what those
     * answers submit fails from the orphans. */
    for (unsigned i = 0; i < q->n; i++) {
        qnode_t *qn = &q->nodes[i];
        quorum_clock_stop(qn);
        node_free(qn->nd);
        qn->nd = NULL;
        fail_orphans(q, "shutting down");
    }
    fail_orphans(q, "shutting down");
    qop_t *qo;
    while ((qo = LIST_FIRST(&q->live)) != NULL) { /* cannot happen: every child answered */
        LIST_REMOVE(qo, link);
        free(qo);
    }
    for (unsigned i = 0; i < q->n; i++) quorum_park_free(&q->nodes[i]);
    size_t i = 0;
    hmap_node_t *h, *next;
    for (h = hmap_next(&q->watches, &i, NULL); h != NULL; h = next) {
        next = hmap_next(&q->watches, &i, h);
        free(container_of(h, qwatch_t, node));
    }
    hmap_free(&q->watches);
    free(q);
}

static const backend_type_t quorum_type = {
    .name = "quorum",
    .submit = q_submit,
    .watch = q_watch,
    .unwatch = q_unwatch,
    .available = q_available,
    .describe = q_describe,
    .reconfigure = q_reconfigure,
    .nodes = q_nodes,
    .scan_nodes = q_scan_nodes,
    .drift = q_drift,
    .close = q_close,
};

backend_t *quorum_open(const backend_env_t *env, char *err, size_t errlen) {
    const conf_t *conf = env->conf;
    quorum_t *q = calloc(1, sizeof(*q));
    if (q == NULL || hmap_init(&q->watches) != 0) {
        free(q);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    q->base.type = &quorum_type;
    /* Fences rise across grants by any majority (the raise round), and
     * across nodes that lost their data (TIME, and the rejoin delay). */
    q->base.caps = BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS | BACKEND_CAP_MULTI;
    q->base.lease_max_ms = conf->rejoin_delay_ms;
    q->timers = env->timers;
    q->n = (unsigned)conf->quorum_count;
    q->majority = q->n / 2 + 1;
    q->rejoin_delay_ms = conf->rejoin_delay_ms;
    q->drift_ms = conf->clock_drift_ms;
    q->seed = (unsigned)uv_hrtime();
    LIST_INIT(&q->live);
    STAILQ_INIT(&q->orphans);
    for (unsigned i = 0; i < q->n; i++) {
        const conf_url_t *u = &conf->quorum[i];
        qnode_t *qn = &q->nodes[i];
        qn->q = q;
        qn->idx = i;
        STAILQ_INIT(&qn->retries);
        if (u->kind == CONF_REDIS_UNIX) snprintf(qn->label, sizeof(qn->label), "%s", u->host);
        else if (strchr(u->host, ':') != NULL)
            snprintf(qn->label, sizeof(qn->label), "[%s]:%d", u->host, u->port);
        else snprintf(qn->label, sizeof(qn->label), "%s:%d", u->host, u->port);
        node_opts_t o;
        backend_node_opts(env, &o);
        o.label = qn->label;
        /* Each node's URL may have its own credentials, db and TLS. */
        if (u->username[0] || u->password[0]) o.username = u->username;
        if (u->password[0]) o.password = u->password;
        o.db = u->db;
        if (!u->tls && conf->tls_key != 1) o.tls = NULL;
        o.script_flags = SCRIPTS_F_QUORUM;
        o.on_done = on_child;
        o.on_state = on_node_state;
        o.data = qn;
        o.addr.is_unix = u->kind == CONF_REDIS_UNIX;
        snprintf(o.addr.host, sizeof(o.addr.host), "%s", u->host);
        o.addr.port = u->port;
        if ((qn->nd = node_new(env->loop, env->timers, &o)) == NULL) {
            q->n = i;
            q_close(&q->base);
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
    }
    return &q->base;
}
