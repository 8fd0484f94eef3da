/* Redisson's key layout.
 * SPDX-License-Identifier: MIT */
#include "keys.h"

#include <string.h>

size_t keys_u64(char *out, uint64_t v) {
    /* Most numbers here are RESP lengths of one to three digits. */
    if (v < 10) {
        out[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        out[0] = (char)('0' + v / 10);
        out[1] = (char)('0' + v % 10);
        return 2;
    }
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    return n;
}

size_t keys_lock(char *out, const char *prefix, const char *name, size_t len) {
    size_t p = strlen(prefix);
    memcpy(out, prefix, p);
    memcpy(out + p, name, len);
    out[p + len] = '\0';
    return p + len;
}

size_t keys_companion(char *out, const char *kind, const char *key, size_t klen) {
    int braces = memchr(key, '{', klen) == NULL;
    size_t n = strlen(kind);
    memcpy(out, kind, n);
    out[n++] = ':';
    if (braces) out[n++] = '{';
    memcpy(out + n, key, klen);
    n += klen;
    if (braces) out[n++] = '}';
    out[n] = '\0';
    return n;
}

size_t keys_owner_field(char *out, const char *uuid, uint64_t owner) {
    memcpy(out, uuid, KEYS_UUID_LEN);
    out[KEYS_UUID_LEN] = ':';
    size_t n = KEYS_UUID_LEN + 1 + keys_u64(out + KEYS_UUID_LEN + 1, owner);
    out[n] = '\0';
    return n;
}
