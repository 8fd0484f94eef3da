/* The Lua scripts that change lock state, their calls and their replies.
 * SPDX-License-Identifier: MIT */
#include "scripts.h"

#include <stdio.h>
#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/resp_write.h"

/* ---- the scripts -------------------------------------------------------- */

/* The scripts are daemon/backend/lua's files, each composed with the parts
 * it includes and embedded at build time as lua_<name> (embed.sh). What
 * each takes and answers is said at the top of its file. */
#include "scripts_lua.h"

/* The scripts no mode owns; a mode's own is in its row (modes[].lua). */
static const char *const core_text[SCRIPT_OWN_FIRST] = {
    [SCRIPT_ACQUIRE] = lua_acquire,     [SCRIPT_RELEASE] = lua_release,
    [SCRIPT_STATUS] = lua_status,       [SCRIPT_FORCE] = lua_force,
    [SCRIPT_OPS] = lua_ops,             [SCRIPT_RENEW] = lua_renew,
    [SCRIPT_WHO] = lua_who,             [SCRIPT_REGISTER] = lua_register,
    [SCRIPT_OPS_ANY] = lua_ops_any,     [SCRIPT_RENEW_ANY] = lua_renew_any,
};

/* LIST's page description (list.c sends it with EVAL: it is not an op). */
const char *const scripts_list_lua = lua_list;

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
    CODE(GRANTED), CODE(REENTERED), CODE(TAKEN),   CODE(WRONG_KIND), CODE(HOLD_GONE),
    CODE(TAKEN_LEADER), CODE(NOT_HELD), CODE(GONE), CODE(RENEWED), CODE(FORCED),
};
#undef CODE
const size_t scripts_codes_count = sizeof(scripts_codes) / sizeof(scripts_codes[0]);

/* ---- the kinds of lock -------------------------------------------------------- */

#define K_ACQ SCRIPTS_KIND(BACKEND_ACQUIRE)
#define K_REL SCRIPTS_KIND(BACKEND_RELEASE)
#define K_DROP SCRIPTS_KIND(BACKEND_DROP)
#define K_RENEW SCRIPTS_KIND(BACKEND_RENEW)
#define K_FENCE SCRIPTS_KIND(BACKEND_FENCE)
#define K_INIT SCRIPTS_KIND(BACKEND_INIT)
#define K_LEAVE SCRIPTS_KIND(BACKEND_LEAVE)
#define K_LEADER SCRIPTS_KIND(BACKEND_LEADER)

/* An election's companions of its own (elect.lua): its candidates' queue,
 * when each place ends, and the leader's record. */
#define ELECT_QUEUE "dlock_elect_queue"
#define ELECT_TIMEOUT "dlock_elect_timeout"
#define ELECT_LEADER "dlock_leader"

#define PREFIX(kind) {SCRIPTS_KEY_PREFIX, kind}
#define SUFFIX(kind) {SCRIPTS_KEY_SUFFIX, kind}

/* A read/write lock's own script (rw.lua) and its place in the batch. */
#define RW_MODE(acquire, release, drop, renew_letter, word)                                    \
    {                                                                                          \
        .lua = lua_rw, .own = K_ACQ | K_REL | K_DROP,                                          \
        .keys = {PREFIX(KEYS_TOKEN), PREFIX(KEYS_RW_CHANNEL), {SCRIPTS_KEY_TAG, ""}},          \
        .args = {SCRIPTS_ARG_LETTER, SCRIPTS_ARG_LEASE, SCRIPTS_ARG_FIELD},                    \
        .letters = {[BACKEND_ACQUIRE] = acquire, [BACKEND_RELEASE] = release,                  \
                    [BACKEND_DROP] = drop},                                                    \
        .batch = K_ACQ | K_REL | K_DROP | K_RENEW, .batch_own = 1, .renew = renew_letter,     \
        .acquire_key = PREFIX(KEYS_TOKEN), .renew_key = PREFIX(KEYS_FORCED),                   \
        .release_key = PREFIX(KEYS_RW_CHANNEL), .channel = KEYS_RW_CHANNEL,                    \
        .list_word = word,                                                                     \
    }

