/* Cluster multi-name locks across slots: one mlock.lua call per slot, in a fixed order, undone on refusal.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/cluster_multi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/util/util.h"

/* ---- the plan (pure) ------------------------------------------------------------- */

static int name_cmp(const backend_name_t *a, const backend_name_t *b) {
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->name, b->name, n);
    if (c != 0) return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* 1 if name i goes before name j. */
static int before(const unsigned *slot, const backend_name_t *names, size_t i, size_t j) {
    if (slot[i] != slot[j]) return slot[i] < slot[j];
    return name_cmp(&names[i], &names[j]) < 0;
}

size_t cluster_multi_plan(const unsigned *slot, const backend_name_t *names, size_t n,
                          size_t *order, size_t *ends) {
    /* insertion sort: n is at most a few dozen */
    for (size_t k = 0; k < n; k++) {
        size_t j = k;
        while (j > 0 && before(slot, names, k, order[j - 1])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    size_t groups = 0;
    for (size_t k = 1; k <= n; k++)
        if (k == n || slot[order[k]] != slot[order[k - 1]]) ends[groups++] = k;
    return groups;
}

static void on_sub(backend_op_t *op);

int cluster_multi_split(const backend_t *b, const cluster_multi_env_t *env,
                        const backend_op_t *op) {
    if (op->type != BACKEND_ACQUIRE || op->mode != BACKEND_MULTI || op->nnames < 2) return 0;
    if (backend_op_cb_of(op) == on_sub) return 0; /* a group of ours: it goes as it is */
    unsigned first = env->slot_of(b, op->names[0].name, op->names[0].len);
    for (size_t i = 1; i < op->nnames; i++)
        if (env->slot_of(b, op->names[i].name, op->names[i].len) != first ||
            env->busy(b, op->names[i].name, op->names[i].len))
            return 1;
    return 0;
}

/* ---- running it ------------------------------------------------------------------ */

typedef struct cmulti_s cmulti_t;

/* One name's undo: a release (a new name) or a drop (a reentry); or a
 * barrier before a group goes: a STATUS behind the name's ops. */
typedef struct cundo_s {
    backend_op_t op;
    cmulti_t *cm;
} cundo_t;

struct cmulti_s {
    backend_t *b;
    const cluster_multi_env_t *env;
    backend_op_t *parent;
    size_t n, ngroups, at;     /* at: the group in flight */
    size_t *order;             /* n: parent's index of the k-th name */
    size_t *ends;              /* ngroups */
    backend_name_t *names;     /* n, in order */
    char *reentry;             /* n letters, in order */
    uint64_t *values;          /* n, in order */
    backend_op_t sub;          /* the group in flight */
    size_t undo_left;          /* undo ops (or barriers) not answered yet */
    backend_result_t res;      /* the answer, once the undo is through */
    char error[BACKEND_ERR_LEN];
    cundo_t *undo;             /* n: the undo, or the barriers */
};

static size_t group_start(const cmulti_t *cm, size_t g) {
    return g == 0 ? 0 : cm->ends[g - 1];
}

static void cundo_init(cmulti_t *cm, size_t k, backend_op_type_t kind, backend_op_cb cb) {
    cundo_t *u = &cm->undo[k];
    memset(u, 0, sizeof(*u));
    u->cm = cm;
    u->op.type = kind;
    u->op.mode = BACKEND_MUTEX;
    u->op.name = cm->names[k].name;
    u->op.len = cm->names[k].len;
    u->op.owner = cm->parent->owner;
    u->op.lease_ms = cm->parent->lease_ms;
    u->op.cb = cb;
}

static void send_group_now(cmulti_t *cm);

static void on_barrier(backend_op_t *op) {
    cmulti_t *cm = container_of(op, cundo_t, op)->cm;
    if (--cm->undo_left == 0) send_group_now(cm);
}

/* Sends the group at, once the ops before it on its names have run. */
static void send_group(cmulti_t *cm) {
    size_t s = group_start(cm, cm->at), e = cm->ends[cm->at];
    cm->undo_left = 0;
    for (size_t k = s + 1; k < e; k++) {
        if (!cm->env->busy(cm->b, cm->names[k].name, cm->names[k].len)) continue;
        cundo_init(cm, k, BACKEND_STATUS, on_barrier);
        cm->undo_left++;
    }
    if (cm->undo_left == 0) {
        send_group_now(cm);
        return;
    }
    /* all counted before any goes; their answers come from later turns */
    for (size_t k = s + 1; k < e; k++)
        if (cm->undo[k].op.cb == on_barrier) backend_submit(cm->b, &cm->undo[k].op);
}

static void send_group_now(cmulti_t *cm) {
    size_t s = group_start(cm, cm->at), e = cm->ends[cm->at];
    backend_op_t *sub = &cm->sub, *p = cm->parent;
    memset(sub, 0, sizeof(*sub));
    sub->type = BACKEND_ACQUIRE;
    sub->mode = BACKEND_MULTI;
    sub->name = cm->names[s].name;
    sub->len = cm->names[s].len;
    sub->owner = p->owner;
    sub->lease_ms = p->lease_ms;
    sub->names = &cm->names[s];
    sub->nnames = e - s;
    sub->reentry = &cm->reentry[s];
    sub->values = &cm->values[s];
    sub->cb = on_sub;
    sub->data = cm;
    backend_submit(cm->b, sub);
}

static void finish(cmulti_t *cm) {
    backend_op_t *p = cm->parent;
    p->res = cm->res;
    if (p->res.status != BACKEND_OK) p->res.error = cm->error;
    free(cm);
    p->cb(p);
}

static void on_undo(backend_op_t *op) {
    cundo_t *u = container_of(op, cundo_t, op);
    cmulti_t *cm = u->cm;
    if (op->res.status != BACKEND_OK)
        log_warn("cluster: undoing %.*s of a multi-name attempt: %s (its lease ends it)",
                 (int)op->len, op->name, op->res.error);
    if (--cm->undo_left == 0) finish(cm);
}

/* Undoes the groups granted before the one in flight, then answers. */
static void undo_granted(cmulti_t *cm) {
    size_t end = group_start(cm, cm->at);
    cm->undo_left = end;
    if (end == 0) {
        finish(cm);
        return;
    }
    for (size_t k = 0; k < end; k++)
        cundo_init(cm, k, cm->reentry[k] == 'r' ? BACKEND_DROP : BACKEND_RELEASE, on_undo);
    /* every op made before any is sent: an answer may come back at once
     * only from a later loop turn, but the count must stand first */
    for (size_t k = 0; k < end; k++) backend_submit(cm->b, &cm->undo[k].op);
}

static void on_sub(backend_op_t *op) {
    cmulti_t *cm = op->data;
    const backend_result_t *r = &op->res;
    if (r->status == BACKEND_OK && r->outcome == BACKEND_GRANTED) {
        if (++cm->at < cm->ngroups) {
            send_group(cm);
            return;
        }
        for (size_t k = 0; k < cm->n; k++) cm->parent->values[cm->order[k]] = cm->values[k];
        memset(&cm->res, 0, sizeof(cm->res));
        cm->res.status = BACKEND_OK;
        cm->res.outcome = BACKEND_GRANTED;
        finish(cm);
        return;
    }
    /* Refused, or failed: the answer is this group's, about the parent's
     * name; what the groups before it took goes first. A group that may
     * have run (its answer lost, or not replicated) is the lock manager's
     * to undo, as for one call. */
    cm->res = *r;
    cm->res.which = r->status == BACKEND_OK ? cm->order[group_start(cm, cm->at) + r->which] : 0;
    snprintf(cm->error, sizeof(cm->error), "%s", r->status != BACKEND_OK && r->error ? r->error : "");
    undo_granted(cm);
}

int cluster_multi_submit(backend_t *b, const cluster_multi_env_t *env, backend_op_t *op) {
    size_t n = op->nnames;
    unsigned *slot = calloc(n, sizeof(*slot));
    cmulti_t *cm = zalloc(sizeof(*cm) + n * (2 * sizeof(size_t) + sizeof(backend_name_t) +
                                             sizeof(uint64_t) + sizeof(cundo_t) + 1));
    if (slot == NULL || cm == NULL) {
        free(slot);
        free(cm);
        return -1;
    }
    cm->undo = (cundo_t *)(cm + 1);
    cm->names = (backend_name_t *)(cm->undo + n);
    cm->values = (uint64_t *)(cm->names + n);
    cm->order = (size_t *)(cm->values + n);
    cm->ends = cm->order + n;
    cm->reentry = (char *)(cm->ends + n);
    cm->b = b;
    cm->env = env;
    cm->parent = op;
    cm->n = n;
    for (size_t i = 0; i < n; i++) slot[i] = env->slot_of(b, op->names[i].name, op->names[i].len);
    cm->ngroups = cluster_multi_plan(slot, op->names, n, cm->order, cm->ends);
    free(slot);
    for (size_t k = 0; k < n; k++) {
        cm->names[k] = op->names[cm->order[k]];
        cm->reentry[k] = op->reentry[cm->order[k]];
    }
    send_group(cm);
    return 0;
}
