/* Unit tests of proto/: request parsing, line limits and reply formatting.
 * SPDX-License-Identifier: MIT */
#include "proto/proto.h"

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char NUM_DETAIL[] = "numbers are decimal digits, 0 to 2147483647";
static const char TAG_DETAIL[] = "a tag is # and 1 to 16 of 0-9 A-Z a-z _ -";
static const char TAG_ALONE_DETAIL[] = "a tag is followed by a request";

/* Parses a NUL-terminated line (given without its LF). */
static proto_status_t parse(const char *line, proto_request_t *req) {
    return proto_parse_line(line, strlen(line), req);
}

/* Returns a malloc'd string of n copies of c. */
static char *repeat(char c, size_t n) {
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ---- feeding helpers ---------------------------------------------------- */

/* What proto_feed returned, when it was not NEED_MORE. */
typedef struct outcome_s {
    proto_status_t st;
    proto_request_t req;
    size_t piece;  /* index of the piece whose feed produced it */
} outcome_t;

#define OUTCOMES_MAX 64

typedef struct outcomes_s {
    outcome_t o[OUTCOMES_MAX];
    size_t n;
} outcomes_t;

/* Frees what the requests among the outcomes own (an MLOCK's names). */
static void outcomes_free(outcomes_t *out) {
    for (size_t i = 0; i < out->n; i++)
        if (out->o[i].st == PROTO_REQUEST) proto_request_free(&out->o[i].req);
    out->n = 0;
}

/* Feeds one piece until every byte of it is used, recording outcomes and
 * checking the contract of *used and the allocation bound. */
static void feed_piece(proto_parser_t *p, const char *piece, size_t len,
                       size_t index, outcomes_t *out) {
    size_t off = 0;
    while (off < len) {
        proto_request_t req;
        size_t used = 12345;
        proto_status_t st = proto_feed(p, piece + off, len - off, &used, &req);
        ck_assert_uint_le(used, len - off);
        ck_assert_uint_le(p->cap, p->max_line);
        ck_assert_uint_le(p->len, p->max_line);
        if (st == PROTO_NEED_MORE) {
            ck_assert_uint_eq(used, len - off);
        } else {
            ck_assert_uint_gt(used, 0);
            ck_assert_uint_lt(out->n, OUTCOMES_MAX);
            out->o[out->n].st = st;
            out->o[out->n].req = req;
            out->o[out->n].piece = index;
            out->n++;
        }
        off += used;
    }
}

/* Feeds data cut at the given offsets (ascending, each < len). */
static void feed_cut(size_t max_line, const char *data, size_t len,
                     const size_t *cuts, size_t ncuts, outcomes_t *out) {
    proto_parser_t p;
    size_t start = 0;

    ck_assert_int_eq(proto_parser_init(&p, max_line), 0);
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        ck_assert_uint_le(start, end);
        feed_piece(&p, data + start, end - start, i, out);
        start = end;
    }
    proto_parser_free(&p);
}

static void feed_whole(size_t max_line, const char *data, size_t len,
                       outcomes_t *out) {
    feed_cut(max_line, data, len, NULL, 0, out);
}

/* Feeds one byte per proto_feed call. */
static void feed_bytes(size_t max_line, const char *data, size_t len,
                       outcomes_t *out) {
    proto_parser_t p;

    ck_assert_int_eq(proto_parser_init(&p, max_line), 0);
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < len; i++) feed_piece(&p, data + i, 1, i, out);
    proto_parser_free(&p);
}

static void assert_same_request(const proto_request_t *a, const proto_request_t *b) {
    ck_assert_int_eq(a->cmd, b->cmd);
    ck_assert_int_eq(a->err, b->err);
    ck_assert_uint_eq(a->name_len, b->name_len);
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->wait_ms, b->wait_ms);
    ck_assert_uint_eq(a->lease_ms, b->lease_ms);
    ck_assert_uint_eq(a->count, b->count);
    ck_assert_uint_eq(a->value_len, b->value_len);
    ck_assert_str_eq(a->value, b->value);
    ck_assert_uint_eq(a->limit, b->limit);
    ck_assert_uint_eq(a->nnames, b->nnames);
    ck_assert_uint_eq(a->tag_len, b->tag_len);
    ck_assert_str_eq(a->tag, b->tag);
    if (a->detail == NULL || b->detail == NULL)
        ck_assert_ptr_eq(a->detail, b->detail);
    else
        ck_assert_str_eq(a->detail, b->detail);
}

static void assert_same_outcomes(const outcomes_t *a, const outcomes_t *b) {
    ck_assert_uint_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->o[i].st, b->o[i].st);
        assert_same_request(&a->o[i].req, &b->o[i].req);
    }
}

/* ---- every command ------------------------------------------------------ */

static const struct {
    const char *line;
    proto_cmd_t cmd;
    const char *name;
    uint32_t wait_ms;
    uint32_t lease_ms;
    uint32_t count; /* permits */
} good_lines[] = {
    {"PING", PROTO_CMD_PING, "", 0, 0, 0},
    {"LOCK job.42", PROTO_CMD_LOCK, "job.42", 0, 0, 0},
    {"LOCK job.42 5000", PROTO_CMD_LOCK, "job.42", 0, 5000, 0},
    {"TRYLOCK a", PROTO_CMD_TRYLOCK, "a", 0, 0, 0},
    {"TRYLOCK a 250", PROTO_CMD_TRYLOCK, "a", 250, 0, 0},
    {"TRYLOCK a 250 9000", PROTO_CMD_TRYLOCK, "a", 250, 9000, 0},
    {"TRYLOCK a 0 1", PROTO_CMD_TRYLOCK, "a", 0, 1, 0},
    {"UNLOCK a/b:c", PROTO_CMD_UNLOCK, "a/b:c", 0, 0, 0},
    {"RENEW a", PROTO_CMD_RENEW, "a", 0, 0, 0},
    {"RENEW a 7000", PROTO_CMD_RENEW, "a", 0, 7000, 0},
    {"STATUS ~!", PROTO_CMD_STATUS, "~!", 0, 0, 0},
    {"WHO a.b", PROTO_CMD_WHO, "a.b", 0, 0, 0},
    {"FORCEUNLOCK x", PROTO_CMD_FORCEUNLOCK, "x", 0, 0, 0},
    {"INFO", PROTO_CMD_INFO, "", 0, 0, 0},
    {"CLIENTS", PROTO_CMD_CLIENTS, "", 0, 0, 0},
    {"LIST", PROTO_CMD_LIST, "", 0, 0, 0},
    {"list job* 10", PROTO_CMD_LIST, "", 0, 0, 0},
    {"QUIT", PROTO_CMD_QUIT, "", 0, 0, 0},
    {"CANCEL", PROTO_CMD_CANCEL, "", 0, 0, 0},
    {"CANCEL #7", PROTO_CMD_CANCEL, "", 0, 0, 0},
    {"RLOCK r", PROTO_CMD_RLOCK, "r", 0, 0, 0},
    {"RLOCK r 3000", PROTO_CMD_RLOCK, "r", 0, 3000, 0},
    {"WLOCK w 3000", PROTO_CMD_WLOCK, "w", 0, 3000, 0},
    {"TRYRLOCK r 20", PROTO_CMD_TRYRLOCK, "r", 20, 0, 0},
    {"TRYRLOCK r 20 900", PROTO_CMD_TRYRLOCK, "r", 20, 900, 0},
    {"TRYWLOCK w", PROTO_CMD_TRYWLOCK, "w", 0, 0, 0},
    {"TRYWLOCK w 0 900", PROTO_CMD_TRYWLOCK, "w", 0, 900, 0},
    {"RUNLOCK r", PROTO_CMD_RUNLOCK, "r", 0, 0, 0},
    {"WUNLOCK w", PROTO_CMD_WUNLOCK, "w", 0, 0, 0},
    {"SEMINIT s 0", PROTO_CMD_SEMINIT, "s", 0, 0, 0},
    {"SEMINIT s 2147483647", PROTO_CMD_SEMINIT, "s", 0, 0, 2147483647},
    {"ACQUIRE s 3", PROTO_CMD_ACQUIRE, "s", 0, 0, 3},
    {"ACQUIRE s 3 800", PROTO_CMD_ACQUIRE, "s", 0, 800, 3},
    {"TRYACQUIRE s 2", PROTO_CMD_TRYACQUIRE, "s", 0, 0, 2},
    {"TRYACQUIRE s 2 50", PROTO_CMD_TRYACQUIRE, "s", 50, 0, 2},
    {"TRYACQUIRE s 2 50 700", PROTO_CMD_TRYACQUIRE, "s", 50, 700, 2},
    {"RELEASE s 1", PROTO_CMD_RELEASE, "s", 0, 0, 1},
    {"FAIRLOCK f", PROTO_CMD_FAIRLOCK, "f", 0, 0, 0},
    {"FAIRLOCK f 900", PROTO_CMD_FAIRLOCK, "f", 0, 900, 0},
    {"TRYFAIRLOCK f", PROTO_CMD_TRYFAIRLOCK, "f", 0, 0, 0},
    {"TRYFAIRLOCK f 30 900", PROTO_CMD_TRYFAIRLOCK, "f", 30, 900, 0},
    {"ELECT e 10.0.0.5:8080", PROTO_CMD_ELECT, "e", 0, 0, 0},
    {"ELECT e v 900", PROTO_CMD_ELECT, "e", 0, 900, 0},
    {"RESIGN e", PROTO_CMD_RESIGN, "e", 0, 0, 0},
    {"LEADER e", PROTO_CMD_LEADER, "e", 0, 0, 0},
    {"OBSERVE e", PROTO_CMD_OBSERVE, "e", 0, 0, 0},
    {"UNOBSERVE e", PROTO_CMD_UNOBSERVE, "e", 0, 0, 0},
    {"LATCHSET l 3", PROTO_CMD_LATCHSET, "l", 0, 0, 3},
    {"LATCHSET l 2147483647", PROTO_CMD_LATCHSET, "l", 0, 0, 2147483647},
    {"COUNTDOWN l", PROTO_CMD_COUNTDOWN, "l", 0, 0, 0},
    {"AWAIT l", PROTO_CMD_AWAIT, "l", 0, 0, 0},
    {"TRYAWAIT l", PROTO_CMD_TRYAWAIT, "l", 0, 0, 0},
    {"TRYAWAIT l 250", PROTO_CMD_TRYAWAIT, "l", 250, 0, 0},
    {"LATCHCOUNT l", PROTO_CMD_LATCHCOUNT, "l", 0, 0, 0},
    {"MLOCK 2 a b", PROTO_CMD_MLOCK, "a", 0, 0, 0},
    {"MLOCK 1 a 900", PROTO_CMD_MLOCK, "a", 0, 900, 0},
    {"TRYMLOCK 2 a b", PROTO_CMD_TRYMLOCK, "a", 0, 0, 0},
    {"TRYMLOCK 2 a b 30 900", PROTO_CMD_TRYMLOCK, "a", 30, 900, 0},
    {"MUNLOCK 3 c b a", PROTO_CMD_MUNLOCK, "c", 0, 0, 0},
};

START_TEST(test_parse_each_command) {
    proto_request_t req;
    const char *line = good_lines[_i].line;

    ck_assert_int_eq(parse(line, &req), PROTO_REQUEST);
    ck_assert_int_eq(req.cmd, good_lines[_i].cmd);
    ck_assert_int_eq(req.err, PROTO_ERR_NONE);
    ck_assert_str_eq(req.name, good_lines[_i].name);
    ck_assert_uint_eq(req.name_len, strlen(good_lines[_i].name));
    ck_assert_uint_eq(req.wait_ms, good_lines[_i].wait_ms);
    ck_assert_uint_eq(req.lease_ms, good_lines[_i].lease_ms);
    ck_assert_uint_eq(req.count, good_lines[_i].count);
    ck_assert_ptr_null(req.detail);
    proto_request_free(&req);
}
END_TEST

/* proto_next_is: the first whole request in a buffer, blank lines
 * skipped, is CANCEL untagged and alone; -1 until a line is whole. */
