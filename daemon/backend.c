/* The Redis backend on a standalone Redis: hiredis async on the libuv loop,
 * Redisson-compatible Lua scripts run with EVALSHA, pub/sub wake-ups.
 * SPDX-License-Identifier: MIT */
#include "backend.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uuid/uuid.h>

#include "daemon/util/hmap.h"
#include "log.h"
#include "daemon/util/util.h"

/* Room for a key: prefix, name and the longest companion prefix. */
#define KEY_MAX (CONF_PREFIX_MAX + 255 + 64)
#define FIELD_MAX 64

/* ---- scripts ---------------------------------------------------------- */

typedef enum {
    SCRIPT_ACQUIRE = 0,
    SCRIPT_RELEASE,
    SCRIPT_RENEW,
    SCRIPT_STATUS,
    SCRIPT_FORCE,
    SCRIPT_OPS,
    SCRIPT_COUNT
} script_id_t;

/* K1 lock hash, K2 fence counter (KEYS[1], KEYS[2]); A1 lease ms, A2 owner
 * (ARGV[1], ARGV[2]). {0, fence} new grant, {1, holds} reentered, {2, pttl}
 * taken. A missing counter starts at Redis TIME in microseconds, so fences
 * never go back after Redis loses its data. The free case comes first,
 * with the fewest calls: it is the common one. */
#define LUA_ACQUIRE \
    "if redis.call('exists', K1) == 0 then\n" \
    "  redis.call('hset', K1, A2, 1)\n" \
    "  redis.call('pexpire', K1, A1)\n" \
    "  local f = redis.call('incr', K2)\n" \
    "  if f == 1 then\n" \
    "    local t = redis.call('time')\n" \
    "    redis.call('set', K2, t[1] .. string.format('%06d', tonumber(t[2])))\n" \
    "    f = redis.call('incr', K2)\n" \
    "  end\n" \
    "  return {0, f}\n" \
    "end\n" \
    "if redis.call('hexists', K1, A2) == 1 then\n" \
    "  local n = redis.call('hincrby', K1, A2, 1)\n" \
    "  redis.call('pexpire', K1, A1)\n" \
    "  return {1, n}\n" \
    "end\n" \
    "return {2, redis.call('pttl', K1)}\n"
static const char script_acquire[] =
    "local K1, K2, A1, A2 = KEYS[1], KEYS[2], ARGV[1], ARGV[2]\n" LUA_ACQUIRE;

/* K1 lock hash, K2 channel; A1 owner, A2 '1' to release
 * all holds (delete and publish '0', as Redisson's unlock does) or '0' to
 * drop one hold without ever deleting. Returns holds left, -1 if not held,
 * or {0, subscribers that got the release message}. */
#define LUA_RELEASE \
    "local n = redis.call('hget', K1, A1)\n" \
    "if not n then return -1 end\n" \
    "if A2 == '0' then\n" \
    "  if tonumber(n) > 1 then return redis.call('hincrby', K1, A1, -1) end\n" \
    "  return tonumber(n)\n" \
    "end\n" \
    "redis.call('del', K1)\n" \
    "return {0, redis.call('publish', K2, '0')}\n"
static const char script_release[] =
    "local K1, K2, A1, A2 = KEYS[1], KEYS[2], ARGV[1], ARGV[2]\n" LUA_RELEASE;

/* KEYS: lock hash and forced marker per lock; ARGV[1] lease ms, then one
 * owner per lock. Returns one character per lock: '1' renewed, '0' gone,
 * '2' removed by force. A key of another type counts as gone, and does not
 * fail the other locks of the batch. */
static const char script_renew[] =
    "local r = {}\n"
    "for i = 1, #ARGV - 1 do\n"
    "  local k = KEYS[2 * i - 1]\n"
    "  if redis.pcall('hexists', k, ARGV[i + 1]) == 1 then\n"
    "    redis.call('pexpire', k, ARGV[1])\n"
    "    r[i] = '1'\n"
    "  elseif redis.pcall('get', KEYS[2 * i]) == ARGV[i + 1] then\n"
    "    r[i] = '2'\n"
    "  else\n"
    "    r[i] = '0'\n"
    "  end\n"
    "end\n"
    "return table.concat(r)\n";

/* KEYS[1] lock hash; ARGV[1] owner. {pttl, this owner's holds}. */
static const char script_status[] =
    "local t = redis.call('pttl', KEYS[1])\n"
    "local n = redis.call('hget', KEYS[1], ARGV[1])\n"
    "return {t, tonumber(n or '0')}\n";

/* KEYS[1] lock hash, KEYS[2] channel, KEYS[3] forced marker; ARGV[1] how
 * long the marker outlives the lock. Removes the lock whoever holds it,
 * leaves a marker naming the owner so its daemon can say 'forced'. */
static const char script_force[] =
    "local f = redis.call('hkeys', KEYS[1])\n"
    "if #f == 0 then return 0 end\n"
    "local t = redis.call('pttl', KEYS[1])\n"
    "if t < 0 then t = 0 end\n"
    "redis.call('set', KEYS[3], f[1], 'px', t + tonumber(ARGV[1]))\n"
    "redis.call('del', KEYS[1])\n"
    "redis.call('publish', KEYS[2], '0')\n"
    "return 1\n";

/* Many acquires and releases in one call: the same two script bodies, run
 * as functions (K1, K2, A1, A2 are their parameters), one after
 * the other in the order they were asked for. KEYS: two per operation (the
 * lock and its token or channel); ARGV: three per operation ('a' with lease
 * and owner, or 'r' with owner and '1'/'0'). One line per operation comes
 * back: "0:<fence>", "1:<holds>", "2:<pttl>", a release's "<holds left>",
 * or "E<error>" when that operation failed (the others still run). */
static const char script_ops[] =
    "local acquire = function(K1, K2, A1, A2)\n" LUA_ACQUIRE "end\n"
    "local release = function(K1, K2, A1, A2)\n" LUA_RELEASE "end\n"
    "local out = {}\n"
    "for i = 1, #KEYS / 2 do\n"
    "  local ok, r\n"
    "  if ARGV[3 * i - 2] == 'a' then\n"
    "    ok, r = pcall(acquire, KEYS[2 * i - 1], KEYS[2 * i], ARGV[3 * i - 1], ARGV[3 * i])\n"
    "  else\n"
    "    ok, r = pcall(release, KEYS[2 * i - 1], KEYS[2 * i], ARGV[3 * i], ARGV[3 * i - 1])\n"
    "  end\n"
    "  if not ok then\n"
    "    out[i] = 'E' .. tostring(type(r) == 'table' and r.err or r)\n"
    "  elseif type(r) == 'table' then\n"
    "    out[i] = string.format('%d:%d', r[1], r[2])\n"
    "  else\n"
    "    out[i] = string.format('%d', r)\n"
    "  end\n"
    "end\n"
    "return table.concat(out, '\\n')\n";

