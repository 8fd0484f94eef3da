/* Unit tests of daemon/backend/scripts: the calls' RESP bytes, the replies' decoding, the scripts' codes.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/scripts.h"

#define SHA "0123456789abcdef0123456789abcdef01234567"
#define UUID "11111111-2222-3333-4444-555555555555"
#define PFX "dlock:"

/* ---- helpers ---------------------------------------------------------------- */

/* The RESP array of the NULL-terminated arguments, in a static buffer. */
static const char *resp(const char *first, ...) {
    static char out[8192];
    const char *args[64];
    size_t n = 0, k;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) args[n++] = a;
    va_end(ap);
    k = (size_t)snprintf(out, sizeof(out), "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, sizeof(out) - k, "$%zu\r\n%s\r\n", strlen(args[i]), args[i]);
    return out;
}

static backend_op_t mkop(backend_op_type_t kind, backend_mode_t mode, const char *name) {
    backend_op_t op;
    memset(&op, 0, sizeof(op));
    op.type = kind;
    op.mode = mode;
    op.name = name;
    op.len = strlen(name);
    op.owner = 7;
    op.lease_ms = 30000;
    return op;
}

/* scripts_choose and scripts_format of ops[0..n) with flags, as a string. */
static const char *format(backend_op_t *const *ops, size_t n, unsigned flags, script_id_t *id) {
    static char text[8192];
    buf_t b;
    memset(&b, 0, sizeof(b));
    *id = scripts_choose(ops, n, flags);
    ck_assert_int_eq(scripts_format(&b, *id, SHA, ops, n, PFX, UUID, flags), 0);
    ck_assert_uint_lt(b.len, sizeof(text));
    memcpy(text, b.data, b.len);
    text[b.len] = '\0';
    buf_free(&b);
    return text;
}

static const char *format1(backend_op_t *op, unsigned flags, script_id_t *id) {
    backend_op_t *ops[1] = {op};
    return format(ops, 1, flags, id);
}

#define FIELD UUID ":7"

/* ---- scripts_format ---------------------------------------------------------------- */

