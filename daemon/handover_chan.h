/* Live restore: the channel between the old process and the new one: lines, frames and descriptors, with deadlines.
 * SPDX-License-Identifier: MIT
 *
 * The new process says lines (HELLO, READY, FAIL <why>); the old one
 * sends frames: a header (payload bytes, descriptors) alone, with the
 * descriptors attached (SCM_RIGHTS), then the payload, whose first record
 * names the descriptors by their numbers in the old process. Every call
 * waits at most until a deadline on chan_now_ms()'s clock, which both
 * processes share (CLOCK_MONOTONIC). */
#ifndef DLOCK_HANDOVER_CHAN_H
#define DLOCK_HANDOVER_CHAN_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/backend.h"
#include "daemon/util/buf.h"

#define HANDOVER_HELLO "HELLO"
#define HANDOVER_READY "READY"
#define HANDOVER_FAIL "FAIL "
/* Longest line on the channel. */
#define HANDOVER_LINE_MAX 512
/* How long the old process lets systemd take the new main pid in. */
#define HANDOVER_BARRIER_US 5000000ULL

typedef struct frame_hdr_s {
    uint32_t len;
    uint32_t nfds;
} frame_hdr_t;

/* CLOCK_MONOTONIC in ms. */
uint64_t chan_now_ms(void);
/* fd ready for events (POLLIN, POLLOUT) by deadline: 0, or -1. */
int chan_await(int fd, short events, uint64_t deadline);
/* One line into line (without its newline): 0, or -1 on EOF, an error or
 * the deadline. */
int chan_read_line(int fd, char *line, size_t cap, uint64_t deadline);
/* All of p written, or all of len read: 0, or -1 (fd may be non-blocking). */
int chan_write_all(int fd, const void *p, size_t len, uint64_t deadline);
int chan_read_all(int fd, void *p, size_t len, uint64_t deadline);
int chan_cloexec(int fd, int on);
int chan_nonblock(int fd);
/* The Redis nodes whose command connection is up. */
size_t chan_nodes_up(const backend_t *b);
/* A frame: payload a then b (NULL: none), with nfds descriptors (at most
 * HANDOVER_FRAME_FDS). 0, or -1. */
int chan_send_frame(int ch, const buf_t *a, const buf_t *b, const int *fds, size_t nfds,
                    uint64_t deadline);
/* A frame read: its payload (malloc'd, *len bytes) and its descriptors
 * (close-on-exec, at most HANDOVER_FRAME_FDS). 0, or -1 on EOF, an error,
 * a frame not as its header says, or the deadline. */
int chan_read_frame(int ch, char **payload, size_t *len, int *fds, size_t *nfds,
                    uint64_t deadline);

#endif