START_TEST(test_next_is) {
    const struct {
        const char *data;
        int want;
    } cases[] = {
        {"CANCEL\n", 1},
        {"cancel\r\n", 1},
        {"  Cancel \t\nPING\n", 1},
        {"\n\r\n \nCANCEL\n", 1},
        {"PING\nCANCEL\n", 0},
        {"CANCEL x\n", 0},  /* bad arguments: not a CANCEL */
        {"CANCELX\n", 0},
        {"#8 CANCEL\n", 0},  /* tagged: not the bare CANCEL of an untagged wait */
        {"\n #8 cancel\r\nCANCEL\n", 0},
        {"#8\nCANCEL\n", 0},  /* a malformed tag is a bad line */
        {"# CANCEL\n", 0},
        {"#8 CANC", -1},
        {"CANCEL #7\n", 0},  /* withdraws a tagged request, not the wait */
        {"CANCEL #7\nCANCEL\n", 0},
        {"CANCEL #\n", 0},
        {"CANC", -1},
        {"CANCEL", -1},      /* no LF yet */
        {"\n\n", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(proto_next_is(cases[i].data, strlen(cases[i].data), PROTO_CMD_CANCEL) ==
                          cases[i].want,
                      "case %zu", i);
    /* A session's input buffer before its first byte: no memory at all
     * (memchr on NULL is undefined even for 0 bytes; UBSan said so when
     * the stateful fuzzer resumed such a session's input). */
    ck_assert_int_eq(proto_next_is(NULL, 0, PROTO_CMD_CANCEL), -1);
}
END_TEST

/* CANCEL: no argument (the wait right before it), or #<tag>: the tagged
 * request to withdraw, its tag in value without the '#'. */
START_TEST(test_cancel_tag) {
    static const struct {
        const char *line;
        const char *target;
        const char *tag;
    } good[] = {
        {"CANCEL", "", ""},
        {"cancel", "", ""},
        {"CANCEL #7", "7", ""},
        {"Cancel #0123456789abcdef", "0123456789abcdef", ""},
        {"CANCEL\t#a-b_C  \r", "a-b_C", ""},
        {"#8 CANCEL #7", "7", "8"},
        {"#8 CANCEL", "", "8"},
        {"#7 CANCEL #7", "7", "7"},  /* the session decides what that means */
    };
    for (size_t i = 0; i < ARRAY_LEN(good); i++) {
        proto_request_t req;
        ck_assert_msg(parse(good[i].line, &req) == PROTO_REQUEST, "'%s' rejected", good[i].line);
        ck_assert_int_eq(req.cmd, PROTO_CMD_CANCEL);
        ck_assert_str_eq(req.value, good[i].target);
        ck_assert_uint_eq(req.value_len, strlen(good[i].target));
        ck_assert_str_eq(req.tag, good[i].tag);
        ck_assert_uint_eq(req.name_len, 0);
    }
    static const char *const bad[] = {
        "CANCEL 7", "CANCEL now", "CANCEL #", "CANCEL #a.b", "CANCEL ##7", "CANCEL #7#",
        "CANCEL #0123456789abcdefg", "CANCEL #7 #8", "CANCEL #7 1", "CANCEL 7 #7",
        "CANCEL #\xc3\xa9",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        proto_request_t req;
        ck_assert_msg(parse(bad[i], &req) == PROTO_ERROR, "'%s' was accepted", bad[i]);
        ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
        ck_assert_int_eq(req.cmd, PROTO_CMD_CANCEL);
        ck_assert_str_eq(req.detail, "CANCEL [#<tag>]");
        ck_assert_uint_eq(req.tag_len, 0);
        char tagged[64];
        snprintf(tagged, sizeof(tagged), "#t %s", bad[i]);
        ck_assert_int_eq(parse(tagged, &req), PROTO_ERROR);
        ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
        ck_assert_str_eq(req.tag, "t");
    }
    /* a NUL in the target tag */
    proto_request_t req;
    ck_assert_int_eq(proto_parse_line("CANCEL #a\0", 10, &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
}
END_TEST

START_TEST(test_list_args) {
    proto_request_t req;
    const char *line = "LIST";
    ck_assert_int_eq(proto_parse_line(line, strlen(line), &req), PROTO_REQUEST);
    ck_assert_str_eq(req.value, "*");
    ck_assert_uint_eq(req.limit, PROTO_LIST_DEFAULT);
    ck_assert_uint_eq(req.name_len, 0); /* names no one lock: read on some name */
    line = "LIST job[0-9]* 1000";
    ck_assert_int_eq(proto_parse_line(line, strlen(line), &req), PROTO_REQUEST);
    ck_assert_str_eq(req.value, "job[0-9]*");
    ck_assert_uint_eq(req.limit, PROTO_LIST_MAX);
    const char *bad[] = {"LIST * 0", "LIST * 1001", "LIST * -1", "LIST * 1x", "LIST a 1 2"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(proto_parse_line(bad[i], strlen(bad[i]), &req), PROTO_ERROR);
        ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    }
    char longp[PROTO_NAME_MAX + 8] = "LIST ";
    memset(longp + 5, 'a', PROTO_NAME_MAX + 1);
    longp[5 + PROTO_NAME_MAX + 1] = '\0';
    ck_assert_int_eq(proto_parse_line(longp, strlen(longp), &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
}
END_TEST

START_TEST(test_every_command_word_is_covered) {
    /* good_lines names each command at least once. */
    for (int c = PROTO_CMD_NONE + 1; c < PROTO_CMD_COUNT; c++) {
        int seen = 0;
        for (size_t i = 0; i < ARRAY_LEN(good_lines); i++)
            if (good_lines[i].cmd == (proto_cmd_t)c) seen = 1;
        ck_assert_msg(seen, "command %s has no test line", proto_cmd_name((proto_cmd_t)c));
    }
}
END_TEST

START_TEST(test_command_word_case_insensitive) {
    static const struct {
        const char *line;
        proto_cmd_t cmd;
    } cases[] = {
        {"ping", PROTO_CMD_PING},         {"Ping", PROTO_CMD_PING},
        {"pInG", PROTO_CMD_PING},         {"lock a", PROTO_CMD_LOCK},
        {"Lock a 1", PROTO_CMD_LOCK},     {"tryLock a 1 2", PROTO_CMD_TRYLOCK},
        {"unlock a", PROTO_CMD_UNLOCK},   {"Renew a", PROTO_CMD_RENEW},
        {"status a", PROTO_CMD_STATUS},   {"ForceUnlock a", PROTO_CMD_FORCEUNLOCK},
        {"info", PROTO_CMD_INFO},         {"quit", PROTO_CMD_QUIT},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_int_eq(parse(cases[i].line, &req), PROTO_REQUEST);
        ck_assert_int_eq(req.cmd, cases[i].cmd);
        ck_assert_int_eq(req.err, PROTO_ERR_NONE);
    }
}
END_TEST

START_TEST(test_name_case_sensitive) {
    proto_request_t req;

    ck_assert_int_eq(parse("lock MyLock", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "MyLock");
    ck_assert_int_eq(parse("LOCK mylock", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "mylock");
    ck_assert_int_eq(parse("UNLOCK ABC", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "ABC");
}
END_TEST

START_TEST(test_request_fields_reset_between_parses) {
    proto_request_t req;

    ck_assert_int_eq(parse("TRYLOCK a 1 2", &req), PROTO_REQUEST);
    ck_assert_int_eq(parse("PING", &req), PROTO_REQUEST);
    ck_assert_int_eq(req.cmd, PROTO_CMD_PING);
    ck_assert_str_eq(req.name, "");
    ck_assert_uint_eq(req.name_len, 0);
    ck_assert_uint_eq(req.wait_ms, 0);
    ck_assert_uint_eq(req.lease_ms, 0);
    ck_assert_int_eq(parse("BOGUS", &req), PROTO_ERROR);
    ck_assert_int_eq(parse("LOCK b", &req), PROTO_REQUEST);
    ck_assert_int_eq(req.err, PROTO_ERR_NONE);
    ck_assert_ptr_null(req.detail);
    ck_assert_uint_eq(req.lease_ms, 0);
}
END_TEST

/* ---- TRYLOCK / LOCK / RENEW numbers ------------------------------------ */

START_TEST(test_trylock_wait_and_lease) {
    proto_request_t req;

    ck_assert_int_eq(parse("TRYLOCK t", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.wait_ms, 0);
    ck_assert_uint_eq(req.lease_ms, 0);
    ck_assert_int_eq(parse("TRYLOCK t 1500", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.wait_ms, 1500);
    ck_assert_uint_eq(req.lease_ms, 0);
    ck_assert_int_eq(parse("TRYLOCK t 1500 60000", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.wait_ms, 1500);
    ck_assert_uint_eq(req.lease_ms, 60000);
    ck_assert_int_eq(parse("TRYLOCK t 2147483647 2147483647", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.wait_ms, 2147483647u);
    ck_assert_uint_eq(req.lease_ms, 2147483647u);
}
END_TEST

START_TEST(test_lock_and_renew_lease) {
    proto_request_t req;

    ck_assert_int_eq(parse("LOCK l 1234", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 1234);
    ck_assert_uint_eq(req.wait_ms, 0);
    ck_assert_int_eq(parse("LOCK l", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 0);
    ck_assert_int_eq(parse("RENEW l 99", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 99);
    ck_assert_uint_eq(req.wait_ms, 0);
    ck_assert_int_eq(parse("RENEW l 0", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 0);
}
END_TEST

START_TEST(test_number_limits) {
    proto_request_t req;

    ck_assert_int_eq(parse("LOCK n 2147483647", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 2147483647u);
    ck_assert_int_eq(parse("LOCK n 0", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 0);

    ck_assert_int_eq(parse("LOCK n 2147483648", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(parse("LOCK n 4294967296", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(parse("LOCK n 4294967297", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(parse("LOCK n 18446744073709551616", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(parse("LOCK n 99999999999999999999999999999999999999999", &req),
                     PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
}
END_TEST

static const char *const bad_numbers[] = {
    "+1", "-1", "-0", "0x10", "0X1f", "12a", "1.5", "1e3", "1,000", "a12",
    "2147483648", "4294967295", "99999999999999999999999999999", "\xd9\xa1",
};

START_TEST(test_bad_numbers_give_args) {
    static const char *const prefixes[] = {"LOCK a ", "TRYLOCK a ", "TRYLOCK a 1 ",
                                           "RENEW a "};
    for (size_t p = 0; p < ARRAY_LEN(prefixes); p++) {
        for (size_t i = 0; i < ARRAY_LEN(bad_numbers); i++) {
            char line[128];
            proto_request_t req;
            snprintf(line, sizeof(line), "%s%s", prefixes[p], bad_numbers[i]);
            ck_assert_msg(parse(line, &req) == PROTO_ERROR, "'%s' was accepted", line);
            ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
            ck_assert_ptr_nonnull(req.detail);
            ck_assert_str_eq(req.detail, NUM_DETAIL);
        }
    }
}
END_TEST

START_TEST(test_parse_num) {
    uint32_t v = 7;

    ck_assert_int_eq(proto_parse_num("0", 1, &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(proto_parse_num("2147483647", 10, &v), 0);
    ck_assert_uint_eq(v, 2147483647u);
    /* len bounds the digits: the rest of the buffer is not read. */
    ck_assert_int_eq(proto_parse_num("12x", 2, &v), 0);
    ck_assert_uint_eq(v, 12);

    ck_assert_int_eq(proto_parse_num("", 0, &v), -1);
    ck_assert_int_eq(proto_parse_num("5", 0, &v), -1);
    for (size_t i = 0; i < ARRAY_LEN(bad_numbers); i++)
        ck_assert_msg(proto_parse_num(bad_numbers[i], strlen(bad_numbers[i]), &v) == -1,
                      "'%s' was accepted", bad_numbers[i]);
    ck_assert_int_eq(proto_parse_num(" 1", 2, &v), -1);
    ck_assert_int_eq(proto_parse_num("1 ", 2, &v), -1);
    ck_assert_int_eq(proto_parse_num("1\0", 2, &v), -1);
}
END_TEST

/* ---- errors: UNKNOWN, ARGS, NAME ---------------------------------------- */

START_TEST(test_unknown_command) {
    static const char *const lines[] = {
        "PONG", "LOCKS a", "LOC a", "X", "PING2", "PINGPING", "-PING", "GET a",
        "FORCE UNLOCK a", "TRY LOCK a",
    };
    for (size_t i = 0; i < ARRAY_LEN(lines); i++) {
        proto_request_t req;
        ck_assert_msg(parse(lines[i], &req) == PROTO_ERROR, "'%s' was accepted", lines[i]);
        ck_assert_int_eq(req.err, PROTO_ERR_UNKNOWN);
        ck_assert_int_eq(req.cmd, PROTO_CMD_NONE);
        ck_assert_ptr_null(req.detail);
    }
}
END_TEST

START_TEST(test_too_few_args) {
    static const struct {
        const char *line;
        proto_cmd_t cmd;
    } cases[] = {
        {"LOCK", PROTO_CMD_LOCK},     {"TRYLOCK", PROTO_CMD_TRYLOCK},
        {"UNLOCK", PROTO_CMD_UNLOCK}, {"RENEW", PROTO_CMD_RENEW},
        {"STATUS", PROTO_CMD_STATUS}, {"FORCEUNLOCK", PROTO_CMD_FORCEUNLOCK},
        {"lock   ", PROTO_CMD_LOCK},
        {"SEMINIT s", PROTO_CMD_SEMINIT}, {"ACQUIRE s", PROTO_CMD_ACQUIRE},
        {"TRYACQUIRE s", PROTO_CMD_TRYACQUIRE}, {"RELEASE s", PROTO_CMD_RELEASE},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_int_eq(parse(cases[i].line, &req), PROTO_ERROR);
        ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
        ck_assert_int_eq(req.cmd, cases[i].cmd);
        ck_assert_ptr_nonnull(req.detail);
        ck_assert_str_eq(req.detail, proto_cmd_usage(cases[i].cmd));
    }
}
END_TEST

START_TEST(test_too_many_args) {
    static const struct {
        const char *line;
        proto_cmd_t cmd;
    } cases[] = {
        {"PING x", PROTO_CMD_PING},
        {"INFO all", PROTO_CMD_INFO},
        {"QUIT now", PROTO_CMD_QUIT},
        {"CANCEL x", PROTO_CMD_CANCEL},
        {"CANCEL #a #b", PROTO_CMD_CANCEL},
        {"LOCK a 1 2", PROTO_CMD_LOCK},
        {"TRYLOCK a 1 2 3", PROTO_CMD_TRYLOCK},
        {"UNLOCK a b", PROTO_CMD_UNLOCK},
        {"RENEW a 1 2", PROTO_CMD_RENEW},
        {"STATUS a b", PROTO_CMD_STATUS},
        {"FORCEUNLOCK a b", PROTO_CMD_FORCEUNLOCK},
        {"LOCK a 1 2 3 4 5 6 7 8", PROTO_CMD_LOCK},
        {"PING a b c d e f", PROTO_CMD_PING},
        {"TRYLOCK a 1 2 3 4 5", PROTO_CMD_TRYLOCK},
        {"RLOCK a 1 2", PROTO_CMD_RLOCK},
        {"WLOCK a 1 2", PROTO_CMD_WLOCK},
        {"TRYRLOCK a 1 2 3", PROTO_CMD_TRYRLOCK},
        {"TRYWLOCK a 1 2 3", PROTO_CMD_TRYWLOCK},
        {"RUNLOCK a b", PROTO_CMD_RUNLOCK},
        {"WUNLOCK a 1", PROTO_CMD_WUNLOCK},
        {"SEMINIT s 1 2", PROTO_CMD_SEMINIT},
        {"ACQUIRE s 1 2 3", PROTO_CMD_ACQUIRE},
        {"TRYACQUIRE s 1 2 3 4", PROTO_CMD_TRYACQUIRE},
        {"TRYACQUIRE s 1 2 3 4 5 6", PROTO_CMD_TRYACQUIRE},
        {"RELEASE s 1 2", PROTO_CMD_RELEASE},
        {"FAIRLOCK f 1 2", PROTO_CMD_FAIRLOCK},
        {"TRYFAIRLOCK f 1 2 3", PROTO_CMD_TRYFAIRLOCK},
        {"ELECT e", PROTO_CMD_ELECT},
        {"ELECT e v 1 2", PROTO_CMD_ELECT},
        {"RESIGN e 1", PROTO_CMD_RESIGN},
        {"LATCHSET l", PROTO_CMD_LATCHSET},
        {"LATCHSET l 1 2", PROTO_CMD_LATCHSET},
        {"AWAIT l 1", PROTO_CMD_AWAIT},
        {"TRYAWAIT l 1 2", PROTO_CMD_TRYAWAIT},
        {"COUNTDOWN l 1", PROTO_CMD_COUNTDOWN},
        {"LATCHCOUNT l 1", PROTO_CMD_LATCHCOUNT},
        {"LEADER", PROTO_CMD_LEADER},
        {"OBSERVE e f", PROTO_CMD_OBSERVE},
        {"UNOBSERVE", PROTO_CMD_UNOBSERVE},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_msg(parse(cases[i].line, &req) == PROTO_ERROR, "'%s' was accepted",
                      cases[i].line);
        ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
        ck_assert_int_eq(req.cmd, cases[i].cmd);
        ck_assert_ptr_nonnull(req.detail);
        ck_assert_str_eq(req.detail, proto_cmd_usage(cases[i].cmd));
    }
}
END_TEST

START_TEST(test_name_length_limits) {
    proto_request_t req;
    char *name = repeat('n', PROTO_NAME_MAX + 1);
    char line[PROTO_NAME_MAX + 32];

    /* 255 bytes: the longest name. */
    name[PROTO_NAME_MAX] = '\0';
    snprintf(line, sizeof(line), "LOCK %s 10", name);
    ck_assert_int_eq(parse(line, &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.name_len, PROTO_NAME_MAX);
    ck_assert_str_eq(req.name, name);
    ck_assert_uint_eq(req.lease_ms, 10);

    /* 256 bytes: too long. */
    name[PROTO_NAME_MAX] = 'n';
    snprintf(line, sizeof(line), "LOCK %s", name);
    ck_assert_int_eq(parse(line, &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_NAME);
    ck_assert_int_eq(req.cmd, PROTO_CMD_LOCK);
    ck_assert_ptr_null(req.detail);

    ck_assert_int_eq(proto_name_valid(name, PROTO_NAME_MAX), 1);
    ck_assert_int_eq(proto_name_valid(name, PROTO_NAME_MAX + 1), 0);
    ck_assert_int_eq(proto_name_valid(name, 1), 1);
    ck_assert_int_eq(proto_name_valid("", 0), 0);
    free(name);
}
END_TEST

START_TEST(test_name_256_bytes_through_feed) {
    char *name = repeat('q', PROTO_NAME_MAX + 1);
    char line[2 * PROTO_NAME_MAX + 32];
    outcomes_t out;

    int n = snprintf(line, sizeof(line), "UNLOCK %s\nUNLOCK %.*s\n", name,
                     PROTO_NAME_MAX, name);
    ck_assert_int_lt(n, (int)sizeof(line));
    feed_whole(PROTO_LINE_DEFAULT, line, (size_t)n, &out);
    ck_assert_uint_eq(out.n, 2);
    ck_assert_int_eq(out.o[0].st, PROTO_ERROR);
    ck_assert_int_eq(out.o[0].req.err, PROTO_ERR_NAME);
    ck_assert_int_eq(out.o[1].st, PROTO_REQUEST);
    ck_assert_uint_eq(out.o[1].req.name_len, PROTO_NAME_MAX);
    free(name);
}
END_TEST

/* Every byte value inside a name: 0x21-0x7E pass, space and tab separate
 * words, everything else (NUL, CR, LF, 0x7F, high bytes) is NAME. */
START_TEST(test_name_every_byte) {
    for (int b = 0; b < 256; b++) {
        char line[] = "LOCK x?y";
        proto_request_t req;
        line[6] = (char)b;
        proto_status_t st = proto_parse_line(line, sizeof(line) - 1, &req);
        if (b == ' ' || b == '\t') {
            /* "LOCK x y": y is not a number. */
            ck_assert_int_eq(st, PROTO_ERROR);
            ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
        } else if (b >= 0x21 && b <= 0x7e) {
            ck_assert_msg(st == PROTO_REQUEST, "byte 0x%02x rejected", b);
            ck_assert_uint_eq(req.name_len, 3);
            ck_assert_int_eq((unsigned char)req.name[1], b);
        } else {
            ck_assert_msg(st == PROTO_ERROR, "byte 0x%02x accepted", b);
            ck_assert_int_eq(req.err, PROTO_ERR_NAME);
            ck_assert_int_eq(req.cmd, PROTO_CMD_LOCK);
        }
        ck_assert_int_eq(proto_name_valid(line + 6, 1), b >= 0x21 && b <= 0x7e);
    }
}
END_TEST

START_TEST(test_name_bad_edge_bytes) {
    static const char *const lines[] = {
        "STATUS \x7f", "STATUS \x80", "STATUS \xff", "STATUS \x01", "STATUS \x1f",
        "STATUS a\x0b", "STATUS \x0c" "a", "STATUS caf\xc3\xa9",
    };
    for (size_t i = 0; i < ARRAY_LEN(lines); i++) {
        proto_request_t req;
        ck_assert_int_eq(parse(lines[i], &req), PROTO_ERROR);
        ck_assert_int_eq(req.err, PROTO_ERR_NAME);
    }
    /* The edges of the allowed range. */
    proto_request_t req;
    ck_assert_int_eq(parse("STATUS !~", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "!~");
}
END_TEST

/* ---- NUL, CR and whitespace --------------------------------------------- */

START_TEST(test_nul_bytes_are_errors) {
    static const struct {
        const char *line;
        size_t len;
        proto_err_t err;
    } cases[] = {
        {"LOCK a\0b", 8, PROTO_ERR_NAME},
        {"LOCK \0", 6, PROTO_ERR_NAME},
        {"\0", 1, PROTO_ERR_UNKNOWN},
        {"PI\0NG", 5, PROTO_ERR_UNKNOWN},
        {"PING\0", 5, PROTO_ERR_UNKNOWN},
        {"\0PING", 5, PROTO_ERR_UNKNOWN},
        {"LOCK a 1\0", 9, PROTO_ERR_ARGS},
        {"TRYLOCK a \0 1", 13, PROTO_ERR_ARGS},
        {"\0\0\0\0\0\0\0\0", 8, PROTO_ERR_UNKNOWN},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_int_eq(proto_parse_line(cases[i].line, cases[i].len, &req), PROTO_ERROR);
        ck_assert_int_eq(req.err, cases[i].err);

        /* The same through the parser, followed by a good request. */
        char buf[64];
        memcpy(buf, cases[i].line, cases[i].len);
        memcpy(buf + cases[i].len, "\nPING\n", 6);
        outcomes_t whole, bytes;
        feed_whole(PROTO_LINE_MIN, buf, cases[i].len + 6, &whole);
        feed_bytes(PROTO_LINE_MIN, buf, cases[i].len + 6, &bytes);
        ck_assert_uint_eq(whole.n, 2);
        ck_assert_int_eq(whole.o[0].st, PROTO_ERROR);
        ck_assert_int_eq(whole.o[0].req.err, cases[i].err);
        ck_assert_int_eq(whole.o[1].st, PROTO_REQUEST);
        ck_assert_int_eq(whole.o[1].req.cmd, PROTO_CMD_PING);
        assert_same_outcomes(&whole, &bytes);
    }
}
END_TEST

START_TEST(test_cr_before_lf_dropped) {
    proto_request_t req;

    ck_assert_int_eq(parse("PING\r", &req), PROTO_REQUEST);
    ck_assert_int_eq(req.cmd, PROTO_CMD_PING);
    ck_assert_int_eq(parse("LOCK a\r", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "a");
    ck_assert_uint_eq(req.name_len, 1);
    ck_assert_int_eq(parse("LOCK a 5\r", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 5);
    ck_assert_int_eq(parse("LOCK a 5 \r", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.lease_ms, 5);

    outcomes_t out;
    const char data[] = "PING\r\nLOCK b 7\r\n\r\nQUIT\r\n";
    feed_whole(PROTO_LINE_MIN, data, sizeof(data) - 1, &out);
    ck_assert_uint_eq(out.n, 3);
    ck_assert_int_eq(out.o[0].req.cmd, PROTO_CMD_PING);
    ck_assert_int_eq(out.o[1].req.cmd, PROTO_CMD_LOCK);
    ck_assert_str_eq(out.o[1].req.name, "b");
    ck_assert_uint_eq(out.o[1].req.lease_ms, 7);
    ck_assert_int_eq(out.o[2].req.cmd, PROTO_CMD_QUIT);
}
END_TEST

START_TEST(test_cr_elsewhere_is_invalid) {
    static const struct {
        const char *line;
        proto_err_t err;
    } cases[] = {
        {"PING\r\r", PROTO_ERR_UNKNOWN}, /* only one final CR is dropped */
        {"\rPING", PROTO_ERR_UNKNOWN},
        {"PI\rNG", PROTO_ERR_UNKNOWN},
        {"LOCK a\rb", PROTO_ERR_NAME},
        {"LOCK a\r 5", PROTO_ERR_NAME},
        {"LOCK \ra", PROTO_ERR_NAME},
        {"LOCK a\r\r", PROTO_ERR_NAME},
        {"LOCK a 5\r\r", PROTO_ERR_ARGS},
        {"LOCK a 5\r6", PROTO_ERR_ARGS},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_msg(parse(cases[i].line, &req) == PROTO_ERROR, "case %zu accepted", i);
        ck_assert_int_eq(req.err, cases[i].err);
    }
}
END_TEST

START_TEST(test_whitespace_separators) {
    static const char *const lines[] = {
        "TRYLOCK w 10 20",
        "TRYLOCK  w  10  20",
        "TRYLOCK\tw\t10\t20",
        "TRYLOCK \t \tw\t \t10 \t\t 20",
        "   TRYLOCK w 10 20",
        "\t\tTRYLOCK w 10 20",
        "TRYLOCK w 10 20   ",
        "TRYLOCK w 10 20\t\t",
        " \t TRYLOCK   w\t10 20 \t \r",
    };
    for (size_t i = 0; i < ARRAY_LEN(lines); i++) {
        proto_request_t req;
        ck_assert_msg(parse(lines[i], &req) == PROTO_REQUEST, "case %zu rejected", i);
        ck_assert_int_eq(req.cmd, PROTO_CMD_TRYLOCK);
        ck_assert_str_eq(req.name, "w");
        ck_assert_uint_eq(req.wait_ms, 10);
        ck_assert_uint_eq(req.lease_ms, 20);
    }
    proto_request_t req;
    ck_assert_int_eq(parse("  PING  ", &req), PROTO_REQUEST);
    ck_assert_int_eq(req.cmd, PROTO_CMD_PING);
}
END_TEST

START_TEST(test_empty_and_blank_lines_skipped) {
    static const char *const blanks[] = {"", " ", "\t", "  \t  ", "\r", " \t\r"};
    for (size_t i = 0; i < ARRAY_LEN(blanks); i++) {
        proto_request_t req;
        ck_assert_int_eq(parse(blanks[i], &req), PROTO_NEED_MORE);
    }

    proto_parser_t p;
    proto_request_t req;
    size_t used;
    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_MIN), 0);

    ck_assert_int_eq(proto_feed(&p, "\n", 1, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 1);

    const char only_blank[] = "\n\n\r\n \t\n   \r\n";
    ck_assert_int_eq(proto_feed(&p, only_blank, sizeof(only_blank) - 1, &used, &req),
                     PROTO_NEED_MORE);
    ck_assert_uint_eq(used, sizeof(only_blank) - 1);

    /* Blank lines then a request: the request comes back in the same call. */
    const char then_req[] = "\n \n\t\r\nSTATUS s\n";
    ck_assert_int_eq(proto_feed(&p, then_req, sizeof(then_req) - 1, &used, &req),
                     PROTO_REQUEST);
    ck_assert_uint_eq(used, sizeof(then_req) - 1);
    ck_assert_int_eq(req.cmd, PROTO_CMD_STATUS);
    ck_assert_str_eq(req.name, "s");

    /* A request between blank lines: used stops after its LF. */
    const char around[] = "\n\nPING\n\n";
    ck_assert_int_eq(proto_feed(&p, around, sizeof(around) - 1, &used, &req),
                     PROTO_REQUEST);
    ck_assert_uint_eq(used, 7);
    ck_assert_int_eq(req.cmd, PROTO_CMD_PING);
    ck_assert_int_eq(proto_feed(&p, around + used, sizeof(around) - 1 - used, &used, &req),
                     PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 1);

    /* A blank line split over feeds is skipped too. */
    ck_assert_int_eq(proto_feed(&p, "  \t", 3, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 3);
    ck_assert_int_eq(proto_feed(&p, " \r\nQUIT\n", 8, &used, &req), PROTO_REQUEST);
    ck_assert_uint_eq(used, 8);
    ck_assert_int_eq(req.cmd, PROTO_CMD_QUIT);

    proto_parser_free(&p);
}
END_TEST

/* ---- feeding: pipelining, byte at a time -------------------------------- */

START_TEST(test_pipelined_requests) {
    const char data[] = "PING\nLOCK a 10\nTRYLOCK b 1 2\nBOGUS\nUNLOCK a\nQUIT\n";
    static const struct {
        proto_status_t st;
        proto_cmd_t cmd;
        size_t used;
    } want[] = {
        {PROTO_REQUEST, PROTO_CMD_PING, 5},
        {PROTO_REQUEST, PROTO_CMD_LOCK, 10},
        {PROTO_REQUEST, PROTO_CMD_TRYLOCK, 14},
        {PROTO_ERROR, PROTO_CMD_NONE, 6},
        {PROTO_REQUEST, PROTO_CMD_UNLOCK, 9},
        {PROTO_REQUEST, PROTO_CMD_QUIT, 5},
    };
    proto_parser_t p;
    size_t off = 0;

    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_DEFAULT), 0);
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        proto_request_t req;
        size_t used;
        ck_assert_int_eq(proto_feed(&p, data + off, sizeof(data) - 1 - off, &used, &req),
                         want[i].st);
        ck_assert_uint_eq(used, want[i].used);
        ck_assert_int_eq(req.cmd, want[i].cmd);
        if (want[i].st == PROTO_ERROR) ck_assert_int_eq(req.err, PROTO_ERR_UNKNOWN);
        off += used;
    }
    ck_assert_uint_eq(off, sizeof(data) - 1);
    proto_request_t req;
    size_t used = 99;
    ck_assert_int_eq(proto_feed(&p, data + off, 0, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 0);
    proto_parser_free(&p);
}
END_TEST

START_TEST(test_pipelined_partial_tail) {
    proto_parser_t p;
    proto_request_t req;
    size_t used;

    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_DEFAULT), 0);
    ck_assert_int_eq(proto_feed(&p, "PING\nLOC", 8, &used, &req), PROTO_REQUEST);
    ck_assert_uint_eq(used, 5);
    ck_assert_int_eq(proto_feed(&p, "LOC", 3, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 3);
    ck_assert_int_eq(proto_feed(&p, "K a", 3, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 3);
    ck_assert_int_eq(proto_feed(&p, " 77\nINFO\n", 9, &used, &req), PROTO_REQUEST);
    ck_assert_uint_eq(used, 4);
    ck_assert_int_eq(req.cmd, PROTO_CMD_LOCK);
    ck_assert_str_eq(req.name, "a");
    ck_assert_uint_eq(req.lease_ms, 77);
    ck_assert_int_eq(proto_feed(&p, "INFO\n", 5, &used, &req), PROTO_REQUEST);
    ck_assert_uint_eq(used, 5);
    ck_assert_int_eq(req.cmd, PROTO_CMD_INFO);
    proto_parser_free(&p);
}
END_TEST

/* Every command, mixed case, CRLF, blank lines and errors. */
static const char mixed_stream[] =
    "PING\n"
    "lock alpha\n"
    "LOCK beta 5000\r\n"
    "\n"
    "TRYLOCK gamma\n"
    "  trylock\tdelta 100  \n"
    "TRYLOCK epsilon 100 200\n"
    "UNLOCK alpha\n"
    "RENEW beta\n"
    "renew beta 9000\r\n"
    " \t \n"
    "STATUS Beta\n"
    "FORCEUNLOCK gamma\n"
    "INFO\n"
    "NOPE x\n"
    "LOCK\n"
    "LOCK bad\x7fname\n"
    "LOCK n 12a\n"
    "UNLOCK a b\n"
    "QUIT\n";

START_TEST(test_mixed_stream_whole) {
    static const struct {
        proto_status_t st;
        proto_cmd_t cmd;
        proto_err_t err;
        const char *name;
        uint32_t wait_ms, lease_ms;
    } want[] = {
        {PROTO_REQUEST, PROTO_CMD_PING, PROTO_ERR_NONE, "", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_LOCK, PROTO_ERR_NONE, "alpha", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_LOCK, PROTO_ERR_NONE, "beta", 0, 5000},
        {PROTO_REQUEST, PROTO_CMD_TRYLOCK, PROTO_ERR_NONE, "gamma", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_TRYLOCK, PROTO_ERR_NONE, "delta", 100, 0},
        {PROTO_REQUEST, PROTO_CMD_TRYLOCK, PROTO_ERR_NONE, "epsilon", 100, 200},
        {PROTO_REQUEST, PROTO_CMD_UNLOCK, PROTO_ERR_NONE, "alpha", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_RENEW, PROTO_ERR_NONE, "beta", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_RENEW, PROTO_ERR_NONE, "beta", 0, 9000},
        {PROTO_REQUEST, PROTO_CMD_STATUS, PROTO_ERR_NONE, "Beta", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_FORCEUNLOCK, PROTO_ERR_NONE, "gamma", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_INFO, PROTO_ERR_NONE, "", 0, 0},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_UNKNOWN, "", 0, 0},
        {PROTO_ERROR, PROTO_CMD_LOCK, PROTO_ERR_ARGS, "", 0, 0},
        {PROTO_ERROR, PROTO_CMD_LOCK, PROTO_ERR_NAME, "", 0, 0},
        {PROTO_ERROR, PROTO_CMD_LOCK, PROTO_ERR_ARGS, "n", 0, 0},
        {PROTO_ERROR, PROTO_CMD_UNLOCK, PROTO_ERR_ARGS, "", 0, 0},
        {PROTO_REQUEST, PROTO_CMD_QUIT, PROTO_ERR_NONE, "", 0, 0},
    };
    outcomes_t out;

    feed_whole(PROTO_LINE_DEFAULT, mixed_stream, sizeof(mixed_stream) - 1, &out);
    ck_assert_uint_eq(out.n, ARRAY_LEN(want));
    for (size_t i = 0; i < out.n; i++) {
        const proto_request_t *r = &out.o[i].req;
        ck_assert_int_eq(out.o[i].st, want[i].st);
        ck_assert_int_eq(r->cmd, want[i].cmd);
        ck_assert_int_eq(r->err, want[i].err);
        if (want[i].st == PROTO_REQUEST || want[i].name[0] != '\0') {
            ck_assert_str_eq(r->name, want[i].name);
        }
        ck_assert_uint_eq(r->wait_ms, want[i].wait_ms);
        ck_assert_uint_eq(r->lease_ms, want[i].lease_ms);
    }
}
END_TEST

START_TEST(test_byte_at_a_time_equals_whole) {
    outcomes_t whole, bytes;

    feed_whole(PROTO_LINE_DEFAULT, mixed_stream, sizeof(mixed_stream) - 1, &whole);
    feed_bytes(PROTO_LINE_DEFAULT, mixed_stream, sizeof(mixed_stream) - 1, &bytes);
    ck_assert_uint_gt(whole.n, 0);
    assert_same_outcomes(&whole, &bytes);

    /* Each outcome comes in the call that fed its LF. */
    size_t line = 0;
    for (size_t i = 0; i < bytes.n; i++) {
        ck_assert_int_eq(mixed_stream[bytes.o[i].piece], '\n');
        ck_assert_uint_ge(bytes.o[i].piece, line);
        line = bytes.o[i].piece + 1;
    }
}
END_TEST

START_TEST(test_byte_at_a_time_each_command) {
    for (size_t i = 0; i < ARRAY_LEN(good_lines); i++) {
        char buf[128];
        int n = snprintf(buf, sizeof(buf), "%s\n", good_lines[i].line);
        outcomes_t whole, bytes;
        proto_request_t direct;

        feed_whole(PROTO_LINE_MIN, buf, (size_t)n, &whole);
        feed_bytes(PROTO_LINE_MIN, buf, (size_t)n, &bytes);
        ck_assert_uint_eq(whole.n, 1);
        ck_assert_int_eq(whole.o[0].st, PROTO_REQUEST);
        assert_same_outcomes(&whole, &bytes);
        ck_assert_int_eq(parse(good_lines[i].line, &direct), PROTO_REQUEST);
        assert_same_request(&whole.o[0].req, &direct);
        proto_request_free(&direct);
        outcomes_free(&whole);
        outcomes_free(&bytes);
    }
}
END_TEST

START_TEST(test_every_split_point_equals_whole) {
    outcomes_t whole, split;
    const size_t len = sizeof(mixed_stream) - 1;

    feed_whole(PROTO_LINE_DEFAULT, mixed_stream, len, &whole);
    for (size_t k = 0; k <= len; k++) {
        feed_cut(PROTO_LINE_DEFAULT, mixed_stream, len, &k, 1, &split);
        assert_same_outcomes(&whole, &split);
    }
}
END_TEST

/* ---- max_line ----------------------------------------------------------- */

static const size_t max_lines[] = {PROTO_LINE_MIN, 65, 100, 128, 255, 256, 1000,
                                   PROTO_LINE_DEFAULT};

/* Builds a request line of exactly len bytes (the LF not counted) followed
 * by an LF: "LOCK <name>" padded with spaces, or ending in CR. */
static char *make_line(size_t len, int final_cr, size_t *name_len) {
    char *s = malloc(len + 2);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_ge(len, 8);
    size_t body = len - (final_cr ? 1 : 0);
    size_t n = body - 5;
    if (n > PROTO_NAME_MAX) n = PROTO_NAME_MAX;
    memcpy(s, "LOCK ", 5);
    memset(s + 5, 'k', n);
    memset(s + 5 + n, ' ', body - 5 - n);
    if (final_cr) s[len - 1] = '\r';
    s[len] = '\n';
    s[len + 1] = '\0';
    *name_len = n;
    return s;
}

START_TEST(test_max_line_exact_fits) {
    size_t max_line = max_lines[_i];

    for (int cr = 0; cr <= 1; cr++) {
        size_t name_len;
        char *line = make_line(max_line, cr, &name_len);
        size_t cuts[3] = {1, max_line / 2, max_line};
        outcomes_t whole, bytes, cut;

        feed_whole(max_line, line, max_line + 1, &whole);
        ck_assert_uint_eq(whole.n, 1);
        ck_assert_int_eq(whole.o[0].st, PROTO_REQUEST);
        ck_assert_int_eq(whole.o[0].req.cmd, PROTO_CMD_LOCK);
        ck_assert_uint_eq(whole.o[0].req.name_len, name_len);

        feed_bytes(max_line, line, max_line + 1, &bytes);
        assert_same_outcomes(&whole, &bytes);
        for (size_t c = 0; c < 3; c++) {
            feed_cut(max_line, line, max_line + 1, &cuts[c], 1, &cut);
            assert_same_outcomes(&whole, &cut);
        }
        feed_cut(max_line, line, max_line + 1, cuts, 3, &cut);
        assert_same_outcomes(&whole, &cut);
        free(line);
    }
}
END_TEST

START_TEST(test_max_line_plus_one_toolong_one_feed) {
    size_t max_line = max_lines[_i];

    for (int cr = 0; cr <= 1; cr++) {
        size_t name_len;
        char *line = make_line(max_line + 1, cr, &name_len);
        outcomes_t out;

        feed_whole(max_line, line, max_line + 2, &out);
        ck_assert_uint_eq(out.n, 1);
        ck_assert_int_eq(out.o[0].st, PROTO_ERROR);
        ck_assert_int_eq(out.o[0].req.err, PROTO_ERR_TOOLONG);
        ck_assert_int_eq(out.o[0].req.cmd, PROTO_CMD_NONE);
        free(line);
    }
}
END_TEST

START_TEST(test_max_line_plus_one_toolong_split) {
    size_t max_line = max_lines[_i];
    size_t name_len;
    char *line = make_line(max_line + 1, 0, &name_len);
    size_t splits[] = {1, 10, max_line / 2, max_line - 1, max_line, max_line + 1};

    /* TOOLONG comes from the feed holding byte max_line (counting from 0),
     * before the LF is seen and without buffering more than max_line. */
    for (size_t s = 0; s < ARRAY_LEN(splits); s++) {
        outcomes_t out;
        feed_cut(max_line, line, max_line + 2, &splits[s], 1, &out);
        ck_assert_uint_eq(out.n, 1);
        ck_assert_int_eq(out.o[0].st, PROTO_ERROR);
        ck_assert_int_eq(out.o[0].req.err, PROTO_ERR_TOOLONG);
        ck_assert_uint_eq(out.o[0].piece, splits[s] > max_line ? 0 : 1);
    }

    outcomes_t bytes;
    feed_bytes(max_line, line, max_line + 2, &bytes);
    ck_assert_uint_eq(bytes.n, 1);
    ck_assert_int_eq(bytes.o[0].req.err, PROTO_ERR_TOOLONG);
    ck_assert_uint_eq(bytes.o[0].piece, max_line);
    free(line);
}
END_TEST

START_TEST(test_toolong_without_lf_is_immediate) {
    size_t max_line = max_lines[_i];
    char *junk = repeat('z', max_line + 1);
    proto_parser_t p;
    proto_request_t req;
    size_t used;

    ck_assert_int_eq(proto_parser_init(&p, max_line), 0);
    ck_assert_int_eq(proto_feed(&p, junk, max_line, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, max_line);
    ck_assert_int_eq(proto_feed(&p, junk, 1, &used, &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_TOOLONG);
    ck_assert_uint_eq(used, 1);
    proto_parser_free(&p);

    ck_assert_int_eq(proto_parser_init(&p, max_line), 0);
    ck_assert_int_eq(proto_feed(&p, junk, max_line + 1, &used, &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_TOOLONG);
    ck_assert_uint_eq(used, max_line + 1);
    proto_parser_free(&p);
    free(junk);
}
END_TEST

START_TEST(test_toolong_swallows_the_rest) {
    const size_t max_line = PROTO_LINE_MIN;
    char buf[256];
    proto_parser_t p;
    proto_request_t req;
    size_t used;

    /* An over-long line followed by good requests in the same buffer. */
    memset(buf, 'x', max_line + 1);
    memcpy(buf + max_line + 1, "\nPING\nQUIT\n", 11);
    size_t len = max_line + 12;

    ck_assert_int_eq(proto_parser_init(&p, max_line), 0);
    ck_assert_int_eq(proto_feed(&p, buf, len, &used, &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_TOOLONG);
    ck_assert_uint_eq(used, len);
    ck_assert_int_eq(p.overflow, 1);

    /* Everything afterwards is used and ignored. */
    ck_assert_int_eq(proto_feed(&p, "PING\n", 5, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 5);
    ck_assert_int_eq(proto_feed(&p, "\n", 1, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, 1);
    ck_assert_int_eq(proto_feed(&p, buf, len, &used, &req), PROTO_NEED_MORE);
    ck_assert_uint_eq(used, len);
    proto_parser_free(&p);

    /* Likewise when the long line was split. */
    outcomes_t out;
    size_t cut = 30;
    feed_cut(max_line, buf, len, &cut, 1, &out);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_int_eq(out.o[0].req.err, PROTO_ERR_TOOLONG);
    feed_bytes(max_line, buf, len, &out);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_int_eq(out.o[0].req.err, PROTO_ERR_TOOLONG);
}
END_TEST

START_TEST(test_max_line_counts_each_line_separately) {
    const size_t max_line = 100;
    size_t name_len;
    char *line = make_line(max_line, 0, &name_len);
    char buf[512];
    outcomes_t whole, bytes;

    /* Several full-length lines in a row, each allowed max_line bytes. */
    size_t len = 0;
    for (int i = 0; i < 4; i++) {
        memcpy(buf + len, line, max_line + 1);
        len += max_line + 1;
    }
    feed_whole(max_line, buf, len, &whole);
    ck_assert_uint_eq(whole.n, 4);
    for (size_t i = 0; i < whole.n; i++) {
        ck_assert_int_eq(whole.o[i].st, PROTO_REQUEST);
        ck_assert_uint_eq(whole.o[i].req.name_len, name_len);
    }
    feed_bytes(max_line, buf, len, &bytes);
    assert_same_outcomes(&whole, &bytes);
    free(line);
}
END_TEST

START_TEST(test_parser_init_limits) {
    proto_parser_t p;

    ck_assert_int_eq(proto_parser_init(&p, 0), -1);
    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_MIN - 1), -1);
    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_LIMIT + 1), -1);
    ck_assert_int_eq(proto_parser_init(&p, (size_t)-1), -1);

    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_MIN), 0);
    ck_assert_uint_eq(p.max_line, PROTO_LINE_MIN);
    ck_assert_ptr_null(p.partial);
    ck_assert_uint_eq(p.len, 0);
    ck_assert_int_eq(p.overflow, 0);
    proto_parser_free(&p);

    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_LIMIT), 0);
    ck_assert_uint_eq(p.max_line, PROTO_LINE_LIMIT);
    proto_parser_free(&p);

    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_DEFAULT), 0);
    ck_assert_uint_eq(p.max_line, PROTO_LINE_DEFAULT);
    proto_parser_free(&p);
}
END_TEST

START_TEST(test_parser_free_with_partial_line) {
    proto_parser_t p;
    proto_request_t req;
    size_t used;

    ck_assert_int_eq(proto_parser_init(&p, PROTO_LINE_DEFAULT), 0);
    ck_assert_int_eq(proto_feed(&p, "LOCK half", 9, &used, &req), PROTO_NEED_MORE);
    ck_assert_ptr_nonnull(p.partial);
    ck_assert_uint_eq(p.len, 9);
    proto_parser_free(&p);
    ck_assert_ptr_null(p.partial);
    ck_assert_uint_eq(p.len, 0);
    proto_parser_free(&p); /* twice is harmless */
}
END_TEST

/* ---- replies ------------------------------------------------------------ */

/* These tests pass a NULL and an empty format on purpose. */
#pragma GCC diagnostic ignored "-Wformat-security"
#pragma GCC diagnostic ignored "-Wformat-zero-length"

START_TEST(test_reply_ok) {
    char out[64];
    const char *no_fmt = NULL;
    const char *empty_fmt = "";

    ck_assert_int_eq(proto_reply_ok(out, sizeof(out), no_fmt), 3);
    ck_assert_str_eq(out, "OK\n");
    /* An empty format is the same as none. */
    ck_assert_int_eq(proto_reply_ok(out, sizeof(out), empty_fmt), 3);
    ck_assert_str_eq(out, "OK\n");
    ck_assert_int_eq(proto_reply_ok(out, sizeof(out), "%s %d", "granted", 30000), 17);
    ck_assert_str_eq(out, "OK granted 30000\n");
    ck_assert_int_eq(proto_reply_ok(out, sizeof(out), "ttl=%lld", -1LL), 10);
    ck_assert_str_eq(out, "OK ttl=-1\n");
}
END_TEST

START_TEST(test_reply_ok_nums) {
    char out[64];

    ck_assert_int_eq(proto_reply_ok_num(out, sizeof(out), 0), 5);
    ck_assert_str_eq(out, "OK 0\n");
    ck_assert_int_eq(proto_reply_ok_num(out, sizeof(out), -1), 6);
    ck_assert_str_eq(out, "OK -1\n");
    ck_assert_int_eq(proto_reply_ok_num(out, sizeof(out), LLONG_MIN), 24);
    ck_assert_str_eq(out, "OK -9223372036854775808\n");
    ck_assert_int_eq(proto_reply_ok_num2(out, sizeof(out), 1795699899691153ULL, 1), 22);
    ck_assert_str_eq(out, "OK 1795699899691153 1\n");
    ck_assert_int_eq(proto_reply_ok_num2(out, sizeof(out), ULLONG_MAX, LLONG_MAX), 44);
    ck_assert_str_eq(out, "OK 18446744073709551615 9223372036854775807\n");
    /* The same bytes as the format would give. */
    char fmt[64];
    for (long long v = -1000; v <= 1000; v += 7) {
        proto_reply_ok_num2(out, sizeof(out), (unsigned long long)(v + 1000) * 1000003ULL, v);
        proto_reply_ok(fmt, sizeof(fmt), "%llu %lld", (unsigned long long)(v + 1000) * 1000003ULL, v);
        ck_assert_str_eq(out, fmt);
    }
    /* The cap is checked against the longest line, not this one. */
    ck_assert_int_eq(proto_reply_ok_num(out, 24, 1), -1);
    ck_assert_int_eq(proto_reply_ok_num(out, 25, 1), 5);
    ck_assert_int_eq(proto_reply_ok_num2(out, 45, 1, 1), -1);
    ck_assert_int_eq(proto_reply_ok_num2(out, 46, 1, 1), 7);
}
END_TEST

START_TEST(test_reply_ok_cap) {
    char out[64];
    const char *no_fmt = NULL;

    /* "OK\n" needs 4 bytes with the NUL. */
    ck_assert_int_eq(proto_reply_ok(out, 4, no_fmt), 3);
    ck_assert_str_eq(out, "OK\n");
    ck_assert_int_eq(proto_reply_ok(out, 3, no_fmt), -1);
    ck_assert_int_eq(proto_reply_ok(out, 0, no_fmt), -1);

    /* "OK held 5\n" is 10 bytes, 11 with the NUL. */
    ck_assert_int_eq(proto_reply_ok(out, 11, "held %d", 5), 10);
    ck_assert_str_eq(out, "OK held 5\n");
    ck_assert_int_eq(proto_reply_ok(out, 10, "held %d", 5), -1);
    ck_assert_int_eq(proto_reply_ok(out, 9, "held %d", 5), -1);
    ck_assert_int_eq(proto_reply_ok(out, 5, "held %d", 5), -1);
}
END_TEST

START_TEST(test_reply_timeout) {
    char out[64];

    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), 0), 10);
    ck_assert_str_eq(out, "TIMEOUT 0\n");
    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), 1500), 13);
    ck_assert_str_eq(out, "TIMEOUT 1500\n");
    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), -1), 11);
    ck_assert_str_eq(out, "TIMEOUT -1\n");
    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), -2), 11);
    ck_assert_str_eq(out, "TIMEOUT -1\n");
    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), -86400000), 11);
    ck_assert_str_eq(out, "TIMEOUT -1\n");
    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), LLONG_MIN), 11);
    ck_assert_str_eq(out, "TIMEOUT -1\n");
    ck_assert_int_eq(proto_reply_timeout(out, sizeof(out), LLONG_MAX), 28);
    ck_assert_str_eq(out, "TIMEOUT 9223372036854775807\n");

    /* "TIMEOUT 1500\n" is 13 bytes, 14 with the NUL. */
    ck_assert_int_eq(proto_reply_timeout(out, 14, 1500), 13);
    ck_assert_int_eq(proto_reply_timeout(out, 13, 1500), -1);
    ck_assert_int_eq(proto_reply_timeout(out, 8, 1500), -1);
    ck_assert_int_eq(proto_reply_timeout(out, 0, 1500), -1);
}
END_TEST

START_TEST(test_reply_error) {
    char out[PROTO_REPLY_MAX];
    char want[PROTO_REPLY_MAX];

    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_ARGS, NULL), 49);
    ck_assert_str_eq(out, "ERR ARGS wrong number of arguments or bad number\n");
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_ARGS, ""), 49);
    ck_assert_str_eq(out, "ERR ARGS wrong number of arguments or bad number\n");
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_ARGS, "LOCK <name>"), 21);
    ck_assert_str_eq(out, "ERR ARGS LOCK <name>\n");
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_TOOLONG, NULL), 26);
    ck_assert_str_eq(out, "ERR TOOLONG line too long\n");

    /* Every code with its default text, and all fit PROTO_REPLY_MAX. */
    for (int e = PROTO_ERR_NONE + 1; e < PROTO_ERR_COUNT; e++) {
        int n = snprintf(want, sizeof(want), "ERR %s %s\n", proto_err_name((proto_err_t)e),
                         proto_err_text((proto_err_t)e));
        ck_assert_int_eq(proto_reply_error(out, sizeof(out), (proto_err_t)e, NULL), n);
        ck_assert_str_eq(out, want);
    }

    /* "ERR NAME x\n" is 11 bytes, 12 with the NUL. */
    ck_assert_int_eq(proto_reply_error(out, 12, PROTO_ERR_NAME, "x"), 11);
    ck_assert_str_eq(out, "ERR NAME x\n");
    ck_assert_int_eq(proto_reply_error(out, 11, PROTO_ERR_NAME, "x"), -1);
    ck_assert_int_eq(proto_reply_error(out, 4, PROTO_ERR_NAME, "x"), -1);
    ck_assert_int_eq(proto_reply_error(out, 0, PROTO_ERR_NAME, "x"), -1);
}
END_TEST

START_TEST(test_event_lost) {
    char out[PROTO_REPLY_MAX];
    char *name = repeat('L', PROTO_NAME_MAX);

    ck_assert_int_eq(proto_event_lost(out, sizeof(out), "db.migrate", "expired"), 25);
    ck_assert_str_eq(out, "!LOST db.migrate expired\n");

    /* The longest name fits PROTO_REPLY_MAX. */
    int n = proto_event_lost(out, sizeof(out), name, "backend");
    ck_assert_int_eq(n, 6 + PROTO_NAME_MAX + 1 + 7 + 1);
    ck_assert_int_eq(strncmp(out, "!LOST LLL", 9), 0);

    /* "!LOST a b\n" is 10 bytes, 11 with the NUL. */
    ck_assert_int_eq(proto_event_lost(out, 11, "a", "b"), 10);
    ck_assert_str_eq(out, "!LOST a b\n");
    ck_assert_int_eq(proto_event_lost(out, 10, "a", "b"), -1);
    ck_assert_int_eq(proto_event_lost(out, 3, "a", "b"), -1);
    free(name);
}
END_TEST

/* ---- long replies are cut, never dropped ------------------------------- */

/* Under CK_FORK every ck_assert that passes writes to Check's pipe; the
 * per-byte and per-cap checks call Check only when they fail. */
#define EXPECT(cond, ...)                          \
    do {                                           \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);    \
    } while (0)

/* What a formatter writes for a text byte. */
static char shown(char c) {
    unsigned char u = (unsigned char)c;
    return u < 0x20 || u == 0x7f ? '?' : c;
}

/* Checks what a formatter wrote into out (cap bytes) and returned (n) for
 * a line of head (never cut) and text (text_len bytes): the whole line when
 * it fits; else -1 below PROTO_REPLY_MIN; else the line filling cap - 1
 * bytes, the text cut and ending in "...". Always one line: one LF, last. */
static void check_cut(const char *out, size_t cap, int n, const char *head, const char *text,
                      size_t text_len) {
    size_t hl = strlen(head);
    size_t keep;
    int cut;
    if (hl + text_len + 2 <= cap) {
        keep = text_len;
        cut = 0;
        EXPECT(n >= 0 && (size_t)n == hl + text_len + 1,
               "cap %zu, text %zu: returned %d, wanted the whole line of %zu", cap, text_len,
               n, hl + text_len + 1);
    } else if (cap < PROTO_REPLY_MIN) {
        EXPECT(n == -1, "cap %zu below PROTO_REPLY_MIN, text %zu: returned %d, wanted -1",
               cap, text_len, n);
        return;
    } else {
        keep = cap - 1 - hl - 4;
        cut = 1;
        EXPECT(n >= 0 && (size_t)n == cap - 1,
               "cap %zu, text %zu: returned %d, wanted the cut line of %zu", cap, text_len, n,
               cap - 1);
    }
    EXPECT(out[n] == '\0', "cap %zu: no NUL after the line", cap);
    EXPECT(strlen(out) == (size_t)n, "cap %zu: a NUL inside the line", cap);
    EXPECT(memcmp(out, head, hl) == 0, "cap %zu: the head '%s' is not '%.*s'", cap, head,
           (int)hl, out);
    for (size_t i = 0; i < keep; i++)
        EXPECT(out[hl + i] == shown(text[i]), "cap %zu: text byte %zu is 0x%02x, wanted 0x%02x",
               cap, i, (unsigned char)out[hl + i], (unsigned char)shown(text[i]));
    if (cut)
        EXPECT(memcmp(out + hl + keep, "...", 3) == 0, "cap %zu: no ... after the cut: '%s'",
               cap, out);
    EXPECT(out[n - 1] == '\n', "cap %zu: the line does not end in LF", cap);
    for (int i = 0; i < n - 1; i++)
        EXPECT(out[i] != '\n' && out[i] != '\r', "cap %zu: LF or CR at %d of '%s'", cap, i, out);
}

/* A text of n bytes cycling through letters, control bytes (LF and CR
 * among them), DEL and high bytes; no NUL. */
static char *mixed_text(size_t n) {
    static const char bytes[] = "abc\ndef\rghi\tjk\x01lm\x1fno\x7fpq\x80rs\xffz ";
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < n; i++) s[i] = bytes[i % (sizeof(bytes) - 1)];
    s[n] = '\0';
    return s;
}

START_TEST(test_reply_error_exact_fit_and_one_over) {
    /* "ERR BACKEND " is 12 bytes; with the LF and NUL a detail of cap - 14
     * bytes fits exactly. */
    static const size_t caps[] = {PROTO_REPLY_MIN, PROTO_REPLY_MIN + 1, PROTO_REPLY_MAX};
    for (size_t c = 0; c < ARRAY_LEN(caps); c++) {
        size_t cap = caps[c];
        char *out = malloc(cap); /* exactly cap bytes, for ASan */
        char *fits = repeat('f', cap - 14);
        char *over = repeat('o', cap - 13);
        ck_assert_ptr_nonnull(out);

        int n = proto_reply_error(out, cap, PROTO_ERR_BACKEND, fits);
        ck_assert_int_eq(n, (int)cap - 1);
        ck_assert_int_eq(strncmp(out, "ERR BACKEND fff", 15), 0);
        ck_assert_int_eq(strcmp(out + cap - 3, "f\n"), 0);
        ck_assert_ptr_null(strstr(out, "..."));
        check_cut(out, cap, n, "ERR BACKEND ", fits, cap - 14);

        n = proto_reply_error(out, cap, PROTO_ERR_BACKEND, over);
        ck_assert_int_eq(n, (int)cap - 1);
        ck_assert_int_eq(strcmp(out + cap - 6, "o...\n"), 0);
        check_cut(out, cap, n, "ERR BACKEND ", over, cap - 13);
        free(over);
        free(fits);
        free(out);
    }
}
END_TEST

START_TEST(test_reply_error_cr_lf_in_detail) {
    char out[PROTO_REPLY_MAX];

    /* A detail cannot end the line early or start a second one. */
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_BACKEND,
                                       "WRONG\r\nOK 1 1\n"),
                     27);
    ck_assert_str_eq(out, "ERR BACKEND WRONG??OK 1 1?\n");
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_BACKEND, "\n"), 14);
    ck_assert_str_eq(out, "ERR BACKEND ?\n");
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_BACKEND,
                                       "tab\there\x01\x1f\x7f end"),
                     28);
    ck_assert_str_eq(out, "ERR BACKEND tab?here??? end\n");
    /* Bytes above 0x7F cannot break a line: they pass. */
    ck_assert_int_eq(proto_reply_error(out, sizeof(out), PROTO_ERR_BACKEND, "caf\xc3\xa9"), 18);
    ck_assert_str_eq(out, "ERR BACKEND caf\xc3\xa9\n");

    /* Long and full of line breaks: still one line, cut. */
    char *nl = repeat('\n', 1000);
    int n = proto_reply_error(out, sizeof(out), PROTO_ERR_BACKEND, nl);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    check_cut(out, sizeof(out), n, "ERR BACKEND ", nl, 1000);
    free(nl);

    /* And the same in a !LOST reason, an OK text and the name. */
    ck_assert_int_eq(proto_event_lost(out, sizeof(out), "a\nb", "x\r\ny"), 15);
    ck_assert_str_eq(out, "!LOST a?b x??y\n");
    ck_assert_int_eq(proto_reply_ok(out, sizeof(out), "%s", "1\n2"), 7);
    ck_assert_str_eq(out, "OK 1?2\n");
}
END_TEST

