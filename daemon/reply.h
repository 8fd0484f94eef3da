/* The words of the lock manager's answers and events: pure formatting, no I/O.
 * SPDX-License-Identifier: MIT
 *
 * session.c sends what these write; proto/ formats the lines. */
#ifndef DLOCK_REPLY_H
#define DLOCK_REPLY_H

#include <stddef.h>

#include "daemon/lock/lockmgr.h"
#include "proto/proto.h"

/* The protocol's error code of a lock manager error. */
proto_err_t reply_err(lock_err_t err);

/* The text of an ERR reply r (LOCK_REPLY_ERROR): NULL for the code's own
 * default text, else a static string or buf (cap bytes). A kind is named
 * in its own table's words (lockmgr_mode_text). */
const char *reply_error_words(const lock_reply_t *r, char *buf, size_t cap);

/* The reply line (LF included) to r, the answer of a request whose word
 * has flags (lockmgr.h's LOCK_WORD_*: a grant is "OK <fence>" with
 * LOCK_WORD_FENCE, as ELECT's, else "OK <fence> <holds>"), in
 * out: cap bytes, PROTO_REPLY_LIST_MAX for a LIST answer (MLOCK's fences),
 * PROTO_REPLY_MAX for the others. Returns its length, or -1 when it does
 * not fit. */
int reply_format(char *out, size_t cap, unsigned flags, const lock_reply_t *r);

/* The event line (LF included) of ev in out (cap bytes, PROTO_REPLY_MAX
 * holds any): "!LOST <name> <reason>", "!LEADER <name> <fence> <value>"
 * or "!LEADER <name> NONE". Returns its length, or -1. */
int reply_event(char *out, size_t cap, const lock_event_t *ev);

/* A !LOST event's reason: expired, forced, backend. */
const char *reply_loss_reason(lock_loss_t why);

#endif
