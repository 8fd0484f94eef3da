/* Unit tests of conf/: defaults, every key, limits, redis urls and file:line errors.
 * SPDX-License-Identifier: MIT */
#include "conf/conf.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- temporary files ---------------------------------------------------- */

/* main() makes one directory under /tmp for the run; each test's files are
 * made in it with mkstemp and removed by the test's teardown. A failed
 * assertion ends the test's process at once (Check calls _exit), so main()
 * also empties the directory when the run is over. */
#define TMP_FILES_MAX 64
#define TMP_PATH_LEN  96

static char run_dir[32]; /* "/tmp/dlockd-test-conf-XXXXXX" */
static char tmp_paths[TMP_FILES_MAX][TMP_PATH_LEN];
static size_t tmp_count;
static char tmp_dir[TMP_PATH_LEN];

static void remove_temp_files(void) {
    for (size_t i = 0; i < tmp_count; i++) unlink(tmp_paths[i]);
    tmp_count = 0;
    if (tmp_dir[0] != '\0') rmdir(tmp_dir);
    tmp_dir[0] = '\0';
}

static void setup(void) {
    tmp_count = 0;
    tmp_dir[0] = '\0';
}

static void teardown(void) {
    remove_temp_files();
}

/* Removes what failed tests left in run_dir, then run_dir itself. */
static void remove_run_dir(void) {
    DIR *d = opendir(run_dir);
    if (d != NULL) {
        struct dirent *e;
        char path[2 * TMP_PATH_LEN + 256];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(path, sizeof(path), "%s/%s", run_dir, e->d_name);
            if (unlink(path) != 0) rmdir(path);
        }
        closedir(d);
    }
    rmdir(run_dir);
}

/* Writes len bytes to a new file in run_dir and returns its path. */
static const char *write_conf_n(const char *text, size_t len) {
    ck_assert_uint_lt(tmp_count, TMP_FILES_MAX);
    char *path = tmp_paths[tmp_count];
    snprintf(path, TMP_PATH_LEN, "%s/conf-XXXXXX", run_dir);
    int fd = mkstemp(path);
    ck_assert_msg(fd >= 0, "mkstemp %s: %s", path, strerror(errno));
    tmp_count++;
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    ck_assert_int_eq(close(fd), 0);
    return path;
}

static const char *write_conf(const char *text) {
    return write_conf_n(text, strlen(text));
}

/* conf_defaults, then conf_load of text written to a temporary file. */
static int load_text(conf_t *c, const char *text, const char **path, char *err) {
    *path = write_conf(text);
    conf_defaults(c);
    err[0] = '\0';
    int rc = conf_load(c, *path, err, CONF_ERR_LEN);
    unlink(*path); /* read once: remove it now */
    return rc;
}

/* err starts with "<path>:<line>:". Prints both on failure. */
#define ASSERT_ERR_AT(err, path, line)                                       \
    do {                                                                     \
        char want_[TMP_PATH_LEN + 32];                                       \
        char got_[TMP_PATH_LEN + 32];                                        \
        snprintf(want_, sizeof(want_), "%s:%d:", (path), (line));            \
        snprintf(got_, sizeof(got_), "%.*s", (int)strlen(want_), (err));     \
        ck_assert_str_eq(got_, want_);                                       \
    } while (0)

#define ASSERT_HAS(err, fragment)                                            \
    ck_assert_msg(strstr((err), (fragment)) != NULL,                         \
                  "error \"%s\" does not mention \"%s\"", (err), (fragment))

/* Loads text, expects failure at line with a message containing fragment. */
#define ASSERT_LOAD_FAILS_AT(text, line, fragment)                           \
    do {                                                                     \
        conf_t c_;                                                           \
        char err_[CONF_ERR_LEN];                                             \
        const char *path_;                                                   \
        ck_assert_int_eq(load_text(&c_, (text), &path_, err_), -1);          \
        ASSERT_ERR_AT(err_, path_, (line));                                  \
        ASSERT_HAS(err_, (fragment));                                        \
    } while (0)

static void assert_conf_eq(const conf_t *a, const conf_t *b) {
    ck_assert_str_eq(a->socket, b->socket);
    ck_assert_uint_eq(a->socket_mode, b->socket_mode);
    ck_assert_uint_eq(a->max_clients, b->max_clients);
    ck_assert_uint_eq(a->max_line, b->max_line);
    ck_assert_uint_eq(a->max_output, b->max_output);
    ck_assert_uint_eq(a->admin_uids_count, b->admin_uids_count);
    for (size_t i = 0; i < a->admin_uids_count; i++)
        ck_assert_uint_eq(a->admin_uids[i], b->admin_uids[i]);
    ck_assert_int_eq(a->log_level, b->log_level);
    ck_assert_str_eq(a->url, b->url);
    ck_assert_int_eq(a->redis_kind, b->redis_kind);
    ck_assert_str_eq(a->redis_host, b->redis_host);
    ck_assert_int_eq(a->redis_port, b->redis_port);
    ck_assert_int_eq(a->redis_db, b->redis_db);
    ck_assert_str_eq(a->username, b->username);
    ck_assert_str_eq(a->password, b->password);
    ck_assert_uint_eq(a->connect_timeout_ms, b->connect_timeout_ms);
    ck_assert_uint_eq(a->command_timeout_ms, b->command_timeout_ms);
    ck_assert_str_eq(a->key_prefix, b->key_prefix);
    ck_assert_uint_eq(a->lease_ms, b->lease_ms);
    ck_assert_uint_eq(a->renew_every_ms, b->renew_every_ms);
    ck_assert_uint_eq(a->max_locks_per_client, b->max_locks_per_client);
    ck_assert_uint_eq(a->max_waiters, b->max_waiters);
    ck_assert_int_eq(a->password_set, b->password_set);
    ck_assert_int_eq(a->username_set, b->username_set);
    ck_assert_int_eq(a->replicas_ack, b->replicas_ack);
    ck_assert_uint_eq(a->replicas_timeout_ms, b->replicas_timeout_ms);
    ck_assert_uint_eq(a->sentinels_count, b->sentinels_count);
    ck_assert_str_eq(a->metrics, b->metrics);
}

static void set_ok(conf_t *c, const char *section, const char *key, const char *value) {
    char err[CONF_ERR_LEN] = "";
    ck_assert_msg(conf_set(c, section, key, value, err, sizeof(err)) == 0,
                  "[%s] %s = %s: %s", section, key, value, err);
}

static void shipped_conf_path(char *out, size_t cap) {
    const char *dir = getenv("DLOCK_SRCDIR");
    snprintf(out, cap, "%s/conf/dlockd.conf", dir != NULL && dir[0] != '\0' ? dir : ".");
}

/* ---- defaults and the shipped file -------------------------------------- */

START_TEST(test_defaults) {
    conf_t c;

    conf_defaults(&c);
    ck_assert_str_eq(c.socket, "/run/dlockd/dlockd.sock");
    ck_assert_uint_eq(c.socket_mode, 0660);
    ck_assert_uint_eq(c.max_clients, 10000);
    ck_assert_uint_eq(c.max_line, 4096);
    ck_assert_uint_eq(c.max_output, 1048576);
    ck_assert_uint_eq(c.admin_uids_count, 1);
    ck_assert_uint_eq(c.admin_uids[0], 0);
    ck_assert_int_eq(c.log_level, CONF_LOG_INFO);
    ck_assert_str_eq(c.url, "redis://127.0.0.1:6379/0");
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
    ck_assert_str_eq(c.redis_host, "127.0.0.1");
    ck_assert_int_eq(c.redis_port, 6379);
    ck_assert_int_eq(c.redis_db, 0);
    ck_assert_str_eq(c.username, "");
    ck_assert_str_eq(c.password, "");
    ck_assert_uint_eq(c.connect_timeout_ms, 1000);
    ck_assert_uint_eq(c.command_timeout_ms, 2000);
    ck_assert_str_eq(c.key_prefix, "dlock:");
    ck_assert_uint_eq(c.lease_ms, 30000);
    ck_assert_uint_eq(c.renew_every_ms, 0);
    ck_assert_uint_eq(c.max_locks_per_client, 1000);
    ck_assert_uint_eq(c.max_waiters, 100000);
    ck_assert_int_eq(c.password_set, 0);
    ck_assert_int_eq(c.username_set, 0);
}
END_TEST

START_TEST(test_shipped_file_loads) {
    char path[4096];
    char err[CONF_ERR_LEN] = "";
    conf_t c;

    shipped_conf_path(path, sizeof(path));
    conf_defaults(&c);
    ck_assert_msg(conf_load(&c, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.renew_every_ms, 10000);
}
END_TEST

/* Every key set away from its default, then the shipped file loaded over
 * it: the result must be the defaults, so the file states each of them. */
START_TEST(test_shipped_file_states_the_defaults) {
    char path[4096];
    char err[CONF_ERR_LEN] = "";
    conf_t want, c;

    conf_defaults(&want);
    conf_defaults(&c);
    set_ok(&c, "server", "socket", "/tmp/elsewhere.sock");
    set_ok(&c, "server", "socket_mode", "0600");
    set_ok(&c, "server", "max_clients", "5");
    set_ok(&c, "server", "max_line", "100");
    set_ok(&c, "server", "max_output", "8192");
    set_ok(&c, "server", "admin_uids", "7 8");
    set_ok(&c, "server", "log_level", "debug");
    set_ok(&c, "server", "metrics", "127.0.0.1:9717");
    set_ok(&c, "redis", "url", "redis://someone:pw@other:1/2");
    set_ok(&c, "redis", "connect_timeout_ms", "5");
    set_ok(&c, "redis", "command_timeout_ms", "6");
    set_ok(&c, "redis", "key_prefix", "other:");
    set_ok(&c, "redis", "replicas_ack", "3");
    set_ok(&c, "redis", "replicas_timeout_ms", "5");
    set_ok(&c, "lock", "lease_ms", "100");
    set_ok(&c, "lock", "renew_every_ms", "10");
    set_ok(&c, "lock", "max_locks_per_client", "3");
    set_ok(&c, "lock", "max_waiters", "4");

    shipped_conf_path(path, sizeof(path));
    ck_assert_msg(conf_load(&c, path, err, sizeof(err)) == 0, "%s", err);
    assert_conf_eq(&c, &want);
}
END_TEST

/* ---- every key ---------------------------------------------------------- */

START_TEST(test_every_key_read_back) {
    static const char text[] =
        "; every key away from its default\n"
        "[server]\n"
        "socket = /tmp/dl.sock\n"
        "socket_mode = 0600\n"
        "max_clients = 5\n"
        "max_line = 8192\n"
        "max_output = 65536\n"
        "admin_uids = 0, 1000 2000\n"
        "log_level = debug\n"
        "\n"
        "[redis]\n"
        "url = redis://10.0.0.5:6380/2\n"
        "password = s3cret\n"
        "username = dlock\n"
        "connect_timeout_ms = 250\n"
        "command_timeout_ms = 750\n"
        "key_prefix = myapp:locks:\n"
        "\n"
        "[lock]\n"
        "lease_ms = 9000\n"
        "renew_every_ms = 1000\n"
        "max_locks_per_client = 7\n"
        "max_waiters = 42\n";
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, text, &path, err) == 0, "%s", err);
    ck_assert_str_eq(c.socket, "/tmp/dl.sock");
    ck_assert_uint_eq(c.socket_mode, 0600);
    ck_assert_uint_eq(c.max_clients, 5);
    ck_assert_uint_eq(c.max_line, 8192);
    ck_assert_uint_eq(c.max_output, 65536);
    ck_assert_uint_eq(c.admin_uids_count, 3);
    ck_assert_uint_eq(c.admin_uids[0], 0);
    ck_assert_uint_eq(c.admin_uids[1], 1000);
    ck_assert_uint_eq(c.admin_uids[2], 2000);
    ck_assert_int_eq(c.log_level, CONF_LOG_DEBUG);
    ck_assert_str_eq(c.url, "redis://10.0.0.5:6380/2");
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
    ck_assert_str_eq(c.redis_host, "10.0.0.5");
    ck_assert_int_eq(c.redis_port, 6380);
    ck_assert_int_eq(c.redis_db, 2);
    ck_assert_str_eq(c.password, "s3cret");
    ck_assert_str_eq(c.username, "dlock");
    ck_assert_int_eq(c.password_set, 1);
    ck_assert_int_eq(c.username_set, 1);
    ck_assert_uint_eq(c.connect_timeout_ms, 250);
    ck_assert_uint_eq(c.command_timeout_ms, 750);
    ck_assert_str_eq(c.key_prefix, "myapp:locks:");
    ck_assert_uint_eq(c.lease_ms, 9000);
    ck_assert_uint_eq(c.renew_every_ms, 1000);
    ck_assert_uint_eq(c.max_locks_per_client, 7);
    ck_assert_uint_eq(c.max_waiters, 42);

    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.renew_every_ms, 1000);
}
END_TEST

