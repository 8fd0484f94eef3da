/* The Lua scripts that change lock state, their calls and their replies.
 * SPDX-License-Identifier: MIT */
#include "scripts.h"

#include <stdio.h>
#include <string.h>

#include "daemon/backend/keys.h"

/* ---- the scripts -------------------------------------------------------- */

/* The scripts are daemon/backend/lua's files, each composed with the parts
 * it includes and embedded at build time as lua_<name> (embed.sh). What
 * each takes and answers is said at the top of its file. */
#include "scripts_lua.h"

const char *const scripts_text[SCRIPT_COUNT] = {
    [SCRIPT_ACQUIRE] = lua_acquire,     [SCRIPT_RELEASE] = lua_release,
    [SCRIPT_STATUS] = lua_status,       [SCRIPT_FORCE] = lua_force,
    [SCRIPT_OPS] = lua_ops,             [SCRIPT_RENEW] = lua_renew,
    [SCRIPT_WHO] = lua_who,             [SCRIPT_REGISTER] = lua_register,
    [SCRIPT_OPS_ANY] = lua_ops_any,     [SCRIPT_RENEW_ANY] = lua_renew_any,
    [SCRIPT_RW] = lua_rw,               [SCRIPT_SEM] = lua_sem,
    [SCRIPT_FAIR] = lua_fair,
};

/* The codes are backend.h's outcomes, modes and renewals, number for number:
 * a reply decodes by a cast. */
_Static_assert(SCRIPTS_GRANTED == (int)BACKEND_GRANTED, "GRANTED");
_Static_assert(SCRIPTS_REENTERED == (int)BACKEND_REENTERED, "REENTERED");
_Static_assert(SCRIPTS_TAKEN == (int)BACKEND_TAKEN, "TAKEN");
_Static_assert(SCRIPTS_WRONG_KIND == (int)BACKEND_WRONG_KIND, "WRONG_KIND");
_Static_assert(SCRIPTS_HOLD_GONE == (int)BACKEND_HOLD_GONE, "HOLD_GONE");
_Static_assert(SCRIPTS_HELD_LOCK == (int)BACKEND_MUTEX, "HELD_LOCK");
_Static_assert(SCRIPTS_HELD_READ == (int)BACKEND_READ, "HELD_READ");
_Static_assert(SCRIPTS_HELD_WRITE == (int)BACKEND_WRITE, "HELD_WRITE");
_Static_assert(SCRIPTS_HELD_SEM == (int)BACKEND_SEM, "HELD_SEM");
_Static_assert(SCRIPTS_GONE == (int)BACKEND_GONE, "GONE");
_Static_assert(SCRIPTS_RENEWED == (int)BACKEND_RENEWED, "RENEWED");
_Static_assert(SCRIPTS_FORCED == (int)BACKEND_FORCED, "FORCED");

#define CODE(name) {#name, SCRIPTS_##name}
const scripts_code_t scripts_codes[] = {
    CODE(GRANTED),   CODE(REENTERED), CODE(TAKEN),      CODE(WRONG_KIND), CODE(HOLD_GONE),
    CODE(HELD_LOCK), CODE(HELD_READ), CODE(HELD_WRITE), CODE(HELD_SEM),   CODE(NOT_HELD),
    CODE(GONE),      CODE(RENEWED),   CODE(FORCED),
};
#undef CODE
const size_t scripts_codes_count = sizeof(scripts_codes) / sizeof(scripts_codes[0]);

/* ---- calls ---------------------------------------------------------------- */

int scripts_loaded(script_id_t id, unsigned flags) {
    return (id != SCRIPT_OPS_ANY && id != SCRIPT_RENEW_ANY) || (flags & SCRIPTS_F_ANY_SLOT);
}

int scripts_batchable(const backend_op_t *op) {
    if (op->mode == BACKEND_READ || op->mode == BACKEND_WRITE)
        return op->kind == BACKEND_RENEW || op->kind == BACKEND_ACQUIRE ||
               op->kind == BACKEND_RELEASE || op->kind == BACKEND_DROP;
    if (op->mode != BACKEND_MUTEX) return op->kind == BACKEND_RENEW;
    return op->kind == BACKEND_ACQUIRE || op->kind == BACKEND_RELEASE ||
           op->kind == BACKEND_DROP || op->kind == BACKEND_RENEW || op->kind == BACKEND_FENCE;
}

