/* Redisson's key layout: the lock hash, its companion keys and owner fields.
 * SPDX-License-Identifier: MIT
 *
 * Pure string building, shared by every topology. A lock named N with
 * key_prefix P lives at the hash "PN"; its companions follow Redisson's
 * prefixName rule, "kind:{PN}", or "kind:PN" when PN already has a '{', so
 * that a lock and its companions always share one Cluster slot. */
#ifndef DLOCK_KEYS_H
#define DLOCK_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "conf/conf.h"

/* Longest lock name (the protocol's limit). */
#define KEYS_NAME_MAX     255
/* Room for a lock key, and for any companion of it, with the NUL. */
#define KEYS_KEY_MAX      (CONF_PREFIX_MAX + KEYS_NAME_MAX + 1)
/* (a companion's or channel's kind: up to 47 bytes, with its ':' or
 * braces around the key) */
#define KEYS_COMPANION_MAX (KEYS_KEY_MAX + 48)
/* Room for a channel: a companion, and a fair lock waiter's ":<field>". */
#define KEYS_CHANNEL_MAX  (KEYS_COMPANION_MAX + KEYS_FIELD_MAX)
/* "<uuid>:<owner>" with the NUL. */
#define KEYS_FIELD_MAX    64
#define KEYS_UUID_LEN     36

/* Companion kinds. */
#define KEYS_TOKEN    "redisson_lock_token"     /* fence counter */
#define KEYS_CHANNEL  "redisson_lock__channel"  /* release messages */
#define KEYS_RW_CHANNEL "redisson_rwlock"       /* a read/write lock's releases */
#define KEYS_SEM_CHANNEL "redisson_sc"          /* a semaphore's releases */
#define KEYS_QUEUE    "redisson_lock_queue"     /* a fair lock's waiters, in order */
#define KEYS_QUEUE_TIMEOUT "redisson_lock_timeout" /* ... and when each place ends */
#define KEYS_FAIR_OWNERS "dlock_fair"           /* which places are dlockd's */
/* A semaphore's sorted set of permit ids is the key's suffix companion:
 * "{PN}:timeout", or "PN:timeout" when PN has a '{' (Redisson's suffixName). */
#define KEYS_SEM_TIMEOUT "timeout"
#define KEYS_FORCED   "dlock_forced"            /* who FORCEUNLOCK removed */
/* A plain lock's wake queue: the daemons waiting for it (lua/part/wake.lua). */
#define KEYS_WAKE_QUEUE "dlock_wq"
/* A daemon's wake number: 2^52 plus its uuid's first 48 bits, in decimal
 * (sixteen digits), what a release publishes to name the daemon whose
 * turn it is. */
#define KEYS_WAKE_LEN 16
/* The daemons' registry (prefix + this): a hash of uuid -> "<seen ms>
 * dlockd:<host>:<pid>". The space keeps it apart from every lock key:
 * lock names have none. */
#define KEYS_REGISTRY "dlockd daemons"

/* Each writes a NUL-terminated string into out and returns its length. */
size_t keys_lock(char *out, const char *prefix, const char *name, size_t len);
size_t keys_companion(char *out, const char *kind, const char *key, size_t klen);
size_t keys_owner_field(char *out, const char *uuid, uint64_t owner);
/* The wake number of the daemon of uuid, as lua/part/wake.lua makes it
 * from an owner field; out has KEYS_WAKE_LEN + 1. */
size_t keys_wake_id(char *out, const char *uuid);
/* Decimal digits of v at out, no NUL; returns how many (at most 20). */
size_t keys_u64(char *out, uint64_t v);

/* Redis Cluster's slots, and the slot of a key: CRC16 (XMODEM) of the key,
 * or of the part between its first '{' and the next '}' when that part is
 * not empty (the hash tag), modulo KEYS_SLOTS. A lock's companions (fence
 * counter, channel, forced marker) put the lock key in braces, so they
 * share its slot. */
#define KEYS_SLOTS 16384
uint16_t keys_crc16(const char *buf, size_t len);
unsigned keys_slot(const char *key, size_t len);

#endif