static const scripts_mode_t modes[BACKEND_MODE_COUNT] = {
    [BACKEND_MUTEX] = {
        .lua = NULL, .own = 0,
        .batch = K_ACQ | K_REL | K_DROP | K_RENEW | K_FENCE | K_LEAVE, .renew = 'n',
        .acquire_key = PREFIX(KEYS_TOKEN), .renew_key = PREFIX(KEYS_FORCED),
        .release_key = PREFIX(KEYS_CHANNEL), .wake_key = PREFIX(KEYS_WAKE_QUEUE),
        .channel = KEYS_CHANNEL, .list_word = "lock",
    },
    [BACKEND_READ] = RW_MODE('r', 'R', 'd', 'v', "read"),
    [BACKEND_WRITE] = RW_MODE('w', 'W', 'D', 'V', "write"),
    [BACKEND_SEM] = {
        .lua = lua_sem, .own = K_ACQ | K_REL | K_INIT,
        .keys = {SUFFIX(KEYS_SEM_TIMEOUT), PREFIX(KEYS_SEM_CHANNEL)},
        .args = {SCRIPTS_ARG_LETTER, SCRIPTS_ARG_COUNT, SCRIPTS_ARG_BASE, SCRIPTS_ARG_LEASE,
                 SCRIPTS_ARG_FIELD},
        .letters = {[BACKEND_ACQUIRE] = 'a', [BACKEND_RELEASE] = 'r', [BACKEND_INIT] = 'i'},
        .batch = K_RENEW, .renew = 's',
        .acquire_key = SUFFIX(KEYS_SEM_TIMEOUT), .renew_key = SUFFIX(KEYS_SEM_TIMEOUT),
        .release_key = SUFFIX(KEYS_SEM_TIMEOUT), .channel = KEYS_SEM_CHANNEL, .list_word = "sem",
    },
    [BACKEND_FAIR] = {
        .lua = lua_fair, .own = K_ACQ | K_REL | K_DROP | K_LEAVE,
        .keys = {PREFIX(KEYS_QUEUE), PREFIX(KEYS_QUEUE_TIMEOUT), PREFIX(KEYS_CHANNEL),
                 PREFIX(KEYS_TOKEN), PREFIX(KEYS_FAIR_OWNERS)},
        .args = {SCRIPTS_ARG_LETTER, SCRIPTS_ARG_LEASE, SCRIPTS_ARG_FIELD, SCRIPTS_ARG_QUEUE,
                 SCRIPTS_ARG_QUEUE_FOREIGN},
        .letters = {[BACKEND_ACQUIRE] = 'a', [BACKEND_RELEASE] = 'r', [BACKEND_DROP] = 'd',
                    [BACKEND_LEAVE] = 'l'},
        .once = 'o', .batch = K_RENEW, .renew = 'n',
        .acquire_key = PREFIX(KEYS_TOKEN), .renew_key = PREFIX(KEYS_FORCED),
        .release_key = PREFIX(KEYS_CHANNEL), .channel = KEYS_CHANNEL, .own_channel = 1,
        .list_word = "fair",
    },
    [BACKEND_ELECT] = {
        .lua = lua_elect, .own = K_ACQ | K_REL | K_DROP | K_LEAVE | K_LEADER,
        .value_reply = K_LEADER,
        .keys = {PREFIX(ELECT_QUEUE), PREFIX(ELECT_TIMEOUT), PREFIX(KEYS_CHANNEL),
                 PREFIX(KEYS_TOKEN), PREFIX(ELECT_LEADER)},
        .args = {SCRIPTS_ARG_LETTER, SCRIPTS_ARG_LEASE, SCRIPTS_ARG_FIELD, SCRIPTS_ARG_QUEUE,
                 SCRIPTS_ARG_VALUE},
        .letters = {[BACKEND_ACQUIRE] = 'a', [BACKEND_RELEASE] = 'r', [BACKEND_DROP] = 'd',
                    [BACKEND_LEAVE] = 'l', [BACKEND_LEADER] = 'g'},
        .once = 'o', .batch = K_RENEW, .renew = 'n',
        .acquire_key = PREFIX(KEYS_TOKEN), .renew_key = PREFIX(KEYS_FORCED),
        .release_key = PREFIX(KEYS_CHANNEL), .channel = KEYS_CHANNEL, .list_word = "elect",
    },
    /* Only its acquire: its holds are BACKEND_MUTEX ones, released,
     * renewed and watched as such. */
    [BACKEND_MULTI] = {
        .lua = lua_mlock, .own = K_ACQ, .batch = K_ACQ,
        .acquire_key = PREFIX(KEYS_TOKEN), .renew_key = PREFIX(KEYS_FORCED),
        .release_key = PREFIX(KEYS_CHANNEL), .channel = KEYS_CHANNEL,
    },
    /* A count-down latch (latch.lua): AWAIT's look, LATCHSET, COUNTDOWN,
     * LATCHCOUNT; no holds, no batch. Its keys: Redisson's channel,
     * dlockd's mark of the latches it sets, a semaphore's permit ids. */
    [BACKEND_LATCH] = {
        .lua = lua_latch, .own = K_ACQ | K_INIT | K_REL | SCRIPTS_KIND(BACKEND_STATUS),
        .value_reply = K_REL | SCRIPTS_KIND(BACKEND_STATUS),
        .keys = {{SCRIPTS_KEY_BRACED, "redisson_countdownlatch__channel__"},
                 PREFIX("dlock_latch"), SUFFIX(KEYS_SEM_TIMEOUT)},
        .args = {SCRIPTS_ARG_LETTER, SCRIPTS_ARG_COUNT},
        .letters = {[BACKEND_ACQUIRE] = 'a', [BACKEND_INIT] = 'i', [BACKEND_RELEASE] = 'r',
                    [BACKEND_STATUS] = 's'},
        .channel = "redisson_countdownlatch__channel__", .channel_form = SCRIPTS_KEY_BRACED,
        .list_word = "latch",
    },
};

