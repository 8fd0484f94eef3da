/* Parsing requests and formatting replies of the dlockd line protocol.
 * SPDX-License-Identifier: MIT */
#include "proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *word;
    int min_args;  /* words after the command word */
    int max_args;
    const char *usage;
} commands[PROTO_CMD_COUNT] = {
    [PROTO_CMD_NONE] = {"", 0, 0, ""},
#define XX(id, word, min, max, usage) [PROTO_CMD_##id] = {word, min, max, usage},
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

/* The most words any request has: command, name, two numbers. */
#define PROTO_WORDS_MAX 4

const char *proto_cmd_name(proto_cmd_t cmd) {
    return cmd > PROTO_CMD_NONE && cmd < PROTO_CMD_COUNT ? commands[cmd].word : "?";
}

const char *proto_cmd_usage(proto_cmd_t cmd) {
    return cmd > PROTO_CMD_NONE && cmd < PROTO_CMD_COUNT ? commands[cmd].usage : "";
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

proto_status_t proto_parse_line(const char *line, size_t len,
                                proto_request_t *req) {
    const char *word[PROTO_WORDS_MAX];
    size_t wlen[PROTO_WORDS_MAX];
    int nwords = 0;
    size_t i = 0;

    memset(req, 0, offsetof(proto_request_t, name));
    req->name[0] = '\0';
    req->name_len = 0;
    req->wait_ms = 0;
    req->lease_ms = 0;
    req->detail = NULL;

    if (len > 0 && line[len - 1] == '\r') len--;

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

    for (int c = PROTO_CMD_NONE + 1; c < PROTO_CMD_COUNT; c++) {
        if (strlen(commands[c].word) == wlen[0] &&
            strncasecmp(commands[c].word, word[0], wlen[0]) == 0) {
            req->cmd = (proto_cmd_t)c;
            break;
        }
    }
    if (req->cmd == PROTO_CMD_NONE) return fail(req, PROTO_ERR_UNKNOWN, NULL);

    int nargs = nwords - 1;
    if (too_many || nargs < commands[req->cmd].min_args ||
        nargs > commands[req->cmd].max_args)
        return fail(req, PROTO_ERR_ARGS, commands[req->cmd].usage);

    if (commands[req->cmd].min_args == 0) return PROTO_REQUEST;

    if (!proto_name_valid(word[1], wlen[1])) return fail(req, PROTO_ERR_NAME, NULL);
    memcpy(req->name, word[1], wlen[1]);
    req->name[wlen[1]] = '\0';
    req->name_len = wlen[1];

    uint32_t num[2] = {0, 0};
    for (int n = 2; n < nwords; n++) {
        if (proto_parse_num(word[n], wlen[n], &num[n - 2]) != 0)
            return fail(req, PROTO_ERR_ARGS, "numbers are decimal digits, 0 to 2147483647");
    }
    if (req->cmd == PROTO_CMD_TRYLOCK) {
        req->wait_ms = num[0];
        req->lease_ms = num[1];
    } else {
        req->lease_ms = num[0];
    }
    return PROTO_REQUEST;
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

static int finish(char *out, size_t cap, int n) {
    if (n < 0 || (size_t)n + 2 > cap) return -1;
    out[n++] = '\n';
    out[n] = '\0';
    return n;
}

int proto_reply_ok(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    if (cap < 4) return -1;
    memcpy(out, "OK", 2);
    int n = 2;
    if (fmt != NULL && fmt[0] != '\0') {
        out[n++] = ' ';
        va_start(ap, fmt);
        int m = vsnprintf(out + n, cap - (size_t)n, fmt, ap);
        va_end(ap);
        if (m < 0 || (size_t)m >= cap - (size_t)n) return -1;
        n += m;
    }
    return finish(out, cap, n);
}

int proto_reply_timeout(char *out, size_t cap, long long ttl_ms) {
    if (ttl_ms < 0) ttl_ms = -1;
    return finish(out, cap, snprintf(out, cap, "TIMEOUT %lld", ttl_ms));
}

int proto_reply_error(char *out, size_t cap, proto_err_t err,
                      const char *detail) {
    if (detail == NULL || detail[0] == '\0') detail = proto_err_text(err);
    return finish(out, cap, snprintf(out, cap, "ERR %s %s", proto_err_name(err), detail));
}

int proto_event_lost(char *out, size_t cap, const char *name,
                     const char *reason) {
    return finish(out, cap, snprintf(out, cap, "!LOST %s %s", name, reason));
}