START_TEST(test_reply_error_huge_detail) {
    /* 100 KB of Redis error text: the reply is one cut line of
     * PROTO_REPLY_MAX - 1 bytes, not -1. */
    enum { HUGE = 100 * 1024 };
    char *huge = mixed_text(HUGE);
    char out[PROTO_REPLY_MAX];
    int n = proto_reply_error(out, sizeof(out), PROTO_ERR_BACKEND, huge);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    ck_assert_uint_eq(strlen(out), PROTO_REPLY_MAX - 1);
    ck_assert_int_eq(strncmp(out, "ERR BACKEND abc?def?ghi?jk", 26), 0);
    ck_assert_str_eq(out + n - 4, "...\n");
    check_cut(out, sizeof(out), n, "ERR BACKEND ", huge, HUGE);

    /* With room for it, nothing is cut. */
    size_t cap = HUGE + 64;
    char *big = malloc(cap);
    ck_assert_ptr_nonnull(big);
    n = proto_reply_error(big, cap, PROTO_ERR_BACKEND, huge);
    ck_assert_int_eq(n, 12 + HUGE + 1);
    check_cut(big, cap, n, "ERR BACKEND ", huge, HUGE);

    /* The same through the other formatters. */
    n = proto_event_lost(out, sizeof(out), "db.migrate", huge);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    check_cut(out, sizeof(out), n, "!LOST db.migrate ", huge, HUGE);
    n = proto_reply_ok(out, sizeof(out), "%s", huge);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    check_cut(out, sizeof(out), n, "OK ", huge, HUGE);
    n = proto_reply_ok(big, cap, "%s", huge);
    ck_assert_int_eq(n, 3 + HUGE + 1);
    check_cut(big, cap, n, "OK ", huge, HUGE);
    free(big);
    free(huge);
}
END_TEST

