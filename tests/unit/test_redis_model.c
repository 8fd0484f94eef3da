/* Unit tests for tests/unit/redis_model.c: the in-memory Redis the fake backend runs scripts on.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "redis_model.h"

static uint64_t clock_ms;
static long long published;

static uint64_t on_clock(void *data) {
    (void)data;
    return clock_ms;
}

static long long on_publish(void *data, const char *channel, size_t clen, const char *msg,
                            size_t mlen) {
    (void)data;
    (void)msg;
    (void)mlen;
    published++;
    return clen == 2 && memcmp(channel, "ch", 2) == 0 ? 3 : 0;
}

static rmodel_t *m;

static void setup(void) {
    clock_ms = 1000000;
    published = 0;
    m = rmodel_new(on_clock, on_publish, NULL);
}

static void teardown(void) {
    rmodel_free(m);
}

/* The reply's integer, freed. */
static long long int_of(redisReply *r) {
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* One script with no keys and no arguments. */
static redisReply *eval(const char *lua) {
    const char *argv[1] = {"0"};
    return rmodel_eval(m, lua, 1, argv, NULL);
}

START_TEST(test_expiry_on_the_clock) {
    freeReplyObject(rmodel_call(m, "hset", "h", "f", "1", NULL));
    ck_assert_int_eq(int_of(rmodel_call(m, "pttl", "h", NULL)), -1);
    ck_assert_int_eq(int_of(rmodel_call(m, "pexpire", "h", "500", NULL)), 1);
    clock_ms += 499;
    ck_assert_int_eq(int_of(rmodel_call(m, "pttl", "h", NULL)), 1);
    clock_ms += 1;
    ck_assert_int_eq(int_of(rmodel_call(m, "pttl", "h", NULL)), -2);
    ck_assert_int_eq(int_of(rmodel_call(m, "exists", "h", NULL)), 0);
    /* SET drops an expiry; PX sets one; PEXPIRE 0 deletes */
    freeReplyObject(rmodel_call(m, "set", "s", "v", "px", "10", NULL));
    ck_assert_int_eq(int_of(rmodel_call(m, "pttl", "s", NULL)), 10);
    freeReplyObject(rmodel_call(m, "set", "s", "v", NULL));
    ck_assert_int_eq(int_of(rmodel_call(m, "pttl", "s", NULL)), -1);
    ck_assert_int_eq(int_of(rmodel_call(m, "pexpire", "s", "0", NULL)), 1);
    ck_assert_int_eq(int_of(rmodel_call(m, "exists", "s", NULL)), 0);
}
END_TEST

START_TEST(test_wrongtype_and_empty_keys) {
    freeReplyObject(rmodel_call(m, "set", "s", "1", NULL));
    redisReply *r = rmodel_call(m, "hget", "s", "f", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert(strncmp(r->str, "WRONGTYPE", 9) == 0);
    freeReplyObject(r);
    /* an aggregate left empty is gone */
    freeReplyObject(rmodel_call(m, "rpush", "l", "a", "b", "a", NULL));
    ck_assert_int_eq(int_of(rmodel_call(m, "lrem", "l", "0", "a", NULL)), 2);
    r = rmodel_call(m, "lpop", "l", NULL);
    ck_assert_str_eq(r->str, "b");
    freeReplyObject(r);
    ck_assert_int_eq(int_of(rmodel_call(m, "exists", "l", NULL)), 0);
}
END_TEST

/* INCRBY, DECRBY and DECR: a missing key counts as 0, a string that is no
 * integer is an error (a count-down latch's DECR goes below 0 as Redis's). */
START_TEST(test_counters) {
    ck_assert_int_eq(int_of(rmodel_call(m, "decr", "n", NULL)), -1);
    ck_assert_int_eq(int_of(rmodel_call(m, "incrby", "n", "3", NULL)), 2);
    ck_assert_int_eq(int_of(rmodel_call(m, "decrby", "n", "2", NULL)), 0);
    ck_assert_int_eq(int_of(rmodel_call(m, "decr", "n", NULL)), -1);
    redisReply *r = rmodel_call(m, "get", "n", NULL);
    ck_assert_str_eq(r->str, "-1");
    freeReplyObject(r);
    freeReplyObject(rmodel_call(m, "set", "s", "x", NULL));
    r = rmodel_call(m, "decr", "s", NULL);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    freeReplyObject(rmodel_call(m, "hset", "h", "f", "1", NULL));
    r = rmodel_call(m, "decr", "h", NULL);
    ck_assert(strncmp(r->str, "WRONGTYPE", 9) == 0);
    freeReplyObject(r);
}
END_TEST

/* Sorted by score, then member; ZRANGEBYSCORE's LIMIT; scores written as
 * integers when they are. */
START_TEST(test_zset_order) {
    freeReplyObject(rmodel_call(m, "zadd", "z", "5", "b", NULL));
    freeReplyObject(rmodel_call(m, "zadd", "z", "5", "a", NULL));
    freeReplyObject(rmodel_call(m, "zadd", "z", "1", "c", NULL));
    redisReply *r = rmodel_call(m, "zrange", "z", "0", "-1", "withscores", NULL);
    ck_assert_int_eq(r->elements, 6);
    ck_assert_str_eq(r->element[0]->str, "c");
    ck_assert_str_eq(r->element[1]->str, "1");
    ck_assert_str_eq(r->element[2]->str, "a");
    ck_assert_str_eq(r->element[4]->str, "b");
    freeReplyObject(r);
    r = rmodel_call(m, "zrangebyscore", "z", "0", "5", "limit", "0", "2", NULL);
    ck_assert_int_eq(r->elements, 2);
    ck_assert_str_eq(r->element[1]->str, "a");
    freeReplyObject(r);
    ck_assert_int_eq(int_of(rmodel_call(m, "zcount", "z", "0", "4", NULL)), 1);
}
END_TEST

/* Lua as Redis runs it: redis.call raises {err = ...}, redis.pcall returns
 * it; numbers truncate; false is a nil element;
 * TIME is the clock; PUBLISH answers the callback's count. */
START_TEST(test_lua_conversions) {
    redisReply *r = eval("local ok, e = pcall(redis.call, 'nosuch')\n"
                         "local p = redis.pcall('nosuch')\n"
                         "local t = redis.call('time')\n"
                         "return {type(e) == 'table' and e.err ~= nil, p.err ~= nil, 2.9,"
                         " tonumber(t[1]), tonumber(t[2]), redis.call('publish', 'ch', 'x'),"
                         " false, 7}");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->elements, 8);
    ck_assert_int_eq(r->element[0]->integer, 1);
    ck_assert_int_eq(r->element[1]->integer, 1);
    ck_assert_int_eq(r->element[2]->integer, 2);
    ck_assert_int_eq(r->element[3]->integer, 1000);
    ck_assert_int_eq(r->element[4]->integer, 0);
    ck_assert_int_eq(r->element[5]->integer, 3);
    ck_assert_int_eq(r->element[6]->type, REDIS_REPLY_NIL);
    ck_assert_int_eq(r->element[7]->integer, 7);
    freeReplyObject(r);
    ck_assert_int_eq(published, 1);
    /* an error raised to the top is the script's error reply */
    r = eval("redis.call('hget', 'a')");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert(strstr(r->str, "wrong number of arguments") != NULL);
    freeReplyObject(r);
    r = eval("return redis.status_reply('FINE')");
    ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
    ck_assert_str_eq(r->str, "FINE");
    freeReplyObject(r);
}
END_TEST

/* KEYS and ARGV from the call; a hash keeps its fields in insertion order. */
START_TEST(test_keys_argv_hash_order) {
    const char *argv[] = {"1", "h", "b", "a"};
    static const char lua[] = "redis.call('hset', KEYS[1], ARGV[1], 1, ARGV[2], 2)\n"
                              "redis.call('hdel', KEYS[1], ARGV[1])\n"
                              "redis.call('hset', KEYS[1], ARGV[1], 3)\n"
                              "return redis.call('hkeys', KEYS[1])";
    redisReply *r = rmodel_eval(m, lua, 4, argv, NULL);
    ck_assert_int_eq(r->elements, 2);
    ck_assert_str_eq(r->element[0]->str, "a");
    ck_assert_str_eq(r->element[1]->str, "b");
    freeReplyObject(r);
}
END_TEST

static Suite *redis_model_suite(void) {
    Suite *s = suite_create("redis_model");
    TCase *tc = tcase_create("model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_expiry_on_the_clock);
    tcase_add_test(tc, test_wrongtype_and_empty_keys);
    tcase_add_test(tc, test_counters);
    tcase_add_test(tc, test_zset_order);
    tcase_add_test(tc, test_lua_conversions);
    tcase_add_test(tc, test_keys_argv_hash_order);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(redis_model_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
