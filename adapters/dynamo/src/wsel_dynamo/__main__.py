# SPDX-License-Identifier: Apache-2.0
"""wsel-dynamo: a Dynamo component routing with a wsel policy.

    python -m wsel_dynamo --workers pool.mocker.generate --namespace wsel \\
        --model-path DIR --model-name NAME --block-size 16 \\
        --policy /usr/lib/wsel/plugins/softmax.so --policy-config '{"temperature": 0}'

It registers NAME (token input, chat and completions) at
``<namespace>.wsel.generate``, so a Dynamo frontend discovering
``--namespace <namespace>`` sends it preprocessed requests; it routes each to
one (worker, dp_rank) of ``--workers`` with the wsel policy. With
``DYN_SYSTEM_PORT`` set, Dynamo's system server answers two routes:

    POST /engine/wsel/policy {"path": P, "config": {...}}   switch the policy
    POST /engine/wsel/status {"last": N}                    counters, decisions
    POST /engine/wsel/ranks {"token_ids": [...]}            the table, unrouted
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
from dataclasses import asdict
from typing import Any, Dict, List, Optional

import wsel

from .router import WselDynamoRouter

log = logging.getLogger("wsel_dynamo")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="wsel-dynamo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", required=True,
                   help="the engines' endpoint, namespace.component.endpoint")
    p.add_argument("--namespace", default="wsel",
                   help="namespace this component registers the model in [wsel]")
    p.add_argument("--model-path", required=True,
                   help="the model folder (tokenizer, config) the workers serve")
    p.add_argument("--model-name", default=None, help="served model name")
    p.add_argument("--block-size", type=int, required=True,
                   help="the engines' KV block size in tokens")
    p.add_argument("--policy", required=True, help="wsel plugin file (path)")
    p.add_argument("--policy-config", default=None, help="its JSON configuration")
    p.add_argument("--seed", type=int, default=0, help="wsel host seed [0]")
    p.add_argument("--discovery-backend",
                   default=os.environ.get("DYN_DISCOVERY_BACKEND", "etcd"),
                   help="Dynamo discovery: etcd, file, kubernetes, mem [$DYN_DISCOVERY_BACKEND]")
    p.add_argument("--request-plane", default=os.environ.get("DYN_REQUEST_PLANE", "tcp"))
    p.add_argument("--event-plane", default=os.environ.get("DYN_EVENT_PLANE"))
    return p.parse_args(argv)


def control_routes(runtime: Any, router: WselDynamoRouter) -> None:
    """The switch and status routes on Dynamo's system server."""

    async def policy(body: Dict[str, Any]) -> Dict[str, Any]:
        if body.get("path"):
            try:
                router.switch(str(body["path"]), body.get("config"))
            except wsel.WselError as e:
                return {"error": str(e), **router.status()}
        return router.status()

    async def status(body: Dict[str, Any]) -> Dict[str, Any]:
        return router.status(int(body.get("last", 0)))

    async def ranks(body: Dict[str, Any]) -> Dict[str, Any]:
        got = await router.ranks([int(t) for t in body.get("token_ids", ())])
        return {"ranks": [asdict(r) for r in got]}

    runtime.register_engine_route("wsel/policy", policy)
    runtime.register_engine_route("wsel/ranks", ranks)
    runtime.register_engine_route("wsel/status", status)


async def serve(args: argparse.Namespace) -> None:
    from dynamo.common.utils.token_ids import token_ids_to_list
    from dynamo.llm import (KvRouter, KvRouterConfig, ModelInput, ModelType, WorkerType,
                            register_model)
    from dynamo.runtime import DistributedRuntime

    loop = asyncio.get_running_loop()
    runtime = DistributedRuntime(loop, args.discovery_backend, args.request_plane,
                                 event_plane=args.event_plane)
    workers = runtime.endpoint(args.workers)
    kv = KvRouter(endpoint=workers, block_size=args.block_size,
                  kv_router_config=KvRouterConfig())
    host = wsel.Host(seed=args.seed)
    router = WselDynamoRouter(host, kv, args.block_size)
    router.switch(args.policy, args.policy_config)
    control_routes(runtime, router)

    async def generate(request: Dict[str, Any]):
        tokens = token_ids_to_list(request.get("token_ids")) or []
        async for out in router.generate(request, list(tokens)):
            yield out

    endpoint = runtime.endpoint(f"{args.namespace}.wsel.generate")
    await register_model(
        model_input=ModelInput.Tokens, model_type=ModelType.Chat | ModelType.Completions,
        endpoint=endpoint, model_path=args.model_path, model_name=args.model_name,
        worker_type=WorkerType.Aggregated, kv_cache_block_size=args.block_size,
        ignore_weights=True)
    log.info("wsel-dynamo: %s routes %s with %s", endpoint, args.workers,
             host.policy_name)
    await endpoint.serve_endpoint(generate, graceful_shutdown=True,
                                  metrics_labels=[("service", "wsel")])


def main(argv: Optional[List[str]] = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args(argv)
    try:
        import uvloop
        uvloop.run(serve(args))
    except ImportError:
        asyncio.run(serve(args))


if __name__ == "__main__":
    main()