START_TEST(test_reply_tiny_caps) {
    /* Below PROTO_REPLY_MIN a line that does not fit is -1, as before;
     * from PROTO_REPLY_MIN on it is cut. Each out has exactly cap bytes. */
    char *text = repeat('t', 100);
    for (size_t cap = 0; cap <= PROTO_REPLY_MIN + 2; cap++) {
        char *out = malloc(cap ? cap : 1);
        ck_assert_ptr_nonnull(out);
        int want = cap < PROTO_REPLY_MIN ? -1 : (int)cap - 1;
        ck_assert_int_eq(proto_reply_error(out, cap, PROTO_ERR_BACKEND, text), want);
        check_cut(out, cap, proto_reply_error(out, cap, PROTO_ERR_BACKEND, text),
                  "ERR BACKEND ", text, 100);
        ck_assert_int_eq(proto_event_lost(out, cap, "x", text), want);
        check_cut(out, cap, proto_event_lost(out, cap, "x", text), "!LOST x ", text, 100);
        ck_assert_int_eq(proto_reply_ok(out, cap, "%s", text), want);
        check_cut(out, cap, proto_reply_ok(out, cap, "%s", text), "OK ", text, 100);
        /* No free text: whole, or -1 below what it needs. */
        ck_assert_int_eq(proto_reply_timeout(out, cap, 1500), cap >= 14 ? 13 : -1);
        ck_assert_int_eq(proto_reply_timeout(out, cap, LLONG_MAX), cap >= 29 ? 28 : -1);
        ck_assert_int_eq(proto_reply_ok(out, cap, NULL), cap >= 4 ? 3 : -1);
        free(out);
    }

    /* At PROTO_REPLY_MIN itself, every error code still says its name. */
    char out[PROTO_REPLY_MIN];
    for (int e = PROTO_ERR_NONE; e <= PROTO_ERR_COUNT; e++) {
        char head[PROTO_REPLY_MIN];
        snprintf(head, sizeof(head), "ERR %s ", proto_err_name((proto_err_t)e));
        int n = proto_reply_error(out, sizeof(out), (proto_err_t)e, text);
        ck_assert_int_eq(n, PROTO_REPLY_MIN - 1);
        check_cut(out, sizeof(out), n, head, text, 100);
    }
    free(text);
}
END_TEST