script_id_t scripts_choose(backend_op_t *const *ops, size_t n, unsigned flags) {
    int any = (flags & SCRIPTS_F_ANY_SLOT) != 0;
    if (n == 1 && any && scripts_batchable(ops[0])) return SCRIPT_OPS_ANY;
    if (n == 1 && ops[0]->mode == BACKEND_SEM &&
        (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_RELEASE ||
         ops[0]->kind == BACKEND_SEMINIT))
        return SCRIPT_SEM;
    if (n == 1 && ops[0]->mode == BACKEND_FAIR &&
        (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_RELEASE ||
         ops[0]->kind == BACKEND_DROP || ops[0]->kind == BACKEND_LEAVE))
        return SCRIPT_FAIR;
    if (n == 1 && ops[0]->mode != BACKEND_MUTEX &&
        (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_RELEASE ||
         ops[0]->kind == BACKEND_DROP))
        return SCRIPT_RW;
    if (n == 1 && ops[0]->mode != BACKEND_MUTEX && ops[0]->kind == BACKEND_RENEW)
        return SCRIPT_OPS;
    /* A quorum's acquires carry its fence rule, which only the batch
     * script takes; a raise has no script of its own. */
    if (n == 1 && (ops[0]->kind == BACKEND_FENCE ||
                   (ops[0]->kind == BACKEND_ACQUIRE && (flags & SCRIPTS_F_QUORUM))))
        return SCRIPT_OPS;
    if (n > 1) {
        for (size_t i = 0; i < n; i++)
            if (ops[i]->kind != BACKEND_RENEW || ops[i]->mode != BACKEND_MUTEX ||
                ops[i]->lease_ms != ops[0]->lease_ms)
                return any ? SCRIPT_OPS_ANY : SCRIPT_OPS;
        return any ? SCRIPT_RENEW_ANY : SCRIPT_RENEW;
    }
    switch (ops[0]->kind) {
    case BACKEND_ACQUIRE: return SCRIPT_ACQUIRE;
    case BACKEND_RELEASE:
    case BACKEND_DROP: return SCRIPT_RELEASE;
    case BACKEND_STATUS: return SCRIPT_STATUS;
    case BACKEND_FORCE: return SCRIPT_FORCE;
    case BACKEND_WHO: return SCRIPT_WHO;
    default: return SCRIPT_OPS;
    }
}

