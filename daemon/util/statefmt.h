/* The hand-over state's text: records of words, numbers and byte strings.
 * SPDX-License-Identifier: MIT
 *
 * A record is a line: a word that says what it is, then its fields, each
 * after one space. A field is a word (letters, digits, '_', '-'), a
 * number (decimal, '-' allowed), or a byte string as <length>:<bytes>,
 * which may hold any byte, spaces and newlines too. The writer appends to
 * a buf_t; the reader walks a byte range and keeps the first error, so
 * that a record is read field by field and checked once at its end. Pure:
 * no I/O, no clock. */
#ifndef DLOCK_STATEFMT_H
#define DLOCK_STATEFMT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/util/buf.h"

/* Longest word, with its NUL. */
#define STATE_WORD_MAX 32
/* Room for why a read failed. */
#define STATE_WHY_MAX 160

typedef struct statew_s {
    buf_t *b;
    int failed;      /* out of memory: the text is unusable */
    int fields;      /* fields written in the record so far */
} statew_t;

void statew_init(statew_t *w, buf_t *b);
/* Starts a record (ends the one before it). */
void statew_rec(statew_t *w, const char *word);
void statew_word(statew_t *w, const char *word);
void statew_u64(statew_t *w, uint64_t v);
void statew_i64(statew_t *w, int64_t v);
void statew_bytes(statew_t *w, const void *p, size_t len);
void statew_str(statew_t *w, const char *s);
/* Ends the last record; 0, or -1 if anything failed. */
int statew_finish(statew_t *w);

typedef struct stater_s {
    const char *p, *end;
    int in_rec;      /* a record was started and not yet ended */
    int err;
    char why[STATE_WHY_MAX];
} stater_t;

void stater_init(stater_t *r, const char *p, size_t len);
/* The next record's word into word: 1, or 0 at the end of the text (or
 * after an error). It skips what the last record left unread. */
int stater_rec(stater_t *r, char word[STATE_WORD_MAX]);
/* 1 if the record has another field. */
int stater_more(const stater_t *r);
void stater_word(stater_t *r, char word[STATE_WORD_MAX]);
uint64_t stater_u64(stater_t *r);
int64_t stater_i64(stater_t *r);
/* The bytes stay in the text: *p points into it. */
void stater_bytes(stater_t *r, const char **p, size_t *len);
/* ... as a NUL-terminated copy of at most cap - 1 bytes (longer: an error). */
void stater_str(stater_t *r, char *out, size_t cap);
/* Sets the error (the first one stays). */
void stater_fail(stater_t *r, const char *why);

#endif
