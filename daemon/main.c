/* dlockd: arguments, configuration, signals and the event loop's life.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <uv.h>

#include "conf/conf.h"
#include "daemon/backend/backend.h"
#include "daemon/handover.h"
#include "daemon/lock/lockmgr.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "daemon/util/timers.h"

/* Everything main owns while the loop runs. */
typedef struct daemon_s {
    uv_loop_t *loop;
    conf_t conf;
    timers_t *timers;
    backend_t *backend;
    lockmgr_t *locks;
    sessions_t *sessions;
    server_t *server;
    metrics_t *metrics;        /* NULL unless [server] metrics is set */
    uv_signal_t sigterm;
    uv_signal_t sigint;
    uv_signal_t sighup;        /* reload the configuration */
    uv_signal_t sigusr2;       /* hand everything over to a new binary */
    handover_t *handover;
    char exe[PATH_MAX];        /* this binary's path at start: SIGUSR2 runs
                                  what is there then */
    /* what the configuration is made of, for a reload */
    const char *conf_path;     /* -c, or NULL for the default path */
    const char *opt_socket;    /* -s */
    const char *opt_url;       /* -r */
    int verbose;               /* -v: debug logging whatever the file says */
    int stopping;
} daemon_t;

static void usage(FILE *out) {
    fprintf(out,
        "usage: dlockd [-c FILE] [-s SOCKET] [-r REDIS_URL] [-t] [-v] [--upgrade] [--version] [-h]\n"
        "  -c FILE       configuration file (default %s)\n"
        "  -s SOCKET     Unix socket to listen on (overrides [server] socket)\n"
        "  -r REDIS_URL  Redis to use (overrides [redis] url)\n"
        "  -t            check the configuration and exit 0 or 1\n"
        "  -v            log more (debug)\n"
        "  --upgrade     hand the running dlockd on SOCKET over to the binary now\n"
        "                installed (SIGUSR2) and wait for the outcome\n"
        "  --version     print the version and exit\n"
        "  -h, --help    print this help and exit\n",
        CONF_DEFAULT_PATH);
}

/* Raises the open-file limit as far as allowed; warns if max_clients needs more. */
static void raise_nofile(const conf_t *conf) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    /* Listener, Redis connections, loop internals, stdio. */
    rlim_t need = (rlim_t)conf->max_clients + 32;
    if (rl.rlim_cur < need)
        log_warn("max_clients is %u but the open-file limit is %llu: raise LimitNOFILE "
                 "or ulimit -n, or connections past it will be refused",
                 conf->max_clients, (unsigned long long)rl.rlim_cur);
}

static void on_walk_close(uv_handle_t *handle, void *arg) {
    (void)arg;
    if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

static void on_sessions_closed(void *data) {
    daemon_t *d = data;
    sessions_free(d->sessions);
    d->sessions = NULL;
    server_free(d->server); /* the sessions' per-uid counts were its */
    d->server = NULL;
    /* The backend first: its pending callbacks still find the locks. */
    backend_close(d->backend);
    d->backend = NULL;
    lockmgr_free(d->locks);
    d->locks = NULL;
    timers_free(d->timers);
    d->timers = NULL;
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sighup, NULL);
    uv_close((uv_handle_t *)&d->sigusr2, NULL);
}

static void on_locks_released(lockmgr_t *mgr, void *data) {
    daemon_t *d = data;
    (void)mgr;
    sessions_close_all(d->sessions, on_sessions_closed, d);
}

/* The configuration as at start: the file (if there is one, or -c named
 * it), then -s and -r, then the checks across keys. *have_file says
 * whether a file was read. 0, or -1 with "where: what" in err. */
