/* One-node topologies: the table entries that only forward to the node.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/single.h"

#define SG(b) ((single_t *)(void *)(b))
#define SG_CONST(b) ((const single_t *)(const void *)(b))

void single_submit(backend_t *b, backend_op_t *op) {
    node_submit(SG(b)->node, op);
}

void single_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                  uint64_t owner, backend_watch_cb cb, void *data) {
    node_watch(SG(b)->node, name, len, mode, owner, cb, data);
}

void single_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                    uint64_t owner) {
    node_unwatch(SG(b)->node, name, len, mode, owner);
}

int single_available(const backend_t *b, const char *name, size_t len) {
    (void)name;
    (void)len;
    return node_up(SG_CONST(b)->node);
}

void single_reconfigure(backend_t *b, const conf_t *conf) {
    node_set_timeouts(SG(b)->node, conf->connect_timeout_ms, conf->command_timeout_ms,
                      conf->replicas_timeout_ms);
}

void single_nodes(const backend_t *b, backend_node_cb cb, void *data) {
    node_info(SG_CONST(b)->node, "primary", cb, data);
}

size_t single_scan_nodes(const backend_t *b, struct node_s **out, size_t cap, unsigned *need) {
    *need = 0;
    if (cap == 0) return 0;
    out[0] = SG_CONST(b)->node;
    return 1;
}
