/* Redisson's key layout.
 * SPDX-License-Identifier: MIT */
#include "keys.h"

#include <string.h>

size_t keys_u64(char *out, uint64_t v) {
    /* On the hot path of every script call: count the digits, then write
     * them from the end, two at a time. */
    static const char pairs[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";
    if (v < 10) {
        out[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        out[0] = pairs[v * 2];
        out[1] = pairs[v * 2 + 1];
        return 2;
    }
    size_t n = v < 1000 ? 3 : v < 10000 ? 4 : v < 100000 ? 5 : 6;
    for (uint64_t t = v / 1000000; t != 0; t /= 10) n++;
    char *p = out + n;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--p = pairs[d + 1];
        *--p = pairs[d];
    }
    if (v >= 10) {
        *--p = pairs[v * 2 + 1];
        *--p = pairs[v * 2];
    } else {
        *--p = (char)('0' + v);
    }
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

size_t keys_wake_id(char *out, const char *uuid) {
    uint64_t h = 0;
    for (size_t i = 0; i < 13; i++) {
        char c = uuid[i];
        if (i == 8) continue; /* the dash */
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16;
        if (d == 16) { /* not hex: Lua's tonumber() gives nil, taken as 0 */
            h = 0;
            break;
        }
        h = h << 4 | d;
    }
    size_t n = keys_u64(out, (UINT64_C(1) << 52) + h);
    out[n] = '\0';
    return n;
}

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection;
 * the table is made once, on first use. */
uint16_t keys_crc16(const char *buf, size_t len) {
    static uint16_t table[256];
    static int ready;
    if (!ready) {
        for (unsigned i = 0; i < 256; i++) {
            uint16_t c = (uint16_t)(i << 8);
            for (int b = 0; b < 8; b++) c = (uint16_t)(c & 0x8000 ? (c << 1) ^ 0x1021 : c << 1);
            table[i] = c;
        }
        ready = 1;
    }
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

unsigned keys_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(key + from, '}', len - from);
        if (close != NULL && close > key + from)
            return keys_crc16(key + from, (size_t)(close - key) - from) & (KEYS_SLOTS - 1);
    }
    return keys_crc16(key, len) & (KEYS_SLOTS - 1);
}
