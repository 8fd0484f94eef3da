/* dlockd configuration: an INI file read with inih into a typed, checked struct.
 * SPDX-License-Identifier: MIT
 *
 * conf_load() never exits and never logs: errors come back as text of the
 * form "file:line: message" in a buffer the caller owns. */
#ifndef DLOCK_CONF_H
#define DLOCK_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "conf/access.h"

#define CONF_DEFAULT_PATH    "/etc/dlockd/dlockd.conf"
#define CONF_ERR_LEN         512
#define CONF_PATH_MAX        107   /* sun_path holds 108 bytes with the NUL */
#define CONF_STR_MAX         256   /* url, username, password */
#define CONF_PREFIX_MAX      64    /* key_prefix */
#define CONF_ADMIN_UIDS_MAX  64
#define CONF_PASSWORD_ENV    "DLOCKD_REDIS_PASSWORD"  /* overrides every other source */
#define CONF_SENTINEL_PASSWORD_ENV "DLOCKD_SENTINEL_PASSWORD"
#define CONF_SENTINELS_MAX   16    /* addresses in sentinels */
#define CONF_SENTINEL_PORT   26379 /* a sentinel address without :port */
#define CONF_CLUSTER_SEEDS_MAX 16  /* addresses in cluster */
#define CONF_REDIS_PORT      6379  /* a cluster address without :port */
#define CONF_QUORUM_MIN      3     /* nodes in quorum */
#define CONF_QUORUM_MAX      9
#define CONF_REJOIN_DEFAULT_MS 60000 /* rejoin_delay_ms unset (or lease_ms if longer) */
#define CONF_DRIFT_AUTO      UINT32_MAX /* clock_drift_ms unset: lease/100 + 2 */
#define CONF_REPLICAS_AUTO   (-1)  /* replicas_ack = auto */
#define CONF_REPLICAS_MAX    64    /* replicas_ack = N */

typedef enum {
    CONF_LOG_ERROR = 0,
    CONF_LOG_WARN,
    CONF_LOG_INFO,
    CONF_LOG_DEBUG
} conf_log_level_t;

typedef enum {
    CONF_REDIS_TCP = 0,
    CONF_REDIS_UNIX
} conf_redis_kind_t;

typedef enum {
    CONF_SHARDED_AUTO = 0,           /* sharded where the cluster has it (7.0+) */
    CONF_SHARDED_YES,
    CONF_SHARDED_NO
} conf_sharded_t;

typedef struct conf_addr_s {
    char host[CONF_STR_MAX];
    int port;
} conf_addr_t;

/* One Redis server as a URL names it. */
typedef struct conf_url_s {
    conf_redis_kind_t kind;
    char host[CONF_STR_MAX];         /* TCP host, or Unix socket path */
    int port;
    int db;
    int tls;                         /* rediss:// */
    char username[CONF_STR_MAX];     /* from the URL, "" if it has none */
    char password[CONF_STR_MAX];
} conf_url_t;

