/* Parsing requests and formatting replies of the dlockd line protocol.
 * SPDX-License-Identifier: MIT */
#include "proto.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *word;
    int min_args;  /* words after the command word */
    int max_args;
    unsigned shape;  /* PROTO_ARG_* */
    proto_right_t right;
    const char *usage;
} commands[PROTO_CMD_COUNT] = {
    [PROTO_CMD_NONE] = {"", 0, 0, PROTO_SHAPE_NONE, PROTO_RIGHT_NONE, ""},
#define XX(id, word, min, max, shape, right, usage) \
    [PROTO_CMD_##id] = {word, min, max, PROTO_SHAPE_##shape, PROTO_RIGHT_##right, usage},
    PROTO_CMD_MAP(XX)
#undef XX
};

static const struct {
    const char *name;
    const char *text;
} errors[PROTO_ERR_COUNT] = {
    [PROTO_ERR_NONE] = {"NONE", "no error"},
#define XX(id, text) [PROTO_ERR_##id] = {#id, text},
    PROTO_ERR_MAP(XX)
#undef XX
};

/* The most words any request has: TRYMLOCK, its count, its names, two
 * numbers. */
#define PROTO_WORDS_MAX (PROTO_MNAMES_MAX + 4)

const char *proto_cmd_name(proto_cmd_t cmd) {
    return cmd > PROTO_CMD_NONE && cmd < PROTO_CMD_COUNT ? commands[cmd].word : "?";
}

proto_cmd_t proto_cmd_of(const char *word, size_t len) {
    for (int c = PROTO_CMD_NONE + 1; c < PROTO_CMD_COUNT; c++)
        if (strlen(commands[c].word) == len && strncasecmp(commands[c].word, word, len) == 0)
            return (proto_cmd_t)c;
    return PROTO_CMD_NONE;
}

const char *proto_cmd_usage(proto_cmd_t cmd) {
    return cmd > PROTO_CMD_NONE && cmd < PROTO_CMD_COUNT ? commands[cmd].usage : "";
}

proto_right_t proto_cmd_right(proto_cmd_t cmd) {
    return cmd > PROTO_CMD_NONE && cmd < PROTO_CMD_COUNT ? commands[cmd].right : PROTO_RIGHT_NONE;
}

const char *proto_err_name(proto_err_t err) {
    return err >= 0 && err < PROTO_ERR_COUNT ? errors[err].name : "UNKNOWN";
}

const char *proto_err_text(proto_err_t err) {
    return err >= 0 && err < PROTO_ERR_COUNT ? errors[err].text : "unknown error";
}

int proto_parse_num(const char *s, size_t len, uint32_t *out) {
    uint64_t v = 0;

    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > PROTO_NUM_MAX) return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int proto_name_valid(const char *name, size_t len) {
    if (len == 0 || len > PROTO_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x21 || c > 0x7e) return 0;
    }
    return 1;
}

static proto_status_t fail(proto_request_t *req, proto_err_t err,
                           const char *detail) {
    req->err = err;
    req->detail = detail;
    return PROTO_ERROR;
}

static int is_space(char c) {
    return c == ' ' || c == '\t';
}

void proto_request_free(proto_request_t *req) {
    free(req->mnames);
    req->mnames = NULL;
    req->nnames = 0;
}

/* A NAMES shape (MLOCK, TRYMLOCK, MUNLOCK): <n>, n names, then the
 * numbers the shape has (wait_ms, lease_ms), any of them left out. */
