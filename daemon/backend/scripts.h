/* The Lua scripts that change lock state, how a call is formatted, and how replies decode.
 * SPDX-License-Identifier: MIT
 *
 * Lock state in Redis changes only through these scripts, with every name
 * passed in KEYS and ARGV. Formatting and decoding are pure (bytes and
 * redisReply values in, RESP text and backend results out), so they are
 * shared by every topology and tested without a server. */
#ifndef DLOCK_SCRIPTS_H
#define DLOCK_SCRIPTS_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "daemon/backend/backend.h"
#include "daemon/util/buf.h"

/* Most operations in one call of the batch script (places, as
 * scripts_width counts them): a watchdog round of many thousand renewals
 * goes in few calls, and one call of this many keeps Redis busy for well
 * under a millisecond. */
#define SCRIPTS_BATCH_MAX 500
/* A registry entry not refreshed for this long is removed (by the next
 * daemon that registers): its daemon is gone. */
#define SCRIPTS_REGISTRY_STALE_MS (24u * 3600 * 1000)
/* How long a forced-unlock marker outlives the lock it removed. */
#define SCRIPTS_FORCED_MARK_MS 60000
#define SCRIPTS_SHA_LEN 40

typedef enum {
    SCRIPT_ACQUIRE = 0,   /* one acquire */
    SCRIPT_RELEASE,       /* one release or drop */
    SCRIPT_STATUS,
    SCRIPT_FORCE,
    SCRIPT_OPS,           /* many acquires, releases, drops and renewals */
    SCRIPT_RENEW,         /* many renewals with one lease: the watchdog's */
    SCRIPT_WHO,           /* who holds a lock, and its daemon */
    SCRIPT_REGISTER,      /* a daemon's entry in the registry (not an op) */
    SCRIPT_OPS_ANY,       /* SCRIPT_OPS for keys of many Cluster slots on one node */
    SCRIPT_RENEW_ANY,     /* SCRIPT_RENEW likewise */
    SCRIPT_OWN_FIRST,     /* then one op on a mode's own script, one id per
                             mode: SCRIPT_OWN(mode) */
    SCRIPT_COUNT = SCRIPT_OWN_FIRST + BACKEND_MODE_COUNT
} script_id_t;

/* A mode's own script's id (its text is its scripts_mode_t row's lua; modes
 * whose rows share a text share the first one's id, scripts_own). */
#define SCRIPT_OWN(mode) ((script_id_t)(SCRIPT_OWN_FIRST + (int)(mode)))

/* A script's text; NULL for an id no script has (a mode without one). */
const char *scripts_text(script_id_t id);
/* lua/list.lua: LIST's description of a SCAN page (list.c). */
extern const char *const scripts_list_lua;

/* The numbers the scripts answer with, as daemon/backend/lua/part/codes.lua
 * names them too (test_scripts checks that each script's agree); what a
 * name holds is its kind's backend mode, named in lua/part/kind.lua after
 * its row's list_word (HELD_LOCK is BACKEND_MUTEX's, "lock"). An
 * acquire's pair is {code, value}: */
enum {
    SCRIPTS_GRANTED = 0,     /* {0, fence} (a semaphore: permits left) */
    SCRIPTS_REENTERED = 1,   /* {1, holds} */
    SCRIPTS_TAKEN = 2,       /* {2, pttl}, -1 none */
    SCRIPTS_WRONG_KIND = 3,  /* {3, SCRIPTS_HELD_*} */
    SCRIPTS_HOLD_GONE = 4,   /* {4, 0}: a semaphore's earlier permits are gone */
    SCRIPTS_TAKEN_LEADER = 5, /* {5, pttl}: a plain lock's acquire TAKEN by an
                                 election's leader (BACKEND_TAKEN, leader set) */
    /* WRONG_KIND's value, STATUS's third element and LIST's kind, what a
     * name holds: a backend_mode_t (some of them here) */
    SCRIPTS_HELD_LOCK = 0,
    SCRIPTS_HELD_READ = 1,
    SCRIPTS_HELD_WRITE = 2,
    SCRIPTS_HELD_SEM = 3,
    /* a release's or drop's holds left when the owner held none */
    SCRIPTS_NOT_HELD = -1,
    /* a renewal's digit */
    SCRIPTS_GONE = 0,
    SCRIPTS_RENEWED = 1,
    SCRIPTS_FORCED = 2,
};

