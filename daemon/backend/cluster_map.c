/* The Redis Cluster slot map, pure: CLUSTER SHARDS / SLOTS replies read into a map, MOVED/ASK read.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/cluster_map.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PORT_MAX 65535

/* Writes why into err; -1. */
__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen,
                                                      const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (errlen > 0) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

void cluster_map_init(cluster_map_t *m) {
    m->n = 0;
    memset(m->owner, 0xff, sizeof(m->owner));
}

int cluster_map_owner(const cluster_map_t *m, unsigned slot) {
    if (slot >= KEYS_SLOTS || m->owner[slot] == CLUSTER_MAP_NONE) return -1;
    return m->owner[slot];
}

size_t cluster_map_covered(const cluster_map_t *m) {
    size_t n = 0;
    for (unsigned s = 0; s < KEYS_SLOTS; s++) n += m->owner[s] != CLUSTER_MAP_NONE;
    return n;
}

/* The value of field name in m, a RESP2 map (a flat array of name, value
 * pairs); NULL if it has none. */
static const redisReply *field(const redisReply *m, const char *name) {
    if (m == NULL || m->type != REDIS_REPLY_ARRAY) return NULL;
    for (size_t i = 0; i + 1 < m->elements; i += 2)
        if (m->element[i]->type == REDIS_REPLY_STRING && strcmp(m->element[i]->str, name) == 0)
            return m->element[i + 1];
    return NULL;
}

/* s[0 .. len) as a number up to max: digits only, at least one, nothing
 * else. 0, or -1. */
static int parse_num(const char *s, size_t len, unsigned long long max, unsigned long long *out) {
    unsigned long long v = 0;
    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* The integer field name of m into *v: an integer, or a string of digits.
 * 0; -1 when m has none (or one of another type); -2 with why in err
 * when it is a string that is no number. */
static int field_int(const redisReply *m, const char *name, long long *v, char *err,
                     size_t errlen) {
    const redisReply *f = field(m, name);
    unsigned long long u;
    if (f == NULL) return -1;
    if (f->type == REDIS_REPLY_INTEGER) {
        *v = f->integer;
        return 0;
    }
    if (f->type != REDIS_REPLY_STRING) return -1;
    if (parse_num(f->str, f->len, LLONG_MAX, &u) != 0) {
        fail(err, errlen, "%s \"%.20s%s\" is not a number", name, f->str,
             f->len > 20 ? "..." : "");
        return -2;
    }
    *v = (long long)u;
    return 0;
}

/* A node's port: its tls-port with tls, if it has one above 0, else its
 * port; -1 if none. 0, or -1 with why in err (a field that is no number). */
static int node_port(const redisReply *nd, int tls, long long *port, char *err, size_t errlen) {
    int rc = -1;
    *port = -1;
    if (tls && (rc = field_int(nd, "tls-port", port, err, errlen)) == -2) return -1;
    if (rc != 0 || *port <= 0) {
        *port = -1;
        if (field_int(nd, "port", port, err, errlen) == -2) return -1;
    }
    return 0;
}

/* Index of host:port in m, added if new; -1 with why in err when m is full
 * or the address is bad. */
static int map_addr(cluster_map_t *m, const char *host, size_t hlen, long long port, char *err,
                    size_t errlen) {
    if (port <= 0 || port > PORT_MAX)
        return fail(err, errlen, "port %lld of %.*s out of range", port,
                    (int)(hlen > 60 ? 60 : hlen), host);
    if (hlen == 0 || hlen >= sizeof(m->addr[0].host))
        return fail(err, errlen, "a host name of %zu bytes", hlen);
    for (size_t i = 0; i < m->n; i++)
        if (m->addr[i].port == port && strlen(m->addr[i].host) == hlen &&
            memcmp(m->addr[i].host, host, hlen) == 0)
            return (int)i;
    if (m->n == CLUSTER_MAP_NODES_MAX)
        return fail(err, errlen, "more than %d primaries", CLUSTER_MAP_NODES_MAX);
    cluster_map_addr_t *a = &m->addr[m->n];
    memset(a, 0, sizeof(*a));
    memcpy(a->host, host, hlen);
    a->port = (int)port;
    return (int)m->n++;
}

static int map_range(cluster_map_t *m, long long from, long long to, int owner) {
    if (from < 0 || to >= KEYS_SLOTS || from > to || owner < 0) return -1;
    for (long long s = from; s <= to; s++) m->owner[s] = (uint16_t)owner;
    return 0;
}

/* CLUSTER SHARDS: [["slots", [from, to, ...], "nodes", [{...}, ...]], ...]. */
int cluster_map_shards(cluster_map_t *m, const redisReply *r, const char *asked, int tls,
                       char *err, size_t errlen) {
    char why[CLUSTER_MAP_ERR_LEN];
    cluster_map_init(m);
    if (r->type != REDIS_REPLY_ARRAY) return fail(err, errlen, "CLUSTER SHARDS: not an array");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *sh = r->element[i], *slots = field(sh, "slots"),
                         *nodes = field(sh, "nodes");
        if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY ||
            nodes->type != REDIS_REPLY_ARRAY)
            return fail(err, errlen, "CLUSTER SHARDS: shard %zu: no slots or nodes array", i);
        if (slots->elements == 0) continue; /* a shard without slots */
        int owner = -1;
        for (size_t j = 0; j < nodes->elements && owner < 0; j++) {
            const redisReply *nd = nodes->element[j], *role = field(nd, "role");
            if (role == NULL || role->type != REDIS_REPLY_STRING || strcmp(role->str, "master") != 0)
                continue;
            const redisReply *host = field(nd, "endpoint");
            if (host == NULL || host->type != REDIS_REPLY_STRING || host->len == 0 ||
                strcmp(host->str, "?") == 0)
                host = field(nd, "ip");
            if (host == NULL || host->type != REDIS_REPLY_STRING)
                return fail(err, errlen, "CLUSTER SHARDS: shard %zu node %zu: no ip", i, j);
            const char *h = host->str;
            size_t hlen = host->len;
            if (hlen == 0 || strcmp(h, "?") == 0) {
                h = asked;
                hlen = strlen(asked);
            }
            long long port;
            if (node_port(nd, tls, &port, why, sizeof(why)) == 0)
                owner = map_addr(m, h, hlen, port, why, sizeof(why));
            if (owner < 0)
                return fail(err, errlen, "CLUSTER SHARDS: shard %zu node %zu (%.60s): %s", i, j,
                            h, why);
        }
        if (owner < 0) continue; /* no primary named: those slots stay unknown */
        for (size_t j = 0; j + 1 < slots->elements; j += 2)
            if (slots->element[j]->type != REDIS_REPLY_INTEGER ||
                slots->element[j + 1]->type != REDIS_REPLY_INTEGER ||
                map_range(m, slots->element[j]->integer, slots->element[j + 1]->integer, owner) != 0)
                return fail(err, errlen, "CLUSTER SHARDS: shard %zu: a bad slot range", i);
    }
    return 0;
}