static const char *const scripts[SCRIPT_COUNT] = {
    script_acquire, script_release, script_renew, script_status, script_force, script_ops,
};

/* ---- state ------------------------------------------------------------ */

typedef enum {
    CONN_DOWN = 0,    /* no context; a reconnect may be scheduled */
    CONN_CONNECTING,  /* TCP/Unix connect in progress */
    CONN_HANDSHAKE,   /* AUTH, SELECT, SCRIPT LOAD in flight */
    CONN_UP
} conn_state_t;

typedef struct conn_s conn_t;
typedef struct cmd_s cmd_t;

struct conn_s {
    backend_t *b;
    const char *role;           /* "command" or "pubsub", for logs */
    int is_sub;
    redisAsyncContext *ac;
    conn_state_t state;
    timers_entry_t connect_timer;  /* connect + handshake deadline */
    timers_entry_t retry_timer;    /* reconnect backoff */
    timers_entry_t cmd_timer;      /* deadline of the oldest command */
    uint32_t backoff_ms;
    cmd_t *oldest, *newest;        /* commands awaiting replies, in order */
    int handshake_left;
    int warned;                    /* a down warning was logged */
    int write_pending;             /* hiredis has output for the flusher */
    int in_flush;                  /* inside redisAsyncHandleWrite from the flusher */
};

typedef enum {
    OP_HANDSHAKE = 0,
    OP_ACQUIRE,
    OP_RELEASE,
    OP_RENEW,
    OP_STATUS,
    OP_FORCE,
    OP_OPS          /* a batch of acquires and releases */
} op_t;

/* One acquire or release waiting for its batch. */
typedef struct bop_s {
    op_t op;            /* OP_ACQUIRE or OP_RELEASE */
    backend_cb cb;
    void *data;
    size_t str;         /* its five strings start here in the batch's offsets */
} bop_t;

struct cmd_s {
    cmd_t *prev, *next;         /* the connection's pending list */
    conn_t *conn;
    op_t op;
    script_id_t script;         /* for a NOSCRIPT retry */
    char *formatted;            /* the RESP command, kept for a retry */
    long long formatted_len;
    int retried;
    uint64_t deadline;
    backend_cb cb;
    void *data;
    size_t count;               /* renew: items; OP_OPS: operations */
    bop_t *bops;                /* OP_OPS: the operations, in order */
};

typedef enum {
    SUB_IDLE = 0,
    SUB_SUBSCRIBING,
    SUB_ACTIVE,
    SUB_UNSUBSCRIBING
} sub_state_t;

typedef struct sub_s {
    hmap_node_t node;           /* keyed by the channel name */
    backend_t *b;
    sub_state_t state;
    int want;                   /* the lock manager wants it subscribed */
    backend_sub_cb cb;
    void *data;
    size_t len;
    char channel[];
} sub_t;

struct backend_s {
    uv_loop_t *loop;
    const conf_t *conf;
    timers_t *timers;
    conn_t cmd;                 /* scripts */
    conn_t sub;                 /* SUBSCRIBE only */
    char sha[SCRIPT_COUNT][41];
    char uuid[37];
    char target[CONF_STR_MAX + 32];     /* where Redis is, without credentials */
    char down_reason[BACKEND_ERR_LEN];  /* why the command connection is down */
    hmap_t subs;
    backend_state_cb state_cb;
    void *state_data;
    int freeing;
    uv_prepare_t *flusher;      /* writes queued commands before each poll */

    /* acquires and releases gathered during one loop iteration */
    bop_t *bops;
    size_t nbops, capbops;
    char *bstr;                 /* their strings, back to back */
    size_t bstrlen, bstrcap;
    size_t *boff;               /* five (offset, length) pairs per operation */
    size_t nboff, capboff;
};

static void conn_connect(conn_t *c);
static void conn_drop(conn_t *c, const char *why);
static void send_subscribe(backend_t *b, sub_t *s);
static void on_channel(redisAsyncContext *ac, void *r, void *privdata);

/* ---- keys ------------------------------------------------------------- */

/* The lock's key: key_prefix + name. */
static size_t lock_key(const backend_t *b, char *out, const char *name, size_t len) {
    size_t p = strlen(b->conf->key_prefix);
    memcpy(out, b->conf->key_prefix, p);
    memcpy(out + p, name, len);
    out[p + len] = '\0';
    return p + len;
}

/* Decimal digits of v at out (no NUL); returns how many. On the hot path
 * of every script call, so not snprintf. */