/* One RESP header or bulk string; room was reserved by the caller. */
static size_t put_head(char *p, char kind, size_t n) {
    size_t k = 0;
    p[k++] = kind;
    k += keys_u64(p + k, n);
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

static size_t put_bulk(char *p, const char *s, size_t len) {
    size_t k = put_head(p, '$', len);
    memcpy(p + k, s, len);
    k += len;
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

/* Room one argument of len bytes takes at most. */
#define ARG_ROOM(len) (1 + 20 + 2 + (len) + 2)
/* Room any one operation's arguments take at most (SCRIPT_FORCE's and
 * SCRIPT_FAIR's keys: the lock and five companions). */
#define OP_ROOM (ARG_ROOM(KEYS_KEY_MAX) + 5 * ARG_ROOM(KEYS_COMPANION_MAX) + \
                 ARG_ROOM(24) + ARG_ROOM(KEYS_FIELD_MAX) + ARG_ROOM(1))
/* The publish command releases use: classic or sharded pub/sub. */
#define PUB_CMD(flags) ((flags) & SCRIPTS_F_SHARDED ? "spublish" : "publish")

/* An operation's two keys: the lock, and its token, channel or forced
 * marker (the companion SCRIPT_OPS passes; SCRIPT_FORCE takes two). */
/* A companion of key as a bulk string, written in place: the same bytes
 * as keys_companion() gives, without a copy in between. */
static size_t put_companion(char *p, const char *kind, size_t kindlen, const char *key,
                            size_t klen, int braces) {
    size_t k = put_head(p, '$', kindlen + 1 + klen + (braces ? 2 : 0));
    memcpy(p + k, kind, kindlen);
    k += kindlen;
    p[k++] = ':';
    if (braces) p[k++] = '{';
    memcpy(p + k, key, klen);
    k += klen;
    if (braces) p[k++] = '}';
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

/* A suffix companion of key (Redisson's suffixName): "{key}:kind", or
 * "key:kind" when the key has a '{' already. */
static size_t put_suffix(char *p, const char *kind, size_t kindlen, const char *key, size_t klen,
                         int braces) {
    size_t k = put_head(p, '$', klen + (braces ? 2 : 0) + 1 + kindlen);
    if (braces) p[k++] = '{';
    memcpy(p + k, key, klen);
    k += klen;
    if (braces) p[k++] = '}';
    p[k++] = ':';
    memcpy(p + k, kind, kindlen);
    k += kindlen;
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

#define KIND(s) (s), (sizeof(s) - 1)

static size_t put_keys(char *p, const backend_op_t *op, script_id_t id, const char *prefix,
                       size_t plen, unsigned flags) {
    /* The lock key, prefix and name, straight into place; its companion
     * copies it from there. */
    size_t klen = plen + op->len, k = put_head(p, '$', klen);
    char *key = p + k;
    memcpy(key, prefix, plen);
    memcpy(key + plen, op->name, op->len);
    k += klen;
    p[k++] = '\r';
    p[k++] = '\n';
    int braces = memchr(key, '{', klen) == NULL;
    if (id == SCRIPT_STATUS) return k + put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
    if (id == SCRIPT_SEM) {
        k += put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
        return k + put_companion(p + k, KIND(KEYS_SEM_CHANNEL), key, klen, braces);
    }
    if (id == SCRIPT_RW) {
        k += put_companion(p + k, KIND(KEYS_TOKEN), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_RW_CHANNEL), key, klen, braces);
        /* the timeout keys' prefix: "{key}", or the key as it is */
        k += put_head(p + k, '$', klen + (braces ? 2 : 0));
        if (braces) p[k++] = '{';
        memcpy(p + k, key, klen);
        k += klen;
        if (braces) p[k++] = '}';
        p[k++] = '\r';
        p[k++] = '\n';
        return k;
    }
    if (id == SCRIPT_WHO) {
        if (flags & SCRIPTS_F_NO_REGISTRY) return k;
        k += put_head(p + k, '$', plen + sizeof(KEYS_REGISTRY) - 1);
        memcpy(p + k, prefix, plen);
        memcpy(p + k + plen, KEYS_REGISTRY, sizeof(KEYS_REGISTRY) - 1);
        k += plen + sizeof(KEYS_REGISTRY) - 1;
        p[k++] = '\r';
        p[k++] = '\n';
        return k;
    }
    if (id == SCRIPT_FORCE) {
        k += put_companion(p + k, KIND(KEYS_CHANNEL), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_FORCED), key, klen, braces);
        k += put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_SEM_CHANNEL), key, klen, braces);
        return k + put_companion(p + k, KIND(KEYS_QUEUE), key, klen, braces);
    }
    if (id == SCRIPT_FAIR) {
        k += put_companion(p + k, KIND(KEYS_QUEUE), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_QUEUE_TIMEOUT), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_CHANNEL), key, klen, braces);
        k += put_companion(p + k, KIND(KEYS_TOKEN), key, klen, braces);
        return k + put_companion(p + k, KIND(KEYS_FAIR_OWNERS), key, klen, braces);
    }
    if (op->mode == BACKEND_SEM) /* a renewal */
        return k + put_suffix(p + k, KIND(KEYS_SEM_TIMEOUT), key, klen, braces);
    if (op->kind == BACKEND_ACQUIRE || op->kind == BACKEND_FENCE)
        return k + put_companion(p + k, KIND(KEYS_TOKEN), key, klen, braces);
    if (op->kind == BACKEND_RENEW) return k + put_companion(p + k, KIND(KEYS_FORCED), key, klen, braces);
    if (op->mode == BACKEND_READ || op->mode == BACKEND_WRITE) /* a release or drop */
        return k + put_companion(p + k, KIND(KEYS_RW_CHANNEL), key, klen, braces);
    return k + put_companion(p + k, KIND(KEYS_CHANNEL), key, klen, braces);
}

