/* Prometheus metrics: GET /metrics over HTTP, on TCP or a Unix socket ([server] metrics).
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_METRICS_H
#define DLOCK_METRICS_H

#include <uv.h>

#include "conf/conf.h"
#include "daemon/backend/backend.h"
#include "daemon/lock/lockmgr.h"
#include "daemon/session.h"
#include "daemon/util/buf.h"

#define METRICS_BACKLOG      64    /* listen() backlog */
#define METRICS_CONN_MAX     64    /* scrapers connected at once */
#define METRICS_IDLE_S       10    /* an idle scraper connection is closed after this */
#define METRICS_TICK_MAX_MS  1000  /* longest wait between two looks at the timeouts */

typedef struct metrics_s metrics_t;

/* Listens where conf->metrics says (which must be set) and serves scrapes
 * from the loop; fd >= 0 is a listening socket to use instead (a live
 * restore's, handed over). NULL with err on failure (the address is
 * taken, ...). */
metrics_t *metrics_start(uv_loop_t *loop, const conf_t *conf, sessions_t *sessions,
                         lockmgr_t *locks, backend_t *backend, int fd, char *err, size_t errlen);
/* The listening socket. */
int metrics_fd(const metrics_t *m);
/* Closes the socket (removing a Unix one) and every scrape in progress. */
void metrics_stop(metrics_t *m);

/* The exposition text, appended to out. 0, or -1 on no memory. */
int metrics_render(sessions_t *sessions, lockmgr_t *locks, backend_t *backend, buf_t *out);

#endif