static size_t put_u64(char *out, uint64_t v) {
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

/* A companion key, by Redisson's prefixName rule: "prefix:{key}", or
 * "prefix:key" when key already has a '{', so all stay in one slot. */
static size_t companion(char *out, const char *prefix, const char *key, size_t klen) {
    int braces = memchr(key, '{', klen) == NULL;
    size_t p = strlen(prefix), n = 0;
    memcpy(out, prefix, p);
    n = p;
    out[n++] = ':';
    if (braces) out[n++] = '{';
    memcpy(out + n, key, klen);
    n += klen;
    if (braces) out[n++] = '}';
    out[n] = '\0';
    return n;
}

/* "<uuid>:<owner>", NUL-terminated. */
static size_t owner_field(const backend_t *b, char *out, uint64_t owner) {
    memcpy(out, b->uuid, 36);
    out[36] = ':';
    size_t n = 37 + put_u64(out + 37, owner);
    out[n] = '\0';
    return n;
}

/* Formats a command in RESP once, with one allocation. NUL-terminated, as
 * hiredis's own formatter does: hiredis scans the command with strchr. */
static long long resp_format(char **out, int argc, const char **argv, const size_t *argvlen) {
    size_t total = 1 + 20 + 2 + 1;
    for (int i = 0; i < argc; i++) total += 1 + 20 + 2 + argvlen[i] + 2;
    char *p = malloc(total);
    if (p == NULL) return -1;
    size_t n = 0;
    p[n++] = '*';
    n += put_u64(p + n, (uint64_t)argc);
    p[n++] = '\r';
    p[n++] = '\n';
    for (int i = 0; i < argc; i++) {
        p[n++] = '$';
        n += put_u64(p + n, argvlen[i]);
        p[n++] = '\r';
        p[n++] = '\n';
        memcpy(p + n, argv[i], argvlen[i]);
        n += argvlen[i];
        p[n++] = '\r';
        p[n++] = '\n';
    }
    p[n] = '\0';
    *out = p;
    return (long long)n;
}

/* ---- results ---------------------------------------------------------- */

static void fail(cmd_t *cmd, backend_status_t status, const char *error) {
    backend_result_t res = {.status = status, .error = error};
    if (cmd->op == OP_OPS) {
        for (size_t i = 0; i < cmd->count; i++) cmd->bops[i].cb(cmd->bops[i].data, &res);
        return;
    }
    if (cmd->cb) cmd->cb(cmd->data, &res);
}

static int is_int(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_INTEGER;
}

/* Parses a decimal, possibly negative; returns the end. */
static const char *get_ll(const char *p, const char *end, long long *v) {
    int neg = 0;
    long long x = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    while (p < end && *p >= '0' && *p <= '9') x = x * 10 + (*p++ - '0');
    *v = neg ? -x : x;
    return p;
}

/* Hands each operation of a batch its line of the reply. */
static void deliver_ops(cmd_t *cmd, const char *str, size_t len) {
    const char *p = str, *end = str + len;
    char err[BACKEND_ERR_LEN];
    for (size_t i = 0; i < cmd->count; i++) {
        bop_t *op = &cmd->bops[i];
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) eol = end;
        backend_result_t res = {.status = BACKEND_OK};
        long long a = 0, v = 0;
        if (p >= end) {
            res.status = BACKEND_FAILED;
            res.error = "short reply from the batch script";
        } else if (*p == 'E') {
            snprintf(err, sizeof(err), "%.*s", (int)(eol - p - 1), p + 1);
            res.status = BACKEND_FAILED;
            res.error = err;
        } else if (op->op == OP_RELEASE) {
            const char *q = get_ll(p, eol, &v);
            res.holds = v;
            if (q < eol && *q == ':') get_ll(q + 1, eol, &res.receivers);
        } else {
            const char *q = get_ll(p, eol, &a);
            if (q < eol && *q == ':') get_ll(q + 1, eol, &v);
            res.outcome = (backend_outcome_t)a;
            if (a == BACKEND_GRANTED) res.fence = (uint64_t)v;
            else if (a == BACKEND_REENTERED) res.holds = v;
            else res.ttl_ms = v;
        }
        op->cb(op->data, &res);
        p = eol < end ? eol + 1 : end;
    }
}

/* Turns a script's reply into a result for cmd's operation. */
static void deliver(cmd_t *cmd, redisReply *r) {
    backend_result_t res = {.status = BACKEND_OK};
    char err[BACKEND_ERR_LEN];

    switch (cmd->op) {
    case OP_ACQUIRE:
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_int(r->element[0]) ||
            !is_int(r->element[1]))
            goto bad;
        res.outcome = (backend_outcome_t)r->element[0]->integer;
        if (res.outcome == BACKEND_GRANTED) res.fence = (uint64_t)r->element[1]->integer;
        else if (res.outcome == BACKEND_REENTERED) res.holds = r->element[1]->integer;
        else if (res.outcome == BACKEND_TAKEN) res.ttl_ms = r->element[1]->integer;
        else goto bad;
        break;
    case OP_RELEASE:
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_int(r->element[0]) &&
            is_int(r->element[1])) {
            res.holds = r->element[0]->integer;
            res.receivers = r->element[1]->integer;
            break;
        }
        if (!is_int(r)) goto bad;
        res.holds = r->integer;
        break;
    case OP_RENEW: {
        if (r->type != REDIS_REPLY_STRING || r->len != cmd->count) goto bad;
        uint8_t small[64];
        uint8_t *v = cmd->count <= sizeof(small) ? small : malloc(cmd->count);
        if (v == NULL) {
            fail(cmd, BACKEND_FAILED, "out of memory");
            return;
        }
        for (size_t i = 0; i < cmd->count; i++) {
            char x = r->str[i];
            v[i] = (uint8_t)(x == '1' ? BACKEND_RENEWED : x == '2' ? BACKEND_FORCED : BACKEND_GONE);
        }
        res.renewed = v;
        res.count = cmd->count;
        if (cmd->cb) cmd->cb(cmd->data, &res);
        if (v != small) free(v);
        return;
    }
    case OP_STATUS:
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_int(r->element[0]) ||
            !is_int(r->element[1]))
            goto bad;
        res.ttl_ms = r->element[0]->integer;
        res.holds = r->element[1]->integer;
        break;
    case OP_FORCE:
        if (!is_int(r)) goto bad;
        res.removed = r->integer;
        break;
    case OP_OPS:
        if (r->type != REDIS_REPLY_STRING) goto bad;
        deliver_ops(cmd, r->str, r->len);
        return;
    case OP_HANDSHAKE:
        break;
    }
    if (cmd->cb) cmd->cb(cmd->data, &res);
    return;
bad:
    snprintf(err, sizeof(err), "unexpected reply type %d from a script", r->type);
    fail(cmd, BACKEND_FAILED, err);
}

/* ---- sending ---------------------------------------------------------- */

static void unlink_cmd(cmd_t *cmd) {
    conn_t *c = cmd->conn;
    if (cmd->prev) cmd->prev->next = cmd->next;
    else c->oldest = cmd->next;
    if (cmd->next) cmd->next->prev = cmd->prev;
    else c->newest = cmd->prev;
    cmd->prev = cmd->next = NULL;
}

static void free_cmd(cmd_t *cmd) {
    free(cmd->formatted);
    free(cmd->bops);
    free(cmd);
}

static void on_cmd_timer(timers_entry_t *t) {
    conn_t *c = container_of(t, conn_t, cmd_timer);
    cmd_t *old = c->oldest;
    if (old == NULL) return;
    uint64_t now = timers_now(c->b->timers);
    if (old->deadline <= now) {
        conn_drop(c, "no reply within command_timeout_ms");
        return;
    }
    timers_start_at(c->b->timers, &c->cmd_timer, old->deadline, on_cmd_timer);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata);

/* Queues cmd on c with fn as hiredis's callback; on failure, fails it at
 * once. Every queued command's callback is later run by hiredis, with a
 * NULL reply if the connection goes away first. */
