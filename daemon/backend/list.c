/* LIST's reading of Redis: SCAN the topology's nodes, describe each page's lock keys, read the registry.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/list.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/node.h"
#include "daemon/backend/scripts.h"

/* Daemons of the registry kept per listing (a registry entry each). */
#define LIST_DAEMONS_MAX 256

typedef struct lnode_s {
    list_run_t *run;
    node_t *nd;
    char cursor[24];
    int done;                   /* SCAN came back to 0, or enough was found */
    int failed;
    size_t rounds;              /* SCAN calls sent */
    size_t found;               /* entries kept from this node */
    char *page;                 /* the SCAN page's lock keys still to describe, */
    size_t *offs, *lens;        /* each at page + offs[i], lens[i] bytes */
    size_t npage, next;         /* keys in the page, the next to describe */
} lnode_t;

typedef struct ldaemon_s {
    char uuid[BACKEND_UUID_MAX];
    char host[LIST_HOST_MAX];
    long long dpid;
} ldaemon_t;

struct list_run_s {
    backend_t *b;
    list_cb cb;
    list_keep_cb keep;
    void *data;
    int cancelled;
    size_t limit;
    unsigned need;              /* quorum: nodes that must agree; 0: union */
    char match[KEYS_KEY_MAX * 2 + 8];
    size_t mlen;
    size_t pending;             /* commands in flight */
    int finishing;
    lnode_t nodes[LIST_NODES_MAX];
    size_t nnodes;
    list_entry_t *ents;
    size_t n, cap;
    ldaemon_t daemons[LIST_DAEMONS_MAX];
    size_t ndaemons;
    list_result_t res;
    backend_status_t first_status; /* of the first node that failed */
    uint64_t deadline_ms;       /* LIST_DEADLINE_TIMEOUTS x command_timeout_ms */
    uv_timer_t timer;           /* the deadline; then answers from the loop, never
                                   inside backend_list */
};

const char *list_word(backend_mode_t kind) {
    const char *w = kind < BACKEND_MODE_COUNT ? scripts_mode(kind)->list_word : NULL;
    return w != NULL ? w : "lock";
}

/* ---- reading replies ---------------------------------------------------------------- */

static long long num_of(const redisReply *r) {
    if (r == NULL) return 0;
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return strtoll(r->str, NULL, 10);
    return 0;
}

static void str_of(char *out, size_t cap, const redisReply *r) {
    out[0] = '\0';
    if (r == NULL || r->type != REDIS_REPLY_STRING) return;
    size_t l = r->len < cap - 1 ? r->len : cap - 1;
    memcpy(out, r->str, l);
    out[l] = '\0';
}

/* One element of list.lua's reply into e; 0, or -1 when it cannot be read. */
static int entry_of(list_run_t *r, const redisReply *x, list_entry_t *e) {
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 9) return -1;
    const redisReply *k = x->element[0], *kind = x->element[1];
    if (k->type != REDIS_REPLY_STRING || kind->type != REDIS_REPLY_INTEGER) return -1;
    const char *name;
    size_t len;
    if (!list_key_name(k->str, k->len, r->b->prefix, &name, &len)) return -1;
    memset(e, 0, offsetof(list_entry_t, holders));
    e->waiters_total = e->nwaiters = 0;
    e->value[0] = '\0';
    e->agree = 0;
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    e->len = len;
    long long held = kind->integer;
    e->kind = held >= 0 && held < BACKEND_MODE_COUNT ? (backend_mode_t)held : BACKEND_MUTEX;
    e->ttl_ms = num_of(x->element[2]);
    long long f = num_of(x->element[3]);
    e->fence = f > 0 ? (uint64_t)f : 0;
    e->holders_total = (size_t)num_of(x->element[4]);
    const redisReply *h = x->element[5];
    if (h->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < h->elements && e->nholders < LIST_HOLDERS_MAX; i += 2) {
            list_who_t *w = &e->holders[e->nholders++];
            memset(w, 0, sizeof(*w));
            str_of(w->field, sizeof(w->field), h->element[i]);
            w->count = num_of(h->element[i + 1]);
        }
    e->waiters_total = (size_t)num_of(x->element[6]);
    const redisReply *q = x->element[7];
    if (q->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i < q->elements && e->nwaiters < LIST_WAITERS_MAX; i++) {
            list_who_t *w = &e->waiters[e->nwaiters++];
            memset(w, 0, sizeof(*w));
            str_of(w->field, sizeof(w->field), q->element[i]);
        }
    const redisReply *v = x->element[8];
    e->value[0] = '\0';
    if (v->type == REDIS_REPLY_STRING) backend_clean_value(e->value, sizeof(e->value), v->str, v->len);
    return 0;
}

