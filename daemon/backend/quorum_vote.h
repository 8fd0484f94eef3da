/* The quorum's vote rules: which nodes count, and what N nodes' answers to one op mean.
 * SPDX-License-Identifier: MIT
 *
 * Pure: each node's share of an op goes in (quorum_vote_t, one per node,
 * in node order), a decision comes out. quorum.c keeps the nodes, the
 * child ops and the timers, and does what these functions decide; times
 * are milliseconds, passed in. M below is the majority, N/2 + 1. */
#ifndef DLOCK_QUORUM_VOTE_H
#define DLOCK_QUORUM_VOTE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"

/* Room for INFO server's run_id (40 hex digits in Redis). */
#define QUORUM_VOTE_RUN_ID_MAX 48
/* The greatest uptime_in_seconds taken: in milliseconds it fits 64 bits. */
#define QUORUM_VOTE_UPTIME_MAX (UINT64_MAX / 1000)
/* free_in(): no majority's holders to wait for (a split, silent nodes). */
#define QUORUM_VOTE_SPLIT (-3)

/* ---- which nodes count -------------------------------------------------------- */

/* A member node as the vote sees it. */
typedef struct quorum_vote_node_s {
    int up;                   /* it has a node, and its command connection is up */
    int checked;              /* INFO read since the connection came up */
    int same_as;              /* the same server as another member */
    uint64_t counts_at;       /* with checked: it counts from then on */
    int clock_off;            /* its clock runs off beyond clock_drift_ms (clock_skew.h) */
} quorum_vote_node_t;

/* Whether the node counts toward a majority at now. */
int quorum_vote_counts(const quorum_vote_node_t *n, uint64_t now);
/* "down", "checking", "duplicate", "clock", "rejoining" or "up" (it counts). */
const char *quorum_vote_node_state(const quorum_vote_node_t *n, uint64_t now);

/* What INFO server says. */
typedef struct quorum_vote_info_s {
    char run_id[QUORUM_VOTE_RUN_ID_MAX]; /* cut to fit, as before */
    uint64_t uptime_s;
} quorum_vote_info_t;

#define QUORUM_VOTE_INFO_MISSING (-1) /* a field is not there */
#define QUORUM_VOTE_INFO_BAD     (-2) /* uptime_in_seconds is not a number */

/* Reads run_id and uptime_in_seconds from INFO server's text: 0, or one
 * of QUORUM_VOTE_INFO_* with why in err. */
int quorum_vote_info(const char *info, quorum_vote_info_t *out, char *err, size_t errlen);
/* When a node up for uptime_s whole seconds as read at now counts: a
 * whole rejoin_delay_ms after it may have started. */
uint64_t quorum_vote_counts_at(uint64_t now, uint64_t uptime_s, uint32_t rejoin_delay_ms);

/* ---- one op's answers ------------------------------------------------------------ */

/* One node's share of an op. */
typedef struct quorum_vote_s {
    backend_op_type_t kind;
    unsigned char counts;     /* its node counted when it was sent */
    unsigned char done;       /* its answer came: res holds it */
    unsigned char multi;      /* a multi-name acquire (BACKEND_MULTI): only a
                                 grant of the whole set is a yes; REENTERED
                                 names a stale field, and changed nothing */
    backend_result_t res;
} quorum_vote_t;

typedef struct quorum_vote_tally_s {
    unsigned yes;             /* counting nodes that did it (granted, renewed, released) */
    unsigned no;              /* counting nodes that refused (taken, gone) */
    unsigned silent;          /* counting nodes that failed (down, an error) */
    unsigned pending;         /* counting nodes not answered */
    unsigned answered;        /* counting nodes answered ok */
} quorum_vote_tally_t;

/* Whether an answered node did what was asked. */
int quorum_vote_yes(const quorum_vote_t *v);
quorum_vote_tally_t quorum_vote_tally(const quorum_vote_t *v, unsigned n);

