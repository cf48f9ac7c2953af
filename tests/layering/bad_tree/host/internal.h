// SPDX-License-Identifier: Apache-2.0
/* A private host header. */