/* ---- the run ------------------------------------------------------------------------ */

static void scan_next(lnode_t *ln);
static void describe_next(lnode_t *ln);

static void page_free(lnode_t *ln) {
    free(ln->page);
    free(ln->offs);
    free(ln->lens);
    ln->page = NULL;
    ln->offs = ln->lens = NULL;
    ln->npage = ln->next = 0;
}

static void on_timer_closed(uv_handle_t *h) {
    list_run_t *r = h->data;
    for (size_t i = 0; i < r->nnodes; i++) page_free(&r->nodes[i]);
    free(r->ents);
    free(r);
}

/* Fills in each holder's and waiter's dlockd from the registry. */
static void name_daemons(list_run_t *r, list_who_t *w) {
    w->host[0] = '\0';
    w->dpid = w->pid = w->uid = w->age_ms = -1;
    uint64_t id = 0;
    size_t ul = list_field_uuid(w->field, &id);
    if (ul == 0) return;
    if (ul == strlen(r->b->uuid) && memcmp(w->field, r->b->uuid, ul) == 0) {
        w->ours = 1;
        w->owner = id;
    }
    for (size_t i = 0; i < r->ndaemons; i++)
        if (strlen(r->daemons[i].uuid) == ul && memcmp(r->daemons[i].uuid, w->field, ul) == 0) {
            snprintf(w->host, sizeof(w->host), "%s", r->daemons[i].host);
            w->dpid = r->daemons[i].dpid;
            return;
        }
}

static void on_timer(uv_timer_t *t) {
    list_run_t *r = t->data;
    list_result_t *res = &r->res;
    if (!r->finishing) {
        /* The deadline, with commands still out: answer now, send nothing
         * more, and end once the last of them is back (cancelled: neither
         * cb nor keep is called again, their data may be gone). */
        res->status = BACKEND_DOWN;
        snprintf(res->error, sizeof(res->error),
                 "LIST did not end within %llu ms (%d x command_timeout_ms)",
                 (unsigned long long)r->deadline_ms, LIST_DEADLINE_TIMEOUTS);
        if (!r->cancelled) r->cb(r->data, res);
        r->cancelled = 1;
        return;
    }
    if (res->status == BACKEND_OK) {
        if (r->n > 0) qsort(r->ents, r->n, sizeof(*r->ents), list_entry_cmp); /* ents may be NULL */
        if (r->need > 0) r->n = list_majority(r->ents, r->n, r->need);
        for (size_t i = 0; i < r->n; i++) {
            list_entry_t *e = &r->ents[i];
            for (size_t j = 0; j < e->nholders; j++) name_daemons(r, &e->holders[j]);
            for (size_t j = 0; j < e->nwaiters; j++) name_daemons(r, &e->waiters[j]);
        }
        res->more = r->n > r->limit;
        for (size_t i = 0; i < r->nnodes; i++)
            if (!r->nodes[i].done && !r->nodes[i].failed) res->more = 1;
        res->entries = r->ents;
        res->n = r->n > r->limit ? r->limit : r->n;
    }
    if (!r->cancelled) r->cb(r->data, res);
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}

/* Every command has come back: decide, and answer from the loop. */
static void maybe_finish(list_run_t *r) {
    if (r->pending > 0 || r->finishing) return;
    r->finishing = 1;
    size_t failed = 0;
    for (size_t i = 0; i < r->nnodes; i++) failed += r->nodes[i].failed;
    size_t ok = r->nnodes - failed;
    if (r->res.status == BACKEND_OK && r->nnodes == 0) {
        r->res.status = BACKEND_DOWN;
        snprintf(r->res.error, sizeof(r->res.error), "no redis node known yet");
    } else if (failed > 0 && (r->need == 0 || ok < r->need)) {
        r->res.status = r->first_status;
    }
    uv_timer_start(&r->timer, on_timer, 0, 0);
}

static void node_failed(lnode_t *ln, backend_status_t st, const char *why) {
    list_run_t *r = ln->run;
    ln->failed = 1;
    ln->done = 1;
    if (r->res.error[0] == '\0') {
        r->first_status = st;
        int k = snprintf(r->res.error, sizeof(r->res.error), "%s: ", node_label(ln->nd));
        if (k > 0 && (size_t)k < sizeof(r->res.error))
            snprintf(r->res.error + k, sizeof(r->res.error) - (size_t)k, "%.*s",
                     (int)(sizeof(r->res.error) - (size_t)k - 1), why);
    }
}

