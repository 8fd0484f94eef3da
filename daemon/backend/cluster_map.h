/* The Redis Cluster slot map, pure: CLUSTER SHARDS / SLOTS replies read into a map, MOVED/ASK read.
 * SPDX-License-Identifier: MIT
 *
 * Takes hiredis reply trees (RESP2: a map is a flat array of name, value
 * pairs) and error strings, gives values: no I/O, no libuv, no nodes.
 * cluster_refresh.c asks the nodes and makes the nodes this map names. */
#ifndef DLOCK_CLUSTER_MAP_H
#define DLOCK_CLUSTER_MAP_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/keys.h"

/* Primaries one map may name. */
#define CLUSTER_MAP_NODES_MAX 1024
/* Room for a host name or address, with the NUL. */
#define CLUSTER_MAP_HOST_MAX  256
/* owner[] of a slot no primary serves. */
#define CLUSTER_MAP_NONE      UINT16_MAX
/* Room for a map's error text. */
#define CLUSTER_MAP_ERR_LEN   200

typedef struct cluster_map_addr_s {
    char host[CLUSTER_MAP_HOST_MAX];
    int port;                   /* 1 .. 65535 */
} cluster_map_addr_t;

/* The primaries a map names and their slots, as read. 32 kB: not for the
 * stack. */
typedef struct cluster_map_s {
    cluster_map_addr_t addr[CLUSTER_MAP_NODES_MAX];
    size_t n;
    uint16_t owner[KEYS_SLOTS]; /* index into addr, or CLUSTER_MAP_NONE */
} cluster_map_t;

/* Empties m: no primaries, no slot served. */
void cluster_map_init(cluster_map_t *m);

/* Reads a CLUSTER SHARDS reply into m (emptied first): each shard's slots
 * go to its first node whose role is "master", at its endpoint (else its
 * ip), on its tls-port when tls (else, or when it has none, its port). A
 * node that does not know its own address (an empty or "?" endpoint and
 * ip: a node never met by others) is asked, the host that was asked. A
 * shard without slots or without a primary is skipped. 0, or -1 with why
 * in err (the shard and node, and the field that was bad). */
int cluster_map_shards(cluster_map_t *m, const redisReply *r, const char *asked, int tls,
                       char *err, size_t errlen);
/* Reads a CLUSTER SLOTS reply (before Redis 7.0) into m, likewise: each
 * range's first node is its primary. 0, or -1 with why in err. */
int cluster_map_slots(cluster_map_t *m, const redisReply *r, const char *asked, char *err,
                      size_t errlen);

/* The index into m->addr of slot's primary, or -1 when none serves it. */
int cluster_map_owner(const cluster_map_t *m, unsigned slot);
/* Slots some primary serves. */
size_t cluster_map_covered(const cluster_map_t *m);

/* What cluster_map_redirect() found. */
typedef enum {
    CLUSTER_MAP_NO_REDIRECT = 0, /* not MOVED or ASK, or not well formed */
    CLUSTER_MAP_MOVED,           /* the slot has a new owner */
    CLUSTER_MAP_ASK              /* this one command goes to a slot's importer */
} cluster_map_redirect_t;

/* Reads a redirection error, "MOVED 3999 127.0.0.1:6381" or "ASK 3999
 * host:port" (an IPv6 host may be bracketed), into the slot and address. */
cluster_map_redirect_t cluster_map_redirect(const char *err, unsigned *slot,
                                            cluster_map_addr_t *a);

#endif
