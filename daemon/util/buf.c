/* A growable byte buffer.
 * SPDX-License-Identifier: MIT */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

void buf_free(buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
}

char *buf_reserve(buf_t *b, size_t n) {
    if (b->off + b->len + n <= b->cap) return b->data + b->off + b->len;
    if (b->off > 0) { /* compact first: consumed bytes may make the room */
        memmove(b->data, b->data + b->off, b->len);
        b->off = 0;
        if (b->len + n <= b->cap) return b->data + b->len;
    }
    size_t cap = b->cap ? b->cap : BUF_MIN_CAP;
    while (cap < b->len + n) {
        if (cap > (size_t)-1 / 2) return NULL;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (d == NULL) return NULL;
    b->data = d;
    b->cap = cap;
    return d + b->len;
}

void buf_commit(buf_t *b, size_t n) {
    b->len += n;
}

int buf_append(buf_t *b, const void *data, size_t len) {
    char *p = buf_reserve(b, len);
    if (p == NULL) return -1;
    if (len > 0) memcpy(p, data, len);
    b->len += len;
    return 0;
}

void buf_consume(buf_t *b, size_t n) {
    if (n >= b->len) {
        b->off = b->len = 0;
        return;
    }
    b->off += n;
    b->len -= n;
}

void buf_clear(buf_t *b) {
    b->off = b->len = 0;
}

void buf_shrink(buf_t *b) {
    if (b->len == 0 && b->cap > BUF_KEEP_CAP) buf_free(b);
}