/* The companions of the scripts that are no mode's own. */
static const scripts_key_t status_keys[SCRIPTS_MODE_KEYS] = {SUFFIX(KEYS_SEM_TIMEOUT)};
static const scripts_key_t force_keys[SCRIPTS_MODE_KEYS] = {
    PREFIX(KEYS_CHANNEL), PREFIX(KEYS_FORCED), SUFFIX(KEYS_SEM_TIMEOUT),
    PREFIX(KEYS_SEM_CHANNEL), PREFIX(KEYS_QUEUE), PREFIX(KEYS_RW_CHANNEL),
};

/* 1 if s (n bytes) starts as a companion of kind c does: "<kind>:" in
 * the prefix form, "<kind>{" braced. */
static int starts_as(const char *s, size_t n, const scripts_key_t *c) {
    if (c->form != SCRIPTS_KEY_PREFIX && c->form != SCRIPTS_KEY_BRACED) return 0;
    size_t cl = strlen(c->kind);
    return cl > 0 && n > cl + 1 && memcmp(s, c->kind, cl) == 0 &&
           s[cl] == (c->form == SCRIPTS_KEY_PREFIX ? ':' : '{');
}

int scripts_companion(const char *s, size_t n) {
    for (int m = 0; m < BACKEND_MODE_COUNT; m++) {
        const scripts_mode_t *r = &modes[m];
        for (size_t i = 0; i < SCRIPTS_MODE_KEYS && r->keys[i].form != 0; i++)
            if (starts_as(s, n, &r->keys[i])) return 1;
        const scripts_key_t ch = {r->channel_form ? r->channel_form : SCRIPTS_KEY_PREFIX,
                                  r->channel ? r->channel : ""};
        if (starts_as(s, n, &r->acquire_key) || starts_as(s, n, &r->renew_key) ||
            starts_as(s, n, &r->release_key) || starts_as(s, n, &r->wake_key) ||
            starts_as(s, n, &ch))
            return 1;
    }
    for (size_t i = 0; i < SCRIPTS_MODE_KEYS; i++)
        if (starts_as(s, n, &status_keys[i]) || starts_as(s, n, &force_keys[i])) return 1;
    return 0;
}

const scripts_mode_t *scripts_mode(backend_mode_t mode) {
    return &modes[mode];
}

script_id_t scripts_own(backend_mode_t mode) {
    if (modes[mode].lua == NULL) return SCRIPT_COUNT;
    for (int i = 0; i < (int)mode; i++)
        if (modes[i].lua == modes[mode].lua) return SCRIPT_OWN(i);
    return SCRIPT_OWN(mode);
}

const char *scripts_text(script_id_t id) {
    if (id < SCRIPT_OWN_FIRST) return core_text[id];
    if (id >= SCRIPT_COUNT) return NULL;
    backend_mode_t mode = (backend_mode_t)(id - SCRIPT_OWN_FIRST);
    return scripts_own(mode) == id ? modes[mode].lua : NULL;
}

/* 1 if id is a mode's own script (its ops' rows say how to call it). */
static int is_own(script_id_t id) {
    return id >= SCRIPT_OWN_FIRST && id < SCRIPT_COUNT;
}

/* A row's companions and arguments, as counted in a call. */
static size_t row_keys(const scripts_mode_t *m) {
    size_t n = 0;
    while (n < SCRIPTS_MODE_KEYS && m->keys[n].form != 0) n++;
    return n;
}

static size_t row_args(const scripts_mode_t *m) {
    size_t n = 0;
    while (n < SCRIPTS_MODE_ARGS && m->args[n] != SCRIPTS_ARG_END) n++;
    return n;
}

size_t scripts_channel(char *out, const char *prefix, const char *uuid, const char *name,
                       size_t len, backend_mode_t mode, uint64_t owner) {
    char key[KEYS_KEY_MAX];
    size_t klen = keys_lock(key, prefix, name, len), n;
    if (modes[mode].channel_form == SCRIPTS_KEY_BRACED) {
        n = strlen(modes[mode].channel);
        memcpy(out, modes[mode].channel, n);
        out[n++] = '{';
        memcpy(out + n, key, klen);
        n += klen;
        out[n++] = '}';
        out[n] = '\0';
        return n;
    }
    n = keys_companion(out, modes[mode].channel, key, klen);
    if (modes[mode].own_channel) {
        out[n++] = ':';
        n += keys_owner_field(out + n, uuid, owner);
    }
    return n;
}

/* ---- calls ---------------------------------------------------------------- */

int scripts_loaded(script_id_t id, unsigned flags) {
    if (scripts_text(id) == NULL) return 0;
    return (id != SCRIPT_OPS_ANY && id != SCRIPT_RENEW_ANY) || (flags & SCRIPTS_F_ANY_SLOT);
}

int scripts_batchable(const backend_op_t *op) {
    return (modes[op->mode].batch & SCRIPTS_KIND(op->type)) != 0;
}

/* 1 if op is a multi-name acquire: it takes a place per name in a batch. */
static int is_multi(const backend_op_t *op) {
    return op->mode == BACKEND_MULTI && op->type == BACKEND_ACQUIRE;
}

size_t scripts_width(const backend_op_t *op) {
    return is_multi(op) ? op->nnames : 1;
}