/* Decisions. */
typedef enum {
    QUORUM_VOTE_WAIT = 0,     /* more answers may change it */
    QUORUM_VOTE_FAIL,         /* acquire: fail (undo it everywhere) */
    QUORUM_VOTE_REENTERED,    /* acquire: the owner held it already */
    QUORUM_VOTE_FENCE,        /* acquire: M granted: the fence round with F */
    QUORUM_VOTE_GRANT,        /* acquire: M hold it with a counter >= F */
    QUORUM_VOTE_DOWN,         /* too few answered: BACKEND_DOWN */
    QUORUM_VOTE_DONE,         /* release, status, force, who: answered */
    QUORUM_VOTE_RENEWED,      /* renew: M renewed */
    QUORUM_VOTE_GONE,         /* renew: gone on more than N - M counting nodes */
    QUORUM_VOTE_FORCED        /* ... and a node says it was forced */
} quorum_vote_decision_t;

/* ---- acquire ------------------------------------------------------------------- */

typedef struct quorum_vote_acquire_s {
    quorum_vote_decision_t what; /* WAIT, FAIL, REENTERED or FENCE */
    long long holds;          /* REENTERED: the most any node holds */
    uint64_t fence;           /* FENCE: F, the greatest counting node's grant */
    int agree;                /* FENCE: M counting grants are >= F already: the
                                 raise round is only so that counters agree */
} quorum_vote_acquire_t;

/* Before the fence round: an acquire's answers so far. */
quorum_vote_acquire_t quorum_vote_acquire(const quorum_vote_t *v, unsigned n, unsigned majority);

/* A raise child's answer (raised[]), per node. */
#define QUORUM_VOTE_RAISE_OUT     0 /* not sent, or not answered */
#define QUORUM_VOTE_RAISED        1
#define QUORUM_VOTE_RAISE_NOT_HELD 2 /* the owner no longer holds it there */
#define QUORUM_VOTE_RAISE_NONE    3 /* no answer */

unsigned char quorum_vote_raised(backend_status_t status, long long holds);
/* Whether the node needs a BACKEND_FENCE to F (raise_sent: one went already). */
int quorum_vote_needs_raise(const quorum_vote_t *v, uint64_t fence, int raise_sent);
/* The fence round: GRANT once M counting grants hold a counter >= F,
 * FAIL once that cannot be, else WAIT. raise_sent and raised are per node;
 * raising is how many raise children have not answered. */
quorum_vote_decision_t quorum_vote_fence_check(const quorum_vote_t *v, unsigned n,
                                               unsigned majority, uint64_t fence,
                                               const unsigned char *raise_sent,
                                               const unsigned char *raised, unsigned raising);

/* clock_drift_ms's share of a lease (CONF_DRIFT_AUTO: lease/100 + 2). */
uint32_t quorum_vote_drift(uint32_t drift_ms, uint32_t lease_ms);
/* Whether a grant that took elapsed ms leaves any of lease_ms after drift. */
int quorum_vote_lease_left(uint64_t elapsed, uint32_t lease_ms, uint32_t drift_ms);

/* Others hold it, some counting nodes have not answered, and there is no
 * majority: whether to give up rather than wait for the stragglers. */
int quorum_vote_straggle(const quorum_vote_t *v, unsigned n, unsigned majority);

/* What undoes a failed acquire on a node. */
typedef enum {
    QUORUM_VOTE_UNDO_NONE = 0, /* it did not run there (taken, an error) */
    QUORUM_VOTE_UNDO_RELEASE,  /* it ran, or may have */
    QUORUM_VOTE_UNDO_DROP      /* a reentry there: one hold less */
} quorum_vote_undo_t;

/* reentry: the acquire found holds of its owner somewhere. */
quorum_vote_undo_t quorum_vote_undo(const quorum_vote_t *v, int reentry);
/* A failed acquire that others hold: how long until a majority could be
 * free, from the holders' TTLs; QUORUM_VOTE_SPLIT if no such wait. */
long long quorum_vote_free_in(const quorum_vote_t *v, unsigned n, unsigned majority);

