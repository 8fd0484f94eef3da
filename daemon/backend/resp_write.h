/* The RESP writer: commands as arrays of bulk strings, the one way the daemon writes them.
 * SPDX-License-Identifier: MIT
 *
 * Pure: bytes into the caller's memory, no I/O. resp.c writes a command
 * from an argv with resp_write_command(); scripts.c writes its script
 * calls, an op's keys and arguments at a time, into room it reserved
 * (RESP_WRITE_ROOM), with the calls that write in place. Lengths and
 * counts are decimal (keys_u64). tests/unit/test_resp_write.c. */
#ifndef DLOCK_RESP_WRITE_H
#define DLOCK_RESP_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/util/buf.h"

/* Room one bulk string of len bytes takes at most: "$", 20 digits, "\r\n",
 * the bytes, "\r\n". An array's header ("*<n>\r\n") takes RESP_WRITE_ROOM(0)
 * at most too. */
#define RESP_WRITE_ROOM(len) (1 + 20 + 2 + (len) + 2)

/* "<kind><n>\r\n" at p ('*' an array of n, '$' a bulk string of n bytes,
 * whose bytes and resp_write_end() the caller writes after it); returns
 * the bytes written. */
size_t resp_write_head(char *p, char kind, size_t n);
/* "$<len>\r\n<s>\r\n" at p; returns the bytes written. */
size_t resp_write_bulk(char *p, const char *s, size_t len);
/* v in decimal as a bulk string at p; returns the bytes written
 * (RESP_WRITE_ROOM(20) at most). */
size_t resp_write_u64(char *p, uint64_t v);
/* The "\r\n" that ends a bulk string written in place; returns 2. */
size_t resp_write_end(char *p);

/* Appends argv (argvlen[i] bytes each, or NUL-terminated when argvlen is
 * NULL) as one command, an array of argc bulk strings, to out; 0, or -1
 * on no memory (out is unchanged then). */
int resp_write_command(buf_t *out, int argc, const char **argv, const size_t *argvlen);

#endif
