/* The hand-over state's text: writing and reading its records.
 * SPDX-License-Identifier: MIT */
#include "statefmt.h"

#include <stdio.h>
#include <string.h>

void statew_init(statew_t *w, buf_t *b) {
    w->b = b;
    w->failed = 0;
    w->fields = -1;
}

static void put(statew_t *w, const void *p, size_t len) {
    if (len > 0 && !w->failed && buf_append(w->b, p, len) != 0) w->failed = 1;
}

/* The space before a field. */
static void sep(statew_t *w) {
    if (w->fields++ > 0) put(w, " ", 1);
}

void statew_rec(statew_t *w, const char *word) {
    if (w->fields >= 0) put(w, "\n", 1);
    w->fields = 0;
    statew_word(w, word);
}

void statew_word(statew_t *w, const char *word) {
    sep(w);
    put(w, word, strlen(word));
}

/* v's decimal digits, ending at end: where they start. A state has a
 * million numbers: snprintf's share of the hand-over's pause was most of
 * its writing. */
static char *digits_of(uint64_t v, char *end) {
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return end;
}

void statew_u64(statew_t *w, uint64_t v) {
    char t[24], *start = digits_of(v, t + sizeof(t));
    sep(w);
    put(w, start, (size_t)(t + sizeof(t) - start));
}

void statew_i64(statew_t *w, int64_t v) {
    char t[24], *start = digits_of(v < 0 ? 0 - (uint64_t)v : (uint64_t)v, t + sizeof(t));
    if (v < 0) *--start = '-';
    sep(w);
    put(w, start, (size_t)(t + sizeof(t) - start));
}

void statew_bytes(statew_t *w, const void *p, size_t len) {
    char t[24], *start;
    t[sizeof(t) - 1] = ':';
    start = digits_of(len, t + sizeof(t) - 1);
    sep(w);
    put(w, start, (size_t)(t + sizeof(t) - start));
    put(w, p, len);
}

void statew_str(statew_t *w, const char *s) {
    statew_bytes(w, s, strlen(s));
}

int statew_finish(statew_t *w) {
    if (w->fields >= 0) put(w, "\n", 1);
    w->fields = -1;
    return w->failed ? -1 : 0;
}

/* ---- reading ----------------------------------------------------------------------- */

void stater_init(stater_t *r, const char *p, size_t len) {
    r->p = p;
    r->end = p + len;
    r->in_rec = 0;
    r->err = 0;
    r->why[0] = '\0';
}

void stater_fail(stater_t *r, const char *why) {
    if (r->err) return;
    r->err = 1;
    snprintf(r->why, sizeof(r->why), "%s", why);
}

static int is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* The next field's first byte, past its space; NULL (failed) if the
 * record has none. */
static const char *field(stater_t *r) {
    if (r->err) return NULL;
    if (!r->in_rec) {
        stater_fail(r, "a field outside a record");
        return NULL;
    }
    if (r->p >= r->end || *r->p != ' ') {
        stater_fail(r, "a field is missing");
        return NULL;
    }
    return ++r->p;
}

/* Reads a word at r->p into word (no space before it). */
static void word_here(stater_t *r, char word[STATE_WORD_MAX]) {
    size_t n = 0;
    while (r->p < r->end && is_word_char(*r->p)) {
        if (n + 1 >= STATE_WORD_MAX) {
            stater_fail(r, "a word is too long");
            word[0] = '\0';
            return;
        }
        word[n++] = *r->p++;
    }
    word[n] = '\0';
    if (n == 0) stater_fail(r, "a word is missing");
}

/* Skips to past the end of the current record: its fields, then its
 * newline. Byte strings are skipped whole: they may hold newlines. */
static void skip_record(stater_t *r) {
    while (!r->err && r->p < r->end && *r->p == ' ') {
        r->p++;
        const char *q = r->p;
        unsigned long long len = 0;
        while (q < r->end && *q >= '0' && *q <= '9') len = len * 10 + (unsigned)(*q++ - '0');
        if (q < r->end && *q == ':' && q > r->p) {
            if ((unsigned long long)(r->end - q - 1) < len) {
                stater_fail(r, "a byte string runs past the end");
                return;
            }
            r->p = q + 1 + len;
        } else {
            while (r->p < r->end && *r->p != ' ' && *r->p != '\n') r->p++;
        }
    }
    if (r->err) return;
    if (r->p < r->end && *r->p == '\n') r->p++;
    else if (r->p < r->end) stater_fail(r, "a record does not end with a newline");
    else stater_fail(r, "the text ends inside a record");
}

int stater_rec(stater_t *r, char word[STATE_WORD_MAX]) {
    word[0] = '\0';
    if (r->in_rec) skip_record(r);
    r->in_rec = 0;
    if (r->err || r->p >= r->end) return 0;
    word_here(r, word);
    if (r->err) return 0;
    r->in_rec = 1;
    return 1;
}

int stater_more(const stater_t *r) {
    return !r->err && r->in_rec && r->p < r->end && *r->p == ' ';
}

void stater_word(stater_t *r, char word[STATE_WORD_MAX]) {
    word[0] = '\0';
    if (field(r) != NULL) word_here(r, word);
}

static uint64_t digits(stater_t *r) {
    uint64_t v = 0;
    const char *start = r->p;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p++ - '0');
        if (v > (UINT64_MAX - d) / 10) {
            stater_fail(r, "a number is too large");
            return 0;
        }
        v = v * 10 + d;
    }
    if (r->p == start) stater_fail(r, "a number is missing");
    return v;
}

uint64_t stater_u64(stater_t *r) {
    if (field(r) == NULL) return 0;
    return digits(r);
}

int64_t stater_i64(stater_t *r) {
    if (field(r) == NULL) return 0;
    int neg = r->p < r->end && *r->p == '-';
    if (neg) r->p++;
    uint64_t v = digits(r);
    if (v > (uint64_t)INT64_MAX) {
        stater_fail(r, "a number is too large");
        return 0;
    }
    return neg ? -(int64_t)v : (int64_t)v;
}

void stater_bytes(stater_t *r, const char **p, size_t *len) {
    *p = "";
    *len = 0;
    if (field(r) == NULL) return;
    uint64_t n = digits(r);
    if (r->err) return;
    if (r->p >= r->end || *r->p != ':') {
        stater_fail(r, "a byte string has no ':'");
        return;
    }
    r->p++;
    if ((uint64_t)(r->end - r->p) < n) {
        stater_fail(r, "a byte string runs past the end");
        return;
    }
    *p = r->p;
    *len = (size_t)n;
    r->p += n;
}

void stater_str(stater_t *r, char *out, size_t cap) {
    const char *p;
    size_t len;
    out[0] = '\0';
    stater_bytes(r, &p, &len);
    if (r->err) return;
    if (len >= cap || memchr(p, '\0', len) != NULL) {
        stater_fail(r, "a string is too long or holds a NUL");
        return;
    }
    memcpy(out, p, len);
    out[len] = '\0';
}
