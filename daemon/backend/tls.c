/* TLS client sessions for Redis connections: OpenSSL through two memory BIOs.
 * SPDX-License-Identifier: MIT */
#include "tls.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct tls_ctx_s {
    SSL_CTX *ctx;
    int verify;                /* peer certificate and name are checked */
};

struct tls_s {
    SSL *ssl;                  /* owns both BIOs */
    BIO *rbio;                 /* ciphertext from the peer, fed by tls_feed() */
    BIO *wbio;                 /* ciphertext to the peer, drained by tls_take() */
    int verify;
    char err[TLS_ERR_LEN];     /* the last failure, for tls_error() */
};

/* ---- errors ------------------------------------------------------------ */

/* The first error on OpenSSL's queue as plain text ("certificate verify
 * failed", not "error:0A000086:SSL routines::..."), or fallback when the
 * queue is empty. Leaves the queue empty. */
static void queued_error(char *out, size_t outlen, const char *fallback) {
    unsigned long e = ERR_get_error();
    if (e == 0) {
        snprintf(out, outlen, "%s", fallback);
    } else {
        const char *reason = ERR_reason_error_string(e);
        if (reason != NULL) {
            snprintf(out, outlen, "%s", reason);
        } else {
            char text[256];
            ERR_error_string_n(e, text, sizeof(text));
            snprintf(out, outlen, "%s", text);
        }
    }
    ERR_clear_error();
}

/* Records why an SSL_* call that returned ret failed. */
static void session_error(tls_t *t, int ret) {
    int e = SSL_get_error(t->ssl, ret);
    long v = SSL_get_verify_result(t->ssl);
    if (t->verify && v != X509_V_OK && !SSL_is_init_finished(t->ssl)) {
        snprintf(t->err, sizeof(t->err), "certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
        ERR_clear_error();
        return;
    }
    switch (e) {
    case SSL_ERROR_ZERO_RETURN:
        queued_error(t->err, sizeof(t->err), "the server closed the TLS session");
        break;
    case SSL_ERROR_SYSCALL:
        queued_error(t->err, sizeof(t->err), "unexpected end of the TLS stream");
        break;
    default:
        queued_error(t->err, sizeof(t->err), "TLS failure");
        break;
    }
}

/* ---- contexts ---------------------------------------------------------- */

/* Never prompt on a terminal for a key's passphrase: encrypted keys fail. */
static int on_passphrase(char *buf, int size, int rwflag, void *data) {
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)data;
    return 0;
}

static int is_set(const char *s) {
    return s != NULL && s[0] != '\0';
}