/* part/rw.lua's op for a read/write lock's acquire, release or drop. */
static char rw_letter(const backend_op_t *op) {
    static const char letters[][BACKEND_MODE_COUNT] = {
        [BACKEND_ACQUIRE] = {'a', 'r', 'w'}, [BACKEND_RELEASE] = {'r', 'R', 'W'},
        [BACKEND_DROP] = {'r', 'd', 'D'},
    };
    return letters[op->kind][op->mode];
}

/* An operation's arguments, in the order its script wants them: SCRIPT_OPS
 * takes kind, number, owner ('a' lease, 'n' lease, or 'r' all); the
 * acquire script lease, owner; the release script owner, all; status the
 * owner; force how long its marker stays. */
static size_t put_args(char *p, const backend_op_t *op, script_id_t id, const char *uuid,
                       unsigned flags) {
    char num[24], field[KEYS_FIELD_MAX];
    size_t nlen, flen = keys_owner_field(field, uuid, op->owner), k = 0;
    int release = op->kind == BACKEND_RELEASE || op->kind == BACKEND_DROP;
    if (release) {
        num[0] = op->kind == BACKEND_RELEASE ? '1' : '0';
        nlen = 1;
    } else if (op->kind == BACKEND_FENCE) {
        nlen = keys_u64(num, op->raise_to);
    } else {
        nlen = keys_u64(num, op->lease_ms);
    }
    switch (id) {
    case SCRIPT_OPS:
    case SCRIPT_OPS_ANY:
        if ((op->mode == BACKEND_READ || op->mode == BACKEND_WRITE) &&
            op->kind != BACKEND_RENEW) { /* 'x<op>' */
            char letter[2] = {'x', rw_letter(op)};
            k += put_bulk(p, letter, 2);
            k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
            return k + put_bulk(p + k, field, flen);
        }
        if (op->mode == BACKEND_SEM) { /* a renewal of c permits: 's<c>' */
            char letter[24];
            letter[0] = 's';
            k += put_bulk(p, letter, 1 + keys_u64(letter + 1, op->permits));
            k += put_bulk(p + k, num, nlen);
            return k + put_bulk(p + k, field, flen);
        }
        k += put_bulk(p,
                      op->kind == BACKEND_ACQUIRE ? (flags & SCRIPTS_F_QUORUM ? "q" : "a")
                      : op->kind == BACKEND_RENEW ? (op->mode == BACKEND_READ    ? "v"
                                                     : op->mode == BACKEND_WRITE ? "V"
                                                                                 : "n")
                      : op->kind == BACKEND_FENCE ? "f"
                                                  : "r",
                      1);
        k += put_bulk(p + k, num, nlen);
        return k + put_bulk(p + k, field, flen);
    case SCRIPT_ACQUIRE:
        k += put_bulk(p, num, nlen);
        return k + put_bulk(p + k, field, flen);
    case SCRIPT_RELEASE:
        k += put_bulk(p, field, flen);
        return k + put_bulk(p + k, num, nlen);
    case SCRIPT_RW: {
        char letter = rw_letter(op);
        k += put_bulk(p, &letter, 1);
        k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
        return k + put_bulk(p + k, field, flen);
    }
    case SCRIPT_SEM: {
        char letter = op->kind == BACKEND_ACQUIRE   ? 'a'
                      : op->kind == BACKEND_SEMINIT ? 'i'
                                                    : 'r';
        k += put_bulk(p, &letter, 1);
        k += put_bulk(p + k, num, keys_u64(num, op->permits));
        k += put_bulk(p + k, num, keys_u64(num, op->permit_base));
        k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
        return k + put_bulk(p + k, field, flen);
    }
    case SCRIPT_FAIR: {
        char letter = op->kind == BACKEND_ACQUIRE ? (op->once ? 'o' : 'a')
                      : op->kind == BACKEND_RELEASE ? 'r'
                      : op->kind == BACKEND_DROP    ? 'd'
                                                    : 'l';
        k += put_bulk(p, &letter, 1);
        k += put_bulk(p + k, num, keys_u64(num, op->lease_ms));
        k += put_bulk(p + k, field, flen);
        k += put_bulk(p + k, num, keys_u64(num, op->queue_ms));
        return k + put_bulk(p + k, num, keys_u64(num, op->queue_foreign_ms));
    }
    case SCRIPT_WHO:
        return 0;
    case SCRIPT_STATUS:
    case SCRIPT_RENEW: /* its lease went once, before the owners */
    case SCRIPT_RENEW_ANY:
        return put_bulk(p, field, flen);
    default: /* SCRIPT_FORCE */
        return put_bulk(p, num, keys_u64(num, SCRIPTS_FORCED_MARK_MS));
    }
}

