/* The quorum's parked releases: what a node missed waits for it, until rejoin_delay_ms.
 * SPDX-License-Identifier: MIT
 *
 * A release or drop that a majority did reaches the node that did not
 * answer when it is back (quorum_park_resend() from quorum.c's node state
 * callback), until every lease it could concern has run out, so that it
 * does not keep a hold its owner let go. A new grant to the same owner makes
 * its parked releases of that name stale (quorum_park_forget()). */
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/quorum_internal.h"

/* Releases parked for one node while it is away, at most: beyond, the
 * oldest go (their leases end them). */
#define QUORUM_PARKED_MAX 10000

/* A release that did not reach a node: sent again when the node is back,
 * until every lease it could concern has run out. */
struct qretry_s {
    STAILQ_ENTRY(qretry_s) link;
    qchild_t c;
    uint64_t give_up_at;
    size_t len;
    char name[];
};

/* Queues rt for when qn is back, dropping what is past its time or beyond
 * QUORUM_PARKED_MAX first. */
static void park(qnode_t *qn, qretry_t *rt) {
    uint64_t now = timers_now(qn->q->timers);
    qretry_t *old;
    while ((old = STAILQ_FIRST(&qn->retries)) != NULL &&
           (old->give_up_at <= now || qn->parked >= QUORUM_PARKED_MAX)) {
        STAILQ_REMOVE_HEAD(&qn->retries, link);
        qn->parked--;
        free(old);
    }
    STAILQ_INSERT_TAIL(&qn->retries, rt, link);
    qn->parked++;
}

void quorum_park_add(qnode_t *qn, const backend_op_t *op) {
    quorum_t *q = qn->q;
    if (q->closed) return;
    qretry_t *rt = malloc(sizeof(*rt) + op->len + 1);
    if (rt == NULL) return;
    memset(&rt->c, 0, sizeof(rt->c));
    rt->c.rt = rt;
    rt->c.idx = (unsigned char)qn->idx;
    rt->c.phase = PH_BACK;
    rt->c.op.type = op->type;
    rt->c.op.owner = op->owner;
    memcpy(rt->name, op->name, op->len);
    rt->name[op->len] = '\0';
    rt->len = op->len;
    rt->c.op.name = rt->name;
    rt->c.op.len = rt->len;
    rt->give_up_at = timers_now(q->timers) + q->rejoin_delay_ms;
    park(qn, rt);
}

void quorum_park_resend(qnode_t *qn) {
    STAILQ_HEAD(, qretry_s) again = STAILQ_HEAD_INITIALIZER(again);
    qretry_t *rt;
    STAILQ_CONCAT(&again, &qn->retries);
    qn->parked = 0;
    while ((rt = STAILQ_FIRST(&again)) != NULL) {
        STAILQ_REMOVE_HEAD(&again, link);
        node_submit(qn->nd, &rt->c.op);
    }
}

void quorum_park_forget(quorum_t *q, const char *name, size_t len, uint64_t owner) {
    for (unsigned i = 0; i < q->n; i++) {
        qnode_t *qn = &q->nodes[i];
        qretry_t *rt = STAILQ_FIRST(&qn->retries), *next;
        for (; rt != NULL; rt = next) {
            next = STAILQ_NEXT(rt, link);
            if (rt->c.op.owner == owner && rt->len == len && memcmp(rt->name, name, len) == 0) {
                STAILQ_REMOVE(&qn->retries, rt, qretry_s, link);
                qn->parked--;
                free(rt);
            }
        }
    }
}

void quorum_park_answered(qnode_t *qn, qchild_t *c) {
    quorum_t *q = qn->q;
    const backend_op_t *op = &c->op;
    qretry_t *rt = c->rt;
    if (op->res.status == BACKEND_DOWN && !q->closed && timers_now(q->timers) < rt->give_up_at)
        park(qn, rt);
    else
        free(rt);
}

void quorum_park_free(qnode_t *qn) {
    qretry_t *rt;
    while ((rt = STAILQ_FIRST(&qn->retries)) != NULL) {
        STAILQ_REMOVE_HEAD(&qn->retries, link);
        free(rt);
    }
}
