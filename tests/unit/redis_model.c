/* An in-memory Redis for unit tests: its keyspace, its commands and the Lua that calls them.
 * SPDX-License-Identifier: MIT */
#include "redis_model.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RM_ARGS_MAX 1024   /* arguments of one command from a script */
#define RM_SCRIPTS_MAX 32  /* distinct scripts compiled */
#define RM_NUM_LEN 32      /* a number's text */

#define WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"
#define NOT_INT "ERR value is not an integer or out of range"
#define NOT_FLOAT "ERR value is not a valid float"
#define SYNTAX "ERR syntax error"

typedef enum { T_NONE = 0, T_STRING, T_HASH, T_LIST, T_SET, T_ZSET } rtype_t;

typedef struct str_s {
    char *p;
    size_t n;
} str_t;

/* An element: a hash's field (a) and value (b); a list's, set's or sorted
 * set's member (a) with its score. */
typedef struct item_s {
    str_t a, b;
    double score;
} item_t;

typedef struct rkey_s {
    str_t name;
    rtype_t type;
    int has_expiry;
    uint64_t expires_at;   /* on the clock, ms */
    str_t s;               /* a string's value */
    item_t *items;         /* the others' elements (a sorted set's by score, then member) */
    size_t n, cap;
} rkey_t;

struct rmodel_s {
    rmodel_clock_cb clock;
    rmodel_publish_cb publish;
    void *data;
    rkey_t **keys;
    size_t nkeys, cap;
    lua_State *L;
    struct {
        const char *text;
        int ref;
    } scripts[RM_SCRIPTS_MAX];
    size_t nscripts;
};

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) abort();
    return q;
}

static str_t str_dup(const char *p, size_t n) {
    str_t s = {xrealloc(NULL, n + 1), n};
    memcpy(s.p, p, n);
    s.p[n] = '\0';
    return s;
}

static int str_is(const str_t *s, const char *p, size_t n) {
    return s->n == n && memcmp(s->p, p, n) == 0;
}