/* The codes as names and numbers, for the test that holds the scripts to
 * them (but the HELD_ ones: the mode table's list_word names them). */
typedef struct scripts_code_s {
    const char *name;        /* as the scripts name it: "GRANTED" */
    int value;
} scripts_code_t;

extern const scripts_code_t scripts_codes[];
extern const size_t scripts_codes_count;

/* How a node's calls are made (scripts_format's flags). */
#define SCRIPTS_F_ANY_SLOT    0x1u  /* a Cluster node: batches carry keys of many
                                       slots (the _ANY scripts, Redis 7.0+) */
#define SCRIPTS_F_SHARDED     0x2u  /* releases SPUBLISH: sharded pub/sub */
#define SCRIPTS_F_NO_REGISTRY 0x4u  /* WHO reads the lock only: the registry
                                       is in another slot */
#define SCRIPTS_F_QUORUM      0x8u  /* a quorum's node: acquires use its fence
                                       rule (TIME in whole seconds) */
/* The error of a renewal in a batch whose key the node does not serve. */
#define SCRIPTS_NOT_HERE "key not served by this node"

/* A key a script gets beside the lock's own, made from the lock's key:
 * kind "redisson_lock_token" and form SCRIPTS_KEY_PREFIX give
 * "redisson_lock_token:{key}" (keys.h's companions; the braces only when
 * the key has no '{'). */
typedef enum {
    SCRIPTS_KEY_PREFIX = 1,  /* "<kind>:{key}" */
    SCRIPTS_KEY_SUFFIX,      /* "{key}:<kind>" (Redisson's suffixName) */
    SCRIPTS_KEY_TAG,         /* "{key}": a prefix the script appends to */
    SCRIPTS_KEY_BRACED,      /* "<kind>{key}", braced whatever the key holds
                                (Redisson's form for some channels, as
                                RCountDownLatch's): on Cluster, a key with
                                a '{' then hashes apart from its lock */
} scripts_key_form_t;

typedef struct scripts_key_s {
    scripts_key_form_t form;
    const char *kind;
} scripts_key_t;

/* An argument of a mode's own script (scripts_mode_t.args). */
typedef enum {
    SCRIPTS_ARG_END = 0,
    SCRIPTS_ARG_LETTER,        /* the op's letter (letters[kind], or once) */
    SCRIPTS_ARG_LEASE,         /* lease_ms */
    SCRIPTS_ARG_FIELD,         /* the owner's field */
    SCRIPTS_ARG_COUNT,         /* count */
    SCRIPTS_ARG_BASE,          /* base */
    SCRIPTS_ARG_QUEUE,         /* queue_ms */
    SCRIPTS_ARG_QUEUE_FOREIGN, /* queue_foreign_ms */
    SCRIPTS_ARG_VALUE,         /* the op's value (op->value, "" when NULL):
                                  any kind's word for its script (ELECT: the
                                  leader's value) */
} scripts_arg_t;

#define SCRIPTS_MODE_KEYS 6
#define SCRIPTS_MODE_ARGS 6
#define SCRIPTS_KIND(k) (1u << (k))

/* What differs between the kinds of lock (backend_mode_t) in their calls:
 * one of these per mode, scripts_mode(mode). */