static int conf_read(const daemon_t *d, conf_t *c, int *have_file, char *err, size_t errlen) {
    char why[CONF_ERR_LEN];
    const char *path = d->conf_path ? d->conf_path : CONF_DEFAULT_PATH;
    *have_file = d->conf_path != NULL || access(path, F_OK) == 0;
    conf_defaults(c);
    if (*have_file && conf_load(c, path, err, errlen) != 0) return -1;
    if ((d->opt_socket && conf_set(c, "server", "socket", d->opt_socket, why, sizeof(why)) != 0) ||
        (d->opt_url && (conf_set(c, "redis", "sentinels", "", why, sizeof(why)) != 0 ||
                        conf_set(c, "redis", "cluster", "", why, sizeof(why)) != 0 ||
                        conf_set(c, "redis", "quorum", "", why, sizeof(why)) != 0 ||
                        conf_set(c, "redis", "master_name", "", why, sizeof(why)) != 0 ||
                        conf_set(c, "redis", "url", d->opt_url, why, sizeof(why)) != 0))) {
        snprintf(err, errlen, "command line: %.400s", why);
        return -1;
    }
    if (conf_finish(c, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%.100s%s%.400s", *have_file ? path : "", *have_file ? ": " : "", why);
        return -1;
    }
    return 0;
}

/* Appends name to the comma-separated list in out. */
static void add_name(char *out, size_t cap, const char *name) {
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s%s", len ? ", " : "", name);
}

/* Names in the log the changed keys that a reload cannot apply, one line
 * per section (the table keeps a section's keys together), by name only
 * (some are secrets). They went into sockets and connections at start, so
 * they wait for a restart. */
static void warn_restart(const conf_diff_t *diff) {
    size_t i = 0;
    while (i < diff->restart_count) {
        const char *section = diff->restart[i]->section;
        char names[512] = "";
        for (; i < diff->restart_count && strcmp(diff->restart[i]->section, section) == 0; i++)
            add_name(names, sizeof(names), diff->restart[i]->name);
        log_warn("reload: [%s] changes only with a restart (%s); the running settings stay",
                 section, names);
    }
}

/* "name old -> new" for every number a reload of this kind applies, changed
 * or not, comma-separated. */
static void describe_kind(const conf_t *c, const conf_t *n, conf_reload_t kind, char *out,
                          size_t cap) {
    size_t count;
    const conf_key_t *keys = conf_keys(&count);
    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (keys[i].reload != kind || keys[i].type != CONF_TYPE_U32) continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s %u -> %u", len ? ", " : "", keys[i].name,
                 conf_key_u32(c, &keys[i]), conf_key_u32(n, &keys[i]));
    }
}

/* SIGHUP: read the configuration again and apply what can change while
 * running (the keys conf.c's table marks live); what cannot is named in the
 * log and waits for a restart. A file with an error changes nothing, nor
 * one whose live keys fail the checks across keys against the running
 * values of the others. */