static int str_cmp(const str_t *x, const str_t *y) {
    int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    if (c != 0) return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* ---- replies ------------------------------------------------------------- */

static redisReply *reply_new(int type) {
    redisReply *r = xrealloc(NULL, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->type = type;
    return r;
}

static redisReply *r_int(long long v) {
    redisReply *r = reply_new(REDIS_REPLY_INTEGER);
    r->integer = v;
    return r;
}

static redisReply *r_text(int type, const char *p, size_t n) {
    redisReply *r = reply_new(type);
    r->str = str_dup(p, n).p;
    r->len = n;
    return r;
}

static redisReply *r_bulk(const str_t *s) {
    return s ? r_text(REDIS_REPLY_STRING, s->p, s->n) : reply_new(REDIS_REPLY_NIL);
}

static redisReply *r_err(const char *text) {
    return r_text(REDIS_REPLY_ERROR, text, strlen(text));
}

static redisReply *r_ok(void) {
    return r_text(REDIS_REPLY_STATUS, "OK", 2);
}

static redisReply *r_array(size_t n) {
    redisReply *r = reply_new(REDIS_REPLY_ARRAY);
    r->elements = n;
    r->element = xrealloc(NULL, n * sizeof(r->element[0]));
    return r;
}

/* A score as Redis writes it: integers without a point. */
static redisReply *r_score(double d) {
    char num[RM_NUM_LEN];
    int n = snprintf(num, sizeof(num), "%.17g", d);
    return r_text(REDIS_REPLY_STRING, num, (size_t)n);
}

/* ---- numbers ---------------------------------------------------------------- */

static int parse_ll(const str_t *s, long long *out) {
    char buf[RM_NUM_LEN], *end;
    if (s->n == 0 || s->n >= sizeof(buf)) return -1;
    memcpy(buf, s->p, s->n);
    buf[s->n] = '\0';
    long long v = strtoll(buf, &end, 10);
    if (*end != '\0') return -1;
    *out = v;
    return 0;
}

static int parse_double(const str_t *s, double *out) {
    char buf[RM_NUM_LEN], *end;
    if (s->n == 0 || s->n >= sizeof(buf)) return -1;
    memcpy(buf, s->p, s->n);
    buf[s->n] = '\0';
    if (strcasecmp(buf, "+inf") == 0 || strcasecmp(buf, "inf") == 0) {
        *out = INFINITY;
        return 0;
    }
    if (strcasecmp(buf, "-inf") == 0) {
        *out = -INFINITY;
        return 0;
    }
    double v = strtod(buf, &end);
    if (*end != '\0' || isnan(v)) return -1;
    *out = v;
    return 0;
}

/* ---- the keyspace -------------------------------------------------------------- */

static uint64_t now_ms(const rmodel_t *m) {
    return m->clock(m->data);
}

static void key_free(rkey_t *k) {
    free(k->name.p);
    free(k->s.p);
    for (size_t i = 0; i < k->n; i++) {
        free(k->items[i].a.p);
        free(k->items[i].b.p);
    }
    free(k->items);
    free(k);
}

static void key_remove(rmodel_t *m, size_t i) {
    key_free(m->keys[i]);
    m->keys[i] = m->keys[--m->nkeys];
}

/* The key, or NULL; one whose time is up is gone (Redis's lazy expiry). */
static rkey_t *key_find(rmodel_t *m, const str_t *name) {
    for (size_t i = 0; i < m->nkeys; i++) {
        rkey_t *k = m->keys[i];
        if (!str_is(&k->name, name->p, name->n)) continue;
        if (k->has_expiry && k->expires_at <= now_ms(m)) {
            key_remove(m, i);
            return NULL;
        }
        return k;
    }
    return NULL;
}

static int key_del(rmodel_t *m, const str_t *name) {
    if (key_find(m, name) == NULL) return 0;
    for (size_t i = 0; i < m->nkeys; i++)
        if (str_is(&m->keys[i]->name, name->p, name->n)) {
            key_remove(m, i);
            return 1;
        }
    return 0;
}

static rkey_t *key_add(rmodel_t *m, const str_t *name, rtype_t type) {
    rkey_t *k = xrealloc(NULL, sizeof(*k));
    memset(k, 0, sizeof(*k));
    k->name = str_dup(name->p, name->n);
    k->type = type;
    if (m->nkeys == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->keys = xrealloc(m->keys, m->cap * sizeof(m->keys[0]));
    }
    m->keys[m->nkeys++] = k;
    return k;
}

/* The key of type for a read: *k NULL when there is none; -1 when it is
 * another type (WRONGTYPE). */
static int lookup(rmodel_t *m, const str_t *name, rtype_t type, rkey_t **k) {
    *k = key_find(m, name);
    return *k != NULL && (*k)->type != type ? -1 : 0;
}

/* The key of type for a write, made empty when there is none; NULL when
 * it is another type. */
static rkey_t *lookup_make(rmodel_t *m, const str_t *name, rtype_t type) {
    rkey_t *k = key_find(m, name);
    if (k == NULL) return key_add(m, name, type);
    return k->type == type ? k : NULL;
}

/* An aggregate left empty goes, as in Redis. */
static void drop_if_empty(rmodel_t *m, rkey_t *k) {
    if (k != NULL && k->type != T_STRING && k->n == 0) key_del(m, &k->name);
}

static void string_set(rkey_t *k, const str_t *v) {
    free(k->s.p);
    k->s = str_dup(v->p, v->n);
}

static void items_insert(rkey_t *k, size_t at, const str_t *a, const str_t *b, double score) {
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 8;
        k->items = xrealloc(k->items, k->cap * sizeof(k->items[0]));
    }
    memmove(&k->items[at + 1], &k->items[at], (k->n - at) * sizeof(k->items[0]));
    k->items[at].a = str_dup(a->p, a->n);
    k->items[at].b = b ? str_dup(b->p, b->n) : (str_t){NULL, 0};
    k->items[at].score = score;
    k->n++;
}

static void items_remove(rkey_t *k, size_t at) {
    free(k->items[at].a.p);
    free(k->items[at].b.p);
    memmove(&k->items[at], &k->items[at + 1], (k->n - at - 1) * sizeof(k->items[0]));
    k->n--;
}

static long long items_find(const rkey_t *k, const str_t *a) {
    for (size_t i = 0; k != NULL && i < k->n; i++)
        if (str_is(&k->items[i].a, a->p, a->n)) return (long long)i;
    return -1;
}

/* Redis's range arithmetic: [*start, *stop] within n, or 0 when empty. */
static int range(long long n, long long *start, long long *stop) {
    if (*start < 0) *start += n;
    if (*stop < 0) *stop += n;
    if (*start < 0) *start = 0;
    if (*stop >= n) *stop = n - 1;
    return *start <= *stop && *start < n;
}

/* ---- commands --------------------------------------------------------------------- */

typedef redisReply *(*cmd_fn)(rmodel_t *m, size_t argc, const str_t *argv);

static redisReply *c_del(rmodel_t *m, size_t argc, const str_t *argv) {
    long long n = 0;
    for (size_t i = 1; i < argc; i++) n += key_del(m, &argv[i]);
    return r_int(n);
}

static redisReply *c_exists(rmodel_t *m, size_t argc, const str_t *argv) {
    long long n = 0;
    for (size_t i = 1; i < argc; i++) n += key_find(m, &argv[i]) != NULL;
    return r_int(n);
}

static redisReply *c_type(rmodel_t *m, size_t argc, const str_t *argv) {
    static const char *const names[] = {"none", "string", "hash", "list", "set", "zset"};
    (void)argc;
    rkey_t *k = key_find(m, &argv[1]);
    const char *t = names[k ? k->type : T_NONE];
    return r_text(REDIS_REPLY_STATUS, t, strlen(t));
}

static redisReply *c_pexpire(rmodel_t *m, size_t argc, const str_t *argv) {
    long long ms;
    (void)argc;
    if (parse_ll(&argv[2], &ms) != 0) return r_err(NOT_INT);
    rkey_t *k = key_find(m, &argv[1]);
    if (k == NULL) return r_int(0);
    if (ms <= 0) { /* a time in the past deletes the key */
        key_del(m, &argv[1]);
        return r_int(1);
    }
    k->has_expiry = 1;
    k->expires_at = now_ms(m) + (uint64_t)ms;
    return r_int(1);
}

static redisReply *c_pttl(rmodel_t *m, size_t argc, const str_t *argv) {
    (void)argc;
    rkey_t *k = key_find(m, &argv[1]);
    if (k == NULL) return r_int(-2);
    if (!k->has_expiry) return r_int(-1);
    return r_int((long long)(k->expires_at - now_ms(m)));
}

static redisReply *c_persist(rmodel_t *m, size_t argc, const str_t *argv) {
    (void)argc;
    rkey_t *k = key_find(m, &argv[1]);
    int had = k != NULL && k->has_expiry;
    if (k != NULL) k->has_expiry = 0;
    return r_int(had);
}

static redisReply *c_time(rmodel_t *m, size_t argc, const str_t *argv) {
    char num[RM_NUM_LEN];
    uint64_t t = now_ms(m);
    (void)argc;
    (void)argv;
    redisReply *r = r_array(2);
    int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)(t / 1000));
    r->element[0] = r_text(REDIS_REPLY_STRING, num, (size_t)n);
    n = snprintf(num, sizeof(num), "%llu", (unsigned long long)(t % 1000 * 1000));
    r->element[1] = r_text(REDIS_REPLY_STRING, num, (size_t)n);
    return r;
}

