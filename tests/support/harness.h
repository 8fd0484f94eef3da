/* Integration-test harness: real redis-server and dlockd processes on
 * temporary paths, line clients, and cleanup that always happens.
 * SPDX-License-Identifier: MIT
 *
 * Every process started here gets PR_SET_PDEATHSIG, so a test killed by a
 * timeout takes its servers with it; h_main() removes the run's temporary
 * directory at exit. Use h_setup/h_teardown as checked fixtures. */
#ifndef DLOCK_HARNESS_H
#define DLOCK_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#define H_MAX_PROCS     16
#define H_LINE_MAX      8192
#define H_WAIT_MS       10000   /* generous bound for anything to happen */

typedef struct h_conn_s {
    int fd;
    char buf[H_LINE_MAX];
    size_t len;
    char line[H_LINE_MAX];      /* the last line returned by h_recv */
} h_conn_t;

/* Runs the suite with CK_FORK and returns the process exit code. */
int h_main(Suite *s);

void h_setup(void);
void h_teardown(void);
const char *h_dir(void);        /* this test's private directory */

/* redis-server on a Unix socket in h_dir(), without persistence. */
void h_redis_start(void);
/* Same, with extra redis-server arguments (NULL-terminated, may be NULL),
 * e.g. {"--requirepass", "pw", NULL}; a --requirepass is used to check
 * readiness. */
void h_redis_start_args(const char *const extra[]);
void h_redis_stop(int sig);     /* signal, then wait for it to exit */
void h_redis_signal(int sig);   /* only signal (SIGSTOP, SIGCONT) */
const char *h_redis_sock(void);
/* Runs one redis command (words separated by spaces) with redis-cli and
 * returns its first output line (static buffer). */