START_TEST(test_format_mutex) {
    script_id_t id;
    backend_op_t op = mkop(BACKEND_ACQUIRE, BACKEND_MUTEX, "lk");
    ck_assert_str_eq(format1(&op, 0, &id), resp("EVALSHA", SHA, "2", "dlock:lk",
                                                "redisson_lock_token:{dlock:lk}", "30000",
                                                FIELD, NULL));
    ck_assert_int_eq(id, SCRIPT_ACQUIRE);
    /* a quorum's acquire takes the batch script, with its fence rule */
    ck_assert_str_eq(format1(&op, SCRIPTS_F_QUORUM, &id),
                     resp("EVALSHA", SHA, "2", "dlock:lk", "redisson_lock_token:{dlock:lk}", "q",
                          "30000", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
    op.type = BACKEND_RELEASE;
    ck_assert_str_eq(format1(&op, 0, &id), resp("EVALSHA", SHA, "2", "dlock:lk",
                                                "redisson_lock__channel:{dlock:lk}", FIELD, "1",
                                                "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_RELEASE);
    op.type = BACKEND_DROP;
    ck_assert_str_eq(format1(&op, SCRIPTS_F_SHARDED, &id),
                     resp("EVALSHA", SHA, "2", "dlock:lk", "redisson_lock__channel:{dlock:lk}",
                          FIELD, "0", "spublish", NULL));
    /* a Cluster node's: the keys in ARGV, after their count */
    op.type = BACKEND_RENEW;
    ck_assert_str_eq(format1(&op, SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "0", "1", "dlock:lk", "dlock_forced:{dlock:lk}", "n",
                          "30000", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS_ANY);
    op.type = BACKEND_FENCE;
    op.raise_to = 123456;
    ck_assert_str_eq(format1(&op, 0, &id), resp("EVALSHA", SHA, "2", "dlock:lk",
                                                "redisson_lock_token:{dlock:lk}", "f", "123456",
                                                FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
}
END_TEST

START_TEST(test_format_rw) {
    script_id_t id;
    backend_op_t op = mkop(BACKEND_ACQUIRE, BACKEND_READ, "lk");
    ck_assert_str_eq(format1(&op, 0, &id),
                     resp("EVALSHA", SHA, "4", "dlock:lk", "redisson_lock_token:{dlock:lk}",
                          "redisson_rwlock:{dlock:lk}", "{dlock:lk}", "r", "30000", FIELD,
                          "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_READ));
    /* a name with a '{' keeps its own tag */
    backend_op_t w = mkop(BACKEND_DROP, BACKEND_WRITE, "a{b}c");
    ck_assert_str_eq(format1(&w, SCRIPTS_F_SHARDED, &id),
                     resp("EVALSHA", SHA, "4", "dlock:a{b}c", "redisson_lock_token:dlock:a{b}c",
                          "redisson_rwlock:dlock:a{b}c", "dlock:a{b}c", "D", "30000", FIELD,
                          "spublish", NULL));
    /* in the batch: 'x<letter>' */
    w.type = BACKEND_RELEASE;
    ck_assert_str_eq(format1(&w, SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "0", "1", "dlock:a{b}c", "redisson_rwlock:dlock:a{b}c",
                          "xW", "30000", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS_ANY);
    op.type = BACKEND_RENEW;
    ck_assert_str_eq(format1(&op, 0, &id),
                     resp("EVALSHA", SHA, "2", "dlock:lk", "dlock_forced:{dlock:lk}", "v",
                          "30000", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
}
END_TEST

START_TEST(test_format_sem_fair) {
    script_id_t id;
    backend_op_t op = mkop(BACKEND_ACQUIRE, BACKEND_SEM, "s");
    op.count = 3;
    op.base = 2;
    ck_assert_str_eq(format1(&op, 0, &id),
                     resp("EVALSHA", SHA, "3", "dlock:s", "{dlock:s}:timeout",
                          "redisson_sc:{dlock:s}", "a", "3", "2", "30000", FIELD, "publish",
                          NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_SEM));
    op.type = BACKEND_INIT;
    ck_assert_str_eq(format1(&op, SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "3", "dlock:s", "{dlock:s}:timeout",
                          "redisson_sc:{dlock:s}", "i", "3", "2", "30000", FIELD, "publish",
                          NULL));
    op.type = BACKEND_RENEW;
    ck_assert_str_eq(format1(&op, 0, &id),
                     resp("EVALSHA", SHA, "2", "dlock:s", "{dlock:s}:timeout", "s3", "30000",
                          FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);

    backend_op_t f = mkop(BACKEND_ACQUIRE, BACKEND_FAIR, "f");
    f.queue_ms = 5000;
    f.queue_foreign_ms = 700;
    f.once = 1;
    ck_assert_str_eq(format1(&f, 0, &id),
                     resp("EVALSHA", SHA, "6", "dlock:f", "redisson_lock_queue:{dlock:f}",
                          "redisson_lock_timeout:{dlock:f}", "redisson_lock__channel:{dlock:f}",
                          "redisson_lock_token:{dlock:f}", "dlock_fair:{dlock:f}", "o", "30000",
                          FIELD, "5000", "700", "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_FAIR));
    f.type = BACKEND_LEAVE;
    ck_assert_str_eq(format1(&f, SCRIPTS_F_SHARDED, &id),
                     resp("EVALSHA", SHA, "6", "dlock:f", "redisson_lock_queue:{dlock:f}",
                          "redisson_lock_timeout:{dlock:f}", "redisson_lock__channel:{dlock:f}",
                          "redisson_lock_token:{dlock:f}", "dlock_fair:{dlock:f}", "l", "30000",
                          FIELD, "5000", "700", "spublish", NULL));
}
END_TEST

START_TEST(test_format_batches) {
    script_id_t id;
    backend_op_t a = mkop(BACKEND_RENEW, BACKEND_MUTEX, "a"), b = mkop(BACKEND_RENEW, BACKEND_MUTEX, "b");
    b.owner = 8;
    backend_op_t *two[2] = {&a, &b};
    ck_assert_str_eq(format(two, 2, 0, &id),
                     resp("EVALSHA", SHA, "4", "dlock:a", "dlock_forced:{dlock:a}", "dlock:b",
                          "dlock_forced:{dlock:b}", "30000", FIELD, UUID ":8", NULL));
    ck_assert_int_eq(id, SCRIPT_RENEW);
    ck_assert_str_eq(format(two, 2, SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "0", "2", "dlock:a", "dlock_forced:{dlock:a}", "dlock:b",
                          "dlock_forced:{dlock:b}", "30000", FIELD, UUID ":8", NULL));
    ck_assert_int_eq(id, SCRIPT_RENEW_ANY);
    /* another lease, or another kind of op: the batch script */
    backend_op_t r = mkop(BACKEND_RENEW, BACKEND_WRITE, "w"), s = mkop(BACKEND_RENEW, BACKEND_SEM, "s"),
                 q = mkop(BACKEND_ACQUIRE, BACKEND_MUTEX, "q");
    s.count = 2;
    backend_op_t *four[4] = {&a, &r, &s, &q};
    ck_assert_str_eq(format(four, 4, SCRIPTS_F_QUORUM, &id),
                     resp("EVALSHA", SHA, "8", "dlock:a", "dlock_forced:{dlock:a}", "dlock:w",
                          "dlock_forced:{dlock:w}", "dlock:s", "{dlock:s}:timeout", "dlock:q",
                          "redisson_lock_token:{dlock:q}", "n", "30000", FIELD, "V", "30000",
                          FIELD, "s2", "30000", FIELD, "q", "30000", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
    b.lease_ms = 1000;
    ck_assert_int_eq(scripts_choose(two, 2, 0), SCRIPT_OPS);
    ck_assert_int_eq(scripts_choose(two, 2, SCRIPTS_F_ANY_SLOT), SCRIPT_OPS_ANY);
}
END_TEST

START_TEST(test_format_status_force_who) {
    script_id_t id;
    backend_op_t op = mkop(BACKEND_STATUS, BACKEND_WRITE, "lk");
    ck_assert_str_eq(format1(&op, 0, &id), resp("EVALSHA", SHA, "2", "dlock:lk",
                                                "{dlock:lk}:timeout", FIELD, NULL));
    ck_assert_int_eq(id, SCRIPT_STATUS);
    op.type = BACKEND_FORCE;
    ck_assert_str_eq(format1(&op, SCRIPTS_F_SHARDED, &id),
                     resp("EVALSHA", SHA, "7", "dlock:lk", "redisson_lock__channel:{dlock:lk}",
                          "dlock_forced:{dlock:lk}", "{dlock:lk}:timeout",
                          "redisson_sc:{dlock:lk}", "redisson_lock_queue:{dlock:lk}",
                          "redisson_rwlock:{dlock:lk}", "60000", "spublish", NULL));
    ck_assert_int_eq(id, SCRIPT_FORCE);
    op.type = BACKEND_WHO;
    ck_assert_str_eq(format1(&op, 0, &id),
                     resp("EVALSHA", SHA, "2", "dlock:lk", "dlock:dlockd daemons", NULL));
    ck_assert_int_eq(id, SCRIPT_WHO);
    ck_assert_str_eq(format1(&op, SCRIPTS_F_NO_REGISTRY | SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "1", "dlock:lk", NULL));
}
END_TEST

START_TEST(test_format_register) {
    buf_t b;
    memset(&b, 0, sizeof(b));
    ck_assert_int_eq(scripts_format_register(&b, SHA, PFX, UUID, "dlockd:host:42"), 0);
    char stale[24];
    stale[keys_u64(stale, SCRIPTS_REGISTRY_STALE_MS)] = '\0';
    const char *want = resp("EVALSHA", SHA, "1", "dlock:dlockd daemons", UUID, "dlockd:host:42",
                            stale, NULL);
    ck_assert_uint_eq(b.len, strlen(want));
    ck_assert_int_eq(memcmp(b.data, want, b.len), 0);
    buf_free(&b);
}
END_TEST

START_TEST(test_choose) {
    static const struct {
        backend_op_type_t kind;
        backend_mode_t mode;
        unsigned flags;
        script_id_t want;
    } cases[] = {
        {BACKEND_ACQUIRE, BACKEND_MUTEX, 0, SCRIPT_ACQUIRE},
        {BACKEND_ACQUIRE, BACKEND_MUTEX, SCRIPTS_F_ANY_SLOT, SCRIPT_OPS_ANY},
        {BACKEND_ACQUIRE, BACKEND_MUTEX, SCRIPTS_F_QUORUM, SCRIPT_OPS},
        {BACKEND_RELEASE, BACKEND_MUTEX, 0, SCRIPT_RELEASE},
        {BACKEND_DROP, BACKEND_MUTEX, 0, SCRIPT_RELEASE},
        {BACKEND_RENEW, BACKEND_MUTEX, 0, SCRIPT_OPS},
        {BACKEND_FENCE, BACKEND_MUTEX, SCRIPTS_F_QUORUM, SCRIPT_OPS},
        {BACKEND_STATUS, BACKEND_SEM, SCRIPTS_F_ANY_SLOT, SCRIPT_STATUS},
        {BACKEND_FORCE, BACKEND_MUTEX, 0, SCRIPT_FORCE},
        {BACKEND_WHO, BACKEND_FAIR, 0, SCRIPT_WHO},
        {BACKEND_ACQUIRE, BACKEND_READ, SCRIPTS_F_QUORUM, SCRIPT_OWN(BACKEND_READ)},
        {BACKEND_ACQUIRE, BACKEND_READ, SCRIPTS_F_ANY_SLOT, SCRIPT_OPS_ANY},
        {BACKEND_DROP, BACKEND_WRITE, 0, SCRIPT_OWN(BACKEND_READ)},
        {BACKEND_RENEW, BACKEND_WRITE, 0, SCRIPT_OPS},
        {BACKEND_ACQUIRE, BACKEND_SEM, SCRIPTS_F_ANY_SLOT, SCRIPT_OWN(BACKEND_SEM)},
        {BACKEND_INIT, BACKEND_SEM, 0, SCRIPT_OWN(BACKEND_SEM)},
        {BACKEND_RELEASE, BACKEND_SEM, 0, SCRIPT_OWN(BACKEND_SEM)},
        {BACKEND_RENEW, BACKEND_SEM, SCRIPTS_F_ANY_SLOT, SCRIPT_OPS_ANY},
        {BACKEND_ACQUIRE, BACKEND_FAIR, SCRIPTS_F_ANY_SLOT, SCRIPT_OWN(BACKEND_FAIR)},
        {BACKEND_LEAVE, BACKEND_FAIR, 0, SCRIPT_OWN(BACKEND_FAIR)},
        {BACKEND_DROP, BACKEND_FAIR, 0, SCRIPT_OWN(BACKEND_FAIR)},
        {BACKEND_RENEW, BACKEND_FAIR, 0, SCRIPT_OPS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        backend_op_t op = mkop(cases[i].kind, cases[i].mode, "lk");
        backend_op_t *ops[1] = {&op};
        ck_assert_msg(scripts_choose(ops, 1, cases[i].flags) == cases[i].want,
                      "case %zu: script %d, want %d", i, scripts_choose(ops, 1, cases[i].flags),
                      cases[i].want);
    }
    ck_assert(scripts_loaded(SCRIPT_OPS, 0));
    ck_assert(!scripts_loaded(SCRIPT_OPS_ANY, 0));
    ck_assert(scripts_loaded(SCRIPT_RENEW_ANY, SCRIPTS_F_ANY_SLOT));
    /* own scripts: each text once, by its first mode; a mutex has none */
    ck_assert(scripts_loaded(SCRIPT_OWN(BACKEND_READ), 0));
    ck_assert(!scripts_loaded(SCRIPT_OWN(BACKEND_WRITE), 0));
    ck_assert(!scripts_loaded(SCRIPT_OWN(BACKEND_MUTEX), 0));
    ck_assert_int_eq(scripts_own(BACKEND_WRITE), SCRIPT_OWN(BACKEND_READ));
    ck_assert_int_eq(scripts_own(BACKEND_MUTEX), SCRIPT_COUNT);
}
END_TEST

START_TEST(test_channels) {
    static const struct {
        backend_mode_t mode;
        const char *want;
    } cases[] = {
        {BACKEND_MUTEX, "redisson_lock__channel:{dlock:lk}"},
        {BACKEND_READ, "redisson_rwlock:{dlock:lk}"},
        {BACKEND_WRITE, "redisson_rwlock:{dlock:lk}"},
        {BACKEND_SEM, "redisson_sc:{dlock:lk}"},
        {BACKEND_FAIR, "redisson_lock__channel:{dlock:lk}:" UUID ":9"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[KEYS_CHANNEL_MAX + 1];
        size_t n = scripts_channel(out, PFX, UUID, "lk", 2, cases[i].mode, 9);
        out[n] = '\0';
        ck_assert_str_eq(out, cases[i].want);
    }
}
END_TEST

/* ---- scripts_decode ---------------------------------------------------------------- */

static redisReply ints[16], arr[4];
static redisReply *elems[4][16];

static redisReply *integer(int i, long long v) {
    memset(&ints[i], 0, sizeof(ints[i]));
    ints[i].type = REDIS_REPLY_INTEGER;
    ints[i].integer = v;
    return &ints[i];
}

static redisReply *string(int i, const char *s) {
    memset(&ints[i], 0, sizeof(ints[i]));
    ints[i].type = REDIS_REPLY_STRING;
    ints[i].str = (char *)(uintptr_t)s;
    ints[i].len = strlen(s);
    return &ints[i];
}

static redisReply *nil(int i) {
    memset(&ints[i], 0, sizeof(ints[i]));
    ints[i].type = REDIS_REPLY_NIL;
    return &ints[i];
}

static redisReply *array(int a, size_t n, ...) {
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) elems[a][i] = va_arg(ap, redisReply *);
    va_end(ap);
    memset(&arr[a], 0, sizeof(arr[a]));
    arr[a].type = REDIS_REPLY_ARRAY;
    arr[a].elements = n;
    arr[a].element = elems[a];
    return &arr[a];
}

static int decode1(script_id_t id, backend_op_t *op, redisReply *r, char *err) {
    backend_op_t *ops[1] = {op};
    return scripts_decode(id, ops, 1, r, err, 128);
}

START_TEST(test_decode_acquire) {
    char err[128];
    backend_op_t op = mkop(BACKEND_ACQUIRE, BACKEND_MUTEX, "lk");
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 2, integer(0, SCRIPTS_GRANTED),
                                                        integer(1, 1234567)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_GRANTED);
    ck_assert_uint_eq(op.res.fence, 1234567);
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 2, integer(0, SCRIPTS_REENTERED),
                                                        integer(1, 3)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_REENTERED);
    ck_assert_int_eq(op.res.holds, 3);
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 2, integer(0, SCRIPTS_TAKEN),
                                                        integer(1, 2500)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(op.res.ttl_ms, 2500);
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 2, integer(0, SCRIPTS_WRONG_KIND),
                                                        integer(1, SCRIPTS_HELD_SEM)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_WRONG_KIND);
    ck_assert_int_eq(op.res.held, BACKEND_SEM);
    op.mode = BACKEND_SEM;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_SEM), &op, array(0, 2, integer(0, SCRIPTS_HOLD_GONE),
                                                    integer(1, 0)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_HOLD_GONE);
    /* an unknown code, a wrong count, a non-integer: errors with text */
    err[0] = '\0';
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 2, integer(0, 9), integer(1, 0)), err),
                     -1);
    ck_assert_str_eq(err, "unexpected reply type 2 from a script");
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 3, integer(0, 0), integer(1, 0),
                                                        integer(2, 0)), err), -1);
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, array(0, 2, string(0, "0"), integer(1, 0)), err),
                     -1);
    ck_assert_int_eq(decode1(SCRIPT_ACQUIRE, &op, string(0, "OK"), err), -1);
    ck_assert_str_eq(err, "unexpected reply type 1 from a script");
}
END_TEST

START_TEST(test_decode_release) {
    char err[128];
    backend_op_t op = mkop(BACKEND_RELEASE, BACKEND_MUTEX, "lk");
    ck_assert_int_eq(decode1(SCRIPT_RELEASE, &op, array(0, 2, integer(0, 0), integer(1, 3)), err),
                     0);
    ck_assert_int_eq(op.res.holds, 0);
    ck_assert_int_eq(op.res.others_waiting, 3);
    ck_assert_int_eq(decode1(SCRIPT_RELEASE, &op, array(0, 2, integer(0, 0),
                                                        integer(1, 5000000000LL)), err), 0);
    ck_assert_int_eq(op.res.others_waiting, 1000000);
    ck_assert_int_eq(decode1(SCRIPT_RELEASE, &op, integer(0, SCRIPTS_NOT_HELD), err), 0);
    ck_assert_int_eq(op.res.holds, -1);
    ck_assert_int_eq(op.res.others_waiting, 0);
    ck_assert_int_eq(decode1(SCRIPT_RELEASE, &op, nil(0), err), -1);
    /* the read/write script: an acquire's pair, a release's pair or count */
    op.mode = BACKEND_READ;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_READ), &op, integer(0, 2), err), 0);
    ck_assert_int_eq(op.res.holds, 2);
    op.type = BACKEND_ACQUIRE;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_READ), &op, integer(0, 2), err), -1);
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_READ), &op, array(0, 2, integer(0, SCRIPTS_WRONG_KIND),
                                                   integer(1, SCRIPTS_HELD_LOCK)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_WRONG_KIND);
    ck_assert_int_eq(op.res.held, BACKEND_MUTEX);
    /* SEMINIT: 1 set, 0 set already */
    op.mode = BACKEND_SEM;
    op.type = BACKEND_INIT;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_SEM), &op, integer(0, 1), err), 0);
    ck_assert_int_eq(op.res.holds, 1);
}
END_TEST