START_TEST(test_event_lost_cuts_reason_never_name) {
    char out[PROTO_REPLY_MAX];
    char *name = repeat('N', PROTO_NAME_MAX);
    char *reason = repeat('r', 500);

    /* The longest name and a long reason: the reason is cut. */
    int n = proto_event_lost(out, sizeof(out), name, reason);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    ck_assert_int_eq(strncmp(out + 6, name, PROTO_NAME_MAX), 0);
    ck_assert_int_eq(out[6 + PROTO_NAME_MAX], ' ');
    ck_assert_str_eq(out + n - 5, "r...\n");

    /* PROTO_REPLY_MIN more than the name is always enough. */
    char *small = malloc(PROTO_REPLY_MIN + PROTO_NAME_MAX);
    ck_assert_ptr_nonnull(small);
    n = proto_event_lost(small, PROTO_REPLY_MIN + PROTO_NAME_MAX, name, reason);
    ck_assert_int_eq(n, PROTO_REPLY_MIN + PROTO_NAME_MAX - 1);
    ck_assert_int_eq(strncmp(small + 6, name, PROTO_NAME_MAX), 0);

    /* A name is never cut: no room for "!LOST <name> ...\n" is -1. The
     * smallest that works is 6 + name + 1 + 3 + LF + NUL. */
    ck_assert_int_eq(proto_event_lost(small, PROTO_NAME_MAX + 12, name, reason),
                     PROTO_NAME_MAX + 11);
    ck_assert_str_eq(small + PROTO_NAME_MAX + 6, " ...\n");
    ck_assert_int_eq(proto_event_lost(small, PROTO_NAME_MAX + 11, name, reason), -1);
    ck_assert_int_eq(proto_event_lost(small, PROTO_REPLY_MIN, name, reason), -1);
    free(small);
    free(reason);
    free(name);
}
END_TEST

