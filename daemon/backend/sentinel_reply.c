/* What a Sentinel answers, decoded.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/sentinel_reply.h"

int sentinel_reply_addr(const redisReply *r, char *host, size_t cap, int *port, char *err,
                        size_t errlen) {
    if (r->type == REDIS_REPLY_NIL) {
        snprintf(err, errlen, "no such primary");
        return SENTINEL_REPLY_UNKNOWN;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "%.100s", r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        return SENTINEL_REPLY_ERROR;
    }
    const redisReply *h = r->element[0], *p = r->element[1];
    int v = atoi(p->str);
    if (v <= 0 || v >= 65536 || h->len >= cap) {
        snprintf(err, errlen, "unexpected reply");
        return SENTINEL_REPLY_ERROR;
    }
    memcpy(host, h->str, h->len);
    host[h->len] = '\0';
    *port = v;
    return 0;
}
