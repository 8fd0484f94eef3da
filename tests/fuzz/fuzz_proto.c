/* libFuzzer target for proto/: framing, resumption and reply formatting.
 * SPDX-License-Identifier: MIT
 *
 * Input: two bytes choosing max_line (PROTO_LINE_MIN..4096), then the byte
 * stream a client would send. The stream is fed whole and in chunks whose
 * sizes come from a hash of the input; both runs are checked against a model
 * of the framing rules in PROTOCOL.md and must produce the same outcomes:
 * a line's tag (a first word beginning with '#') against a model of the tag
 * rules, and the request after a tag as the same line untagged. The stream's
 * first request is looked ahead at as the session does for CANCEL. Then the
 * reply formatters are run on text from the input with a small cap.
 * Any broken invariant traps, which libFuzzer reports as a crash. */
#include "proto/proto.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHECK(cond)                          \
    do {                                     \
        if (!(cond)) __builtin_trap();       \
    } while (0)

#define FUZZ_LINE_MAX    4096  /* largest max_line the input can choose */
#define FUZZ_REPLY_TEXT  600   /* bytes of input text handed to formatters */

/* One thing proto_feed returned other than NEED_MORE. */
typedef struct outcome_s {
    proto_status_t st;
    proto_cmd_t cmd;
    proto_err_t err;
    char name[PROTO_NAME_MAX + 1];
    size_t name_len;
    uint32_t wait_ms;
    uint32_t lease_ms;
    uint32_t count;
    char tag[PROTO_TAG_MAX + 1];
    uint8_t tag_len;
    char value[PROTO_VALUE_MAX + 1];
    size_t value_len;
} outcome_t;

typedef struct outcomes_s {
    outcome_t *o;
    size_t n;
    size_t cap;
} outcomes_t;

/* The feeding state of one run, with the model it is checked against. */
typedef struct run_s {
    const uint8_t *s;    /* the whole stream */
    size_t n;
    size_t max_line;
    proto_parser_t p;
    size_t blank_to;     /* lines from the last report to here were blank */
    int lost;            /* TOOLONG was returned */
    outcomes_t *out;
} run_t;

/* A line proto_parse_line ignores: only blanks once one final CR is off. */
static int line_blank(const uint8_t *l, size_t len) {
    if (len > 0 && l[len - 1] == '\r') len--;
    for (size_t i = 0; i < len; i++)
        if (l[i] != ' ' && l[i] != '\t') return 0;
    return 1;
}

static const uint8_t *find_lf(const uint8_t *s, size_t from, size_t to) {
    return from < to ? memchr(s + from, '\n', to - from) : NULL;
}

static int is_blank(uint8_t c) {
    return c == ' ' || c == '\t';
}

