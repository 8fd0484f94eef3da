/* What a Sentinel answers, decoded.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "daemon/backend/sentinel_reply.h"

#define SENTINEL_PORT_MAX 65535

/* s[0 .. len) is a TCP port: digits only, 1..SENTINEL_PORT_MAX. */
static int parse_port(const char *s, size_t len, int *out) {
    int v = 0;
    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
        if (v > SENTINEL_PORT_MAX) return -1;
    }
    if (v == 0) return -1;
    *out = v;
    return 0;
}

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
    int v;
    if (parse_port(p->str, p->len, &v) != 0) {
        snprintf(err, errlen, "bad port \"%.*s\" in its answer", (int)(p->len < 40 ? p->len : 40),
                 p->str);
        return SENTINEL_REPLY_BAD;
    }
    if (h->len == 0 || h->len >= cap || memchr(h->str, '\0', h->len) != NULL) {
        snprintf(err, errlen, "bad host (%zu bytes) in its answer", h->len);
        return SENTINEL_REPLY_BAD;
    }
    memcpy(host, h->str, h->len);
    host[h->len] = '\0';
    *port = v;
    return 0;
}
