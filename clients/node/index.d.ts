// dlockd-client's types for ES module consumers: index.d.cts's, as index.js re-exports index.cjs.
// SPDX-License-Identifier: MIT

export * from './index.cjs';