static redisReply *c_publish(rmodel_t *m, size_t argc, const str_t *argv) {
    (void)argc;
    if (m->publish == NULL) return r_int(0);
    return r_int(m->publish(m->data, argv[1].p, argv[1].n, argv[2].p, argv[2].n));
}

/* ---- strings ---- */

static redisReply *c_get(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_STRING, &k) != 0) return r_err(WRONGTYPE);
    return r_bulk(k ? &k->s : NULL);
}

/* SET key value [PX ms] [NX]; SET drops an expiry the key had. */
static redisReply *c_set(rmodel_t *m, size_t argc, const str_t *argv) {
    long long px = -1;
    int nx = 0;
    for (size_t i = 3; i < argc; i++) {
        if (str_is(&argv[i], "px", 2) || str_is(&argv[i], "PX", 2)) {
            if (i + 1 >= argc || parse_ll(&argv[++i], &px) != 0 || px <= 0) return r_err(SYNTAX);
        } else if (str_is(&argv[i], "nx", 2) || str_is(&argv[i], "NX", 2)) {
            nx = 1;
        } else {
            return r_err(SYNTAX);
        }
    }
    if (nx && key_find(m, &argv[1]) != NULL) return reply_new(REDIS_REPLY_NIL);
    key_del(m, &argv[1]);
    rkey_t *k = key_add(m, &argv[1], T_STRING);
    string_set(k, &argv[2]);
    if (px > 0) {
        k->has_expiry = 1;
        k->expires_at = now_ms(m) + (uint64_t)px;
    }
    return r_ok();
}

static redisReply *c_getset(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_STRING, &k) != 0) return r_err(WRONGTYPE);
    redisReply *r = r_bulk(k ? &k->s : NULL);
    key_del(m, &argv[1]);
    string_set(key_add(m, &argv[1], T_STRING), &argv[2]);
    return r;
}

static redisReply *c_mget(rmodel_t *m, size_t argc, const str_t *argv) {
    redisReply *r = r_array(argc - 1);
    for (size_t i = 1; i < argc; i++) {
        rkey_t *k = key_find(m, &argv[i]);
        r->element[i - 1] = r_bulk(k && k->type == T_STRING ? &k->s : NULL);
    }
    return r;
}

static redisReply *c_mset(rmodel_t *m, size_t argc, const str_t *argv) {
    if (argc % 2 != 1) return r_err(SYNTAX);
    for (size_t i = 1; i + 1 < argc; i += 2) {
        key_del(m, &argv[i]);
        string_set(key_add(m, &argv[i], T_STRING), &argv[i + 1]);
    }
    return r_ok();
}

static redisReply *incr(rmodel_t *m, const str_t *name, long long by) {
    rkey_t *k;
    long long v = 0;
    char num[RM_NUM_LEN];
    if (lookup(m, name, T_STRING, &k) != 0) return r_err(WRONGTYPE);
    if (k != NULL && parse_ll(&k->s, &v) != 0) return r_err(NOT_INT);
    if (k == NULL) k = key_add(m, name, T_STRING);
    v += by;
    int n = snprintf(num, sizeof(num), "%lld", v);
    string_set(k, &(str_t){num, (size_t)n});
    return r_int(v);
}

static redisReply *c_incrby(rmodel_t *m, size_t argc, const str_t *argv) {
    long long by;
    (void)argc;
    if (parse_ll(&argv[2], &by) != 0) return r_err(NOT_INT);
    return incr(m, &argv[1], by);
}

static redisReply *c_decrby(rmodel_t *m, size_t argc, const str_t *argv) {
    long long by;
    (void)argc;
    if (parse_ll(&argv[2], &by) != 0) return r_err(NOT_INT);
    return incr(m, &argv[1], -by);
}

static redisReply *c_decr(rmodel_t *m, size_t argc, const str_t *argv) {
    (void)argc;
    return incr(m, &argv[1], -1);
}

/* ---- hashes ---- */