typedef struct scripts_mode_s {
    /* its own script's text (daemon/backend/lua), for the op kinds in own;
     * its id is SCRIPT_OWN(mode). A mutex has none: its ops pick
     * SCRIPT_ACQUIRE, SCRIPT_RELEASE or the batch by kind. The script takes
     * KEYS the lock and keys, ARGV args then the publish command; it
     * answers an acquire's pair {code, value}, a release's {holds,
     * subscribers} or holds, and an op in value_reply {fence, value, pttl}
     * ({0, '', -2} none; {-1, '', SCRIPTS_HELD_*} another kind). */
    const char *lua;
    unsigned own;                          /* SCRIPTS_KIND() bits */
    unsigned value_reply;                  /* SCRIPTS_KIND() bits of own: the op
                                              answers a value (op->answer) */
    scripts_key_t keys[SCRIPTS_MODE_KEYS]; /* its companions, in order ({0} ends) */
    unsigned char args[SCRIPTS_MODE_ARGS]; /* scripts_arg_t, in order (END ends) */
    char letters[BACKEND_OP_COUNT];        /* the op letter of each kind in own */
    char once;                             /* an acquire's letter with once set, or 0 */
    /* in the batch script (SCRIPT_OPS) */
    unsigned batch;                        /* the op kinds it may run */
    int batch_own;                         /* its ops but renewals go as 'x<letter>' */
    char renew;                            /* a renewal's letter; 's' takes permits after it */
    scripts_key_t acquire_key;             /* an acquire's or raise's companion */
    scripts_key_t renew_key;               /* a renewal's */
    scripts_key_t release_key;             /* a release's or drop's */
    scripts_key_t wake_key;                /* the daemons waiting for it, a
                                              companion its acquires and
                                              releases make themselves
                                              (lua/part/wake.lua); {0} none */
    /* the channel a watch listens to: "<channel>:{key}", and with own_channel
     * the waiter's own, "<channel>:{key}:<owner field>"; channel_form
     * SCRIPTS_KEY_BRACED: "<channel>{key}" (0: the first form) */
    const char *channel;
    int own_channel;
    scripts_key_form_t channel_form;
    /* LIST's word for a name held as this mode (lua/list.lua answers the
     * mode), NULL for a mode no name is held as; lua/part/kind.lua names
     * the mode's code HELD_<list_word upper-cased> */
    const char *list_word;
} scripts_mode_t;

const scripts_mode_t *scripts_mode(backend_mode_t mode);
/* 1 if the key s (n bytes, after key_prefix) is a companion of some lock
 * key ("<kind>:..." or "<kind>{...}" of a kind some mode's row names),
 * not a lock: LIST skips it. */
int scripts_companion(const char *s, size_t n);
/* The id of mode's own script: SCRIPT_OWN of the first mode with its text;
 * SCRIPT_COUNT when it has none. */
script_id_t scripts_own(backend_mode_t mode);
/* The channel a watch of name (in mode, by owner) listens to, into out
 * (KEYS_CHANNEL_MAX); its length. */
size_t scripts_channel(char *out, const char *prefix, const char *uuid, const char *name,
                       size_t len, backend_mode_t mode, uint64_t owner);

/* 1 if a node with these flags loads script id (the _ANY ones need Redis
 * 7.0's script flags: only Cluster nodes load them; an own id is loaded
 * once, by its first mode, and not at all for a mode without one). */
int scripts_loaded(script_id_t id, unsigned flags);
/* 1 if op may share a batch call with others. */
int scripts_batchable(const backend_op_t *op);
/* The places op takes in the batch script: a multi-name acquire one per
 * name (its keys, its reply), any other op one. SCRIPTS_BATCH_MAX counts
 * places. */
size_t scripts_width(const backend_op_t *op);
/* The script that runs ops[0..n) in one call: n > 1 only for batchable ops.
 * With SCRIPTS_F_ANY_SLOT every batchable op goes in an _ANY script, alone
 * too: its keys are checked one by one inside, where the node has them. */
script_id_t scripts_choose(backend_op_t *const *ops, size_t n, unsigned flags);
/* Appends "EVALSHA <sha> ..." for ops[0..n) to out, in RESP. Keys get
 * prefix, owner fields uuid. 0, or -1 on no memory (out unchanged). */
int scripts_format(buf_t *out, script_id_t id, const char *sha, backend_op_t *const *ops,
                   size_t n, const char *prefix, const char *uuid, unsigned flags);
/* Fills every op's res from r, the script's reply (not an error reply).
 * A release that deleted the lock sets res.others_waiting to the number of
 * subscribers its message reached: the caller, which knows its own
 * subscriptions, turns that into the flag. A failed operation's error text
 * points into r (which is why r is not const): it lives as long as r. Returns
 * 0, or -1 with err when r has the wrong shape. */
int scripts_decode(script_id_t id, backend_op_t *const *ops, size_t n, redisReply *r,
                   char *err, size_t errlen);
/* Appends the EVALSHA that registers this daemon (uuid, its CLIENT SETNAME
 * name) in prefix's registry. 0, or -1 on no memory. */
int scripts_format_register(buf_t *out, const char *sha, const char *prefix, const char *uuid,
                            const char *name);

#endif