static void submit_with(conn_t *c, cmd_t *cmd, redisCallbackFn *fn) {
    cmd->conn = c;
    if (c->ac == NULL || (c->state != CONN_UP && cmd->op != OP_HANDSHAKE)) {
        fail(cmd, BACKEND_DOWN, backend_down_reason(c->b));
        free_cmd(cmd);
        return;
    }
    if (redisAsyncFormattedCommand(c->ac, fn, cmd, cmd->formatted,
                                   (size_t)cmd->formatted_len) != REDIS_OK) {
        fail(cmd, BACKEND_DOWN, c->ac->errstr[0] ? c->ac->errstr : backend_down_reason(c->b));
        free_cmd(cmd);
        return;
    }
    cmd->deadline = timers_now(c->b->timers) + c->b->conf->command_timeout_ms;
    cmd->prev = c->newest;
    cmd->next = NULL;
    if (c->newest) c->newest->next = cmd;
    else c->oldest = cmd;
    c->newest = cmd;
    if (!timers_active(&c->cmd_timer))
        timers_start_at(c->b->timers, &c->cmd_timer, c->oldest->deadline, on_cmd_timer);
}

static void submit(conn_t *c, cmd_t *cmd) {
    submit_with(c, cmd, on_reply);
}

static cmd_t *new_cmd(op_t op, backend_cb cb, void *data, int argc, const char **argv,
                      const size_t *argvlen) {
    cmd_t *cmd = calloc(1, sizeof(*cmd));
    if (cmd == NULL) return NULL;
    cmd->op = op;
    cmd->cb = cb;
    cmd->data = data;
    cmd->formatted_len = resp_format(&cmd->formatted, argc, argv, argvlen);
    if (cmd->formatted_len < 0) {
        free(cmd);
        return NULL;
    }
    return cmd;
}

/* Runs a script with EVALSHA: argv[0..2] are filled in here. */
static void batch_flush(backend_t *b);

static void eval(backend_t *b, op_t op, script_id_t script, int argc, const char **argv,
                 size_t *argvlen, backend_cb cb, void *data, size_t count) {
    batch_flush(b); /* keep the order in which operations were asked for */
    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = b->sha[script];
    argvlen[1] = strlen(b->sha[script]);
    if (b->cmd.state != CONN_UP) {
        backend_result_t res = {.status = BACKEND_DOWN, .error = backend_down_reason(b)};
        cb(data, &res);
        return;
    }
    cmd_t *cmd = new_cmd(op, cb, data, argc, argv, argvlen);
    if (cmd == NULL) {
        backend_result_t res = {.status = BACKEND_FAILED, .error = "out of memory"};
        cb(data, &res);
        return;
    }
    cmd->script = script;
    cmd->count = count;
    submit(&b->cmd, cmd);
}

static void on_script_loaded(void *data, const backend_result_t *res);

static void on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    redisReply *r = reply;
    cmd_t *cmd = privdata;
    conn_t *c = cmd->conn;
    (void)ac;

    unlink_cmd(cmd);
    if (r == NULL) {
        fail(cmd, BACKEND_DOWN, "redis connection lost");
    } else if (r->type == REDIS_REPLY_ERROR) {
        if (strncmp(r->str, "NOSCRIPT", 8) == 0 && !cmd->retried && c->state == CONN_UP) {
            /* Scripts were flushed: load this one again, then resend. Both
             * go down the same connection, so the load runs first. */
            backend_t *b = c->b;
            const char *argv[3] = {"SCRIPT", "LOAD", scripts[cmd->script]};
            size_t argvlen[3] = {6, 4, strlen(scripts[cmd->script])};
            log_warn("redis lost our scripts (NOSCRIPT): loading them again");
            cmd_t *load = new_cmd(OP_HANDSHAKE, on_script_loaded, b, 3, argv, argvlen);
            if (load != NULL) {
                submit(c, load);
                cmd->retried = 1;
                submit(c, cmd);
                return;
            }
        }
        fail(cmd, BACKEND_FAILED, r->str);
    } else {
        deliver(cmd, r);
    }
    free_cmd(cmd);
}

/* ---- connections ------------------------------------------------------- */

static void notify_state(backend_t *b, int up) {
    if (b->state_cb && !b->freeing) b->state_cb(b->state_data, up);
}

static void on_retry_timer(timers_entry_t *t) {
    conn_connect(container_of(t, conn_t, retry_timer));
}

/* The connection is gone (c->ac already NULL): schedule a reconnect. */
static void conn_down(conn_t *c, const char *why) {
    backend_t *b = c->b;
    int was_up = c->state == CONN_UP;
    c->state = CONN_DOWN;
    if (!c->is_sub) snprintf(b->down_reason, sizeof(b->down_reason), "%s", why);
    timers_stop(b->timers, &c->connect_timer);
    timers_stop(b->timers, &c->cmd_timer);
    if (b->freeing) return;
    if (!c->warned) {
        log_warn("redis %s connection to %s down: %s", c->role, b->target, why);
        c->warned = 1;
    } else {
        log_debug("redis %s connection: %s", c->role, why);
    }
    if (c->is_sub) {
        /* Subscriptions died with the connection; keep the wanted ones. */
        size_t i = 0;
        hmap_node_t *n = NULL, *next;
        for (n = hmap_next(&b->subs, &i, NULL); n != NULL; n = next) {
            next = hmap_next(&b->subs, &i, n);
            sub_t *s = container_of(n, sub_t, node);
            s->state = SUB_IDLE;
            if (!s->want) {
                hmap_del(&b->subs, &s->node);
                free(s);
            }
        }
    }
    if (!c->is_sub && b->sub.ac != NULL && was_up) {
        /* A hung command connection means a hung Redis: start over. */
        conn_drop(&b->sub, "command connection lost");
    }
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKEND_BACKOFF_MIN_MS;
    if (c->backoff_ms > BACKEND_BACKOFF_MAX_MS) c->backoff_ms = BACKEND_BACKOFF_MAX_MS;
    timers_start(b->timers, &c->retry_timer, c->backoff_ms, on_retry_timer);
    if (was_up && !c->is_sub) notify_state(b, 0);
}

/* Drops the context ourselves (timeout, handshake error). Pending replies
 * are failed by hiredis with NULL replies. */