static redisReply *c_hset(rmodel_t *m, size_t argc, const str_t *argv) {
    if (argc < 4 || argc % 2 != 0) return r_err(SYNTAX);
    rkey_t *k = lookup_make(m, &argv[1], T_HASH);
    if (k == NULL) return r_err(WRONGTYPE);
    long long added = 0;
    for (size_t i = 2; i + 1 < argc; i += 2) {
        long long at = items_find(k, &argv[i]);
        if (at >= 0) {
            free(k->items[at].b.p);
            k->items[at].b = str_dup(argv[i + 1].p, argv[i + 1].n);
        } else {
            items_insert(k, k->n, &argv[i], &argv[i + 1], 0);
            added++;
        }
    }
    return r_int(added);
}

static redisReply *c_hget(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    long long at = items_find(k, &argv[2]);
    return r_bulk(at >= 0 ? &k->items[at].b : NULL);
}

static redisReply *c_hmget(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    redisReply *r = r_array(argc - 2);
    for (size_t i = 2; i < argc; i++) {
        long long at = items_find(k, &argv[i]);
        r->element[i - 2] = r_bulk(at >= 0 ? &k->items[at].b : NULL);
    }
    return r;
}

static redisReply *c_hexists(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    return r_int(items_find(k, &argv[2]) >= 0);
}

static redisReply *c_hdel(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long n = 0;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    for (size_t i = 2; k != NULL && i < argc; i++) {
        long long at = items_find(k, &argv[i]);
        if (at < 0) continue;
        items_remove(k, (size_t)at);
        n++;
    }
    drop_if_empty(m, k);
    return r_int(n);
}

static redisReply *c_hlen(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    return r_int(k ? (long long)k->n : 0);
}

static redisReply *c_hkeys(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    size_t n = k ? k->n : 0;
    redisReply *r = r_array(n);
    for (size_t i = 0; i < n; i++) r->element[i] = r_bulk(&k->items[i].a);
    return r;
}

static redisReply *c_hgetall(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_HASH, &k) != 0) return r_err(WRONGTYPE);
    size_t n = k ? k->n : 0;
    redisReply *r = r_array(2 * n);
    for (size_t i = 0; i < n; i++) {
        r->element[2 * i] = r_bulk(&k->items[i].a);
        r->element[2 * i + 1] = r_bulk(&k->items[i].b);
    }
    return r;
}

static redisReply *c_hincrby(rmodel_t *m, size_t argc, const str_t *argv) {
    long long by, v = 0;
    char num[RM_NUM_LEN];
    (void)argc;
    if (parse_ll(&argv[3], &by) != 0) return r_err(NOT_INT);
    rkey_t *k = lookup_make(m, &argv[1], T_HASH);
    if (k == NULL) return r_err(WRONGTYPE);
    long long at = items_find(k, &argv[2]);
    if (at >= 0 && parse_ll(&k->items[at].b, &v) != 0) {
        drop_if_empty(m, k);
        return r_err("ERR hash value is not an integer");
    }
    v += by;
    int n = snprintf(num, sizeof(num), "%lld", v);
    str_t s = {num, (size_t)n};
    if (at >= 0) {
        free(k->items[at].b.p);
        k->items[at].b = str_dup(num, (size_t)n);
    } else {
        items_insert(k, k->n, &argv[2], &s, 0);
    }
    return r_int(v);
}

/* ---- lists ---- */

static redisReply *c_rpush(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k = lookup_make(m, &argv[1], T_LIST);
    if (k == NULL) return r_err(WRONGTYPE);
    for (size_t i = 2; i < argc; i++) items_insert(k, k->n, &argv[i], NULL, 0);
    return r_int((long long)k->n);
}

static redisReply *c_lpop(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_LIST, &k) != 0) return r_err(WRONGTYPE);
    if (k == NULL) return reply_new(REDIS_REPLY_NIL);
    redisReply *r = r_bulk(&k->items[0].a);
    items_remove(k, 0);
    drop_if_empty(m, k);
    return r;
}

static redisReply *c_llen(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_LIST, &k) != 0) return r_err(WRONGTYPE);
    return r_int(k ? (long long)k->n : 0);
}

static redisReply *c_lindex(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long i;
    (void)argc;
    if (parse_ll(&argv[2], &i) != 0) return r_err(NOT_INT);
    if (lookup(m, &argv[1], T_LIST, &k) != 0) return r_err(WRONGTYPE);
    long long n = k ? (long long)k->n : 0;
    if (i < 0) i += n;
    return r_bulk(i >= 0 && i < n ? &k->items[i].a : NULL);
}

static redisReply *c_lrange(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long start, stop;
    (void)argc;
    if (parse_ll(&argv[2], &start) != 0 || parse_ll(&argv[3], &stop) != 0) return r_err(NOT_INT);
    if (lookup(m, &argv[1], T_LIST, &k) != 0) return r_err(WRONGTYPE);
    if (k == NULL || !range((long long)k->n, &start, &stop)) return r_array(0);
    redisReply *r = r_array((size_t)(stop - start + 1));
    for (long long i = start; i <= stop; i++) r->element[i - start] = r_bulk(&k->items[i].a);
    return r;
}