/* CLUSTER SLOTS: [[from, to, [host, port, id, ...], replicas...], ...]. */
int cluster_map_slots(cluster_map_t *m, const redisReply *r, const char *asked, char *err,
                      size_t errlen) {
    char why[CLUSTER_MAP_ERR_LEN];
    cluster_map_init(m);
    if (r->type != REDIS_REPLY_ARRAY) return fail(err, errlen, "CLUSTER SLOTS: not an array");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
            return fail(err, errlen, "CLUSTER SLOTS: range %zu: not [from, to, [host, port]]",
                        i);
        const redisReply *p = e->element[2];
        const char *host = p->element[0]->len > 0 ? p->element[0]->str : asked;
        int owner = map_addr(m, host, strlen(host), p->element[1]->integer, why, sizeof(why));
        if (owner < 0) return fail(err, errlen, "CLUSTER SLOTS: range %zu: %s", i, why);
        if (map_range(m, e->element[0]->integer, e->element[1]->integer, owner) != 0)
            return fail(err, errlen, "CLUSTER SLOTS: range %zu: a bad slot range", i);
    }
    return 0;
}

/* "MOVED 3999 127.0.0.1:6381": the slot and the address. */
cluster_map_redirect_t cluster_map_redirect(const char *err, unsigned *slot,
                                            cluster_map_addr_t *a) {
    cluster_map_redirect_t kind = strncmp(err, "MOVED ", 6) == 0 ? CLUSTER_MAP_MOVED
                                  : strncmp(err, "ASK ", 4) == 0 ? CLUSTER_MAP_ASK
                                                                 : CLUSTER_MAP_NO_REDIRECT;
    if (kind == CLUSTER_MAP_NO_REDIRECT) return kind;
    const char *sp = strchr(err, ' ') + 1, *end = strchr(sp, ' ');
    unsigned long long s, port;
    if (end == NULL || parse_num(sp, (size_t)(end - sp), KEYS_SLOTS - 1, &s) != 0)
        return CLUSTER_MAP_NO_REDIRECT;
    const char *hp = end + 1, *colon = strrchr(hp, ':');
    if (colon == NULL || colon == hp || (size_t)(colon - hp) >= sizeof(a->host))
        return CLUSTER_MAP_NO_REDIRECT;
    /* The port ends the error (or its line, or its first word). */
    if (parse_num(colon + 1, strcspn(colon + 1, " \n"), PORT_MAX, &port) != 0 || port == 0)
        return CLUSTER_MAP_NO_REDIRECT;
    memset(a, 0, sizeof(*a));
    if (hp[0] == '[' && colon[-1] == ']')
        snprintf(a->host, sizeof(a->host), "%.*s", (int)(colon - hp - 2), hp + 1);
    else
        snprintf(a->host, sizeof(a->host), "%.*s", (int)(colon - hp), hp);
    a->port = (int)port;
    *slot = (unsigned)s;
    return kind;
}
