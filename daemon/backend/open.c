/* Opens the topology the configuration names, with what every topology shares, and closes it.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/keys.h"
#include "daemon/backend/node.h"
#include "daemon/backend/tls.h"

backend_t *backend_open(uv_loop_t *loop, timers_t *timers, const conf_t *conf,
                        const char *given_uuid, char *err, size_t errlen) {
    char uuid[KEYS_UUID_LEN + 1], host[128], name[CONF_STR_MAX];
    if (given_uuid != NULL) {
        snprintf(uuid, sizeof(uuid), "%s", given_uuid);
    } else {
        uuid_t u;
        uuid_generate(u);
        uuid_unparse_lower(u, uuid);
    }
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(name, sizeof(name), "dlockd:%s:%ld", host, (long)getpid());
    /* CLIENT SETNAME takes no spaces or newlines. */
    for (char *p = name; *p; p++)
        if (*p <= ' ' || *p > '~') *p = '_';

    tls_ctx_t *tls = NULL;
    if (conf->tls) {
        tls_opts_t to = {
            .ca_file = conf->tls_ca_file,
            .cert_file = conf->tls_cert_file,
            .key_file = conf->tls_key_file,
            .verify = 1,
        };
        char why[TLS_ERR_LEN];
        tls = tls_ctx_new(&to, why, sizeof(why));
        if (tls == NULL) {
            snprintf(err, errlen, "TLS: %s", why);
            return NULL;
        }
    }
    backend_env_t env = {
        .loop = loop,
        .timers = timers,
        .conf = conf,
        .uuid = uuid,
        .client_name = name,
        .tls = tls,
    };
    backend_t *b = conf->quorum_count > 0      ? quorum_open(&env, err, errlen)
                   : conf->cluster_count > 0   ? cluster_open(&env, err, errlen)
                   : conf->sentinels_count > 0 ? sentinel_open(&env, err, errlen)
                                               : standalone_open(&env, err, errlen);
    if (b == NULL) {
        tls_ctx_free(tls);
        return NULL;
    }
    b->tls = tls;
    b->loop = loop;
    b->conf = conf;
    snprintf(b->uuid, sizeof(b->uuid), "%s", uuid);
    snprintf(b->prefix, sizeof(b->prefix), "%s", conf->key_prefix);
    return b;
}

void backend_node_opts(const backend_env_t *env, node_opts_t *out) {
    const conf_t *conf = env->conf;
    *out = (node_opts_t){
        .username = conf->username,
        .password = conf->password,
        .db = conf->redis_db,
        .key_prefix = conf->key_prefix,
        .uuid = env->uuid,
        .client_name = env->client_name,
        .connect_timeout_ms = conf->connect_timeout_ms,
        .command_timeout_ms = conf->command_timeout_ms,
        .tls = env->tls,
        .tls_server_name = conf->tls_server_name[0] ? conf->tls_server_name : NULL,
        .register_every_ms = conf->renew_every_ms,
        .replicas_ack = conf->replicas_ack,
        .replicas_timeout_ms = conf->replicas_timeout_ms,
    };
}

void backend_close(backend_t *b) {
    if (b == NULL) return;
    tls_ctx_t *tls = b->tls;
    b->type->close(b);
    tls_ctx_free(tls);
}
