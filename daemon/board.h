/* The live board: one self-contained HTML page (inline CSS and JS, no external assets) served at GET /.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_BOARD_H
#define DLOCK_BOARD_H

#include <stddef.h>

/* How often the page asks /locks again (ms); said in the page's script. */
#define BOARD_REFRESH_MS 1000

extern const char board_html[];
extern const size_t board_html_len;

#endif
