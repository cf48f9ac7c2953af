// SPDX-License-Identifier: Apache-2.0
// header_alone.cpp -- abi/wsel.h compiles with nothing before it as C++.
#include "wsel.h"

#include <type_traits>

static_assert(std::is_standard_layout<wsel_plugin>::value, "wsel_plugin");
static_assert(std::is_trivially_copyable<wsel_table>::value, "wsel_table");

// A C++ plugin defines the entry with C linkage; the header's declaration
// already says extern "C".
static int32_t select_first(void *, const wsel_request *, const wsel_table *,
                            wsel_choice *choice)
{
    choice->row = 0;
    return WSEL_OK;
}

int32_t header_alone_select(wsel_choice *choice);
int32_t header_alone_select(wsel_choice *choice)
{
    return select_first(nullptr, nullptr, nullptr, choice);
}