typedef struct conf_s {
    /* [server] */
    char socket[CONF_PATH_MAX + 1];
    unsigned socket_mode;            /* permission bits of the socket file */
    gid_t socket_gid;                /* group of the socket file, if set */
    int socket_group_set;
    uint32_t max_clients;
    uint32_t max_clients_per_uid;    /* connections of one uid */
    uint32_t max_locks_per_uid;      /* holds of one uid's connections together */
    uint32_t max_waiters_per_uid;    /* waiting requests of one uid's connections */
    uint32_t max_line;               /* bytes in a request line */
    uint32_t max_output;             /* bytes of queued replies per connection */
    uint32_t max_observes_per_client; /* names one connection OBSERVEs at once */
    uint32_t max_inflight;           /* tagged requests of one connection in progress */
    uid_t admin_uids[CONF_ADMIN_UIDS_MAX];
    size_t admin_uids_count;
    conf_log_level_t log_level;
    char metrics[CONF_STR_MAX];      /* "" off, "host:port", or a Unix socket path */
    conf_addr_t metrics_addr;        /* parsed: TCP host and port (port 0: a path) */
    int board_remote;                /* a non-loopback metrics address serves the
                                        board (GET /) and GET /locks too */

    /* [redis] */
    char url[CONF_STR_MAX];
    conf_redis_kind_t redis_kind;    /* parsed from url */
    char redis_host[CONF_STR_MAX];   /* TCP host, or Unix socket path */
    int redis_port;
    int redis_db;
    char username[CONF_STR_MAX];     /* from the key, else from the url */
    char password[CONF_STR_MAX];     /* env, else password_file, else the key, else the url */
    char password_file[CONF_PATH_MAX + 1]; /* read by conf_finish() */
    uint32_t connect_timeout_ms;
    uint32_t command_timeout_ms;
    char key_prefix[CONF_PREFIX_MAX + 1];
    int tls;                         /* TLS to Redis: the tls key, or a rediss:// url */
    char tls_ca_file[CONF_PATH_MAX + 1];   /* "" : the system's CA store */
    char tls_cert_file[CONF_PATH_MAX + 1]; /* client certificate, "" for none */
    char tls_key_file[CONF_PATH_MAX + 1];
    char tls_server_name[CONF_STR_MAX];    /* SNI and verified name; "": the host */
    conf_addr_t sentinels[CONF_SENTINELS_MAX]; /* set: Sentinel finds the primary */
    size_t sentinels_count;
    char master_name[CONF_STR_MAX];
    char sentinel_username[CONF_STR_MAX];
    char sentinel_password[CONF_STR_MAX];  /* env, else the key */
    conf_addr_t cluster[CONF_CLUSTER_SEEDS_MAX]; /* set: a Redis Cluster, these
                                                    its seed nodes */
    size_t cluster_count;
    conf_sharded_t sharded_pubsub;   /* Cluster: SSUBSCRIBE/SPUBLISH or not */
    conf_url_t quorum[CONF_QUORUM_MAX]; /* set: a Redlock quorum over these
                                           independent primaries */
    size_t quorum_count;
    uint32_t rejoin_delay_ms;        /* a restarted quorum node sits out this long;
                                        also the longest lease in quorum mode */
    uint32_t clock_drift_ms;         /* CONF_DRIFT_AUTO: lease/100 + 2 */
    int replicas_ack;                /* CONF_REPLICAS_AUTO, 0 or N */
    uint32_t replicas_timeout_ms;    /* WAIT's timeout; unset, at most half of
                                        command_timeout_ms */

    /* [lock] */
    uint32_t lease_ms;
    uint32_t renew_every_ms;         /* 0 in the file means lease_ms / 3 */
    uint32_t max_locks_per_client;
    uint32_t max_waiters;

    /* [access]: the rules, completed by conf_finish() (admin_uids, the
     * default); owned, freed by conf_free(). NULL before the first rule. */
    access_rules_t *access;

    /* bookkeeping */
    int password_set;                /* the password key was given */
    int username_set;                /* the username key was given */
    int tls_key;                     /* the tls key: -1 unset, 0 no, 1 yes */
    int url_tls;                     /* the url is rediss:// */
    int url_set;                     /* the url key was given */
    int replicas_timeout_set;        /* the replicas_timeout_ms key was given */
    int rejoin_delay_set;            /* the rejoin_delay_ms key was given */
} conf_t;

/* ---- the keys: one row each ---------------------------------------------
 *
 * Every key of the file is one conf_key_t in one table (conf.c): its
 * section and name, its type, its default, the conf_t field it fills and
 * whether a reload applies it. conf_set() parses through it, conf_defaults()
 * fills in its defaults, conf_diff() compares through it, and tests iterate
 * it. Rules across keys (one topology, url against username and password,
 * password_file, the Sentinel and TLS checks) stay in conf_set()'s parsers
 * and conf_finish(). */

#define CONF_KEYS_MAX 64           /* rows in the table (a diff's capacity) */

typedef enum {
    CONF_TYPE_U32 = 0,             /* uint32_t, decimal in [min, max] */
    CONF_TYPE_INT,                 /* int, a number or a word (replicas_ack) */
    CONF_TYPE_BOOL,                /* yes or no */
    CONF_TYPE_ENUM,                /* one of names[], stored as its index */
    CONF_TYPE_STR,                 /* text, at most size - 1 bytes */
    CONF_TYPE_MODE,                /* octal permission bits */
    CONF_TYPE_GROUP,               /* a group name or number */
    CONF_TYPE_UIDS,                /* uids separated by commas or spaces */
    CONF_TYPE_ADDRS,               /* host:port addresses (conf_addr_t) */
    CONF_TYPE_URL,                 /* one redis url */
    CONF_TYPE_URLS,                /* redis urls separated by spaces (conf_url_t) */
    CONF_TYPE_ENDPOINT             /* host:port, [ipv6]:port, a socket path, or "" */
} conf_type_t;

/* What a reload (SIGHUP) does with a changed key. */
typedef enum {
    CONF_RESTART = 0,              /* made into sockets or connections at start: a
                                      reload names it and the running value stays */
    CONF_LIVE,                     /* read afresh at each use: a reload copies it */
    CONF_LIVE_BACKEND,             /* copied, then the backend is told
                                      (backend_reconfigure) */
    CONF_LIVE_LOCKS                /* copied, then the lock manager is told
                                      (lockmgr_reconfigure) */
} conf_reload_t;

#define CONF_KEY_NONEMPTY  0x1u    /* STR: may not be empty */
#define CONF_KEY_PRINTABLE 0x2u    /* STR: bytes 0x21-0x7E only */
#define CONF_KEY_INDIRECT  0x4u    /* its value reaches the daemon through another
                                      key (password_file: password); a diff
                                      compares that one */

typedef struct conf_key_s conf_key_t;

/* A key's own parser, where its type's is not enough. 0, or -1 with err. */
typedef int (*conf_parse_cb)(conf_t *c, const conf_key_t *k, const char *v, char *err,
                             size_t errlen);

