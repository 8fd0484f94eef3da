/* What quorum.c, quorum_clock.c and quorum_park.c share: the quorum's structs and calls.
 * SPDX-License-Identifier: MIT
 *
 * Backend-internal: backend_open() calls quorum_open() (backend.h).
 * quorum.c keeps the voting: it sends every op's children, counts their
 * answers (quorum_vote.c) and answers the op; quorum_clock.c decides
 * which nodes count (INFO server on every connection: restarts and the
 * rejoin delay; TIME: clock drift); quorum_park.c keeps the releases a
 * node missed until it is back. */
#ifndef DLOCK_QUORUM_INTERNAL_H
#define DLOCK_QUORUM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/clock_skew.h"
#include "daemon/backend/node.h"
#include "daemon/backend/quorum_vote.h"
#include "daemon/util/hmap.h"
#include "daemon/util/timers.h"

/* Room for a node's label: host:port. */
#define QUORUM_LABEL_MAX (CONF_STR_MAX + 16)

typedef struct quorum_s quorum_t;
typedef struct qop_s qop_t;
typedef struct qretry_s qretry_t;

/* One member node. */
typedef struct qnode_s {
    quorum_t *q;
    node_t *nd;
    unsigned idx;
    char label[QUORUM_LABEL_MAX];
    int checked;              /* INFO read since the connection came up */
    uint64_t counts_at;       /* with checked: it counts from then on */
    char run_id[QUORUM_VOTE_RUN_ID_MAX]; /* as last read; "" before */
    int same_as;              /* 1 + the index of a node with the same run_id:
                                 one server under two addresses never counts
                                 twice; 0 when none */
    timers_entry_t rejoin;    /* counts_at comes */
    /* its clock against ours */
    timers_entry_t clock_timer;
    clock_skew_sample_t clock_base; /* the window's first TIME */
    int clock_have;           /* clock_base taken since the connection came up */
    uint64_t clock_sent_us;   /* the TIME in flight was sent then */
    int clock_off;            /* beyond clock_drift_ms: it does not count */
    STAILQ_HEAD(, qretry_s) retries; /* releases waiting for it to be back,
                                        oldest first */
    size_t parked;
} qnode_t;

/* Phases of a child op. */
enum { PH_MAIN = 0, PH_RAISE, PH_BACK };

/* One node's share of an op. */
typedef struct qchild_s {
    backend_op_t op;
    qop_t *qo;                /* NULL: a parked release's resend (rt) */
    qretry_t *rt;
    unsigned char idx;
    unsigned char phase;
    unsigned char done;       /* its answer came */
    unsigned char counts;     /* its node counted when it was sent */
} qchild_t;

LIST_HEAD(qop_list_s, qop_s);

struct quorum_s {
    backend_t base;
    timers_t *timers;
    unsigned n, majority;
    uint32_t rejoin_delay_ms;
    uint32_t drift_ms;        /* CONF_DRIFT_AUTO: lease/100 + 2 */
    int closed;
    unsigned seed;            /* rand_r's, for split retries */
    struct qop_list_s live;   /* ops with children out */
    STAILQ_HEAD(, backend_op_s) orphans; /* submitted while closing, or with
                                            no memory: they fail */
    timers_entry_t orphan_timer;
    hmap_t watches;
    qnode_t nodes[CONF_QUORUM_MAX];
};

/* ---- which nodes count (quorum_clock.c) ------------------------------------------ */

/* Whether qn counts toward a majority now. */
int quorum_clock_counts(const qnode_t *qn);
/* What quorum_vote_node_state() says of qn now. */
const char *quorum_clock_state(const qnode_t *qn);
/* Its connection went up or down: it counts again only once INFO server
 * is read (and its clock is read again) on the new one. */
void quorum_clock_check(qnode_t *qn);
/* Stops its timers (closing). */
void quorum_clock_stop(qnode_t *qn);

/* ---- releases it missed (quorum_park.c) ----------------------------------------- */

/* Parks a release that got no answer from qn until qn is back. */
void quorum_park_add(qnode_t *qn, const backend_op_t *op);
/* qn is back: sends what is parked for it. */
void quorum_park_resend(qnode_t *qn);
/* A parked release, sent again, answered (c is its child, c->qo NULL). */
void quorum_park_answered(qnode_t *qn, qchild_t *c);
/* A new grant to owner makes its parked releases of name stale. */
void quorum_park_forget(quorum_t *q, const char *name, size_t len, uint64_t owner);
/* Frees what is parked for qn (closing). */
void quorum_park_free(qnode_t *qn);

#endif