START_TEST(test_decode_status_force_who) {
    char err[128];
    backend_op_t op = mkop(BACKEND_STATUS, BACKEND_WRITE, "lk");
    ck_assert_int_eq(decode1(SCRIPT_STATUS, &op, array(0, 5, integer(0, 900), integer(1, 2),
                                                       integer(2, SCRIPTS_HELD_WRITE),
                                                       integer(3, 0), integer(4, 4)), err), 0);
    ck_assert_int_eq(op.res.ttl_ms, 900);
    ck_assert_int_eq(op.res.holds, 4); /* the write holds: a WRITE status */
    ck_assert_int_eq(op.res.held, BACKEND_WRITE);
    ck_assert_int_eq(op.res.holders, 1);
    ck_assert_int_eq(decode1(SCRIPT_STATUS, &op, array(0, 5, integer(0, 900), integer(1, 2),
                                                       nil(2), integer(3, 0), integer(4, 4)), err),
                     -1);
    ck_assert_int_eq(decode1(SCRIPT_STATUS, &op, array(0, 4, integer(0, 900), integer(1, 2),
                                                       integer(2, 0), integer(3, 0)), err), -1);
    op.type = BACKEND_FORCE;
    ck_assert_int_eq(decode1(SCRIPT_FORCE, &op, integer(0, 1), err), 0);
    ck_assert_int_eq(op.res.removed, 1);
    ck_assert_int_eq(decode1(SCRIPT_FORCE, &op, string(0, "1"), err), -1);
    backend_who_t who;
    op.type = BACKEND_WHO;
    op.who = &who;
    ck_assert_int_eq(decode1(SCRIPT_WHO, &op, array(0, 3, integer(0, 500), string(1, UUID ":3"),
                                                    string(2, "1700000000000 dlockd:h:1")), err),
                     0);
    ck_assert_int_eq(op.res.ttl_ms, 500);
    ck_assert_str_eq(who.owner, UUID ":3");
    ck_assert_str_eq(who.daemon, "dlockd:h:1");
    ck_assert_int_eq(decode1(SCRIPT_WHO, &op, array(0, 3, integer(0, -2), string(1, ""),
                                                    string(2, "")), err), 0);
    ck_assert_str_eq(who.daemon, "");
    ck_assert_int_eq(decode1(SCRIPT_WHO, &op, array(0, 2, integer(0, -2), string(1, "")), err),
                     -1);
}
END_TEST

