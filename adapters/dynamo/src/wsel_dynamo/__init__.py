# SPDX-License-Identifier: Apache-2.0
"""wsel-dynamo: a wsel policy, loaded by path, choosing the worker and DP
rank of each Dynamo request (docs/integrations.md, "Dynamo").

:class:`WselDynamoRouter` is the adapter (Dynamo's ``KvRouter`` in, wsel's
choice out); ``python -m wsel_dynamo`` runs it as a Dynamo component
between the frontend and the engines; :func:`ranks_from_dynamo` is the
translation of Dynamo's signals into wsel rank states.
"""
from .ranks import ranks_from_dynamo, request_share
from .router import Decision, WselDynamoRouter

__all__ = ["Decision", "WselDynamoRouter", "ranks_from_dynamo", "request_share"]
