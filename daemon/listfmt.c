/* LIST's text: the protocol's counted lines and the HTTP /locks JSON.
 * SPDX-License-Identifier: MIT */
#include "daemon/listfmt.h"

#include <stdio.h>
#include <string.h>

/* A number, or "-" when unknown (negative). */
static size_t num_or_dash(char *out, long long v) {
    if (v < 0) {
        out[0] = '-';
        return 1;
    }
    return (size_t)sprintf(out, "%lld", v);
}

/* "<total>" then ",host/dlockd_pid/pid/uid/count/age_ms" per one shown. */
static size_t who_word(char *out, size_t total, const list_who_t *w, size_t n) {
    size_t k = (size_t)sprintf(out, "%zu", total);
    for (size_t i = 0; i < n; i++) {
        out[k++] = ',';
        if (w[i].host[0]) {
            size_t hl = strlen(w[i].host);
            memcpy(out + k, w[i].host, hl);
            k += hl;
        } else {
            out[k++] = '-';
        }
        out[k++] = '/';
        k += num_or_dash(out + k, w[i].dpid);
        out[k++] = '/';
        k += num_or_dash(out + k, w[i].pid);
        out[k++] = '/';
        k += num_or_dash(out + k, w[i].uid);
        out[k++] = '/';
        k += num_or_dash(out + k, w[i].count);
        out[k++] = '/';
        k += num_or_dash(out + k, w[i].age_ms);
    }
    return k;
}

size_t listfmt_entry(char *out, const list_entry_t *e) {
    size_t k = 0;
    out[k++] = '=';
    out[k++] = ' ';
    memcpy(out + k, e->name, e->len);
    k += e->len;
    k += (size_t)sprintf(out + k, " %s %lld ", list_word(e->kind), e->ttl_ms);
    if (e->fence > 0)
        k += (size_t)sprintf(out + k, "%llu", (unsigned long long)e->fence);
    else
        out[k++] = '-';
    out[k++] = ' ';
    k += who_word(out + k, e->holders_total, e->holders, e->nholders);
    out[k++] = ' ';
    k += who_word(out + k, e->waiters_total, e->waiters, e->nwaiters);
    out[k++] = ' ';
    size_t vl = strlen(e->value);
    if (vl == 0) {
        out[k++] = '-';
    } else {
        memcpy(out + k, e->value, vl);
        k += vl;
    }
    out[k++] = '\n';
    return k;
}

int listfmt_reply(buf_t *out, const list_entry_t *e, size_t n, int more, size_t cap) {
    static char line[LISTFMT_LINE_MAX];
    size_t shown = 0, bytes = 64;
    for (; shown < n; shown++) {
        bytes += listfmt_entry(line, &e[shown]);
        if (bytes > cap) break;
    }
    if (shown < n) more = 1;
    char head[64];
    int h = snprintf(head, sizeof(head), "OK LIST %zu %d\n", shown, more ? 1 : 0);
    if (buf_append(out, head, (size_t)h) != 0) return -1;
    for (size_t i = 0; i < shown; i++)
        if (buf_append(out, line, listfmt_entry(line, &e[i])) != 0) return -1;
    return 0;
}

int listfmt_json_str(buf_t *out, const char *s, size_t len) {
    if (buf_append(out, "\"", 1) != 0) return -1;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        char esc[8];
        size_t el = 1;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = c;
            el = 2;
        } else if ((unsigned char)c < 0x20 || (unsigned char)c > 0x7e) {
            el = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)c);
        } else if (c == '<' || c == '>' || c == '&') {
            /* safe inside an HTML page too */
            el = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", (unsigned char)c);
        } else {
            esc[0] = c;
        }
        if (buf_append(out, esc, el) != 0) return -1;
    }
    return buf_append(out, "\"", 1);
}

static int put(buf_t *out, const char *s) {
    return buf_append(out, s, strlen(s));
}

static int put_num(buf_t *out, const char *key, long long v) {
    char b[64];
    int n = v < 0 ? snprintf(b, sizeof(b), "\"%s\":null", key)
                  : snprintf(b, sizeof(b), "\"%s\":%lld", key, v);
    return buf_append(out, b, (size_t)n);
}

static int json_who(buf_t *out, const list_who_t *w, size_t n) {
    if (put(out, "[") != 0) return -1;
    for (size_t i = 0; i < n; i++) {
        if ((i && put(out, ",") != 0) || put(out, "{\"host\":") != 0) return -1;
        if (w[i].host[0] ? listfmt_json_str(out, w[i].host, strlen(w[i].host)) : put(out, "null"))
            return -1;
        if (put(out, ",") || put_num(out, "dlockd_pid", w[i].dpid) || put(out, ",") ||
            put_num(out, "pid", w[i].pid) || put(out, ",") || put_num(out, "uid", w[i].uid) ||
            put(out, ",") || put_num(out, "count", w[i].count) || put(out, ",") ||
            put_num(out, "age_ms", w[i].age_ms) || put(out, "}"))
            return -1;
    }
    return put(out, "]");
}

int listfmt_json(buf_t *out, const list_entry_t *e, size_t n, int more, size_t limit,
                 const char *pattern) {
    char b[96];
    if (put(out, "{\"pattern\":") || listfmt_json_str(out, pattern, strlen(pattern))) return -1;
    snprintf(b, sizeof(b), ",\"limit\":%zu,\"count\":%zu,\"more\":%s,\"locks\":[", limit, n,
             more ? "true" : "false");
    if (put(out, b)) return -1;
    for (size_t i = 0; i < n; i++) {
        const list_entry_t *x = &e[i];
        if ((i && put(out, ",")) || put(out, "{\"name\":") ||
            listfmt_json_str(out, x->name, x->len))
            return -1;
        snprintf(b, sizeof(b), ",\"kind\":\"%s\",", list_word(x->kind));
        if (put(out, b) || put_num(out, "ttl_ms", x->ttl_ms) || put(out, ",") ||
            put_num(out, "fence", x->fence > 0 ? (long long)x->fence : -1) || put(out, ",") ||
            put_num(out, "holders_total", (long long)x->holders_total) ||
            put(out, ",\"holders\":") || json_who(out, x->holders, x->nholders) ||
            put(out, ",") || put_num(out, "waiters_total", (long long)x->waiters_total) ||
            put(out, ",\"waiters\":") || json_who(out, x->waiters, x->nwaiters) ||
            put(out, ",\"value\":"))
            return -1;
        if (x->value[0] ? listfmt_json_str(out, x->value, strlen(x->value)) : put(out, "null"))
            return -1;
        if (put(out, "}")) return -1;
    }
    return put(out, "]");
}