static proto_status_t parse_multi(proto_request_t *req, unsigned shape, const char *const *word,
                                  const size_t *wlen, int nwords) {
    static const char range[] = "n is 1 to 64, and n names follow it";
    uint32_t n, num[2] = {0, 0};
    int extra = !!(shape & PROTO_ARG_WAIT) + !!(shape & PROTO_ARG_LEASE);
    if (proto_parse_num(word[1], wlen[1], &n) != 0 || n < 1 || n > PROTO_MNAMES_MAX ||
        nwords < 2 + (int)n || nwords > 2 + (int)n + extra)
        return fail(req, PROTO_ERR_ARGS, range);
    size_t total = 0;
    for (int i = 2; i < 2 + (int)n; i++) {
        if (!proto_name_valid(word[i], wlen[i])) return fail(req, PROTO_ERR_NAME, NULL);
        total += wlen[i] + 1;
        for (int j = 2; j < i; j++)
            if (wlen[j] == wlen[i] && memcmp(word[j], word[i], wlen[i]) == 0)
                return fail(req, PROTO_ERR_ARGS, "a name twice");
    }
    for (int i = 2 + (int)n; i < nwords; i++)
        if (proto_parse_num(word[i], wlen[i], &num[i - 2 - (int)n]) != 0)
            return fail(req, PROTO_ERR_ARGS, "numbers are decimal digits, 0 to 2147483647");
    /* Names are at most 255 bytes and 64 of them: offsets fit 16 bits. */
    req->mnames = malloc(total);
    if (req->mnames == NULL) return fail(req, PROTO_ERR_TOOLONG, NULL);
    size_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(req->mnames + off, word[2 + i], wlen[2 + i]);
        req->mnames[off + wlen[2 + i]] = '\0';
        req->moff[i] = (uint16_t)off;
        req->mlen[i] = (uint8_t)wlen[2 + i];
        off += wlen[2 + i] + 1;
    }
    req->nnames = n;
    memcpy(req->name, word[2], wlen[2]);
    req->name[wlen[2]] = '\0';
    req->name_len = wlen[2];
    int k = 0;
    if (shape & PROTO_ARG_WAIT) req->wait_ms = num[k++];
    if (shape & PROTO_ARG_LEASE) req->lease_ms = num[k];
    return PROTO_REQUEST;
}

static const char tag_form[] = "a tag is # and 1 to 16 of 0-9 A-Z a-z _ -";

/* 1 if s is a tag without its '#': 1 to PROTO_TAG_MAX of 0-9 A-Z a-z _ -,
 * bytes that need no escaping anywhere a tag is echoed. */