START_TEST(test_decode_batches) {
    char err[128];
    backend_op_t a = mkop(BACKEND_ACQUIRE, BACKEND_MUTEX, "a"), r = mkop(BACKEND_RELEASE, BACKEND_MUTEX, "r"),
                 n = mkop(BACKEND_RENEW, BACKEND_MUTEX, "n"), e = mkop(BACKEND_RENEW, BACKEND_MUTEX, "e");
    backend_op_t *ops[4] = {&a, &r, &n, &e};
    redisReply *x[8];
    x[0] = integer(0, SCRIPTS_GRANTED);
    x[1] = integer(1, 42);
    x[2] = integer(2, 0);
    x[3] = integer(3, 2);
    x[4] = integer(4, SCRIPTS_FORCED);
    x[5] = integer(5, 0); /* false comes back as nil or 0 */
    x[6] = string(6, "MOVED 1 h:1");
    x[7] = nil(7);
    memset(&arr[1], 0, sizeof(arr[1]));
    arr[1].type = REDIS_REPLY_ARRAY;
    arr[1].elements = 8;
    arr[1].element = x;
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 4, &arr[1], err, sizeof(err)), 0);
    ck_assert_int_eq(a.res.status, BACKEND_OK);
    ck_assert_int_eq(a.res.outcome, BACKEND_GRANTED);
    ck_assert_uint_eq(a.res.fence, 42);
    ck_assert_int_eq(r.res.holds, 0);
    ck_assert_int_eq(r.res.others_waiting, 2);
    ck_assert_int_eq(n.res.renewal, BACKEND_FORCED);
    ck_assert_int_eq(e.res.status, BACKEND_FAILED);
    ck_assert_str_eq(e.res.error, "MOVED 1 h:1");
    /* a nil where an op's result goes; an acquire without its value */
    x[6] = nil(6);
    x[1] = nil(1);
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS_ANY, ops, 4, &arr[1], err, sizeof(err)), 0);
    ck_assert_int_eq(a.res.status, BACKEND_FAILED);
    ck_assert_str_eq(a.res.error, "bad acquire result from the batch script");
    ck_assert_int_eq(e.res.status, BACKEND_FAILED);
    ck_assert_str_eq(e.res.error, "bad result from the batch script");
    /* the wrong number of elements fails the call */
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 3, &arr[1], err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unexpected reply (type 2) from the batch script");
    /* the renew script: a digit per lock, 'E' where it failed */
    backend_op_t *renews[3] = {&a, &n, &e};
    ck_assert_int_eq(scripts_decode(SCRIPT_RENEW, renews, 3, string(0, "10E"), err, sizeof(err)),
                     0);
    ck_assert_int_eq(a.res.renewal, BACKEND_RENEWED);
    ck_assert_int_eq(n.res.renewal, BACKEND_GONE);
    ck_assert_int_eq(e.res.status, BACKEND_FAILED);
    ck_assert_str_eq(e.res.error, SCRIPTS_NOT_HERE);
    ck_assert_int_eq(scripts_decode(SCRIPT_RENEW_ANY, renews, 3, string(0, "10"), err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "unexpected reply (type 1) from the renew script");
    ck_assert_int_eq(scripts_decode(SCRIPT_RENEW, renews, 3, integer(0, 1), err, sizeof(err)), -1);
}
END_TEST