/* ---- Sentinel and replicas ---------------------------------------------- */

START_TEST(test_sentinel_keys) {
    static const char text[] =
        "[redis]\n"
        "sentinels = 10.0.0.1:26380 sentinel-b [::1]:26381 [fe80::1],10.0.0.4\n"
        "master_name = mymaster\n"
        "sentinel_username = watcher\n"
        "sentinel_password = spw\n"
        "password = dpw\n"
        "replicas_ack = 2\n"
        "replicas_timeout_ms = 500\n";
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    unsetenv(CONF_SENTINEL_PASSWORD_ENV);
    ck_assert_msg(load_text(&c, text, &path, err) == 0, "%s", err);
    ck_assert_uint_eq(c.sentinels_count, 5);
    ck_assert_str_eq(c.sentinels[0].host, "10.0.0.1");
    ck_assert_int_eq(c.sentinels[0].port, 26380);
    ck_assert_str_eq(c.sentinels[1].host, "sentinel-b");
    ck_assert_int_eq(c.sentinels[1].port, CONF_SENTINEL_PORT);
    ck_assert_str_eq(c.sentinels[2].host, "::1");
    ck_assert_int_eq(c.sentinels[2].port, 26381);
    ck_assert_str_eq(c.sentinels[3].host, "fe80::1");
    ck_assert_int_eq(c.sentinels[3].port, CONF_SENTINEL_PORT);
    ck_assert_str_eq(c.sentinels[4].host, "10.0.0.4");
    ck_assert_str_eq(c.master_name, "mymaster");
    ck_assert_str_eq(c.sentinel_username, "watcher");
    ck_assert_str_eq(c.sentinel_password, "spw");
    ck_assert_str_eq(c.password, "dpw");
    ck_assert_int_eq(c.replicas_ack, 2);
    ck_assert_uint_eq(c.replicas_timeout_ms, 500);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);

    setenv(CONF_SENTINEL_PASSWORD_ENV, "from-env", 1);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(c.sentinel_password, "from-env");
    ck_assert_str_eq(c.password, "dpw"); /* the data nodes' own */
    unsetenv(CONF_SENTINEL_PASSWORD_ENV);
}
END_TEST

START_TEST(test_replicas_ack_values) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    ck_assert_int_eq(c.replicas_ack, CONF_REPLICAS_AUTO);
    ck_assert_uint_eq(c.replicas_timeout_ms, 1000);
    set_ok(&c, "redis", "replicas_ack", "0");
    ck_assert_int_eq(c.replicas_ack, 0);
    set_ok(&c, "redis", "replicas_ack", "auto");
    ck_assert_int_eq(c.replicas_ack, CONF_REPLICAS_AUTO);
    const char *bad[] = {"", "-1", "65", "yes", "AUTO", "1x"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        ck_assert_msg(conf_set(&c, "redis", "replicas_ack", bad[i], err, sizeof(err)) != 0,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err, "replicas_ack") != NULL, "%s", err);
    }
    /* WAIT holds the command connection: it must end before the command's
     * deadline. */
    conf_defaults(&c);
    set_ok(&c, "redis", "command_timeout_ms", "1000");
    set_ok(&c, "redis", "replicas_timeout_ms", "1000");
    ck_assert_int_ne(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "replicas_timeout_ms") != NULL, "%s", err);
    set_ok(&c, "redis", "replicas_ack", "0"); /* no WAIT, no constraint */
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    /* Left unset, it fits under a short command_timeout_ms. */
    conf_defaults(&c);
    set_ok(&c, "redis", "command_timeout_ms", "750");
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.replicas_timeout_ms, 375);
}
END_TEST

START_TEST(test_sentinel_errors_name_the_line) {
    static const struct {
        const char *text;
        const char *where;
        const char *what;
    } cases[] = {
        {"[redis]\nurl = redis://h:1\nsentinels = a:1\nmaster_name = m\n", ":3: ",
         "exclude each other"},
        {"[redis]\nsentinels = a:1\nmaster_name = m\nurl = redis://h:1\n", ":4: ",
         "exclude each other"},
        {"[redis]\n; no name\nsentinels = a:1 b:2\n", ":3: ", "needs master_name"},
        {"[redis]\nmaster_name = m\n", ":2: ", "needs sentinels"},
        {"[redis]\nsentinels = a:0\nmaster_name = m\n", ":2: ", "sentinel address"},
        {"[redis]\nsentinels = a:70000\nmaster_name = m\n", ":2: ", "sentinel address"},
        {"[redis]\nsentinels = ::1:5\nmaster_name = m\n", ":2: ", "sentinel address"},
        {"[redis]\nsentinels = [::1\nmaster_name = m\n", ":2: ", "sentinel address"},
        {"[redis]\nsentinels = :5\nmaster_name = m\n", ":2: ", "sentinel address"},
        {"[redis]\nsentinels = a b c d e f g h i j k l m n o p q\nmaster_name = m\n", ":2: ",
         "more than 16 sentinel addresses"},
        {"[redis]\nsentinels = a\nmaster_name = my master\n", ":3: ", "master_name"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        conf_t c;
        char err[CONF_ERR_LEN];
        const char *path;
        ck_assert_msg(load_text(&c, cases[i].text, &path, err) != 0, "case %zu loaded", i);
        ck_assert_msg(strstr(err, cases[i].where) != NULL && strstr(err, cases[i].what) != NULL,
                      "case %zu: %s", i, err);
    }
}
END_TEST

/* ---- Cluster -------------------------------------------------------------------- */

START_TEST(test_cluster_keys) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, "[redis]\ncluster = 10.0.0.1:7000 node-b [::1]:7001\n"
                                "password = pw\n", &path, err) == 0, "%s", err);
    ck_assert_uint_eq(c.cluster_count, 3);
    ck_assert_str_eq(c.cluster[0].host, "10.0.0.1");
    ck_assert_int_eq(c.cluster[0].port, 7000);
    ck_assert_str_eq(c.cluster[1].host, "node-b");
    ck_assert_int_eq(c.cluster[1].port, CONF_REDIS_PORT);
    ck_assert_str_eq(c.cluster[2].host, "::1");
    ck_assert_int_eq(c.sharded_pubsub, CONF_SHARDED_AUTO);
    set_ok(&c, "redis", "sharded_pubsub", "no");
    ck_assert_int_eq(c.sharded_pubsub, CONF_SHARDED_NO);
    set_ok(&c, "redis", "sharded_pubsub", "yes");
    ck_assert_int_eq(c.sharded_pubsub, CONF_SHARDED_YES);
    ck_assert_int_ne(conf_set(&c, "redis", "sharded_pubsub", "maybe", err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "auto, yes, no") != NULL, "%s", err);
    /* tls applies, though no url names a host */
    set_ok(&c, "redis", "tls", "yes");
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    /* An empty cluster key (as -r sets it) is no topology at all. */
    ck_assert_msg(load_text(&c, "[redis]\ncluster =\nurl = redis://h:7\n", &path, err) == 0,
                  "%s", err);
    ck_assert_uint_eq(c.cluster_count, 0);
}
END_TEST

START_TEST(test_cluster_excludes_url_and_sentinels) {
    static const struct {
        const char *text;
        const char *where;
    } cases[] = {
        {"[redis]\nurl = redis://h:1\ncluster = a:1\n", ":3: "},
        {"[redis]\ncluster = a:1\nurl = redis://h:1\n", ":3: "},
        {"[redis]\ncluster = a:1\nsentinels = s:1\nmaster_name = m\n", ":3: "},
        {"[redis]\nsentinels = s:1\nmaster_name = m\ncluster = a:1\n", ":4: "},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        conf_t c;
        char err[CONF_ERR_LEN];
        const char *path;
        ck_assert_msg(load_text(&c, cases[i].text, &path, err) != 0, "case %zu loaded", i);
        ck_assert_msg(strstr(err, cases[i].where) != NULL &&
                          strstr(err, "exclude each other") != NULL,
                      "case %zu: %s", i, err);
    }
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;
    ck_assert_int_ne(load_text(&c, "[redis]\ncluster = a:0\n", &path, err), 0);
    ck_assert_msg(strstr(err, "cluster address") != NULL, "%s", err);
}
END_TEST

/* ---- quorum --------------------------------------------------------------------- */