START_TEST(test_reply_ok_cuts_text) {
    char out[PROTO_REPLY_MAX];
    /* "OK " and LF and NUL: a text of PROTO_REPLY_MAX - 5 bytes fits. */
    char *fits = repeat('k', PROTO_REPLY_MAX - 5);
    char *over = repeat('k', PROTO_REPLY_MAX - 4);
    int n = proto_reply_ok(out, sizeof(out), "%s", fits);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    ck_assert_ptr_null(strstr(out, "..."));
    check_cut(out, sizeof(out), n, "OK ", fits, PROTO_REPLY_MAX - 5);
    n = proto_reply_ok(out, sizeof(out), "%s", over);
    ck_assert_int_eq(n, PROTO_REPLY_MAX - 1);
    ck_assert_str_eq(out + n - 4, "...\n");
    check_cut(out, sizeof(out), n, "OK ", over, PROTO_REPLY_MAX - 4);
    /* A format of several parts is cut the same way. */
    n = proto_reply_ok(out, 40, "clients=%d %s", 3, over);
    ck_assert_int_eq(n, 39);
    ck_assert_str_eq(out, "OK clients=3 kkkkkkkkkkkkkkkkkkkkkk...\n");
    free(over);
    free(fits);
}
END_TEST

START_TEST(test_reply_every_cap_and_length) {
    /* Every cap from 0 to past PROTO_REPLY_MAX, texts of many lengths made
     * of ordinary, control and high bytes: each formatter gives the whole
     * line, a cut one, or -1 only below PROTO_REPLY_MIN. */
    enum { CAP_MAX = PROTO_REPLY_MAX + 40, TEXT_MAX = 700 };
    char *text = mixed_text(TEXT_MAX);
    char *out = malloc(CAP_MAX);
    ck_assert_ptr_nonnull(out);
    for (size_t len = 0; len <= TEXT_MAX; len += len < 40 ? 1 : 37) {
        char saved = text[len];
        text[len] = '\0';
        for (size_t cap = 0; cap <= CAP_MAX; cap++) {
            if (len > 0) { /* an empty detail is the code's default text */
                check_cut(out, cap, proto_reply_error(out, cap, PROTO_ERR_BACKEND, text),
                          "ERR BACKEND ", text, len);
                check_cut(out, cap, proto_reply_error(out, cap, PROTO_ERR_LIMIT, text),
                          "ERR LIMIT ", text, len);
            }
            check_cut(out, cap, proto_event_lost(out, cap, "lock.name", text),
                      "!LOST lock.name ", text, len);
            check_cut(out, cap, proto_reply_ok(out, cap, "%s", text), "OK ", text, len);
        }
        text[len] = saved;
    }
    free(out);
    free(text);
}
END_TEST

/* ---- tables ------------------------------------------------------------- */

START_TEST(test_err_names_and_texts) {
    static const struct {
        proto_err_t err;
        const char *name;
        const char *text;
    } want[] = {
        {PROTO_ERR_NONE, "NONE", "no error"},
        {PROTO_ERR_UNKNOWN, "UNKNOWN", "no such command"},
        {PROTO_ERR_ARGS, "ARGS", "wrong number of arguments or bad number"},
        {PROTO_ERR_NAME, "NAME", "lock names are 1-255 bytes of 0x21-0x7E"},
        {PROTO_ERR_TOOLONG, "TOOLONG", "line too long"},
        {PROTO_ERR_NOTHELD, "NOTHELD", "this connection does not hold that lock"},
        {PROTO_ERR_BACKEND, "BACKEND", "redis unavailable"},
        {PROTO_ERR_LIMIT, "LIMIT", "limit reached"},
        {PROTO_ERR_DENIED, "DENIED", "not allowed for this peer"},
        {PROTO_ERR_KIND, "KIND", "the name is another kind of lock"},
        {PROTO_ERR_CANCELLED, "CANCELLED", "the wait was cancelled"},
    };
    ck_assert_int_eq(ARRAY_LEN(want), PROTO_ERR_COUNT);
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        ck_assert_str_eq(proto_err_name(want[i].err), want[i].name);
        ck_assert_str_eq(proto_err_text(want[i].err), want[i].text);
    }
    ck_assert_str_eq(proto_err_name(PROTO_ERR_COUNT), "UNKNOWN");
    ck_assert_str_eq(proto_err_text(PROTO_ERR_COUNT), "unknown error");
    ck_assert_str_eq(proto_err_name((proto_err_t)(PROTO_ERR_COUNT + 7)), "UNKNOWN");
}
END_TEST

/* ELECT's value: a word as a name is, 1-255 bytes of 0x21-0x7E, before
 * its lease; anything else is ERR ARGS, the name's own checks first. */
