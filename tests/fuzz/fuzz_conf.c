/* libFuzzer target for conf/: the INI loader (with the [access] rules) and the redis URL parser.
 * SPDX-License-Identifier: MIT
 *
 * The input is read as a config file named "fuzz" (through fmemopen, no
 * filesystem), then as a redis URL. On success every value must lie in the
 * range conf.c documents; on failure the error must name the input and
 * leave the URL parser's target untouched. Broken invariants trap. */
#include "conf/conf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                          \
    do {                                     \
        if (!(cond)) __builtin_trap();       \
    } while (0)

#define FUZZ_URL_MAX 512  /* bytes of input tried as a URL (over CONF_STR_MAX) */

static int terminated(const char *s, size_t cap) {
    return memchr(s, '\0', cap) != NULL;
}

static int in_range(uint32_t v, uint32_t lo, uint32_t hi) {
    return v >= lo && v <= hi;
}

/* What a successful conf_parse_redis_url leaves in c. */
static void check_redis(const conf_t *c) {
    CHECK(terminated(c->url, sizeof(c->url)) && c->url[0] != '\0');
    CHECK(terminated(c->redis_host, sizeof(c->redis_host)) && c->redis_host[0] != '\0');
    CHECK(terminated(c->username, sizeof(c->username)));
    CHECK(terminated(c->password, sizeof(c->password)));
    CHECK(c->redis_db >= 0 && c->redis_db <= 1000000);
    if (c->redis_kind == CONF_REDIS_UNIX) {
        CHECK(strncmp(c->url, "unix://", 7) == 0);
        CHECK(c->redis_host[0] == '/' && strlen(c->redis_host) <= CONF_PATH_MAX);
    } else {
        CHECK(c->redis_kind == CONF_REDIS_TCP);
        CHECK(strncmp(c->url, "redis://", 8) == 0 || strncmp(c->url, "rediss://", 9) == 0);
        CHECK(c->url_tls == (c->url[5] == 's'));
        CHECK(c->redis_port >= 1 && c->redis_port <= 65535);
    }
}

/* Every key within the range conf.c's setters accept, after conf_finish. */
static void check_conf(const conf_t *c) {
    CHECK(terminated(c->socket, sizeof(c->socket)) && c->socket[0] != '\0');
    CHECK(c->socket_mode <= 0777);
    CHECK(in_range(c->max_clients, 1, 1000000));
    CHECK(in_range(c->max_line, 64, 1048576));
    CHECK(in_range(c->max_output, 4096, 1073741824));
    CHECK(c->admin_uids_count <= CONF_ADMIN_UIDS_MAX);
    for (size_t i = 0; i < c->admin_uids_count; i++)
        CHECK(c->admin_uids[i] <= 2147483647u && conf_is_admin(c, c->admin_uids[i]));
    CHECK(c->log_level >= CONF_LOG_ERROR && c->log_level <= CONF_LOG_DEBUG);
    CHECK(strcmp(conf_log_level_name(c->log_level), "?") != 0);
    check_redis(c);
    CHECK(in_range(c->connect_timeout_ms, 1, 600000));
    CHECK(in_range(c->command_timeout_ms, 1, 600000));
    CHECK(terminated(c->key_prefix, sizeof(c->key_prefix)));
    for (const char *p = c->key_prefix; *p; p++)
        CHECK((unsigned char)*p >= 0x21 && (unsigned char)*p <= 0x7e);
    CHECK(in_range(c->lease_ms, 10, 86400000));
    CHECK(in_range(c->renew_every_ms, 1, 86400000) && c->renew_every_ms < c->lease_ms);
    CHECK(in_range(c->max_locks_per_client, 1, 1000000));
    CHECK(in_range(c->max_waiters, 1, 10000000));
    CHECK(c->password_set == 0 || c->password_set == 1);
    CHECK(c->username_set == 0 || c->username_set == 1);
    /* TLS: the key or a rediss:// url, never over a Unix socket, and a
     * client certificate only with its key. */
    CHECK(c->tls == (c->url_tls || c->tls_key == 1));
    CHECK(!(c->url_tls && c->tls_key == 0));
    CHECK(!c->tls || c->redis_kind == CONF_REDIS_TCP);
    CHECK((c->tls_cert_file[0] != '\0') == (c->tls_key_file[0] != '\0'));
    CHECK(terminated(c->tls_ca_file, sizeof(c->tls_ca_file)));
    CHECK(terminated(c->tls_server_name, sizeof(c->tls_server_name)));
}

/* The [access] rules after conf_finish: every rule well formed, every
 * glob one access_glob_check() takes, the built-in ones present, and
 * matching (with and without a view, for the globs themselves as names)
 * agreeing and never above admin; the checks of dlockd -t run. */
static void on_warning(void *data, const char *msg) {
    (void)data;
    CHECK(strncmp(msg, "fuzz:", 5) == 0);
}

