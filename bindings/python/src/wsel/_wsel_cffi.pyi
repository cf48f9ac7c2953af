# SPDX-License-Identifier: Apache-2.0
# The compiled cffi module: untyped C handles.
from typing import Any

ffi: Any
lib: Any
