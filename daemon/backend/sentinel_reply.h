/* What a Sentinel answers, decoded: pure, so that Check tests it without a Sentinel.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_SENTINEL_REPLY_H
#define DLOCK_SENTINEL_REPLY_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#define SENTINEL_REPLY_UNKNOWN (-1) /* nil: it does not know the primary */
#define SENTINEL_REPLY_ERROR   (-2) /* an error, or a reply of another shape */
#define SENTINEL_REPLY_BAD     (-3) /* the shape, with a host or port that is not one */

/* SENTINEL get-master-addr-by-name's answer, [host, port]: 0 with the host
 * (NUL-terminated in host, of cap bytes) and the port in 1..65535, or one
 * of SENTINEL_REPLY_* with why in err; the caller names the Sentinel. */
int sentinel_reply_addr(const redisReply *r, char *host, size_t cap, int *port, char *err,
                        size_t errlen);

#endif