/* Enough found: no node scans on. */
static int enough(const list_run_t *r, const lnode_t *ln) {
    return r->need > 0 ? ln->found > r->limit : r->n > r->limit;
}

static void on_describe(void *data, redisReply *reply, const char *error) {
    lnode_t *ln = data;
    list_run_t *r = ln->run;
    r->pending--;
    if (error != NULL) {
        node_failed(ln, BACKEND_DOWN, error);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        node_failed(ln, BACKEND_FAILED, reply->str);
    } else if (reply->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < reply->elements; i++) {
            if (r->n == r->cap) {
                size_t nc = r->cap ? r->cap * 2 : 64;
                list_entry_t *ne = realloc(r->ents, nc * sizeof(*ne));
                if (ne == NULL) {
                    node_failed(ln, BACKEND_FAILED, "out of memory");
                    break;
                }
                r->ents = ne;
                r->cap = nc;
            }
            if (entry_of(r, reply->element[i], &r->ents[r->n]) == 0) {
                r->n++;
                ln->found++;
            }
        }
    }
    if (ln->failed) {
        /* nothing more from this node */
    } else if (ln->next < ln->npage && !r->cancelled && !enough(r, ln)) {
        describe_next(ln); /* the rest of the page */
    } else if (!ln->done) {
        scan_next(ln);
    }
    maybe_finish(r);
}

/* Describes the page's next LIST_DESCRIBE_MAX keys (at least one is left). */
/* One command of the run to ln's node; 0, or -1 with ln failed as down
 * (cb never fires then). */
static int node_send(lnode_t *ln, int argc, const char **argv, const size_t *argl, resp_reply_cb cb) {
    if (node_command(ln->nd, argc, argv, argl, cb, ln) != 0) {
        char why[BACKEND_ERR_LEN];
        node_why_down(ln->nd, why, sizeof(why));
        node_failed(ln, BACKEND_DOWN, why);
        return -1;
    }
    ln->run->pending++;
    return 0;
}

static void describe_next(lnode_t *ln) {
    const char *argv[5 + LIST_DESCRIBE_MAX];
    size_t argl[5 + LIST_DESCRIBE_MAX];
    char hmax[8], wmax[8];
    snprintf(hmax, sizeof(hmax), "%d", LIST_HOLDERS_MAX);
    snprintf(wmax, sizeof(wmax), "%d", LIST_WAITERS_MAX);
    argv[0] = "EVAL";
    argv[1] = scripts_list_lua;
    argv[2] = "0";
    argv[3] = hmax;
    argv[4] = wmax;
    for (int i = 0; i < 5; i++) argl[i] = strlen(argv[i]);
    size_t nk = 0;
    for (; ln->next < ln->npage && nk < LIST_DESCRIBE_MAX; ln->next++, nk++) {
        argv[5 + nk] = ln->page + ln->offs[ln->next];
        argl[5 + nk] = ln->lens[ln->next];
    }
    node_send(ln, (int)(5 + nk), argv, argl, on_describe);
}

static void on_scan(void *data, redisReply *reply, const char *error) {
    lnode_t *ln = data;
    list_run_t *r = ln->run;
    r->pending--;
    if (error != NULL) {
        node_failed(ln, BACKEND_DOWN, error);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        node_failed(ln, BACKEND_FAILED, reply->str);
    } else if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
               reply->element[0]->type != REDIS_REPLY_STRING ||
               reply->element[1]->type != REDIS_REPLY_ARRAY ||
               reply->element[0]->len >= sizeof(ln->cursor)) {
        node_failed(ln, BACKEND_FAILED, "SCAN's reply cannot be read");
    } else {
        memcpy(ln->cursor, reply->element[0]->str, reply->element[0]->len);
        ln->cursor[reply->element[0]->len] = '\0';
        if (strcmp(ln->cursor, "0") == 0) ln->done = 1;
        const redisReply *keys = reply->element[1];
        size_t bytes = 0;
        for (size_t i = 0; i < keys->elements; i++)
            if (keys->element[i]->type == REDIS_REPLY_STRING) bytes += keys->element[i]->len;
        page_free(ln);
        ln->page = malloc(bytes + 1);
        ln->offs = malloc((keys->elements + 1) * sizeof(*ln->offs));
        ln->lens = malloc((keys->elements + 1) * sizeof(*ln->lens));
        if (ln->page == NULL || ln->offs == NULL || ln->lens == NULL) {
            node_failed(ln, BACKEND_FAILED, "out of memory");
        } else {
            size_t at = 0;
            for (size_t i = 0; i < keys->elements; i++) {
                const redisReply *k = keys->element[i];
                const char *name;
                size_t len;
                if (k->type != REDIS_REPLY_STRING) continue;
                if (!list_key_name(k->str, k->len, r->b->prefix, &name, &len)) continue;
                /* Answered (the deadline) or cancelled: data may be gone. */
                if (r->cancelled) break;
                if (r->keep && !r->keep(r->data, name, len)) continue;
                memcpy(ln->page + at, k->str, k->len);
                ln->offs[ln->npage] = at;
                ln->lens[ln->npage++] = k->len;
                at += k->len;
            }
            if (ln->npage > 0 && !r->cancelled) describe_next(ln);
        }
        if (ln->npage == 0 && !ln->failed && !ln->done) scan_next(ln);
    }
    maybe_finish(r);
}