tls_ctx_t *tls_ctx_new(const tls_opts_t *opts, char *err, size_t errlen) {
    char why[200];
    ERR_clear_error();
    if (is_set(opts->cert_file) != is_set(opts->key_file)) {
        snprintf(err, errlen, "%s", is_set(opts->cert_file)
                                        ? "a client certificate needs its key file"
                                        : "a client key needs its certificate file");
        return NULL;
    }
    tls_ctx_t *tc = calloc(1, sizeof(*tc));
    if (tc == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    tc->verify = opts->verify;
    tc->ctx = SSL_CTX_new(TLS_client_method());
    if (tc->ctx == NULL) {
        queued_error(why, sizeof(why), "no TLS context");
        snprintf(err, errlen, "TLS context: %s", why);
        goto fail;
    }
    SSL_CTX_set_min_proto_version(tc->ctx, TLS1_2_VERSION);
    SSL_CTX_set_default_passwd_cb(tc->ctx, on_passphrase);
    if (is_set(opts->ca_file)) {
        if (SSL_CTX_load_verify_locations(tc->ctx, opts->ca_file, NULL) != 1) {
            queued_error(why, sizeof(why), "unreadable");
            snprintf(err, errlen, "CA file %s: %s", opts->ca_file, why);
            goto fail;
        }
    } else if (SSL_CTX_set_default_verify_paths(tc->ctx) != 1) {
        queued_error(why, sizeof(why), "unreadable");
        snprintf(err, errlen, "the system's CA store: %s", why);
        goto fail;
    }
    if (is_set(opts->cert_file)) {
        if (SSL_CTX_use_certificate_chain_file(tc->ctx, opts->cert_file) != 1) {
            queued_error(why, sizeof(why), "unreadable");
            snprintf(err, errlen, "certificate file %s: %s", opts->cert_file, why);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(tc->ctx, opts->key_file, SSL_FILETYPE_PEM) != 1) {
            if (ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH) {
                ERR_clear_error();
                snprintf(err, errlen, "key file %s does not match certificate %s",
                         opts->key_file, opts->cert_file);
            } else {
                queued_error(why, sizeof(why), "unreadable");
                snprintf(err, errlen, "key file %s: %s", opts->key_file, why);
            }
            goto fail;
        }
        if (SSL_CTX_check_private_key(tc->ctx) != 1) {
            ERR_clear_error();
            snprintf(err, errlen, "key file %s does not match certificate %s", opts->key_file,
                     opts->cert_file);
            goto fail;
        }
    }
    SSL_CTX_set_verify(tc->ctx, opts->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    ERR_clear_error();
    return tc;
fail:
    ERR_clear_error();
    tls_ctx_free(tc);
    return NULL;
}

void tls_ctx_free(tls_ctx_t *tc) {
    if (tc == NULL) return;
    SSL_CTX_free(tc->ctx);
    free(tc);
}

/* ---- sessions ---------------------------------------------------------- */

static int is_ip_literal(const char *name) {
    unsigned char addr[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
}

tls_t *tls_new(tls_ctx_t *tc, const char *server_name, char *err, size_t errlen) {
    char why[200];
    ERR_clear_error();
    tls_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->verify = tc->verify;
    t->ssl = SSL_new(tc->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        queued_error(why, sizeof(why), "out of memory");
        snprintf(err, errlen, "TLS session: %s", why);
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        return NULL;
    }
    /* An empty BIO means "wait for more", never end of stream. */
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    if (is_set(server_name)) {
        /* A copy: SSL_set_tlsext_host_name() casts its argument to void *. */
        char name[256];
        if (strlen(server_name) >= sizeof(name)) {
            snprintf(err, errlen, "TLS server name too long");
            tls_free(t);
            return NULL;
        }
        memcpy(name, server_name, strlen(server_name) + 1);
        int ip = is_ip_literal(name);
        int ok = 1;
        if (!ip) ok = SSL_set_tlsext_host_name(t->ssl, name) == 1;
        if (ok && t->verify) {
            SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            if (ip)
                ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), name) == 1;
            else
                ok = SSL_set1_host(t->ssl, name) == 1;
        }
        if (!ok) {
            queued_error(why, sizeof(why), "rejected");
            snprintf(err, errlen, "TLS server name %s: %s", name, why);
            tls_free(t);
            return NULL;
        }
    }
    ERR_clear_error();
    return t;
}

void tls_free(tls_t *t) {
    if (t == NULL) return;
    SSL_free(t->ssl);
    free(t);
}

int tls_handshake(tls_t *t) {
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) return TLS_OK;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return TLS_AGAIN;
    }
    session_error(t, r);
    return TLS_ERROR;
}

int tls_feed(tls_t *t, const char *data, size_t len) {
    while (len > 0) {
        int n = len > INT_MAX ? INT_MAX : (int)len;
        ERR_clear_error();
        int w = BIO_write(t->rbio, data, n);
        if (w <= 0) {
            queued_error(t->err, sizeof(t->err), "out of memory");
            return TLS_ERROR;
        }
        data += w;
        len -= (size_t)w;
    }
    return TLS_OK;
}

ssize_t tls_read(tls_t *t, char *out, size_t cap) {
    if (cap == 0) return 0;
    ERR_clear_error();
    int r = SSL_read(t->ssl, out, cap > INT_MAX ? INT_MAX : (int)cap);
    if (r > 0) return r;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return 0;
    }
    session_error(t, r);
    return TLS_ERROR;
}

int tls_write(tls_t *t, const char *data, size_t len) {
    /* A memory BIO takes everything: SSL_write never writes part. */
    while (len > 0) {
        int n = len > INT_MAX ? INT_MAX : (int)len;
        ERR_clear_error();
        int r = SSL_write(t->ssl, data, n);
        if (r <= 0) {
            session_error(t, r);
            return TLS_ERROR;
        }
        data += r;
        len -= (size_t)r;
    }
    return TLS_OK;
}

size_t tls_take(tls_t *t, char *out, size_t cap) {
    if (cap == 0) return 0;
    ERR_clear_error();
    int r = BIO_read(t->wbio, out, cap > INT_MAX ? INT_MAX : (int)cap);
    ERR_clear_error();
    return r > 0 ? (size_t)r : 0;
}

const char *tls_error(const tls_t *t) {
    return t->err;
}
