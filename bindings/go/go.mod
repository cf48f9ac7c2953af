// SPDX-License-Identifier: Apache-2.0
module wsel

go 1.21
