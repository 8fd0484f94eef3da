/* A RESP proxy for tests: passes a daemon's commands to redis-server and the replies back, but answers SCAN itself when told to.
 * SPDX-License-Identifier: MIT
 *
 * rp_start() forks a child process (PR_SET_PDEATHSIG) that listens on a
 * Unix socket in h_dir() and opens one connection to the upstream socket
 * per connection it accepts. It frames the commands (RESP arrays) and the
 * replies, so that a reply it makes up goes back in its command's place.
 * A connection that subscribes is passed through as bytes from then on.
 * The mode is shared memory: the parent changes it at any time, and each
 * command read after that follows it. */
#ifndef DLOCK_RESPPROXY_H
#define DLOCK_RESPPROXY_H

typedef enum {
    RP_PASS = 0,        /* every command to Redis */
    RP_SCAN_ENDLESS,    /* SCAN: cursor 1 and no keys, every time */
    RP_SCAN_SLOW,       /* cursor 1 and one key, dlock:nothing (no lock:
                           LIST describes it and finds nothing), each answer
                           RP_SLOW_US late (the proxy waits: its other
                           connections too) */
    RP_SCAN_HUGE        /* SCAN: "*2147483647\r\n", an array that never comes */
} rp_mode_t;

#define RP_SLOW_US 20000

/* Starts the proxy in front of the Unix socket upstream; returns the
 * proxy's socket path (static). One proxy per test. */
const char *rp_start(const char *upstream);
void rp_mode(rp_mode_t mode);
/* SCANs the proxy answered itself so far. */
long rp_scans(void);

#endif