START_TEST(test_quorum_keys) {
    conf_t c;
    char err[CONF_ERR_LEN], advice[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, "[redis]\nquorum = redis://a:7001 rediss://u:p%40w@b:7002/3 "
                                "unix:///run/r.sock?db=2\npassword = top\n", &path, err) == 0,
                  "%s", err);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.quorum_count, 3);
    ck_assert_str_eq(c.quorum[0].host, "a");
    ck_assert_int_eq(c.quorum[0].port, 7001);
    ck_assert_str_eq(c.quorum[0].password, ""); /* the password key applies (quorum.c) */
    ck_assert_int_eq(c.quorum[1].tls, 1);
    ck_assert_str_eq(c.quorum[1].username, "u");
    ck_assert_str_eq(c.quorum[1].password, "p@w");
    ck_assert_int_eq(c.quorum[1].db, 3);
    ck_assert_int_eq(c.quorum[2].kind, CONF_REDIS_UNIX);
    ck_assert_int_eq(c.quorum[2].db, 2);
    ck_assert_int_eq(c.tls, 1); /* a rediss:// node turns TLS on */
    /* Defaults: the rejoin delay is the longest lease; drift per lease. */
    ck_assert_uint_eq(c.rejoin_delay_ms, CONF_REJOIN_DEFAULT_MS);
    ck_assert_uint_eq(conf_clock_drift(&c, 30000), 302);
    ck_assert_int_eq(conf_warning(&c, advice, sizeof(advice)), 0);
    set_ok(&c, "redis", "clock_drift_ms", "50");
    ck_assert_uint_eq(conf_clock_drift(&c, 30000), 50);
    set_ok(&c, "redis", "clock_drift_ms", "auto");
    ck_assert_uint_eq(conf_clock_drift(&c, 1000), 12);
    /* lease_ms longer than the default delay: the delay follows it. */
    ck_assert_msg(load_text(&c, "[redis]\nquorum = redis://a redis://b redis://c\n"
                                "[lock]\nlease_ms = 90000\n", &path, err) == 0, "%s", err);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.rejoin_delay_ms, 90000);
    /* ... but a delay set below it is refused. */
    ck_assert_msg(load_text(&c, "[redis]\nquorum = redis://a redis://b redis://c\n"
                                "rejoin_delay_ms = 1000\n[lock]\nlease_ms = 2000\n",
                            &path, err) == 0, "%s", err);
    ck_assert_int_ne(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "rejoin_delay_ms") != NULL, "%s", err);
    /* A drift that would eat half the lease is refused. */
    ck_assert_msg(load_text(&c, "[redis]\nquorum = redis://a redis://b redis://c\n"
                                "clock_drift_ms = 1000\n[lock]\nlease_ms = 2000\n",
                            &path, err) == 0, "%s", err);
    ck_assert_int_ne(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "clock_drift_ms") != NULL, "%s", err);
    /* An even quorum is valid, with advice. */
    ck_assert_msg(load_text(&c, "[redis]\nquorum = redis://a redis://b redis://c redis://d\n",
                            &path, err) == 0, "%s", err);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(conf_warning(&c, advice, sizeof(advice)), 1);
    ck_assert_msg(strstr(advice, "even") != NULL, "%s", advice);
    /* Empty (as -r sets it): no topology. */
    ck_assert_msg(load_text(&c, "[redis]\nquorum =\nurl = redis://h:7\n", &path, err) == 0,
                  "%s", err);
    ck_assert_uint_eq(c.quorum_count, 0);
}
END_TEST

START_TEST(test_quorum_refused) {
    static const struct {
        const char *text;
        const char *what;
    } cases[] = {
        {"[redis]\nquorum = redis://a redis://b\n", "at least 3"},
        {"[redis]\nquorum = redis://a redis://b redis://a\n", "same server"},
        {"[redis]\nquorum = redis://a redis://b http://c\n", "quorum node 3"},
        {"[redis]\nurl = redis://h:1\nquorum = redis://a redis://b redis://c\n",
         "exclude each other"},
        {"[redis]\nquorum = redis://a redis://b redis://c\ncluster = a:1\n",
         "exclude each other"},
        {"[redis]\nquorum = redis://a redis://b redis://c redis://d redis://e redis://f "
         "redis://g redis://h redis://i redis://j\n", "more than 9"},
        {"[redis]\nclock_drift_ms = -1\n", "not a number"},
        {"[redis]\nrejoin_delay_ms = 5\n", "out of range"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        conf_t c;
        char err[CONF_ERR_LEN];
        const char *path;
        ck_assert_msg(load_text(&c, cases[i].text, &path, err) != 0, "case %zu loaded", i);
        ck_assert_msg(strstr(err, cases[i].what) != NULL, "case %zu: %s", i, err);
    }
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;
    ck_assert_msg(load_text(&c, "[redis]\ntls = no\nquorum = rediss://a redis://b redis://c\n",
                            &path, err) == 0, "%s", err);
    ck_assert_int_ne(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "tls = no") != NULL, "%s", err);
}
END_TEST

START_TEST(test_metrics_addresses) {
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_str_eq(c.metrics, ""); /* off */
    set_ok(&c, "server", "metrics", "127.0.0.1:9717");
    ck_assert_str_eq(c.metrics_addr.host, "127.0.0.1");
    ck_assert_int_eq(c.metrics_addr.port, 9717);
    set_ok(&c, "server", "metrics", "[::1]:9718");
    ck_assert_str_eq(c.metrics_addr.host, "::1");
    ck_assert_int_eq(c.metrics_addr.port, 9718);
    set_ok(&c, "server", "metrics", "localhost:1");
    ck_assert_str_eq(c.metrics_addr.host, "localhost");
    set_ok(&c, "server", "metrics", "/run/dlockd/metrics.sock");
    ck_assert_str_eq(c.metrics, "/run/dlockd/metrics.sock");
    ck_assert_int_eq(c.metrics_addr.port, 0); /* a path */
    set_ok(&c, "server", "metrics", "");
    ck_assert_str_eq(c.metrics, "");
    const char *bad[] = {"localhost", "9717", ":9717", "::1:9717", "h:0", "h:65536", "h:x",
                         "relative/path.sock", "/a b", "[::1]"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        ck_assert_msg(conf_set(&c, "server", "metrics", bad[i], err, sizeof(err)) != 0,
                      "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err, "metrics") != NULL, "%s", err);
    }
}
END_TEST

START_TEST(test_empty_sentinels_allow_url) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;
    /* An empty sentinels key (as a command-line -r override sets it) is
     * no topology at all. */
    ck_assert_msg(load_text(&c, "[redis]\nsentinels =\nurl = redis://h:7\n", &path, err) == 0,
                  "%s", err);
    ck_assert_uint_eq(c.sentinels_count, 0);
    ck_assert_int_eq(c.redis_port, 7);
}
END_TEST

START_TEST(test_crlf_file) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, "[server]\r\nmax_line = 100\r\nlog_level = warn\r\n",
                            &path, err) == 0, "%s", err);
    ck_assert_uint_eq(c.max_line, 100);
    ck_assert_int_eq(c.log_level, CONF_LOG_WARN);

    ck_assert_int_eq(load_text(&c, "[server]\r\n\r\nmax_line = 1\r\n", &path, err), -1);
    ASSERT_ERR_AT(err, path, 3);
}
END_TEST

START_TEST(test_log_levels) {
    static const struct {
        const char *word;
        conf_log_level_t level;
    } levels[] = {
        {"error", CONF_LOG_ERROR},
        {"warn", CONF_LOG_WARN},
        {"info", CONF_LOG_INFO},
        {"debug", CONF_LOG_DEBUG},
    };
    conf_t c;

    conf_defaults(&c);
    for (size_t i = 0; i < ARRAY_LEN(levels); i++) {
        set_ok(&c, "server", "log_level", levels[i].word);
        ck_assert_int_eq(c.log_level, levels[i].level);
        ck_assert_str_eq(conf_log_level_name(levels[i].level), levels[i].word);
    }
    ck_assert_str_eq(conf_log_level_name((conf_log_level_t)42), "?");
}
END_TEST

START_TEST(test_socket_mode_octal) {
    static const struct {
        const char *text;
        unsigned mode;
    } good[] = {
        {"0660", 0660}, {"660", 0660}, {"0600", 0600}, {"0", 0},
        {"0000", 0},    {"0777", 0777}, {"777", 0777}, {"7", 07},
    };
    static const char *const bad[] = {
        "0668", "08", "9", "07777", "1777", "1000", "", "abc", "0o660",
        "-1", "+660", "0x1ff", " 0660", "0660 ", "00660",
    };
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    for (size_t i = 0; i < ARRAY_LEN(good); i++) {
        set_ok(&c, "server", "socket_mode", good[i].text);
        ck_assert_uint_eq(c.socket_mode, good[i].mode);
    }
    set_ok(&c, "server", "socket_mode", "0640");
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        ck_assert_msg(conf_set(&c, "server", "socket_mode", bad[i], err, sizeof(err)) == -1,
                      "socket_mode '%s' accepted", bad[i]);
        ASSERT_HAS(err, "octal mode");
        ck_assert_uint_eq(c.socket_mode, 0640);
    }
}
END_TEST

START_TEST(test_socket_path_limits) {
    conf_t c;
    char err[CONF_ERR_LEN];
    char path[CONF_PATH_MAX + 2];

    conf_defaults(&c);
    memset(path, 's', sizeof(path));
    path[0] = '/';
    path[CONF_PATH_MAX] = '\0'; /* 107 bytes */
    set_ok(&c, "server", "socket", path);
    ck_assert_str_eq(c.socket, path);

    path[CONF_PATH_MAX] = 's';
    path[CONF_PATH_MAX + 1] = '\0'; /* 108 bytes */
    ck_assert_int_eq(conf_set(&c, "server", "socket", path, err, sizeof(err)), -1);
    ASSERT_HAS(err, "socket is longer than 107 bytes");

    ck_assert_int_eq(conf_set(&c, "server", "socket", "", err, sizeof(err)), -1);
    ASSERT_HAS(err, "socket must not be empty");

    ASSERT_LOAD_FAILS_AT("[server]\nsocket =\n", 2, "must not be empty");
}
END_TEST

START_TEST(test_key_prefix_rules) {
    conf_t c;
    char err[CONF_ERR_LEN];
    char prefix[CONF_PREFIX_MAX + 2];

    conf_defaults(&c);
    memset(prefix, 'p', sizeof(prefix));
    prefix[CONF_PREFIX_MAX] = '\0';
    set_ok(&c, "redis", "key_prefix", prefix);
    ck_assert_str_eq(c.key_prefix, prefix);

    prefix[CONF_PREFIX_MAX] = 'p';
    prefix[CONF_PREFIX_MAX + 1] = '\0';
    ck_assert_int_eq(conf_set(&c, "redis", "key_prefix", prefix, err, sizeof(err)), -1);
    ASSERT_HAS(err, "longer than 64 bytes");

    ck_assert_int_eq(conf_set(&c, "redis", "key_prefix", "a b", err, sizeof(err)), -1);
    ASSERT_HAS(err, "0x21-0x7E");
    ck_assert_int_eq(conf_set(&c, "redis", "key_prefix", "a\x7f", err, sizeof(err)), -1);
    ck_assert_int_eq(conf_set(&c, "redis", "key_prefix", "\xc3\xa9", err, sizeof(err)), -1);

    ASSERT_LOAD_FAILS_AT("[redis]\n\nkey_prefix = my prefix\n", 3, "0x21-0x7E");
}
END_TEST

START_TEST(test_empty_credential_keys_keep_url) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c,
                            "[redis]\n"
                            "url = redis://urluser:urlpass@h\n"
                            "password =\n"
                            "username =\n",
                            &path, err) == 0, "%s", err);
    ck_assert_str_eq(c.username, "urluser");
    ck_assert_str_eq(c.password, "urlpass");
    ck_assert_int_eq(c.password_set, 0);
    ck_assert_int_eq(c.username_set, 0);
}
END_TEST

/* ---- errors and their lines --------------------------------------------- */

