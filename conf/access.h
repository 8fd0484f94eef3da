/* Access rules: who may read, lock or administer which lock names ([access]).
 * SPDX-License-Identifier: MIT
 *
 * Pure: rules are parsed from the file's [access] keys, checked, and matched
 * against a peer (uid and groups) and a lock name. No I/O but the user and
 * group name lookups (getpwnam, getgrnam) while parsing; no libuv.
 *
 * A rule is "<principal> = <right> <glob> [<glob> ...]". Rules add up: a
 * peer's right on a name is the highest right of the rules that apply to it
 * and have a glob matching the name (fnmatch(3) without FNM_PATHNAME). */
#ifndef DLOCK_ACCESS_H
#define DLOCK_ACCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ACCESS_RULES_MAX   4096  /* rules in [access] */
#define ACCESS_GLOBS_MAX   64    /* globs in one rule */
#define ACCESS_GLOB_MAX    255   /* bytes in a glob: a lock name's limit */
#define ACCESS_GROUPS_MAX  64    /* a peer's groups that rules see */
#define ACCESS_PRINCIPAL_MAX 64  /* bytes of "uid:<name>" kept for messages */
#define ACCESS_ERR_LEN     512
#define ACCESS_NO_PREFIX   ((size_t)-1)

/* The rights, each including the ones before it. proto.h's PROTO_RIGHT_*
 * are the same numbers. */
typedef enum {
    ACCESS_NONE = 0,
    ACCESS_READ,     /* STATUS, WHO and the other verbs that only look */
    ACCESS_LOCK,     /* take, wait for, renew and release, of every kind */
    ACCESS_ADMIN     /* FORCEUNLOCK, CLIENTS */
} access_right_t;

typedef enum {
    ACCESS_WHO_ANY = 0, /* "*": every peer */
    ACCESS_WHO_UID,
    ACCESS_WHO_GID
} access_who_t;

/* Where a rule came from. */
typedef enum {
    ACCESS_FROM_FILE = 0,   /* an [access] key */
    ACCESS_FROM_DEFAULT,    /* no [access] rules: everyone may lock every name */
    ACCESS_FROM_ADMIN_UIDS, /* admin_uids' shorthand, uid:N = admin * */
    ACCESS_FROM_ROOT        /* uid 0 always administers */
} access_from_t;

typedef struct access_rule_s {
    access_who_t who;
    uint32_t id;                 /* the uid or gid */
    int known;                   /* 0: a name no user or group has: matches no one */
    access_right_t right;
    access_from_t from;
    int line;                    /* the file's line (ACCESS_FROM_FILE) */
    char principal[ACCESS_PRINCIPAL_MAX]; /* as written: "uid:billing", "*" */
    char **globs;
    size_t *prefix;              /* per glob: for "<literal>*", the literal's
                                    length (matched without fnmatch), else
                                    ACCESS_NO_PREFIX */
    size_t nglobs;
    int any_name;                /* one glob is "*": every name matches */
} access_rule_t;

typedef struct access_rules_s {
    access_rule_t *rules;
    size_t count, cap;
    size_t file_rules;           /* rules from [access] keys */
    uint64_t generation;         /* unique per rule set made in this process */
    int finished;                /* access_rules_finish() ran */
} access_rules_t;

/* A peer as rules see it: its uid, its primary gid first, then its other
 * groups. */
typedef struct access_peer_s {
    uid_t uid;
    gid_t gids[ACCESS_GROUPS_MAX];
    size_t ngids;
} access_peer_t;

/* The rules that apply to one peer, and its last decision: made again when
 * the rule set's generation changes (a reload). Owned by the caller; zero
 * it first, free with access_view_free(). */
typedef struct access_view_s {
    uint64_t generation;         /* of the rules it was made from; 0: none */
    uint32_t *idx;               /* the rules that apply to the peer */
    size_t n, cap;
    access_right_t best;         /* the highest right any of them grants */
    /* the last name decided, and its decision */
    char last[ACCESS_GLOB_MAX + 1];
    size_t last_len;             /* 0: none */
    access_right_t last_right;
    int last_rule;
} access_view_t;

access_rules_t *access_rules_new(void);
void access_rules_free(access_rules_t *r);

/* Adds one [access] key. key is the principal ("uid:billing", "gid:7",
 * "*"); inih, which splits at ':' as well as '=', may hand over "uid" and
 * "billing = lock x": both forms are read. Returns 0, or -1 with a message
 * in err (a bad principal, right or glob). An unknown user or group name is
 * not an error: the rule matches no one (access_rules_check() says so). */
int access_rules_add(access_rules_t *r, const char *key, const char *value, int line,
                     char *err, size_t errlen);

/* Completes a rule set after loading: with no [access] rules, "* = lock *";
 * uid 0 and each admin uid administer every name. 0, or -1 on no memory. */
int access_rules_finish(access_rules_t *r, const uid_t *admin_uids, size_t nadmin);

/* 0 if glob is a valid one, else -1 with why in err: empty, too long,
 * bytes outside 0x21-0x7E (no lock name has them), an unclosed '[' or a
 * trailing '\'. */
int access_glob_check(const char *glob, char *err, size_t errlen);

/* The warnings `dlockd -t` prints: unknown users and groups, rules with a
 * glob that an earlier-or-equal rule of the same principal (or "*") with at
 * least the same right already covers (unreachable), and globs written
 * twice for one principal with different rights (overlapping: the higher
 * one wins). Calls warn once per warning with "file:line: text"; returns
 * how many. */
size_t access_rules_check(const access_rules_t *r, const char *file,
                          void (*warn)(void *data, const char *msg), void *data);

/* 1 if rule applies to peer. */
int access_rule_applies(const access_rule_t *rule, const access_peer_t *peer);

/* peer's right on name under r; *rule gets the index of the rule granting
 * it, -1 for none. Uses and fills view's cache (view may be NULL). */
access_right_t access_decide(const access_rules_t *r, access_view_t *view,
                             const access_peer_t *peer, const char *name, size_t len,
                             int *rule);

/* The highest right peer has on any name (CLIENTS needs admin on some). */
access_right_t access_best(const access_rules_t *r, access_view_t *view,
                           const access_peer_t *peer, int *rule);

void access_view_free(access_view_t *view);

/* Why a peer may not do what needs right on name (NULL for a verb without
 * a name), in out: the rule that grants less, or that none grants. */
void access_explain(const access_rules_t *r, int rule, const access_peer_t *peer,
                    access_right_t need, const char *name, size_t len, char *out,
                    size_t cap);

const char *access_right_name(access_right_t right);

/* Parses /proc/<pid>/status text: the Groups: line into gids (after what
 * it holds), if its Uid: line's real uid is uid. Returns the groups added,
 * -1 if the text is not that uid's. */
int access_parse_groups(const char *status, uid_t uid, gid_t *gids, size_t have, size_t max);

#endif
