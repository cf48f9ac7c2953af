/* SPDX-License-Identifier: Apache-2.0 */
/* See docs/a.md, "Alpha", docs/a.md, "Bold lead" and docs/a.md, "Gamma". */