START_TEST(test_elect_value) {
    proto_request_t req;
    char *v = repeat('v', PROTO_VALUE_MAX + 1);
    char line[PROTO_VALUE_MAX + 64];

    ck_assert_int_eq(parse("ELECT e 10.0.0.5:8080 700", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.value, "10.0.0.5:8080");
    ck_assert_uint_eq(req.value_len, 13);
    ck_assert_uint_eq(req.lease_ms, 700);
    /* 255 bytes: the longest value */
    snprintf(line, sizeof(line), "ELECT e %.*s", PROTO_VALUE_MAX, v);
    ck_assert_int_eq(parse(line, &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.value_len, PROTO_VALUE_MAX);
    /* 256: too long */
    snprintf(line, sizeof(line), "ELECT e %s", v);
    ck_assert_int_eq(parse(line, &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    /* a byte outside 0x21-0x7E */
    ck_assert_int_eq(parse("ELECT e a\x01" "b", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(parse("ELECT e a\x7f", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    /* the lease is a number; the value need not be */
    ck_assert_int_eq(parse("ELECT e 12 x", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(parse("ELECT e 12", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.value, "12");
    ck_assert_uint_eq(req.lease_ms, 0);
    /* a bad name is ERR NAME, as for every command */
    ck_assert_int_eq(parse("ELECT \x01 v", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_NAME);
    /* other commands carry no value */
    ck_assert_int_eq(parse("LOCK a 5", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.value_len, 0);
    ck_assert_str_eq(req.value, "");
    free(v);
}
END_TEST

/* OK <fence> <value>, OK NONE, !LEADER: never cut, and the longest name
 * and value fit PROTO_REPLY_MAX. */
START_TEST(test_reply_leader) {
    char out[PROTO_REPLY_MAX];
    char *name = repeat('n', PROTO_NAME_MAX), *v = repeat('v', PROTO_VALUE_MAX);
    ck_assert_int_eq(proto_reply_leader(out, sizeof(out), 0, "x", 1), 8);
    ck_assert_str_eq(out, "OK NONE\n");
    ck_assert_int_gt(proto_reply_leader(out, sizeof(out), 42, "h:1", 3), 0);
    ck_assert_str_eq(out, "OK 42 h:1\n");
    ck_assert_int_gt(proto_event_leader(out, sizeof(out), "e", 1, 7, "v", 1), 0);
    ck_assert_str_eq(out, "!LEADER e 7 v\n");
    ck_assert_int_gt(proto_event_leader(out, sizeof(out), "e", 1, 0, "", 0), 0);
    ck_assert_str_eq(out, "!LEADER e NONE\n");
    /* the longest of each, and the largest fence */
    int n = proto_event_leader(out, sizeof(out), name, PROTO_NAME_MAX, UINT64_MAX, v,
                               PROTO_VALUE_MAX);
    ck_assert_int_eq(n, (int)(8 + PROTO_NAME_MAX + 1 + 20 + 1 + PROTO_VALUE_MAX + 1));
    ck_assert_int_eq(out[n - 1], '\n');
    ck_assert_int_gt(proto_reply_leader(out, sizeof(out), UINT64_MAX, v, PROTO_VALUE_MAX), 0);
    /* never cut: -1 when it does not fit */
    ck_assert_int_eq(proto_event_leader(out, 64, name, PROTO_NAME_MAX, 1, "v", 1), -1);
    ck_assert_int_eq(proto_reply_leader(out, 16, 1, v, PROTO_VALUE_MAX), -1);
    ck_assert_int_eq(proto_reply_leader(out, 8, 0, "", 0), -1);
    ck_assert_int_eq(proto_reply_leader(out, sizeof(out), 1, v, PROTO_VALUE_MAX + 1), -1);
    free(name);
    free(v);
}
END_TEST

START_TEST(test_cmd_names_and_usages) {
    static const struct {
        proto_cmd_t cmd;
        const char *name;
        const char *usage;
    } want[] = {
        {PROTO_CMD_PING, "PING", "PING"},
        {PROTO_CMD_LOCK, "LOCK", "LOCK <name> [<lease_ms>]"},
        {PROTO_CMD_TRYLOCK, "TRYLOCK", "TRYLOCK <name> [<wait_ms> [<lease_ms>]]"},
        {PROTO_CMD_UNLOCK, "UNLOCK", "UNLOCK <name>"},
        {PROTO_CMD_RENEW, "RENEW", "RENEW <name> [<lease_ms>]"},
        {PROTO_CMD_STATUS, "STATUS", "STATUS <name>"},
        {PROTO_CMD_WHO, "WHO", "WHO <name>"},
        {PROTO_CMD_FORCEUNLOCK, "FORCEUNLOCK", "FORCEUNLOCK <name>"},
        {PROTO_CMD_INFO, "INFO", "INFO"},
        {PROTO_CMD_CLIENTS, "CLIENTS", "CLIENTS"},
        {PROTO_CMD_QUIT, "QUIT", "QUIT"},
        {PROTO_CMD_CANCEL, "CANCEL", "CANCEL [#<tag>]"},
        {PROTO_CMD_RLOCK, "RLOCK", "RLOCK <name> [<lease_ms>]"},
        {PROTO_CMD_WLOCK, "WLOCK", "WLOCK <name> [<lease_ms>]"},
        {PROTO_CMD_TRYRLOCK, "TRYRLOCK", "TRYRLOCK <name> [<wait_ms> [<lease_ms>]]"},
        {PROTO_CMD_TRYWLOCK, "TRYWLOCK", "TRYWLOCK <name> [<wait_ms> [<lease_ms>]]"},
        {PROTO_CMD_RUNLOCK, "RUNLOCK", "RUNLOCK <name>"},
        {PROTO_CMD_WUNLOCK, "WUNLOCK", "WUNLOCK <name>"},
        {PROTO_CMD_SEMINIT, "SEMINIT", "SEMINIT <name> <permits>"},
        {PROTO_CMD_ACQUIRE, "ACQUIRE", "ACQUIRE <name> <permits> [<lease_ms>]"},
        {PROTO_CMD_TRYACQUIRE, "TRYACQUIRE",
         "TRYACQUIRE <name> <permits> [<wait_ms> [<lease_ms>]]"},
        {PROTO_CMD_RELEASE, "RELEASE", "RELEASE <name> <permits>"},
        {PROTO_CMD_FAIRLOCK, "FAIRLOCK", "FAIRLOCK <name> [<lease_ms>]"},
        {PROTO_CMD_TRYFAIRLOCK, "TRYFAIRLOCK", "TRYFAIRLOCK <name> [<wait_ms> [<lease_ms>]]"},
        {PROTO_CMD_ELECT, "ELECT", "ELECT <name> <value> [<lease_ms>]"},
        {PROTO_CMD_RESIGN, "RESIGN", "RESIGN <name>"},
        {PROTO_CMD_LEADER, "LEADER", "LEADER <name>"},
        {PROTO_CMD_OBSERVE, "OBSERVE", "OBSERVE <name>"},
        {PROTO_CMD_UNOBSERVE, "UNOBSERVE", "UNOBSERVE <name>"},
        {PROTO_CMD_MLOCK, "MLOCK", "MLOCK <n> <name1> ... <name_n> [<lease_ms>]"},
        {PROTO_CMD_TRYMLOCK, "TRYMLOCK",
         "TRYMLOCK <n> <name1> ... <name_n> [<wait_ms> [<lease_ms>]]"},
        {PROTO_CMD_MUNLOCK, "MUNLOCK", "MUNLOCK <n> <name1> ... <name_n>"},
        {PROTO_CMD_LIST, "LIST", "LIST [<pattern> [<limit>]]"},
        {PROTO_CMD_LATCHSET, "LATCHSET", "LATCHSET <name> <count>"},
        {PROTO_CMD_COUNTDOWN, "COUNTDOWN", "COUNTDOWN <name>"},
        {PROTO_CMD_AWAIT, "AWAIT", "AWAIT <name>"},
        {PROTO_CMD_TRYAWAIT, "TRYAWAIT", "TRYAWAIT <name> [<wait_ms>]"},
        {PROTO_CMD_LATCHCOUNT, "LATCHCOUNT", "LATCHCOUNT <name>"},
    };
    ck_assert_int_eq(ARRAY_LEN(want), PROTO_CMD_COUNT - 1);
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        ck_assert_str_eq(proto_cmd_name(want[i].cmd), want[i].name);
        ck_assert_str_eq(proto_cmd_usage(want[i].cmd), want[i].usage);
    }
    ck_assert_str_eq(proto_cmd_name(PROTO_CMD_NONE), "?");
    ck_assert_str_eq(proto_cmd_usage(PROTO_CMD_NONE), "");
    ck_assert_str_eq(proto_cmd_name(PROTO_CMD_COUNT), "?");
    ck_assert_str_eq(proto_cmd_usage(PROTO_CMD_COUNT), "");
}
END_TEST

/* Room for the longest multi-name line the test makes. */
#define PROTO_WORDS_TEST_ROOM (16 + PROTO_MNAMES_MAX * (PROTO_NAME_MAX + 1) + 16)

/* ---- multi-name requests ------------------------------------------------ */

/* The names come back in order, each NUL-terminated, with the numbers
 * after them. */
START_TEST(test_multi_names) {
    proto_request_t req;
    size_t len;
    ck_assert_int_eq(parse("TRYMLOCK 3 acct:1 {t}x acct:22 50 700", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.nnames, 3);
    ck_assert_str_eq(proto_mname(&req, 0, &len), "acct:1");
    ck_assert_uint_eq(len, 6);
    ck_assert_str_eq(proto_mname(&req, 1, &len), "{t}x");
    ck_assert_uint_eq(len, 4);
    ck_assert_str_eq(proto_mname(&req, 2, &len), "acct:22");
    ck_assert_uint_eq(len, 7);
    ck_assert_uint_eq(req.wait_ms, 50);
    ck_assert_uint_eq(req.lease_ms, 700);
    proto_request_free(&req);
    ck_assert_ptr_null(req.mnames);
    ck_assert_uint_eq(req.nnames, 0);
    /* a single-name request carries none */
    ck_assert_int_eq(parse("LOCK a", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.nnames, 0);
    ck_assert_ptr_null(req.mnames);
    proto_request_free(&req);
}
END_TEST

/* 64 names of 255 bytes fit a line of max_line 17000, through feed. */
START_TEST(test_multi_max_names) {
    static char line[PROTO_WORDS_TEST_ROOM];
    proto_parser_t p;
    proto_request_t req;
    size_t used, k = (size_t)sprintf(line, "MLOCK %d", PROTO_MNAMES_MAX);
    for (int i = 0; i < PROTO_MNAMES_MAX; i++) {
        line[k++] = ' ';
        memset(line + k, 'a', PROTO_NAME_MAX - 2);
        k += PROTO_NAME_MAX - 2;
        k += (size_t)sprintf(line + k, "%02d", i);
    }
    k += (size_t)sprintf(line + k, " 900\n");
    ck_assert_int_eq(proto_parser_init(&p, 17000), 0);
    ck_assert_int_eq(proto_feed(&p, line, k, &used, &req), PROTO_REQUEST);
    ck_assert_uint_eq(used, k);
    ck_assert_uint_eq(req.nnames, PROTO_MNAMES_MAX);
    ck_assert_uint_eq(req.lease_ms, 900);
    size_t len;
    const char *last = proto_mname(&req, PROTO_MNAMES_MAX - 1, &len);
    ck_assert_uint_eq(len, PROTO_NAME_MAX);
    ck_assert_int_eq(memcmp(last + PROTO_NAME_MAX - 2, "63", 2), 0);
    proto_request_free(&req);
    proto_parser_free(&p);
}
END_TEST

/* n out of range, n not matching the words, a duplicate: ERR ARGS; a bad
 * name: ERR NAME. */
START_TEST(test_multi_bad) {
    const struct {
        const char *line;
        proto_err_t err;
    } cases[] = {
        {"MLOCK 0 a", PROTO_ERR_ARGS},
        {"MLOCK 65 a", PROTO_ERR_ARGS},
        {"MLOCK x a", PROTO_ERR_ARGS},
        {"MLOCK -1 a", PROTO_ERR_ARGS},
        {"MLOCK 3 a b", PROTO_ERR_ARGS},          /* fewer names than n */
        {"MLOCK 1 a b c", PROTO_ERR_ARGS},        /* two words too many */
        {"MLOCK 1 a b", PROTO_ERR_ARGS},          /* b is no number */
        {"MLOCK 2 a a", PROTO_ERR_ARGS},          /* a name twice */
        {"TRYMLOCK 3 a b a 5", PROTO_ERR_ARGS},
        {"TRYMLOCK 1 a 1 2 3", PROTO_ERR_ARGS},
        {"MUNLOCK 1 a 5", PROTO_ERR_ARGS},
        {"MUNLOCK 2 a", PROTO_ERR_ARGS},
        {"MLOCK 2 a \x7f", PROTO_ERR_NAME},
        {"MLOCK", PROTO_ERR_ARGS},
        {"MLOCK 1", PROTO_ERR_ARGS},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_msg(parse(cases[i].line, &req) == PROTO_ERROR, "%s", cases[i].line);
        ck_assert_msg(req.err == cases[i].err, "%s: %d", cases[i].line, req.err);
        ck_assert_ptr_null(req.mnames);
    }
}
END_TEST

START_TEST(test_reply_ok_list) {
    char out[PROTO_REPLY_LIST_MAX];
    uint64_t v[PROTO_MNAMES_MAX];
    uint64_t three[] = {1, 0, 18446744073709551615ull};
    ck_assert_int_eq(proto_reply_ok_list(out, sizeof(out), three, 3), 28);
    ck_assert_str_eq(out, "OK 1 0 18446744073709551615\n");
    for (int i = 0; i < PROTO_MNAMES_MAX; i++) v[i] = UINT64_MAX;
    int n = proto_reply_ok_list(out, sizeof(out), v, PROTO_MNAMES_MAX);
    ck_assert_int_eq(n, 2 + PROTO_MNAMES_MAX * 21 + 1);
    ck_assert_int_eq(proto_reply_ok_list(out, PROTO_REPLY_LIST_MAX - 1, v, PROTO_MNAMES_MAX), -1);
    ck_assert_int_eq(proto_reply_ok_list(out, sizeof(out), v, PROTO_MNAMES_MAX + 1), -1);
}
END_TEST

/* ---- tags --------------------------------------------------------------- */

/* The 64 bytes a tag is made of. */
static int tag_byte(int c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           c == '_' || c == '-';
}

/* A malformed tag: one ERR ARGS, untagged, whatever follows it. */
static void assert_bad_tag(const char *line, size_t len, const char *detail) {
    proto_request_t req;
    ck_assert_msg(proto_parse_line(line, len, &req) == PROTO_ERROR, "'%.*s' was accepted",
                  (int)len, line);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_int_eq(req.cmd, PROTO_CMD_NONE);
    ck_assert_uint_eq(req.tag_len, 0);
    ck_assert_str_eq(req.tag, "");
    ck_assert_ptr_nonnull(req.detail);
    ck_assert_str_eq(req.detail, detail);
}

START_TEST(test_tag_good) {
    static const struct {
        const char *line;
        const char *tag;
    } cases[] = {
        {"#7 LOCK a", "7"},
        {"#0123456789 LOCK a", "0123456789"},
        {"#ABCDEFGHIJKLMNOP LOCK a", "ABCDEFGHIJKLMNOP"},  /* 16: the most */
        {"#QRSTUVWXYZ LOCK a", "QRSTUVWXYZ"},
        {"#abcdefghijklmnop LOCK a", "abcdefghijklmnop"},
        {"#qrstuvwxyz LOCK a", "qrstuvwxyz"},
        {"#_ LOCK a", "_"},
        {"#- LOCK a", "-"},
        {"#a-B_9 LOCK a", "a-B_9"},
        {"#7   LOCK a", "7"},      /* a run of blanks after it, as between words */
        {"#7\tLOCK a", "7"},
        {"#7 \t LOCK a", "7"},
        {"  #7 LOCK a", "7"},      /* leading blanks are ignored, as on any line */
        {"\t#7 LOCK a", "7"},
        {"#7 LOCK a\r", "7"},
        {"#7 lock a  ", "7"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        proto_request_t req;
        ck_assert_msg(parse(cases[i].line, &req) == PROTO_REQUEST, "'%s' rejected",
                      cases[i].line);
        ck_assert_int_eq(req.cmd, PROTO_CMD_LOCK);
        ck_assert_str_eq(req.name, "a");
        ck_assert_str_eq(req.tag, cases[i].tag);
        ck_assert_uint_eq(req.tag_len, strlen(cases[i].tag));
        ck_assert_ptr_null(req.detail);
    }
    /* Tags are echoed as sent: case is kept. */
    proto_request_t req;
    ck_assert_int_eq(parse("#Ab PING", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.tag, "Ab");
}
END_TEST

/* Every byte as a one-character tag: the 64 of 0-9 A-Z a-z _ - tag the
 * request; any other makes the tag malformed. */
START_TEST(test_tag_every_byte) {
    for (int c = 0; c < 256; c++) {
        char line[] = "#? STATUS s";
        proto_request_t req;
        line[1] = (char)c;
        if (tag_byte(c)) {
            ck_assert_int_eq(proto_parse_line(line, sizeof(line) - 1, &req), PROTO_REQUEST);
            ck_assert_uint_eq(req.tag_len, 1);
            ck_assert_int_eq(req.tag[0], c);
            ck_assert_int_eq(req.tag[1], '\0');
        } else {
            assert_bad_tag(line, sizeof(line) - 1, TAG_DETAIL);
        }
        /* in the middle of a longer tag and at its end alike */
        char mid[] = "#ab?cd STATUS s", end[] = "#abcd? STATUS s";
        mid[3] = (char)c;
        end[5] = (char)c;
        if (tag_byte(c)) {
            ck_assert_int_eq(proto_parse_line(mid, sizeof(mid) - 1, &req), PROTO_REQUEST);
            ck_assert_uint_eq(req.tag_len, 5);
            ck_assert_int_eq(proto_parse_line(end, sizeof(end) - 1, &req), PROTO_REQUEST);
            ck_assert_uint_eq(req.tag_len, 5);
        } else if (c == ' ' || c == '\t') {
            /* a blank ends the tag: "cd" is then the command word */
            ck_assert_int_eq(proto_parse_line(mid, sizeof(mid) - 1, &req), PROTO_ERROR);
            ck_assert_int_eq(req.err, PROTO_ERR_UNKNOWN);
            ck_assert_str_eq(req.tag, "ab");
            ck_assert_int_eq(proto_parse_line(end, sizeof(end) - 1, &req), PROTO_REQUEST);
            ck_assert_str_eq(req.tag, "abcd");
        } else {
            assert_bad_tag(mid, sizeof(mid) - 1, TAG_DETAIL);
            assert_bad_tag(end, sizeof(end) - 1, TAG_DETAIL);
        }
    }
}
END_TEST

START_TEST(test_tag_bad) {
    static const struct {
        const char *line;
        const char *detail;
    } cases[] = {
        {"#", TAG_DETAIL},                       /* # alone */
        {"# LOCK x", TAG_DETAIL},                /* # and a blank */
        {"#\tLOCK x", TAG_DETAIL},
        {"  #  LOCK x", TAG_DETAIL},
        {"#\r", TAG_DETAIL},
        {"#a.b LOCK x", TAG_DETAIL},             /* a bad character */
        {"#a/b LOCK x", TAG_DETAIL},
        {"#7# LOCK x", TAG_DETAIL},
        {"##7 LOCK x", TAG_DETAIL},
        {"#7\r LOCK x", TAG_DETAIL},             /* a CR not at the end is a byte */
        {"#\xc3\xa9 LOCK x", TAG_DETAIL},
        {"#0123456789abcdefg LOCK x", TAG_DETAIL},  /* 17 characters */
        {"#0123456789abcdef0123456789abcdef LOCK x", TAG_DETAIL},
        {"#a.b", TAG_DETAIL},                    /* bad, and nothing after it */
        {"#7", TAG_ALONE_DETAIL},                /* a good tag with nothing after it */
        {"#7   ", TAG_ALONE_DETAIL},
        {"#7 \t ", TAG_ALONE_DETAIL},
        {"#7\r", TAG_ALONE_DETAIL},
        {" #7 \r", TAG_ALONE_DETAIL},
        {"#7LOCK", TAG_ALONE_DETAIL},            /* one word: a tag, then nothing */
        {"#0123456789abcdef", TAG_ALONE_DETAIL},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        assert_bad_tag(cases[i].line, strlen(cases[i].line), cases[i].detail);
    /* NUL is a byte as any other: not in a tag. */
    assert_bad_tag("#a\0b LOCK x", 11, TAG_DETAIL);
    assert_bad_tag("#\0 LOCK x", 9, TAG_DETAIL);
    /* A malformed tag is reported before the request's own errors. */
    assert_bad_tag("#a.b FROB", 9, TAG_DETAIL);
    assert_bad_tag("#a.b LOCK", 9, TAG_DETAIL);
}
END_TEST

/* Only the first word may be a tag: a '#' elsewhere is an ordinary byte
 * (a name may begin with it), and a line that does not begin with '#' is
 * untagged. */
START_TEST(test_tag_only_first_word) {
    proto_request_t req;

    ck_assert_int_eq(parse("LOCK #7", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "#7");
    ck_assert_uint_eq(req.tag_len, 0);
    ck_assert_int_eq(parse("STATUS #", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.name, "#");
    ck_assert_int_eq(parse("#7 LOCK #8", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.tag, "7");
    ck_assert_str_eq(req.name, "#8");
    ck_assert_int_eq(parse("PING #7", &req), PROTO_ERROR);
    ck_assert_int_eq(req.err, PROTO_ERR_ARGS);
    ck_assert_uint_eq(req.tag_len, 0);
    ck_assert_int_eq(parse("#7 #8 LOCK a", &req), PROTO_ERROR);  /* one tag only */
    ck_assert_int_eq(req.err, PROTO_ERR_UNKNOWN);
    ck_assert_str_eq(req.tag, "7");
}
END_TEST

/* A good tag and a bad request: the error keeps the tag, so that it is
 * answered "#<tag> ERR ...", with the same code and text as untagged. */
START_TEST(test_tag_kept_on_request_errors) {
    static const char *const lines[] = {
        "FROB x", "LOCK", "LOCK a 1 2", "LOCK bad\x7fname", "LOCK n 12a", "TRYLOCK a -1",
        "MLOCK 2 a a", "MLOCK 0", "ACQUIRE s", "ELECT e", "LIST * 0", "PING x",
        "LOCK a 2147483648", "LOCK\r\r",
    };
    for (size_t i = 0; i < ARRAY_LEN(lines); i++) {
        char tagged[128];
        proto_request_t want, req;
        snprintf(tagged, sizeof(tagged), "#q-9 %s", lines[i]);
        ck_assert_int_eq(parse(lines[i], &want), PROTO_ERROR);
        ck_assert_msg(parse(tagged, &req) == PROTO_ERROR, "'%s' was accepted", tagged);
        ck_assert_str_eq(req.tag, "q-9");
        ck_assert_uint_eq(req.tag_len, 3);
        ck_assert_int_eq(req.cmd, want.cmd);
        ck_assert_int_eq(req.err, want.err);
        ck_assert_ptr_eq(req.detail, want.detail);
    }
}
END_TEST

/* Every good line tagged parses exactly as untagged, with the tag. */
START_TEST(test_tag_each_command) {
    for (size_t i = 0; i < ARRAY_LEN(good_lines); i++) {
        char tagged[160];
        proto_request_t want, req;
        snprintf(tagged, sizeof(tagged), "#Zz-_09abcdefghi %s", good_lines[i].line);
        ck_assert_int_eq(parse(good_lines[i].line, &want), PROTO_REQUEST);
        ck_assert_msg(parse(tagged, &req) == PROTO_REQUEST, "'%s' rejected", tagged);
        ck_assert_str_eq(req.tag, "Zz-_09abcdefghi");
        ck_assert_uint_eq(req.tag_len, 15);
        ck_assert_uint_eq(want.tag_len, 0);
        want.tag_len = req.tag_len;
        memcpy(want.tag, req.tag, sizeof(want.tag));
        assert_same_request(&req, &want);
        for (unsigned k = 0; k < req.nnames; k++) {
            size_t a, b;
            const char *na = proto_mname(&req, k, &a), *nb = proto_mname(&want, k, &b);
            ck_assert_uint_eq(a, b);
            ck_assert_str_eq(na, nb);
        }
        proto_request_free(&req);
        proto_request_free(&want);
    }
}
END_TEST

/* The tag is not one of the request's words: the longest request (TRYMLOCK
 * of 64 names and both numbers) may be tagged. */
START_TEST(test_tag_longest_request) {
    size_t cap = 64 + PROTO_MNAMES_MAX * 8;
    char *line = malloc(cap);
    ck_assert_ptr_nonnull(line);
    int n = snprintf(line, cap, "#%s TRYMLOCK %d", "0123456789abcdef", PROTO_MNAMES_MAX);
    for (int i = 0; i < PROTO_MNAMES_MAX; i++)
        n += snprintf(line + n, cap - (size_t)n, " n%d", i);
    n += snprintf(line + n, cap - (size_t)n, " 5 6");
    proto_request_t req;
    ck_assert_int_eq(proto_parse_line(line, (size_t)n, &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.nnames, PROTO_MNAMES_MAX);
    ck_assert_uint_eq(req.wait_ms, 5);
    ck_assert_uint_eq(req.lease_ms, 6);
    ck_assert_str_eq(req.tag, "0123456789abcdef");
    proto_request_free(&req);
    free(line);
}
END_TEST

START_TEST(test_tag_reset_between_parses) {
    proto_request_t req;

    ck_assert_int_eq(parse("#0123456789abcdef LOCK a", &req), PROTO_REQUEST);
    ck_assert_int_eq(parse("LOCK b", &req), PROTO_REQUEST);
    ck_assert_uint_eq(req.tag_len, 0);
    ck_assert_str_eq(req.tag, "");
    ck_assert_int_eq(parse("#x FROB", &req), PROTO_ERROR);
    ck_assert_int_eq(parse("FROB", &req), PROTO_ERROR);
    ck_assert_uint_eq(req.tag_len, 0);
    ck_assert_str_eq(req.tag, "");
    /* the tag of a short line after a long one: NUL-terminated at its end */
    ck_assert_int_eq(parse("#0123456789abcdef LOCK a", &req), PROTO_REQUEST);
    ck_assert_int_eq(parse("#q LOCK a", &req), PROTO_REQUEST);
    ck_assert_str_eq(req.tag, "q");
}
END_TEST

/* Tagged, untagged, malformed and blank lines, fed whole, byte by byte and
 * cut at every point: the same outcomes, tags included. */
static const char tagged_stream[] =
    "#1 LOCK alpha\n"
    "LOCK beta 5000\r\n"
    "\n"
    "  #a-b_C\ttrylock gamma 100 200 \n"
    "#0123456789abcdef MLOCK 2 x y 900\r\n"
    "#7 FROB\n"
    "#\n"
    "# LOCK a\n"
    "#a.b LOCK a\n"
    "#0123456789abcdefg LOCK a\n"
    "#9\n"
    "#9 \t \r\n"
    " \t \n"
    "#z LOCK\n"
    "LOCK #1\n"
    "#Q UNLOCK alpha\n";

START_TEST(test_tag_stream) {
    static const struct {
        proto_status_t st;
        proto_cmd_t cmd;
        proto_err_t err;
        const char *tag;
        const char *name;
    } want[] = {
        {PROTO_REQUEST, PROTO_CMD_LOCK, PROTO_ERR_NONE, "1", "alpha"},
        {PROTO_REQUEST, PROTO_CMD_LOCK, PROTO_ERR_NONE, "", "beta"},
        {PROTO_REQUEST, PROTO_CMD_TRYLOCK, PROTO_ERR_NONE, "a-b_C", "gamma"},
        {PROTO_REQUEST, PROTO_CMD_MLOCK, PROTO_ERR_NONE, "0123456789abcdef", "x"},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_UNKNOWN, "7", ""},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_ARGS, "", ""},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_ARGS, "", ""},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_ARGS, "", ""},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_ARGS, "", ""},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_ARGS, "", ""},
        {PROTO_ERROR, PROTO_CMD_NONE, PROTO_ERR_ARGS, "", ""},
        {PROTO_ERROR, PROTO_CMD_LOCK, PROTO_ERR_ARGS, "z", ""},
        {PROTO_REQUEST, PROTO_CMD_LOCK, PROTO_ERR_NONE, "", "#1"},
        {PROTO_REQUEST, PROTO_CMD_UNLOCK, PROTO_ERR_NONE, "Q", "alpha"},
    };
    const size_t len = sizeof(tagged_stream) - 1;
    outcomes_t whole, bytes, split;

    feed_whole(PROTO_LINE_MIN, tagged_stream, len, &whole);
    ck_assert_uint_eq(whole.n, ARRAY_LEN(want));
    for (size_t i = 0; i < whole.n; i++) {
        const proto_request_t *r = &whole.o[i].req;
        ck_assert_msg(whole.o[i].st == want[i].st, "outcome %zu", i);
        ck_assert_int_eq(r->cmd, want[i].cmd);
        ck_assert_int_eq(r->err, want[i].err);
        ck_assert_str_eq(r->tag, want[i].tag);
        ck_assert_uint_eq(r->tag_len, strlen(want[i].tag));
        if (want[i].st == PROTO_REQUEST) ck_assert_str_eq(r->name, want[i].name);
    }
    feed_bytes(PROTO_LINE_MIN, tagged_stream, len, &bytes);
    assert_same_outcomes(&whole, &bytes);
    outcomes_free(&bytes);
    for (size_t k = 0; k <= len; k++) {
        feed_cut(PROTO_LINE_MIN, tagged_stream, len, &k, 1, &split);
        assert_same_outcomes(&whole, &split);
        outcomes_free(&split);
    }
    for (size_t k = 0; k + 1 <= len; k++) {  /* two cuts: a tag split three ways */
        size_t cuts[2] = {k, k + 1 + k % 3 < len ? k + 1 + k % 3 : len};
        feed_cut(PROTO_LINE_MIN, tagged_stream, len, cuts, 2, &split);
        assert_same_outcomes(&whole, &split);
        outcomes_free(&split);
    }
    outcomes_free(&whole);
}
END_TEST

/* The tag counts toward max_line; a line too long is TOOLONG, untagged
 * (it is not read). */
START_TEST(test_tag_max_line) {
    char line[PROTO_LINE_MIN + 2];
    size_t head = strlen("#0123456789abcdef LOCK ");
    memcpy(line, "#0123456789abcdef LOCK ", head);
    memset(line + head, 'n', PROTO_LINE_MIN - head);
    line[PROTO_LINE_MIN] = '\n';
    outcomes_t out;
    feed_bytes(PROTO_LINE_MIN, line, PROTO_LINE_MIN + 1, &out);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_int_eq(out.o[0].st, PROTO_REQUEST);
    ck_assert_str_eq(out.o[0].req.tag, "0123456789abcdef");
    ck_assert_uint_eq(out.o[0].req.name_len, PROTO_LINE_MIN - head);

    memset(line + head, 'n', PROTO_LINE_MIN + 1 - head);
    line[PROTO_LINE_MIN + 1] = '\n';
    feed_whole(PROTO_LINE_MIN, line, PROTO_LINE_MIN + 2, &out);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_int_eq(out.o[0].st, PROTO_ERROR);
    ck_assert_int_eq(out.o[0].req.err, PROTO_ERR_TOOLONG);
    ck_assert_uint_eq(out.o[0].req.tag_len, 0);
    ck_assert_str_eq(out.o[0].req.tag, "");
}
END_TEST

/* proto_reply_tag: "#<tag> ", never cut; the reply's line follows it. */
START_TEST(test_reply_tag) {
    char out[64];

    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "7", 1), 3);
    ck_assert_str_eq(out, "#7 ");
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "0123456789abcdef", PROTO_TAG_MAX),
                     PROTO_TAG_MAX + 2);
    ck_assert_str_eq(out, "#0123456789abcdef ");
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "a-B_9", 5), 7);
    ck_assert_str_eq(out, "#a-B_9 ");
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "abc", 2), 4);  /* tag_len counts */
    ck_assert_str_eq(out, "#ab ");

    /* then the reply: one line */
    int n = proto_reply_tag(out, sizeof(out), "q", 1);
    ck_assert_int_eq(n, 3);
    int m = proto_reply_error(out + n, sizeof(out) - (size_t)n, PROTO_ERR_UNKNOWN, NULL);
    ck_assert_int_gt(m, 0);
    ck_assert_str_eq(out, "#q ERR UNKNOWN no such command\n");

    /* not a tag: nothing */
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "", 0), -1);
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), NULL, 0), -1);
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "0123456789abcdefg", PROTO_TAG_MAX + 1),
                     -1);
    static const char *const bad[] = {"a b", "a\nb", "a.b", "#7", "a\rb", "\xc3\xa9"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++)
        ck_assert_msg(proto_reply_tag(out, sizeof(out), bad[i], strlen(bad[i])) == -1,
                      "bad tag %zu written", i);
    ck_assert_int_eq(proto_reply_tag(out, sizeof(out), "a\0b", 3), -1);

    /* cap: the tag, '#', ' ' and the NUL, exactly; one less is -1 */
    for (size_t len = 1; len <= PROTO_TAG_MAX; len++) {
        const char *tag = "ABCDEFGHIJKLMNOP";
        for (size_t cap = 0; cap <= len + 4; cap++) {
            char *o = malloc(cap ? cap : 1);  /* exactly cap bytes: ASan sees overruns */
            ck_assert_ptr_nonnull(o);
            int r = proto_reply_tag(cap ? o : NULL, cap, tag, len);
            if (cap < len + 3) {
                ck_assert_int_eq(r, -1);
            } else {
                ck_assert_int_eq(r, (int)len + 2);
                ck_assert_int_eq(o[0], '#');
                ck_assert_int_eq(memcmp(o + 1, tag, len), 0);
                ck_assert_int_eq(o[len + 1], ' ');
                ck_assert_int_eq(o[len + 2], '\0');
            }
            free(o);
        }
    }
}
END_TEST