static void conn_drop(conn_t *c, const char *why) {
    redisAsyncContext *ac = c->ac;
    if (ac == NULL) return;
    c->ac = NULL;
    /* hiredis runs every pending callback with a NULL reply: now, or right
     * after the callback we may be inside of returns. */
    redisAsyncFree(ac);
    conn_down(c, why);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    conn_t *c = ac->data;
    (void)status;
    if (c == NULL || c->ac != ac) return; /* we dropped it ourselves */
    c->ac = NULL;
    conn_down(c, ac->errstr[0] ? ac->errstr : "closed by redis");
}

static void on_up(conn_t *c) {
    backend_t *b = c->b;
    c->state = CONN_UP;
    c->backoff_ms = 0;
    timers_stop(b->timers, &c->connect_timer);
    if (c->warned) log_info("redis %s connection to %s is back", c->role, b->target);
    else log_info("redis %s connection to %s up", c->role, b->target);
    c->warned = 0;
    if (c->is_sub) {
        size_t i = 0;
        for (hmap_node_t *n = hmap_next(&b->subs, &i, NULL); n; n = hmap_next(&b->subs, &i, n)) {
            sub_t *s = container_of(n, sub_t, node);
            if (s->want && s->state == SUB_IDLE) send_subscribe(b, s);
        }
    } else {
        notify_state(b, 1);
    }
}

static void on_handshake(void *data, const backend_result_t *res) {
    conn_t *c = data;
    if (c->ac == NULL) return;
    if (res->status != BACKEND_OK) {
        char why[BACKEND_ERR_LEN];
        snprintf(why, sizeof(why), "handshake failed: %s", res->error);
        log_error("redis %s connection: %s", c->role, why);
        c->warned = 1;
        conn_drop(c, why);
        return;
    }
    if (--c->handshake_left == 0) on_up(c);
}

/* SCRIPT LOAD replies carry the SHA1 we call scripts by. */
static void on_load_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    redisReply *r = reply;
    cmd_t *cmd = privdata;
    backend_t *b = cmd->conn->b;
    if (r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(b->sha[cmd->script], r->str, 40);
        b->sha[cmd->script][40] = '\0';
    }
    on_reply(ac, reply, privdata);
}

static void on_script_loaded(void *data, const backend_result_t *res) {
    (void)data;
    if (res->status != BACKEND_OK) log_warn("SCRIPT LOAD failed: %s", res->error);
}

/* One handshake command; load is the script it loads, or SCRIPT_COUNT. */
static void handshake_send(conn_t *c, int argc, const char **argv, size_t *argvlen,
                           script_id_t load) {
    cmd_t *cmd = new_cmd(OP_HANDSHAKE, on_handshake, c, argc, argv, argvlen);
    if (cmd == NULL) return;
    c->handshake_left++;
    cmd->script = load;
    submit_with(c, cmd, load != SCRIPT_COUNT ? on_load_reply : on_reply);
}

static void on_connect(const redisAsyncContext *ac, int status) {
    conn_t *c = ac->data;
    backend_t *b = c->b;
    if (c->ac != ac) return;
    if (status != REDIS_OK) {
        c->ac = NULL; /* hiredis frees it */
        conn_down(c, ac->errstr[0] ? ac->errstr : "connect failed");
        return;
    }
    /* Connected: from here each handshake command has its own deadline. */
    timers_stop(b->timers, &c->connect_timer);
    c->state = CONN_HANDSHAKE;
    c->handshake_left = 0;
    /* AUTH, SELECT and SCRIPT LOADs are pipelined; the last reply brings us up. */
    const char *argv[3];
    size_t argvlen[3];
    if (b->conf->password[0] != '\0') {
        int n = 0;
        argv[n] = "AUTH";
        argvlen[n++] = 4;
        if (b->conf->username[0] != '\0') {
            argv[n] = b->conf->username;
            argvlen[n++] = strlen(b->conf->username);
        }
        argv[n] = b->conf->password;
        argvlen[n++] = strlen(b->conf->password);
        handshake_send(c, n, argv, argvlen, SCRIPT_COUNT);
    }
    if (c->is_sub) {
        argv[0] = "PING";
        argvlen[0] = 4;
        handshake_send(c, 1, argv, argvlen, SCRIPT_COUNT);
        return;
    }
    char db[16];
    snprintf(db, sizeof(db), "%d", b->conf->redis_db);
    argv[0] = "SELECT";
    argvlen[0] = 6;
    argv[1] = db;
    argvlen[1] = strlen(db);
    handshake_send(c, 2, argv, argvlen, SCRIPT_COUNT);
    for (int i = 0; i < SCRIPT_COUNT; i++) {
        argv[0] = "SCRIPT";
        argvlen[0] = 6;
        argv[1] = "LOAD";
        argvlen[1] = 4;
        argv[2] = scripts[i];
        argvlen[2] = strlen(scripts[i]);
        handshake_send(c, 3, argv, argvlen, (script_id_t)i);
    }
}

static void on_connect_timer(timers_entry_t *t) {
    conn_t *c = container_of(t, conn_t, connect_timer);
    if (c->state == CONN_UP) return;
    if (c->ac != NULL) {
        conn_drop(c, "no connection within connect_timeout_ms");
    }
}

/* hiredis asks for a write event after every queued command, and the
 * libuv adapter turns each request into an epoll_ctl. Instead, a pending
 * write is remembered and done once per loop iteration, right before the
 * loop polls; only a write that could not finish waits for POLLOUT. */
static void on_flush(uv_prepare_t *handle);

static void on_add_write(void *privdata) {
    redisLibuvEvents *p = privdata;
    conn_t *c = p->context ? p->context->data : NULL;
    if (c == NULL || c->state == CONN_CONNECTING || c->in_flush) {
        if (!(p->events & UV_WRITABLE)) redisLibuvAddWrite(privdata);
        return;
    }
    if (!c->write_pending) {
        c->write_pending = 1;
        uv_prepare_start(c->b->flusher, on_flush);
    }
}

/* hiredis also asks for read events after every write: only pass on a
 * request that changes something. */
static void on_add_read(void *privdata) {
    redisLibuvEvents *p = privdata;
    if (!(p->events & UV_READABLE)) redisLibuvAddRead(privdata);
}

static void on_del_write(void *privdata) {
    redisLibuvEvents *p = privdata;
    if (p->events & UV_WRITABLE) redisLibuvDelWrite(privdata);
}

static void flush_conn(conn_t *c) {
    if (!c->write_pending) return;
    c->write_pending = 0;
    if (c->ac == NULL) return;
    c->in_flush = 1;
    redisAsyncHandleWrite(c->ac);
    c->in_flush = 0;
}

