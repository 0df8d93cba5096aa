"""An Azure Container Apps emulator on the testing kit's simulated fleet: the Resource Manager
routes ``azure-mgmt-appcontainers`` calls, and the app's ingress, in one ASGI app.

- Resource Manager (``api-version`` required, ``Authorization: Bearer`` checked when
  ``arm_token`` is given), under ``/subscriptions/S/resourceGroups/G/providers/Microsoft.App``:
  ``GET``/``PATCH containerApps/A`` (the PATCH is a JSON merge patch answered ``202`` with a
  ``Location`` to poll, ``202`` until the operation is done, then ``200`` with the app),
  ``GET containerApps/A/revisions`` and ``GET containerApps/A/revisions/R/replicas``. A change
  of ``properties.template`` rolls a new revision (Single revision mode: only it is active).
  Errors have ARM's shape, ``{"error": {"code", "message"}}``.
- The ingress: any other path. ``POST`` a JSON payload; the answer is the fleet's output with
  the job id in ``x-request-id``. A client that hangs up cancels the job.

``minReplicas``/``maxReplicas``/``cooldownPeriod`` drive the fleet's min/max workers and idle
timeout. Workers booting (or waiting for GPU capacity) are listed as ``NotRunning`` replicas,
the others as ``Running``. Faults apply to the ingress (route ``submit``) and Resource Manager
(``control``). The Azure SDK sends bearer tokens only over HTTPS: serve it with TLS
(``make_tls`` writes a throwaway CA and certificate; ``python -m gpubench_azure.emulator
--tls-dir DIR`` does it and prints the ``https://`` URL).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import hmac
import json
import uuid
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk.testing import (
    INSTALL_HINT,
    ASGIApp,
    FaultInjector,
    JobStatus,
    QueueFull,
    SimulatedFleet,
    fleet_lifespan,
    hold,
)

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
DEFAULT_APP = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpubench"
    "/providers/Microsoft.App/containerApps/llama"
)
_PREFIX = "/subscriptions/{sub}/resourceGroups/{group}/providers/Microsoft.App/containerApps"
_CODES = {
    400: "BadRequest",
    401: "InvalidAuthenticationToken",
    404: "ResourceNotFound",
    429: "TooManyRequests",
    500: "InternalServerError",
    503: "ServiceUnavailable",
}


def arm_error_body(status: int, message: str) -> tuple[bytes, str]:
    """ARM's error shape (azure-core reads ``error.code`` and ``error.message``)."""
    code = _CODES.get(status, "InternalServerError" if status >= 500 else "BadRequest")
    return json.dumps({"error": {"code": code, "message": message}}).encode(), "application/json"


def make_tls(directory: str | Path) -> tuple[str, str, str]:
    """A throwaway CA and a certificate for 127.0.0.1/localhost signed by it, written to
    ``directory``: returns (CA bundle, certificate chain, private key) paths. Needs trustme."""
    try:
        import trustme
    except ImportError as exc:
        raise ImportError(f"the emulator's TLS needs trustme: {INSTALL_HINT}") from exc
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = root / "ca.pem", root / "server.pem", root / "server.key"
    ca.cert_pem.write_to_path(str(paths[0]))
    cert.private_key_pem.write_to_path(str(paths[2]))
    with paths[1].open("wb") as chain:
        for blob in cert.cert_chain_pems:
            chain.write(blob.bytes())
    return str(paths[0]), str(paths[1]), str(paths[2])