script_id_t scripts_choose(backend_op_t *const *ops, size_t n, unsigned flags) {
    int any = (flags & SCRIPTS_F_ANY_SLOT) != 0;
    const scripts_mode_t *m = &modes[ops[0]->mode];
    if (n == 1 && any && scripts_batchable(ops[0])) return SCRIPT_OPS_ANY;
    if (n == 1 && (m->own & SCRIPTS_KIND(ops[0]->type))) return scripts_own(ops[0]->mode);
    /* A quorum's acquires carry its fence rule, which only the batch
     * script takes; a raise has no script of its own. */
    if (n == 1 && ops[0]->type == BACKEND_ACQUIRE && (flags & SCRIPTS_F_QUORUM)) return SCRIPT_OPS;
    /* ... and so does an acquire that leaves the wake queue if granted */
    if (n == 1 && ops[0]->type == BACKEND_ACQUIRE && ops[0]->wake_leave) return SCRIPT_OPS;
    if (n > 1) {
        for (size_t i = 0; i < n; i++)
            if (ops[i]->type != BACKEND_RENEW || ops[i]->mode != BACKEND_MUTEX ||
                ops[i]->lease_ms != ops[0]->lease_ms)
                return any ? SCRIPT_OPS_ANY : SCRIPT_OPS;
        return any ? SCRIPT_RENEW_ANY : SCRIPT_RENEW;
    }
    switch (ops[0]->type) {
    case BACKEND_ACQUIRE: return SCRIPT_ACQUIRE;
    case BACKEND_RELEASE:
    case BACKEND_DROP: return SCRIPT_RELEASE;
    case BACKEND_STATUS: return SCRIPT_STATUS;
    case BACKEND_FORCE: return SCRIPT_FORCE;
    case BACKEND_WHO: return SCRIPT_WHO;
    default: return SCRIPT_OPS; /* a renewal, a raise */
    }
}

/* Room one argument of len bytes takes at most. */
#define ARG_ROOM(len) RESP_WRITE_ROOM(len)
/* Room any one operation's arguments take at most (SCRIPT_FORCE's keys:
 * the lock and six companions). */
#define OP_ROOM (ARG_ROOM(KEYS_KEY_MAX) + SCRIPTS_MODE_KEYS * ARG_ROOM(KEYS_COMPANION_MAX) + \
                 ARG_ROOM(24) + ARG_ROOM(KEYS_FIELD_MAX) + ARG_ROOM(1))
/* The publish command releases use: classic or sharded pub/sub. */
#define PUB_CMD(flags) ((flags) & SCRIPTS_F_SHARDED ? "spublish" : "publish")

/* A companion of key as a bulk string, written in place: the same bytes
 * as keys_companion() gives (a suffix: Redisson's suffixName), without a
 * copy in between. braces: key has no '{'. */
static size_t put_key(char *p, const scripts_key_t *c, const char *key, size_t klen, int braces) {
    size_t kindlen = strlen(c->kind), k;
    if (c->form == SCRIPTS_KEY_BRACED) braces = 1;
    size_t len = klen + (braces ? 2 : 0) + (c->form == SCRIPTS_KEY_TAG ? 0 : kindlen) +
                 (c->form == SCRIPTS_KEY_PREFIX || c->form == SCRIPTS_KEY_SUFFIX);
    k = resp_write_head(p, '$', len);
    if (c->form == SCRIPTS_KEY_PREFIX || c->form == SCRIPTS_KEY_BRACED) {
        memcpy(p + k, c->kind, kindlen);
        k += kindlen;
        if (c->form == SCRIPTS_KEY_PREFIX) p[k++] = ':';
    }
    if (braces) p[k++] = '{';
    memcpy(p + k, key, klen);
    k += klen;
    if (braces) p[k++] = '}';
    if (c->form == SCRIPTS_KEY_SUFFIX) {
        p[k++] = ':';
        memcpy(p + k, c->kind, kindlen);
        k += kindlen;
    }
    k += resp_write_end(p + k);
    return k;
}

static size_t put_keylist(char *p, const scripts_key_t *list, const char *key, size_t klen,
                          int braces) {
    size_t k = 0;
    for (size_t i = 0; i < SCRIPTS_MODE_KEYS && list[i].form != 0; i++)
        k += put_key(p + k, &list[i], key, klen, braces);
    return k;
}

/* An operation's keys: the lock, then its script's companions (the batch
 * script's one: the token, channel, forced marker or permit ids). */