/* LREM key count value: count 0 every one, > 0 from the head, < 0 from the tail. */
static redisReply *c_lrem(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long count, n = 0;
    (void)argc;
    if (parse_ll(&argv[2], &count) != 0) return r_err(NOT_INT);
    if (lookup(m, &argv[1], T_LIST, &k) != 0) return r_err(WRONGTYPE);
    if (k == NULL) return r_int(0);
    long long limit = count < 0 ? -count : count;
    if (count >= 0) {
        for (size_t i = 0; i < k->n && (limit == 0 || n < limit);) {
            if (str_is(&k->items[i].a, argv[3].p, argv[3].n)) {
                items_remove(k, i);
                n++;
            } else {
                i++;
            }
        }
    } else {
        for (size_t i = k->n; i-- > 0 && n < limit;)
            if (str_is(&k->items[i].a, argv[3].p, argv[3].n)) {
                items_remove(k, i);
                n++;
            }
    }
    drop_if_empty(m, k);
    return r_int(n);
}

/* ---- sets ---- */

static redisReply *c_sadd(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k = lookup_make(m, &argv[1], T_SET);
    long long n = 0;
    if (k == NULL) return r_err(WRONGTYPE);
    for (size_t i = 2; i < argc; i++) {
        if (items_find(k, &argv[i]) >= 0) continue;
        items_insert(k, k->n, &argv[i], NULL, 0);
        n++;
    }
    return r_int(n);
}

static redisReply *c_srem(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long n = 0;
    if (lookup(m, &argv[1], T_SET, &k) != 0) return r_err(WRONGTYPE);
    for (size_t i = 2; k != NULL && i < argc; i++) {
        long long at = items_find(k, &argv[i]);
        if (at < 0) continue;
        items_remove(k, (size_t)at);
        n++;
    }
    drop_if_empty(m, k);
    return r_int(n);
}

static redisReply *c_sismember(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_SET, &k) != 0) return r_err(WRONGTYPE);
    return r_int(items_find(k, &argv[2]) >= 0);
}

static redisReply *c_scard(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_SET, &k) != 0) return r_err(WRONGTYPE);
    return r_int(k ? (long long)k->n : 0);
}

/* ---- sorted sets ---- */

static int zless(const item_t *x, double score, const str_t *member) {
    if (x->score != score) return x->score < score;
    return str_cmp(&x->a, member) < 0;
}

static redisReply *c_zadd(rmodel_t *m, size_t argc, const str_t *argv) {
    if (argc < 4 || argc % 2 != 0) return r_err(SYNTAX);
    for (size_t i = 2; i < argc; i += 2) {
        double d;
        if (parse_double(&argv[i], &d) != 0) return r_err(NOT_FLOAT);
    }
    rkey_t *k = lookup_make(m, &argv[1], T_ZSET);
    long long added = 0;
    if (k == NULL) return r_err(WRONGTYPE);
    for (size_t i = 2; i < argc; i += 2) {
        double score;
        parse_double(&argv[i], &score);
        long long at = items_find(k, &argv[i + 1]);
        if (at >= 0) items_remove(k, (size_t)at);
        else added++;
        size_t pos = 0;
        while (pos < k->n && zless(&k->items[pos], score, &argv[i + 1])) pos++;
        items_insert(k, pos, &argv[i + 1], NULL, score);
    }
    return r_int(added);
}

static redisReply *c_zrem(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long n = 0;
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    for (size_t i = 2; k != NULL && i < argc; i++) {
        long long at = items_find(k, &argv[i]);
        if (at < 0) continue;
        items_remove(k, (size_t)at);
        n++;
    }
    drop_if_empty(m, k);
    return r_int(n);
}

static redisReply *c_zscore(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    long long at = items_find(k, &argv[2]);
    return at >= 0 ? r_score(k->items[at].score) : reply_new(REDIS_REPLY_NIL);
}

static redisReply *c_zcard(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    (void)argc;
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    return r_int(k ? (long long)k->n : 0);
}

/* The members whose scores are in [min, max] ('(' before a bound: open). */
static int score_bound(const str_t *s, double *v, int *open) {
    *open = s->n > 0 && s->p[0] == '(';
    str_t t = {s->p + *open, s->n - (size_t)*open};
    return parse_double(&t, v);
}

static int in_bounds(double x, double min, int omin, double max, int omax) {
    return (omin ? x > min : x >= min) && (omax ? x < max : x <= max);
}

static redisReply *c_zcount(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    double min, max;
    int omin, omax;
    long long n = 0;
    (void)argc;
    if (score_bound(&argv[2], &min, &omin) != 0 || score_bound(&argv[3], &max, &omax) != 0)
        return r_err("ERR min or max is not a float");
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    for (size_t i = 0; k != NULL && i < k->n; i++)
        n += in_bounds(k->items[i].score, min, omin, max, omax);
    return r_int(n);
}

/* The members at idx[0..n) (with their scores when scores), as an array. */
static redisReply *members(const rkey_t *k, const size_t *idx, size_t n, int scores) {
    redisReply *r = r_array(n * (scores ? 2 : 1));
    for (size_t i = 0, j = 0; i < n; i++) {
        r->element[j++] = r_bulk(&k->items[idx[i]].a);
        if (scores) r->element[j++] = r_score(k->items[idx[i]].score);
    }
    return r;
}

static redisReply *c_zrange(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    long long start, stop;
    int scores = argc > 4 && strncasecmp(argv[4].p, "withscores", argv[4].n) == 0 &&
                 argv[4].n == 10;
    if (parse_ll(&argv[2], &start) != 0 || parse_ll(&argv[3], &stop) != 0) return r_err(NOT_INT);
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    if (k == NULL || !range((long long)k->n, &start, &stop)) return r_array(0);
    size_t n = (size_t)(stop - start + 1), *idx = xrealloc(NULL, n * sizeof(*idx));
    for (size_t i = 0; i < n; i++) idx[i] = (size_t)start + i;
    redisReply *r = members(k, idx, n, scores);
    free(idx);
    return r;
}