static void check_access(const conf_t *c) {
    const access_rules_t *r = c->access;
    char err[ACCESS_ERR_LEN];
    CHECK(r != NULL && r->finished && r->file_rules <= ACCESS_RULES_MAX);
    CHECK(r->count >= r->file_rules + 1); /* uid 0's, at least */
    access_peer_t peer = {.uid = 1000, .gids = {1000, 0}, .ngids = 2};
    access_view_t view = {0};
    for (size_t i = 0; i < r->count; i++) {
        const access_rule_t *x = &r->rules[i];
        CHECK(x->right >= ACCESS_READ && x->right <= ACCESS_ADMIN);
        CHECK(x->who <= ACCESS_WHO_GID);
        CHECK(x->nglobs >= 1 && x->nglobs <= ACCESS_GLOBS_MAX);
        CHECK(terminated(x->principal, sizeof(x->principal)));
        CHECK(x->from != ACCESS_FROM_FILE || x->line >= 1);
        for (size_t g = 0; g < x->nglobs; g++) {
            CHECK(access_glob_check(x->globs[g], err, sizeof(err)) == 0);
            int a, b;
            const char *name = x->globs[g];
            access_right_t ra = access_decide(r, &view, &peer, name, strlen(name), &a);
            access_right_t rb = access_decide(r, NULL, &peer, name, strlen(name), &b);
            CHECK(ra == rb && ra <= ACCESS_ADMIN);
            CHECK((a < 0) == (ra == ACCESS_NONE) && (b < 0) == (rb == ACCESS_NONE));
        }
    }
    access_view_free(&view);
    access_rules_check(r, "fuzz", on_warning, NULL);
}

/* A reload from the defaults to c: each changed key in the list for what a
 * reload does with it; once the live ones are copied, only the restart-only
 * ones differ. c against itself: no change. */
static void check_diff(const conf_t *c) {
    conf_t run;
    conf_diff_t d;
    conf_diff(c, c, &d);
    CHECK(d.restart_count == 0 && d.live_count == 0 && d.live_kinds == 0);
    conf_defaults(&run);
    conf_diff(&run, c, &d);
    size_t restart = d.restart_count;
    for (size_t i = 0; i < d.restart_count; i++) CHECK(d.restart[i]->reload == CONF_RESTART);
    for (size_t i = 0; i < d.live_count; i++) {
        CHECK(d.live[i]->reload != CONF_RESTART);
        CHECK(d.live_kinds & (1u << d.live[i]->reload));
        conf_key_copy(&run, c, d.live[i]);
    }
    conf_diff(&run, c, &d);
    CHECK(d.live_count == 0 && d.restart_count == restart);
}

/* A load error reads "fuzz:<line>: ..." with a line the input has, or
 * "fuzz: cannot read the file". */
static void check_load_error(const char *err, const uint8_t *data, size_t size) {
    CHECK(err[0] != '\0' && terminated(err, CONF_ERR_LEN));
    CHECK(strncmp(err, "fuzz:", 5) == 0);
    if (err[5] == ' ') return;
    char *end;
    long line = strtol(err + 5, &end, 10);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    CHECK(end != err + 5 && *end == ':');
    CHECK(line >= 1 && (size_t)line <= lines);
}

/* conf_finish on a loaded c, and what must hold after it. */
static void fuzz_finish(conf_t *c, char *err) {
    err[0] = '\0';
    if (conf_finish(c, err, CONF_ERR_LEN) != 0) {
        /* Only these rules can fail here: reading password_file (the
         * input may name any path), the TLS rules, and the renewal period. */
        CHECK(err[0] != '\0');
        if (strncmp(err, "password_file", 13) == 0) {
            CHECK(c->password_file[0] != '\0');
            return;
        }
        if (strstr(err, "rediss://") != NULL) {
            CHECK(c->url_tls && c->tls_key == 0);
            return;
        }
        if (strncmp(err, "tls applies to TCP", 18) == 0) {
            CHECK(c->redis_kind == CONF_REDIS_UNIX);
            return;
        }
        if (strncmp(err, "tls_cert_file and tls_key_file", 30) == 0) {
            CHECK((c->tls_cert_file[0] != '\0') != (c->tls_key_file[0] != '\0'));
            return;
        }
        CHECK(strncmp(err, "renew_every_ms", 14) == 0);
        CHECK(c->renew_every_ms >= c->lease_ms);
        return;
    }
    check_conf(c);
    check_access(c);
    check_diff(c);
}

static void fuzz_load(const uint8_t *data, size_t size) {
    conf_t c;
    char err[CONF_ERR_LEN];

    /* fmemopen may refuse a zero-size buffer; an empty file is an empty stream. */
    FILE *f = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    CHECK(f != NULL);
    conf_defaults(&c);
    err[0] = '\0';
    int rc = conf_load_stream(&c, f, "fuzz", err, sizeof(err));
    fclose(f);
    if (rc != 0) {
        CHECK(rc == -1);
        check_load_error(err, data, size);
    } else {
        fuzz_finish(&c, err);
    }
    conf_free(&c);
}

static void fuzz_url(const uint8_t *data, size_t size) {
    char url[FUZZ_URL_MAX + 1];
    size_t n = size < FUZZ_URL_MAX ? size : FUZZ_URL_MAX;
    memcpy(url, data, n);
    url[n] = '\0';

    conf_t c, before;
    char err[CONF_ERR_LEN];
    conf_defaults(&c);
    memcpy(&before, &c, sizeof(c));  /* padding too, for the memcmp */
    err[0] = '\0';
    if (conf_parse_redis_url(&c, url, err, sizeof(err)) == 0) {
        check_redis(&c);
        CHECK(strcmp(c.url, url) == 0);
    } else {
        CHECK(err[0] != '\0' && terminated(err, sizeof(err)));
        CHECK(memcmp(&c, &before, sizeof(c)) == 0);  /* untouched on failure */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_load(data, size);
    fuzz_url(data, size);
    return 0;
}