START_TEST(test_unknown_section) {
    ASSERT_LOAD_FAILS_AT("[server]\nmax_line = 100\n\n[bogus]\nkey = 1\n", 5,
                         "unknown section [bogus]");
    ASSERT_LOAD_FAILS_AT("[Server]\nmax_line = 100\n", 2, "unknown section [Server]");
}
END_TEST

START_TEST(test_unknown_key) {
    ASSERT_LOAD_FAILS_AT("[server]\nsockets = /tmp/x\n", 2, "unknown key 'sockets' in [server]");
    ASSERT_LOAD_FAILS_AT("[server]\nmax_line = 100\n[redis]\n; c\nhost = h\n", 5,
                         "unknown key 'host' in [redis]");
    ASSERT_LOAD_FAILS_AT("[lock]\nlease_ms = 100\nrenew_ms = 10\n", 3,
                         "unknown key 'renew_ms' in [lock]");
    /* A key of another section is unknown here. */
    ASSERT_LOAD_FAILS_AT("[lock]\nmax_line = 100\n", 2, "unknown key 'max_line' in [lock]");
}
END_TEST

START_TEST(test_key_outside_section) {
    ASSERT_LOAD_FAILS_AT("; comment\nmax_line = 100\n[server]\n", 2,
                         "key 'max_line' outside of any section");
    ASSERT_LOAD_FAILS_AT("lease_ms = 100\n", 1, "key 'lease_ms' outside of any section");
}
END_TEST

START_TEST(test_malformed_numbers) {
    static const char *const bad[] = {"12a", "-1", "+5", "0x10", "1.5", "1e3", "1,000",
                                      "ten", "1 2"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        char text[256];
        char fragment[64];
        snprintf(text, sizeof(text), "; header\n\n[server]\n; note\nmax_clients = %s\n", bad[i]);
        snprintf(fragment, sizeof(fragment), "'%s' is not a number", bad[i]);
        ASSERT_LOAD_FAILS_AT(text, 5, fragment);
    }
    ASSERT_LOAD_FAILS_AT("[lock]\nlease_ms = 100\nmax_waiters =\n", 3, "empty value");
    ASSERT_LOAD_FAILS_AT("[redis]\nconnect_timeout_ms = 1s\n", 2, "not a number");
}
END_TEST

/* Every numeric key with its range; field locates it in conf_t. */
static const struct {
    const char *section;
    const char *key;
    uint32_t min, max;
    size_t field;
} ranges[] = {
    {"server", "max_clients", 1, 1000000, offsetof(conf_t, max_clients)},
    {"server", "max_line", 64, 1048576, offsetof(conf_t, max_line)},
    {"server", "max_output", 4096, 1073741824, offsetof(conf_t, max_output)},
    {"redis", "connect_timeout_ms", 1, 600000, offsetof(conf_t, connect_timeout_ms)},
    {"redis", "command_timeout_ms", 1, 600000, offsetof(conf_t, command_timeout_ms)},
    {"lock", "lease_ms", 10, 86400000, offsetof(conf_t, lease_ms)},
    {"lock", "renew_every_ms", 0, 86400000, offsetof(conf_t, renew_every_ms)},
    {"lock", "max_locks_per_client", 1, 1000000, offsetof(conf_t, max_locks_per_client)},
    {"lock", "max_waiters", 1, 10000000, offsetof(conf_t, max_waiters)},
};

START_TEST(test_number_range) {
    const char *section = ranges[_i].section;
    const char *key = ranges[_i].key;
    uint32_t min = ranges[_i].min, max = ranges[_i].max;
    char text[256], fragment[64];
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    /* Both ends are accepted. */
    snprintf(text, sizeof(text), "[%s]\n%s = %u\n", section, key, min);
    ck_assert_msg(load_text(&c, text, &path, err) == 0, "%s", err);
    ck_assert_uint_eq(*(uint32_t *)((char *)&c + ranges[_i].field), min);
    snprintf(text, sizeof(text), "[%s]\n%s = %u\n", section, key, max);
    ck_assert_msg(load_text(&c, text, &path, err) == 0, "%s", err);
    ck_assert_uint_eq(*(uint32_t *)((char *)&c + ranges[_i].field), max);

    /* One past either end is not, on the line that says so. */
    snprintf(fragment, sizeof(fragment), "out of range %u..%u", min, max);
    if (min > 0) {
        snprintf(text, sizeof(text), "[%s]\n; below\n%s = %u\n", section, key, min - 1);
        ASSERT_LOAD_FAILS_AT(text, 3, fragment);
    }
    snprintf(text, sizeof(text), "[%s]\n; above\n\n%s = %u\n", section, key, max + 1);
    ASSERT_LOAD_FAILS_AT(text, 4, fragment);
    snprintf(text, sizeof(text), "[%s]\n%s = 4294967296\n", section, key);
    ASSERT_LOAD_FAILS_AT(text, 2, "out of range");
    snprintf(text, sizeof(text), "[%s]\n%s = 99999999999999999999999\n", section, key);
    ASSERT_LOAD_FAILS_AT(text, 2, "out of range");
}
END_TEST

START_TEST(test_bad_socket_mode_in_file) {
    ASSERT_LOAD_FAILS_AT("[server]\nmax_line = 100\nsocket_mode = 0668\n", 3,
                         "'0668' is not an octal mode");
    ASSERT_LOAD_FAILS_AT("[server]\nsocket_mode = 1777\n", 2, "'1777' is not an octal mode");
    ASSERT_LOAD_FAILS_AT("[server]\nsocket_mode = rw-rw----\n", 2, "octal mode");
}
END_TEST

START_TEST(test_bad_log_level) {
    ASSERT_LOAD_FAILS_AT("[server]\n\nlog_level = verbose\n", 3,
                         "log_level 'verbose' is not one of error, warn, info, debug");
    ASSERT_LOAD_FAILS_AT("[server]\nlog_level = warning\n", 2, "'warning'");
    ASSERT_LOAD_FAILS_AT("[server]\nlog_level =\n", 2, "log_level");
}
END_TEST

static const char *const bad_urls[] = {
    "127.0.0.1:6379",           /* no scheme */
    "http://127.0.0.1:6379",    /* wrong scheme */
    "redis:/h",
    "redis://",                 /* empty host */
    "redis://:6379",
    "redis:///0",
    "redis://user:pw@",
    "redis://h:",               /* bad ports */
    "redis://h:abc",
    "redis://h:-1",
    "redis://h:+1",
    "redis://h:0",
    "redis://h:65536",
    "redis://h:99999999999999999",
    "redis://h/x",              /* bad db */
    "redis://h/-1",
    "redis://h/1000001",
    "redis://[::1",             /* bad IPv6 */
    "redis://[]:1",
    "redis://[::1]x",
    "redis://[::1]:",
    "unix://tmp/r.sock",        /* relative unix path */
    "unix://",
    "unix://?db=1",
    "unix:///tmp/r.sock?db=",
    "unix:///tmp/r.sock?db=x",
    "unix:///tmp/r.sock?db=1000001",
    "unix:///tmp/r.sock?foo=1",
    "redis://u:%zz@h",
};

START_TEST(test_bad_urls_in_file) {
    for (size_t i = 0; i < ARRAY_LEN(bad_urls); i++) {
        char text[512];
        snprintf(text, sizeof(text), "[redis]\n; the url\n\nurl = %s\n", bad_urls[i]);
        /* The url is quoted back, but never its user:password. */
        const char *want = bad_urls[i];
        if (bad_urls[i][0] == 'r' && strchr(bad_urls[i], '%')) want = "bad user or password";
        else if (strchr(bad_urls[i], '@')) want = "redis://***@";
        ASSERT_LOAD_FAILS_AT(text, 4, want);
    }
}
END_TEST

START_TEST(test_url_errors_hide_credentials) {
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://user:s3cret@:99999", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "s3cret") == NULL, "the password leaked: %s", err);
}
END_TEST

START_TEST(test_indented_and_nul_lines_refused) {
    ASSERT_LOAD_FAILS_AT("[server]\nsocket = /a\n  max_clients = 5\n", 3, "indented line");
    static const char with_nul[] = "[server]\nsocket = /a\0junk\n";
    char path[TMP_PATH_LEN];
    snprintf(path, sizeof(path), "%s", write_conf_n(with_nul, sizeof(with_nul) - 1));
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, ":2: NUL byte") != NULL, "%s", err);
}
END_TEST

START_TEST(test_password_sources) {
    conf_t c;
    char err[CONF_ERR_LEN], path[TMP_PATH_LEN];
    snprintf(path, sizeof(path), "%s", write_conf_n("from-file\nsecond line ignored\n", 30));
    conf_defaults(&c);
    ck_assert_int_eq(conf_set(&c, "redis", "password", "from-key", err, sizeof(err)), 0);
    ck_assert_int_eq(conf_set(&c, "redis", "password_file", path, err, sizeof(err)), 0);
    unsetenv(CONF_PASSWORD_ENV);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.password, "from-file");
    setenv(CONF_PASSWORD_ENV, "from-env", 1);
    conf_defaults(&c);
    ck_assert_int_eq(conf_set(&c, "redis", "password_file", path, err, sizeof(err)), 0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.password, "from-env");
    unsetenv(CONF_PASSWORD_ENV);
    conf_defaults(&c);
    ck_assert_int_eq(conf_set(&c, "redis", "password_file", "/nonexistent/pw", err, sizeof(err)), 0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "password_file /nonexistent/pw") != NULL, "%s", err);
}
END_TEST

START_TEST(test_root_refuses_writable_files) {
    if (geteuid() != 0) return; /* the rule is for root only */
    char path[TMP_PATH_LEN];
    snprintf(path, sizeof(path), "%s", write_conf_n("[server]\n", 9));
    ck_assert_int_eq(chmod(path, 0666), 0);
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "others can write") != NULL, "%s", err);
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), 0);
    ck_assert_int_eq(chown(path, 0, 0), 0);
    ck_assert_int_eq(chmod(path, 0664), 0); /* root's group may write: fine */
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), 0);
    ck_assert_int_eq(chown(path, 0, 4242), 0);
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), -1);
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(chown(path, 65534, 0), 0);
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_socket_group) {
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(c.socket_group_set, 0);
    ck_assert_int_eq(conf_set(&c, "server", "socket_group", "0", err, sizeof(err)), 0);
    ck_assert_int_eq(c.socket_group_set, 1);
    ck_assert_int_eq(c.socket_gid, 0);
    ck_assert_int_eq(conf_set(&c, "server", "socket_group", "root", err, sizeof(err)), 0);
    ck_assert_int_eq(c.socket_gid, 0);
    ck_assert_int_eq(conf_set(&c, "server", "socket_group", "no-such-group-xyz", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "no such group") != NULL, "%s", err);
}
END_TEST

START_TEST(test_bad_urls_leave_conf_alone) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    set_ok(&c, "redis", "url", "redis://u:p@keep:7000/3");
    for (size_t i = 0; i < ARRAY_LEN(bad_urls); i++) {
        err[0] = '\0';
        ck_assert_msg(conf_parse_redis_url(&c, bad_urls[i], err, sizeof(err)) == -1,
                      "url '%s' accepted", bad_urls[i]);
        ck_assert_str_ne(err, "");
        ck_assert_str_eq(c.url, "redis://u:p@keep:7000/3");
        ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
        ck_assert_str_eq(c.redis_host, "keep");
        ck_assert_int_eq(c.redis_port, 7000);
        ck_assert_int_eq(c.redis_db, 3);
        ck_assert_str_eq(c.username, "u");
        ck_assert_str_eq(c.password, "p");
    }
}
END_TEST

