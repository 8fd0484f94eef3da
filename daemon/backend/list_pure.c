/* LIST's pure parts: the MATCH pattern, which keys are locks, registry entries, owner fields, merging nodes.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/keys.h"
#include "daemon/backend/list.h"
#include "daemon/backend/scripts.h"

size_t list_match(char *out, size_t cap, const char *prefix, const char *pattern, size_t plen) {
    size_t k = 0;
    for (const char *p = prefix; *p; p++) {
        int special = *p == '*' || *p == '?' || *p == '[' || *p == ']' || *p == '\\';
        if (k + 2 >= cap) return 0;
        if (special) out[k++] = '\\';
        out[k++] = *p;
    }
    if (k + plen + 1 > cap) return 0;
    memcpy(out + k, pattern, plen);
    k += plen;
    out[k] = '\0';
    return k;
}

static int valid_name(const char *s, size_t len) {
    if (len == 0 || len > KEYS_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}

int list_key_name(const char *key, size_t klen, const char *prefix, const char **name,
                  size_t *len) {
    size_t pl = strlen(prefix);
    if (klen < pl || memcmp(key, prefix, pl) != 0) return 0;
    const char *s = key + pl;
    size_t n = klen - pl;
    if (!valid_name(s, n)) return 0;
    /* With an empty prefix, companions match too: "{K}:..." (a semaphore's
     * ids, a read hold's timeout) and "<kind>:..." are not locks. */
    if (s[0] == '{' && memchr(s, '}', n) != NULL) {
        const char *c = memchr(s, '}', n);
        if ((size_t)(c - s) + 1 < n && c[1] == ':') return 0;
    }
    if (scripts_companion(s, n)) return 0; /* the kinds' rows name them */
    *name = s;
    *len = n;
    return 1;
}

void list_registry_entry(const char *entry, size_t len, char *host, size_t cap,
                         long long *pid) {
    host[0] = '\0';
    *pid = -1;
    const char *d = memchr(entry, ' ', len);
    if (d == NULL) return;
    d++;
    size_t rest = len - (size_t)(d - entry);
    if (rest < 8 || memcmp(d, "dlockd:", 7) != 0) return;
    d += 7;
    rest -= 7;
    const char *c = NULL;
    for (size_t i = rest; i > 0; i--)
        if (d[i - 1] == ':') {
            c = d + i - 1;
            break;
        }
    if (c == NULL || c == d) return;
    long long v = 0;
    size_t digits = rest - (size_t)(c + 1 - d);
    if (digits == 0 || digits > 10) return;
    for (const char *p = c + 1; p < d + rest; p++) {
        if (*p < '0' || *p > '9') return;
        v = v * 10 + (*p - '0');
    }
    size_t hl = (size_t)(c - d);
    if (hl >= cap) hl = cap - 1;
    for (size_t i = 0; i < hl; i++) {
        char ch = d[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '-' || ch == '_';
        host[i] = ok ? ch : '?';
    }
    host[hl] = '\0';
    *pid = v;
}

int list_entry_cmp(const void *a, const void *b) {
    const list_entry_t *x = a, *y = b;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, m);
    if (c != 0) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static int same_lock(const list_entry_t *x, const list_entry_t *y) {
    if (list_entry_cmp(x, y) != 0 || x->kind != y->kind || x->nholders != y->nholders) return 0;
    return x->nholders == 0 || strcmp(x->holders[0].field, y->holders[0].field) == 0;
}

size_t list_majority(list_entry_t *a, size_t n, unsigned need) {
    size_t out = 0, i = 0;
    while (i < n) {
        /* a run of one name: the largest group that agrees */
        size_t j = i;
        while (j < n && list_entry_cmp(&a[i], &a[j]) == 0) j++;
        size_t best = i, best_count = 0;
        for (size_t x = i; x < j; x++) {
            size_t c = 0;
            for (size_t y = i; y < j; y++) c += same_lock(&a[x], &a[y]);
            if (c > best_count) {
                best_count = c;
                best = x;
            }
        }
        if (best_count >= need) {
            list_entry_t e = a[best];
            for (size_t y = i; y < j; y++) {
                if (!same_lock(&a[best], &a[y])) continue;
                if (a[y].ttl_ms >= 0 && (e.ttl_ms < 0 || a[y].ttl_ms < e.ttl_ms))
                    e.ttl_ms = a[y].ttl_ms;
                if (a[y].fence > e.fence) e.fence = a[y].fence;
            }
            e.agree = (int)best_count;
            a[out++] = e;
        }
        i = j;
    }
    return out;
}

size_t list_field_uuid(const char *field, uint64_t *id) {
    size_t fl = strlen(field), sl = strlen(LIST_WRITE_SUFFIX);
    if (fl > sl && strcmp(field + fl - sl, LIST_WRITE_SUFFIX) == 0) fl -= sl;
    size_t ul = fl;
    while (ul > 0 && field[ul - 1] != ':') ul--;
    if (ul <= 1) return 0;
    *id = strtoull(field + ul, NULL, 10);
    return ul - 1;
}