static void scan_next(lnode_t *ln) {
    list_run_t *r = ln->run;
    if (r->cancelled || enough(r, ln)) {
        ln->done = ln->done || strcmp(ln->cursor, "0") == 0;
        if (enough(r, ln)) r->res.more = 1;
        return;
    }
    if (++ln->rounds > LIST_SCAN_ROUNDS_MAX) {
        node_failed(ln, BACKEND_FAILED,
                    "SCAN did not come back to cursor 0 within LIST_SCAN_ROUNDS_MAX calls");
        return;
    }
    char count[16];
    snprintf(count, sizeof(count), "%d", LIST_SCAN_COUNT);
    const char *argv[6] = {"SCAN", ln->cursor, "MATCH", r->match, "COUNT", count};
    size_t argl[6];
    for (int i = 0; i < 6; i++) argl[i] = strlen(argv[i]);
    argl[3] = r->mlen;
    node_send(ln, 6, argv, argl, on_scan);
}

static void on_registry(void *data, redisReply *reply, const char *error) {
    lnode_t *ln = data;
    list_run_t *r = ln->run;
    r->pending--;
    /* Errors are not the listing's: a Cluster node that does not serve the
     * registry's slot answers MOVED, and the holders stay unnamed. */
    if (error == NULL && reply->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < reply->elements && r->ndaemons < LIST_DAEMONS_MAX; i += 2) {
            const redisReply *u = reply->element[i], *v = reply->element[i + 1];
            if (u->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
                u->len >= BACKEND_UUID_MAX)
                continue;
            ldaemon_t *d = &r->daemons[r->ndaemons];
            memcpy(d->uuid, u->str, u->len);
            d->uuid[u->len] = '\0';
            list_registry_entry(v->str, v->len, d->host, sizeof(d->host), &d->dpid);
            if (d->dpid > 0) r->ndaemons++;
        }
    maybe_finish(r);
}

list_run_t *backend_list(backend_t *b, const char *pattern, size_t plen, size_t limit,
                         list_keep_cb keep, list_cb cb, void *data) {
    list_run_t *r = calloc(1, sizeof(*r));
    if (r == NULL) return NULL;
    r->b = b;
    r->cb = cb;
    r->keep = keep;
    r->data = data;
    r->limit = limit;
    r->mlen = list_match(r->match, sizeof(r->match), b->prefix, pattern, plen);
    uv_timer_init(b->loop, &r->timer);
    r->timer.data = r;
    r->deadline_ms = (uint64_t)LIST_DEADLINE_TIMEOUTS * b->conf->command_timeout_ms;
    uv_timer_start(&r->timer, on_timer, r->deadline_ms, 0);
    node_t *nds[LIST_NODES_MAX];
    r->nnodes = b->type->scan_nodes ? b->type->scan_nodes(b, nds, LIST_NODES_MAX, &r->need) : 0;
    char reg[CONF_PREFIX_MAX + sizeof(KEYS_REGISTRY)];
    snprintf(reg, sizeof(reg), "%s%s", b->prefix, KEYS_REGISTRY);
    for (size_t i = 0; i < r->nnodes; i++) {
        lnode_t *ln = &r->nodes[i];
        ln->run = r;
        ln->nd = nds[i];
        snprintf(ln->cursor, sizeof(ln->cursor), "0");
        const char *argv[2] = {"HGETALL", reg};
        if (node_send(ln, 2, argv, NULL, on_registry) == 0) scan_next(ln);
    }
    maybe_finish(r);
    return r;
}

void list_cancel(list_run_t *r) {
    r->cancelled = 1;
}