const char *h_redis_cli(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs redis-cli -s <the redis socket> args... (NULL-terminated) without a
 * shell: any argument bytes (a Lua script) pass as they are. All its
 * output as h_run() gives it. */
const char *h_redis_argv(const char *const args[]);
/* Polls until the redis has a subscriber to channel (PUBSUB NUMSUB), for
 * at most H_WAIT_MS. */
void h_redis_await_subscribed(const char *channel);
/* ... until it has at least n subscribers. */
void h_redis_await_subscribers(const char *channel, int n);
/* Redis TIME in milliseconds: the clock dlockd's scripts score with. */
long long h_redis_now_ms(void);
/* The wall clock in ms since the epoch, as a Redisson client passes
 * "now" (System.currentTimeMillis()). */
long long h_wall_ms(void);
/* A client subscribed to channel on this test's redis-server (inline
 * SUBSCRIBE over the Unix socket), as a Redisson waiter listens. */
h_conn_t *h_redis_subscriber(const char *channel);
/* Runs argv (argv[0] found on PATH) without a shell, stdin from /dev/null,
 * and returns its stdout and stderr together without trailing newlines
 * (static buffer, 8 kB). */
const char *h_run(const char *const argv[]);
/* The calls= of command's INFO commandstats line ("evalsha"), 0 if it
 * never ran. */
long long h_redis_calls(const char *command);

/* More redis-servers, several at once, each with an index: on TCP at
 * 127.0.0.1:port (port 0: a free one, tried again if another process takes
 * it first), and on a Unix socket of its own that the harness uses to see
 * it ready. extra as for h_redis_start_args. */
int h_redis_start_tcp(int port, const char *const extra[]);
/* A TLS-only redis-server (--port 0 --tls-port) with the files that
 * h_tls_make_certs(certs) made; auth_clients: require a client certificate
 * (--tls-auth-clients yes). port as for h_redis_start_tcp. */
int h_redis_start_tls(int port, const char *certs, int auth_clients);
/* As h_redis_start_tls, with extra redis-server arguments (NULL-terminated,
 * may be NULL) as for h_redis_start_tcp: a --requirepass among them is used
 * on the harness's own connections (the ready check, h_redis_unix). */
int h_redis_start_tls_args(int port, const char *certs, int auth_clients,
                           const char *const extra[]);
int h_redis_port(int index);
/* Its Unix socket (plain, even for a TLS-only server). */
const char *h_redis_sock_index(int index);
/* As h_redis_stop and h_redis_signal, for a server started by index. */
void h_redis_stop_index(int index, int sig);
void h_redis_signal_index(int index, int sig);

/* A TCP port of 127.0.0.1 that was free a moment ago (bound to port 0,
 * read back, closed). */
int h_free_port(void);

/* Makes, in dir, with the openssl command: ca.crt/ca.key, a CA;
 * server.crt/server.key signed by it (CN localhost, subjectAltName
 * IP:127.0.0.1 and DNS:localhost); client.crt/client.key signed by it (for
 * client authentication); other-ca.crt/other-ca.key, an unrelated CA. */
void h_tls_make_certs(const char *dir);

/* A dlockd using h_redis_sock(); extra is appended to its config file
 * (e.g. "[lock]\nlease_ms = 300\n"), may be NULL. Returns its index. */
int h_dlockd_start(const char *extra);
/* Same, listening on sock (NULL: a fresh path in h_dir()). */
int h_dlockd_start_at(const char *sock, const char *extra);
/* Starts dlockd with conf_text as its whole config file and waits until it
 * answers PING (not for Redis). Returns its index. */
int h_dlockd_start_conf(const char *conf_text);
/* Starts dlockd with conf_text as its whole config file, without waiting
 * for it to be ready. Returns its pid. */
pid_t h_dlockd_spawn(const char *conf_text, const char *sock, int *index);
/* h_dlockd_start, its log kept (h_keep_log) as
 * <suite>.<test case>.dlockd<index> if the test fails. */
int h_dlockd_start_kept(const char *suite, const char *extra);
/* Same, run from the binary at bin (a copy in h_dir() that the test may
 * then replace or chmod: a hand-over runs the file at the daemon's path). */
int h_dlockd_start_bin(const char *bin, const char *extra);
/* Hand-overs (SIGUSR2, issue 39): the daemon starts the binary at its own
 * path, which takes every connection and lock over, and exits 0. The
 * harness then tracks the new pid (INFO's pid=; every dlockd's starter is
 * a child subreaper, so the new process becomes its child) and stops it at
 * teardown. Waits are bounded by H_UPGRADE_MS. */
#define H_UPGRADE_MS    30000   /* generous: the daemon gives a new process 10 s */
/* Signals dlockd index and waits until INFO's upgrades went up; reaps the
 * old pid (it must exit 0) and returns the new one. A failed attempt fails
 * the test. */
pid_t h_dlockd_upgrade(int index);
/* The same for a hand-over something else started (dlockd --upgrade):
 * waits until INFO's pid is another, reaps the old one, returns the new. */
pid_t h_dlockd_track_upgrade(int index);
/* Signals dlockd index and waits until INFO's upgrade_failures went up by
 * one; upgrades and the pid must stay, and the process run on. */
void h_dlockd_upgrade_fails(int index);
/* h_dlockd_upgrade, calling between(data) right after the signal, while
 * the hand-over runs (a client that closes, another signal). */
pid_t h_dlockd_upgrade_with(int index, void (*between)(void *), void *data);
/* Signals dlockd index and waits for the outcome, either: the new pid
 * (tracked as by h_dlockd_upgrade), or 0 if the attempt failed (the old
 * process serving on, its pid and upgrades as they were). */
pid_t h_dlockd_upgrade_try(int index);
/* Runs dlockd -t -c h_dir()/t.conf with conf_text in that file; returns
 * its exit status (128 for a signal), its first line of output (stdout and
 * stderr) in out. */
int h_dlockd_test_conf(const char *conf_text, char *out, size_t outlen);
const char *h_dlockd_sock(int index);
/* Asks INFO on c and returns the number after " key="; fails the test if
 * there is none. */
long long h_info_value(h_conn_t *c, const char *key);
/* Waits until dlockd's INFO says redis=up (up = 1) or redis=down. */
void h_await_redis(int index, int up);
pid_t h_dlockd_pid(int index);
/* Signals it and waits; returns the exit status as from waitpid, or -1 on timeout. */
int h_dlockd_stop(int index, int sig);
/* The path of a process's stderr log. */
const char *h_dlockd_log(int index);
/* Failure reports. Check ends a failed test with exit() and h_main()
 * removes the run's directory, so a test keeps the logs it will want to
 * read: h_keep_log() hard-links process index's log (a dlockd's, a
 * Sentinel's: any h_dlockd_log) to H_KEEP_DIR/<name>.log, name formatted
 * as printf does, and h_keep_passed() removes the links once the test has
 * passed. Each test starts with none (h_setup). */
#define H_KEEP_DIR "/tmp/dlockd-test-logs"
void h_keep_log(int index, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int h_kept(void);               /* links this test has kept */
void h_keep_passed(void);
/* The path of a dlockd's config file (to change it before a SIGHUP). */
const char *h_dlockd_conf(int index);
/* Lines of a dlockd's log that contain text. */
int h_log_count(int index, const char *text);
/* Waits (up to H_WAIT_MS) until the log has at least want such lines. */
void h_await_log(int index, const char *text, int want);

/* Clients. */
h_conn_t *h_connect(const char *sock);
h_conn_t *h_connect_index(int dlockd);
void h_send(h_conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void h_send_raw(h_conn_t *c, const void *data, size_t len);
/* The next line without its LF, or NULL on timeout or EOF. */
const char *h_recv(h_conn_t *c, int timeout_ms);
/* Waits (up to H_WAIT_MS) until INFO's waiters= on adm is want: that many
 * requests are queued in its daemon. */
void h_await_waiters(h_conn_t *adm, long long want);
/* Sends request; its reply must be want (within H_WAIT_MS). */
void h_expect_reply(h_conn_t *c, const char *request, const char *want);
/* Nothing comes on c for ms (why says what must not happen). */
void h_expect_silence(h_conn_t *c, int ms, const char *why);
/* The next line on c is the event want, within timeout_ms. */
void h_expect_event(h_conn_t *c, const char *want, int timeout_ms, const char *what);
/* Sends request; its reply must be TIMEOUT <ttl_ms> (-1: no expiry
 * known). Returns the ttl. */
long long h_expect_timeout(h_conn_t *c, const char *request);
/* What h_reply does with an event line ("!...") before the reply. */
typedef enum {
    H_EVENTS_FAIL,              /* fails the test */
    H_EVENTS_SKIP,              /* skips it */
    H_EVENTS_SKIP_BUT_LOST      /* skips it, but a !LOST fails the test */
} h_events_t;
/* The next reply line on c within timeout_ms, NULL on timeout. */
const char *h_reply(h_conn_t *c, int timeout_ms, h_events_t events);
/* dlockd index's INFO line, asked on a connection of its own (static). */
const char *h_info_line(int index);
/* HGETALL key on this test's redis-server, copied into out. */
void h_redis_hgetall(const char *key, char *out, size_t len);
/* 1 if the peer closed (EOF) within timeout_ms, with nothing else sent. */
int h_eof(h_conn_t *c, int timeout_ms);
void h_close(h_conn_t *c);

/* Sends one request line to dlockd index as user uid (from a child that
 * drops root) and returns the reply line (static buffer). The socket must
 * let that user connect (socket_mode 0666). */
const char *h_request_as(int index, uid_t uid, const char *request);

/* For a child that drops root. The run's and this test's directories (in
 * /tmp, where the sockets and config files are) made searchable by anyone
 * (0711). */
void h_dirs_searchable(void);
/* The same, and a copy of the file at path (a binary, a script) in
 * h_dir()/pub (0755), mode 0755, its path in copy: what a child that drops
 * root runs, since the build itself may be out of its reach (a clone in
 * root's home or in a mktemp -d directory, mode 0700). A second copy of the
 * same name in one test is the first. */
void h_public_copy(const char *path, char *copy, size_t len);

/* Monotonic milliseconds and microseconds. */
long long h_now_ms(void);
long long h_now_us(void);

/* ---- replication and Sentinel ---------------------------------------------
 * One set per test (each test that fails over builds its own): a primary,
 * its replicas and maybe Sentinels, on private TCP ports of 127.0.0.1,
 * cleaned up like every other process. Servers are redis-servers by index
 * (h_redis_port, h_redis_stop_index, ... apply); Sentinels are numbered
 * 0..n-1 within the set. */

#define H_MASTER_NAME   "dlockd-test"   /* what the Sentinels monitor */
#define H_FAILOVER_MS   30000           /* generous bound for a failover */

/* Passwords for the set started next (call before h_replicas_start or
 * h_sentinels_start; h_setup clears them; NULL or "": none). data_pw: every
 * server gets --requirepass and --masterauth data_pw, and each Sentinel
 * "sentinel auth-pass". sentinel_pw: each Sentinel gets "requirepass" and
 * "sentinel sentinel-pass". The harness then sends AUTH first on its own
 * connections to them (h_sentinel_cmd, h_redis_tcp, h_redis_unix, the
 * ready checks). Plain sets only, not TLS ones; a cluster's nodes (plain or
 * TLS, see h_cluster_start) take data_pw the same way. */
void h_set_auth(const char *data_pw, const char *sentinel_pw);
/* A primary and nreplicas replicas of it (--replicaof, diskless sync, no
 * persistence); waits until the primary has them all online. Returns the
 * primary's index. */
int h_replicas_start(int nreplicas);
/* Same, plus nsentinels redis-sentinels (quorum nsentinels/2+1,
 * down-after-milliseconds 1000, failover-timeout 3000, parallel-syncs 1,
 * each with its own config file in h_dir()), and waits (H_FAILOVER_MS)
 * until every Sentinel knows the primary, every replica as healthy and
 * every other Sentinel. Sentinels run with SENTINEL DEBUG info-period 1000,
 * publish-period 500 and ping-period 200, faster than their defaults.
 * Returns the primary's index. */
int h_sentinels_start(int nreplicas, int nsentinels);
/* Both, with extra redis-server arguments for the first primary only
 * (NULL-terminated, may be NULL). */
int h_replicas_start_args(int nreplicas, const char *const primary_extra[]);
int h_sentinels_start_args(int nreplicas, int nsentinels, const char *const primary_extra[]);
/* primary_extra that keeps the first primary a primary after a failover:
 * Sentinel cannot demote it (its REPLICAOF and SLAVEOF are renamed away),
 * as if it were cut off from the Sentinels but not from the clients. Only
 * Sentinel (+switch-master, or asking) can then tell a client of the new
 * primary. */
#define H_UNDEMOTABLE "--rename-command", "REPLICAOF", "", "--rename-command", "SLAVEOF", ""
/* One more replica of redis primary (any server by index), added to the
 * set as the next h_replica(); does not wait for it to be online. */
int h_replica_start(int primary);
int h_primary(void);            /* the index of the set's first primary */
int h_replica(int i);           /* the index of replica i */
/* Waits until redis primary reports role:master and n replicas
 * state=online, and n replicas acknowledge a write (a PUBLISH, then WAIT;
 * no key is touched). */
void h_await_replicas(int primary, int n, int timeout_ms);

int h_sentinel_count(void);
int h_sentinel_port(int i);
/* Its process index (for h_dlockd_log, which gives any process's log). */
int h_sentinel_index(int i);
/* Stops (SIGSTOP too) or signals Sentinel i; the helpers below skip
 * Sentinels that are stopped or gone. */
void h_sentinel_stop(int i, int sig);
void h_sentinel_signal(int i, int sig);
/* Runs one command (words separated by spaces) on Sentinel i or on the
 * server at 127.0.0.1:port. The reply is flattened, one line per element
 * (an error: "-" and its text; a nil: nothing); NULL if there is no reply
 * within 2 s. Static buffer. */
const char *h_sentinel_cmd(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *h_redis_tcp(int port, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "127.0.0.1:P1 127.0.0.1:P2 ..." of all the set's Sentinels (static). */
const char *h_sentinel_addrs(void);
/* The primary's port as the first live Sentinel says; -1 if none says. */
int h_sentinel_primary_port(void);
/* Waits until every live Sentinel names the same primary, not old_port,
 * and that server's ROLE says master; returns its port. */
int h_await_failover(int old_port, int timeout_ms);
/* SENTINEL FAILOVER, retried while it is refused (up to H_WAIT_MS). */
void h_sentinel_failover(void);
/* The index of this test's redis-server (or Sentinel) on port, or -1. */
int h_redis_index_of_port(int port);
/* The first word of ROLE: "master", "slave", "sentinel"; "" if no reply. */
const char *h_redis_role(int index);
/* Starts a stopped (SIGKILLed, SIGTERMed) server again, on its port, with
 * its arguments; a redis-server comes back empty. */
void h_redis_restart_index(int index);

/* A dlockd using the set's Sentinels (sentinels = h_sentinel_addrs(),
 * master_name = H_MASTER_NAME, command_timeout_ms 1000, connect_timeout_ms
 * 500), or redis://127.0.0.1:<port of redis>; extra is appended to the
 * config (may be NULL). Waits until INFO says redis=up. Returns its index. */
int h_dlockd_start_sentinel(const char *extra);
int h_dlockd_start_tcp(int redis, const char *extra);
/* As h_await_log, with its own bound. */
void h_await_log_ms(int index, const char *text, int want, int timeout_ms);

/* ---- the same over TLS --------------------------------------------------------
 * A set whose servers and Sentinels listen on TCP with TLS only (port 0,
 * tls-port on 127.0.0.1), with the files h_tls_make_certs(certs) made; the
 * servers replicate over TLS and the Sentinels speak TLS to the servers and
 * to each other (tls-replication yes). The harness reaches each of them
 * over the plain Unix socket every one also has, never over TCP: use
 * h_redis_unix and h_tls_await_failover; h_sentinel_cmd, h_redis_tcp,
 * h_redis_role, h_await_replicas, h_await_failover, h_sentinel_failover,
 * h_sentinel_primary_port, h_replica_start and h_redis_restart_index speak
 * plain TCP and do not apply. h_redis_port, h_sentinel_port,
 * h_sentinel_addrs and h_redis_index_of_port give the TLS ports;
 * h_primary, h_replica, h_sentinel_index, h_sentinel_stop and
 * h_redis_stop_index apply as they are. */

/* As h_sentinels_start, all TLS. auth_clients: every TLS port requires a
 * client certificate (tls-auth-clients yes), and servers and Sentinels
 * present client.crt when they connect (tls-client-cert-file; server.crt
 * is for serverAuth only); a dlockd then needs tls_cert_file and
 * tls_key_file too. Returns the primary's index. */
int h_tls_sentinels_start(int nreplicas, int nsentinels, const char *certs, int auth_clients);
/* As h_redis_tcp, over the Unix socket of redis-server or Sentinel index
 * (h_sentinel_index(i) for Sentinel i); NULL if it is not running or does
 * not reply within 2 s. Static buffer. Works for plain sets too. */
const char *h_redis_unix(int index, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As h_redis_unix, with the command's words in argv (NULL-terminated; a
 * word may be empty or hold spaces: a Lua script, a key with a space). */
const char *h_redis_unix_argv(int index, const char *const argv[]);
/* As h_await_failover, asking the Sentinels and the named server over
 * their Unix sockets. */
int h_tls_await_failover(int old_port, int timeout_ms);

/* ---- Redis Cluster -----------------------------------------------------------
 * One cluster per test, of redis-servers by index on private ports of
 * 127.0.0.1, cleaned up like every other process (h_redis_port,
 * h_redis_stop_index, h_redis_signal_index, h_redis_index_of_port apply;
 * h_redis_restart_index brings a node back as itself, empty). Nodes are
 * numbered 0..n-1 in start order, the first nprimaries the primaries that
 * redis-cli made; which primary each replica serves is redis-cli's choice.
 * The harness asks the nodes over their Unix sockets, a TLS cluster's too;
 * nodes that are stopped (SIGSTOP) or gone are left out. Waits are bounded
 * by H_FAILOVER_MS (the start) or H_WAIT_MS (a migration). */

#define H_CLUSTER_NODE_TIMEOUT_MS 1000  /* the nodes' cluster-node-timeout */

/* nprimaries (3 or more) primaries with replicas_per_primary replicas each,
 * every one a redis-server with cluster-enabled yes, its own nodes.conf in
 * h_dir(), a free cluster bus port (cluster-port), no persistence, and the
 * set's arguments (diskless sync; h_set_auth's data password); the cluster
 * made with redis-cli --cluster create. Waits until every node says
 * cluster_state:ok, knows every other, has the same current epoch and the
 * same CLUSTER SLOTS, with every replica listed, and every replica's link
 * is up. Returns 0; fails the test otherwise. */
int h_cluster_start(int nprimaries, int replicas_per_primary);
/* The same with TLS only (port 0, tls-port; tls-cluster and
 * tls-replication yes) with the files h_tls_make_certs(certs) made:
 * clients need no certificate, the nodes show each other client.crt (the
 * cluster bus wants one whatever tls-auth-clients says); h_cluster_port
 * gives the TLS ports. */
int h_tls_cluster_start(int nprimaries, int replicas_per_primary, const char *certs);
int h_cluster_node_count(void);
int h_cluster_port(int i);      /* node i's port (a TLS cluster's: its TLS port) */
int h_cluster_index(int i);     /* node i's index as a redis-server */
/* "127.0.0.1:P1 127.0.0.1:P2 ..." of the running nodes whose ROLE says
 * master, for a dlockd's "cluster =" (static). */
const char *h_cluster_addrs(void);
/* The port of the primary that has slot, as CLUSTER SLOTS on the first
 * running node says; -1 if none. */
int h_cluster_slot_owner(int slot);
/* CLUSTER KEYSLOT key (any key, spaces too). */
int h_cluster_keyslot(const char *key);
/* Runs one command (words separated by spaces) with redis-cli on the node
 * (or any server) at 127.0.0.1:port, over TLS for a TLS cluster's node,
 * with -a when it has a password. The reply as h_redis_tcp gives it, one
 * line per element, an error as "-" and its text (a MOVED too), no empty
 * lines; NULL if there is no connection or no reply within 2 s. Static. */
const char *h_cluster_cmd(int port, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Moves slot from its primary to the primary on to_port, in parts, so that
 * a test sees the middle. Begin: CLUSTER SETSLOT slot IMPORTING on the
 * target, then MIGRATING on the source. */
void h_cluster_migrate_begin(int slot, int to_port);
/* Moves up to max (< 0: all) of the slot's keys to the target with
 * MIGRATE (AUTH with a password); returns how many it moved. */
int h_cluster_migrate_keys(int slot, int to_port, int max);
/* Moves the keys left, then CLUSTER SETSLOT slot NODE on the target, the
 * source and every other running primary, and waits until every running
 * node's CLUSTER SLOTS gives slot to to_port. */
void h_cluster_migrate_end(int slot, int to_port);
/* All three. */
void h_cluster_migrate(int slot, int to_port);
/* After a test killed or stopped the primary on old_port: waits until the
 * running nodes agree (cluster_state:ok, the same CLUSTER SLOTS) that its
 * slots, all of them, belong to one other node whose ROLE says master (one
 * of its replicas); returns that node's port. */
int h_cluster_await_failover(int old_port, int timeout_ms);

#define H_EXPECT(c, want) do {                                   \
        const char *got_ = h_recv((c), H_WAIT_MS);               \
        ck_assert_msg(got_ != NULL, "no reply, wanted '%s'", (want)); \
        ck_assert_str_eq(got_, (want));                          \
    } while (0)

#define H_EXPECT_PREFIX(c, want) do {                            \
        const char *got_ = h_recv((c), H_WAIT_MS);               \
        ck_assert_msg(got_ != NULL, "no reply, wanted '%s...'", (want)); \
        ck_assert_msg(strncmp(got_, (want), strlen(want)) == 0,  \
                      "got '%s', wanted '%s...'", got_, (want)); \
    } while (0)

#endif
