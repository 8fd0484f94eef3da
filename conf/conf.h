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
    uint32_t max_line;               /* bytes in a request line */
    uint32_t max_output;             /* bytes of queued replies per connection */
    uid_t admin_uids[CONF_ADMIN_UIDS_MAX];
    size_t admin_uids_count;
    conf_log_level_t log_level;
    char metrics[CONF_STR_MAX];      /* "" off, "host:port", or a Unix socket path */
    conf_addr_t metrics_addr;        /* parsed: TCP host and port (port 0: a path) */

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

    /* bookkeeping */
    int password_set;                /* the password key was given */
    int username_set;                /* the username key was given */
    int tls_key;                     /* the tls key: -1 unset, 0 no, 1 yes */
    int url_tls;                     /* the url is rediss:// */
    int url_set;                     /* the url key was given */
    int replicas_timeout_set;        /* the replicas_timeout_ms key was given */
    int rejoin_delay_set;            /* the rejoin_delay_ms key was given */
} conf_t;

/* Fills c with the built-in defaults. */
void conf_defaults(conf_t *c);

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