/* ---- a multi-name acquire ------------------------------------------------------ */

/* A set's vote is the single acquire's (quorum_vote_acquire, the fence
 * round, straggle, free_in) over whole-set answers, with these for what
 * is per name. values[i] is node i's answer per name (nnames of them):
 * a new name's fence, a reentry's holds; reentry a letter per name ('r'
 * a reentry, 'n' new). */

/* Each name's answer: a new name's F, the greatest fence the counting
 * granting nodes returned for it; a reentry's the most holds. */
void quorum_vote_multi_fences(const quorum_vote_t *v, const uint64_t *const *values, unsigned n,
                              const char *reentry, size_t nnames, uint64_t *fence);
/* Whether a node's answer has every new name's fence >= its F: it needs
 * no raise. */
int quorum_vote_multi_agrees(const uint64_t *values, const char *reentry, size_t nnames,
                             const uint64_t *fence);

/* What undoes a failed set on a node. */
typedef enum {
    QUORUM_VOTE_MUNDO_NONE = 0, /* it changed nothing there (refused, an error) */
    QUORUM_VOTE_MUNDO_NEW,      /* it may have run: release the new names (a
                                   reentry's hold more, if any, stays: the
                                   owner's release ends it) */
    QUORUM_VOTE_MUNDO_ALL       /* it ran: release the new names, drop one
                                   hold of each reentry */
} quorum_vote_mundo_t;

quorum_vote_mundo_t quorum_vote_multi_undo(const quorum_vote_t *v);

/* A failed set's answer. */
typedef struct quorum_vote_mfail_s {
    int down;                 /* no counting node refused: BACKEND_DOWN */
    backend_outcome_t outcome; /* else TAKEN, WRONG_KIND, HOLD_GONE or REENTERED */
    size_t which;             /* the name it is about */
    backend_mode_t held;      /* WRONG_KIND */
    long long holds;          /* REENTERED */
} quorum_vote_mfail_t;

/* HOLD_GONE or WRONG_KIND when counting nodes say so on more than N - M
 * (no majority can grant the set: the name is not the owner's, or another
 * kind, there); else REENTERED when a node found a stale field of the
 * owner (the lock manager clears it and asks again); else TAKEN about the
 * name most refusing nodes name (the first's on a tie); DOWN when no
 * counting node refused. */
quorum_vote_mfail_t quorum_vote_multi_fail(const quorum_vote_t *v, unsigned n, unsigned majority);

/* ---- the other ops ----------------------------------------------------------- */

/* RENEWED, GONE, FORCED, DOWN (the silent might have renewed) or WAIT. */
quorum_vote_decision_t quorum_vote_renew(const quorum_vote_t *v, unsigned n, unsigned majority);
/* RELEASE and DROP: DONE with the most holds left (-1: none) and whether
 * others wait, DOWN, or WAIT. */
quorum_vote_decision_t quorum_vote_release(const quorum_vote_t *v, unsigned n,
                                           unsigned majority, long long *holds,
                                           int *others_waiting);
/* STATUS, FORCE and WHO wait for every node: WAIT, DOWN, or DONE. */
quorum_vote_decision_t quorum_vote_ask_all(const quorum_vote_t *v, unsigned n,
                                           unsigned majority);
/* FORCE, once DONE: whether any counting node removed it. */
int quorum_vote_removed(const quorum_vote_t *v, unsigned n);
/* STATUS, once DONE: the TTL (-1 none, -2 free) and holds a majority has at least. */
void quorum_vote_status(const quorum_vote_t *v, unsigned n, unsigned majority,
                        long long *ttl_ms, long long *holds);
/* WHO, once DONE: the holder most counting nodes name (who[i] is node i's
 * answer), with the first daemon any node gives for it; ttl -2 if none. */
void quorum_vote_who(const quorum_vote_t *v, const backend_who_t *who, unsigned n,
                     backend_who_t *out, long long *ttl_ms);

#endif
