/* Prints the daemon's configuration key table, one row a line, for tests/docs.
 * SPDX-License-Identifier: MIT
 *
 * Each line is "section<TAB>name<TAB>default", or "section<TAB>name" alone
 * when the row has no default (NULL: unset, derived by conf_finish()). An
 * empty default ends the line with the second TAB. */
#include "conf/conf.h"

#include <stdio.h>

int main(void) {
    size_t n;
    const conf_key_t *keys = conf_keys(&n);

    for (size_t i = 0; i < n; i++) {
        if (keys[i].def == NULL) printf("%s\t%s\n", keys[i].section, keys[i].name);
        else printf("%s\t%s\t%s\n", keys[i].section, keys[i].name, keys[i].def);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