static int tag_valid(const char *s, size_t len) {
    if (len == 0 || len > PROTO_TAG_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* The request after the tag, if any: the words of the line. */
static proto_status_t parse_request(const char *line, size_t len,
                                    proto_request_t *req) {
    const char *word[PROTO_WORDS_MAX];
    size_t wlen[PROTO_WORDS_MAX];
    int nwords = 0;
    size_t i = 0;

    /* Split into words; more than PROTO_WORDS_MAX is always too many. */
    int too_many = 0;
    while (i < len) {
        while (i < len && is_space(line[i])) i++;
        if (i == len) break;
        size_t start = i;
        while (i < len && !is_space(line[i])) i++;
        if (nwords == PROTO_WORDS_MAX) {
            too_many = 1;
            continue;
        }
        word[nwords] = line + start;
        wlen[nwords] = i - start;
        nwords++;
    }
    if (nwords == 0) return PROTO_NEED_MORE; /* an empty line: nothing to do */

    req->cmd = proto_cmd_of(word[0], wlen[0]);
    if (req->cmd == PROTO_CMD_NONE) return fail(req, PROTO_ERR_UNKNOWN, NULL);

    int nargs = nwords - 1;
    if (too_many || nargs < commands[req->cmd].min_args ||
        nargs > commands[req->cmd].max_args)
        return fail(req, PROTO_ERR_ARGS, commands[req->cmd].usage);

    /* The words as the command's shape says, never by command. */
    unsigned shape = commands[req->cmd].shape;
    if (shape & PROTO_ARG_PATTERN) {
        /* A glob of Redis's (* ? [..] \\), as long as a name at most. */
        memcpy(req->value, "*", 2);
        req->value_len = 1;
        req->limit = PROTO_LIST_DEFAULT;
        if (nargs >= 1) {
            if (!proto_name_valid(word[1], wlen[1]))
                return fail(req, PROTO_ERR_ARGS, "patterns are 1-255 bytes of 0x21-0x7E");
            memcpy(req->value, word[1], wlen[1]);
            req->value[wlen[1]] = '\0';
            req->value_len = wlen[1];
        }
        if (nargs == 2 && (proto_parse_num(word[2], wlen[2], &req->limit) != 0 ||
                           req->limit < 1 || req->limit > PROTO_LIST_MAX))
            return fail(req, PROTO_ERR_ARGS, "limit is 1 to 1000");
        return PROTO_REQUEST;
    }
    if (shape & PROTO_ARG_TARGET) {
        if (nargs == 0) return PROTO_REQUEST;
        /* the tagged request to withdraw: its tag as the request had it */
        if (wlen[1] < 2 || word[1][0] != '#' || !tag_valid(word[1] + 1, wlen[1] - 1))
            return fail(req, PROTO_ERR_ARGS, commands[req->cmd].usage);
        memcpy(req->value, word[1] + 1, wlen[1] - 1);
        req->value[wlen[1] - 1] = '\0';
        req->value_len = wlen[1] - 1;
        return PROTO_REQUEST;
    }
    if (shape == PROTO_SHAPE_NONE) return PROTO_REQUEST;
    if (shape & PROTO_ARG_NAMES) return parse_multi(req, shape, word, wlen, nwords);

    if (!proto_name_valid(word[1], wlen[1])) return fail(req, PROTO_ERR_NAME, NULL);
    memcpy(req->name, word[1], wlen[1]);
    req->name[wlen[1]] = '\0';
    req->name_len = wlen[1];

    /* A value (ELECT's) comes before the numbers: a word as a name is. */
    int first = 2;
    if (shape & PROTO_ARG_VALUE) {
        if (!proto_name_valid(word[2], wlen[2]))
            return fail(req, PROTO_ERR_ARGS, "values are 1-255 bytes of 0x21-0x7E");
        memcpy(req->value, word[2], wlen[2]);
        req->value[wlen[2]] = '\0';
        req->value_len = wlen[2];
        first = 3;
    }
    uint32_t num[PROTO_WORDS_MAX - 2] = {0};
    for (int n = first; n < nwords; n++) {
        if (proto_parse_num(word[n], wlen[n], &num[n - first]) != 0)
            return fail(req, PROTO_ERR_ARGS, "numbers are decimal digits, 0 to 2147483647");
    }
    /* A count first (a semaphore's permits), then a wait, then a lease. */
    int k = 0;
    if (shape & PROTO_ARG_COUNT) req->count = num[k++];
    if (shape & PROTO_ARG_WAIT) req->wait_ms = num[k++];
    if (shape & PROTO_ARG_LEASE) req->lease_ms = num[k];
    return PROTO_REQUEST;
}

proto_status_t proto_parse_line(const char *line, size_t len,
                                proto_request_t *req) {
    size_t i = 0;

    memset(req, 0, offsetof(proto_request_t, name));
    req->name[0] = '\0';
    req->name_len = 0;
    req->wait_ms = 0;
    req->lease_ms = 0;
    req->count = 0;
    req->value[0] = '\0';
    req->value_len = 0;
    req->detail = NULL;
    req->nnames = 0;
    req->mnames = NULL;
    req->limit = 0;
    req->tag[0] = '\0';
    req->tag_len = 0;

    if (len > 0 && line[len - 1] == '\r') len--;

    /* A first word beginning with '#' is the tag. A malformed one leaves
     * the request untagged: it cannot be answered with a tag it does not
     * have. The tag is set only once a request follows it. */
    while (i < len && is_space(line[i])) i++;
    if (i < len && line[i] == '#') {
        size_t start = ++i;
        while (i < len && !is_space(line[i])) i++;
        if (!tag_valid(line + start, i - start)) return fail(req, PROTO_ERR_ARGS, tag_form);
        size_t rest = i;
        while (rest < len && is_space(line[rest])) rest++;
        if (rest == len) return fail(req, PROTO_ERR_ARGS, "a tag is followed by a request");
        memcpy(req->tag, line + start, i - start);
        req->tag[i - start] = '\0';
        req->tag_len = (uint8_t)(i - start);
    }
    return parse_request(line + i, len - i, req);
}

/* 1 if a line holds one word (its final CR aside): a command alone. */
static int one_word(const char *line, size_t len) {
    size_t i = 0;
    if (len > 0 && line[len - 1] == '\r') len--;
    while (i < len && is_space(line[i])) i++;
    while (i < len && !is_space(line[i])) i++;
    while (i < len && is_space(line[i])) i++;
    return i == len;
}

int proto_next_is(const char *data, size_t len, proto_cmd_t cmd) {
    proto_request_t req;
    const char *lf;
    while (len > 0 && (lf = memchr(data, '\n', len)) != NULL) {
        size_t n = (size_t)(lf - data);
        proto_status_t st = proto_parse_line(data, n, &req);
        if (st == PROTO_REQUEST) proto_request_free(&req);
        if (st != PROTO_NEED_MORE)
            return st == PROTO_REQUEST && req.cmd == cmd && req.tag_len == 0 &&
                   one_word(data, n);
        len -= n + 1; /* a blank line: the next one */
        data = lf + 1;
    }
    return -1;
}

int proto_parser_init(proto_parser_t *p, size_t max_line) {
    memset(p, 0, sizeof(*p));
    if (max_line < PROTO_LINE_MIN || max_line > PROTO_LINE_LIMIT) return -1;
    p->max_line = max_line;
    return 0;
}

void proto_parser_free(proto_parser_t *p) {
    free(p->partial);
    p->partial = NULL;
    p->len = p->cap = 0;
}

/* Keeps bytes of an unfinished line, growing the buffer geometrically. */
static int keep(proto_parser_t *p, const char *data, size_t n) {
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 64;
        while (cap < p->len + n) cap *= 2;
        if (cap > p->max_line) cap = p->max_line;
        char *np = realloc(p->partial, cap);
        if (np == NULL) return -1;
        p->partial = np;
        p->cap = cap;
    }
    memcpy(p->partial + p->len, data, n);
    p->len += n;
    return 0;
}

proto_status_t proto_feed(proto_parser_t *p, const char *data, size_t len,
                          size_t *used, proto_request_t *req) {
    *used = 0;
    if (p->overflow) {
        /* The stream was lost; swallow everything so callers make progress. */
        *used = len;
        return PROTO_NEED_MORE;
    }
    while (*used < len) {
        const char *start = data + *used;
        size_t avail = len - *used;
        /* Look no further than the line may still grow. */
        size_t room = p->max_line - p->len;
        size_t scan = avail < room + 1 ? avail : room + 1;
        const char *lf = memchr(start, '\n', scan);

        if (lf == NULL) {
            if (avail > room || keep(p, start, avail) != 0) {
                p->overflow = 1;
                *used = len;
                memset(req, 0, sizeof(*req));
                return fail(req, PROTO_ERR_TOOLONG, NULL);
            }
            *used = len;
            return PROTO_NEED_MORE;
        }

        size_t n = (size_t)(lf - start);
        proto_status_t st;
        *used += n + 1;
        if (p->len == 0) {
            st = proto_parse_line(start, n, req);
        } else {
            if (keep(p, start, n) != 0) {
                p->overflow = 1;
                *used = len;
                memset(req, 0, sizeof(*req));
                return fail(req, PROTO_ERR_TOOLONG, NULL);
            }
            st = proto_parse_line(p->partial, p->len, req);
            p->len = 0;
            if (p->cap > PROTO_LINE_MIN * 4) { /* give big buffers back */
                free(p->partial);
                p->partial = NULL;
                p->cap = 0;
            }
        }
        if (st != PROTO_NEED_MORE) return st;
        /* An empty line: go on with the next one. */
    }
    return PROTO_NEED_MORE;
}

/* ---- replies -------------------------------------------------------------
 * A reply is a head that is never cut ("OK", "ERR <CODE> ", "!LOST <name> ")
 * and a free text that may be: see proto.h. */

#define CUT_MARK "..."
#define CUT_MARK_LEN (sizeof(CUT_MARK) - 1)

/* What PROTO_REPLY_MIN promises: the longest heads, cut to nothing. */
#define XX(id, text)                                                          \
    _Static_assert(sizeof("ERR " #id " " CUT_MARK "\n") <= PROTO_REPLY_MIN, \
                   "ERR " #id " does not fit PROTO_REPLY_MIN");
PROTO_ERR_MAP(XX)
#undef XX
_Static_assert(sizeof("ERR UNKNOWN " CUT_MARK "\n") <= PROTO_REPLY_MIN, "unknown code");
_Static_assert(sizeof("TIMEOUT 9223372036854775807\n") <= PROTO_REPLY_MIN, "TIMEOUT");
_Static_assert(sizeof("OK " CUT_MARK "\n") <= PROTO_REPLY_MIN, "OK");
_Static_assert(PROTO_REPLY_MIN + PROTO_NAME_MAX <= PROTO_REPLY_MAX, "!LOST of any name");

/* A byte that cannot break the line: control bytes (LF, CR, tab, ...) become '?'. */
static char safe(char c) {
    unsigned char u = (unsigned char)c;
    return u < 0x20 || u == 0x7f ? '?' : c;
}

/* Copies n bytes of s to out, each made safe; returns the end. */
static char *put(char *out, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = safe(s[i]);
    return out + n;
}

/* How many of text_len bytes of free text go into a line of cap bytes
 * (LF and NUL included) after head_len bytes: all of them when they fit;
 * else, when cap >= PROTO_REPLY_MIN, as many as leave room for the cut
 * mark. -1 when the line cannot be written. */
static int fit(size_t cap, size_t head_len, size_t text_len) {
    if (cap > INT_MAX) cap = INT_MAX;  /* lengths are returned as int */
    if (head_len + 2 <= cap && text_len <= cap - head_len - 2) return (int)text_len;
    if (cap < PROTO_REPLY_MIN || head_len + CUT_MARK_LEN + 2 > cap) return -1;
    return (int)(cap - head_len - CUT_MARK_LEN - 2);
}

/* Ends the line at p (the cut mark if the text was cut), adds LF and NUL,
 * and returns its length without the NUL. */
static int end_line(char *out, char *p, int cut) {
    if (cut) {
        memcpy(p, CUT_MARK, CUT_MARK_LEN);
        p += CUT_MARK_LEN;
    }
    *p++ = '\n';
    *p = '\0';
    return (int)(p - out);
}

int proto_reply_ok(char *out, size_t cap, const char *fmt, ...) {
    if (fmt == NULL || fmt[0] == '\0') {
        if (fit(cap, 2, 0) < 0) return -1;
        return end_line(out, put(out, "OK", 2), 0);
    }
    if (cap < 4) return -1;  /* no room for "OK " and a NUL */
    /* Format in place after "OK ", then cut what did not fit. */
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(out + 3, cap - 3, fmt, ap);
    va_end(ap);
    if (m < 0) return -1;
    int keep = fit(cap, 3, (size_t)m);
    if (keep < 0) return -1;
    memcpy(out, "OK ", 3);
    for (int i = 0; i < keep; i++) out[3 + i] = safe(out[3 + i]);
    return end_line(out, out + 3 + keep, keep < m);
}

/* Writes v in decimal at p; returns the end. */
static char *put_ull(char *p, unsigned long long v) {
    char d[20];
    int n = 0;
    do d[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
    while (n > 0) *p++ = d[--n];
    return p;
}

static char *put_ll(char *p, long long v) {
    if (v >= 0) return put_ull(p, (unsigned long long)v);
    *p++ = '-';
    return put_ull(p, 0ULL - (unsigned long long)v);
}

int proto_reply_ok_num(char *out, size_t cap, long long v) {
    if (cap < sizeof("OK -9223372036854775808\n")) return -1;
    return end_line(out, put_ll(put(out, "OK ", 3), v), 0);
}

int proto_reply_ok_num2(char *out, size_t cap, unsigned long long a, long long b) {
    if (cap < sizeof("OK 18446744073709551615 -9223372036854775808\n")) return -1;
    char *p = put_ull(put(out, "OK ", 3), a);
    *p++ = ' ';
    return end_line(out, put_ll(p, b), 0);
}

int proto_reply_ok_list(char *out, size_t cap, const uint64_t *v, size_t n) {
    /* the longest the line can be: 21 bytes a number, LF and NUL */
    if (n > PROTO_MNAMES_MAX || cap < 2 + n * 21 + 2) return -1;
    char *p = put(out, "OK", 2);
    for (size_t i = 0; i < n; i++) {
        *p++ = ' ';
        p = put_ull(p, v[i]);
    }
    return end_line(out, p, 0);
}

int proto_reply_timeout(char *out, size_t cap, long long ttl_ms) {
    char head[PROTO_REPLY_MIN];
    if (ttl_ms < 0) ttl_ms = -1;
    int n = snprintf(head, sizeof(head), "TIMEOUT %lld", ttl_ms);
    if (n < 0 || (size_t)n >= sizeof(head) || fit(cap, (size_t)n, 0) < 0) return -1;
    return end_line(out, put(out, head, (size_t)n), 0);
}

int proto_reply_tag(char *out, size_t cap, const char *tag, size_t tag_len) {
    /* only a tag: its bytes are safe and it is never cut */
    if (tag == NULL || !tag_valid(tag, tag_len) || cap < tag_len + 3) return -1;
    char *p = put(out, "#", 1);
    p = put(p, tag, tag_len);
    *p++ = ' ';
    *p = '\0';
    return (int)(p - out);
}

int proto_reply_error(char *out, size_t cap, proto_err_t err,
                      const char *detail) {
    char head[PROTO_REPLY_MIN];
    if (detail == NULL || detail[0] == '\0') detail = proto_err_text(err);
    int n = snprintf(head, sizeof(head), "ERR %s ", proto_err_name(err));
    if (n < 0 || (size_t)n >= sizeof(head)) return -1;
    size_t len = strlen(detail);
    int keep = fit(cap, (size_t)n, len);
    if (keep < 0) return -1;
    char *p = put(out, head, (size_t)n);
    return end_line(out, put(p, detail, (size_t)keep), (size_t)keep < len);
}

int proto_event_lost(char *out, size_t cap, const char *name,
                     const char *reason) {
    size_t name_len = strlen(name), len = strlen(reason);
    if (name_len > INT_MAX - 8) return -1;
    int keep = fit(cap, 6 + name_len + 1, len);  /* "!LOST <name> " */
    if (keep < 0) return -1;
    char *p = put(out, "!LOST ", 6);
    p = put(p, name, name_len);
    *p++ = ' ';
    return end_line(out, put(p, reason, (size_t)keep), (size_t)keep < len);
}

int proto_reply_leader(char *out, size_t cap, uint64_t fence, const char *value,
                       size_t value_len) {
    if (fence == 0) {
        if (cap < sizeof("OK NONE\n")) return -1;
        return end_line(out, put(out, "OK NONE", 7), 0);
    }
    if (value_len > PROTO_VALUE_MAX || cap < sizeof("OK 18446744073709551615 \n") + value_len)
        return -1;
    char *p = put_ull(put(out, "OK ", 3), fence);
    *p++ = ' ';
    return end_line(out, put(p, value, value_len), 0);
}

int proto_event_leader(char *out, size_t cap, const char *name, size_t name_len,
                       uint64_t fence, const char *value, size_t value_len) {
    if (name_len > PROTO_NAME_MAX || value_len > PROTO_VALUE_MAX) return -1;
    size_t need = sizeof("!LEADER  18446744073709551615 \n") + name_len + value_len;
    if (cap < need) return -1;
    char *p = put(out, "!LEADER ", 8);
    p = put(p, name, name_len);
    *p++ = ' ';
    if (fence == 0) return end_line(out, put(p, "NONE", 4), 0);
    p = put_ull(p, fence);
    *p++ = ' ';
    return end_line(out, put(p, value, value_len), 0);
}
