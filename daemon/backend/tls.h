/* TLS for Redis connections: OpenSSL driven through memory BIOs, no sockets.
 * SPDX-License-Identifier: MIT
 *
 * Pure byte pump: ciphertext read from the socket goes in with
 * tls_feed(), plaintext comes out with tls_read(); plaintext to send goes
 * in with tls_write(), ciphertext to put on the socket comes out with
 * tls_take(). resp.c owns the socket and calls these. Certificate and
 * host-name verification are on unless the context says otherwise. */
#ifndef DLOCK_TLS_H
#define DLOCK_TLS_H

#include <stddef.h>
#include <sys/types.h>

#define TLS_ERR_LEN 256

typedef struct tls_ctx_s tls_ctx_t;   /* one per configuration: an SSL_CTX */
typedef struct tls_s tls_t;           /* one per connection: an SSL */

typedef struct tls_opts_s {
    const char *ca_file;     /* NULL or "": the system's default CA store */
    const char *cert_file;   /* client certificate, NULL or "" for none */
    const char *key_file;    /* its key; required with cert_file */
    int verify;              /* 1: verify the peer's certificate and name */
} tls_opts_t;

/* NULL with a reason in err (a file missing, a key that does not match).
 * Keys protected by a passphrase are refused, never prompted for. */
tls_ctx_t *tls_ctx_new(const tls_opts_t *opts, char *err, size_t errlen);
void tls_ctx_free(tls_ctx_t *ctx);

/* A client session; server_name is sent as SNI and is the name the
 * certificate must carry (a DNS name, or an IP address literal, which is
 * not sent as SNI). NULL or "": no SNI, and only the chain is verified. */
tls_t *tls_new(tls_ctx_t *ctx, const char *server_name, char *err, size_t errlen);
void tls_free(tls_t *t);

/* Results of the calls below. */
#define TLS_OK      0    /* progress made (or nothing to do) */
#define TLS_AGAIN   1    /* needs more input from the peer */
#define TLS_ERROR  (-1)  /* failed: tls_error() says why */

/* Drives the handshake: TLS_OK once it is complete, TLS_AGAIN while it
 * needs the peer, TLS_ERROR with a reason such as "certificate verify
 * failed: unable to get local issuer certificate" or "certificate verify
 * failed: hostname mismatch". Send what tls_take() gives after each call. */
int tls_handshake(tls_t *t);
/* Ciphertext from the peer. TLS_OK or TLS_ERROR (no memory). */
int tls_feed(tls_t *t, const char *data, size_t len);
/* Plaintext received: bytes written to out (> 0), 0 when none is ready
 * yet, or TLS_ERROR (the peer sent garbage or closed the session). */
ssize_t tls_read(tls_t *t, char *out, size_t cap);
/* Queues plaintext to send; TLS_OK or TLS_ERROR. */
int tls_write(tls_t *t, const char *data, size_t len);
/* Ciphertext waiting to go to the peer: up to cap bytes into out; returns
 * how many (0 when none). */
size_t tls_take(tls_t *t, char *out, size_t cap);
/* The last failure, as plain text without OpenSSL's codes (valid until
 * the next call on t). No call leaves errors on OpenSSL's error queue. */
const char *tls_error(const tls_t *t);

#endif