static size_t put_keys(char *p, const backend_op_t *op, script_id_t id, const char *prefix,
                       size_t plen, unsigned flags) {
    const scripts_mode_t *m = &modes[op->mode];
    /* The lock key, prefix and name, straight into place; its companions
     * copy it from there. */
    size_t klen = plen + op->len, k = resp_write_head(p, '$', klen);
    char *key = p + k;
    memcpy(key, prefix, plen);
    memcpy(key + plen, op->name, op->len);
    k += klen;
    k += resp_write_end(p + k);
    int braces = memchr(key, '{', klen) == NULL;
    if (is_own(id)) return k + put_keylist(p + k, m->keys, key, klen, braces);
    switch (id) {
    case SCRIPT_STATUS: return k + put_keylist(p + k, status_keys, key, klen, braces);
    case SCRIPT_FORCE: return k + put_keylist(p + k, force_keys, key, klen, braces);
    case SCRIPT_WHO:
        if (flags & SCRIPTS_F_NO_REGISTRY) return k;
        k += resp_write_head(p + k, '$', plen + sizeof(KEYS_REGISTRY) - 1);
        memcpy(p + k, prefix, plen);
        memcpy(p + k + plen, KEYS_REGISTRY, sizeof(KEYS_REGISTRY) - 1);
        k += plen + sizeof(KEYS_REGISTRY) - 1;
        k += resp_write_end(p + k);
        return k;
    default: /* the lock's scripts and the batch scripts */
        if (op->type == BACKEND_RENEW) return k + put_key(p + k, &m->renew_key, key, klen, braces);
        if (op->type == BACKEND_ACQUIRE || op->type == BACKEND_FENCE)
            return k + put_key(p + k, &m->acquire_key, key, klen, braces);
        if (op->type == BACKEND_LEAVE) /* a daemon's place in the wake queue */
            return k + put_key(p + k, &m->wake_key, key, klen, braces);
        return k + put_key(p + k, &m->release_key, key, klen, braces);
    }
}

/* A mode's own script's arguments, as its args list says. */
static size_t put_own_args(char *p, const backend_op_t *op, const scripts_mode_t *m,
                           const char *field, size_t flen) {
    size_t k = 0;
    for (size_t i = 0; i < SCRIPTS_MODE_ARGS && m->args[i] != SCRIPTS_ARG_END; i++) {
        switch ((scripts_arg_t)m->args[i]) {
        case SCRIPTS_ARG_LETTER: {
            char letter = op->type == BACKEND_ACQUIRE && op->once && m->once ? m->once
                                                                               : m->letters[op->type];
            k += resp_write_bulk(p + k, &letter, 1);
            break;
        }
        case SCRIPTS_ARG_LEASE: k += resp_write_u64(p + k, op->lease_ms); break;
        case SCRIPTS_ARG_FIELD: k += resp_write_bulk(p + k, field, flen); break;
        case SCRIPTS_ARG_COUNT: k += resp_write_u64(p + k, op->count); break;
        case SCRIPTS_ARG_BASE: k += resp_write_u64(p + k, op->base); break;
        case SCRIPTS_ARG_QUEUE: k += resp_write_u64(p + k, op->queue_ms); break;
        case SCRIPTS_ARG_QUEUE_FOREIGN:
            k += resp_write_u64(p + k, op->queue_foreign_ms);
            break;
        case SCRIPTS_ARG_VALUE:
            k += resp_write_bulk(p + k, op->value ? op->value : "", op->value ? op->value_len : 0);
            break;
        case SCRIPTS_ARG_END: break;
        }
    }
    return k;
}

/* An operation's arguments, in the order its script wants them: SCRIPT_OPS
 * takes kind, number, owner ('a' lease, 'n' lease, 'r' all, 'x<letter>'
 * lease of a mode's own op, 's<permits>' lease); the acquire script lease,
 * owner; the release script owner, all; a mode's own script its args;
 * status the owner; force how long its marker stays. */
static size_t put_args(char *p, const backend_op_t *op, script_id_t id, const char *uuid,
                       unsigned flags) {
    const scripts_mode_t *m = &modes[op->mode];
    char num[24], field[KEYS_FIELD_MAX];
    size_t nlen, flen = keys_owner_field(field, uuid, op->owner), k = 0;
    int release = op->type == BACKEND_RELEASE || op->type == BACKEND_DROP;
    if (release) {
        num[0] = op->type == BACKEND_RELEASE ? '1' : '0';
        nlen = 1;
    } else if (op->type == BACKEND_FENCE) {
        nlen = keys_u64(num, op->raise_to);
    } else {
        nlen = keys_u64(num, op->lease_ms);
    }
    if (is_own(id)) return put_own_args(p, op, m, field, flen);
    switch (id) {
    case SCRIPT_OPS:
    case SCRIPT_OPS_ANY: {
        char letter[24];
        size_t llen = 1;
        if (m->batch_own && op->type != BACKEND_RENEW) { /* 'x<letter>' */
            letter[0] = 'x';
            letter[1] = m->letters[op->type];
            llen = 2;
            nlen = keys_u64(num, op->lease_ms);
        } else if (op->type == BACKEND_RENEW) {
            letter[0] = m->renew;
            if (m->renew == 's') llen += keys_u64(letter + 1, op->count);
        } else {
            letter[0] = op->type == BACKEND_ACQUIRE
                            ? (flags & SCRIPTS_F_QUORUM ? 'q' : op->wake_leave ? 'w' : 'a')
                        : op->type == BACKEND_FENCE ? 'f'
                        : op->type == BACKEND_LEAVE ? 'l'
                                                    : 'r';
        }
        k += resp_write_bulk(p, letter, llen);
        k += resp_write_bulk(p + k, num, nlen);
        return k + resp_write_bulk(p + k, field, flen);
    }
    case SCRIPT_ACQUIRE:
        k += resp_write_bulk(p, num, nlen);
        return k + resp_write_bulk(p + k, field, flen);
    case SCRIPT_RELEASE:
        k += resp_write_bulk(p, field, flen);
        return k + resp_write_bulk(p + k, num, nlen);
    case SCRIPT_WHO:
        return 0;
    case SCRIPT_STATUS:
    case SCRIPT_RENEW: /* its lease went once, before the owners */
    case SCRIPT_RENEW_ANY:
        return resp_write_bulk(p, field, flen);
    default: /* SCRIPT_FORCE */
        return resp_write_u64(p, SCRIPTS_FORCED_MARK_MS);
    }
}

