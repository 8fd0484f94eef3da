#!/bin/sh
# Runs dlockd under valgrind memcheck for the integration harness: any
# memory error or definitely lost block makes it exit non-zero, which the
# harness reports as a failed test.
# SPDX-License-Identifier: MIT
exec valgrind --quiet --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    "${DLOCKD_REAL_BIN:-build/dlockd}" "$@"