/* ZPOPMIN key: the first member and its score, removed ({} when none). */
static redisReply *c_zpopmin(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    size_t first = 0;
    (void)argc;
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    if (k == NULL || k->n == 0) return r_array(0);
    redisReply *r = members(k, &first, 1, 1);
    items_remove(k, 0);
    drop_if_empty(m, k);
    return r;
}

/* ZRANGEBYSCORE key min max [LIMIT offset count] */
static redisReply *c_zrangebyscore(rmodel_t *m, size_t argc, const str_t *argv) {
    rkey_t *k;
    double min, max;
    int omin, omax;
    long long off = 0, count = -1;
    if (score_bound(&argv[2], &min, &omin) != 0 || score_bound(&argv[3], &max, &omax) != 0)
        return r_err("ERR min or max is not a float");
    if (argc == 7 && (str_is(&argv[4], "limit", 5) || str_is(&argv[4], "LIMIT", 5))) {
        if (parse_ll(&argv[5], &off) != 0 || parse_ll(&argv[6], &count) != 0) return r_err(NOT_INT);
    } else if (argc != 4) {
        return r_err(SYNTAX);
    }
    if (lookup(m, &argv[1], T_ZSET, &k) != 0) return r_err(WRONGTYPE);
    if (k == NULL) return r_array(0);
    size_t n = 0, *idx = xrealloc(NULL, k->n * sizeof(*idx));
    long long seen = 0;
    for (size_t i = 0; i < k->n; i++) {
        if (!in_bounds(k->items[i].score, min, omin, max, omax)) continue;
        if (seen++ < off) continue;
        if (count >= 0 && (long long)n >= count) break;
        idx[n++] = i;
    }
    redisReply *r = members(k, idx, n, 0);
    free(idx);
    return r;
}

static const struct {
    const char *name;
    cmd_fn fn;
    int arity;              /* as Redis counts it: < 0 at least -arity */
} commands[] = {
    {"del", c_del, -2},         {"exists", c_exists, -2},   {"type", c_type, 2},
    {"pexpire", c_pexpire, 3},  {"pttl", c_pttl, 2},        {"persist", c_persist, 2},
    {"time", c_time, 1},        {"publish", c_publish, 3},  {"spublish", c_publish, 3},
    {"get", c_get, 2},          {"set", c_set, -3},         {"getset", c_getset, 3},
    {"mget", c_mget, -2},       {"mset", c_mset, -3},       {"incrby", c_incrby, 3},
    {"decrby", c_decrby, 3},    {"decr", c_decr, 2},
    {"hset", c_hset, -4},       {"hget", c_hget, 3},
    {"hmget", c_hmget, -3},     {"hexists", c_hexists, 3},  {"hdel", c_hdel, -3},
    {"hlen", c_hlen, 2},        {"hkeys", c_hkeys, 2},      {"hgetall", c_hgetall, 2},
    {"hincrby", c_hincrby, 4},  {"rpush", c_rpush, -3},     {"lpop", c_lpop, 2},
    {"llen", c_llen, 2},        {"lindex", c_lindex, 3},    {"lrange", c_lrange, 4},
    {"lrem", c_lrem, 4},        {"sadd", c_sadd, -3},       {"srem", c_srem, -3},
    {"sismember", c_sismember, 3}, {"scard", c_scard, 2},   {"zadd", c_zadd, -4},
    {"zrem", c_zrem, -3},       {"zscore", c_zscore, 3},    {"zcard", c_zcard, 2},
    {"zcount", c_zcount, 4},    {"zrange", c_zrange, -4},   {"zrangebyscore", c_zrangebyscore, -4},
    {"zpopmin", c_zpopmin, 2},
};

static redisReply *run(rmodel_t *m, size_t argc, const str_t *argv) {
    char err[96];
    if (argc == 0) return r_err("ERR no command");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strlen(commands[i].name) != argv[0].n ||
            strncasecmp(commands[i].name, argv[0].p, argv[0].n) != 0)
            continue;
        int a = commands[i].arity;
        if ((a > 0 && argc != (size_t)a) || (a < 0 && argc < (size_t)-a)) {
            snprintf(err, sizeof(err), "ERR wrong number of arguments for '%s' command",
                     commands[i].name);
            return r_err(err);
        }
        return commands[i].fn(m, argc, argv);
    }
    snprintf(err, sizeof(err), "ERR unknown command '%.*s'", (int)(argv[0].n < 40 ? argv[0].n : 40),
             argv[0].p);
    return r_err(err);
}

redisReply *rmodel_command(rmodel_t *m, size_t argc, const char *const *argv,
                           const size_t *argvlen) {
    str_t *a = xrealloc(NULL, (argc ? argc : 1) * sizeof(*a));
    for (size_t i = 0; i < argc; i++) {
        a[i].p = (char *)(uintptr_t)argv[i]; /* read only */
        a[i].n = argvlen ? argvlen[i] : strlen(argv[i]);
    }
    redisReply *r = run(m, argc, a);
    free(a);
    return r;
}

