/* Live restore: the channel between the old process and the new one: lines, frames and descriptors, with deadlines.
 * SPDX-License-Identifier: MIT */
#include "handover_chan.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon/handover.h" /* HANDOVER_FRAME_FDS */

uint64_t chan_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events, at most until deadline (chan_now_ms):
 * 0, or -1. */
int chan_await(int fd, short events, uint64_t deadline) {
    for (;;) {
        uint64_t now = chan_now_ms();
        if (now >= deadline) return -1;
        struct pollfd pfd = {.fd = fd, .events = events};
        int rc = poll(&pfd, 1, (int)(deadline - now));
        if (rc < 0 && errno == EINTR) continue;
        return rc > 0 ? 0 : -1;
    }
}

/* Reads one line from fd into line (without its newline), waiting at most
 * until deadline. 0, or -1 on EOF, an error or the deadline. */
int chan_read_line(int fd, char *line, size_t cap, uint64_t deadline) {
    size_t len = 0;
    for (;;) {
        if (chan_await(fd, POLLIN, deadline) != 0) return -1;
        char c;
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return -1;
        if (c == '\n') {
            line[len] = '\0';
            return 0;
        }
        if (len + 1 < cap) line[len++] = c;
    }
}

/* Writes all of p, waiting at most until deadline (fd may be non-blocking). */
int chan_write_all(int fd, const void *p, size_t len, uint64_t deadline) {
    const char *q = p;
    while (len > 0) {
        ssize_t n = send(fd, q, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            if (chan_await(fd, POLLOUT, deadline) != 0) return -1;
            continue;
        }
        if (n <= 0) return -1;
        q += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes, waiting at most until deadline. */
int chan_read_all(int fd, void *p, size_t len, uint64_t deadline) {
    char *q = p;
    while (len > 0) {
        ssize_t n = read(fd, q, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            if (chan_await(fd, POLLIN, deadline) != 0) return -1;
            continue;
        }
        if (n <= 0) return -1;
        q += n;
        len -= (size_t)n;
    }
    return 0;
}

int chan_cloexec(int fd, int on) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFD, on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC);
}

int chan_nonblock(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void count_up(void *data, const backend_node_info_t *node) {
    if (node->up) (*(size_t *)data)++;
}

/* The Redis nodes whose command connection is up. */
size_t chan_nodes_up(const backend_t *b) {
    size_t n = 0;
    backend_nodes(b, count_up, &n);
    return n;
}

/* Sends one frame: its header with nfds descriptors, then the payload's
 * parts. 0, or -1. */
int chan_send_frame(int ch, const buf_t *a, const buf_t *b, const int *fds, size_t nfds,
                      uint64_t deadline) {
    frame_hdr_t hdr = {.len = (uint32_t)(a->len + (b ? b->len : 0)), .nfds = (uint32_t)nfds};
    union {
        char buf[CMSG_SPACE(sizeof(int) * HANDOVER_FRAME_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &hdr, .iov_len = sizeof(hdr)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    }
    /* The header goes alone, so that its descriptors arrive with it. */
    for (;;) {
        ssize_t n = sendmsg(ch, &msg, MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof(hdr)) break;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN && chan_await(ch, POLLOUT, deadline) == 0) continue;
        return -1;
    }
    if (chan_write_all(ch, buf_start(a), a->len, deadline) != 0) return -1;
    return b ? chan_write_all(ch, buf_start(b), b->len, deadline) : 0;
}

/* One frame read: its payload (malloc'd, *len bytes) and its descriptors
 * (fds, *nfds). -1 on EOF, an error or the deadline. */
int chan_read_frame(int ch, char **payload, size_t *len, int *fds, size_t *nfds,
                    uint64_t deadline) {
    frame_hdr_t hdr;
    union {
        char buf[CMSG_SPACE(sizeof(int) * HANDOVER_FRAME_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &hdr, .iov_len = sizeof(hdr)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof(u.buf)};
    *payload = NULL;
    *nfds = 0;
    ssize_t n;
    for (;;) {
        if (chan_await(ch, POLLIN, deadline) != 0) return -1;
        n = recvmsg(ch, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        break;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*nfds < HANDOVER_FRAME_FDS) fds[(*nfds)++] = fd;
            else close(fd);
        }
    }
    if (n != (ssize_t)sizeof(hdr) || (msg.msg_flags & MSG_CTRUNC) || hdr.nfds != *nfds) {
        for (size_t i = 0; i < *nfds; i++) close(fds[i]);
        *nfds = 0;
        return -1;
    }
    *len = hdr.len;
    if ((*payload = malloc(hdr.len ? hdr.len : 1)) == NULL ||
        chan_read_all(ch, *payload, hdr.len, deadline) != 0) {
        free(*payload);
        *payload = NULL;
        for (size_t i = 0; i < *nfds; i++) close(fds[i]);
        *nfds = 0;
        return -1;
    }
    return 0;
}