START_TEST(test_syntax_error_line) {
    ASSERT_LOAD_FAILS_AT("[server]\nmax_line 100\n", 2, "syntax error");
    ASSERT_LOAD_FAILS_AT("[server\nmax_line = 100\n", 1, "syntax error");
    ASSERT_LOAD_FAILS_AT("[server]\nmax_line = 100\n\n; fine\n# fine\njust words\n", 6,
                         "syntax error");
}
END_TEST

START_TEST(test_first_error_is_reported) {
    /* A key error before a syntax error... */
    ASSERT_LOAD_FAILS_AT("[server]\nbogus = 1\n\nno equals sign\n", 2, "unknown key 'bogus'");
    /* ...and a syntax error before a key error. */
    ASSERT_LOAD_FAILS_AT("[server]\nno equals sign\n\nbogus = 1\n", 2, "syntax error");
    /* Two key errors: the first. */
    ASSERT_LOAD_FAILS_AT("[lock]\nlease_ms = 1\nmax_waiters = 0\n", 2, "1 is out of range");
}
END_TEST

START_TEST(test_error_line_counts_comments_and_blanks) {
    ASSERT_LOAD_FAILS_AT("; one\n"
                         "# two\n"
                         "\n"
                         "[server]\n"
                         "   ; five, indented\n"
                         "max_line = 4096\n"
                         "\n"
                         "[lock]\n"
                         "; nine\n"
                         "lease_ms = 5\n"
                         "max_waiters = 10\n",
                         10, "5 is out of range 10..86400000");
}
END_TEST

START_TEST(test_missing_file) {
    const char *path = "/tmp/dlockd-test-no-such-dir/none.conf";
    char err[CONF_ERR_LEN] = "";
    char want[256];
    conf_t c;

    conf_defaults(&c);
    ck_assert_int_eq(conf_load(&c, path, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s: %s", path, strerror(ENOENT));
    ck_assert_str_eq(err, want);
    ck_assert_uint_eq(c.max_line, 4096);
}
END_TEST

/* ---- redis urls --------------------------------------------------------- */

START_TEST(test_url_host_only) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h", err, sizeof(err)), 0);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
    ck_assert_str_eq(c.redis_host, "h");
    ck_assert_int_eq(c.redis_port, 6379);
    ck_assert_int_eq(c.redis_db, 0);
    ck_assert_str_eq(c.username, "");
    ck_assert_str_eq(c.password, "");
    ck_assert_str_eq(c.url, "redis://h");

    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h/", err, sizeof(err)), 0);
    ck_assert_str_eq(c.redis_host, "h");
    ck_assert_int_eq(c.redis_db, 0);
}
END_TEST

START_TEST(test_url_port_and_db) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h:1234/5", err, sizeof(err)), 0);
    ck_assert_str_eq(c.redis_host, "h");
    ck_assert_int_eq(c.redis_port, 1234);
    ck_assert_int_eq(c.redis_db, 5);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://redis.example.com:65535", err,
                                          sizeof(err)), 0);
    ck_assert_str_eq(c.redis_host, "redis.example.com");
    ck_assert_int_eq(c.redis_port, 65535);
    ck_assert_int_eq(c.redis_db, 0);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h:1/1000000", err, sizeof(err)), 0);
    ck_assert_int_eq(c.redis_port, 1);
    ck_assert_int_eq(c.redis_db, 1000000);
}
END_TEST

START_TEST(test_url_credentials_decoded) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://user:pa%40ss@h:1/2", err, sizeof(err)),
                     0);
    ck_assert_str_eq(c.username, "user");
    ck_assert_str_eq(c.password, "pa@ss");
    ck_assert_str_eq(c.redis_host, "h");
    ck_assert_int_eq(c.redis_port, 1);
    ck_assert_int_eq(c.redis_db, 2);

    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://:only%3apass@h", err, sizeof(err)), 0);
    ck_assert_str_eq(c.username, "");
    ck_assert_str_eq(c.password, "only:pass");

    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://who@h", err, sizeof(err)), 0);
    ck_assert_str_eq(c.username, "who");
    ck_assert_str_eq(c.password, "");

    /* A later url without credentials clears those of the earlier one. */
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h", err, sizeof(err)), 0);
    ck_assert_str_eq(c.username, "");
    ck_assert_str_eq(c.password, "");
}
END_TEST

START_TEST(test_url_credentials_from_file) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, "[redis]\nurl = redis://user:pa%40ss@h:1/2\n", &path, err) == 0,
                  "%s", err);
    ck_assert_str_eq(c.username, "user");
    ck_assert_str_eq(c.password, "pa@ss");
    ck_assert_int_eq(c.redis_db, 2);
}
END_TEST

START_TEST(test_url_ipv6) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://[::1]:7000", err, sizeof(err)), 0);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
    ck_assert_str_eq(c.redis_host, "::1");
    ck_assert_int_eq(c.redis_port, 7000);
    ck_assert_int_eq(c.redis_db, 0);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://[::1]", err, sizeof(err)), 0);
    ck_assert_str_eq(c.redis_host, "::1");
    ck_assert_int_eq(c.redis_port, 6379);
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://u:p@[fe80::1]:6380/4", err,
                                          sizeof(err)), 0);
    ck_assert_str_eq(c.redis_host, "fe80::1");
    ck_assert_int_eq(c.redis_port, 6380);
    ck_assert_int_eq(c.redis_db, 4);
    ck_assert_str_eq(c.password, "p");
}
END_TEST

START_TEST(test_url_unix) {
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "unix:///tmp/r.sock", err, sizeof(err)), 0);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_UNIX);
    ck_assert_str_eq(c.redis_host, "/tmp/r.sock");
    ck_assert_int_eq(c.redis_db, 0);
    ck_assert_str_eq(c.url, "unix:///tmp/r.sock");

    ck_assert_int_eq(conf_parse_redis_url(&c, "unix:///tmp/r.sock?db=3", err, sizeof(err)), 0);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_UNIX);
    ck_assert_str_eq(c.redis_host, "/tmp/r.sock");
    ck_assert_int_eq(c.redis_db, 3);

    /* Back to TCP. */
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h", err, sizeof(err)), 0);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
}
END_TEST

START_TEST(test_url_length_limits) {
    conf_t c;
    char err[CONF_ERR_LEN];
    char url[CONF_STR_MAX + 16];

    conf_defaults(&c);
    /* unix path: 107 bytes fit sun_path, 108 do not. */
    strcpy(url, "unix://");
    memset(url + 7, 'u', CONF_PATH_MAX);
    url[7] = '/';
    url[7 + CONF_PATH_MAX] = '\0';
    ck_assert_int_eq(conf_parse_redis_url(&c, url, err, sizeof(err)), 0);
    ck_assert_uint_eq(strlen(c.redis_host), CONF_PATH_MAX);
    url[7 + CONF_PATH_MAX] = 'u';
    url[8 + CONF_PATH_MAX] = '\0';
    ck_assert_int_eq(conf_parse_redis_url(&c, url, err, sizeof(err)), -1);

    /* A url of 255 bytes is accepted, 256 is not. */
    strcpy(url, "redis://");
    memset(url + 8, 'h', CONF_STR_MAX - 1 - 8);
    url[CONF_STR_MAX - 1] = '\0';
    ck_assert_msg(conf_parse_redis_url(&c, url, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(strlen(c.url), CONF_STR_MAX - 1);
    url[CONF_STR_MAX - 1] = 'h';
    url[CONF_STR_MAX] = '\0';
    ck_assert_int_eq(conf_parse_redis_url(&c, url, err, sizeof(err)), -1);
    ASSERT_HAS(err, "url is longer than 255 bytes");
}
END_TEST

START_TEST(test_url_percent_escape_malformed) {
    static const char *const bad[] = {
        "redis://u:%4@h", "redis://u:%@h", "redis://u:%zz@h", "redis://u:%g1@h",
        "redis://u:%00@h", "redis://%4@h",
    };
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        ck_assert_msg(conf_parse_redis_url(&c, bad[i], err, sizeof(err)) == -1,
                      "url '%s' accepted", bad[i]);
        ASSERT_HAS(err, "bad user or password");
    }
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://u:%41%2f%2F@h", err, sizeof(err)), 0);
    ck_assert_str_eq(c.password, "A//");
}
END_TEST

/* Pins a bug: url_decode uses strtol, which takes a sign or a leading space,
 * so "%+4", "% 4" and "%-1" decode to 0x04, 0x04 and 0xFF. */
START_TEST(test_url_percent_escape_needs_two_hex_digits) {
    static const char *const bad[] = {"redis://u:%+4@h", "redis://u:% 4@h", "redis://u:%-1@h"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        conf_t c;
        char err[CONF_ERR_LEN] = "";
        conf_defaults(&c);
        ck_assert_msg(conf_parse_redis_url(&c, bad[i], err, sizeof(err)) == -1,
                      "url '%s' accepted, password decoded to 0x%02x", bad[i],
                      (unsigned char)c.password[0]);
    }
}
END_TEST

START_TEST(test_credential_keys_override_url) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    /* Keys after the url. */
    ck_assert_msg(load_text(&c,
                            "[redis]\n"
                            "url = redis://urluser:urlpass@h\n"
                            "password = keypass\n"
                            "username = keyuser\n",
                            &path, err) == 0, "%s", err);
    ck_assert_str_eq(c.username, "keyuser");
    ck_assert_str_eq(c.password, "keypass");
    ck_assert_str_eq(c.redis_host, "h");

    /* Keys before the url. */
    ck_assert_msg(load_text(&c,
                            "[redis]\n"
                            "password = keypass\n"
                            "username = keyuser\n"
                            "url = redis://urluser:urlpass@h\n",
                            &path, err) == 0, "%s", err);
    ck_assert_str_eq(c.username, "keyuser");
    ck_assert_str_eq(c.password, "keypass");

    /* Only the password key: the user still comes from the url. */
    ck_assert_msg(load_text(&c,
                            "[redis]\n"
                            "password = keypass\n"
                            "url = redis://urluser:urlpass@h\n",
                            &path, err) == 0, "%s", err);
    ck_assert_str_eq(c.username, "urluser");
    ck_assert_str_eq(c.password, "keypass");

    /* A command-line url override keeps the key's password. */
    set_ok(&c, "redis", "url", "unix:///tmp/r.sock?db=1");
    ck_assert_str_eq(c.password, "keypass");
    ck_assert_str_eq(c.username, "");
}
END_TEST

/* ---- admin uids --------------------------------------------------------- */