static void on_reload(uv_signal_t *handle, int signum) {
    daemon_t *d = handle->data;
    conf_t n, *c = &d->conf;
    conf_diff_t diff;
    char err[CONF_ERR_LEN], line[512];
    int have_file;
    (void)signum;

    if (d->stopping) return;
    sd_notify(0, "RELOADING=1");
    if (conf_read(d, &n, &have_file, err, sizeof(err)) != 0) {
        log_error("reload failed, the running configuration stays: %s", err);
        conf_free(&n);
        sd_notify(0, "READY=1");
        return;
    }
    if (c->quorum_count > 0 && n.lease_ms > c->rejoin_delay_ms) {
        /* A restarted node must sit out longer than any lease: the running
         * rejoin delay stays until a restart. */
        log_warn("reload: lease_ms %u is above the running rejoin_delay_ms %u (a quorum's "
                 "longest lease): lease_ms and renew_every_ms stay %u and %u until a restart",
                 n.lease_ms, c->rejoin_delay_ms, c->lease_ms, c->renew_every_ms);
        n.lease_ms = c->lease_ms;
        n.renew_every_ms = c->renew_every_ms;
    }
    /* The checks across keys passed on the file's values; they must hold
     * for what will be in force too, where the keys that change only with
     * a restart keep their running values (replicas_ack against the new
     * timeouts, clock_drift_ms against the new lease_ms). */
    conf_t in;
    conf_in_force(&in, c, &n);
    if (conf_check_live(&in, err, sizeof(err)) != 0) {
        log_error("reload failed, the running configuration stays: %s (with the running values "
                  "of the keys that change only with a restart)", err);
        conf_free(&n);
        sd_notify(0, "READY=1");
        return;
    }
    conf_diff(c, &n, &diff);
    warn_restart(&diff);
    int backend = (diff.live_kinds & (1u << CONF_LIVE_BACKEND)) != 0;
    int locks = (diff.live_kinds & (1u << CONF_LIVE_LOCKS)) != 0;
    /* The timeouts apply to what is sent from now on. */
    if (backend) {
        describe_kind(c, &n, CONF_LIVE_BACKEND, line, sizeof(line));
        log_info("reload: %s", line);
    }
    /* The lock manager reads lease_ms and renew_every_ms at each grant,
     * RENEW and renewal; each lock it holds counts from the lease Redis has
     * for it, and those the watchdog keeps are renewed with the new lease at
     * once. Locks with a lease of their own keep it. */
    if (c->lease_ms != n.lease_ms)
        log_info("reload: lease_ms %u -> %u, renew_every_ms %u -> %u: new locks get them, and "
                 "the watchdog renews the locks it keeps with the new lease now",
                 c->lease_ms, n.lease_ms, c->renew_every_ms, n.renew_every_ms);
    else if (c->renew_every_ms != n.renew_every_ms)
        log_info("reload: renew_every_ms %u -> %u: the watchdog's next renewals follow it",
                 c->renew_every_ms, n.renew_every_ms);
    /* Every other live key is read afresh at each use. */
    for (size_t i = 0; i < diff.live_count; i++) conf_key_copy(c, &n, diff.live[i]);
    /* The access rules: every connection is judged by the new ones from its
     * next request (its view notices the new generation); what is held or
     * waited for stays. */
    access_rules_t *old = c->access;
    c->access = n.access;
    n.access = old;
    log_info("reload: %zu access rule%s%s", c->access->file_rules,
             c->access->file_rules == 1 ? "" : "s",
             c->access->file_rules ? "" : " (everyone may lock every name)");
    conf_free(&n);
    if (backend) backend_reconfigure(d->backend, c);
    if (locks) lockmgr_reconfigure(d->locks);
    log_set_level(d->verbose ? CONF_LOG_DEBUG : c->log_level);
    log_info("configuration %s reloaded",
             have_file ? (d->conf_path ? d->conf_path : CONF_DEFAULT_PATH)
                       : "(built-in defaults)");
    sd_notify(0, "READY=1");
}

/* An error at start: what main made so far is left to the exit, but for
 * the configuration's rules (leak checkers would count them). */
static int stop_early(daemon_t *d) {
    conf_free(&d->conf);
    return 1;
}

/* dlockd -t: a warning about the access rules. */
static void on_access_warning(void *data, const char *msg) {
    (void)data;
    fprintf(stderr, "dlockd: warning: %s\n", msg);
}

static void on_upgrade(uv_signal_t *handle, int signum) {
    daemon_t *d = handle->data;
    (void)signum;
    if (d->stopping || d->handover == NULL) return;
    handover_start(d->handover);
}

