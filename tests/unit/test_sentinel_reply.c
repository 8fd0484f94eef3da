/* Unit tests of daemon/backend/sentinel_reply: SENTINEL get-master-addr-by-name's answers.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/sentinel_reply.h"

/* A reply as hiredis's reader builds it, on the stack. */
typedef struct {
    redisReply top, host, port;
    redisReply *els[2];
} addr_reply_t;

static redisReply *addr_reply(addr_reply_t *a, const char *host, size_t hlen, const char *port,
                              size_t plen) {
    memset(a, 0, sizeof(*a));
    a->host.type = a->port.type = REDIS_REPLY_STRING;
    a->host.str = (char *)(uintptr_t)host;
    a->host.len = hlen;
    a->port.str = (char *)(uintptr_t)port;
    a->port.len = plen;
    a->els[0] = &a->host;
    a->els[1] = &a->port;
    a->top.type = REDIS_REPLY_ARRAY;
    a->top.elements = 2;
    a->top.element = a->els;
    return &a->top;
}

static int parse(const char *host, const char *port, char *out, int *p, char *err) {
    addr_reply_t a;
    return sentinel_reply_addr(addr_reply(&a, host, strlen(host), port, strlen(port)), out, 256,
                               p, err, 128);
}

START_TEST(test_addr_good) {
    char host[256], err[128];
    int port = 0;
    ck_assert_int_eq(parse("10.0.0.5", "6379", host, &port, err), 0);
    ck_assert_str_eq(host, "10.0.0.5");
    ck_assert_int_eq(port, 6379);
    ck_assert_int_eq(parse("redis-1.example", "1", host, &port, err), 0);
    ck_assert_int_eq(port, 1);
    ck_assert_int_eq(parse("::1", "65535", host, &port, err), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(port, 65535);
}
END_TEST

/* The port is digits only, 1..65535, nothing after: "6379x" is no port. */
START_TEST(test_addr_bad_port) {
    const char *bad[] = {"6379x", "", "0", "65536", "99999999999", "-6379", "+6379", " 6379",
                         "6379 ", "63 79", "0x18eb", "6379\r\n", "4294973675" /* 2^32 + 6379 */};
    char host[256], err[128];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int port = 0;
        err[0] = '\0';
        ck_assert_msg(parse("10.0.0.5", bad[i], host, &port, err) == SENTINEL_REPLY_BAD,
                      "port \"%s\" accepted (as %d)", bad[i], port);
        ck_assert_msg(strstr(err, "port") != NULL, "err: %s", err);
    }
    /* Bytes after a NUL inside the string are part of it. */
    addr_reply_t a;
    int port = 0;
    ck_assert_int_eq(sentinel_reply_addr(addr_reply(&a, "h", 1, "6379\0x", 6), host, 256, &port,
                                         err, sizeof(err)),
                     SENTINEL_REPLY_BAD);
}
END_TEST

START_TEST(test_addr_bad_host) {
    char host[16], err[128], longest[16], toolong[17];
    int port = 0;
    addr_reply_t a;
    memset(longest, 'h', 15);
    longest[15] = '\0';
    memset(toolong, 'h', 16);
    toolong[16] = '\0';
    ck_assert_int_eq(sentinel_reply_addr(addr_reply(&a, longest, 15, "6379", 4), host,
                                         sizeof(host), &port, err, sizeof(err)),
                     0);
    ck_assert_str_eq(host, longest);
    ck_assert_int_eq(sentinel_reply_addr(addr_reply(&a, toolong, 16, "6379", 4), host,
                                         sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_BAD);
    ck_assert_int_eq(sentinel_reply_addr(addr_reply(&a, "", 0, "6379", 4), host, sizeof(host),
                                         &port, err, sizeof(err)),
                     SENTINEL_REPLY_BAD);
    ck_assert_int_eq(sentinel_reply_addr(addr_reply(&a, "h\0x", 3, "6379", 4), host,
                                         sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_BAD);
}
END_TEST

START_TEST(test_addr_other_replies) {
    char host[256], err[128];
    int port = 0;
    redisReply nil = {.type = REDIS_REPLY_NIL};
    ck_assert_int_eq(sentinel_reply_addr(&nil, host, sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_UNKNOWN);
    char msg[] = "NOAUTH Authentication required.";
    redisReply e = {.type = REDIS_REPLY_ERROR, .str = msg, .len = sizeof(msg) - 1};
    ck_assert_int_eq(sentinel_reply_addr(&e, host, sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_ERROR);
    ck_assert_str_eq(err, msg);
    redisReply i = {.type = REDIS_REPLY_INTEGER, .integer = 6379};
    ck_assert_int_eq(sentinel_reply_addr(&i, host, sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_ERROR);
    ck_assert_str_eq(err, "unexpected reply");
    /* One element, or the port as an integer. */
    addr_reply_t a;
    redisReply *r = addr_reply(&a, "h", 1, "6379", 4);
    r->elements = 1;
    ck_assert_int_eq(sentinel_reply_addr(r, host, sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_ERROR);
    r = addr_reply(&a, "h", 1, "6379", 4);
    a.port.type = REDIS_REPLY_INTEGER;
    ck_assert_int_eq(sentinel_reply_addr(r, host, sizeof(host), &port, err, sizeof(err)),
                     SENTINEL_REPLY_ERROR);
}
END_TEST

static Suite *sentinel_reply_suite(void) {
    Suite *s = suite_create("sentinel_reply");
    TCase *tc = tcase_create("addr");
    tcase_add_test(tc, test_addr_good);
    tcase_add_test(tc, test_addr_bad_port);
    tcase_add_test(tc, test_addr_bad_host);
    tcase_add_test(tc, test_addr_other_replies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(sentinel_reply_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