int scripts_format(buf_t *out, script_id_t id, const char *sha, backend_op_t *const *ops,
                   size_t n, const char *prefix, const char *uuid, unsigned flags) {
    size_t start = out->len, numkeys, argc, k, plen = strlen(prefix);
    int any = id == SCRIPT_OPS_ANY || id == SCRIPT_RENEW_ANY;
    char nk[24];
    char *p;

    switch (id) {
    case SCRIPT_OPS: numkeys = 2 * n; argc = 3 + 5 * n + 1; break;
    case SCRIPT_OPS_ANY: numkeys = 0; argc = 3 + 1 + 5 * n + 1; break;
    case SCRIPT_RENEW: numkeys = 2 * n; argc = 3 + 3 * n + 1; break;
    case SCRIPT_RENEW_ANY: numkeys = 0; argc = 3 + 1 + 3 * n + 1; break;
    case SCRIPT_STATUS: numkeys = 2; argc = 6; break;
    case SCRIPT_WHO:
        numkeys = flags & SCRIPTS_F_NO_REGISTRY ? 1 : 2;
        argc = 3 + numkeys;
        break;
    case SCRIPT_FORCE: numkeys = 6; argc = 11; break;
    case SCRIPT_FAIR: numkeys = 6; argc = 3 + 6 + 6; break;
    case SCRIPT_RW: numkeys = 4; argc = 3 + 4 + 4; break;
    case SCRIPT_SEM: numkeys = 3; argc = 3 + 3 + 6; break;
    default: numkeys = 2; argc = 8; break; /* acquire 7: no publish command */
    }
    if (id == SCRIPT_ACQUIRE) argc = 7;
    /* Room is reserved one operation at a time, so that a batch takes
     * about what it needs; the keys of all come first, then the other
     * arguments. The _ANY layouts pass the keys in ARGV, after their
     * count. */
    p = buf_reserve(out, 1 + 20 + 2 + ARG_ROOM(7) + ARG_ROOM(SCRIPTS_SHA_LEN) + 2 * ARG_ROOM(20));
    if (p == NULL) goto nomem;
    k = put_head(p, '*', argc);
    k += put_bulk(p + k, "EVALSHA", 7);
    k += put_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += put_bulk(p + k, nk, keys_u64(nk, numkeys));
    if (any) k += put_bulk(p + k, nk, keys_u64(nk, n));
    buf_commit(out, k);
    for (size_t i = 0; i < n; i++) {
        if ((p = buf_reserve(out, OP_ROOM)) == NULL) goto nomem;
        buf_commit(out, put_keys(p, ops[i], id, prefix, plen, flags));
    }
    if (id == SCRIPT_RENEW || id == SCRIPT_RENEW_ANY) {
        char lease[24];
        if ((p = buf_reserve(out, ARG_ROOM(24))) == NULL) goto nomem;
        buf_commit(out, put_bulk(p, lease, keys_u64(lease, ops[0]->lease_ms)));
    }
    for (size_t i = 0; i < n; i++) {
        if ((p = buf_reserve(out, OP_ROOM)) == NULL) goto nomem;
        buf_commit(out, put_args(p, ops[i], id, uuid, flags));
    }
    if (id == SCRIPT_OPS || id == SCRIPT_OPS_ANY || id == SCRIPT_RELEASE ||
        id == SCRIPT_FORCE || id == SCRIPT_RW || id == SCRIPT_SEM || id == SCRIPT_FAIR) {
        if ((p = buf_reserve(out, ARG_ROOM(8))) == NULL) goto nomem;
        const char *pub = PUB_CMD(flags);
        buf_commit(out, put_bulk(p, pub, strlen(pub)));
    }
    return 0;
nomem:
    out->len = start;
    return -1;
}