START_TEST(test_admin_uids_list) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, "[server]\nadmin_uids = 0, 1000 2000\n", &path, err) == 0, "%s",
                  err);
    ck_assert_uint_eq(c.admin_uids_count, 3);
    ck_assert_uint_eq(c.admin_uids[0], 0);
    ck_assert_uint_eq(c.admin_uids[1], 1000);
    ck_assert_uint_eq(c.admin_uids[2], 2000);

    set_ok(&c, "server", "admin_uids", " 5,,6\t7 , ");
    ck_assert_uint_eq(c.admin_uids_count, 3);
    ck_assert_uint_eq(c.admin_uids[0], 5);
    ck_assert_uint_eq(c.admin_uids[1], 6);
    ck_assert_uint_eq(c.admin_uids[2], 7);

    set_ok(&c, "server", "admin_uids", "2147483647");
    ck_assert_uint_eq(c.admin_uids_count, 1);
    ck_assert_uint_eq(c.admin_uids[0], 2147483647u);

    set_ok(&c, "server", "admin_uids", "");
    ck_assert_uint_eq(c.admin_uids_count, 0);
}
END_TEST

START_TEST(test_admin_uids_limit) {
    char list[CONF_ADMIN_UIDS_MAX * 8 + 16];
    size_t len = 0;
    conf_t c;
    char err[CONF_ERR_LEN];

    for (int i = 0; i < CONF_ADMIN_UIDS_MAX; i++)
        len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", i ? "," : "", i);
    conf_defaults(&c);
    set_ok(&c, "server", "admin_uids", list);
    ck_assert_uint_eq(c.admin_uids_count, CONF_ADMIN_UIDS_MAX);
    ck_assert_uint_eq(c.admin_uids[CONF_ADMIN_UIDS_MAX - 1], CONF_ADMIN_UIDS_MAX - 1);

    /* One more is too many, and the list in force stays. */
    set_ok(&c, "server", "admin_uids", "42");
    snprintf(list + len, sizeof(list) - len, ",%d", CONF_ADMIN_UIDS_MAX);
    ck_assert_int_eq(conf_set(&c, "server", "admin_uids", list, err, sizeof(err)), -1);
    ASSERT_HAS(err, "more than 64 admin uids");
    ck_assert_uint_eq(c.admin_uids_count, 1);
    ck_assert_uint_eq(c.admin_uids[0], 42);

    /* In a file, on its line: 65 single digits fit one line. */
    char text[512];
    len = (size_t)snprintf(text, sizeof(text), "[server]\n; many\nadmin_uids = ");
    for (int i = 0; i <= CONF_ADMIN_UIDS_MAX; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%d ", i % 10);
    snprintf(text + len, sizeof(text) - len, "\n");
    ASSERT_LOAD_FAILS_AT(text, 3, "more than 64 admin uids");
}
END_TEST

START_TEST(test_admin_uids_bad) {
    static const char *const bad[] = {"root", "1000x", "-1", "0x10", "2147483648",
                                      "12345678901234567890", "0 1000 nobody"};
    conf_t c;
    char err[CONF_ERR_LEN];

    conf_defaults(&c);
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        ck_assert_msg(conf_set(&c, "server", "admin_uids", bad[i], err, sizeof(err)) == -1,
                      "admin_uids '%s' accepted", bad[i]);
        ck_assert_uint_eq(c.admin_uids_count, 1);
        ck_assert_uint_eq(c.admin_uids[0], 0);
    }
    ASSERT_LOAD_FAILS_AT("[server]\nmax_line = 100\nadmin_uids = 0, root\n", 3, "'root'");
}
END_TEST

START_TEST(test_is_admin) {
    conf_t c;

    conf_defaults(&c);
    ck_assert_int_eq(conf_is_admin(&c, 0), 1);
    ck_assert_int_eq(conf_is_admin(&c, 1000), 0);
    ck_assert_int_eq(conf_is_admin(&c, (uid_t)-1), 0);

    set_ok(&c, "server", "admin_uids", "1000 2000");
    ck_assert_int_eq(conf_is_admin(&c, 0), 0);
    ck_assert_int_eq(conf_is_admin(&c, 1000), 1);
    ck_assert_int_eq(conf_is_admin(&c, 2000), 1);
    ck_assert_int_eq(conf_is_admin(&c, 1500), 0);

    set_ok(&c, "server", "admin_uids", "");
    ck_assert_int_eq(conf_is_admin(&c, 0), 0);
    ck_assert_int_eq(conf_is_admin(&c, 1000), 0);
}
END_TEST

/* ---- conf_finish and conf_set ------------------------------------------- */

START_TEST(test_finish_derives_renew) {
    static const struct {
        const char *lease;
        uint32_t renew;
    } cases[] = {{"30000", 10000}, {"9000", 3000}, {"10", 3}, {"11", 3}, {"86400000", 28800000}};
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        conf_t c;
        char err[CONF_ERR_LEN] = "";
        conf_defaults(&c);
        set_ok(&c, "lock", "lease_ms", cases[i].lease);
        ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(c.renew_every_ms, cases[i].renew);
    }
}
END_TEST

START_TEST(test_finish_keeps_explicit_renew) {
    conf_t c;
    char err[CONF_ERR_LEN] = "";

    conf_defaults(&c);
    set_ok(&c, "lock", "lease_ms", "9000");
    set_ok(&c, "lock", "renew_every_ms", "8999");
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.renew_every_ms, 8999);
}
END_TEST

START_TEST(test_finish_rejects_renew_not_below_lease) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    conf_defaults(&c);
    set_ok(&c, "lock", "lease_ms", "9000");
    set_ok(&c, "lock", "renew_every_ms", "9000");
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "renew_every_ms (9000) must be below lease_ms (9000)");

    set_ok(&c, "lock", "renew_every_ms", "20000");
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "renew_every_ms (20000) must be below lease_ms (9000)");

    /* From a file: loading succeeds, finishing does not. */
    ck_assert_msg(load_text(&c, "[lock]\nrenew_every_ms = 40000\n", &path, err) == 0, "%s", err);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ASSERT_HAS(err, "must be below lease_ms (30000)");
}
END_TEST

