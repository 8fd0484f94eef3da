/* A growable byte buffer: the one buffer type of the daemon.
 * SPDX-License-Identifier: MIT
 *
 * Bytes are appended at the end and consumed from the front; consuming
 * only moves an offset, and the buffer compacts itself when it grows. */
#ifndef DLOCK_BUF_H
#define DLOCK_BUF_H

#include <stddef.h>

/* Smallest allocation, and the size above which an empty buffer gives its
 * memory back in buf_shrink(). */
#define BUF_MIN_CAP   256
#define BUF_KEEP_CAP  4096

typedef struct buf_s {
    char *data;
    size_t off;    /* consumed bytes at the front */
    size_t len;    /* bytes in use, from off */
    size_t cap;
} buf_t;

/* A zeroed buf_t is an empty buffer. */
void buf_free(buf_t *b);
/* Makes room for n more bytes; returns a pointer to them, or NULL on no
 * memory. Call buf_commit() with how many were written. */
char *buf_reserve(buf_t *b, size_t n);
void buf_commit(buf_t *b, size_t n);
/* 0, or -1 on no memory (the buffer is unchanged then). */
int buf_append(buf_t *b, const void *data, size_t len);
/* The bytes in use. */
static inline char *buf_start(const buf_t *b) { return b->data + b->off; }
/* Drops n bytes from the front. */
void buf_consume(buf_t *b, size_t n);
void buf_clear(buf_t *b);
/* Frees an empty buffer's memory past BUF_KEEP_CAP. */
void buf_shrink(buf_t *b);

#endif