redisReply *rmodel_call(rmodel_t *m, const char *cmd, ...) {
    const char *argv[16];
    size_t argc = 0;
    va_list ap;
    argv[argc++] = cmd;
    va_start(ap, cmd);
    const char *s;
    while ((s = va_arg(ap, const char *)) != NULL) {
        if (argc == sizeof(argv) / sizeof(argv[0])) abort();
        argv[argc++] = s;
    }
    va_end(ap);
    return rmodel_command(m, argc, argv, NULL);
}

/* ---- Lua ------------------------------------------------------------------------------ */

/* A reply as Redis gives it to Lua: an integer a number, a bulk string a
 * string, nil false, an array a table, a status {ok = ...}, an error
 * {err = ...}. */
static void push_reply(lua_State *L, const redisReply *r) {
    switch (r->type) {
    case REDIS_REPLY_INTEGER: lua_pushnumber(L, (lua_Number)r->integer); break;
    case REDIS_REPLY_STRING: lua_pushlstring(L, r->str, r->len); break;
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        lua_newtable(L);
        lua_pushstring(L, r->type == REDIS_REPLY_STATUS ? "ok" : "err");
        lua_pushlstring(L, r->str, r->len);
        lua_settable(L, -3);
        break;
    case REDIS_REPLY_ARRAY:
        lua_newtable(L);
        for (size_t i = 0; i < r->elements; i++) {
            lua_pushnumber(L, (lua_Number)(i + 1));
            push_reply(L, r->element[i]);
            lua_settable(L, -3);
        }
        break;
    default: lua_pushboolean(L, 0); break;
    }
}

/* The Lua value at idx as Redis's reply: a number truncated to an integer,
 * a string bulk, true 1, false or nil a nil, a table with ok or err a
 * status or error, any other table an array up to its first nil. */
static redisReply *to_reply(lua_State *L, int idx) {
    size_t n;
    const char *s;
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER: return r_int((long long)lua_tonumber(L, idx));
    case LUA_TSTRING:
        s = lua_tolstring(L, idx, &n);
        return r_text(REDIS_REPLY_STRING, s, n);
    case LUA_TBOOLEAN:
        return lua_toboolean(L, idx) ? r_int(1) : reply_new(REDIS_REPLY_NIL);
    case LUA_TTABLE: break;
    default: return reply_new(REDIS_REPLY_NIL);
    }
    if (idx < 0) idx = lua_gettop(L) + idx + 1;
    lua_getfield(L, idx, "err");
    if (lua_type(L, -1) == LUA_TSTRING) {
        s = lua_tolstring(L, -1, &n);
        redisReply *r = r_text(REDIS_REPLY_ERROR, s, n);
        lua_pop(L, 1);
        return r;
    }
    lua_pop(L, 1);
    lua_getfield(L, idx, "ok");
    if (lua_type(L, -1) == LUA_TSTRING) {
        s = lua_tolstring(L, -1, &n);
        redisReply *r = r_text(REDIS_REPLY_STATUS, s, n);
        lua_pop(L, 1);
        return r;
    }
    lua_pop(L, 1);
    size_t len = 0;
    for (;; len++) {
        lua_rawgeti(L, idx, (int)len + 1);
        int nil = lua_isnil(L, -1);
        lua_pop(L, 1);
        if (nil) break;
    }
    redisReply *r = r_array(len);
    for (size_t i = 0; i < len; i++) {
        lua_rawgeti(L, idx, (int)i + 1);
        r->element[i] = to_reply(L, -1);
        lua_pop(L, 1);
    }
    return r;
}

static rmodel_t *model_of(lua_State *L) {
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* redis.call and redis.pcall: arguments strings or numbers (a number as
 * "%.17g" gives it), the reply pushed; an error raised as {err = ...} by
 * call, returned by pcall. */
static int redis_command(lua_State *L, int raise) {
    rmodel_t *m = model_of(L);
    int argc = lua_gettop(L);
    char nums[RM_ARGS_MAX][RM_NUM_LEN];
    str_t *argv;
    if (argc == 0 || argc > RM_ARGS_MAX) {
        lua_newtable(L);
        lua_pushstring(L, "ERR wrong number of arguments to a Redis command from a script");
        lua_setfield(L, -2, "err");
        return raise ? lua_error(L) : 1;
    }
    argv = xrealloc(NULL, (size_t)argc * sizeof(*argv));
    for (int i = 0; i < argc; i++) {
        if (lua_type(L, i + 1) == LUA_TNUMBER) {
            int n = snprintf(nums[i], RM_NUM_LEN, "%.17g", (double)lua_tonumber(L, i + 1));
            argv[i] = (str_t){nums[i], (size_t)n};
        } else if (lua_type(L, i + 1) == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, i + 1, &n);
            argv[i] = (str_t){(char *)(uintptr_t)s, n};
        } else {
            free(argv);
            lua_newtable(L);
            lua_pushstring(L, "ERR Lua redis lib command arguments must be strings or integers");
            lua_setfield(L, -2, "err");
            return raise ? lua_error(L) : 1;
        }
    }
    redisReply *r = run(m, (size_t)argc, argv);
    free(argv);
    push_reply(L, r);
    int err = r->type == REDIS_REPLY_ERROR;
    freeReplyObject(r);
    if (err && raise) return lua_error(L);
    return 1;
}