/* A multi-name acquire's keys: every name's lock, then every name's fence
 * counter (so that the script passes each range to one EXISTS or MGET as
 * it is). -1 on no memory (what was written stays: the caller cuts it). */
static int put_multi_keys(buf_t *out, const backend_op_t *op, const char *prefix, size_t plen) {
    for (size_t i = 0; i < 2 * op->nnames; i++) {
        const backend_name_t *nm = &op->names[i % op->nnames];
        char *p = buf_reserve(out, OP_ROOM);
        if (p == NULL) return -1;
        char lock[OP_ROOM];
        size_t klen = plen + nm->len, k;
        memcpy(lock, prefix, plen);
        memcpy(lock + plen, nm->name, nm->len);
        if (i < op->nnames) {
            k = resp_write_bulk(p, lock, klen);
        } else {
            int braces = memchr(lock, '{', klen) == NULL;
            k = put_key(p, &modes[BACKEND_MULTI].acquire_key, lock, klen, braces);
        }
        buf_commit(out, k);
    }
    return 0;
}

/* A multi-name acquire's arguments in the batch script: 'm<letters>'
 * ('M<letters>' on a quorum's node: its fence rule), lease, owner in its
 * first place, empty ones in the others. */
static int put_multi_args(buf_t *out, const backend_op_t *op, const char *uuid, unsigned flags) {
    char field[KEYS_FIELD_MAX];
    size_t flen = keys_owner_field(field, uuid, op->owner);
    char *p = buf_reserve(out, ARG_ROOM(1 + op->nnames) + ARG_ROOM(24) + ARG_ROOM(KEYS_FIELD_MAX) +
                                   3 * (op->nnames - 1) * ARG_ROOM(0));
    if (p == NULL) return -1;
    size_t k = resp_write_head(p, '$', 1 + op->nnames);
    p[k++] = flags & SCRIPTS_F_QUORUM ? 'M' : 'm';
    memcpy(p + k, op->reentry, op->nnames);
    k += op->nnames;
    k += resp_write_end(p + k);
    k += resp_write_u64(p + k, op->lease_ms);
    k += resp_write_bulk(p + k, field, flen);
    for (size_t i = 3; i < 3 * op->nnames; i++) k += resp_write_bulk(p + k, "", 0);
    buf_commit(out, k);
    return 0;
}

/* MULTI's script (SCRIPT_OWN(BACKEND_MULTI), mlock.lua): the names' locks
 * and their fence counters, then the lease, the owner's field and the reentry
 * letters, and 'q' on a quorum's node (its fence rule). */
static int format_multi(buf_t *out, const char *sha, const backend_op_t *op,
                        const char *prefix, const char *uuid, unsigned flags) {
    int quorum = (flags & SCRIPTS_F_QUORUM) != 0;
    size_t start = out->len, plen = strlen(prefix), k;
    char field[KEYS_FIELD_MAX];
    char *p = buf_reserve(out, 1 + 20 + 2 + ARG_ROOM(7) + ARG_ROOM(SCRIPTS_SHA_LEN) + ARG_ROOM(20));
    if (p == NULL) goto nomem;
    k = resp_write_head(p, '*', 3 + 2 * op->nnames + 3 + (size_t)quorum);
    k += resp_write_bulk(p + k, "EVALSHA", 7);
    k += resp_write_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += resp_write_u64(p + k, 2 * op->nnames);
    buf_commit(out, k);
    if (put_multi_keys(out, op, prefix, plen) != 0) goto nomem;
    size_t flen = keys_owner_field(field, uuid, op->owner);
    if ((p = buf_reserve(out, ARG_ROOM(24) + ARG_ROOM(KEYS_FIELD_MAX) + ARG_ROOM(op->nnames) +
                                  ARG_ROOM(1))) == NULL)
        goto nomem;
    k = resp_write_u64(p, op->lease_ms);
    k += resp_write_bulk(p + k, field, flen);
    k += resp_write_bulk(p + k, op->reentry, op->nnames);
    if (quorum) k += resp_write_bulk(p + k, "q", 1);
    buf_commit(out, k);
    return 0;
nomem:
    out->len = start;
    return -1;
}