/* ---- replies ---------------------------------------------------------------- */

static int is_int(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_INTEGER;
}

static int is_pair(const redisReply *r) {
    return r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_int(r->element[0]) &&
           is_int(r->element[1]);
}

/* An acquire's (kind, value) pair into res; -1 if kind is unknown. */
static int set_acquire(backend_result_t *res, long long kind, long long v) {
    res->outcome = (backend_outcome_t)kind;
    switch (kind) {
    case SCRIPTS_GRANTED: res->fence = (uint64_t)v; return 0;
    case SCRIPTS_REENTERED: res->holds = v; return 0;
    case SCRIPTS_TAKEN: res->ttl_ms = v; return 0;
    case SCRIPTS_WRONG_KIND: res->held = (backend_mode_t)v; return 0;
    case SCRIPTS_HOLD_GONE: return 0;
    default: return -1;
    }
}

static void set_renewal(backend_result_t *res, long long v) {
    res->renewal = v == SCRIPTS_RENEWED ? BACKEND_RENEWED
                   : v == SCRIPTS_FORCED ? BACKEND_FORCED
                                         : BACKEND_GONE;
}

/* The batch script's one line per operation. An operation's own error
 * fails it alone; the error text must stay valid during its callback, so
 * it points into the reply, which outlives the callbacks. */
static int decode_ops(backend_op_t *const *ops, size_t n, redisReply *r, char *err,
                      size_t errlen) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * n) {
        snprintf(err, errlen, "unexpected reply (type %d) from the batch script", r->type);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        backend_result_t *res = &ops[i]->res;
        const redisReply *x = r->element[2 * i], *y = r->element[2 * i + 1];
        int pair = is_int(y);
        long long a = is_int(x) ? x->integer : 0, v = pair ? y->integer : 0;
        memset(res, 0, sizeof(*res));
        if (x->type == REDIS_REPLY_STRING) { /* the error's text */
            res->status = BACKEND_FAILED;
            res->error = x->str;
            continue;
        }
        if (!is_int(x)) {
            res->status = BACKEND_FAILED;
            res->error = "bad result from the batch script";
            continue;
        }
        switch (ops[i]->kind) {
        case BACKEND_ACQUIRE:
            if (!pair || set_acquire(res, a, v) != 0) {
                res->status = BACKEND_FAILED;
                res->error = "bad acquire result from the batch script";
            }
            break;
        case BACKEND_RENEW: set_renewal(res, a); break;
        case BACKEND_FENCE: res->holds = a; break;
        default: /* release, drop */
            res->holds = a;
            if (pair) res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            break;
        }
    }
    return 0;
}

int scripts_format_register(buf_t *out, const char *sha, const char *prefix, const char *uuid,
                            const char *name) {
    size_t plen = strlen(prefix), ulen = strlen(uuid), nlen = strlen(name);
    char stale[24];
    size_t slen = keys_u64(stale, SCRIPTS_REGISTRY_STALE_MS);
    char *p = buf_reserve(out, 1 + 20 + 2 + ARG_ROOM(7) + ARG_ROOM(SCRIPTS_SHA_LEN) + ARG_ROOM(1) +
                                   ARG_ROOM(plen + sizeof(KEYS_REGISTRY)) + ARG_ROOM(ulen) +
                                   ARG_ROOM(nlen) + ARG_ROOM(slen));
    if (p == NULL) return -1;
    size_t k = put_head(p, '*', 7);
    k += put_bulk(p + k, "EVALSHA", 7);
    k += put_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += put_bulk(p + k, "1", 1);
    k += put_head(p + k, '$', plen + sizeof(KEYS_REGISTRY) - 1);
    memcpy(p + k, prefix, plen);
    memcpy(p + k + plen, KEYS_REGISTRY, sizeof(KEYS_REGISTRY) - 1);
    k += plen + sizeof(KEYS_REGISTRY) - 1;
    p[k++] = '\r';
    p[k++] = '\n';
    k += put_bulk(p + k, uuid, ulen);
    k += put_bulk(p + k, name, nlen);
    k += put_bulk(p + k, stale, slen);
    buf_commit(out, k);
    return 0;
}