def make_app(
    fleet: SimulatedFleet,
    *,
    api_key: str | None = None,
    auth: str = "bearer",
    arm_token: str | None = None,
    app_id: str = DEFAULT_APP,
    location: str = "eastus",
    operation_delay_s: float = 0.0,
) -> ASGIApp:
    """The emulator app for ``fleet``. The ingress requires ``api_key`` (``auth``: ``bearer``
    or ``functions-key``) when given; Resource Manager requires ``arm_token`` when given."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError(f"the Azure Container Apps emulator: {INSTALL_HINT}") from exc

    app_name = app_id.rsplit("/", 1)[-1]
    state: dict[str, Any] = {
        "template": {
            "containers": [
                {
                    "name": "model",
                    "image": "mcr.microsoft.com/k8se/gpu-quickstart:latest",
                    "resources": {"cpu": 8.0, "memory": "56Gi"},
                }
            ],
            "scale": {"pollingInterval": 30, "rules": []},
        },
        "revisions": [],
    }
    operations: dict[str, float] = {}

    def arm_error(status: int, message: str) -> Response:
        body, ctype = arm_error_body(status, message)
        return Response(body, status_code=status, media_type=ctype)

    def now() -> str:
        return dt.datetime.now(dt.UTC).isoformat()

    def roll_revision() -> None:
        number = len(state["revisions"]) + 1
        state["revisions"].append(
            {"name": f"{app_name}--{number:02d}{uuid.uuid4().hex[:5]}", "createdTime": now()}
        )

    def scale_of_fleet() -> dict[str, Any]:
        s = fleet.scaling
        assert s.idle_timeout_s is not None
        return {
            **state["template"]["scale"],
            "minReplicas": s.min_workers,
            "maxReplicas": s.max_workers,
            "cooldownPeriod": int(s.idle_timeout_s),
        }

    def apply_scale(scale: dict[str, Any]) -> None:
        fleet.set_scaling(
            ScalingSettings(
                min_workers=scale.get("minReplicas"),
                max_workers=scale.get("maxReplicas"),
                idle_timeout_s=scale.get("cooldownPeriod"),
            )
        )

    roll_revision()

    def app_body(request: Request) -> dict[str, Any]:
        latest = state["revisions"][-1]["name"]
        template = copy.deepcopy(state["template"])
        template["scale"] = scale_of_fleet()
        host = request.url.netloc
        return {
            "id": app_id,
            "name": app_name,
            "type": "Microsoft.App/containerApps",
            "location": location,
            "properties": {
                "provisioningState": "Succeeded",
                "runningStatus": "Running",
                "workloadProfileName": "NC8as-T4",
                "latestRevisionName": latest,
                "latestReadyRevisionName": latest,
                "latestRevisionFqdn": host,
                "configuration": {
                    "activeRevisionsMode": "Single",
                    "ingress": {"fqdn": host, "external": True, "targetPort": 8080},
                },
                "template": template,
            },
        }

    def check_arm(request: Request) -> Response | None:
        if "api-version" not in request.query_params:
            return arm_error(400, "The api-version query parameter is required.")
        if arm_token is not None:
            header = request.headers.get("authorization", "")
            token = header.removeprefix("Bearer ").strip()
            if not header.startswith("Bearer ") or not hmac.compare_digest(
                token.encode(), arm_token.encode()
            ):
                return arm_error(401, "The access token is missing or invalid.")
        name = request.path_params.get("app")
        if name is not None and name.lower() != app_name.lower():
            return arm_error(
                404, f"The Resource 'Microsoft.App/containerApps/{name}' was not found."
            )
        return None

    async def container_app(request: Request) -> Response:
        if (refused := check_arm(request)) is not None:
            return refused
        if request.method == "GET":
            return JSONResponse(app_body(request))
        try:
            patch = json.loads(await request.body())
        except ValueError:
            return arm_error(400, "The request content is not valid JSON.")
        properties = patch.get("properties") if isinstance(patch, dict) else None
        template = properties.get("template") if isinstance(properties, dict) else None
        if template is not None:
            new = _merge({**copy.deepcopy(state["template"]), "scale": scale_of_fleet()}, template)
            scale = new.get("scale") or {}
            low, high = scale.get("minReplicas", 0), scale.get("maxReplicas", 10)
            if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high):
                return arm_error(400, "minReplicas must be between 0 and maxReplicas.")
            if new != {**state["template"], "scale": scale_of_fleet()}:
                apply_scale(scale)
                state["template"] = new
                roll_revision()
        operation = str(uuid.uuid4())
        operations[operation] = asyncio.get_running_loop().time() + operation_delay_s
        sub = request.path_params["sub"]
        where = (
            f"{request.base_url}subscriptions/{sub}/providers/Microsoft.App/locations/"
            f"{location}/containerappOperationResults/{operation}"
            f"?api-version={request.query_params['api-version']}"
        )
        return Response(status_code=202, headers={"Location": where})

    async def operation_result(request: Request) -> Response:
        if (refused := check_arm(request)) is not None:
            return refused
        ready_at = operations.get(request.path_params["operation"])
        if ready_at is None:
            return arm_error(404, "The operation was not found.")
        if asyncio.get_running_loop().time() < ready_at:
            return Response(status_code=202, headers={"Location": str(request.url)})
        return JSONResponse(app_body(request))

    def revision_body(index: int, revision: dict[str, Any]) -> dict[str, Any]:
        active = index == len(state["revisions"]) - 1
        counts = fleet.counts()
        return {
            "id": f"{app_id}/revisions/{revision['name']}",
            "name": revision["name"],
            "type": "Microsoft.App/containerApps/revisions",
            "properties": {
                "createdTime": revision["createdTime"],
                "active": active,
                "replicas": counts.workers if active else 0,
                "trafficWeight": 100 if active else 0,
                "healthState": "Healthy",
                "provisioningState": "Provisioned",
                "runningState": "Running" if active else "Stopped",
            },
        }

    async def revisions(request: Request) -> Response:
        if (refused := check_arm(request)) is not None:
            return refused
        listed = [revision_body(i, r) for i, r in enumerate(state["revisions"])]
        return JSONResponse({"value": listed})

    async def replicas(request: Request) -> Response:
        if (refused := check_arm(request)) is not None:
            return refused
        name = request.path_params["revision"]
        if name not in [r["name"] for r in state["revisions"]]:
            return arm_error(404, f"The revision '{name}' was not found.")
        if name != state["revisions"][-1]["name"]:
            return JSONResponse({"value": []})  # inactive: no replicas
        counts = fleet.counts()
        up = counts.idle + counts.running
        listed = [
            replica_body(name, i, running=i < up)
            for i in range(up + counts.initializing + counts.throttled)
        ]
        return JSONResponse({"value": listed})

    def replica_body(revision: str, index: int, *, running: bool) -> dict[str, Any]:
        replica = f"{revision}-{index:04d}"
        return {
            "id": f"{app_id}/revisions/{revision}/replicas/{replica}",
            "name": replica,
            "type": "Microsoft.App/containerApps/revisions/replicas",
            "properties": {
                "createdTime": now(),
                "runningState": "Running" if running else "NotRunning",
                "containers": [
                    {
                        "name": "model",
                        "ready": running,
                        "started": running,
                        "restartCount": 0,
                        "runningState": "Running" if running else "Waiting",
                    }
                ],
            },
        }

    def authorized(request: Request) -> bool:
        if api_key is None:
            return True
        if auth == "functions-key":
            given = request.headers.get("x-functions-key", "")
        else:
            header = request.headers.get("authorization", "")
            given = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        return bool(given) and hmac.compare_digest(given.encode(), api_key.encode())

    async def ingress(request: Request) -> Response:
        if request.method != "POST":
            return Response("method not allowed", status_code=405)
        if not authorized(request):  # Easy Auth answers 401 without a valid token
            return Response("You do not have permission to view this directory or page.",
                            status_code=401)  # fmt: skip
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return Response("body is not valid JSON", status_code=400)
        try:
            job = fleet.submit(payload if isinstance(payload, dict) else {"input": payload})
        except QueueFull:
            return Response("too many requests", status_code=429)
        if not await hold(request, job, fleet):  # the client went away: the replica's ends
            return Response(status_code=499)
        headers = {"x-request-id": job.id}
        if job.status is not JobStatus.COMPLETED:
            return Response(f"container error: {job.error}", status_code=500, headers=headers)
        output = list(job.stream) if job.stream else job.output
        return JSONResponse(output, headers=headers)

    app_route = _PREFIX + "/{app}"
    app = Starlette(
        routes=[
            Route(app_route, container_app, methods=["GET", "PATCH"]),
            Route(app_route + "/revisions", revisions, methods=["GET"]),
            Route(app_route + "/revisions/{revision}/replicas", replicas, methods=["GET"]),
            Route(
                "/subscriptions/{sub}/providers/Microsoft.App/locations/{location}"
                "/containerappOperationResults/{operation}",
                operation_result,
                methods=["GET"],
            ),
            Route("/{path:path}", ingress, methods=["GET", "POST"]),
        ],
        lifespan=fleet_lifespan(fleet),
    )
    return FaultInjector(app, fleet, _route, render_error=arm_error_body)


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value)
    return merged


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """Which fault route a request belongs to (see ``gpubench_sdk.testing.FaultPlan``)."""
    path: str = scope.get("path", "")
    return "control" if path.startswith("/subscriptions/") else "submit"


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_azure.emulator``."""
    from gpubench_sdk.testing import EmulatorParser, serve_forever

    parser = EmulatorParser(__doc__, port=8689, key_help="require this ingress key (env variable)")
    parser.add_argument("--tls-dir", help="write a throwaway CA (ca.pem) here and serve HTTPS")
    parser.add_argument("--app-id", default=DEFAULT_APP)
    parser.add_argument("--location", default="eastus")
    parser.add_argument("--auth", choices=["bearer", "functions-key"], default="bearer")
    parser.add_env_argument(
        "--arm-token-env", dest="arm_token", help="require this ARM bearer token (env variable)"
    )
    args = parser.parse(argv)
    app = make_app(
        args.fleet(),
        api_key=args.api_key,
        auth=args.auth,
        arm_token=args.arm_token,
        app_id=args.app_id,
        location=args.location,
    )
    tls = None
    if args.tls_dir:
        _, cert, key = make_tls(args.tls_dir)
        tls = (cert, key)
    serve_forever(app, host=args.host, port=args.port, tls=tls)


if __name__ == "__main__":
    main()