/* ---- the scripts' codes ---------------------------------------------------------------- */

/* An election's op: its six keys (the leader's record last), its value
 * after the place's length; LEADER by its own letter; renewals batch as a
 * plain lock's. */
START_TEST(test_format_elect) {
    script_id_t id;
    backend_op_t e = mkop(BACKEND_ACQUIRE, BACKEND_ELECT, "e");
    e.queue_ms = 5000;
    e.value = "10.0.0.5:8080";
    e.value_len = 13;
#define ELECT_KEYS "dlock:e", "dlock_elect_queue:{dlock:e}", "dlock_elect_timeout:{dlock:e}", \
                   "redisson_lock__channel:{dlock:e}", "redisson_lock_token:{dlock:e}",    \
                   "dlock_leader:{dlock:e}"
    ck_assert_str_eq(format1(&e, 0, &id), resp("EVALSHA", SHA, "6", ELECT_KEYS, "a", "30000",
                                               FIELD, "5000", "10.0.0.5:8080", "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_ELECT));
    e.type = BACKEND_LEADER;
    e.value = NULL;
    e.value_len = 0;
    ck_assert_str_eq(format1(&e, SCRIPTS_F_SHARDED | SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "6", ELECT_KEYS, "g", "30000", FIELD, "5000", "",
                          "spublish", NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_ELECT));
    e.type = BACKEND_RELEASE;
    ck_assert_str_eq(format1(&e, 0, &id), resp("EVALSHA", SHA, "6", ELECT_KEYS, "r", "30000",
                                               FIELD, "5000", "", "publish", NULL));
#undef ELECT_KEYS
    e.type = BACKEND_RENEW;
    ck_assert_str_eq(format1(&e, 0, &id),
                     resp("EVALSHA", SHA, "2", "dlock:e", "dlock_forced:{dlock:e}", "n", "30000",
                          FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
}
END_TEST

/* LEADER's {fence, value, pttl} into the op's own buffer (the reply may
 * be gone by its callback), cut to BACKEND_ANSWER_MAX; {-1, '', held} is
 * another kind; anything else, or no buffer, a bad reply. */
START_TEST(test_decode_leader) {
    char err[128], buf[BACKEND_ANSWER_MAX + 1];
    backend_op_t op = mkop(BACKEND_LEADER, BACKEND_ELECT, "e");
    op.answer = buf;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 3, integer(0, 1795807655362825LL),
                                                      string(1, "h:1"), integer(2, 900)), err),
                     0);
    ck_assert_uint_eq(op.res.fence, 1795807655362825ULL);
    ck_assert_ptr_eq(op.res.value, buf);
    ck_assert_uint_eq(op.res.value_len, 3);
    ck_assert_str_eq(buf, "h:1");
    ck_assert_int_eq(op.res.ttl_ms, 900);
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 3, integer(0, 0), string(1, ""),
                                                      integer(2, -2)), err), 0);
    ck_assert_uint_eq(op.res.fence, 0);
    ck_assert_int_eq(op.res.ttl_ms, -2);
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 3, integer(0, -1), string(1, ""),
                                                      integer(2, SCRIPTS_HELD_LOCK)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_WRONG_KIND);
    ck_assert_int_eq(op.res.held, BACKEND_MUTEX);
    char *big = malloc(BACKEND_ANSWER_MAX + 11);
    memset(big, 'v', BACKEND_ANSWER_MAX + 10);
    big[BACKEND_ANSWER_MAX + 10] = '\0';
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 3, integer(0, 5), string(1, big),
                                                      integer(2, 1)), err), 0);
    ck_assert_uint_eq(op.res.value_len, BACKEND_ANSWER_MAX);
    free(big);
    /* A value anyone wrote into Redis stays one word: odd bytes as '?'. */
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 3, integer(0, 5),
                                                      string(1, "a b\nc\td\x7f\xc3\xa9"),
                                                      integer(2, 1)), err), 0);
    ck_assert_str_eq(buf, "a?b?c?d?" "?" "?");
    ck_assert_uint_eq(op.res.value_len, 10);
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 2, integer(0, 5), string(1, "x")), err),
                     -1);
    op.answer = NULL;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 3, integer(0, 5), string(1, "x"),
                                                      integer(2, 1)), err), -1);
    /* an acquire decodes as a fair lock's */
    op.type = BACKEND_ACQUIRE;
    ck_assert_int_eq(decode1(SCRIPT_OWN(BACKEND_ELECT), &op, array(0, 2, integer(0, SCRIPTS_TAKEN),
                                                      integer(1, 40)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(op.res.ttl_ms, 40);
}
END_TEST

/* A multi-name acquire: each name's lock and token, then the lease, the
 * field and the reentry letters; its replies, whole or about one name. */
START_TEST(test_multi) {
    script_id_t id;
    char err[128];
    backend_name_t names[2] = {{"a", 1}, {"{t}b", 4}};
    uint64_t values[2] = {0, 0};
    backend_op_t op = mkop(BACKEND_ACQUIRE, BACKEND_MULTI, "a");
    op.names = names;
    op.nnames = 2;
    op.reentry = "rn";
    op.values = values;
    ck_assert_str_eq(format1(&op, 0, &id),
                     resp("EVALSHA", SHA, "4", "dlock:a", "dlock:{t}b",
                          "redisson_lock_token:{dlock:a}", "redisson_lock_token:dlock:{t}b", "30000", FIELD, "rn",
                          NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_MULTI));
    /* a quorum's node: 'q' after the letters (its fence rule) */
    ck_assert_str_eq(format1(&op, SCRIPTS_F_QUORUM, &id),
                     resp("EVALSHA", SHA, "4", "dlock:a", "dlock:{t}b",
                          "redisson_lock_token:{dlock:a}", "redisson_lock_token:dlock:{t}b", "30000", FIELD, "rn",
                          "q", NULL));
    ck_assert_int_eq(id, SCRIPT_OWN(BACKEND_MULTI));
    ck_assert_int_eq(decode1(id, &op, array(0, 3, integer(0, SCRIPTS_GRANTED), integer(1, 2),
                                            integer(2, 99)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_GRANTED);
    ck_assert_uint_eq(values[0], 2);
    ck_assert_uint_eq(values[1], 99);
    ck_assert_int_eq(decode1(id, &op, array(0, 3, integer(0, SCRIPTS_TAKEN), integer(1, 700),
                                            integer(2, 2)), err), 0);
    ck_assert_int_eq(op.res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(op.res.ttl_ms, 700);
    ck_assert_uint_eq(op.res.which, 1);
    ck_assert_int_eq(decode1(id, &op, array(0, 3, integer(0, SCRIPTS_WRONG_KIND),
                                            integer(1, SCRIPTS_HELD_READ), integer(2, 1)), err), 0);
    ck_assert_int_eq(op.res.held, BACKEND_READ);
    ck_assert_uint_eq(op.res.which, 0);
    /* a wrong count of fences, an index out of range */
    ck_assert_int_eq(decode1(id, &op, array(0, 2, integer(0, SCRIPTS_GRANTED), integer(1, 2)), err),
                     -1);
    ck_assert_int_eq(decode1(id, &op, array(0, 3, integer(0, SCRIPTS_TAKEN), integer(1, 7),
                                            integer(2, 3)), err), -1);
}
END_TEST

/* A multi-name acquire in the batch script: a place per name (its keys:
 * the locks, then the tokens), 'm<letters>' lease owner in the first, empty arguments in
 * the others; its array in its first place's reply, an error alone. */
START_TEST(test_multi_batch) {
    script_id_t id;
    char err[128];
    backend_name_t names[2] = {{"a", 1}, {"b", 1}};
    uint64_t values[2] = {0, 0};
    backend_op_t m = mkop(BACKEND_ACQUIRE, BACKEND_MULTI, "a"),
                 q = mkop(BACKEND_ACQUIRE, BACKEND_MUTEX, "q"),
                 r = mkop(BACKEND_RELEASE, BACKEND_MUTEX, "r");
    m.names = names;
    m.nnames = 2;
    m.reentry = "nr";
    m.values = values;
    ck_assert(scripts_batchable(&m));
    ck_assert_uint_eq(scripts_width(&m), 2);
    ck_assert_uint_eq(scripts_width(&q), 1);
    backend_op_t *ops[3] = {&q, &m, &r};
    ck_assert_str_eq(format(ops, 3, 0, &id),
                     resp("EVALSHA", SHA, "8", "dlock:q", "redisson_lock_token:{dlock:q}",
                          "dlock:a", "dlock:b", "redisson_lock_token:{dlock:a}",
                          "redisson_lock_token:{dlock:b}", "dlock:r",
                          "redisson_lock__channel:{dlock:r}", "a", "30000", FIELD, "mnr", "30000",
                          FIELD, "", "", "", "r", "1", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
    ck_assert_str_eq(format(ops, 3, SCRIPTS_F_ANY_SLOT, &id),
                     resp("EVALSHA", SHA, "0", "4", "dlock:q", "redisson_lock_token:{dlock:q}",
                          "dlock:a", "dlock:b", "redisson_lock_token:{dlock:a}",
                          "redisson_lock_token:{dlock:b}", "dlock:r",
                          "redisson_lock__channel:{dlock:r}", "a", "30000", FIELD, "mnr", "30000",
                          FIELD, "", "", "", "r", "1", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS_ANY);
    /* a quorum's node: 'M<letters>' (its fence rule), 'q' for the acquire */
    ck_assert_str_eq(format(ops, 3, SCRIPTS_F_QUORUM, &id),
                     resp("EVALSHA", SHA, "8", "dlock:q", "redisson_lock_token:{dlock:q}",
                          "dlock:a", "dlock:b", "redisson_lock_token:{dlock:a}",
                          "redisson_lock_token:{dlock:b}", "dlock:r",
                          "redisson_lock__channel:{dlock:r}", "q", "30000", FIELD, "Mnr", "30000",
                          FIELD, "", "", "", "r", "1", FIELD, "publish", NULL));
    ck_assert_int_eq(id, SCRIPT_OPS);
    /* alone it goes to its own script, as before */
    ck_assert_int_eq(scripts_choose(&ops[1], 1, 0), SCRIPT_OWN(BACKEND_MULTI));
    redisReply *x[8];
    x[0] = integer(0, SCRIPTS_GRANTED);
    x[1] = integer(1, 5);
    x[2] = array(2, 3, integer(3, SCRIPTS_GRANTED), integer(4, 77), integer(5, 3));
    x[3] = nil(6);
    x[4] = nil(7);
    x[5] = nil(8);
    x[6] = integer(9, 0);
    x[7] = integer(10, 1);
    memset(&arr[3], 0, sizeof(arr[3]));
    arr[3].type = REDIS_REPLY_ARRAY;
    arr[3].elements = 8;
    arr[3].element = x;
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 3, &arr[3], err, sizeof(err)), 0);
    ck_assert_uint_eq(q.res.fence, 5);
    ck_assert_int_eq(m.res.status, BACKEND_OK);
    ck_assert_int_eq(m.res.outcome, BACKEND_GRANTED);
    ck_assert_uint_eq(values[0], 77);
    ck_assert_uint_eq(values[1], 3);
    ck_assert_int_eq(r.res.holds, 0);
    ck_assert_int_eq(r.res.others_waiting, 1);
    /* refused about its second name; an error; a bad shape */
    x[2] = array(2, 3, integer(3, SCRIPTS_TAKEN), integer(4, 900), integer(5, 2));
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 3, &arr[3], err, sizeof(err)), 0);
    ck_assert_int_eq(m.res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(m.res.ttl_ms, 900);
    ck_assert_uint_eq(m.res.which, 1);
    x[2] = string(2, "WRONGTYPE x");
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 3, &arr[3], err, sizeof(err)), 0);
    ck_assert_int_eq(m.res.status, BACKEND_FAILED);
    ck_assert_str_eq(m.res.error, "WRONGTYPE x");
    ck_assert_int_eq(r.res.status, BACKEND_OK);
    x[2] = integer(2, 0);
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 3, &arr[3], err, sizeof(err)), 0);
    ck_assert_int_eq(m.res.status, BACKEND_FAILED);
    /* the replies of 3 places, not 4: the call fails */
    arr[3].elements = 6;
    ck_assert_int_eq(scripts_decode(SCRIPT_OPS, ops, 3, &arr[3], err, sizeof(err)), -1);
}
END_TEST

/* The mode whose list_word, upper-cased, is word ("LOCK": BACKEND_MUTEX);
 * BACKEND_MODE_COUNT if none. */
static int mode_of_word(const char *word) {
    for (int m = 0; m < BACKEND_MODE_COUNT; m++) {
        const char *w = scripts_mode((backend_mode_t)m)->list_word;
        size_t i = 0;
        while (w != NULL && w[i] != '\0' && word[i] == toupper((unsigned char)w[i])) i++;
        if (w != NULL && w[i] == '\0' && word[i] == '\0') return m;
    }
    return BACKEND_MODE_COUNT;
}

/* Every "local NAME = number" line of every script names a code scripts.h
 * has, with its number, or is a kind's HELD_<list word> with its mode's
 * number (lua/part/kind.lua); and every script that answers codes has them
 * all, every one that names kinds every kind. */
START_TEST(test_codes_agree) {
    size_t kinds = 0;
    for (int m = 0; m < BACKEND_MODE_COUNT; m++)
        if (scripts_mode((backend_mode_t)m)->list_word != NULL) kinds++;
    /* SCRIPT_COUNT: lua/list.lua */
    for (int id = 0; id <= SCRIPT_COUNT; id++) {
        const char *s = id < SCRIPT_COUNT ? scripts_text((script_id_t)id) : scripts_list_lua;
        size_t found = 0, held = 0;
        while (s != NULL && *s != '\0') {
            char name[64];
            long v;
            int used = 0;
            if (sscanf(s, "local HELD_%58[A-Z_] = %ld%n", name, &v, &used) == 2 && used > 0 &&
                (s[used] == '\n' || s[used] == '\0')) {
                int m = mode_of_word(name);
                ck_assert_msg(m < BACKEND_MODE_COUNT, "script %d: HELD_%s is no mode's list_word",
                              id, name);
                ck_assert_msg(m == v, "script %d: HELD_%s = %ld, its mode: %d", id, name, v, m);
                held++;
            } else if (sscanf(s, "local %63[A-Z_] = %ld%n", name, &v, &used) == 2 && used > 0 &&
                       (s[used] == '\n' || s[used] == '\0')) {
                size_t i = 0;
                while (i < scripts_codes_count && strcmp(scripts_codes[i].name, name) != 0) i++;
                ck_assert_msg(i < scripts_codes_count, "script %d: %s is no code of scripts.h", id,
                              name);
                ck_assert_msg(scripts_codes[i].value == v, "script %d: %s = %ld, scripts.h: %d",
                              id, name, v, scripts_codes[i].value);
                found++;
            }
            s = strchr(s, '\n');
            if (s != NULL) s++;
        }
        ck_assert_msg(found == 0 || found == scripts_codes_count, "script %d: %zu codes of %zu",
                      id, found, scripts_codes_count);
        ck_assert_msg(held == 0 || held == kinds, "script %d: %zu kinds of %zu", id, held, kinds);
        if (id == SCRIPT_ACQUIRE || id == SCRIPT_OPS || id == SCRIPT_OWN(BACKEND_SEM) ||
            id == SCRIPT_OWN(BACKEND_FAIR) || id == SCRIPT_OWN(BACKEND_ELECT) ||
            id == SCRIPT_OWN(BACKEND_MULTI)) {
            ck_assert_msg(found == scripts_codes_count, "script %d names no codes", id);
            ck_assert_msg(held == kinds, "script %d names no kinds", id);
        }
        if (id == SCRIPT_STATUS || id == SCRIPT_FORCE || id == SCRIPT_WHO || id == SCRIPT_COUNT)
            ck_assert_msg(held == kinds, "script %d names no kinds", id);
    }
}
END_TEST

static Suite *scripts_suite(void) {
    Suite *s = suite_create("scripts");
    TCase *tc = tcase_create("scripts");
    tcase_add_test(tc, test_format_mutex);
    tcase_add_test(tc, test_format_rw);
    tcase_add_test(tc, test_format_sem_fair);
    tcase_add_test(tc, test_format_batches);
    tcase_add_test(tc, test_format_status_force_who);
    tcase_add_test(tc, test_format_register);
    tcase_add_test(tc, test_choose);
    tcase_add_test(tc, test_channels);
    tcase_add_test(tc, test_decode_acquire);
    tcase_add_test(tc, test_decode_release);
    tcase_add_test(tc, test_decode_status_force_who);
    tcase_add_test(tc, test_decode_batches);
    tcase_add_test(tc, test_codes_agree);
    tcase_add_test(tc, test_format_elect);
    tcase_add_test(tc, test_decode_leader);
    tcase_add_test(tc, test_multi);
    tcase_add_test(tc, test_multi_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(scripts_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
