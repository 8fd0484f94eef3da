/* LIST's text: the protocol's counted lines and the HTTP /locks JSON, from a listing's entries.
 * SPDX-License-Identifier: MIT
 *
 * Pure: entries in, bytes out (tests/unit/test_listfmt.c). session.c sends
 * the lines, metrics.c the JSON; PROTOCOL.md says what both mean. */
#ifndef DLOCK_LISTFMT_H
#define DLOCK_LISTFMT_H

#include <stddef.h>

#include "daemon/backend/list.h"
#include "daemon/util/buf.h"

/* The longest entry line (name, value, LIST_HOLDERS_MAX holders and
 * LIST_WAITERS_MAX waiters of at most LISTFMT_WHO_MAX bytes each). */
#define LISTFMT_WHO_MAX   (LIST_HOST_MAX + 6 * 21)
#define LISTFMT_LINE_MAX  (2 * 256 + 128 + (LIST_HOLDERS_MAX + LIST_WAITERS_MAX) * LISTFMT_WHO_MAX)

/* One entry's line, "= <name> <kind> <ttl_ms> <fence> <holders> <waiters>
 * <value>\n", at out (LISTFMT_LINE_MAX bytes); returns its length. */
size_t listfmt_entry(char *out, const list_entry_t *e);
/* The whole reply: "OK LIST <n> <more>\n" and n entry lines, appended to
 * out; entries are left out (more set) once the reply would pass cap
 * bytes. 0, or -1 on no memory. */
int listfmt_reply(buf_t *out, const list_entry_t *e, size_t n, int more, size_t cap);
/* The JSON object /locks serves (its schema is in PROTOCOL.md), without
 * its closing brace, so that the caller may add members. 0 or -1. */
int listfmt_json(buf_t *out, const list_entry_t *e, size_t n, int more, size_t limit,
                 const char *pattern);
/* s as a JSON string, quotes included. 0 or -1. */
int listfmt_json_str(buf_t *out, const char *s, size_t len);

#endif
