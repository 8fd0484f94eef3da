/* The RESP writer: commands as arrays of bulk strings.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/resp_write.h"

#include <string.h>

#include "daemon/backend/keys.h"

size_t resp_write_head(char *p, char kind, size_t n) {
    size_t k = 0;
    p[k++] = kind;
    k += keys_u64(p + k, n);
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

size_t resp_write_bulk(char *p, const char *s, size_t len) {
    size_t k = resp_write_head(p, '$', len);
    if (len > 0) memcpy(p + k, s, len);
    k += len;
    p[k++] = '\r';
    p[k++] = '\n';
    return k;
}

size_t resp_write_u64(char *p, uint64_t v) {
    char num[24];
    return resp_write_bulk(p, num, keys_u64(num, v));
}

size_t resp_write_end(char *p) {
    p[0] = '\r';
    p[1] = '\n';
    return 2;
}

static size_t digits(size_t n) {
    size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

int resp_write_command(buf_t *out, int argc, const char **argv, const size_t *argvlen) {
    size_t total = 1 + digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++) {
        size_t len = argvlen != NULL ? argvlen[i] : strlen(argv[i]);
        total += 1 + digits(len) + 2 + len + 2;
    }
    char *p = buf_reserve(out, total);
    if (p == NULL) return -1;
    size_t k = resp_write_head(p, '*', (size_t)argc);
    for (int i = 0; i < argc; i++)
        k += resp_write_bulk(p + k, argv[i], argvlen != NULL ? argvlen[i] : strlen(argv[i]));
    buf_commit(out, k);
    return 0;
}