/* ---- suite -------------------------------------------------------------- */

static Suite *proto_suite(void) {
    Suite *s = suite_create("proto");
    TCase *tc;

    tc = tcase_create("commands");
    tcase_add_loop_test(tc, test_parse_each_command, 0, (int)ARRAY_LEN(good_lines));
    tcase_add_test(tc, test_every_command_word_is_covered);
    tcase_add_test(tc, test_list_args);
    tcase_add_test(tc, test_next_is);
    tcase_add_test(tc, test_command_word_case_insensitive);
    tcase_add_test(tc, test_name_case_sensitive);
    tcase_add_test(tc, test_request_fields_reset_between_parses);
    tcase_add_test(tc, test_trylock_wait_and_lease);
    tcase_add_test(tc, test_lock_and_renew_lease);
    suite_add_tcase(s, tc);

    tc = tcase_create("multi");
    tcase_add_test(tc, test_multi_names);
    tcase_add_test(tc, test_multi_max_names);
    tcase_add_test(tc, test_multi_bad);
    tcase_add_test(tc, test_reply_ok_list);
    suite_add_tcase(s, tc);

    tc = tcase_create("tags");
    tcase_add_test(tc, test_tag_good);
    tcase_add_test(tc, test_tag_every_byte);
    tcase_add_test(tc, test_tag_bad);
    tcase_add_test(tc, test_tag_only_first_word);
    tcase_add_test(tc, test_tag_kept_on_request_errors);
    tcase_add_test(tc, test_tag_each_command);
    tcase_add_test(tc, test_tag_longest_request);
    tcase_add_test(tc, test_tag_reset_between_parses);
    tcase_add_test(tc, test_tag_stream);
    tcase_add_test(tc, test_tag_max_line);
    tcase_add_test(tc, test_cancel_tag);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_unknown_command);
    tcase_add_test(tc, test_too_few_args);
    tcase_add_test(tc, test_too_many_args);
    tcase_add_test(tc, test_number_limits);
    tcase_add_test(tc, test_bad_numbers_give_args);
    tcase_add_test(tc, test_parse_num);
    tcase_add_test(tc, test_name_length_limits);
    tcase_add_test(tc, test_name_256_bytes_through_feed);
    tcase_add_test(tc, test_name_every_byte);
    tcase_add_test(tc, test_name_bad_edge_bytes);
    tcase_add_test(tc, test_nul_bytes_are_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("framing");
    tcase_add_test(tc, test_cr_before_lf_dropped);
    tcase_add_test(tc, test_cr_elsewhere_is_invalid);
    tcase_add_test(tc, test_whitespace_separators);
    tcase_add_test(tc, test_empty_and_blank_lines_skipped);
    tcase_add_test(tc, test_pipelined_requests);
    tcase_add_test(tc, test_pipelined_partial_tail);
    tcase_add_test(tc, test_mixed_stream_whole);
    tcase_add_test(tc, test_byte_at_a_time_equals_whole);
    tcase_add_test(tc, test_byte_at_a_time_each_command);
    tcase_add_test(tc, test_every_split_point_equals_whole);
    suite_add_tcase(s, tc);

    tc = tcase_create("max_line");
    tcase_add_loop_test(tc, test_max_line_exact_fits, 0, (int)ARRAY_LEN(max_lines));
    tcase_add_loop_test(tc, test_max_line_plus_one_toolong_one_feed, 0,
                        (int)ARRAY_LEN(max_lines));
    tcase_add_loop_test(tc, test_max_line_plus_one_toolong_split, 0,
                        (int)ARRAY_LEN(max_lines));
    tcase_add_loop_test(tc, test_toolong_without_lf_is_immediate, 0,
                        (int)ARRAY_LEN(max_lines));
    tcase_add_test(tc, test_toolong_swallows_the_rest);
    tcase_add_test(tc, test_max_line_counts_each_line_separately);
    tcase_add_test(tc, test_parser_init_limits);
    tcase_add_test(tc, test_parser_free_with_partial_line);
    suite_add_tcase(s, tc);

    tc = tcase_create("replies");
    tcase_add_test(tc, test_reply_ok);
    tcase_add_test(tc, test_reply_ok_nums);
    tcase_add_test(tc, test_reply_ok_cap);
    tcase_add_test(tc, test_reply_timeout);
    tcase_add_test(tc, test_reply_error);
    tcase_add_test(tc, test_event_lost);
    tcase_add_test(tc, test_reply_error_exact_fit_and_one_over);
    tcase_add_test(tc, test_reply_error_cr_lf_in_detail);
    tcase_add_test(tc, test_reply_error_huge_detail);
    tcase_add_test(tc, test_reply_tiny_caps);
    tcase_add_test(tc, test_event_lost_cuts_reason_never_name);
    tcase_add_test(tc, test_reply_ok_cuts_text);
    tcase_add_test(tc, test_reply_every_cap_and_length);
    tcase_add_test(tc, test_err_names_and_texts);
    tcase_add_test(tc, test_cmd_names_and_usages);
    tcase_add_test(tc, test_elect_value);
    tcase_add_test(tc, test_reply_leader);
    tcase_add_test(tc, test_reply_tag);
    suite_add_tcase(s, tc);

    return s;
}

int main(void) {
    SRunner *sr = srunner_create(proto_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