static void on_flush(uv_prepare_t *handle) {
    backend_t *b = handle->data;
    uv_prepare_stop(handle);
    batch_flush(b);
    flush_conn(&b->cmd);
    flush_conn(&b->sub);
}

static void on_flusher_close(uv_handle_t *handle) {
    free(handle);
}

static void conn_connect(conn_t *c) {
    backend_t *b = c->b;
    redisAsyncContext *ac;
    if (b->freeing || c->ac != NULL) return;
    if (b->conf->redis_kind == CONF_REDIS_UNIX) ac = redisAsyncConnectUnix(b->conf->redis_host);
    else ac = redisAsyncConnect(b->conf->redis_host, b->conf->redis_port);
    if (ac == NULL || ac->err) {
        char why[BACKEND_ERR_LEN];
        snprintf(why, sizeof(why), "connect: %s", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        c->state = CONN_CONNECTING;
        conn_down(c, why);
        return;
    }
    ac->data = c;
    if (redisLibuvAttach(ac, b->loop) != REDIS_OK) {
        redisAsyncFree(ac);
        c->state = CONN_CONNECTING;
        conn_down(c, "cannot attach to the event loop");
        return;
    }
    ac->ev.addRead = on_add_read;
    ac->ev.addWrite = on_add_write;
    ac->ev.delWrite = on_del_write;
    c->ac = ac;
    c->state = CONN_CONNECTING;
    c->write_pending = 0;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    timers_start(b->timers, &c->connect_timer, b->conf->connect_timeout_ms, on_connect_timer);
}

/* ---- batches of acquires and releases ---------------------------------- */

/* Appends one string to the gathering batch. */
static int bstr_add(backend_t *b, const char *str, size_t len) {
    if (b->bstrlen + len > b->bstrcap) {
        size_t cap = b->bstrcap ? b->bstrcap : 4096;
        while (cap < b->bstrlen + len) cap *= 2;
        char *n = realloc(b->bstr, cap);
        if (n == NULL) return -1;
        b->bstr = n;
        b->bstrcap = cap;
    }
    if (b->nboff + 2 > b->capboff) {
        size_t cap = b->capboff ? b->capboff * 2 : 256;
        size_t *n = realloc(b->boff, cap * sizeof(*n));
        if (n == NULL) return -1;
        b->boff = n;
        b->capboff = cap;
    }
    memcpy(b->bstr + b->bstrlen, str, len);
    b->boff[b->nboff++] = b->bstrlen;
    b->boff[b->nboff++] = len;
    b->bstrlen += len;
    return 0;
}

/* Queues an acquire or release (key, companion, kind, number, owner) for
 * the batch sent before the loop next polls. */
static void batch_add(backend_t *b, op_t op, const char *key, size_t klen, const char *comp,
                      size_t clen, const char *num, size_t nlen, const char *field,
                      size_t flen, backend_cb cb, void *data) {
    if (b->cmd.state != CONN_UP) {
        backend_result_t res = {.status = BACKEND_DOWN, .error = backend_down_reason(b)};
        cb(data, &res);
        return;
    }
    if (b->nbops == b->capbops) {
        size_t cap = b->capbops ? b->capbops * 2 : 64;
        bop_t *n = realloc(b->bops, cap * sizeof(*n));
        if (n == NULL) goto nomem;
        b->bops = n;
        b->capbops = cap;
    }
    size_t mark = b->nboff, smark = b->bstrlen;
    const char *kind = op == OP_ACQUIRE ? "a" : "r";
    if (bstr_add(b, key, klen) || bstr_add(b, comp, clen) || bstr_add(b, kind, 1) ||
        bstr_add(b, num, nlen) || bstr_add(b, field, flen)) {
        b->nboff = mark;
        b->bstrlen = smark;
        goto nomem;
    }
    b->bops[b->nbops].op = op;
    b->bops[b->nbops].cb = cb;
    b->bops[b->nbops].data = data;
    b->bops[b->nbops].str = mark;
    b->nbops++;
    if (b->nbops >= BACKEND_BATCH_MAX) batch_flush(b);
    else uv_prepare_start(b->flusher, on_flush);
    return;
nomem: {
    backend_result_t res = {.status = BACKEND_FAILED, .error = "out of memory"};
    cb(data, &res);
}
}

/* Sends the gathered operations: one of them with its own script, more in
 * one call of the batch script. */
static void batch_flush(backend_t *b) {
    size_t n = b->nbops;
    if (n == 0) return;
    b->nbops = 0;
    const char *s = b->bstr;
    const size_t *o = b->boff;
#define STR(op, k) (s + o[(b->bops[op].str) + 2 * (k)])
#define LEN(op, k) (o[(b->bops[op].str) + 2 * (k) + 1])
    if (n == 1) {
        bop_t op = b->bops[0];
        const char *argv[7];
        size_t argvlen[7];
        argv[2] = "2";
        argvlen[2] = 1;
        argv[3] = STR(0, 0);
        argvlen[3] = LEN(0, 0);
        argv[4] = STR(0, 1);
        argvlen[4] = LEN(0, 1);
        if (op.op == OP_ACQUIRE) { /* ARGV: lease, owner */
            argv[5] = STR(0, 3);
            argvlen[5] = LEN(0, 3);
            argv[6] = STR(0, 4);
            argvlen[6] = LEN(0, 4);
        } else { /* ARGV: owner, all */
            argv[5] = STR(0, 4);
            argvlen[5] = LEN(0, 4);
            argv[6] = STR(0, 3);
            argvlen[6] = LEN(0, 3);
        }
        b->nboff = b->bstrlen = 0;
        eval(b, op.op, op.op == OP_ACQUIRE ? SCRIPT_ACQUIRE : SCRIPT_RELEASE, 7, argv, argvlen,
             op.cb, op.data, 0);
        return;
    }
    size_t argc = 3 + 5 * n;
    const char **argv = malloc(argc * sizeof(*argv));
    size_t *argvlen = malloc(argc * sizeof(*argvlen));
    bop_t *ops = malloc(n * sizeof(*ops));
    char nkeys[24];
    if (argv == NULL || argvlen == NULL || ops == NULL) {
        free(argv);
        free(argvlen);
        free(ops);
        backend_result_t res = {.status = BACKEND_FAILED, .error = "out of memory"};
        for (size_t i = 0; i < n; i++) b->bops[i].cb(b->bops[i].data, &res);
        b->nboff = b->bstrlen = 0;
        return;
    }
    argv[2] = nkeys;
    argvlen[2] = put_u64(nkeys, 2 * n);
    for (size_t i = 0; i < n; i++) {
        argv[3 + 2 * i] = STR(i, 0);
        argvlen[3 + 2 * i] = LEN(i, 0);
        argv[4 + 2 * i] = STR(i, 1);
        argvlen[4 + 2 * i] = LEN(i, 1);
        for (size_t k = 0; k < 3; k++) {
            argv[3 + 2 * n + 3 * i + k] = STR(i, 2 + k);
            argvlen[3 + 2 * n + 3 * i + k] = LEN(i, 2 + k);
        }
    }
#undef STR
#undef LEN
    memcpy(ops, b->bops, n * sizeof(*ops));
    argv[0] = "EVALSHA";
    argvlen[0] = 7;
    argv[1] = b->sha[SCRIPT_OPS];
    argvlen[1] = 40;
    cmd_t *cmd = new_cmd(OP_OPS, NULL, NULL, (int)argc, argv, argvlen);
    free(argv);
    free(argvlen);
    b->nboff = b->bstrlen = 0;
    if (cmd == NULL) {
        backend_result_t res = {.status = BACKEND_FAILED, .error = "out of memory"};
        for (size_t i = 0; i < n; i++) ops[i].cb(ops[i].data, &res);
        free(ops);
        return;
    }
    cmd->script = SCRIPT_OPS;
    cmd->count = n;
    cmd->bops = ops;
    submit(&b->cmd, cmd);
}

/* ---- public ----------------------------------------------------------- */

backend_t *backend_new(uv_loop_t *loop, const conf_t *conf, timers_t *timers) {
    backend_t *b = calloc(1, sizeof(*b));
    if (b == NULL) return NULL;
    b->loop = loop;
    b->conf = conf;
    b->timers = timers;
    if (hmap_init(&b->subs) != 0) {
        free(b);
        return NULL;
    }
    b->flusher = malloc(sizeof(*b->flusher));
    if (b->flusher == NULL) {
        hmap_free(&b->subs);
        free(b);
        return NULL;
    }
    uv_prepare_init(loop, b->flusher);
    b->flusher->data = b;
    if (conf->redis_kind == CONF_REDIS_UNIX)
        snprintf(b->target, sizeof(b->target), "unix:%s db %d", conf->redis_host, conf->redis_db);
    else
        snprintf(b->target, sizeof(b->target), "%s:%d db %d", conf->redis_host, conf->redis_port,
                 conf->redis_db);
    uuid_t u;
    uuid_generate(u);
    uuid_unparse_lower(u, b->uuid);
    b->cmd.b = b->sub.b = b;
    b->cmd.role = "command";
    b->sub.role = "pubsub";
    b->sub.is_sub = 1;
    conn_connect(&b->cmd);
    conn_connect(&b->sub);
    return b;
}

void backend_free(backend_t *b) {
    if (b == NULL) return;
    b->freeing = 1;
    b->cmd.state = CONN_DOWN; /* pending operations fail now */
    batch_flush(b);
    conn_drop(&b->cmd, "shutting down");
    conn_drop(&b->sub, "shutting down");
    uv_close((uv_handle_t *)b->flusher, on_flusher_close);
    timers_stop(b->timers, &b->cmd.retry_timer);
    timers_stop(b->timers, &b->sub.retry_timer);
    size_t i = 0;
    hmap_node_t *n, *next;
    for (n = hmap_next(&b->subs, &i, NULL); n != NULL; n = next) {
        next = hmap_next(&b->subs, &i, n);
        free(container_of(n, sub_t, node));
    }
    hmap_free(&b->subs);
    free(b->bops);
    free(b->bstr);
    free(b->boff);
    free(b);
}

void backend_on_state(backend_t *b, backend_state_cb cb, void *data) {
    b->state_cb = cb;
    b->state_data = data;
}

int backend_up(const backend_t *b) {
    return b->cmd.state == CONN_UP;
}

const char *backend_uuid(const backend_t *b) {
    return b->uuid;
}

const char *backend_down_reason(backend_t *b) {
    static char text[BACKEND_ERR_LEN + 32];
    if (b->cmd.state == CONN_UP) return "redis connected";
    if (b->down_reason[0] == '\0') return "redis not connected yet";
    snprintf(text, sizeof(text), "redis not connected: %s", b->down_reason);
    return text;
}

void backend_acquire(backend_t *b, const char *name, size_t len, uint64_t owner,
                     uint32_t lease_ms, backend_cb cb, void *data) {
    char key[KEY_MAX], token[KEY_MAX + 32], lease[24], field[FIELD_MAX];
    size_t klen = lock_key(b, key, name, len);
    size_t tlen = companion(token, "redisson_lock_token", key, klen);
    size_t llen = put_u64(lease, lease_ms);
    size_t flen = owner_field(b, field, owner);
    batch_add(b, OP_ACQUIRE, key, klen, token, tlen, lease, llen, field, flen, cb, data);
}

void backend_release(backend_t *b, const char *name, size_t len, uint64_t owner, int all,
                     backend_cb cb, void *data) {
    char key[KEY_MAX], channel[KEY_MAX + 32], field[FIELD_MAX];
    size_t klen = lock_key(b, key, name, len);
    size_t clen = companion(channel, "redisson_lock__channel", key, klen);
    size_t flen = owner_field(b, field, owner);
    batch_add(b, OP_RELEASE, key, klen, channel, clen, all ? "1" : "0", 1, field, flen, cb,
              data);
}

void backend_renew(backend_t *b, const backend_item_t *items, size_t count,
                   uint32_t lease_ms, backend_cb cb, void *data) {
    /* EVALSHA sha numkeys key mark ... lease field ... */
    size_t argc = 3 + 2 * count + 1 + count;
    const char **argv = malloc(argc * sizeof(*argv));
    size_t *argvlen = malloc(argc * sizeof(*argvlen));
    /* keys, marks and fields live in one block: KEY_MAX per key and mark. */
    char *space = malloc(count * (2 * (KEY_MAX + 32) + FIELD_MAX));
    char nkeys[16], lease[16];
    if (argv == NULL || argvlen == NULL || space == NULL || count == 0) {
        free(argv);
        free(argvlen);
        free(space);
        backend_result_t res = {.status = BACKEND_FAILED, .error = "out of memory"};
        cb(data, &res);
        return;
    }
    argv[2] = nkeys;
    argvlen[2] = put_u64(nkeys, 2 * count);
    char *p = space;
    for (size_t i = 0; i < count; i++) {
        char *key = p;
        size_t klen = lock_key(b, key, items[i].name, items[i].len);
        p += klen + 1;
        argv[3 + 2 * i] = key;
        argvlen[3 + 2 * i] = klen;
        argv[4 + 2 * i] = p;
        argvlen[4 + 2 * i] = companion(p, "dlock_forced", key, klen);
        p += argvlen[4 + 2 * i] + 1;
    }
    size_t a = 3 + 2 * count;
    argv[a] = lease;
    argvlen[a] = put_u64(lease, lease_ms);
    for (size_t i = 0; i < count; i++) {
        argv[a + 1 + i] = p;
        argvlen[a + 1 + i] = owner_field(b, p, items[i].owner);
        p += argvlen[a + 1 + i] + 1;
    }
    eval(b, OP_RENEW, SCRIPT_RENEW, (int)argc, argv, argvlen, cb, data, count);
    free(argv);
    free(argvlen);
    free(space);
}

void backend_status(backend_t *b, const char *name, size_t len, uint64_t owner,
                    backend_cb cb, void *data) {
    char key[KEY_MAX], field[FIELD_MAX];
    const char *argv[5];
    size_t argvlen[5];
    argv[2] = "1";
    argvlen[2] = 1;
    argv[3] = key;
    argvlen[3] = lock_key(b, key, name, len);
    argv[4] = field;
    argvlen[4] = owner_field(b, field, owner);
    eval(b, OP_STATUS, SCRIPT_STATUS, 5, argv, argvlen, cb, data, 0);
}

void backend_force(backend_t *b, const char *name, size_t len, backend_cb cb, void *data) {
    char key[KEY_MAX], channel[KEY_MAX + 32], mark[KEY_MAX + 32], keep[16];
    size_t klen = lock_key(b, key, name, len);
    const char *argv[7];
    size_t argvlen[7];
    argv[2] = "3";
    argvlen[2] = 1;
    argv[3] = key;
    argvlen[3] = klen;
    argv[4] = channel;
    argvlen[4] = companion(channel, "redisson_lock__channel", key, klen);
    argv[5] = mark;
    argvlen[5] = companion(mark, "dlock_forced", key, klen);
    argv[6] = keep;
    argvlen[6] = (size_t)snprintf(keep, sizeof(keep), "%d", BACKEND_FORCED_MARK_MS);
    eval(b, OP_FORCE, SCRIPT_FORCE, 7, argv, argvlen, cb, data, 0);
}

/* ---- pub/sub ---------------------------------------------------------- */

static void send_subscribe(backend_t *b, sub_t *s) {
    if (b->sub.state != CONN_UP) return; /* sent when the connection is up */
    const char *argv[2] = {"SUBSCRIBE", s->channel};
    size_t argvlen[2] = {9, s->len};
    if (redisAsyncCommandArgv(b->sub.ac, on_channel, s, 2, argv, argvlen) == REDIS_OK)
        s->state = SUB_SUBSCRIBING;
}

static void send_unsubscribe(backend_t *b, sub_t *s) {
    const char *argv[2] = {"UNSUBSCRIBE", s->channel};
    size_t argvlen[2] = {11, s->len};
    if (b->sub.state == CONN_UP &&
        redisAsyncCommandArgv(b->sub.ac, NULL, NULL, 2, argv, argvlen) == REDIS_OK) {
        s->state = SUB_UNSUBSCRIBING;
        return;
    }
    s->state = SUB_IDLE;
}

/* Every reply on a channel: subscribe, message, unsubscribe, or NULL when
 * the connection is freed. */
static void on_channel(redisAsyncContext *ac, void *reply, void *privdata) {
    redisReply *r = reply;
    sub_t *s = privdata;
    backend_t *b = s->b;
    (void)ac;

    if (r == NULL) return; /* conn_down resets every subscription */
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    if (strcasecmp(kind, "message") == 0) {
        if (s->state == SUB_ACTIVE && s->want) s->cb(s->data, BACKEND_MESSAGE);
    } else if (strcasecmp(kind, "subscribe") == 0) {
        s->state = SUB_ACTIVE;
        if (!s->want) send_unsubscribe(b, s);
        else s->cb(s->data, BACKEND_SUBSCRIBED);
    } else if (strcasecmp(kind, "unsubscribe") == 0) {
        /* hiredis forgets the channel's callback after this reply. */
        s->state = SUB_IDLE;
        if (s->want) {
            send_subscribe(b, s);
        } else {
            hmap_del(&b->subs, &s->node);
            free(s);
        }
    }
}

void backend_subscribe(backend_t *b, const char *name, size_t len, backend_sub_cb cb,
                       void *data) {
    char key[KEY_MAX], channel[KEY_MAX + 32];
    size_t klen = lock_key(b, key, name, len);
    size_t clen = companion(channel, "redisson_lock__channel", key, klen);
    hmap_node_t *n = hmap_get(&b->subs, channel, clen);
    sub_t *s;
    if (n != NULL) {
        s = container_of(n, sub_t, node);
    } else {
        s = calloc(1, sizeof(*s) + clen + 1);
        if (s == NULL) return; /* waiters fall back to TTL-based retries */
        s->b = b;
        memcpy(s->channel, channel, clen + 1);
        s->len = clen;
        s->node.key = s->channel;
        s->node.len = clen;
        hmap_put(&b->subs, &s->node);
    }
    s->want = 1;
    s->cb = cb;
    s->data = data;
    if (s->state == SUB_IDLE) send_subscribe(b, s);
    else if (s->state == SUB_ACTIVE) cb(data, BACKEND_SUBSCRIBED);
    /* SUBSCRIBING: the confirmation will tell; UNSUBSCRIBING: resubscribes
     * when the unsubscribe reply arrives. */
}

void backend_unsubscribe(backend_t *b, const char *name, size_t len) {
    char key[KEY_MAX], channel[KEY_MAX + 32];
    size_t klen = lock_key(b, key, name, len);
    size_t clen = companion(channel, "redisson_lock__channel", key, klen);
    hmap_node_t *n = hmap_get(&b->subs, channel, clen);
    if (n == NULL) return;
    sub_t *s = container_of(n, sub_t, node);
    s->want = 0;
    if (s->state == SUB_ACTIVE) {
        send_unsubscribe(b, s);
        if (s->state == SUB_IDLE) {
            hmap_del(&b->subs, &s->node);
            free(s);
        }
    } else if (s->state == SUB_IDLE) {
        hmap_del(&b->subs, &s->node);
        free(s);
    }
}