int scripts_format(buf_t *out, script_id_t id, const char *sha, backend_op_t *const *ops,
                   size_t n, const char *prefix, const char *uuid, unsigned flags) {
    size_t start = out->len, numkeys, argc, k, plen = strlen(prefix);
    if (id == SCRIPT_OWN(BACKEND_MULTI)) return format_multi(out, sha, ops[0], prefix, uuid, flags);
    int any = id == SCRIPT_OPS_ANY || id == SCRIPT_RENEW_ANY;
    char *p;
    size_t slots = 0; /* the batch script's places: an op's, or one per name */
    for (size_t i = 0; i < n; i++) slots += scripts_width(ops[i]);

    switch (id) {
    case SCRIPT_OPS: numkeys = 2 * slots; argc = 3 + 5 * slots + 1; break;
    case SCRIPT_OPS_ANY: numkeys = 0; argc = 3 + 1 + 5 * slots + 1; break;
    case SCRIPT_RENEW: numkeys = 2 * n; argc = 3 + 3 * n + 1; break;
    case SCRIPT_RENEW_ANY: numkeys = 0; argc = 3 + 1 + 3 * n + 1; break;
    case SCRIPT_STATUS: numkeys = 2; argc = 6; break;
    case SCRIPT_WHO:
        numkeys = flags & SCRIPTS_F_NO_REGISTRY ? 1 : 2;
        argc = 3 + numkeys;
        break;
    case SCRIPT_FORCE: numkeys = 7; argc = 12; break;
    default:
        if (is_own(id)) { /* the lock, its keys; its args, publish */
            const scripts_mode_t *own = &modes[ops[0]->mode];
            numkeys = 1 + row_keys(own);
            argc = 3 + numkeys + row_args(own) + 1;
        } else {
            numkeys = 2;
            argc = 8; /* acquire 7: no publish command */
        }
        break;
    }
    if (id == SCRIPT_ACQUIRE) argc = 7;
    /* Room is reserved one operation at a time, so that a batch takes
     * about what it needs; the keys of all come first, then the other
     * arguments. The _ANY layouts pass the keys in ARGV, after their
     * count. */
    p = buf_reserve(out, 1 + 20 + 2 + ARG_ROOM(7) + ARG_ROOM(SCRIPTS_SHA_LEN) + 2 * ARG_ROOM(20));
    if (p == NULL) goto nomem;
    k = resp_write_head(p, '*', argc);
    k += resp_write_bulk(p + k, "EVALSHA", 7);
    k += resp_write_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += resp_write_u64(p + k, numkeys);
    if (any) k += resp_write_u64(p + k, slots);
    buf_commit(out, k);
    for (size_t i = 0; i < n; i++) {
        if (is_multi(ops[i])) {
            if (put_multi_keys(out, ops[i], prefix, plen) != 0) goto nomem;
            continue;
        }
        if ((p = buf_reserve(out, OP_ROOM)) == NULL) goto nomem;
        buf_commit(out, put_keys(p, ops[i], id, prefix, plen, flags));
    }
    if (id == SCRIPT_RENEW || id == SCRIPT_RENEW_ANY) {
        if ((p = buf_reserve(out, ARG_ROOM(24))) == NULL) goto nomem;
        buf_commit(out, resp_write_u64(p, ops[0]->lease_ms));
    }
    for (size_t i = 0; i < n; i++) {
        if (is_multi(ops[i])) {
            if (put_multi_args(out, ops[i], uuid, flags) != 0) goto nomem;
            continue;
        }
        if ((p = buf_reserve(out, OP_ROOM)) == NULL) goto nomem;
        buf_commit(out, put_args(p, ops[i], id, uuid, flags));
    }
    if (id == SCRIPT_OPS || id == SCRIPT_OPS_ANY || id == SCRIPT_RELEASE ||
        id == SCRIPT_FORCE || is_own(id)) {
        if ((p = buf_reserve(out, ARG_ROOM(8))) == NULL) goto nomem;
        const char *pub = PUB_CMD(flags);
        buf_commit(out, resp_write_bulk(p, pub, strlen(pub)));
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
    case SCRIPTS_TAKEN_LEADER:
        res->outcome = BACKEND_TAKEN;
        res->ttl_ms = v;
        res->leader = 1;
        return 0;
    default: return -1;
    }
}

/* An op's value reply, {fence, value, pttl} ({0, '', -2} none; {-1, '',
 * held} another kind), into res, its value copied into op->answer (the
 * reply may be gone by the callback: replicas_ack's WAIT), cut to
 * BACKEND_ANSWER_MAX, each byte outside 0x21-0x7E as '?'
 * (backend_clean_value). -1 on a wrong shape or no room. */
static int decode_value(backend_op_t *op, const redisReply *r) {
    backend_result_t *res = &op->res;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !is_int(r->element[0]) ||
        r->element[1]->type != REDIS_REPLY_STRING || !is_int(r->element[2]))
        return -1;
    long long f = r->element[0]->integer;
    if (f < 0) {
        res->outcome = BACKEND_WRONG_KIND;
        res->held = (backend_mode_t)r->element[2]->integer;
        return 0;
    }
    if (op->answer == NULL) return -1;
    size_t vlen = r->element[1]->len;
    if (vlen > BACKEND_ANSWER_MAX) vlen = BACKEND_ANSWER_MAX;
    backend_clean_value(op->answer, vlen + 1, r->element[1]->str, vlen);
    res->fence = (uint64_t)f;
    res->value = op->answer;
    res->value_len = vlen;
    res->ttl_ms = r->element[2]->integer;
    return 0;
}

static void set_renewal(backend_result_t *res, long long v) {
    res->renewal = v == SCRIPTS_RENEWED ? BACKEND_RENEWED
                   : v == SCRIPTS_FORCED ? BACKEND_FORCED
                                         : BACKEND_GONE;
}