static int l_call(lua_State *L) {
    return redis_command(L, 1);
}

static int l_pcall(lua_State *L) {
    return redis_command(L, 0);
}

/* redis.error_reply(text) and redis.status_reply(text). */
static int reply_table(lua_State *L, const char *field) {
    luaL_checkstring(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, field);
    return 1;
}

static int l_error_reply(lua_State *L) {
    return reply_table(L, "err");
}

static int l_status_reply(lua_State *L) {
    return reply_table(L, "ok");
}

static int l_log(lua_State *L) {
    (void)L;
    return 0;
}

static lua_State *lua_start(rmodel_t *m) {
    static const luaL_Reg libs[] = {
        {"", luaopen_base}, {LUA_TABLIBNAME, luaopen_table}, {LUA_STRLIBNAME, luaopen_string},
        {LUA_MATHLIBNAME, luaopen_math},
    };
    static const luaL_Reg fns[] = {
        {"call", l_call}, {"pcall", l_pcall}, {"error_reply", l_error_reply},
        {"status_reply", l_status_reply}, {"log", l_log},
    };
    lua_State *L = luaL_newstate();
    if (L == NULL) abort();
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        lua_pushcfunction(L, libs[i].func);
        lua_pushstring(L, libs[i].name);
        lua_call(L, 1, 0);
    }
    lua_newtable(L);
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        lua_pushlightuserdata(L, m);
        lua_pushcclosure(L, fns[i].func, 1);
        lua_setfield(L, -2, fns[i].name);
    }
    lua_pushnumber(L, 3);
    lua_setfield(L, -2, "LOG_WARNING");
    lua_setglobal(L, "redis");
    return L;
}

/* The compiled script's function on the stack; 0, or -1 with the error
 * message there instead. */
static int script_push(rmodel_t *m, const char *text) {
    lua_State *L = m->L;
    for (size_t i = 0; i < m->nscripts; i++)
        if (m->scripts[i].text == text) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, m->scripts[i].ref);
            return 0;
        }
    if (m->nscripts == RM_SCRIPTS_MAX) abort();
    /* A shebang line (Redis 7's flags) is Redis's, not Lua's. */
    const char *body = text;
    if (strncmp(body, "#!", 2) == 0) {
        body = strchr(body, '\n');
        body = body ? body + 1 : "";
    }
    if (luaL_loadbuffer(L, body, strlen(body), "@user_script") != 0) return -1;
    lua_pushvalue(L, -1);
    m->scripts[m->nscripts].text = text;
    m->scripts[m->nscripts].ref = luaL_ref(L, LUA_REGISTRYINDEX);
    m->nscripts++;
    return 0;
}

static void set_array(lua_State *L, const char *name, const char *const *v, const size_t *len,
                      size_t n) {
    lua_newtable(L);
    for (size_t i = 0; i < n; i++) {
        lua_pushlstring(L, v[i], len ? len[i] : strlen(v[i]));
        lua_rawseti(L, -2, (int)i + 1);
    }
    lua_setglobal(L, name);
}

redisReply *rmodel_eval(rmodel_t *m, const char *script, size_t argc, const char *const *argv,
                        const size_t *argvlen) {
    lua_State *L = m->L;
    long long numkeys;
    if (argc < 1) return r_err("ERR wrong number of arguments for 'eval' command");
    str_t nk = {(char *)(uintptr_t)argv[0], argvlen ? argvlen[0] : strlen(argv[0])};
    if (parse_ll(&nk, &numkeys) != 0 || numkeys < 0 || (size_t)numkeys > argc - 1)
        return r_err("ERR Number of keys can't be greater than number of args");
    set_array(L, "KEYS", argv + 1, argvlen ? argvlen + 1 : NULL, (size_t)numkeys);
    set_array(L, "ARGV", argv + 1 + numkeys, argvlen ? argvlen + 1 + numkeys : NULL,
              argc - 1 - (size_t)numkeys);
    redisReply *r;
    if (script_push(m, script) != 0 || lua_pcall(L, 0, 1, 0) != 0) {
        /* error(table) keeps its err; a string error is the message */
        if (lua_istable(L, -1)) {
            r = to_reply(L, -1);
            if (r->type != REDIS_REPLY_ERROR) {
                freeReplyObject(r);
                r = r_err("ERR script raised a table without err");
            }
        } else {
            const char *s = lua_tostring(L, -1);
            char err[512];
            snprintf(err, sizeof(err), "ERR %s", s ? s : "script error");
            r = r_err(err);
        }
    } else {
        r = to_reply(L, -1);
    }
    lua_settop(L, 0);
    return r;
}

rmodel_t *rmodel_new(rmodel_clock_cb clock, rmodel_publish_cb publish, void *data) {
    rmodel_t *m = xrealloc(NULL, sizeof(*m));
    memset(m, 0, sizeof(*m));
    m->clock = clock;
    m->publish = publish;
    m->data = data;
    m->L = lua_start(m);
    return m;
}

void rmodel_free(rmodel_t *m) {
    if (m == NULL) return;
    lua_close(m->L);
    for (size_t i = 0; i < m->nkeys; i++) key_free(m->keys[i]);
    free(m->keys);
    free(m);
}