struct conf_key_s {
    const char *section;           /* "server", "redis" or "lock" ([access] has
                                      no fixed keys: conf/access.h) */
    const char *name;
    conf_type_t type;
    const char *def;               /* the default, as the file would say it; NULL:
                                      unset, which conf_finish() reads as such */
    conf_reload_t reload;
    unsigned flags;                /* CONF_KEY_* */
    size_t offset;                 /* the conf_t field the daemon reads: a reload */
    size_t size;                   /*   compares and copies these bytes */
    size_t count;                  /* lists: offset of the size_t entry count */
    uint32_t min, max;             /* U32: the range */
    const char *const *names;      /* ENUM: the words, by value, NULL-terminated */
    conf_parse_cb parse;           /* NULL: the type's parser (U32, ENUM, STR, MODE) */
};

/* The table, in the order of the shipped file; *n gets its length. */
const conf_key_t *conf_keys(size_t *n);

/* The row of [section] name, or NULL. */
const conf_key_t *conf_key_find(const char *section, const char *name);

/* 1 if a and b hold the same value for k (as the daemon reads it). */
int conf_key_same(const conf_t *a, const conf_t *b, const conf_key_t *k);

/* Copies k's value from src into dst (a reload applying a live key). */
void conf_key_copy(conf_t *dst, const conf_t *src, const conf_key_t *k);

/* k's value in c, for a U32 key. */
uint32_t conf_key_u32(const conf_t *c, const conf_key_t *k);

/* What a reload from the running a to the new b changes: the rows whose
 * values differ, in table order, split by what a reload does with them. */
typedef struct conf_diff_s {
    const conf_key_t *restart[CONF_KEYS_MAX]; /* CONF_RESTART: named, not applied */
    size_t restart_count;
    const conf_key_t *live[CONF_KEYS_MAX];    /* every CONF_LIVE*: applied */
    size_t live_count;
    unsigned live_kinds;           /* bit 1 << conf_reload_t of each live row */
} conf_diff_t;

/* Fills d with what differs between a and b. Pure. */
void conf_diff(const conf_t *a, const conf_t *b, conf_diff_t *d);

/* Fills c with the built-in defaults. */
void conf_defaults(conf_t *c);

/* Frees what c owns (its access rules). */
void conf_free(conf_t *c);

/* Reads path into c (which should hold defaults). Returns 0, or -1 with
 * "path:line: message" in err. Every error in the file is fatal. */
int conf_load(conf_t *c, const char *path, char *err, size_t errlen);

/* Reads an open stream the way conf_load() reads a file, naming it name in
 * errors ("name:line: message"). The caller opens and closes f. */
int conf_load_stream(conf_t *c, FILE *f, const char *name, char *err,
                     size_t errlen);

/* Sets one key as if read from the file. Returns 0, or -1 with a message
 * (without file:line) in err. Used for command-line overrides. */
int conf_set(conf_t *c, const char *section, const char *key,
             const char *value, char *err, size_t errlen);

/* Checks rules across keys and derives values (renew_every_ms); takes the
 * Redis password from $DLOCKD_REDIS_PASSWORD or password_file when given.
 * Call once after loading and overrides. Returns 0 or -1 with err. */
int conf_finish(conf_t *c, char *err, size_t errlen);

/* The checks across keys that a reload may change the values of (each
 * involves a live key: command_timeout_ms, replicas_timeout_ms, lease_ms,
 * renew_every_ms), on values as conf_finish() leaves them; conf_finish()
 * ends with them. 0, or -1 with err. */
int conf_check_live(const conf_t *c, char *err, size_t errlen);

/* What will be in force after a reload from running to next: next's
 * values, but the running ones of the keys that change only with a
 * restart (CONF_RESTART). A shallow copy (next's access rules): not to be
 * freed. A reload runs conf_check_live() on it, as well as on the file's
 * own values. Pure. */
void conf_in_force(conf_t *out, const conf_t *running, const conf_t *next);

/* sentinels and master_name go together. 0, or -1 with err. */
int conf_check_sentinels(const conf_t *c, char *err, size_t errlen);

/* Parses a redis URL into u. Returns 0 or -1 with err. */
int conf_parse_url(conf_url_t *u, const char *url, char *err, size_t errlen);

/* Parses a redis URL into c's redis_* fields. Returns 0 or -1 with err. */
int conf_parse_redis_url(conf_t *c, const char *url, char *err, size_t errlen);

/* Running as root, a file that another user owns, that others can write, or
 * that a group other than root's can write is refused: returns -1 with a
 * message. 0 otherwise. */
struct stat;
int conf_file_unsafe(const struct stat *st, char *err, size_t errlen, const char *path);

/* The clock drift a quorum allows for on a lease (clock_drift_ms, or
 * lease/100 + 2 when unset, as the Redis distlock page does). */
uint32_t conf_clock_drift(const conf_t *c, uint32_t lease_ms);

/* Advice about a valid configuration (an even quorum), one line in out;
 * 0 when there is none. */
int conf_warning(const conf_t *c, char *out, size_t cap);

/* Returns 1 if uid may use administrative commands. */
int conf_is_admin(const conf_t *c, uid_t uid);

const char *conf_log_level_name(conf_log_level_t level);

#endif