/* The model of a tag (without its '#'): 1 to PROTO_TAG_MAX of 0-9 A-Z a-z _ -. */
static int model_tag(const uint8_t *t, size_t len) {
    if (len == 0 || len > PROTO_TAG_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = t[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* From the command table itself, so that a new command needs no edit here. */
static int takes(proto_cmd_t cmd, const char *word) {
    return strstr(proto_cmd_usage(cmd), word) != NULL;
}

static void check_request(const proto_request_t *req) {
    CHECK(req->cmd > PROTO_CMD_NONE && req->cmd < PROTO_CMD_COUNT);
    CHECK(req->err == PROTO_ERR_NONE);
    CHECK(req->name_len <= PROTO_NAME_MAX);
    CHECK(req->name[req->name_len] == '\0');
    CHECK(strlen(req->name) == req->name_len);
    CHECK(req->wait_ms <= PROTO_NUM_MAX && req->lease_ms <= PROTO_NUM_MAX &&
          req->count <= PROTO_NUM_MAX);
    if (takes(req->cmd, "<name>") || takes(req->cmd, "<name1>")) {
        CHECK(proto_name_valid(req->name, req->name_len));
    } else {
        CHECK(req->name_len == 0);
    }
    /* a multi-name request's names: 1 to PROTO_MNAMES_MAX, distinct, the
     * first as its name */
    if (takes(req->cmd, "<name1>")) {
        CHECK(req->nnames >= 1 && req->nnames <= PROTO_MNAMES_MAX && req->mnames != NULL);
        for (unsigned i = 0; i < req->nnames; i++) {
            size_t a, b;
            const char *na = proto_mname(req, i, &a);
            CHECK(proto_name_valid(na, a) && na[a] == '\0');
            for (unsigned j = 0; j < i; j++) {
                const char *nb = proto_mname(req, j, &b);
                CHECK(a != b || memcmp(na, nb, a) != 0);
            }
        }
        CHECK(req->mlen[0] == req->name_len && memcmp(req->mnames, req->name, req->name_len) == 0);
    } else {
        CHECK(req->nnames == 0 && req->mnames == NULL);
    }
    CHECK(req->tag_len <= PROTO_TAG_MAX && req->tag[req->tag_len] == '\0');
    CHECK(strlen(req->tag) == req->tag_len);
    if (req->tag_len > 0) CHECK(model_tag((const uint8_t *)req->tag, req->tag_len));
    /* CANCEL's target: a tag, or nothing */
    if (takes(req->cmd, "#<tag>") && req->value_len > 0)
        CHECK(model_tag((const uint8_t *)req->value, req->value_len) &&
              req->value[req->value_len] == '\0' && strlen(req->value) == req->value_len);
    if (!takes(req->cmd, "<wait_ms>")) CHECK(req->wait_ms == 0);
    if (!takes(req->cmd, "<lease_ms>")) CHECK(req->lease_ms == 0);
    /* a number a command's usage names first (a semaphore's permits, a
     * latch's count) is its count */
    if (!takes(req->cmd, "<permits>") && !takes(req->cmd, "<count>")) CHECK(req->count == 0);
}

static void record(outcomes_t *out, proto_status_t st, const proto_request_t *req) {
    CHECK(out->n < out->cap);
    outcome_t *o = &out->o[out->n++];
    memset(o, 0, sizeof(*o));
    o->st = st;
    o->cmd = req->cmd;
    o->err = req->err;
    o->name_len = req->name_len <= PROTO_NAME_MAX ? req->name_len : PROTO_NAME_MAX;
    memcpy(o->name, req->name, o->name_len);
    o->wait_ms = req->wait_ms;
    o->lease_ms = req->lease_ms;
    o->count = req->count;
    o->tag_len = req->tag_len <= PROTO_TAG_MAX ? req->tag_len : PROTO_TAG_MAX;
    memcpy(o->tag, req->tag, o->tag_len);
    o->value_len = req->value_len <= PROTO_VALUE_MAX ? req->value_len : PROTO_VALUE_MAX;
    memcpy(o->value, req->value, o->value_len);
}

/* The tag rules on one line (not blank, without its LF) that came out as
 * st and *req: a first word beginning with '#' is a tag; a good one with a
 * request after it tags that request, which is what the rest of the line
 * alone gives (a second tag is no command word); a bad one, or one with
 * nothing after it, is an untagged ERR ARGS. A line whose first word has no
 * '#' is untagged. */
static void check_tag(const uint8_t *l, size_t len, proto_status_t st,
                      const proto_request_t *req) {
    size_t whole = len; /* the rest is parsed with the line's final CR, once */
    if (len > 0 && l[len - 1] == '\r') len--;
    size_t i = 0;
    while (i < len && is_blank(l[i])) i++;
    if (i == len || l[i] != '#') {
        CHECK(req->tag_len == 0);
        return;
    }
    size_t start = ++i;
    while (i < len && !is_blank(l[i])) i++;
    size_t rest = i;
    while (rest < len && is_blank(l[rest])) rest++;
    if (!model_tag(l + start, i - start) || rest == len) {
        CHECK(st == PROTO_ERROR && req->err == PROTO_ERR_ARGS && req->cmd == PROTO_CMD_NONE);
        CHECK(req->tag_len == 0 && req->tag[0] == '\0' && req->detail != NULL);
        return;
    }
    CHECK(req->tag_len == i - start && memcmp(req->tag, l + start, req->tag_len) == 0);
    if (l[rest] == '#') {  /* one tag only: no command word begins with '#' */
        CHECK(st == PROTO_ERROR && req->err == PROTO_ERR_UNKNOWN);
        return;
    }
    proto_request_t bare;
    proto_status_t bst = proto_parse_line((const char *)l + i, whole - i, &bare);
    CHECK(bst == st && bare.tag_len == 0);
    CHECK(bare.cmd == req->cmd && bare.err == req->err && bare.detail == req->detail);
    CHECK(bare.name_len == req->name_len && strcmp(bare.name, req->name) == 0);
    CHECK(bare.value_len == req->value_len && strcmp(bare.value, req->value) == 0);
    CHECK(bare.wait_ms == req->wait_ms && bare.lease_ms == req->lease_ms &&
          bare.count == req->count && bare.limit == req->limit &&
          bare.nnames == req->nnames);
    for (unsigned k = 0; k < bare.nnames; k++) {
        size_t a, b;
        const char *na = proto_mname(&bare, k, &a), *nb = proto_mname(req, k, &b);
        CHECK(a == b && memcmp(na, nb, a) == 0);
    }
    proto_request_free(&bare);
}

/* A request or a one-line error ended at stream offset end (just past its
 * LF). Every line since the last report must have been blank, this one not;
 * none may be longer than max_line; proto_parse_line on the bytes in place
 * must agree with what came out of the parser's buffer. */
static void check_line_report(run_t *r, size_t end, proto_status_t st,
                              const proto_request_t *req) {
    CHECK(end >= 1 && end <= r->n && r->s[end - 1] == '\n');
    size_t start = r->blank_to;
    for (;;) {
        const uint8_t *lf = find_lf(r->s, start, end);
        CHECK(lf != NULL);
        size_t len = (size_t)(lf - (r->s + start));
        CHECK(len <= r->max_line);
        if ((size_t)(lf - r->s) + 1 == end) break;
        CHECK(line_blank(r->s + start, len));
        start += len + 1;
    }
    size_t len = end - 1 - start;
    CHECK(!line_blank(r->s + start, len));

    proto_request_t ref;
    proto_status_t rst = proto_parse_line((const char *)r->s + start, len, &ref);
    CHECK(rst == st);
    CHECK(ref.cmd == req->cmd && ref.err == req->err);
    CHECK(ref.name_len == req->name_len && strcmp(ref.name, req->name) == 0);
    CHECK(ref.wait_ms == req->wait_ms && ref.lease_ms == req->lease_ms &&
          ref.count == req->count);
    CHECK(ref.detail == req->detail);
    CHECK(ref.tag_len == req->tag_len && strcmp(ref.tag, req->tag) == 0);
    CHECK(ref.value_len == req->value_len && strcmp(ref.value, req->value) == 0);
    CHECK(ref.nnames == req->nnames);
    for (unsigned i = 0; i < ref.nnames; i++) {
        size_t a, b;
        const char *na = proto_mname(&ref, i, &a), *nb = proto_mname(req, i, &b);
        CHECK(a == b && memcmp(na, nb, a) == 0 && proto_name_valid(na, a));
    }
    proto_request_free(&ref);
    check_tag(r->s + start, len, st, req);
    r->blank_to = end;
}

/* TOOLONG came after fed bytes of the stream were given to the parser: from
 * the last report on, blank lines may have been skipped, and then a line (or
 * the unterminated tail) must exceed max_line. */
static void check_toolong(const run_t *r, size_t fed) {
    size_t start = r->blank_to;
    for (;;) {
        const uint8_t *lf = find_lf(r->s, start, fed);
        size_t len = lf ? (size_t)(lf - (r->s + start)) : fed - start;
        if (len > r->max_line) return;
        CHECK(lf != NULL);                      /* the tail fits: no TOOLONG */
        CHECK(line_blank(r->s + start, len));   /* it should have been reported */
        start += len + 1;
    }
}

/* Everything up to fed was used and NEED_MORE came back: the lines since
 * the last report were blank and short, and the parser holds the tail. */
static void check_need_more(run_t *r, size_t fed) {
    size_t start = r->blank_to;
    for (;;) {
        const uint8_t *lf = find_lf(r->s, start, fed);
        size_t len = lf ? (size_t)(lf - (r->s + start)) : fed - start;
        CHECK(len <= r->max_line);
        if (lf == NULL) {
            CHECK(r->p.len == len);
            r->blank_to = start;  /* the checks stay linear in the stream */
            return;
        }
        CHECK(line_blank(r->s + start, len));
        start += len + 1;
    }
}

/* Feeds one chunk (the bytes from base to base + len) until all is used. */
static void feed_chunk(run_t *r, size_t base, size_t len) {
    size_t off = 0;
    do {
        proto_request_t req;
        size_t used = (size_t)-1;
        memset(&req, 0xa5, sizeof(req));
        proto_status_t st = proto_feed(&r->p, (const char *)r->s + base + off,
                                       len - off, &used, &req);
        CHECK(used <= len - off);
        CHECK(r->p.len <= r->max_line && r->p.cap <= r->max_line);
        CHECK(r->p.len <= r->p.cap);
        if (len - off > 0) CHECK(used > 0);  /* progress */
        off += used;
        if (r->lost) {  /* after TOOLONG everything is swallowed quietly */
            CHECK(st == PROTO_NEED_MORE && off == len);
            break;
        }
        switch (st) {
        case PROTO_NEED_MORE:
            CHECK(off == len);
            CHECK(!r->p.overflow);
            check_need_more(r, base + len);
            break;
        case PROTO_REQUEST:
            check_request(&req);
            check_line_report(r, base + off, st, &req);
            record(r->out, st, &req);
            proto_request_free(&req);
            break;
        case PROTO_ERROR:
            CHECK(req.err > PROTO_ERR_NONE && req.err < PROTO_ERR_COUNT);
            if (req.err == PROTO_ERR_TOOLONG) {
                CHECK(off == len && r->p.overflow);
                check_toolong(r, base + len);
                r->lost = 1;
            } else {
                CHECK(req.err == PROTO_ERR_UNKNOWN || req.err == PROTO_ERR_ARGS ||
                      req.err == PROTO_ERR_NAME);
                check_line_report(r, base + off, st, &req);
            }
            record(r->out, st, &req);
            break;
        default:
            CHECK(0);
        }
    } while (off < len);
}

/* proto_next_is(CANCEL) on the stream, against the model: blank lines
 * skipped, the first other line is the bare CANCEL (one word, any case:
 * not tagged, no argument), or not; -1 while no line is whole. */
static void check_next_is(const uint8_t *s, size_t n) {
    int want = -1;
    size_t start = 0;
    const uint8_t *lf;
    while ((lf = find_lf(s, start, n)) != NULL) {
        size_t len = (size_t)(lf - (s + start));
        if (!line_blank(s + start, len)) {
            const uint8_t *l = s + start;
            if (l[len - 1] == '\r') len--;
            size_t i = 0;
            while (i < len && is_blank(l[i])) i++;
            size_t w = i;
            while (i < len && !is_blank(l[i])) i++;
            size_t wl = i - w;
            while (i < len && is_blank(l[i])) i++;
            want = i == len && wl == 6 && strncasecmp((const char *)l + w, "CANCEL", 6) == 0;
            break;
        }
        start += len + 1;
    }
    CHECK(proto_next_is((const char *)s, n, PROTO_CMD_CANCEL) == want);
}

static uint32_t next_rand(uint32_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* Feeds the stream whole (seed 0) or in chunks drawn from seed. */
static void run_stream(const uint8_t *s, size_t n, size_t max_line,
                       uint32_t seed, outcomes_t *out) {
    run_t r = {.s = s, .n = n, .max_line = max_line, .out = out};
    CHECK(proto_parser_init(&r.p, max_line) == 0);
    if (seed == 0) {
        feed_chunk(&r, 0, n);
    } else {
        size_t pos = 0;
        while (pos < n) {
            uint32_t x = next_rand(&seed);
            size_t len;
            switch (x & 7) {
            case 0: len = 0; break;                         /* empty feed */
            case 1: case 2: len = 1; break;                 /* byte by byte */
            case 3: len = max_line + (x >> 8) % 3 - 1; break; /* around the limit */
            default: len = 1 + (x >> 8) % 97; break;
            }
            if (len > n - pos) len = n - pos;
            feed_chunk(&r, pos, len);
            pos += len;
        }
    }
    proto_parser_free(&r.p);
    CHECK(r.p.partial == NULL && r.p.len == 0 && r.p.cap == 0);
}

/* A formatter's result (see proto.h): want + LF when that fits in cap
 * (with its NUL), every control byte shown as '?'; else -1 below
 * PROTO_REPLY_MIN or when the first head bytes of want, which are never
 * cut, leave no room for "...\n"; else want cut to fill cap - 1 bytes,
 * ending in "...\n". out has exactly cap bytes. */
static void check_reply(int rc, const char *out, size_t cap, const char *want, size_t head) {
    size_t wl = strlen(want), keep;
    if (wl + 2 <= cap) {
        CHECK(rc >= 0 && (size_t)rc == wl + 1);
        keep = wl;
    } else if (cap < PROTO_REPLY_MIN || head + 5 > cap) {
        CHECK(rc == -1);
        return;
    } else {
        CHECK(rc >= 0 && (size_t)rc == cap - 1);
        keep = cap - 5;
        CHECK(memcmp(out + keep, "...", 3) == 0);
    }
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)want[i];
        CHECK(out[i] == (c < 0x20 || c == 0x7f ? '?' : want[i]));
    }
    CHECK(out[rc - 1] == '\n' && out[rc] == '\0');
}

static void fuzz_replies(const uint8_t *s, size_t n, size_t cap, uint32_t pick) {
    char text[FUZZ_REPLY_TEXT + 1];
    char want[2 * FUZZ_REPLY_TEXT + 64];
    size_t tl = n < FUZZ_REPLY_TEXT ? n : FUZZ_REPLY_TEXT;
    memcpy(text, s, tl);
    text[tl] = '\0';  /* stops at the first NUL of the input, if any */
    char *name = text, *reason = strchr(text, ' ');
    if (reason != NULL) *reason++ = '\0';
    else reason = text + strlen(text);

    char *out = malloc(cap);  /* exactly cap bytes, so ASan sees overruns */
    CHECK(out != NULL || cap == 0);

    snprintf(want, sizeof(want), "OK %s", name);
    check_reply(proto_reply_ok(out, cap, "%s", name), out, cap, want, 3);
    check_reply(proto_reply_ok(out, cap, NULL), out, cap, "OK", 2);
    check_reply(proto_reply_ok(out, cap, ""), out, cap, "OK", 2);
    snprintf(want, sizeof(want), "OK %s %s", name, reason);
    check_reply(proto_reply_ok(out, cap, "%s %s", name, reason), out, cap, want, 3);
    snprintf(want, sizeof(want), "OK %u %zu", pick, strlen(reason));
    check_reply(proto_reply_ok(out, cap, "%u %zu", pick, strlen(reason)), out, cap, want, 3);

    /* a tag: "#<tag> " whole when it is one and fits, else nothing */
    size_t tl2 = strlen(name) < PROTO_TAG_MAX + 2 ? strlen(name) : PROTO_TAG_MAX + 2;
    for (size_t k = 0; k <= tl2; k++) {
        int rc = proto_reply_tag(out, cap, name, k);
        if (model_tag((const uint8_t *)name, k) && cap >= k + 3) {
            CHECK(rc == (int)k + 2 && out[0] == '#' && memcmp(out + 1, name, k) == 0 &&
                  out[k + 1] == ' ' && out[k + 2] == '\0');
        } else {
            CHECK(rc == -1);
        }
    }

    long long ttl = (long long)(int32_t)pick;
    snprintf(want, sizeof(want), "TIMEOUT %lld", ttl < 0 ? -1 : ttl);
    check_reply(proto_reply_timeout(out, cap, ttl), out, cap, want, strlen(want));

    proto_err_t err = (proto_err_t)(pick % (PROTO_ERR_COUNT + 2));
    const char *detail = (pick & 0x100) ? NULL : reason;
    snprintf(want, sizeof(want), "ERR %s %s", proto_err_name(err),
             detail == NULL || detail[0] == '\0' ? proto_err_text(err) : detail);
    check_reply(proto_reply_error(out, cap, err, detail), out, cap, want,
                5 + strlen(proto_err_name(err)));

    snprintf(want, sizeof(want), "!LOST %s %s", name, reason);
    check_reply(proto_event_lost(out, cap, name, reason), out, cap, want, 7 + strlen(name));

    proto_request_t req;
    CHECK(proto_parse_line(text, strlen(text), &req) != PROTO_REQUEST ||
          req.err == PROTO_ERR_NONE);
    if (req.err == PROTO_ERR_NONE) proto_request_free(&req);
    CHECK(proto_cmd_name((proto_cmd_t)(pick % (PROTO_CMD_COUNT + 2))) != NULL);
    CHECK(proto_cmd_usage((proto_cmd_t)(pick % (PROTO_CMD_COUNT + 2))) != NULL);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    unsigned hdr = (unsigned)data[0] | (unsigned)data[1] << 8;
    size_t max_line = PROTO_LINE_MIN + hdr % (FUZZ_LINE_MAX - PROTO_LINE_MIN + 1);
    const uint8_t *s = data + 2;
    size_t n = size - 2;

    /* Every outcome but TOOLONG ends at an LF; TOOLONG happens once. */
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) cap += s[i] == '\n';
    outcomes_t whole = {.o = calloc(cap, sizeof(outcome_t)), .cap = cap};
    outcomes_t chunked = {.o = calloc(cap, sizeof(outcome_t)), .cap = cap};
    CHECK(whole.o != NULL && chunked.o != NULL);

    uint32_t seed = 2166136261u;  /* FNV-1a of the input picks the chunks */
    for (size_t i = 0; i < size; i++) seed = (seed ^ data[i]) * 16777619u;
    if (seed == 0) seed = 1;

    check_next_is(s, n);
    run_stream(s, n, max_line, 0, &whole);
    run_stream(s, n, max_line, seed, &chunked);
    CHECK(whole.n == chunked.n);
    CHECK(memcmp(whole.o, chunked.o, whole.n * sizeof(outcome_t)) == 0);
    free(whole.o);
    free(chunked.o);

    fuzz_replies(s, n, data[size - 1] + (data[0] & 1u) * 64u, seed);
    return 0;
}