static void on_signal(uv_signal_t *handle, int signum) {
    daemon_t *d = handle->data;
    if (d->stopping) {
        log_warn("%s again: exiting at once", strsignal(signum));
        exit(0);
    }
    d->stopping = 1;
    handover_free(d->handover); /* a hand-over in progress ends with it */
    d->handover = NULL;
    log_info("%s: releasing locks and stopping", strsignal(signum));
    sd_notify(0, "STOPPING=1");
    server_close(d->server); /* freed once the sessions are closed */
    metrics_stop(d->metrics);
    d->metrics = NULL;
    lockmgr_shutdown(d->locks, on_locks_released, d);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"version", no_argument, NULL, 'V'},
        {"upgrade", no_argument, NULL, 'U'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    daemon_t d = {0};
    const char *conf_path = NULL, *socket = NULL, *url = NULL;
    int test_only = 0, verbose = 0, upgrade = 0, opt;
    handover_in_t hin = {.channel = -1};
    int successor = handover_is_successor();
    /* A successor is sent what its predecessor was as soon as that one says
     * MAINPID= (systemd's stop, reload): held back until its handlers are
     * in place, not the default action that would kill it. */
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGHUP);
    if (successor) sigprocmask(SIG_BLOCK, &held, NULL);
    char err[CONF_ERR_LEN];

    while ((opt = getopt_long(argc, argv, "c:s:r:tvh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': conf_path = optarg; break;
        case 's': socket = optarg; break;
        case 'r': url = optarg; break;
        case 't': test_only = 1; break;
        case 'v': verbose = 1; break;
        case 'V': printf("dlockd %s\n", DLOCKD_VERSION); return 0;
        case 'U': upgrade = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dlockd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 1;
    }

    d.conf_path = conf_path;
    d.opt_socket = socket;
    d.opt_url = url;
    d.verbose = verbose;
    const char *path = conf_path ? conf_path : CONF_DEFAULT_PATH;
    int have_file;
    /* A successor says first whether it can read its predecessor's state:
     * nothing of it is touched before. */
    if (successor && handover_begin(&hin, err, sizeof(err)) != 0) handover_refuse(&hin, err);
    if (conf_read(&d, &d.conf, &have_file, err, sizeof(err)) != 0) {
        if (successor) handover_refuse(&hin, err);
        fprintf(stderr, "dlockd: %s\n", err);
        conf_free(&d.conf);
        return 1;
    }
    char advice[CONF_ERR_LEN];
    int warned = conf_warning(&d.conf, advice, sizeof(advice));
    if (upgrade) {
        int rc = handover_request(d.conf.socket);
        conf_free(&d.conf);
        return rc;
    }
    if (test_only) {
        if (warned) fprintf(stderr, "dlockd: warning: %s\n", advice);
        access_rules_check(d.conf.access, path, on_access_warning, NULL);
        printf("dlockd: configuration %s is valid\n", have_file ? path : "(built-in defaults)");
        conf_free(&d.conf);
        return 0;
    }
    log_set_level(verbose ? CONF_LOG_DEBUG : d.conf.log_level);
    if (!have_file) log_info("no %s: using built-in defaults", path);
    if (warned) log_warn("%s", advice);

    signal(SIGPIPE, SIG_IGN);
    /* They must not kill the daemon (their default). */
    signal(SIGUSR1, SIG_IGN);
    signal(SIGUSR2, SIG_IGN); /* until its handler is in place */
    raise_nofile(&d.conf);
    d.loop = uv_default_loop();

    d.timers = timers_new(d.loop);
    if (d.timers == NULL) {
        if (successor) handover_refuse(&hin, "out of memory at start");
        log_error("out of memory at start");
        return stop_early(&d);
    }
    d.backend = backend_open(d.loop, d.timers, &d.conf, successor ? hin.uuid : NULL, err,
                             sizeof(err));
    if (d.backend == NULL) {
        if (successor) handover_refuse(&hin, err);
        log_error("cannot open the redis backend: %s", err);
        return stop_early(&d);
    }
    d.locks = lockmgr_new(&d.conf, d.timers, d.backend);
    d.sessions = d.locks ? sessions_new(d.loop, &d.conf, d.locks) : NULL;
    if (d.sessions == NULL) {
        if (successor) handover_refuse(&hin, "out of memory at start");
        log_error("out of memory at start");
        return stop_early(&d);
    }
    /* A successor gets Redis as its predecessor had it, and the sockets
     * that do not change, then says HELLO: until then the predecessor
     * serves. */
    if (successor && (handover_await_backend(d.loop, d.backend, hin.nodes_up, err, sizeof(err)) != 0 ||
                      handover_head(&hin, err, sizeof(err)) != 0))
        handover_refuse(&hin, err);
    char serr[SERVER_ERR_LEN];
    d.server = successor ? server_adopt(d.loop, &d.conf, d.sessions, hin.listen_fd,
                                        hin.listen_path, serr, sizeof(serr))
                         : server_listen(d.loop, &d.conf, d.sessions, serr, sizeof(serr));
    if (d.server == NULL) {
        if (successor) handover_refuse(&hin, serr);
        log_error("cannot listen: %s", serr);
        return stop_early(&d);
    }
    if (successor && d.conf.metrics[0] == '\0' && hin.metrics_fd >= 0) close(hin.metrics_fd);
    if (d.conf.metrics[0] != '\0' &&
        (d.metrics = metrics_start(d.loop, &d.conf, d.sessions, d.locks, d.backend,
                                   successor ? hin.metrics_fd : -1, err, sizeof(err))) == NULL) {
        if (successor) handover_refuse(&hin, err);
        log_error("cannot serve metrics: %s", err);
        return stop_early(&d);
    }
    handover_parts_t parts = {
        .loop = d.loop,
        .conf = &d.conf,
        .backend = d.backend,
        .locks = d.locks,
        .sessions = d.sessions,
        .server = d.server,
        .metrics = d.metrics,
    };
    if (successor) {
        if (handover_hello(&hin, err, sizeof(err)) != 0 ||
            handover_restore(&hin, &parts, err, sizeof(err)) != 0)
            handover_refuse(&hin, err);
        /* From GO on this process is the daemon; before it, nothing it
         * did reached Redis or a client. */
        if (handover_commit(&hin) != 0) {
            log_warn("upgrade: the old process kept serving; exiting");
            fflush(NULL);
            _exit(1);
        }
    }
    /* What SIGUSR2 starts: the binary at this path, as it is then. */
    if (realpath("/proc/self/exe", d.exe) == NULL)
        snprintf(d.exe, sizeof(d.exe), "%s", argv[0]);
    d.handover = handover_new(&parts, d.exe, argv);
    if (d.handover == NULL) {
        log_error("out of memory at start");
        return stop_early(&d);
    }
    uv_signal_init(d.loop, &d.sigterm);
    uv_signal_init(d.loop, &d.sigint);
    d.sigterm.data = d.sigint.data = &d;
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_signal_init(d.loop, &d.sighup);
    d.sighup.data = &d;
    uv_signal_start(&d.sighup, on_reload, SIGHUP);
    uv_signal_init(d.loop, &d.sigusr2);
    d.sigusr2.data = &d;
    uv_signal_start(&d.sigusr2, on_upgrade, SIGUSR2);
    if (successor) {
        handover_resume(&hin, &parts);
        sigprocmask(SIG_UNBLOCK, &held, NULL); /* one held back is handled now */
    }

    /* The redis url may hold a password: the backend logs where Redis is. */
    log_info("dlockd %s %s (lease %u ms, renew every %u ms)", DLOCKD_VERSION,
             successor ? "serving what it took over" : "ready", d.conf.lease_ms,
             d.conf.renew_every_ms);
    /* A successor is the main process once its predecessor said so
     * (MAINPID=), after this: it has nothing to tell systemd yet. */
    if (!successor)
        sd_notifyf(0, "READY=1\nSTATUS=listening on %s\nMAINPID=%lu", d.conf.socket,
                   (unsigned long)getpid());

    uv_run(d.loop, UV_RUN_DEFAULT);

    /* Close whatever is left so that the loop can be closed cleanly. */
    uv_walk(d.loop, on_walk_close, NULL);
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_loop_close(d.loop);
    conf_free(&d.conf);
    log_info("stopped");
    return 0;
}