START_TEST(test_conf_set_overrides) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ck_assert_msg(load_text(&c, "[server]\nmax_line = 100\n[lock]\nlease_ms = 5000\n", &path,
                            err) == 0, "%s", err);
    ck_assert_uint_eq(c.max_line, 100);
    set_ok(&c, "server", "max_line", "8192");
    set_ok(&c, "lock", "lease_ms", "60000");
    set_ok(&c, "redis", "url", "unix:///run/redis.sock?db=2");
    ck_assert_uint_eq(c.max_line, 8192);
    ck_assert_uint_eq(c.lease_ms, 60000);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_UNIX);
    ck_assert_int_eq(c.redis_db, 2);
    ck_assert_msg(conf_finish(&c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(c.renew_every_ms, 20000);

    /* Errors from conf_set carry no file:line. */
    ck_assert_int_eq(conf_set(&c, "server", "max_line", "abc", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "'abc' is not a number (digits only)");
    ck_assert_uint_eq(c.max_line, 8192);
    ck_assert_int_eq(conf_set(&c, "server", "max_line", "63", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "63 is out of range 64..1048576");
    ck_assert_int_eq(conf_set(&c, "server", "max_line", "", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "empty value, expected a number from 64 to 1048576");
    ck_assert_int_eq(conf_set(&c, "nope", "max_line", "100", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown section [nope]");
    ck_assert_int_eq(conf_set(&c, "", "max_line", "100", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "key 'max_line' outside of any section");
    ck_assert_int_eq(conf_set(&c, "lock", "lease", "100", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown key 'lease' in [lock]");

    /* A small error buffer is truncated, not overrun. */
    char small[8];
    memset(small, 'X', sizeof(small));
    ck_assert_int_eq(conf_set(&c, "nope", "k", "v", small, sizeof(small)), -1);
    ck_assert_str_eq(small, "unknown");
}
END_TEST

/* ---- lines longer than inih's line buffer -------------------------------- */

/* Pins a bug: inih (Debian libinih 55, INI_MAX_LINE 200) hands conf.c a long
 * line in pieces of 199 bytes; the rest is parsed as a line of its own. */
START_TEST(test_long_comment_line_loads) {
    char text[512];
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    int n = snprintf(text, sizeof(text), "[server]\n; ");
    memset(text + n, 'c', 300);
    snprintf(text + n + 300, sizeof(text) - (size_t)n - 300, "\nmax_line = 100\n");
    ck_assert_msg(load_text(&c, text, &path, err) == 0, "%s", err);
    ck_assert_uint_eq(c.max_line, 100);
}
END_TEST

START_TEST(test_long_password_read_intact) {
    char text[512];
    char password[231];
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    /* 230 bytes: well below CONF_STR_MAX. */
    memset(password, 'p', sizeof(password) - 1);
    password[sizeof(password) - 1] = '\0';
    snprintf(text, sizeof(text), "[redis]\npassword = %s\n", password);
    ck_assert_msg(load_text(&c, text, &path, err) == 0, "%s", err);
    ck_assert_uint_eq(strlen(c.password), 230);
    ck_assert_str_eq(c.password, password);
}
END_TEST

START_TEST(test_long_line_tail_is_not_a_key) {
    char text[512];
    char password[205];
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    /* 188 bytes reach inih's cut; the rest looks like a key of its own. */
    memset(password, 'p', 188);
    strcpy(password + 188, "key_prefix=evil:");
    snprintf(text, sizeof(text), "[redis]\npassword = %s\n", password);
    int rc = load_text(&c, text, &path, err);
    ck_assert_str_eq(c.key_prefix, "dlock:");
    if (rc == 0)
        ck_assert_str_eq(c.password, password);
    else
        ASSERT_ERR_AT(err, path, 2); /* or refused, on its own line */
}
END_TEST

START_TEST(test_line_numbers_after_long_line) {
    char text[512];

    /* Line 2 is a long comment whose tail is blank; line 3 is wrong. */
    int n = snprintf(text, sizeof(text), "[server]\n; ");
    memset(text + n, 'c', 197);
    memset(text + n + 197, ' ', 20);
    snprintf(text + n + 217, sizeof(text) - (size_t)n - 217, "\nmax_line = 1\n");
    ASSERT_LOAD_FAILS_AT(text, 3, "1 is out of range");
}
END_TEST

/* Pins a bug: fopen() of a directory succeeds on Linux, the first read
 * fails with EISDIR, inih takes that for the end of an empty file, and
 * conf_load() returns 0 with nothing read. */
START_TEST(test_directory_is_not_a_config_file) {
    char err[CONF_ERR_LEN] = "";
    conf_t c;

    snprintf(tmp_dir, sizeof(tmp_dir), "%s/dir-XXXXXX", run_dir);
    ck_assert_ptr_nonnull(mkdtemp(tmp_dir));
    conf_defaults(&c);
    ck_assert_int_eq(conf_load(&c, tmp_dir, err, sizeof(err)), -1);
    ck_assert_int_eq(strncmp(err, tmp_dir, strlen(tmp_dir)), 0);
}
END_TEST

/* ---- suite -------------------------------------------------------------- */


/* ---- TLS ------------------------------------------------------------------ */

START_TEST(test_tls_defaults_off) {
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.tls, 0);
    ck_assert_str_eq(c.tls_ca_file, "");
    ck_assert_str_eq(c.tls_server_name, "");
}
END_TEST

START_TEST(test_tls_rediss_url_turns_it_on) {
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "rediss://u:p@h:6380/2", err, sizeof(err)), 0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.tls, 1);
    ck_assert_int_eq(c.redis_kind, CONF_REDIS_TCP);
    ck_assert_str_eq(c.redis_host, "h");
    ck_assert_int_eq(c.redis_port, 6380);
    ck_assert_int_eq(c.redis_db, 2);
    ck_assert_str_eq(c.username, "u");
    ck_assert_str_eq(c.password, "p");

    /* Back to a plain url: TLS off again. */
    ck_assert_int_eq(conf_parse_redis_url(&c, "redis://h", err, sizeof(err)), 0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.tls, 0);
}
END_TEST

START_TEST(test_tls_keys) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;
    ck_assert_int_eq(load_text(&c,
                               "[redis]\nurl = redis://127.0.0.1:6390\ntls = yes\n"
                               "tls_ca_file = /etc/ca.pem\ntls_cert_file = /etc/c.pem\n"
                               "tls_key_file = /etc/k.pem\ntls_server_name = redis.example\n",
                               &path, err),
                     0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), 0);
    ck_assert_int_eq(c.tls, 1);
    ck_assert_str_eq(c.tls_ca_file, "/etc/ca.pem");
    ck_assert_str_eq(c.tls_cert_file, "/etc/c.pem");
    ck_assert_str_eq(c.tls_key_file, "/etc/k.pem");
    ck_assert_str_eq(c.tls_server_name, "redis.example");
}
END_TEST

START_TEST(test_tls_errors) {
    conf_t c;
    char err[CONF_ERR_LEN];
    const char *path;

    ASSERT_LOAD_FAILS_AT("[redis]\ntls = maybe\n", 2, "tls 'maybe' is not yes or no");

    /* rediss:// with tls = no */
    ck_assert_int_eq(load_text(&c, "[redis]\nurl = rediss://h\ntls = no\n", &path, err), 0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ASSERT_HAS(err, "rediss:// url needs TLS");

    /* TLS over a Unix socket */
    ck_assert_int_eq(load_text(&c, "[redis]\nurl = unix:///tmp/r.sock\ntls = yes\n", &path,
                               err),
                     0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ASSERT_HAS(err, "not to a unix:// url");

    /* a certificate without its key */
    ck_assert_int_eq(load_text(&c, "[redis]\ntls = yes\ntls_cert_file = /c.pem\n", &path, err),
                     0);
    ck_assert_int_eq(conf_finish(&c, err, sizeof(err)), -1);
    ASSERT_HAS(err, "tls_cert_file and tls_key_file go together");

    /* a path too long */
    char text[512];
    snprintf(text, sizeof(text), "[redis]\ntls_ca_file = /%0*d\n", CONF_PATH_MAX + 1, 0);
    ASSERT_LOAD_FAILS_AT(text, 2, "tls_ca_file is longer than");
}
END_TEST

START_TEST(test_tls_url_errors_hide_credentials) {
    conf_t c;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    ck_assert_int_eq(conf_parse_redis_url(&c, "rediss://u:secret@", err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "secret") == NULL, "error shows the password: %s", err);
    ASSERT_HAS(err, "rediss://***@");
}
END_TEST

/* ---- the key table and the reload diff ---------------------------------- */

static int diff_has(const conf_key_t *const *rows, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i]->name, name) == 0) return 1;
    return 0;
}

/* Each (section, name) once, found by conf_key_find, with what its type
 * needs: a parser, a field inside conf_t, a count for a list. */
START_TEST(test_key_table_is_well_formed) {
    size_t n;
    const conf_key_t *keys = conf_keys(&n);

    ck_assert_uint_gt(n, 0);
    ck_assert_uint_le(n, CONF_KEYS_MAX);
    for (size_t i = 0; i < n; i++) {
        const conf_key_t *k = &keys[i];
        ck_assert_msg(k->section != NULL && k->name != NULL && k->name[0] != '\0', "row %zu", i);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(keys[j].section, k->section) != 0 ||
                          strcmp(keys[j].name, k->name) != 0,
                          "[%s] %s is in the table twice", k->section, k->name);
        ck_assert_ptr_eq(conf_key_find(k->section, k->name), k);
        /* A section's keys together (a reload names them one line each). */
        if (i > 0 && strcmp(keys[i - 1].section, k->section) != 0)
            for (size_t j = 0; j + 1 < i; j++)
                ck_assert_msg(strcmp(keys[j].section, k->section) != 0,
                              "[%s] %s is apart from its section's other keys", k->section,
                              k->name);
        ck_assert_uint_gt(k->size, 0);
        ck_assert_uint_le(k->offset + k->size, sizeof(conf_t));
        if (k->parse == NULL)
            ck_assert_msg(k->type == CONF_TYPE_U32 || k->type == CONF_TYPE_ENUM ||
                          k->type == CONF_TYPE_STR || k->type == CONF_TYPE_MODE,
                          "[%s] %s: its type has no parser of its own", k->section, k->name);
        if (k->type == CONF_TYPE_ENUM) ck_assert_ptr_nonnull(k->names);
        if (k->type == CONF_TYPE_U32) ck_assert_uint_le(k->min, k->max);
        if (k->type == CONF_TYPE_UIDS || k->type == CONF_TYPE_ADDRS || k->type == CONF_TYPE_URLS)
            ck_assert_msg(k->count != 0, "[%s] %s: a list without a count", k->section, k->name);
    }
    ck_assert_ptr_null(conf_key_find("redis", "socket"));
    ck_assert_ptr_null(conf_key_find("", "socket"));
    ck_assert_ptr_null(conf_key_find("server", "nope"));
}
END_TEST

/* Every key parses its own default, to the value conf_defaults() gives it. */
START_TEST(test_key_defaults_parse) {
    size_t n;
    const conf_key_t *keys = conf_keys(&n);
    conf_t want, c;
    conf_diff_t d;

    conf_defaults(&want);
    for (size_t i = 0; i < n; i++) {
        const conf_key_t *k = &keys[i];
        char err[CONF_ERR_LEN] = "";
        if (k->def == NULL) continue; /* unset: conf_finish() derives it */
        conf_defaults(&c);
        ck_assert_msg(conf_set(&c, k->section, k->name, k->def, err, sizeof(err)) == 0,
                      "[%s] %s = %s: %s", k->section, k->name, k->def, err);
        ck_assert_msg(conf_key_same(&c, &want, k), "[%s] %s = %s is not its default",
                      k->section, k->name, k->def);
        conf_diff(&want, &c, &d);
        ck_assert_uint_eq(d.restart_count + d.live_count, 0);
    }
}
END_TEST

/* The man page states the range and the default a row has. */
START_TEST(test_key_table_matches_the_man_page) {
    char path[4096], *text;
    const char *dir = getenv("DLOCK_SRCDIR");
    size_t n, len = 0;
    const conf_key_t *keys = conf_keys(&n);

    snprintf(path, sizeof(path), "%s/conf/dlockd.conf.5",
             dir != NULL && dir[0] != '\0' ? dir : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    text = calloc(1, 1 << 20);
    ck_assert_ptr_nonnull(text);
    len = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    ck_assert_uint_gt(len, 0);
    for (size_t i = 0; i < n; i++) {
        const conf_key_t *k = &keys[i];
        char first[128], other[128], line[512], want[128];
        /* Its item: ".BR name " or a second name on it, '", " name "'. */
        snprintf(first, sizeof(first), "\n.BR %s \"", k->name);
        snprintf(other, sizeof(other), "\", \" %s \"", k->name);
        const char *at = strstr(text, first);
        if (at == NULL) {
            at = strstr(text, other);
            while (at != NULL && at > text && at[-1] != '\n') at--;
        } else {
            at++;
        }
        ck_assert_msg(at != NULL, "%s does not describe [%s] %s", path, k->section, k->name);
        snprintf(line, sizeof(line), "%.*s", (int)strcspn(at, "\n"), at);
        if (k->type == CONF_TYPE_U32 && strstr(line, "..") != NULL) {
            snprintf(want, sizeof(want), "%u..%u", k->min, k->max);
            ck_assert_msg(strstr(line, want) != NULL, "%s says '%s', the table %s", path, line,
                          want);
        }
        if (k->def != NULL && k->def[0] != '\0' && strstr(line, "default \"") != NULL) {
            snprintf(want, sizeof(want), "default \" %s ", k->def);
            ck_assert_msg(strstr(line, want) != NULL, "%s says '%s', the table default %s",
                          path, line, k->def);
        }
    }
    free(text);
}
END_TEST

/* The shipped file names every key, at its default or commented out. */
START_TEST(test_key_table_matches_the_shipped_file) {
    char path[4096], text[16384], want[128];
    size_t n;
    const conf_key_t *keys = conf_keys(&n);

    shipped_conf_path(path, sizeof(path));
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    ck_assert_uint_lt(len, sizeof(text) - 1);
    text[len] = '\0';
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "\n%s =", keys[i].name);
        const char *at = strstr(text, want);
        snprintf(want, sizeof(want), "\n; %s =", keys[i].name);
        if (at == NULL) at = strstr(text, want);
        ck_assert_msg(at != NULL, "%s does not name [%s] %s", path, keys[i].section,
                      keys[i].name);
    }
}
END_TEST

/* A changed key lands in the diff's list for what a reload does with it. */
static const struct {
    const char *section, *name, *value;
    conf_reload_t reload;
} changes[] = {
    {"server", "socket", "/tmp/other.sock", CONF_RESTART},
    {"server", "socket_mode", "0600", CONF_RESTART},
    {"server", "socket_group", "0", CONF_RESTART},
    {"server", "metrics", "127.0.0.1:9717", CONF_RESTART},
    {"server", "max_clients", "5", CONF_LIVE},
    {"server", "admin_uids", "0 1000", CONF_LIVE},
    {"server", "log_level", "debug", CONF_LIVE},
    {"redis", "url", "redis://other:6390/1", CONF_RESTART},
    {"redis", "password", "pw", CONF_RESTART},
    {"redis", "key_prefix", "other:", CONF_RESTART},
    {"redis", "tls", "yes", CONF_RESTART},
    {"redis", "sharded_pubsub", "no", CONF_RESTART},
    {"redis", "replicas_ack", "2", CONF_RESTART},
    {"redis", "command_timeout_ms", "3000", CONF_LIVE_BACKEND},
    {"redis", "replicas_timeout_ms", "500", CONF_LIVE_BACKEND},
    {"lock", "renew_every_ms", "1000", CONF_LIVE_LOCKS},
    {"lock", "max_locks_per_client", "7", CONF_LIVE},
};

START_TEST(test_diff_classifies_changes) {
    conf_t a, b;
    conf_diff_t d;
    char err[CONF_ERR_LEN] = "";

    conf_defaults(&a);
    conf_defaults(&b);
    set_ok(&b, changes[_i].section, changes[_i].name, changes[_i].value);
    ck_assert_msg(conf_finish(&a, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(conf_finish(&b, err, sizeof(err)) == 0, "%s", err);
    conf_diff(&a, &b, &d);
    int restart = changes[_i].reload == CONF_RESTART;
    ck_assert_msg(diff_has(restart ? d.restart : d.live, restart ? d.restart_count : d.live_count,
                           changes[_i].name),
                  "%s changed, not in the diff's %s list", changes[_i].name,
                  restart ? "restart" : "live");
    ck_assert_uint_eq(d.restart_count + d.live_count, 1);
    if (!restart) ck_assert_uint_eq(d.live_kinds, 1u << changes[_i].reload);
    else ck_assert_uint_eq(d.live_kinds, 0);
}
END_TEST

/* A reload's checks across keys run on what will be in force: the file's
 * live keys with the running values of the restart-only ones. */
START_TEST(test_reload_checks_what_will_be_in_force) {
    conf_t run, next, in;
    char err[CONF_ERR_LEN];
    const char *path;

    /* replicas_ack stays the running 1 against the file's new timeouts */
    ck_assert_msg(load_text(&run, "[redis]\nreplicas_ack = 1\nreplicas_timeout_ms = 500\n",
                            &path, err) == 0, "%s", err);
    ck_assert_msg(conf_finish(&run, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(load_text(&next, "[redis]\nreplicas_ack = 0\ncommand_timeout_ms = 400\n"
                                   "replicas_timeout_ms = 1000\n", &path, err) == 0, "%s", err);
    ck_assert_msg(conf_finish(&next, err, sizeof(err)) == 0, "valid alone: %s", err);
    conf_in_force(&in, &run, &next);
    ck_assert_int_eq(in.replicas_ack, 1);
    ck_assert_uint_eq(in.command_timeout_ms, 400);
    ck_assert_uint_eq(in.replicas_timeout_ms, 1000);
    ck_assert_int_ne(conf_check_live(&in, err, sizeof(err)), 0);
    ASSERT_HAS(err, "replicas_timeout_ms (1000) must be below command_timeout_ms (400)");
    conf_in_force(&in, &next, &next);
    ck_assert_msg(conf_check_live(&in, err, sizeof(err)) == 0, "%s", err);
    conf_free(&run);
    conf_free(&next);

    /* a quorum's clock_drift_ms stays the running 50 against a lease of 90 */
    ck_assert_msg(load_text(&run, "[redis]\nquorum = redis://a redis://b redis://c\n"
                                  "clock_drift_ms = 50\n", &path, err) == 0, "%s", err);
    ck_assert_msg(conf_finish(&run, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(load_text(&next, "[redis]\nquorum = redis://a redis://b redis://c\n"
                                   "[lock]\nlease_ms = 90\n", &path, err) == 0, "%s", err);
    ck_assert_msg(conf_finish(&next, err, sizeof(err)) == 0, "valid alone: %s", err);
    conf_in_force(&in, &run, &next);
    ck_assert_uint_eq(in.lease_ms, 90);
    ck_assert_int_ne(conf_check_live(&in, err, sizeof(err)), 0);
    ASSERT_HAS(err, "clock_drift_ms (50) must be below half of lease_ms (90)");
    conf_free(&run);
    conf_free(&next);
}
END_TEST

/* One live and one restart-only key changed: each in its list; copying the
 * live ones leaves only the restart-only one different. */
START_TEST(test_diff_live_and_restart) {
    conf_t a, b;
    conf_diff_t d;

    conf_defaults(&a);
    conf_defaults(&b);
    conf_diff(&a, &a, &d);
    ck_assert_uint_eq(d.restart_count + d.live_count, 0);
    set_ok(&b, "lock", "max_waiters", "5");
    set_ok(&b, "redis", "key_prefix", "other:");
    set_ok(&b, "server", "admin_uids", "0 7 8");
    set_ok(&b, "redis", "connect_timeout_ms", "250");
    set_ok(&b, "lock", "lease_ms", "9000");
    set_ok(&b, "redis", "sentinels", "s1 s2:26380");
    set_ok(&b, "redis", "master_name", "m");
    conf_diff(&a, &b, &d);
    ck_assert_uint_eq(d.restart_count, 3);
    ck_assert_str_eq(d.restart[0]->name, "key_prefix"); /* table order */
    ck_assert_str_eq(d.restart[1]->name, "sentinels");
    ck_assert_str_eq(d.restart[2]->name, "master_name");
    ck_assert_uint_eq(d.live_count, 4);
    ck_assert_int_eq(diff_has(d.live, d.live_count, "max_waiters"), 1);
    ck_assert_int_eq(diff_has(d.live, d.live_count, "admin_uids"), 1);
    ck_assert_int_eq(diff_has(d.live, d.live_count, "connect_timeout_ms"), 1);
    ck_assert_int_eq(diff_has(d.live, d.live_count, "lease_ms"), 1);
    ck_assert_uint_eq(d.live_kinds, (1u << CONF_LIVE) | (1u << CONF_LIVE_BACKEND) |
                                        (1u << CONF_LIVE_LOCKS));

    for (size_t i = 0; i < d.live_count; i++) conf_key_copy(&a, &b, d.live[i]);
    ck_assert_uint_eq(a.max_waiters, 5);
    ck_assert_uint_eq(a.admin_uids_count, 3);
    ck_assert_uint_eq(a.admin_uids[2], 8);
    ck_assert_str_eq(a.key_prefix, "dlock:"); /* restart-only: not copied */
    conf_diff(&a, &b, &d);
    ck_assert_uint_eq(d.live_count, 0);
    ck_assert_uint_eq(d.restart_count, 3);
}
END_TEST

/* password_file reaches the daemon as password: the diff names that. */
START_TEST(test_diff_password_file_is_password) {
    conf_t a, b;
    conf_diff_t d;

    conf_defaults(&a);
    conf_defaults(&b);
    set_ok(&b, "redis", "password_file", "/etc/dlockd/pw");
    conf_diff(&a, &b, &d);
    ck_assert_uint_eq(d.restart_count + d.live_count, 0);
    set_ok(&b, "redis", "password", "pw");
    conf_diff(&a, &b, &d);
    ck_assert_uint_eq(d.restart_count, 1);
    ck_assert_str_eq(d.restart[0]->name, "password");
}
END_TEST

static Suite *conf_suite(void) {
    Suite *s = suite_create("conf");
    TCase *tc;

    tc = tcase_create("defaults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_shipped_file_loads);
    tcase_add_test(tc, test_shipped_file_states_the_defaults);
    suite_add_tcase(s, tc);

    tc = tcase_create("keys");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_every_key_read_back);
    tcase_add_test(tc, test_sentinel_keys);
    tcase_add_test(tc, test_replicas_ack_values);
    tcase_add_test(tc, test_sentinel_errors_name_the_line);
    tcase_add_test(tc, test_empty_sentinels_allow_url);
    tcase_add_test(tc, test_metrics_addresses);
    tcase_add_test(tc, test_crlf_file);
    tcase_add_test(tc, test_log_levels);
    tcase_add_test(tc, test_socket_mode_octal);
    tcase_add_test(tc, test_socket_path_limits);
    tcase_add_test(tc, test_key_prefix_rules);
    tcase_add_test(tc, test_empty_credential_keys_keep_url);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_unknown_section);
    tcase_add_test(tc, test_unknown_key);
    tcase_add_test(tc, test_key_outside_section);
    tcase_add_test(tc, test_malformed_numbers);
    tcase_add_loop_test(tc, test_number_range, 0, (int)ARRAY_LEN(ranges));
    tcase_add_test(tc, test_bad_socket_mode_in_file);
    tcase_add_test(tc, test_bad_log_level);
    tcase_add_test(tc, test_bad_urls_in_file);
    tcase_add_test(tc, test_syntax_error_line);
    tcase_add_test(tc, test_first_error_is_reported);
    tcase_add_test(tc, test_error_line_counts_comments_and_blanks);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_directory_is_not_a_config_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("redis_url");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_url_host_only);
    tcase_add_test(tc, test_url_port_and_db);
    tcase_add_test(tc, test_url_credentials_decoded);
    tcase_add_test(tc, test_url_credentials_from_file);
    tcase_add_test(tc, test_url_ipv6);
    tcase_add_test(tc, test_url_unix);
    tcase_add_test(tc, test_tls_defaults_off);
    tcase_add_test(tc, test_tls_rediss_url_turns_it_on);
    tcase_add_test(tc, test_tls_keys);
    tcase_add_test(tc, test_tls_errors);
    tcase_add_test(tc, test_tls_url_errors_hide_credentials);
    tcase_add_test(tc, test_url_length_limits);
    tcase_add_test(tc, test_bad_urls_leave_conf_alone);
    tcase_add_test(tc, test_url_errors_hide_credentials);
    tcase_add_test(tc, test_indented_and_nul_lines_refused);
    tcase_add_test(tc, test_password_sources);
    tcase_add_test(tc, test_root_refuses_writable_files);
    tcase_add_test(tc, test_socket_group);
    tcase_add_test(tc, test_url_percent_escape_malformed);
    tcase_add_test(tc, test_url_percent_escape_needs_two_hex_digits);
    tcase_add_test(tc, test_credential_keys_override_url);
    suite_add_tcase(s, tc);

    tc = tcase_create("admin");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_admin_uids_list);
    tcase_add_test(tc, test_admin_uids_limit);
    tcase_add_test(tc, test_admin_uids_bad);
    tcase_add_test(tc, test_is_admin);
    suite_add_tcase(s, tc);

    tc = tcase_create("finish");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_finish_derives_renew);
    tcase_add_test(tc, test_finish_keeps_explicit_renew);
    tcase_add_test(tc, test_finish_rejects_renew_not_below_lease);
    tcase_add_test(tc, test_conf_set_overrides);
    suite_add_tcase(s, tc);

    tc = tcase_create("long_lines");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_long_comment_line_loads);
    tcase_add_test(tc, test_long_password_read_intact);
    tcase_add_test(tc, test_long_line_tail_is_not_a_key);
    tcase_add_test(tc, test_line_numbers_after_long_line);
    tcase_add_test(tc, test_cluster_keys);
    tcase_add_test(tc, test_cluster_excludes_url_and_sentinels);
    tcase_add_test(tc, test_quorum_keys);
    tcase_add_test(tc, test_quorum_refused);
    suite_add_tcase(s, tc);

    tc = tcase_create("table");
    tcase_add_test(tc, test_key_table_is_well_formed);
    tcase_add_test(tc, test_key_defaults_parse);
    tcase_add_test(tc, test_key_table_matches_the_man_page);
    tcase_add_test(tc, test_key_table_matches_the_shipped_file);
    tcase_add_loop_test(tc, test_diff_classifies_changes, 0, (int)ARRAY_LEN(changes));
    tcase_add_test(tc, test_diff_live_and_restart);
    tcase_add_test(tc, test_reload_checks_what_will_be_in_force);
    tcase_add_test(tc, test_diff_password_file_is_password);
    suite_add_tcase(s, tc);

    return s;
}

int main(void) {
    snprintf(run_dir, sizeof(run_dir), "/tmp/dlockd-test-conf-XXXXXX");
    if (mkdtemp(run_dir) == NULL) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }

    SRunner *sr = srunner_create(conf_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    remove_run_dir();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