/* The batch script's one line per operation. An operation's own error
 * fails it alone; the error text must stay valid during its callback, so
 * it points into the reply, which outlives the callbacks. */
static int decode_multi(backend_op_t *op, const redisReply *r);

static int decode_ops(backend_op_t *const *ops, size_t n, redisReply *r, char *err,
                      size_t errlen) {
    size_t slots = 0, at = 0;
    for (size_t i = 0; i < n; i++) slots += scripts_width(ops[i]);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 * slots) {
        snprintf(err, errlen, "unexpected reply (type %d) from the batch script", r->type);
        return -1;
    }
    for (size_t i = 0; i < n; at += scripts_width(ops[i]), i++) {
        backend_result_t *res = &ops[i]->res;
        const redisReply *x = r->element[2 * at], *y = r->element[2 * at + 1];
        int pair = is_int(y);
        long long a = is_int(x) ? x->integer : 0, v = pair ? y->integer : 0;
        memset(res, 0, sizeof(*res));
        if (x->type == REDIS_REPLY_STRING) { /* the error's text */
            res->status = BACKEND_FAILED;
            res->error = x->str;
            continue;
        }
        if (is_multi(ops[i])) {
            if (decode_multi(ops[i], x) != 0) {
                memset(res, 0, sizeof(*res));
                res->status = BACKEND_FAILED;
                res->error = "bad multi-name acquire result from the batch script";
            }
            continue;
        }
        if (!is_int(x)) {
            res->status = BACKEND_FAILED;
            res->error = "bad result from the batch script";
            continue;
        }
        switch (ops[i]->type) {
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
    size_t k = resp_write_head(p, '*', 7);
    k += resp_write_bulk(p + k, "EVALSHA", 7);
    k += resp_write_bulk(p + k, sha, SCRIPTS_SHA_LEN);
    k += resp_write_bulk(p + k, "1", 1);
    k += resp_write_head(p + k, '$', plen + sizeof(KEYS_REGISTRY) - 1);
    memcpy(p + k, prefix, plen);
    memcpy(p + k + plen, KEYS_REGISTRY, sizeof(KEYS_REGISTRY) - 1);
    k += plen + sizeof(KEYS_REGISTRY) - 1;
    k += resp_write_end(p + k);
    k += resp_write_bulk(p + k, uuid, ulen);
    k += resp_write_bulk(p + k, name, nlen);
    k += resp_write_bulk(p + k, stale, slen);
    buf_commit(out, k);
    return 0;
}

/* MULTI's script's reply: {GRANTED, v1..vn} or {code, value, index}. */
static int decode_multi(backend_op_t *op, const redisReply *r) {
    backend_result_t *res = &op->res;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_int(r->element[0])) return -1;
    for (size_t i = 1; i < r->elements; i++)
        if (!is_int(r->element[i])) return -1;
    long long code = r->element[0]->integer;
    if (code == SCRIPTS_GRANTED) {
        if (r->elements != op->nnames + 1) return -1;
        res->outcome = BACKEND_GRANTED;
        for (size_t i = 0; i < op->nnames; i++) op->values[i] = (uint64_t)r->element[i + 1]->integer;
        return 0;
    }
    if (r->elements != 3) return -1;
    long long at = r->element[2]->integer;
    if (at < 1 || (size_t)at > op->nnames) return -1;
    res->which = (size_t)at - 1;
    return set_acquire(res, code, r->element[1]->integer);
}

int scripts_decode(script_id_t id, backend_op_t *const *ops, size_t n, redisReply *r,
                   char *err, size_t errlen) {
    if (id == SCRIPT_OWN(BACKEND_MULTI)) {
        memset(&ops[0]->res, 0, sizeof(ops[0]->res));
        if (decode_multi(ops[0], r) == 0) return 0;
        snprintf(err, errlen, "unexpected reply (type %d) from the mlock script", r->type);
        return -1;
    }
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
    if (is_own(id)) {
        if (modes[ops[0]->mode].value_reply & SCRIPTS_KIND(ops[0]->type)) {
            if (decode_value(ops[0], r) == 0) return 0;
            goto bad;
        }
        /* an acquire's (or SEMINIT's refusal) pair; a release's pair, or
         * holds left (SEMINIT: 1 or 0) */
        if (is_pair(r) && (ops[0]->type == BACKEND_ACQUIRE || ops[0]->type == BACKEND_INIT)) {
            if (set_acquire(res, r->element[0]->integer, r->element[1]->integer) == 0) return 0;
        } else if (is_pair(r) && ops[0]->type != BACKEND_ACQUIRE) {
            res->holds = r->element[0]->integer;
            long long v = r->element[1]->integer;
            res->others_waiting = (int)(v > 1000000 ? 1000000 : v);
            return 0;
        } else if (is_int(r) && ops[0]->type != BACKEND_ACQUIRE) {
            res->holds = r->integer;
            return 0;
        }
        goto bad;
    }
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
    default:
        break;
    }
bad:
    snprintf(err, errlen, "unexpected reply type %d from a script", r->type);
    return -1;
}