int scripts_decode(script_id_t id, backend_op_t *const *ops, size_t n, redisReply *r,
                   char *err, size_t errlen) {
    if (id == SCRIPT_OPS || id == SCRIPT_OPS_ANY) return decode_ops(ops, n, r, err, errlen);
    if (id == SCRIPT_RENEW || id == SCRIPT_RENEW_ANY) {
        if (r->type != REDIS_REPLY_STRING || r->len != n) {
            snprintf(err, errlen, "unexpected reply (type %d) from the renew script", r->type);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            memset(&ops[i]->res, 0, sizeof(ops[i]->res));
            if (r->str[i] == 'E') {
                ops[i]->res.status = BACKEND_FAILED;
                ops[i]->res.error = SCRIPTS_NOT_HERE;
            } else {
                set_renewal(&ops[i]->res, r->str[i] - '0');
            }
        }
        return 0;
    }
    backend_result_t *res = &ops[0]->res;
    memset(res, 0, sizeof(*res));
    switch (id) {
    case SCRIPT_ACQUIRE:
        if (is_pair(r) &&
            set_acquire(res, r->element[0]->integer, r->element[1]->integer) == 0)
            return 0;
        break;
    case SCRIPT_RELEASE:
        if (is_pair(r)) {
            res->holds = r->element[0]->integer;
            long long v = r->element[1]->integer;
            res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            return 0;
        }
        if (is_int(r)) {
            res->holds = r->integer;
            return 0;
        }
        break;
    case SCRIPT_STATUS:
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 5) {
            for (size_t i = 0; i < 5; i++)
                if (!is_int(r->element[i])) goto bad;
            res->ttl_ms = r->element[0]->integer;
            res->holds = r->element[1]->integer;
            res->held = (backend_mode_t)r->element[2]->integer;
            res->holders = r->element[3]->integer;
            /* a write hold's count: the mode asked about decides */
            if (ops[0]->mode == BACKEND_WRITE) res->holds = r->element[4]->integer;
            if (res->held == BACKEND_WRITE) res->holders = 1;
            return 0;
        }
        break;
    case SCRIPT_FORCE:
        if (is_int(r)) {
            res->removed = r->integer != 0;
            return 0;
        }
        break;
    case SCRIPT_WHO:
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
            r->element[0]->type == REDIS_REPLY_INTEGER &&
            r->element[1]->type == REDIS_REPLY_STRING &&
            r->element[2]->type == REDIS_REPLY_STRING && ops[0]->who != NULL) {
            backend_who_t *w = ops[0]->who;
            const char *entry = strchr(r->element[2]->str, ' '); /* after "<seen ms> " */
            res->ttl_ms = r->element[0]->integer;
            if (res->ttl_ms == -3) res->held = BACKEND_SEM;
            snprintf(w->owner, sizeof(w->owner), "%s", r->element[1]->str);
            snprintf(w->daemon, sizeof(w->daemon), "%s", entry ? entry + 1 : "");
            return 0;
        }
        break;
    case SCRIPT_SEM:
    case SCRIPT_FAIR:
    case SCRIPT_RW:
        /* an acquire's (or SEMINIT's refusal) pair; a release's pair, or
         * holds left (SEMINIT: 1 or 0) */
        if (is_pair(r) && (ops[0]->kind == BACKEND_ACQUIRE || ops[0]->kind == BACKEND_SEMINIT)) {
            if (set_acquire(res, r->element[0]->integer, r->element[1]->integer) == 0) return 0;
        } else if (is_pair(r) && ops[0]->kind != BACKEND_ACQUIRE) {
            res->holds = r->element[0]->integer;
            long long v = r->element[1]->integer;
            res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            return 0;
        } else if (is_int(r) && ops[0]->kind != BACKEND_ACQUIRE) {
            res->holds = r->integer;
            return 0;
        }
        break;
    default:
        break;
    }
bad:
    snprintf(err, errlen, "unexpected reply type %d from a script", r->type);
    return -1;
}
