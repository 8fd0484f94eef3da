/* dlockd: arguments, configuration, signals and the event loop's life.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
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
#include "daemon/lock/lockmgr.h"
#include "daemon/log.h"
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
    uv_signal_t sigterm;
    uv_signal_t sigint;
    int stopping;
} daemon_t;

static void usage(FILE *out) {
    fprintf(out,
        "usage: dlockd [-c FILE] [-s SOCKET] [-r REDIS_URL] [-t] [-v] [--version] [-h]\n"
        "  -c FILE       configuration file (default %s)\n"
        "  -s SOCKET     Unix socket to listen on (overrides [server] socket)\n"
        "  -r REDIS_URL  Redis to use (overrides [redis] url)\n"
        "  -t            check the configuration and exit 0 or 1\n"
        "  -v            log more (debug)\n"
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
    /* The backend first: its pending callbacks still find the locks. */
    backend_close(d->backend);
    d->backend = NULL;
    lockmgr_free(d->locks);
    d->locks = NULL;
    timers_free(d->timers);
    d->timers = NULL;
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
}

static void on_locks_released(lockmgr_t *mgr, void *data) {
    daemon_t *d = data;
    (void)mgr;
    sessions_close_all(d->sessions, on_sessions_closed, d);
}

static void on_signal(uv_signal_t *handle, int signum) {
    daemon_t *d = handle->data;
    if (d->stopping) {
        log_warn("%s again: exiting at once", strsignal(signum));
        exit(0);
    }
    d->stopping = 1;
    log_info("%s: releasing locks and stopping", strsignal(signum));
    sd_notify(0, "STOPPING=1");
    server_close(d->server);
    d->server = NULL;
    lockmgr_shutdown(d->locks, on_locks_released, d);
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    daemon_t d = {0};
    const char *conf_path = NULL, *socket = NULL, *url = NULL;
    int test_only = 0, verbose = 0, opt;
    char err[CONF_ERR_LEN];

    while ((opt = getopt_long(argc, argv, "c:s:r:tvh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': conf_path = optarg; break;
        case 's': socket = optarg; break;
        case 'r': url = optarg; break;
        case 't': test_only = 1; break;
        case 'v': verbose = 1; break;
        case 'V': printf("dlockd %s\n", DLOCKD_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dlockd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 1;
    }

    conf_defaults(&d.conf);
    const char *path = conf_path ? conf_path : CONF_DEFAULT_PATH;
    int have_file = conf_path != NULL || access(path, F_OK) == 0;
    if (have_file && conf_load(&d.conf, path, err, sizeof(err)) != 0) {
        fprintf(stderr, "dlockd: %s\n", err);
        return 1;
    }
    if ((socket && conf_set(&d.conf, "server", "socket", socket, err, sizeof(err)) != 0) ||
        (url && conf_set(&d.conf, "redis", "url", url, err, sizeof(err)) != 0)) {
        fprintf(stderr, "dlockd: command line: %s\n", err);
        return 1;
    }
    if (conf_finish(&d.conf, err, sizeof(err)) != 0) {
        fprintf(stderr, "dlockd: %s%s%s\n", have_file ? path : "", have_file ? ": " : "", err);
        return 1;
    }
    if (test_only) {
        printf("dlockd: configuration %s is valid\n", have_file ? path : "(built-in defaults)");
        return 0;
    }
    log_set_level(verbose ? CONF_LOG_DEBUG : d.conf.log_level);
    if (!have_file) log_info("no %s: using built-in defaults", path);

    signal(SIGPIPE, SIG_IGN);
    raise_nofile(&d.conf);
    d.loop = uv_default_loop();

    d.timers = timers_new(d.loop);
    if (d.timers == NULL) {
        log_error("out of memory at start");
        return 1;
    }
    d.backend = backend_open(d.loop, d.timers, &d.conf, err, sizeof(err));
    if (d.backend == NULL) {
        log_error("cannot open the redis backend: %s", err);
        return 1;
    }
    d.locks = lockmgr_new(&d.conf, d.timers, d.backend);
    d.sessions = d.locks ? sessions_new(d.loop, &d.conf, d.locks) : NULL;
    if (d.sessions == NULL) {
        log_error("out of memory at start");
        return 1;
    }
    char serr[SERVER_ERR_LEN];
    d.server = server_listen(d.loop, &d.conf, d.sessions, serr, sizeof(serr));
    if (d.server == NULL) {
        log_error("cannot listen: %s", serr);
        return 1;
    }
    uv_signal_init(d.loop, &d.sigterm);
    uv_signal_init(d.loop, &d.sigint);
    d.sigterm.data = d.sigint.data = &d;
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sigint, on_signal, SIGINT);

    /* The redis url may hold a password: the backend logs where Redis is. */
    log_info("dlockd %s ready (lease %u ms, renew every %u ms)", DLOCKD_VERSION,
             d.conf.lease_ms, d.conf.renew_every_ms);
    sd_notifyf(0, "READY=1\nSTATUS=listening on %s\nMAINPID=%lu", d.conf.socket,
               (unsigned long)getpid());

    uv_run(d.loop, UV_RUN_DEFAULT);

    /* Close whatever is left so that the loop can be closed cleanly. */
    uv_walk(d.loop, on_walk_close, NULL);
    uv_run(d.loop, UV_RUN_DEFAULT);
    uv_loop_close(d.loop);
    log_info("stopped");
    return 0;
}
